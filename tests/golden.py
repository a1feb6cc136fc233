"""Golden summaries of loaded transcripts.

`check_golden(name, transcript)` compares a compact, exact summary of a transcript
(counts, per-call reported usage, events, load-report tallies, a digest of every
part) with ``tests/golden/<name>.json``. Set ``CTXLAB_UPDATE_GOLDEN=1`` to rewrite
the files after an intended change, then review the diff.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from ctxlab.schema import Transcript

GOLDEN_DIR = Path(__file__).parent / "golden"


def _ints(s: pd.Series) -> list[int | None]:
    return [None if pd.isna(v) else int(v) for v in s]


def summarize(t: Transcript) -> dict[str, Any]:
    f = t.frame
    digest = hashlib.sha256()
    for row in f[["session", "part", "role", "kind", "content", "tool_name", "tool_call_id",
                  "hidden_by", "event", "call"]].itertuples(index=False):
        digest.update(json.dumps([None if pd.isna(v) else (int(v) if isinstance(v, (int, float))
                                  and not isinstance(v, bool) else str(v)) for v in row],
                                 ensure_ascii=False).encode())
    by = (f.groupby(["role", "kind"]).size().sort_index())
    rep = t.load_report.records
    return {
        "format": t.meta.get("format"),
        "sessions": [str(s) for s in t.sessions],
        "parts": len(f),
        "parts_by_role_kind": {f"{r}/{k}": int(n) for (r, k), n in by.items()},
        "visible_parts": int(f["hidden_by"].isna().sum()),
        "turns": int(f.groupby("session")["turn"].max().sum()) if len(f) else 0,
        "calls": len(t.calls),
        "input_total": _ints(t.calls["input_total"]),
        "output_tokens": _ints(t.calls["output_tokens"]),
        "events": [{"trigger": None if pd.isna(r.trigger) else str(r.trigger),
                    "pre_tokens": None if pd.isna(r.pre_tokens) else int(r.pre_tokens)}
                   for r in t.events.itertuples()],
        "report": {f"{r}/{s}": int(n) for (r, s), n in
                   rep.groupby(["record", "status"]).size().sort_index().items()},
        "digest": digest.hexdigest(),
    }


def check_golden(name: str, t: Transcript) -> None:
    path = GOLDEN_DIR / f"{name}.json"
    got = summarize(t)
    if os.environ.get("CTXLAB_UPDATE_GOLDEN") == "1" or not path.exists():
        if os.environ.get("CI") and not path.exists():
            raise AssertionError(f"golden file {path} is missing; create it locally with "
                                 f"CTXLAB_UPDATE_GOLDEN=1 and commit it")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return
    want = json.loads(path.read_text(encoding="utf-8"))
    diffs = [k for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k)]
    assert not diffs, (f"{name}: differs from {path} in {diffs}; "
                       f"if intended, rerun with CTXLAB_UPDATE_GOLDEN=1 and review the diff")
