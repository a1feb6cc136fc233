"""A log written on Windows (CRLF line ends) or with a UTF-8 byte-order mark loads as the
same log (aider appends its history in text mode, so Windows users get CRLF files); bytes
that are not UTF-8 are read as U+FFFD and said so in the load report."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

import ctxlab
from conftest import DATASETS, REALDATA
from ctxlab.errors import LoadError

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


BAD_BYTES = {   # format -> (a log with bytes that are not UTF-8 on line 2, where it says so)
    "codex": (b'{"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": '
              b'{"id": "s"}}\n{"timestamp": "2025-01-01T00:00:01Z", "type": "response_item", '
              b'"payload": {"type": "message", "role": "user", "content": [{"type": '
              b'"input_text", "text": "caf\xe9 \xff"}]}}\n', "rollout.jsonl"),
    "aider": (b"# aider chat started at 2024-01-01 00:00:00\n#### caf\xe9 \xff  \n\nOk.\n",
              "chat.md"),
    "openai_messages": (b'[{"role": "user",\n  "content": "caf\xe9 \xff"}]', "chat.json"),
}


@pytest.mark.parametrize("fmt", sorted(BAD_BYTES))
def test_bytes_that_are_not_utf8_are_read_as_replacement_and_reported(tmp_path: Path,
                                                                      fmt: str):
    """A Latin-1 ``\\xe9`` and a stray ``\\xff`` in a line: the line is read with two
    U+FFFD in their place (it was, silently) and one skipped entry says so at its line;
    --strict stops there."""
    data, name = BAD_BYTES[fmt]
    p = tmp_path / name
    p.write_bytes(data)
    t = ctxlab.load(p, format=fmt)
    assert "caf\ufffd \ufffd" in "".join(t.frame["content"])
    sk = t.load_report.skipped
    assert sk["where"].tolist() == ["line 2 bytes"] and sk["record"].tolist() == ["bytes"]
    assert sk["reason"].iloc[0].startswith("2 byte sequences that are not UTF-8: read as U+FFFD")
    with pytest.raises(LoadError, match=rf"{name}:2 .*not UTF-8"):
        ctxlab.load(p, format=fmt, strict=True)
    assert p.read_bytes() == data
