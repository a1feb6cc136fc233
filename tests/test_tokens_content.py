"""Content classes: each rule on clear examples, kinds as hints, vectorised over real logs."""

from __future__ import annotations

import pandas as pd
import pytest

import ctxlab
from ctxlab.tokens.content import CLASSES, classify
from tests.conftest import DATASETS

EXAMPLES = {
    "prose": "The upstream API allows at most 87 requests per minute; above that it answers 429.",
    "code": ("def parse(rows):\n    out = []\n    for r in rows:\n        out.append(r)\n"
             "    return out"),
    "json": '{"name": "Read", "arguments": {"file_path": "/src/app.py", "limit": 40}}',
    "logs": "2026-01-12 19:59:55 INFO starting worker\n2026-01-12 19:59:56 ERROR timeout",
    "non_latin": "Claude Code 是一个跨平台的命令行工具，支持多种操作系统和编辑器。",
    "base64": "iVBORw0KGgo" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0MTIz" * 10,
    "empty": "",
}


@pytest.mark.parametrize("cls", sorted(EXAMPLES))
def test_each_class_on_a_clear_example(cls):
    assert classify(pd.Series([EXAMPLES[cls]])).tolist() == [cls]


def test_kind_hints():
    texts = pd.Series(["Wrote 3 files", 'Read({"file_path": "a.py"})', "plain words here"])
    kinds = pd.Series(["tool_result", "tool_call", "text"])
    assert classify(texts, kinds).tolist() == ["logs", "json", "prose"]


def test_bracketed_prose_is_not_json():
    assert classify(pd.Series(["[Request interrupted by user for tool use]"])).tolist() == \
        ["prose"]


def test_numbered_source_listing_is_code():
    listing = "\n".join(f"{i:>6}→    x_{i} = compute({i})" for i in range(1, 30))
    assert classify(pd.Series([listing]), pd.Series(["tool_result"])).tolist() == ["code"]


def test_every_part_of_a_dataset_gets_a_declared_class():
    f = ctxlab.load(DATASETS / "coding_session.jsonl").frame
    got = classify(f["content"], f["kind"])
    assert len(got) == len(f) and got.index.equals(f["content"].index)
    assert set(got.astype(str)) <= set(CLASSES)
    assert {"code", "logs", "json", "prose"} <= set(got.astype(str))
