"""mini_swe_agent: *.traj.json trajectories (mini-swe-agent-1 and -1.1)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

import ctxlab
from ctxlab.errors import LoadError
from ctxlab.loaders import registry
from ctxlab.loaders.mini_swe_agent import NEVER_SENT

from conftest import realdata_path
from corrupt_strategies import (assert_accounts, corrupt, corruptions, expected_wheres,
                                orphan_entries)
from golden import check_golden

REAL = {"astropy": "mini_swe_agent/astropy__astropy-12907.traj.json",
        "requests": "mini_swe_agent/psf__requests-1142.traj.json"}

# usage.prompt_tokens of every assistant message, read off the files by hand
ASTROPY_INPUT = [1662, 5614, 6131, 6388, 6517, 9388, 11562, 11707, 11940, 12973, 13597, 15431,
                 15770, 16352, 16795, 17647, 19155, 19279, 19962, 20662]
REQUESTS_INPUT_HEAD = [1379, 3213, 3486, 4553, 5083, 5112, 7108, 8336, 8388, 11051]


def _usage(prompt: int, cached: int, out: int) -> dict:
    return {"id": f"gen-{prompt}", "model": "test/model", "created": 1763510516,
            "choices": [{"message": {"content": "x", "reasoning": "hidden thoughts"}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": out,
                      "prompt_tokens_details": {"cached_tokens": cached},
                      "completion_tokens_details": {"reasoning_tokens": 2}}}


def trajectory_v1() -> dict:
    """A small mini-swe-agent-1 run: task, two steps, a format error, the submission."""
    def step(text: str, prompt: int, cached: int) -> dict:
        return {"role": "assistant", "content": text,
                "extra": {"response": _usage(prompt, cached, 7)}}
    return {
        "info": {"exit_status": "Submitted", "submission": "diff --git a/x b/x\n",
                 "model_stats": {"instance_cost": 0.01, "api_calls": 3}, "mini_version": "1.15.0",
                 "config": {"agent": {"system_template": "You are..."},
                            "model": {"model_name": "test/model"}}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "<pr_description>Fix x</pr_description>"},
            step("THOUGHT: look\n\n```bash\nls\n```", 100, 0),
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nx\n</output>"},
            step("THOUGHT: two\n\n```bash\nls\n```\n```bash\npwd\n```", 150, 90),
            {"role": "user", "content": "Please always provide EXACTLY ONE action."},
            step("THOUGHT: done\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```",
                 180, 140),
            {"role": "user", "content": "diff --git a/x b/x\n"},
        ],
        "trajectory_format": "mini-swe-agent-1", "instance_id": "demo__x-1"}


def trajectory_v11() -> dict:
    """mini-swe-agent-1.1 with a tool-calling model: tool_calls, role tool, an exit message."""
    return {
        "info": {"exit_status": "Submitted", "submission": "", "model_stats": {"api_calls": 1},
                 "mini_version": "2.0.0", "config": {"model": {"model_name": "gpt-x"}}},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "Run it.",
             "tool_calls": [{"id": "call_9", "type": "function",
                             "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}],
             "extra": {"response": _usage(50, 0, 5), "actions": [{"command": "ls"}]}},
            {"role": "tool", "tool_call_id": "call_9", "content": "a.py\n",
             "extra": {"returncode": 0}},
            {"role": "exit", "content": "Submitted", "extra": {"exit_status": "Submitted"}},
        ],
        "trajectory_format": "mini-swe-agent-1.1"}


def write(tmp_path: Path, doc: dict, name: str = "run.traj.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return p


def test_fixture_v1_calls_observations_and_the_unsent_submission(tmp_path: Path):
    p = write(tmp_path, trajectory_v1())
    assert registry.detect(p).name == "mini_swe_agent"
    t = ctxlab.load(p)
    f = t.frame
    assert t.sessions == ["demo__x-1"]
    assert list(zip(f["role"], f["kind"])) == [
        ("system", "text"), ("user", "text"), ("assistant", "text"), ("user", "tool_result"),
        ("assistant", "text"), ("user", "text"), ("assistant", "text"), ("user", "tool_result")]
    assert f["turn"].tolist() == [0] + [1] * 7
    assert f["tool_name"].iloc[3] == "bash" and f["tool_call_id"].isna().all()
    assert json.loads(f["meta"].iloc[7]) == {"sent": False, "note": NEVER_SENT}
    # never sent: hidden at once by a history edit, in no request and not in the final context
    ev = t.events
    assert ev["origin"].tolist() == ["not_resent"] and f["hidden_by"].iloc[7] == 0
    assert float(ev["pos"].iloc[0]) == float(f["pos"].iloc[7]) + 0.5
    assert f["content"].iloc[7] not in t.effective()["content"].tolist()
    assert json.loads(f["meta"].iloc[2])["reasoning_chars"] == len("hidden thoughts")
    c = t.calls
    assert c["input_total"].tolist() == [100, 150, 180]
    assert c["cache_read"].tolist() == [0, 90, 140]
    assert c["input_tokens"].tolist() == [100, 60, 40]
    assert c["output_tokens"].tolist() == [7, 7, 7] and c["reasoning_tokens"].tolist() == [2] * 3
    assert c["input_end_pos"].tolist() == [2.0, 4.0, 6.0]  # input of call k = messages[0:k]
    assert t.meta["api_calls"] == 3 and t.meta["model"] == "test/model"
    assert t.meta["config"]["agent"]["system_template"] == "You are..."
    assert t.meta["submission_chars"] == len("diff --git a/x b/x\n")


def test_timeout_is_an_observation_and_format_error_is_not(tmp_path: Path):
    doc = trajectory_v1()
    doc["messages"][3]["content"] = ("The last command <command>sleep 999</command> timed out "
                                     "and has been killed.")
    f = ctxlab.load(write(tmp_path, doc)).frame
    assert f["kind"].iloc[3] == "tool_result" and f["kind"].iloc[5] == "text"
    assert f["turn"].iloc[5] == 1  # a format error is not a user turn


def test_fixture_v11_tool_calls_and_exit(tmp_path: Path):
    t = ctxlab.load(write(tmp_path, trajectory_v11()))
    f = t.frame
    assert list(zip(f["role"], f["kind"])) == [
        ("system", "text"), ("user", "text"), ("assistant", "text"), ("assistant", "tool_call"),
        ("tool", "tool_result")]
    assert f["tool_call_id"].iloc[3] == f["tool_call_id"].iloc[4] == "call_9"
    assert f["tool_name"].iloc[4] == "bash"
    rep = t.load_report.records.set_index("where")
    assert rep.loc["messages[4]", "status"] == "ignored"
    assert t.calls["input_total"].tolist() == [50] and t.calls["model"].iloc[0] == "test/model"


@pytest.mark.parametrize("short", sorted(REAL))
def test_real_files_golden_and_call_count(short: str):
    p = realdata_path(REAL[short])
    doc = json.loads(p.read_text(encoding="utf-8"))
    t = ctxlab.load(p)
    assert t.meta["format"] == "mini_swe_agent"
    assert len(t.calls) == doc["info"]["model_stats"]["api_calls"]
    assert len(t.frame) == len(doc["messages"])  # one part per message
    # the input of call k ends right before assistant message k
    assistant_msgs = [k for k, m in enumerate(doc["messages"]) if m["role"] == "assistant"]
    assert t.calls["input_end_pos"].astype(int).tolist() == assistant_msgs
    assert t.frame["turn"].max() == 1
    last = t.frame.iloc[-1]
    assert last["kind"] == "tool_result" and json.loads(last["meta"])["sent"] is False
    assert last["content"] == doc["info"]["submission"]
    assert last["content"] not in t.effective()["content"].tolist()
    assert_accounts(t, [f"messages[{k}]" for k in range(len(doc["messages"]))])
    check_golden(f"mini_swe_agent__{short}", t)


def test_astropy_numbers():
    t = ctxlab.load(realdata_path(REAL["astropy"]))
    c = t.calls
    assert c["input_total"].tolist() == ASTROPY_INPUT
    assert int(c["input_total"].sum()) == 258532 and int(c["cache_read"].sum()) == 193081
    assert int(c["output_tokens"].sum()) == 5083 and int(c["reasoning_tokens"].sum()) == 68
    assert (c["input_tokens"] == c["input_total"] - c["cache_read"]).all()
    assert (t.frame["kind"] == "tool_result").sum() == 20  # 19 observations + submission
    assert t.meta["exit_status"] == "Submitted" and t.meta["mini_version"] == "1.15.0"
    assert t.meta["model"] == "google/gemini-3-pro-preview"


def test_requests_numbers():
    t = ctxlab.load(realdata_path(REAL["requests"]))
    c = t.calls
    assert len(c) == 71 and c["input_total"].tolist()[:10] == REQUESTS_INPUT_HEAD
    assert int(c["input_total"].sum()) == 1572307 and c["input_total"].iloc[-1] == 38122
    # the only drop in prompt size: 23708 -> 23660 between calls 38 and 39 (no compaction)
    drops = [i for i in range(1, 71) if c["input_total"].iloc[i] < c["input_total"].iloc[i - 1]]
    assert drops == [39] and c["input_total"].iloc[38:40].tolist() == [23708, 23660]
    f = t.frame
    feedback = f[(f["role"] == "user") & (f["kind"] == "text")]["msg"].tolist()
    assert feedback == [1, 57, 123]  # the task and two format-error messages
    assert t.meta["submission_chars"] == len(f["content"].iloc[-1]) == 868167


def test_corrupted_file_raises_load_error_naming_file_and_line(tmp_path: Path):
    text = json.dumps(trajectory_v1(), indent=2)
    p = tmp_path / "cut.traj.json"
    p.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(LoadError, match=rf"{p}:\d+"):
        ctxlab.load(p)
    doc = trajectory_v1()
    doc["messages"][3] = {"content": "no role"}
    doc["messages"][4]["role"] = "wizard"
    p = write(tmp_path, doc, "bad.traj.json")
    t = ctxlab.load(p)
    assert t.load_report.skipped["where"].tolist() == ["messages[3]", "messages[4]"]
    with pytest.raises(LoadError, match=r"messages\[3\]"):
        ctxlab.load(p, strict=True)


FIXTURE = json.dumps(trajectory_v1(), indent=2).encode()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(c=corruptions)
def test_corrupted_input_is_reported_or_load_error(c: tuple, tmp_path: Path):
    data = corrupt(FIXTURE, c)
    p = tmp_path / "x.traj.json"
    p.write_bytes(data)
    try:
        t = ctxlab.load(p, format="mini_swe_agent")
    except LoadError:
        return
    expected = expected_wheres(data)
    assert expected is not None
    assert_accounts(t, [w for w in expected if w.startswith("messages")])


def test_a_usage_count_that_is_no_count_is_reported_once(tmp_path: Path) -> None:
    doc = {"trajectory_format": "mini-swe-agent-1", "info": {}, "messages": [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
        {"role": "assistant", "content": "THOUGHT\n```bash\nls\n```",
         "extra": {"response": {"usage": {"prompt_tokens": "5614", "completion_tokens": 9}}}},
        {"role": "user", "content": "<returncode>0</returncode>\nout"}]}
    p = tmp_path / "m.traj.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    t = ctxlab.load(p)
    sk = t.load_report.skipped
    assert len(sk) == 1 and "token count '5614' is not" in sk["reason"].iloc[0]
    assert pd.isna(t.calls["input_total"].iloc[0]) and t.calls["output_tokens"].iloc[0] == 9


def test_a_tool_message_without_its_call_is_kept_and_reported(tmp_path: Path):
    """1.1: a tool message whose tool_call_id no earlier assistant message called: kept,
    unlinked, reported at its message."""
    doc = trajectory_v11()
    doc["messages"][3]["tool_call_id"] = "call_gone"
    p = write(tmp_path, doc)
    t = ctxlab.load(p)
    assert orphan_entries(t) == [(None, "messages[3] tool_result call_gone")]
    assert (t.frame["tool_call_id"] == "call_gone").sum() == 1
    with pytest.raises(LoadError, match=r"messages\[3\] tool_result call_gone"):
        ctxlab.load(p, strict=True)
