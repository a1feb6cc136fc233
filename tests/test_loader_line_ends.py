"""A log written on Windows (CRLF line ends) or with a UTF-8 byte-order mark loads as the
same log (aider appends its history in text mode, so Windows users get CRLF files)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

import ctxlab
from conftest import DATASETS, REALDATA

AIDER = REALDATA / "aider" / "chat-history.md"


def _same(a: ctxlab.Transcript, b: ctxlab.Transcript) -> None:
    cols = ["session", "part", "role", "kind", "content", "call"]
    pd.testing.assert_frame_equal(a.frame[cols], b.frame[cols])
    pd.testing.assert_frame_equal(a.calls.drop(columns="source"), b.calls.drop(columns="source"))
    assert a.load_report.records["status"].value_counts().to_dict() == \
        b.load_report.records["status"].value_counts().to_dict()


@pytest.mark.skipif(not AIDER.is_file(), reason="../shared/realdata is absent")
def test_an_aider_history_with_windows_line_ends_is_the_same_history(tmp_path: Path):
    crlf = tmp_path / "chat-history.md"
    crlf.write_bytes(AIDER.read_bytes().replace(b"\n", b"\r\n"))
    _same(ctxlab.load(crlf), ctxlab.load(AIDER))


@pytest.mark.parametrize("name", ["coding_session_b.jsonl", "openai_sessions.jsonl"])
def test_a_byte_order_mark_and_crlf_change_nothing(tmp_path: Path, name: str):
    src = DATASETS / name
    p = tmp_path / name
    p.write_bytes(b"\xef\xbb\xbf" + src.read_bytes().replace(b"\n", b"\r\n"))
    before = p.read_bytes()
    _same(ctxlab.load(p), ctxlab.load(src))
    assert p.read_bytes() == before                 # the input is never modified
    shutil.rmtree(tmp_path)
