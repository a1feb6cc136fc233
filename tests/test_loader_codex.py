"""Codex CLI rollout loader: the real 0.39.0 file, a hand-made fixture with a compaction,
and corruption."""

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
from ctxlab.loaders import codex
from conftest import realdata_path
from corrupt_strategies import (corrupt, corruptions, expected_wheres, orphan_entries,
                                record_wheres)
from golden import check_golden

REAL = "codex_cli/vibecodingtracker/codex.jsonl"
# last_token_usage.input_tokens of the 19 distinct token_count events, checked by hand
REAL_INPUT_TOTALS = [5645, 5822, 6565, 7138, 9152, 11236, 13061, 13233, 13372, 15133, 16610,
                     17251, 17807, 17857, 17982, 18079, 20084, 22224, 22279]


def _line(t: str, payload: dict[str, Any], ts: str = "2025-11-20T10:00:00.000Z") -> str:
    return json.dumps({"timestamp": ts, "type": t, "payload": payload})


def _msg(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def _usage(total: int, inp: int, cached: int, out: int, reasoning: int = 0) -> dict[str, Any]:
    last = {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
            "reasoning_output_tokens": reasoning, "total_tokens": inp + out}
    return {"type": "token_count", "info": {"total_token_usage": {**last, "total_tokens": total},
                                            "last_token_usage": last,
                                            "model_context_window": 272000}}


ENV = "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"
SUMMARY = "SUMMARY: the bug in a.py is fixed."


def fixture_lines() -> list[str]:
    """cli 0.60.1 ordering: each token_count written twice, the first before the outputs;
    then a compaction with replacement_history, and an answer without a token_count."""
    return [
        _line("session_meta", {"id": "sess-1", "cli_version": "0.60.1",
                               "originator": "codex_cli_rs", "cwd": "/w", "instructions": None,
                               "base_instructions": {"text": "You are Codex."}}),       # 1
        _line("turn_context", {"cwd": "/w", "model": "gpt-5.1-codex"}),                     # 2
        _line("response_item", _msg("developer", "<permissions instructions>x")),          # 3
        _line("response_item", _msg("user", ENV)),                                          # 4
        _line("response_item", _msg("user", "fix the bug")),                                # 5
        _line("event_msg", {"type": "user_message", "message": "fix the bug"}),             # 6
        _line("event_msg", {"type": "token_count", "info": None}),                          # 7
        _line("event_msg", _usage(1100, 1000, 200, 100, 40)),                               # 8
        _line("response_item", {"type": "reasoning", "summary": [
            {"type": "summary_text", "text": "Looking at a.py"}], "content": None,
            "encrypted_content": "gAAAAB" + "x" * 94}),                                     # 9
        _line("response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                                "arguments": json.dumps({"command": ["cat", "a.py"]})}),    # 10
        _line("response_item", {"type": "function_call_output", "call_id": "c1",
                                "output": "print(1)"}),                                     # 11
        _line("turn_context", {"cwd": "/w", "model": "gpt-5.1-codex"}),                     # 12
        _line("event_msg", _usage(1100, 1000, 200, 100, 40)),                               # 13
        _line("event_msg", _usage(2400, 1250, 1000, 50)),                                   # 14
        _line("response_item", {"type": "custom_tool_call", "name": "apply_patch",
                                "call_id": "c2", "status": "completed",
                                "input": "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n"
                                         "*** End Patch"}),                                 # 15
        _line("response_item", {"type": "custom_tool_call_output", "call_id": "c2",
                                "output": "Success"}),                                      # 16
        _line("response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}),  # 17
        _line("response_item", _msg("assistant", "Done.")),                                 # 18
        _line("compacted", {"message": SUMMARY, "replacement_history": [
            _msg("user", ENV), _msg("user", "fix the bug"), _msg("user", SUMMARY)]}),      # 19
        _line("event_msg", {"type": "context_compacted"}),                                  # 20
        _line("turn_context", {"cwd": "/w", "model": "gpt-5.1-codex-max"}),                 # 21
        _line("response_item", _msg("user", "now add tests")),                              # 22
        _line("event_msg", _usage(3000, 500, 0, 100)),                                      # 23
        _line("response_item", _msg("assistant", "Added.")),                                # 24
        _line("response_item", _msg("user", "thanks")),                                     # 25
        _line("response_item", _msg("assistant", "You're welcome.")),                       # 26
        "",
        _line("mystery", {"x": 1}),                                                         # 28
    ]


def write(tmp_path: Path, lines: list[str], name: str = "rollout.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


# ---- real file ----------------------------------------------------------------------------
def test_golden() -> None:
    t = ctxlab.load(realdata_path(REAL))
    assert t.meta["format"] == "codex"
    check_golden("codex__vibecodingtracker", t)


def test_real_calls_and_usage() -> None:
    path = realdata_path(REAL)
    t = ctxlab.load(path)
    c = t.calls
    assert len(c) == 19  # MANIFEST: 19 calls
    assert c["input_total"].tolist() == REAL_INPUT_TOTALS
    # the calls add up to the cumulative totals of the last token_count
    assert int(c["input_total"].sum()) == 270530
    assert int(c["cache_read"].sum()) == 136832
    assert int(c["output_tokens"].sum()) == 12551
    assert int(c["reasoning_tokens"].sum()) == 9536
    assert (c["input_tokens"] + c["cache_read"] == c["input_total"]).all()
    assert c.loc[0, ["input_tokens", "cache_read"]].tolist() == [141, 5504]
    assert set(c["model"]) == {"aide-gpt-5"}
    assert t.meta["cli_version"] == "0.39.0" and t.meta["originator"] == "codex_vscode"
    assert t.meta["session_id"] == "01996135-afde-7911-97f0-d863511eca56"


def test_real_ordering_token_count_precedes_outputs() -> None:
    """In 0.39.0 each token_count is written once, before the call's own output items:
    call k's input is the environment context, the request and every earlier item."""
    t = ctxlab.load(realdata_path(REAL))
    f = t.frame
    assert t.calls["input_end_pos"].tolist()[:3] == [2.0, 6.0, 10.0]
    first = f[f["pos"] < 2]
    assert first["kind"].tolist() == ["text", "text"]
    assert first["content"].iloc[0].startswith("<environment_context>")
    assert first["turn"].tolist() == [0, 1]  # injected context is not a turn
    out = f[f["role"] == "assistant"]
    assert out["call"].notna().all()
    # every output part comes after its call's input boundary and before the next one's
    ends = t.calls.set_index("call")["input_end_pos"]
    assert (out["pos"] >= out["call"].map(ends)).all()
    nxt = out["call"].map(lambda k: ends.get(k + 1, float("inf")))
    assert (out["pos"] < nxt).all()
    assert f["turn"].max() == 1


def test_real_tool_linkage_and_report() -> None:
    path = realdata_path(REAL)
    t = ctxlab.load(path)
    f = t.frame
    calls = f[f["kind"] == "tool_call"]
    results = f[f["kind"] == "tool_result"]
    assert len(calls) == len(results) == 19
    assert set(calls["tool_call_id"]) == set(results["tool_call_id"])
    assert (results["role"] == "tool").all()
    by_id = calls.set_index("tool_call_id")["tool_name"]
    assert (results["tool_name"] == results["tool_call_id"].map(by_id)).all()
    rep = t.load_report.records
    assert sorted(rep["where"]) == sorted(expected_wheres(path.read_bytes(), jsonl=True))
    assert rep["status"].value_counts().to_dict() == {"used": 98, "ignored": 12}
    reasons = rep.loc[rep["record"] == "event_msg:agent_message", "reason"]
    assert set(reasons) == {"UI event: duplicates response items"}
    thinking = f[f["kind"] == "thinking"]
    assert len(thinking) == 10 and (thinking["content"] == "").all()  # empty summaries


# ---- hand-made fixture ------------------------------------------------------------------
def test_fixture_calls(tmp_path: Path) -> None:
    t = ctxlab.load(write(tmp_path, fixture_lines()))
    c = t.calls
    assert c["input_total"].tolist()[:3] == [1000, 1250, 500]
    assert c["input_tokens"].tolist()[:3] == [800, 250, 500]
    assert c["cache_read"].tolist()[:3] == [200, 1000, 0]
    assert c["reasoning_tokens"].tolist()[0] == 40
    assert c["model"].tolist() == ["gpt-5.1-codex"] * 2 + ["gpt-5.1-codex-max"] * 2
    assert pd.isna(c.loc[3, "input_total"])  # "You're welcome." had no token_count
    # parts: 0 base instructions, 1 developer, 2 env, 3 user | call 0: 4 reasoning, 5 call,
    # 6 result | call 1: 7 patch, 8 result, 9 "Done." | 10-12 inserted | 13 user | 14 ...
    assert c["input_end_pos"].tolist() == [4.0, 7.0, 14.0, 16.0]
    f = t.frame.set_index("part")
    assert f.loc[[4, 5, 7, 9, 14, 16], "call"].tolist() == [0, 0, 1, 1, 2, 3]
    assert f.loc[[6, 8], "call"].isna().all()


def test_fixture_parts(tmp_path: Path) -> None:
    t = ctxlab.load(write(tmp_path, fixture_lines()))
    f = t.frame.set_index("part")
    assert f.loc[0, ["role", "content"]].tolist() == ["system", "You are Codex."]
    assert f.loc[1, "role"] == "system" and json.loads(f.loc[1, "meta"])["role"] == "developer"
    assert f.loc[4, "kind"] == "thinking" and f.loc[4, "content"] == "Looking at a.py"
    assert json.loads(f.loc[4, "meta"])["encrypted_content_chars"] == 100
    assert f.loc[5, "content"] == 'shell({"command": ["cat", "a.py"]})'
    assert f.loc[6, ["role", "kind", "tool_name", "tool_call_id"]].tolist() == \
        ["tool", "tool_result", "shell", "c1"]
    assert f.loc[7, ["tool_name", "file_path"]].tolist() == ["apply_patch", "a.py"]
    assert f.loc[8, "file_path"] == "a.py"
    assert f.loc[[2, 3, 13, 15], "turn"].tolist() == [0, 1, 2, 3]
    rep = t.load_report.records.set_index("line")
    assert rep.loc[7, "reason"].startswith("no usage yet")
    assert rep.loc[13, "reason"].startswith("second copy")
    assert rep.loc[17, "reason"].startswith("git undo snapshot")
    assert rep.loc[28, "status"] == "skipped"
    assert sorted(rep.index) == [i for i in range(1, 29) if i != 27]


def test_fixture_compaction(tmp_path: Path) -> None:
    t = ctxlab.load(write(tmp_path, fixture_lines()))
    ev = t.events
    assert len(ev) == 1
    e = ev.iloc[0]
    assert (e["origin"], e["trigger"], int(e["pre_tokens"]), e["pos"]) == \
        ("recorded", "auto", 1300, 10.0)
    f = t.frame.set_index("part")
    assert f.loc[0, "hidden_by"] is pd.NA  # the instructions are sent with every request
    assert (f.loc[1:9, "hidden_by"] == 0).all()
    inserted = f[f["event"] == 0]
    assert inserted.index.tolist() == [10, 11, 12]
    assert inserted["kind"].tolist() == ["text", "text", "summary"]
    assert inserted["content"].iloc[2] == SUMMARY
    assert (inserted["turn"] == 1).all()  # replayed messages are not new turns
    visible = t.effective()["part"].tolist()
    assert visible[:5] == [0, 10, 11, 12, 13]
    un = t.rewind_recorded()
    assert len(un.frame) == len(t.frame) - 3 and un.frame["hidden_by"].isna().all()


def test_second_copy_of_an_out_of_range_total_is_still_a_copy(tmp_path: Path) -> None:
    """A total too large for a count column: the call's total is left empty, and the
    token_count's second copy is still recognised as one (not a call of its own)."""
    lines = fixture_lines()
    for k in (7, 12):                   # lines 8 and 13: the first call's two copies
        lines[k] = _line("event_msg", _usage(10 ** 30, 1000, 200, 100, 40))
    t = ctxlab.load(write(tmp_path, lines))
    assert len(t.calls) == 4 and t.calls["input_total"].tolist()[:2] == [1000, 1250]
    rep = t.load_report.records
    assert rep[rep["line"] == 13]["reason"].iloc[0].startswith("second copy")
    # the total is reported once, at the first copy's line, not at a later call
    bad = rep[rep["record"] == "usage"]
    assert bad["line"].tolist() == [8] and "1000000000000000000000000000000" in \
        bad["reason"].iloc[0]


def test_compaction_without_replacement_history(tmp_path: Path) -> None:
    lines = [_line("session_meta", {"id": "s2", "instructions": "Be brief."}),
             _line("response_item", _msg("user", "hi")),
             _line("compacted", {"message": "they said hi", "trigger": "manual"}),
             _line("response_item", _msg("user", "again"))]
    t = ctxlab.load(write(tmp_path, lines))
    f = t.frame
    assert f["kind"].tolist() == ["text", "text", "summary", "text"]
    assert f["hidden_by"].tolist()[:2] == [pd.NA, 0]
    e = t.events.iloc[0]
    assert e["trigger"] == "manual" and pd.isna(e["pre_tokens"])


@pytest.mark.parametrize("item", ["compaction", "compaction_summary"])
def test_a_server_side_compaction_is_a_recorded_event(tmp_path: Path, item: str) -> None:
    """Remote compaction writes an empty message and a replacement history ending in an
    encrypted compaction item: the whole record was skipped (unknown item type), so the
    history was never hidden. Now: the event, the user message it keeps, and a summary
    part with no readable content; an item it cannot read is left out alone."""
    enc = "gAAAA" + "x" * 400
    repl = [_msg("user", "hi"), {"type": item, "encrypted_content": enc},
            {"type": "mystery_item"}]
    lines = [_line("session_meta", {"id": "s3", "instructions": "Be brief."}),
             _line("response_item", _msg("user", "hi")),
             _line("response_item", _msg("assistant", "hello")),
             _line("compacted", {"message": "", "replacement_history": repl}),
             _line("response_item", _msg("user", "again"))]
    t = ctxlab.load(write(tmp_path, lines))
    assert len(t.events) == 1
    f = t.frame
    assert f["hidden_by"].tolist()[:3] == [pd.NA, 0, 0]
    inserted = f[f["event"] == 0]
    assert inserted["kind"].tolist() == ["text", "summary"]
    assert inserted["content"].tolist() == ["hi", ""]
    assert json.loads(inserted["meta"].iloc[1])["encrypted_content_chars"] == len(enc)
    sk = t.load_report.skipped
    assert sk["where"].tolist() == ["line 4 replacement_history[2]"]
    assert t.effective()["content"].tolist() == ["Be brief.", "hi", "", "again"]


def test_sniff(tmp_path: Path) -> None:
    p = write(tmp_path, fixture_lines())
    assert ctxlab.loaders.detect(p).name == "codex"
    assert not codex.sniff(p, '{"type":"user","message":{"role":"user"}}')


def _lost_token_count_lines(lose: int | None) -> list[str]:
    """Three calls in cli 0.60.1 order (each token_count twice: before the call's outputs
    and after its tool's output); ``lose``: a line (1-based) cut short."""
    def shell_call(cid: str, usage: tuple[int, int, int, int]) -> list[str]:
        """token_count, the call, its output, the token_count's second copy."""
        count = _line("event_msg", _usage(*usage))
        return [count,
                _line("response_item", {"type": "function_call", "name": "shell",
                                        "call_id": cid, "arguments": "{}"}),
                _line("response_item", {"type": "function_call_output", "call_id": cid,
                                        "output": "ok"}),
                count]

    lines = [
        _line("session_meta", {"id": "s3", "base_instructions": {"text": "Codex."}}),     # 1
        _line("turn_context", {"cwd": "/w", "model": "gpt-5.1-codex"}),                 # 2
        _line("response_item", _msg("user", "go")),                                     # 3
        *shell_call("c1", (1100, 1000, 0, 100)),                                        # 4-7
        *shell_call("c2", (2400, 1250, 0, 50)),                                         # 8-11
        _line("event_msg", _usage(3100, 650, 0, 50)),                                   # 12
        _line("response_item", _msg("assistant", "done")),                              # 13
    ]
    if lose is not None:
        lines[lose - 1] = lines[lose - 1][:40]
    return lines


@pytest.mark.parametrize("lose", [None, 8])
def test_a_lost_token_count_does_not_pin_the_next_outputs_on_the_call_before(tmp_path, lose):
    """Losing call 1's first token_count: its outputs still make call 1 (not call 0's),
    and the second copy, which follows the counted call 0 directly, gives it its usage."""
    t = ctxlab.load(write(tmp_path, _lost_token_count_lines(lose)))
    assert t.calls["input_total"].tolist() == [1000, 1250, 650]
    f = t.frame
    asked = f[f["kind"] == "tool_call"].set_index("tool_call_id")
    assert asked.loc[["c1", "c2"], "call"].tolist() == [0, 1]
    assert f.loc[f["content"] == "done", "call"].tolist() == [2]
    # call 1's input ends after c1's result, where its own outputs begin
    answered = f[f["kind"] == "tool_result"].set_index("tool_call_id")
    assert answered.loc["c1", "pos"] < t.calls["input_end_pos"].iloc[1] \
        <= asked.loc["c2", "pos"]
    rep = t.load_report.records
    assert (rep["status"] == "skipped").sum() == (lose is not None)


def test_a_lost_token_count_with_no_second_copy_leaves_that_call_uncounted(tmp_path):
    lines = _lost_token_count_lines(8)
    del lines[10]                       # 0.39.0 writes each token_count once
    t = ctxlab.load(write(tmp_path, lines))
    c = t.calls
    assert len(c) == 3 and pd.isna(c.loc[1, "input_total"])
    assert c.loc[[0, 2], "input_total"].tolist() == [1000, 650]
    asked = t.frame[t.frame["kind"] == "tool_call"].set_index("tool_call_id")
    assert asked.loc[["c1", "c2"], "call"].tolist() == [0, 1]
    # nothing lost, no token_count for c2's response: as before, c2 joins the call
    # before it, and the next count (whose total follows call 0's) makes the next call
    lines = _lost_token_count_lines(None)
    lines[11] = _line("event_msg", _usage(1800, 650, 0, 50))
    del lines[10], lines[7]
    t = ctxlab.load(write(tmp_path, lines, "unlogged.jsonl"))
    assert t.calls["input_total"].tolist() == [1000, 650]
    assert t.frame.loc[t.frame["content"] == "done", "call"].tolist() == [1]


def test_parallel_calls_of_one_response_stay_one_call(tmp_path: Path) -> None:
    """codex records each tool call of a response followed by its output (call A,
    output A, call B, output B) and counts the response once: a call after a tool output
    with no token_count between is the same response's, not a new request."""
    lines = [
        _line("session_meta", {"id": "s4", "base_instructions": {"text": "Codex."}}),
        _line("turn_context", {"cwd": "/w", "model": "gpt-5.1-codex"}),
        _line("response_item", _msg("user", "look at both")),
        _line("event_msg", _usage(1100, 1000, 0, 100)),
        *[_line("response_item", item) for cid in ("a", "b") for item in (
            {"type": "function_call", "name": "shell", "call_id": cid, "arguments": "{}"},
            {"type": "function_call_output", "call_id": cid, "output": f"out {cid}"})],
        _line("event_msg", _usage(1900, 700, 0, 100)),
        _line("response_item", _msg("assistant", "both read")),
        _line("response_item", _msg("user", "thanks")),
        _line("response_item", _msg("assistant", "welcome")),   # no token_count: NA usage
    ]
    t = ctxlab.load(write(tmp_path, lines))
    f = t.frame
    assert t.calls["input_total"].tolist()[:2] == [1000, 700] and len(t.calls) == 3
    assert pd.isna(t.calls["input_total"].iloc[2])
    asked = f[f["kind"] == "tool_call"]
    assert asked["call"].tolist() == [0, 0]
    assert f.loc[f["content"].isin(["both read", "welcome"]), "call"].tolist() == [1, 2]
    # call 1 saw both outputs
    answered = f[f["kind"] == "tool_result"]
    assert (answered["pos"] < t.calls["input_end_pos"].iloc[1]).all()


@pytest.mark.parametrize("lost", [14, 15])
def test_real_file_with_a_lost_line_keeps_its_calls(tmp_path, lost):
    """Line 14 is a token_count: its call's outputs stay a call of their own, with no
    usage; line 15 is the reasoning item after it: only that part goes."""
    lines = realdata_path(REAL).read_text(encoding="utf-8").split("\n")
    lines[lost - 1] = lines[lost - 1][:25]
    t = ctxlab.load(write(tmp_path, lines, "lost.jsonl"))
    whole = ctxlab.load(realdata_path(REAL))

    def outputs(x):
        return x.frame[x.frame["role"] == "assistant"].groupby("call").size().tolist()

    got = t.calls["input_total"].astype("Float64").tolist()
    assert len(got) == 19
    if lost == 15:
        assert got == REAL_INPUT_TOTALS
        diff = [a - b for a, b in zip(outputs(whole), outputs(t))]
        assert sorted(diff) == [0] * 18 + [1]
    else:
        missing = [i for i, x in enumerate(got) if pd.isna(x)]
        assert len(missing) == 1
        assert [x for x in got if not pd.isna(x)] == \
            REAL_INPUT_TOTALS[:missing[0]] + REAL_INPUT_TOTALS[missing[0] + 1:]
        assert outputs(t) == outputs(whole)


def test_strict_names_file_and_line(tmp_path: Path) -> None:
    lines = fixture_lines()
    lines[4] = lines[4][:30]
    p = write(tmp_path, lines)
    with pytest.raises(LoadError, match=rf"{p.name}:5\b"):
        ctxlab.load(p, strict=True)
    lines = fixture_lines()[:-2]
    lines[9] = _line("response_item", {"type": "function_call_output"})
    with pytest.raises(LoadError, match=r":10\b.*unexpected shape"):
        ctxlab.load(write(tmp_path, lines, "b.jsonl"), strict=True)


def test_lone_surrogate_is_kept_loadable(tmp_path: Path) -> None:
    lines = fixture_lines()
    lines[4] = lines[4].replace("fix the bug", "fix \\ud83d the bug")
    t = ctxlab.load(write(tmp_path, lines))
    assert t.frame.set_index("part").loc[3, "content"] == "fix \ufffd the bug"


@settings(max_examples=40, deadline=None)
@given(cs=st.lists(corruptions, min_size=1, max_size=3))
def test_corruption_is_reported_or_raises(cs: list[Any]) -> None:
    import tempfile
    data = ("\n".join(fixture_lines()) + "\n").encode()
    for c in cs:
        data = corrupt(data, c)
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "rollout.jsonl"
        p.write_bytes(data)
        try:
            t = ctxlab.load(p, format="codex")
        except LoadError:
            return
        assert record_wheres(t) == sorted(expected_wheres(data, jsonl=True))
        t.validate()


def test_a_compaction_item_outside_a_compacted_record_is_reported(tmp_path: Path) -> None:
    lines = [_line("session_meta", {"id": "s4", "instructions": "Be brief."}),
             _line("response_item", _msg("user", "hi")),
             _line("response_item", {"type": "compaction", "encrypted_content": "gAAA"}),
             _line("response_item", _msg("user", "again"))]
    t = ctxlab.load(write(tmp_path, lines))
    assert t.frame["content"].tolist() == ["Be brief.", "hi", "again"]
    sk = t.load_report.skipped
    assert sk["line"].tolist() == [3] and "outside a `compacted` record" in sk["reason"].iloc[0]


def test_a_tool_output_without_its_call_is_kept_and_reported(tmp_path: Path) -> None:
    """A function_call_output whose call_id no earlier call has (its call's line is not in
    the rollout): kept, unlinked, and reported at its line; --strict stops there."""
    lines = fixture_lines()[:-2]                          # (not its unknown record)
    lines[9] = lines[10].replace('"c1"', '"c_gone"')      # line 10: an output, not its call
    p = write(tmp_path, lines)
    t = ctxlab.load(p)
    assert orphan_entries(t) == [(10, "line 10 tool_result c_gone"),
                                 (11, "line 11 tool_result c1")]
    f = t.frame
    assert (f.loc[f["tool_call_id"].isin(["c_gone", "c1"]), "kind"] == "tool_result").all()
    assert record_wheres(t) == sorted(expected_wheres(p.read_bytes(), jsonl=True))
    with pytest.raises(LoadError, match=rf"{p}:10 .*call id 'c_gone'"):
        ctxlab.load(p, strict=True)


@pytest.mark.realdata
def test_real_rollout_without_a_call_line_reports_its_output(tmp_path: Path) -> None:
    """The real rollout has no orphan output; without the line of its first function_call
    (a copy in tmp), that call's output is kept and reported at its own line."""
    src = realdata_path(REAL)
    assert orphan_entries(ctxlab.load(src)) == []
    lines = src.read_text(encoding="utf-8").split("\n")
    at = next(i for i, x in enumerate(lines) if '"type":"function_call"' in x.replace(" ", ""))
    cid = json.loads(lines[at])["payload"]["call_id"]
    out = next(i for i, x in enumerate(lines) if '"function_call_output"' in x and cid in x)
    p = tmp_path / "rollout.jsonl"
    p.write_text("\n".join(lines[:at] + lines[at + 1:]), encoding="utf-8")
    assert orphan_entries(ctxlab.load(p)) == [(out, f"line {out} tool_result {cid}")]


def test_a_ghost_snapshot_in_a_replacement_history_is_reported_as_ignored(tmp_path: Path):
    """A git undo snapshot inside ``replacement_history`` is never sent, as in the history:
    it gets an ignored entry beside the compaction's own (it was left out silently)."""
    lines = fixture_lines()[:-2]
    lines[18] = _line("compacted", {"message": SUMMARY, "replacement_history": [
        _msg("user", "fix the bug"), {"type": "ghost_snapshot", "ghost_commit": {"id": "g"}},
        _msg("user", SUMMARY)]})
    p = write(tmp_path, lines)
    t = ctxlab.load(p)
    rep = t.load_report.records
    piece = rep[rep["where"] == "line 19 replacement_history[1]"]
    assert piece["status"].tolist() == ["ignored"] and piece["record"].tolist() == ["compacted"]
    assert "never sent" in piece["reason"].iloc[0]
    assert record_wheres(t) == sorted(expected_wheres(p.read_bytes(), jsonl=True))
    assert t.load_report.skipped.empty


def test_reasoning_content_of_another_shape_is_kept_not_dropped(tmp_path: Path):
    """A reasoning ``content`` item without a text is kept in the thinking part as JSON (as
    a message block of another shape is); it was dropped silently."""
    item = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan"}],
            "content": [{"type": "reasoning_text", "text": "step 1"},
                        {"type": "reasoning_image", "image_url": "data:x"}]}
    lines = [_line("session_meta", {"id": "s5"}), _line("response_item", _msg("user", "go")),
             _line("event_msg", _usage(100, 90, 0, 10)), _line("response_item", item)]
    t = ctxlab.load(write(tmp_path, lines))
    thinking = t.frame.loc[t.frame["kind"] == "thinking", "content"].tolist()
    assert thinking == ['Plan\n\nstep 1\n\n{"type": "reasoning_image", "image_url": "data:x"}']


@pytest.mark.parametrize("meta, where", [
    ({"base_instructions": {"content": "You are Codex."}}, "line 1 base_instructions"),
    ({"base_instructions": {"text": ["You are", "Codex."]}}, "line 1 base_instructions"),
    ({"instructions": ["Be brief."]}, "line 1 instructions"),
])
def test_instructions_of_another_shape_are_reported(tmp_path: Path, meta: dict, where: str):
    """session_meta instructions that are no text make no system part: the report says so
    at the line (they were left out silently)."""
    lines = [_line("session_meta", {"id": "s6", **meta}),
             _line("response_item", _msg("user", "go"))]
    t = ctxlab.load(write(tmp_path, lines))
    assert t.frame["content"].tolist() == ["go"]
    sk = t.load_report.skipped
    assert sk["where"].tolist() == [where] and "not a text" in sk["reason"].iloc[0]
    good = [_line("session_meta", {"id": "s6", "base_instructions": {"text": "You are Codex."},
                                   "instructions": None})] + lines[1:]
    assert ctxlab.load(write(tmp_path, good)).load_report.skipped.empty
