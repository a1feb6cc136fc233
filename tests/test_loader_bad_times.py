"""A recorded time the frame cannot hold (not ISO-8601, a month 13, a year past 2262, a
number no epoch can be) is left empty and reported at its record, in every loader: never
dropped silently, and never the record's other content with it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import ctxlab
from ctxlab import datasets
from ctxlab.errors import LoadError
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog

from test_loader_codex import _line, _msg, fixture_lines
from test_loader_mini_swe_agent import trajectory_v1
from test_loader_openai_messages import conversation

BAD = ["2025-13-45T99:00:00Z", "3000-01-01T00:00:00Z", "yesterday", 1e30]


def _timestamp_rows(t: ctxlab.Transcript) -> pd.DataFrame:
    sk = t.load_report.skipped
    return sk[sk["record"] == "timestamp"].reset_index(drop=True)


@pytest.mark.parametrize("bad", BAD)
def test_claude_code_line_keeps_its_parts_and_reports_its_time(tmp_path: Path, bad):
    lines = datasets.path("coding_session_b").read_text(encoding="utf-8").splitlines()
    k = next(i for i, x in enumerate(lines) if json.loads(x).get("type") == "assistant")
    rec = json.loads(lines[k])
    rec["timestamp"] = bad
    lines[k] = json.dumps(rec)
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    good = ctxlab.load(datasets.path("coding_session_b"))
    t = ctxlab.load(p)
    assert len(t.frame) == len(good.frame) and len(t.calls) == len(good.calls)
    mine = t.frame["source"].str.endswith(f":{k + 1}")
    assert mine.any() and t.frame.loc[mine, "ts"].isna().all()
    assert good.frame.loc[mine.to_numpy(), "ts"].notna().all()
    rows = _timestamp_rows(t)
    # one entry per record: the line's parts and its call share it
    assert rows["line"].tolist() == [k + 1]
    assert rows["where"].tolist() == [f"line {k + 1} timestamp"]
    assert repr(str(bad))[:20] in rows["reason"].iloc[0]
    with pytest.raises(LoadError) as e:
        ctxlab.load(p, strict=True)
    assert f"{p}:{k + 1}" in str(e.value)


def test_codex_record_time(tmp_path: Path):
    lines = fixture_lines()
    k = next(i for i, x in enumerate(lines) if "fix the bug" in x)
    lines[k] = _line("response_item", _msg("user", "fix the bug"), ts="2025-02-30T10:00:00Z")
    p = tmp_path / "rollout.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    t = ctxlab.load(p)
    assert "fix the bug" in t.frame["content"].tolist()
    rows = _timestamp_rows(t)
    assert rows["line"].tolist() == [k + 1] and "2025-02-30" in rows["reason"].iloc[0]


def test_openai_message_time(tmp_path: Path):
    msgs = conversation()
    msgs[-1]["timestamp"] = "not a time"
    p = tmp_path / "c.json"
    p.write_text(json.dumps(msgs), encoding="utf-8")
    t = ctxlab.load(p)
    assert t.frame["content"].iloc[-1] == "Done."
    rows = _timestamp_rows(t)
    assert len(rows) == 1 and "'not a time'" in rows["reason"].iloc[0]
    assert rows["where"].iloc[0].endswith(" timestamp")


def test_mini_swe_agent_falls_back_to_the_noted_time_and_reports_only_a_lone_bad_one(
        tmp_path: Path):
    doc = trajectory_v1()
    step = doc["messages"][2]
    step["extra"]["response"]["created"] = 1e30          # no epoch can be that
    step["extra"]["timestamp"] = "2025-06-01T10:00:00Z"  # but the time is noted beside it
    p = tmp_path / "a.traj.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    t = ctxlab.load(p)
    assert t.calls["ts"].iloc[0] == pd.Timestamp("2025-06-01T10:00:00Z")
    assert _timestamp_rows(t).empty
    del step["extra"]["timestamp"]
    p.write_text(json.dumps(doc), encoding="utf-8")
    t = ctxlab.load(p)
    assert pd.isna(t.calls["ts"].iloc[0]) and len(_timestamp_rows(t)) == 1


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.one_of(
    st.none(), st.just(""), st.sampled_from(BAD),
    st.datetimes(timezones=st.just(__import__("datetime").timezone.utc)).map(
        lambda d: d.isoformat()),
    st.integers(min_value=-10**20, max_value=10**20), st.text(max_size=12)), min_size=1,
    max_size=8))
def test_every_given_time_is_parsed_or_reported(values):
    """Builder level: each part's time is in the frame, or absent as given, or its record
    has a report entry saying it was left empty."""
    log = RecordLog("/x/log.jsonl")
    b = SessionBuilder("s", log)
    b.message("user", real_user=True)
    for i, v in enumerate(values):
        b.part("text", f"p{i}", ts=v, source=log.location(line=i + 1))
    t = assemble([b], log, {"format": "test"})
    reported = set(_timestamp_rows(t)["line"].tolist())
    for i, v in enumerate(values):
        given = v is not None and v != ""
        if pd.isna(t.frame["ts"].iloc[i]):
            assert (i + 1 in reported) == given, (i, v)
        else:
            assert given and i + 1 not in reported
