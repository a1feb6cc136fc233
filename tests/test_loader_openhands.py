"""OpenHands V0 event-stream loader: real trajectories, a hand-made fixture, corruption."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.errors import LoadError
from ctxlab.loaders import openhands
from golden import check_golden
from conftest import realdata_path
from corrupt_strategies import orphan_entries, record_wheres

REAL = ["basic.json", "basic_gui_mode.json"]


def _usage(prompt: int, out: int, read: int, write: int) -> dict[str, Any]:
    return {"completion_tokens": out, "prompt_tokens": prompt, "total_tokens": prompt + out,
            "prompt_tokens_details": {"cached_tokens": read},
            "cache_creation_input_tokens": write, "cache_read_input_tokens": read}


def _response(rid: str, text: str, calls: list[tuple[str, str, dict[str, Any]]],
              usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": rid, "model": "claude-test", "usage": usage, "choices": [{"message": {
        "role": "assistant", "content": text,
        "tool_calls": [{"id": i, "type": "function",
                        "function": {"name": n, "arguments": json.dumps(a)}}
                       for i, n, a in calls]}}]}


def fixture_events() -> list[dict[str, Any]]:
    """A small trajectory: system prompt, two tool calls in one response, a text reply,
    and a condensation that forgets the first exchange and inserts a summary."""
    r1 = _response("resp-1", "Let me look.", [("t1", "execute_bash", {"command": "ls"}),
                                             ("t2", "str_replace_editor",
                                              {"command": "view", "path": "/w/a.py"})],
                   _usage(1000, 50, 0, 996))
    r2 = _response("resp-2", "All done.", [("t3", "finish", {"message": "done"})],
                   _usage(1300, 20, 996, 300))
    tcm = lambda r, i, n: {"function_name": n, "tool_call_id": i, "model_response": r,  # noqa: E731
                           "total_calls_in_response": 2}
    return [
        {"id": 0, "timestamp": "2025-01-01T00:00:00", "source": "agent", "action": "system",
         "args": {"content": "You are OpenHands.", "tools": [
             {"type": "function", "function": {"name": "execute_bash", "description": "run",
                                               "parameters": {"type": "object"}}}]}},
        {"id": 1, "timestamp": "2025-01-01T00:00:01", "source": "environment",
         "observation": "agent_state_changed", "content": "", "extras": {"agent_state": "running"}},
        {"id": 2, "timestamp": "2025-01-01T00:00:02", "source": "user", "action": "message",
         "args": {"content": "List the files.", "image_urls": None}},
        {"id": 3, "source": "agent", "action": "run", "args": {"command": "ls", "thought": "x"},
         "tool_call_metadata": tcm(r1, "t1", "execute_bash")},
        {"id": 4, "source": "agent", "observation": "run", "cause": 3, "content": "a.py",
         "extras": {"command": "ls", "metadata": {"exit_code": 0, "working_dir": "/w",
                                                  "prefix": "", "suffix": ""}},
         "tool_call_metadata": tcm(r1, "t1", "execute_bash")},
        {"id": 5, "source": "agent", "action": "read", "args": {"path": "/w/a.py"},
         "tool_call_metadata": tcm(r1, "t2", "str_replace_editor")},
        {"id": 6, "source": "agent", "observation": "read", "cause": 5, "content": "print(1)",
         "extras": {"path": "/w/a.py"}, "tool_call_metadata": tcm(r1, "t2", "str_replace_editor")},
        {"id": 7, "source": "agent", "action": "message",
         "args": {"content": "The file prints 1.", "wait_for_response": True}},
        {"id": 8, "source": "user", "action": "message", "args": {"content": "Thanks, finish."}},
        {"id": 9, "source": "agent", "action": "condensation",
         "args": {"forgotten_event_ids": [3, 4, 5, 6], "summary": "Listed files; a.py prints 1.",
                  "summary_offset": 2}},
        {"id": 10, "source": "agent", "action": "finish", "args": {"outputs": {}},
         "tool_call_metadata": tcm(r2, "t3", "finish")},
    ]


def write(tmp_path: Path, events: Any, name: str = "traj.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(events), encoding="utf-8")
    return p


def accounts_for_every_event(t: ctxlab.schema.Transcript, n: int) -> bool:
    wheres = t.load_report.records["where"].tolist()
    return sorted(wheres) == sorted(f"[{i}]" for i in range(n))


# ---- real files -------------------------------------------------------------------------
@pytest.mark.realdata
@pytest.mark.parametrize("name", REAL)
def test_golden(name: str) -> None:
    t = ctxlab.load(realdata_path(f"openhands/{name}"))
    assert t.meta["format"] == "openhands"
    check_golden(f"openhands__{Path(name).stem}", t)


@pytest.mark.realdata
def test_basic_facts() -> None:
    path = realdata_path("openhands/basic.json")
    t = ctxlab.load(path)
    c = t.calls
    assert c["call_id"].tolist() == ["chatcmpl-6814daca-5c62-431d-8c88-9dafead244f1",
                                     "chatcmpl-27cc0ad9-6b86-4f1f-9f72-d9c7ab2282f7"]
    assert c["input_total"].tolist() == [3486, 4646]
    assert c["cache_write"].tolist() == [3482, 1158]
    assert c["cache_read"].tolist() == [0, 3482]
    assert c["input_tokens"].tolist() == [4, 6]
    assert c["output_tokens"].tolist() == [1135, 177]
    # the ACI edit result the model saw is one line, not the stored diff
    res = t.frame[t.frame["kind"] == "tool_result"]
    assert res["content"].tolist() == ["File created successfully at: /workspace/game_2048.py"]
    assert res["file_path"].tolist() == ["/workspace/game_2048.py"]
    assert json.loads(res["meta"].iloc[0])["stored_content_chars"] > 3000
    assert accounts_for_every_event(t, len(json.loads(path.read_text())))


@pytest.mark.realdata
def test_gui_mode_facts() -> None:
    path = realdata_path("openhands/basic_gui_mode.json")
    t = ctxlab.load(path)
    c = t.calls
    assert len(c) == 5                      # 4 tool-call responses + the final text reply
    assert c["input_total"].tolist()[:4] == [3439, 3601, 4769, 5488]
    assert pd.isna(c["input_total"].iloc[4])
    # prompt_tokens includes cache reads and writes: what call k wrote, call k+1 reads
    for k in range(3):
        assert c["cache_read"].iloc[k + 1] == c["cache_read"].iloc[k] + c["cache_write"].iloc[k]
        assert 0 < c["input_tokens"].iloc[k + 1] < 10
    f = t.frame
    assert f["turn"].max() == 1
    calls = f[f["kind"] == "tool_call"].set_index("tool_call_id")
    results = f[f["kind"] == "tool_result"].set_index("tool_call_id")
    assert sorted(calls.index) == sorted(results.index) and len(calls) == 4
    assert (results["tool_name"] == calls.loc[results.index, "tool_name"]).all()
    first = results["content"].iloc[0]
    assert first.startswith("\n[The command completed with exit code 0.]")
    assert "[Current working directory: /workspace]" in first
    rep = t.load_report.records
    assert set(rep.loc[rep["status"] == "ignored", "record"]) == {
        "observation:agent_state_changed", "action:change_agent_state", "observation:null"}
    assert accounts_for_every_event(t, len(json.loads(path.read_text())))
    assert t.load_report.parts_made == len(f)


# ---- hand-made fixture ------------------------------------------------------------------
def test_fixture_parts_calls_and_condensation(tmp_path: Path) -> None:
    events = fixture_events()
    t = ctxlab.load(write(tmp_path, events))
    f = t.frame.sort_values("pos")
    assert t.meta["prompt_recorded"] is True
    assert f["kind"].tolist()[:2] == ["text", "tool_schema"]
    # one call per response: the two tool calls share call 0, deduplicated across 4 events
    c = t.calls
    assert c["call_id"].fillna("-").tolist() == ["resp-1", "-", "resp-2"]
    assert c["input_total"].tolist()[0] == 1000 and c["input_tokens"].tolist()[0] == 4
    tc = f[f["kind"] == "tool_call"]
    assert tc["tool_call_id"].tolist() == ["t1", "t2", "t3"]
    assert tc["call"].tolist() == [0, 0, 2]
    # wire order: both calls before both results
    order = f[f["tool_call_id"].isin(["t1", "t2"])]["kind"].tolist()
    assert order == ["tool_call", "tool_call", "tool_result", "tool_result"]
    res = f[f["kind"] == "tool_result"]
    assert res["content"].iloc[0] == "a.py\n[Current working directory: /w]\n" \
                                     "[Command finished with exit code 0]"
    assert res["file_path"].fillna("-").tolist() == ["-", "/w/a.py"]
    assert f["turn"].max() == 2
    # condensation: forgotten events' parts hidden, summary inserted after the kept
    # system prompt and first user message (summary_offset=2)
    assert len(t.events) == 1
    ev = t.events.iloc[0]
    assert ev["origin"] == "recorded"
    hidden = f[f["hidden_by"].notna()]
    assert set(hidden["tool_call_id"].dropna()) == {"t1", "t2"} and len(hidden) == 5
    summary = f[f["kind"] == "summary"]
    assert summary["content"].tolist() == ["Listed files; a.py prints 1."]
    user_pos = f[(f["role"] == "user") & (f["kind"] == "text")]["pos"].tolist()
    reply_pos = f[f["content"] == "The file prints 1."]["pos"].iloc[0]
    assert user_pos[0] < summary["pos"].iloc[0] < reply_pos
    visible = t.effective()
    assert visible["kind"].tolist() == ["text", "tool_schema", "text", "summary", "text", "text",
                                        "text", "tool_call"]
    # rewinding the recorded condensation restores the uncompacted log
    r = t.rewind_recorded()
    assert r.frame["hidden_by"].isna().all() and (r.frame["kind"] != "summary").all()
    assert accounts_for_every_event(t, len(events))


def test_observation_without_action_still_makes_the_call(tmp_path: Path) -> None:
    events = fixture_events()
    del events[3]                      # the run action is lost; its observation carries r1
    t = ctxlab.load(write(tmp_path, events))
    assert t.calls["call_id"].tolist()[0] == "resp-1"
    assert (t.frame["tool_call_id"] == "t1").sum() == 2


def test_a_record_that_fails_is_skipped_whole(tmp_path: Path) -> None:
    """An action whose args are not an object, carrying a model response not seen
    before: skipped, and none of it (the response's call and parts) kept."""
    events = fixture_events()
    events[-1]["args"] = ["outputs"]
    events[-1]["tool_call_metadata"]["tool_call_id"] = "t9"     # not in the response
    t = ctxlab.load(write(tmp_path, events))
    rep = t.load_report.records
    bad = rep[rep["where"] == f"[{len(events) - 1}]"]
    assert bad["status"].tolist() == ["skipped"] and "args is a list" in bad["reason"].iloc[0]
    assert "resp-2" not in t.calls["call_id"].dropna().tolist()
    assert "All done." not in t.frame["content"].tolist()
    assert t.load_report.parts_made == len(t.frame)


def test_sniff_does_not_claim_other_json(tmp_path: Path) -> None:
    msgs = write(tmp_path, [{"role": "user", "content": "hi"}], "msgs.json")
    assert not openhands.sniff(msgs, msgs.read_text())
    traj = write(tmp_path, fixture_events())
    assert openhands.sniff(traj, traj.read_text())


def test_strict_raises_on_truncated_file(tmp_path: Path) -> None:
    text = json.dumps(fixture_events(), indent=1)
    p = tmp_path / "cut.json"
    p.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(LoadError) as e:
        ctxlab.load(p, format="openhands", strict=True)
    assert str(p) in str(e.value) and e.value.line is not None


def test_strict_raises_on_bad_event(tmp_path: Path) -> None:
    events = fixture_events()
    events[4]["tool_call_metadata"]["model_response"] = {"id": "resp-x", "choices": []}
    p = write(tmp_path, events)
    with pytest.raises(LoadError, match=r"\[4\]"):
        ctxlab.load(p, strict=True)
    t = ctxlab.load(p)
    assert t.load_report.skipped["where"].tolist() == ["[4]"]


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_corruption_is_reported_or_raises(tmp_path_factory: pytest.TempPathFactory,
                                          data: st.DataObject) -> None:
    events = fixture_events()
    op = data.draw(st.sampled_from(["drop", "dup", "replace", "cut", "bytes", "shape"]))
    i = data.draw(st.integers(0, len(events) - 1))
    text: str
    if op == "drop":
        del events[i]
    elif op == "dup":
        events.insert(i, events[i])
    elif op == "replace":
        events[i] = data.draw(st.one_of(st.integers(), st.text(max_size=5), st.none(),
                                        st.just({"action": 3}), st.just({"observation": None})))
    elif op == "shape":
        key = data.draw(st.sampled_from(["args", "tool_call_metadata", "extras", "content"]))
        events[i][key] = data.draw(st.one_of(st.integers(), st.just([1]), st.just("x")))
    text = json.dumps(events)
    if op == "cut":
        text = text[: data.draw(st.integers(0, len(text)))]
    elif op == "bytes":
        at = data.draw(st.integers(0, len(text) - 1))
        text = text[:at] + data.draw(st.sampled_from(["\x00", "}", "\ufffd", "]["])) + text[at:]
    p = tmp_path_factory.mktemp("oh") / "traj.json"
    p.write_text(text, encoding="utf-8")
    try:
        t = ctxlab.load(p, format="openhands")
    except LoadError:
        return
    doc = json.loads(text)
    n = len(doc) if isinstance(doc, list) else len(doc.get("trajectory", []))
    # (an entry for a piece of an event, a result whose call id was garbled, sits beside it)
    assert record_wheres(t) == sorted(f"[{i}]" for i in range(n))
    assert t.load_report.parts_made == len(t.frame)


def test_surrogates_huge_counts_and_bad_times_do_not_crash(tmp_path: Path) -> None:
    events = fixture_events()
    events[3]["tool_call_metadata"]["model_response"]["usage"]["prompt_tokens"] = 1e30
    events[3]["timestamp"] = 1e20
    text = json.dumps(events).replace("List the files.", "List \\ud83d files.")
    t = ctxlab.load(_write_text(tmp_path, text))
    assert pd.isna(t.calls["input_total"].iloc[0])
    assert "List \ufffd files." in t.frame["content"].tolist()
    # the absurd count is left empty and said so (not silently), the call kept
    sk = t.load_report.skipped
    # the event's time is reported once, with its parts (its call has the same)
    assert sk["record"].tolist() == ["usage", "timestamp"]
    assert "is not a whole number from 0 to 2**53: left empty" in sk["reason"].iloc[0]
    assert sk["reason"].iloc[1].endswith("left empty (the part is kept)")


def _write_text(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "odd.json"
    p.write_text(text, encoding="utf-8")
    return p


def test_condensation_by_id_range_and_without_summary(tmp_path: Path) -> None:
    events = fixture_events()
    events[9]["args"] = {"forgotten_events_start_id": 3, "forgotten_events_end_id": 6,
                         "summary": "Listed files; a.py prints 1.", "summary_offset": 2}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    by_range = ctxlab.load(write(tmp_path / "a", events))
    by_ids = ctxlab.load(write(tmp_path / "b", fixture_events()))
    pd.testing.assert_frame_equal(by_range.frame.drop(columns="source"),
                                  by_ids.frame.drop(columns="source"))
    events[9]["args"] = {"forgotten_event_ids": [5, 6], "summary": None, "summary_offset": None}
    t = ctxlab.load(write(tmp_path, events, "nosummary.json"))
    assert (t.frame["kind"] != "summary").all()
    assert set(t.frame.loc[t.frame["hidden_by"].notna(), "tool_call_id"]) == {"t2"}


def test_condensation_with_absurd_range_stays_cheap(tmp_path: Path) -> None:
    events = fixture_events()
    events[9]["args"] = {"forgotten_events_start_id": 0, "forgotten_events_end_id": 10 ** 15}
    t = ctxlab.load(write(tmp_path, events))
    assert len(t.events) == 1 and t.frame["hidden_by"].notna().sum() > 0


def _bash_events(first_id: int, n: int, commands: list[str]) -> list[dict[str, Any]]:
    """One response per command: its run action and observation (ids from ``first_id``)."""
    out: list[dict[str, Any]] = []
    for k, cmd in enumerate(commands):
        r = _response(f"resp-{n + k}", "", [(f"t{n + k}", "execute_bash", {"command": cmd})],
                      _usage(100 * (n + k + 1), 10, 0, 0))
        tcm = {"function_name": "execute_bash", "tool_call_id": f"t{n + k}", "model_response": r,
               "total_calls_in_response": 1}
        eid = first_id + 2 * k
        out += [{"id": eid, "source": "agent", "action": "run", "args": {"command": cmd},
                 "tool_call_metadata": tcm},
                {"id": eid + 1, "source": "agent", "observation": "run", "cause": eid,
                 "content": f"OUT-{cmd}", "extras": {}, "tool_call_metadata": tcm}]
    return out


def _inputs(t: ctxlab.schema.Transcript) -> list[list[str]]:
    from ctxlab.visibility import call_input
    return [call_input(t, int(k))["content"].tolist() for k in t.calls["call"]]


def test_a_condensation_without_summary_hides_before_the_next_call(tmp_path: Path) -> None:
    """Forgetting condensers (recent, amortized) insert no part: the call right after
    still must not see what they forgot."""
    events = [{"id": 0, "source": "user", "action": "message", "args": {"content": "TASK"}},
              *_bash_events(1, 0, ["A", "B"]),
              {"id": 5, "source": "agent", "action": "condensation",
               "args": {"forgotten_event_ids": [1, 2]}},
              *_bash_events(6, 2, ["C"])]
    t = ctxlab.load(write(tmp_path, events))
    assert _inputs(t)[2] == ["TASK", 'execute_bash({"command": "B"})', "OUT-B"]
    assert float(t.events["pos"].iloc[0]) < float(t.calls["input_end_pos"].iloc[2])


def test_a_summary_without_offset_is_not_shown_and_keeps_the_earlier_one(tmp_path: Path
                                                                         ) -> None:
    """OpenHands' view shows the summary of the latest condensation holding both a summary
    and an offset: a later one without an offset shows nothing and replaces nothing."""
    events = [{"id": 0, "source": "user", "action": "message", "args": {"content": "TASK"}},
              *_bash_events(1, 0, ["A", "B"]),
              {"id": 5, "source": "agent", "action": "condensation",
               "args": {"forgotten_event_ids": [1, 2], "summary": "RAN A",
                        "summary_offset": 1}},
              *_bash_events(6, 2, ["C"]),
              {"id": 8, "source": "agent", "action": "condensation",
               "args": {"forgotten_event_ids": [3, 4], "summary": "RAN A AND B",
                        "summary_offset": None}},
              *_bash_events(9, 3, ["D"])]
    t = ctxlab.load(write(tmp_path, events))
    assert _inputs(t)[3] == ["TASK", "RAN A", 'execute_bash({"command": "C"})', "OUT-C"]
    assert "RAN A AND B" not in t.frame["content"].tolist()
    assert "summary not shown" in t.events["reason"].iloc[1]


def test_summary_offset_counts_the_recall_events_of_the_history(tmp_path: Path) -> None:
    """OpenHands' view (what summary_offset indexes) holds the recall action and
    observation the loader does not render: keep_first=3 keeps them with the task."""
    events = [{"id": 0, "source": "user", "action": "message", "args": {"content": "TASK"}},
              {"id": 1, "source": "user", "action": "recall", "args": {"query": "TASK"}},
              {"id": 2, "source": "environment", "observation": "recall", "cause": 1,
               "content": "", "extras": {}},
              {"id": 3, "source": "environment", "observation": "agent_state_changed",
               "content": "", "extras": {"agent_state": "running"}},   # not in the history
              *_bash_events(4, 0, ["A", "B", "C"]),
              {"id": 10, "source": "agent", "action": "condensation",
               "args": {"forgotten_event_ids": [4, 5, 6, 7], "summary": "SUMMARY",
                        "summary_offset": 3}},
              *_bash_events(11, 3, ["D"])]
    t = ctxlab.load(write(tmp_path, events))
    assert _inputs(t)[3] == ["TASK", "SUMMARY", 'execute_bash({"command": "C"})', "OUT-C"]
    assert accounts_for_every_event(t, len(events))


def test_a_call_that_added_no_part_keeps_what_a_later_condensation_forgot(tmp_path: Path) -> None:
    """A response with empty content and no tool call ends its input at the next
    position; a condensation after it with no summary still comes after that call."""
    r = _response("resp-m", "", [], _usage(500, 10, 0, 0))
    events = [{"id": 0, "source": "user", "action": "message", "args": {"content": "TASK"}},
              *_bash_events(1, 0, ["A", "B"]),
              {"id": 5, "source": "agent", "action": "message", "args": {"content": ""},
               "tool_call_metadata": {"function_name": "", "tool_call_id": "m",
                                      "model_response": r, "total_calls_in_response": 0}},
              {"id": 6, "source": "agent", "action": "condensation",
               "args": {"forgotten_event_ids": [1, 2]}},
              *_bash_events(7, 2, ["C"])]
    inputs = _inputs(ctxlab.load(write(tmp_path, events)))
    a = ['execute_bash({"command": "A"})', "OUT-A"]
    b = ['execute_bash({"command": "B"})', "OUT-B"]
    assert inputs[2] == ["TASK", *a, *b]            # the empty response's call: before
    assert inputs[3] == ["TASK", *b]                # the next call: after


def test_an_observation_answering_an_unknown_call_is_kept_and_reported(tmp_path: Path) -> None:
    """An observation whose tool_call_id no earlier action or response called (and that
    carries no model response to rebuild the call from): kept, unlinked, reported."""
    events = fixture_events()
    events.insert(3, {"id": 20, "source": "agent", "observation": "run", "cause": 19,
                      "content": "stale output", "extras": {},
                      "tool_call_metadata": {"function_name": "execute_bash",
                                             "tool_call_id": "t_gone"}})
    p = write(tmp_path, events)
    t = ctxlab.load(p)
    assert orphan_entries(t) == [(None, "[3] tool_result t_gone")]
    f = t.frame
    assert f.loc[f["tool_call_id"] == "t_gone", "content"].tolist() == ["stale output"]
    with pytest.raises(LoadError, match=r"\(\[3\] tool_result t_gone\): tool result for call "
                                        r"id 't_gone'"):
        ctxlab.load(p, strict=True)


def test_a_summary_offset_that_is_no_number_is_reported(tmp_path: Path) -> None:
    """A condensation whose ``summary_offset`` is no whole number (a text here) reads as no
    offset, so its summary is not shown: the report says so (it was silent)."""
    events = fixture_events()
    events[9]["args"]["summary_offset"] = "2"
    t = ctxlab.load(write(tmp_path, events))
    assert (t.frame["kind"] == "summary").sum() == 0
    sk = t.load_report.skipped
    assert sk["where"].tolist() == ["[9] summary_offset"]
    assert "summary_offset '2' is not a whole number" in sk["reason"].iloc[0]
    assert record_wheres(t) == sorted(f"[{i}]" for i in range(len(events)))
