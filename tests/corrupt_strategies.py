"""Hypothesis strategies that corrupt a valid log file, and report-accounting checks.

A corruption is one of: drop a line, duplicate a line, truncate a line, replace a few
bytes, cut the file. `corrupt` applies one to the bytes of a file.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pandas as pd
from hypothesis import strategies as st

from ctxlab.schema import Transcript

OPS = ("drop", "duplicate", "truncate", "replace", "cut")

corruptions = st.tuples(st.sampled_from(OPS), st.integers(min_value=0, max_value=10_000),
                        st.integers(min_value=0, max_value=10_000),
                        st.binary(min_size=1, max_size=8))


def corrupt(data: bytes, c: tuple[str, int, int, bytes]) -> bytes:
    """Apply one corruption ``(op, i, j, junk)`` to ``data``."""
    op, i, j, junk = c
    lines = data.split(b"\n")
    k = i % len(lines)
    if op == "drop":
        return b"\n".join(lines[:k] + lines[k + 1:])
    if op == "duplicate":
        return b"\n".join(lines[:k + 1] + lines[k:])
    if op == "truncate":
        line = lines[k]
        return b"\n".join(lines[:k] + [line[: j % (len(line) + 1)]] + lines[k + 1:])
    if op == "replace":
        at = j % (len(data) + 1)
        return data[:at] + junk + data[at + len(junk):]
    return data[: j % (len(data) + 1)]


def wheres(t: Transcript) -> Counter[str]:
    """How many report entries each record locator has."""
    return Counter(t.load_report.records["where"].astype(str))


def expected_wheres(data: bytes, *, jsonl: bool = False,
                    trailing: bool = False) -> list[str] | None:
    """Locators of the records a file must report, or None if it is not JSON at all.

    For a JSON document: every element of its top-level lists (``[j]`` or
    ``messages[j]``/``tools[j]``...); for JSONL (``jsonl=True``, or a document that
    parses up to "Extra data"): every non-blank line (``line i``). With ``trailing`` (the
    message-list loaders), a document over several lines followed by anything else is the
    document (what follows is one more report entry).
    """
    text = data.decode("utf-8", errors="replace")
    if jsonl:
        return [f"line {i}" for i, ln in enumerate(text.split("\n"), 1) if ln.strip()]
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as e:
        if e.msg != "Extra data":
            return None
        head = text[:e.pos].strip()
        if trailing and "\n" in head:
            return expected_wheres(head.encode("utf-8"))
        return [f"line {i}" for i, ln in enumerate(text.split("\n"), 1) if ln.strip()]
    if isinstance(doc, list):
        return [f"[{j}]" for j in range(len(doc))]
    if isinstance(doc, dict):
        return [f"{key}[{j}]" for key in ("messages", "tools", "history", "trajectory")
                if isinstance(doc.get(key), list) for j in range(len(doc[key]))]
    return None


def record_wheres(t: Transcript) -> list[str]:
    """The report's locators of whole records: an entry for a piece of a record (``line 18
    replacement_history[2]``, a left-out tool request, ``[6] tool_result t2``) must sit
    beside its record's own entry, and is checked so here, then left out."""
    got = t.load_report.records["where"].astype(str).tolist()

    def record(w: str) -> str:      # ``line 18`` or a JSON path (``[6]``, ``messages[3]``)
        return " ".join(w.split(" ")[:2 if w.startswith("line ") else 1])

    whole = [w for w in got if record(w) == w]
    for w in got:
        if record(w) != w:
            assert record(w) in whole, f"{w}: its record has no entry"
    return sorted(whole)


def assert_accounts(t: Transcript, expected: list[str]) -> None:
    """Each expected record has exactly one report entry; no entry is unaccounted."""
    got = wheres(t)
    missing = [w for w in expected if got[w] != 1]
    assert not missing, f"records without exactly one report entry: {missing[:5]}"
    t.validate()
    assert t.load_report.records["status"].isin(["used", "ignored", "skipped"]).all()


ORPHAN = "has no matching tool call before it"
"""What the load report says of a tool result whose call is not before it."""


def orphan_entries(t: Transcript) -> list[tuple[int | None, str]]:
    """``(line, where)`` of the report's entries for tool results without their call."""
    r = t.load_report.records
    hit = r[(r["record"] == "tool_result") & r["reason"].fillna("").str.contains(ORPHAN)]
    return [(None if pd.isna(v) else int(v), str(w)) for v, w in zip(hit["line"], hit["where"])]
