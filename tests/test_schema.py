"""Schema: declared columns, validation reporting every problem, Transcript views."""

from __future__ import annotations

import pandas as pd
import pytest

from ctxlab.errors import SchemaError
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.schema import (CALL_COLUMNS, EVENT_COLUMNS, PART_COLUMNS, REPORT_COLUMNS,
                           empty_frame, validate)


def _compacted_transcript():
    """A session with a recorded compaction: 4 parts hidden, a summary inserted."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s1", log)
    b.message("system")
    b.part("text", "You are a coding agent.")
    b.message("user", real_user=True)
    b.part("text", "Fix the bug in parser.py")
    b.call(call_id="c0", input_total=120, output_tokens=10)
    b.message("assistant")
    b.part("tool_call", 'Read({"file_path": "parser.py"})', tool_name="Read",
           tool_call_id="t1", file_path="parser.py", call=0)
    b.message("user")
    b.part("tool_result", "def parse(): ...", tool_name="Read", tool_call_id="t1",
           file_path="parser.py")
    ev = b.event(trigger="auto", pre_tokens=500, reason="test compaction")
    b.hide(range(b.n_parts), ev)
    b.message("user")
    b.part("summary", "Summary: the user asked to fix parser.py.", event=ev)
    b.message("user", real_user=True)
    b.part("text", "Now add a test")
    b.call(call_id="c1", input_total=60, output_tokens=5)
    b.message("assistant")
    b.part("text", "Done.", call=1)
    for i in range(3):
        log.used("line", line=i + 1, parts=2)
    return assemble([b], log, {"format": "test"})


def test_columns_are_declared_with_dtype_and_doc():
    for cols in (PART_COLUMNS, CALL_COLUMNS, EVENT_COLUMNS, REPORT_COLUMNS):
        names = [c.name for c in cols]
        assert len(names) == len(set(names))
        assert all(c.doc and c.dtype for c in cols)
    assert [c.name for c in PART_COLUMNS][:8] == ["session", "part", "pos", "msg", "turn",
                                                  "role", "kind", "content"]


def test_empty_frame_is_valid():
    assert validate(empty_frame(PART_COLUMNS)) == []


def test_validate_reports_every_problem_at_once():
    f = empty_frame(PART_COLUMNS).drop(columns=["pos"])
    f["role"] = pd.Series(dtype="object")
    f["bogus"] = 1
    problems = validate(f, strict=False)
    assert any("missing column 'pos'" in p for p in problems)
    assert any("'role' has dtype object" in p for p in problems)
    assert any("undeclared column(s) ['bogus']" in p for p in problems)
    with pytest.raises(SchemaError) as err:
        validate(f)
    assert len(err.value.problems) == len(problems) >= 3


def test_validate_checks_required_values_and_vocabulary():
    t = _compacted_transcript()
    f = t.frame.copy()
    f.loc[0, "role"] = "robot"
    f.loc[1, "content"] = pd.NA
    problems = validate(f, strict=False)
    assert any("unknown value(s) ['robot']" in p for p in problems)
    assert any("'content' is required" in p for p in problems)


def test_duplicate_part_ids_are_reported():
    t = _compacted_transcript()
    f = pd.concat([t.frame, t.frame.iloc[:1]], ignore_index=True)
    assert any("duplicate (session, part)" in p for p in validate(f, strict=False))


def test_effective_view_shows_what_the_model_saw_last():
    t = _compacted_transcript()
    eff = t.effective()
    assert list(eff["kind"]) == ["summary", "text", "text"]
    assert eff["hidden_by"].isna().all()


def test_rewind_recorded_gives_the_uncompacted_log():
    t = _compacted_transcript()
    r = t.rewind_recorded()
    assert "summary" not in set(r.frame["kind"])
    assert r.frame["hidden_by"].isna().all()
    assert len(r.frame) == len(t.frame) - 1
    assert r.events.empty
    r.validate()
    # the original is untouched (frozen, never mutated)
    assert t.frame["hidden_by"].notna().sum() == 4
    assert r.rewind_recorded() is r


def test_session_selection_and_unknown_session():
    t = _compacted_transcript()
    assert len(t.session("s1").frame) == len(t.frame)
    with pytest.raises(KeyError, match="sessions: \\['s1'\\]"):
        t.session("nope")


def test_transcript_is_frozen():
    t = _compacted_transcript()
    with pytest.raises(AttributeError):
        t.frame = t.frame  # type: ignore[misc]


def test_turns_count_real_user_messages_only():
    t = _compacted_transcript()
    assert t.frame["turn"].tolist() == [0, 1, 1, 1, 1, 2, 2]
    assert t.calls["input_end_pos"].tolist() == [2.0, 6.0]


def test_load_report_counts():
    t = _compacted_transcript()
    rep = t.load_report
    assert rep.records_read == 3 and rep.parts_made == 6
    assert rep.skipped.empty
    assert "3 records: 3 used" in str(rep)


@pytest.mark.parametrize("columns", [PART_COLUMNS, CALL_COLUMNS, EVENT_COLUMNS, REPORT_COLUMNS])
def test_an_empty_frame_has_the_dtypes_of_a_coerced_one(columns):
    """An empty corpus's frames compare equal to a loaded log's with no rows (text is the
    python-backed string dtype both ways, not pandas' default)."""
    from ctxlab.schema import coerce, empty_frame

    empty = empty_frame(columns)
    made = coerce({c.name: [] for c in columns}, columns)
    assert empty.dtypes.to_dict() == made.dtypes.to_dict()
    pd.testing.assert_frame_equal(empty, made)


def test_skipped_records_come_in_line_order_within_each_file():
    """A loader may report a record on a later pass (trunc.jsonl:91, :93, :92 reached the
    command line and the report in that order)."""
    from ctxlab.schema import REPORT_COLUMNS, LoadReport, coerce

    rows = coerce({"file": ["a", "a", "b", "a", "a"], "line": [93, 91, 1, None, 92],
                   "where": ["", "", "", "file", ""], "record": ["x"] * 5,
                   "status": ["skipped", "skipped", "skipped", "skipped", "used"],
                   "parts": [0] * 5, "reason": ["r93", "r91", "b1", "whole", None]},
                  REPORT_COLUMNS)
    assert LoadReport(records=rows).skipped["reason"].tolist() == ["r91", "r93", "whole", "b1"]
