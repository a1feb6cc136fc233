"""swe_agent: SWE-agent *.traj trajectories (0.x from the real files, >= 1.0 from a fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import ctxlab
from ctxlab.errors import LoadError
from ctxlab.loaders import registry

from conftest import realdata_path
from corrupt_strategies import (assert_accounts, corrupt, corruptions, expected_wheres,
                                orphan_entries)
from golden import check_golden

# file -> (assistant messages == api_calls, tokens_sent, tokens_received, history, trajectory)
REAL = {"pydicom": ("swe_agent/pydicom__pydicom-1458.traj", 12, 122612, 1369, 26, 12),
        "test_repo": ("swe_agent/swe-agent__test-repo-i1.traj", 5, 52861, 326, 12, 5)}


def trajectory_v0() -> dict:
    return {
        "environment": "swe_main",
        "trajectory": [{"action": "open src/a.py\n",
                        "observation": "[File: src/a.py (3 lines total)]\n1:x=1",
                        "response": "r", "state": "{}", "thought": "t"}],
        "history": [
            {"role": "system", "content": "SETTING: ...", "agent": "primary"},
            {"role": "user", "content": "Here is a demonstration", "agent": "primary",
             "is_demo": True},
            {"role": "user", "content": "ISSUE: fix a.py", "agent": "primary"},
            {"role": "assistant", "content": "Open it.\n```\nopen src/a.py\n```",
             "thought": "Open it.", "action": "open src/a.py\n", "agent": "primary"},
            {"role": "user", "content": "[File: src/a.py (3 lines total)]\n1:x=1\n(Open file: "
             "src/a.py)\nbash-$", "agent": "primary"},
            {"role": "assistant", "content": "Done.\n```\nsubmit\n```", "thought": "Done.",
             "action": "submit\n", "agent": "primary"},
        ],
        "info": {"exit_status": "submitted", "submission": "diff",
                 "model_stats": {"total_cost": 0.1, "instance_cost": 0.1, "tokens_sent": 900,
                                 "tokens_received": 20, "api_calls": 2}}}


def trajectory_v1() -> dict:
    """SWE-agent >= 1.0 with function calling: message_type, tool_calls, role tool."""
    call = {"id": "toolu_01", "type": "function", "function": {
        "name": "str_replace_editor",
        "arguments": "{\"command\": \"view\", \"path\": \"/t/a.py\"}"}}
    history = [
        {"role": "system", "content": "You are a helpful assistant", "agent": "main",
         "message_type": "system_prompt"},
        {"role": "user", "content": "demo", "agent": "main", "message_type": "demonstration",
         "is_demo": True},
        {"role": "user", "content": [{"type": "text", "text": "<uploaded_files>/t</uploaded_files>"
                                      " fix a.py"}], "agent": "main",
         "message_type": "observation"},
        {"role": "assistant", "content": "Let me look.", "thought": "Let me look.",
         "action": "str_replace_editor view /t/a.py", "agent": "main", "tool_calls": [call],
         "message_type": "action", "thinking_blocks": [{"type": "thinking",
                                                        "thinking": "hmm", "signature": "s"}]},
        {"role": "tool", "content": [{"type": "text", "text": "OBSERVATION:\n1\tx = 1"}],
         "agent": "main", "message_type": "observation", "tool_call_ids": ["toolu_01"]},
        {"role": "assistant", "content": "Submitting.", "thought": "Submitting.",
         "action": "submit", "agent": "main", "message_type": "action", "tool_calls": [
             {"id": "toolu_02", "type": "function",
              "function": {"name": "submit", "arguments": "{}"}}]},
    ]
    return {"trajectory": [{"action": "str_replace_editor view /t/a.py", "observation": "1\tx = 1",
                            "response": "Let me look.", "thought": "Let me look.",
                            "execution_time": 0.1, "state": {}, "query": history[:3],
                            "extra_info": {}}],
            "history": history,
            "info": {"swe_agent_version": "1.0.1", "exit_status": "submitted",
                     "model_stats": {"instance_cost": 0.02, "tokens_sent": 700,
                                     "tokens_received": 40, "api_calls": 2}},
            "replay_config": json.dumps({"agent": {"model": {"name": "claude-3-7-sonnet"}}}),
            "environment": "main"}


def write(tmp_path: Path, doc: dict, name: str = "run.traj") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return p


def test_v0_fixture(tmp_path: Path):
    p = write(tmp_path, trajectory_v0())
    assert registry.detect(p).name == "swe_agent"
    t = ctxlab.load(p)
    f = t.frame
    assert list(zip(f["role"], f["kind"])) == [
        ("system", "text"), ("user", "text"), ("user", "text"), ("assistant", "text"),
        ("user", "tool_result"), ("assistant", "text")]
    assert f["turn"].tolist() == [0, 0, 1, 1, 1, 1]
    assert json.loads(f["meta"].iloc[1]) == {"agent": "primary", "is_demo": True}
    assert f["tool_name"].iloc[4] == "open"
    assert f["file_path"].iloc[3] == f["file_path"].iloc[4] == "src/a.py"
    assert len(t.calls) == 2 and t.calls["input_total"].isna().all()
    assert t.calls["input_end_pos"].tolist() == [3.0, 5.0]
    assert t.meta["run_usage"]["tokens_sent"] == 900 and t.meta["version"] == "0.x"
    rep = t.load_report.records.set_index("where")
    assert rep.loc["trajectory[0]", "status"] == "ignored"
    assert rep.loc["trajectory[0]", "reason"].startswith("duplicates history")


def test_v1_fixture_tool_calls_and_tool_role(tmp_path: Path):
    t = ctxlab.load(write(tmp_path, trajectory_v1()))
    f = t.frame
    assert list(zip(f["role"], f["kind"])) == [
        ("system", "text"), ("user", "text"), ("user", "text"), ("assistant", "thinking"),
        ("assistant", "text"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "text"), ("assistant", "tool_call")]
    assert f["turn"].tolist() == [0, 0] + [1] * 7
    assert f["content"].iloc[2] == "<uploaded_files>/t</uploaded_files> fix a.py"
    assert f["tool_call_id"].iloc[5] == f["tool_call_id"].iloc[6] == "toolu_01"
    assert f["tool_name"].iloc[6] == "str_replace_editor"
    assert f["file_path"].iloc[5] == f["file_path"].iloc[6] == "/t/a.py"
    assert f["content"].iloc[8] == "submit({})"
    assert t.calls["model"].tolist() == ["claude-3-7-sonnet"] * 2
    assert t.calls["call"].tolist() == [0, 1] and f["call"].iloc[3:6].tolist() == [0, 0, 0]
    assert t.meta["version"] == "1.0.1" and t.meta["model"] == "claude-3-7-sonnet"
    assert t.meta["run_usage"]["api_calls"] == 2


@pytest.mark.parametrize("short", sorted(REAL))
def test_real_files(short: str):
    rel, calls, sent, received, n_history, n_traj = REAL[short]
    p = realdata_path(rel)
    t = ctxlab.load(p)
    assert t.meta["format"] == "swe_agent" and t.meta["version"] == "0.x"
    stats = t.meta["run_usage"]
    assert (stats["api_calls"], stats["tokens_sent"], stats["tokens_received"]) == \
        (calls, sent, received)
    assert len(t.calls) == calls and t.calls["input_total"].isna().all()
    f = t.frame
    assert len(f) == n_history and (f["role"] == "assistant").sum() == calls
    assert f["turn"].max() == 1
    demo = f[f["meta"].str.contains('"is_demo": true', na=False)]
    assert demo["msg"].tolist() == [1]
    # every step's output is an observation, except the last (submit ends the run)
    assert (f["kind"] == "tool_result").sum() == calls - 1
    # tokens_sent is the sum of the prompt totals of every call: a chars/4 estimate of the
    # prefixes agrees within 5% (124441 vs 122612; 51001 vs 52861)
    chars = f["content"].str.len()
    est = sum(chars[f["pos"] < end].sum() / 4 for end in t.calls["input_end_pos"])
    assert abs(est - sent) / sent < 0.05
    rep = t.load_report.records
    assert (rep["record"] == "trajectory-step").sum() == n_traj
    assert_accounts(t, [f"history[{k}]" for k in range(n_history)]
                    + [f"trajectory[{i}]" for i in range(n_traj)])
    check_golden(f"swe_agent__{short}", t)


def test_observation_tool_names_in_test_repo():
    t = ctxlab.load(realdata_path(REAL["test_repo"][0]))
    obs = t.frame[t.frame["kind"] == "tool_result"]
    assert obs["tool_name"].tolist() == ["find_file", "open", "edit", "python"]
    assert obs["file_path"].tolist()[1] == "tests/missing_colon.py"


def test_corrupted_file_raises_load_error_naming_file_and_line(tmp_path: Path):
    text = json.dumps(trajectory_v0(), indent=2)
    p = tmp_path / "cut.traj"
    p.write_text(text[: len(text) * 2 // 3], encoding="utf-8")
    with pytest.raises(LoadError, match=rf"{p}:\d+"):
        ctxlab.load(p)
    doc = trajectory_v0()
    doc["history"][4] = ["not", "a", "message"]
    p = write(tmp_path, doc, "bad.traj")
    t = ctxlab.load(p)
    assert t.load_report.skipped["where"].tolist() == ["history[4]"]
    with pytest.raises(LoadError, match=r"history\[4\]"):
        ctxlab.load(p, strict=True)


FIXTURES = {"v0": json.dumps(trajectory_v0(), indent=2).encode(),
            "v1": json.dumps(trajectory_v1(), indent=2).encode()}


@pytest.mark.parametrize("name", sorted(FIXTURES))
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(c=corruptions)
def test_corrupted_input_is_reported_or_load_error(name: str, c: tuple, tmp_path: Path):
    data = corrupt(FIXTURES[name], c)
    p = tmp_path / "x.traj"
    p.write_bytes(data)
    try:
        t = ctxlab.load(p, format="swe_agent")
    except LoadError:
        return
    expected = expected_wheres(data)
    assert expected is not None
    assert_accounts(t, expected)


def test_demonstrations_keep_their_tool_calls_and_results(tmp_path: Path):
    """SWE-agent >= 1.0 with put_demos_in_history sends demo entries as written, tool
    calls and tool messages included: the first call's input holds them."""
    from ctxlab.visibility import call_input

    def tc(i, cmd):
        return [{"id": i, "type": "function",
                 "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}]
    demo = {"agent": "main", "is_demo": True}
    hist = [
        {"role": "system", "content": "SYS", "message_type": "system_prompt"},
        {"role": "user", "content": "demo task", "message_type": "observation", **demo},
        {"role": "assistant", "content": "demo thought", "message_type": "action",
         "action": "ls", "tool_calls": tc("call_demo", "ls"), **demo},
        {"role": "tool", "content": [{"type": "text", "text": "demo output"}],
         "message_type": "observation", "tool_call_ids": ["call_demo"], **demo},
        {"role": "user", "content": "real task", "message_type": "observation"},
        {"role": "assistant", "content": "t", "message_type": "action", "action": "pwd",
         "tool_calls": tc("call_1", "pwd")}]
    p = tmp_path / "demo.traj"
    p.write_text(json.dumps({"environment": "x", "trajectory": [], "history": hist, "info": {}}))
    t = ctxlab.load(p)
    first = call_input(t, 0)
    assert first["content"].tolist() == ["SYS", "demo task", "demo thought",
                                         'bash({"command": "ls"})', "demo output", "real task"]
    assert first["tool_call_id"].tolist()[3:5] == ["call_demo", "call_demo"]
    assert len(t.calls) == 1 and t.load_report.skipped.empty
    assert (t.frame["turn"] == 1).sum() == 3          # the real task and the call: one turn


def test_a_tool_message_without_its_call_is_kept_and_reported(tmp_path: Path):
    """>= 1.0: a tool message whose tool_call_ids names no earlier call: kept, unlinked,
    reported at its history element."""
    doc = trajectory_v1()
    doc["history"][4]["tool_call_ids"] = ["toolu_gone"]
    p = write(tmp_path, doc)
    t = ctxlab.load(p)
    assert orphan_entries(t) == [(None, "history[4] tool_result toolu_gone")]
    assert_accounts(t, [f"history[{k}]" for k in range(len(doc["history"]))])
    with pytest.raises(LoadError, match=r"history\[4\] tool_result toolu_gone"):
        ctxlab.load(p, strict=True)


def test_tool_call_ids_beyond_the_first_are_reported_as_not_sent(tmp_path: Path):
    """SWE-agent sends a tool message with ``tool_call_id = tool_call_ids[0]``: the result
    is linked to that call, and the other ids get an ignored entry (dropped silently)."""
    doc = trajectory_v1()
    doc["history"][4]["tool_call_ids"] = ["toolu_01", "toolu_x"]
    t = ctxlab.load(write(tmp_path, doc))
    f = t.frame
    assert f.loc[f["kind"] == "tool_result", "tool_call_id"].tolist() == ["toolu_01"]
    rep = t.load_report.records
    piece = rep[rep["where"] == "history[4] tool_call_ids[1:]"]
    assert piece["status"].tolist() == ["ignored"]
    assert 'not ["toolu_x"]' in piece["reason"].iloc[0]
    assert t.load_report.skipped.empty


@pytest.mark.parametrize("short", sorted(REAL))
def test_last_observation_is_reported_as_never_sent(short: str):
    """The last step's observation (submit's diff, = info.submission: 803 and 301 chars) is
    in no history message: the report said it duplicated history."""
    p = realdata_path(REAL[short][0])
    doc = json.loads(p.read_text(encoding="utf-8"))
    last = doc["trajectory"][-1]["observation"]
    assert last == doc["info"]["submission"] and len(last) == {"pydicom": 803,
                                                                "test_repo": 301}[short]
    rep = ctxlab.load(p).load_report.records.set_index("where")
    n = len(doc["trajectory"])
    reason = rep.loc[f"trajectory[{n - 1}]", "reason"]
    assert reason.startswith(f"its observation (info.submission), {len(last)} chars, is in "
                             "no history message: the run ended with this step, it was not "
                             "sent to the model")
    assert rep.loc[[f"trajectory[{i}]" for i in range(n - 1)], "reason"].str.startswith(
        "duplicates history").all()


def test_an_observation_missing_from_history_is_reported(tmp_path: Path):
    doc = trajectory_v0()
    doc["trajectory"].append({"action": "submit\n", "observation": "diff --git a/x b/x",
                              "response": "r", "state": "{}", "thought": "t"})
    rep = ctxlab.load(write(tmp_path, doc)).load_report.records.set_index("where")
    assert rep.loc["trajectory[0]", "reason"].startswith("duplicates history")
    assert rep.loc["trajectory[1]", "reason"].startswith(
        "its observation, 18 chars, is in no history message: the run ended with this step")
