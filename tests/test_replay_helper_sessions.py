"""Claude Code's compaction summarizer request (``subagents/agent-acompact-*.jsonl``, loaded
with ``sidechains=True``) is a session of the log but no agent's: replays, sweeps and the CLI
leave it out and say so (`ctxlab.replay.helper_sessions`)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import ctxlab
from ctxlab import datasets
from ctxlab.cli import main
from ctxlab.replay import helper_sessions
from ctxlab.schema import HELPER_SESSIONS
from ctxlab.sweep import replayed_sessions, sweep

from conftest import realdata_path

NOTE = "is Claude Code's compaction summarizer request, not an agent session: loaded, not replayed"
SPOTTER = "4d5611e5-241a-462a-8d15-5122611a9569"


def _usage(total: int, out: int) -> dict[str, int]:
    return {"input_tokens": 3, "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": total - 103, "output_tokens": out}


def generated_log(folder: Path) -> tuple[Path, int]:
    """A generated Claude Code log with an auto compaction, its summarizer's file (as
    Claude Code writes it: the prompt, then one reply whose usage is the whole
    pre-compaction context) and a sub-agent's; the summarizer's reported input."""
    s = datasets.generate_session("coding", 3, calls=30, big_outputs=0, compact_at=40_000)
    main_log = datasets.write_claude_code(s, folder / "gen.jsonl")
    recs = [json.loads(x) for x in main_log.read_text(encoding="utf-8").splitlines()]
    boundary = next(r for r in recs if r.get("subtype") == "compact_boundary")
    pre = int(boundary["compactMetadata"]["preTokens"])
    sid = boundary["sessionId"]
    at = datetime.fromisoformat(boundary["timestamp"].replace("Z", "+00:00"))

    def ts(seconds: float) -> str:
        return (at - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    env = {"isSidechain": True, "userType": "external", "cwd": "/w", "sessionId": sid,
           "version": "2.1.39", "gitBranch": "main"}
    sub = folder / "gen" / "subagents"
    sub.mkdir(parents=True)

    def write(name: str, records: list[dict[str, Any]]) -> None:
        (sub / name).write_text("".join(json.dumps(r) + "\n" for r in records),
                                encoding="utf-8")
    write("agent-acompact-5e1f.jsonl", [
        {**env, "agentId": "acompact-5e1f", "parentUuid": boundary["logicalParentUuid"],
         "type": "user", "uuid": "c1", "timestamp": ts(30),
         "message": {"role": "user", "content": "Your task is to create a detailed summary "
                                                "of the conversation so far."}},
        {**env, "agentId": "acompact-5e1f", "parentUuid": "c1", "type": "assistant",
         "uuid": "c2", "timestamp": ts(2), "requestId": "req_c",
         "message": {"model": "claude-opus-4-6", "id": "msg_c", "role": "assistant",
                     "content": [{"type": "text", "text": "<summary>Work so far.</summary>"}],
                     "usage": _usage(pre + 900, 700)}}])
    write("agent-a9.jsonl", [
        {**env, "agentId": "a9", "parentUuid": None, "type": "user", "uuid": "d1",
         "timestamp": ts(900), "message": {"role": "user", "content": "Explore the repo"}},
        {**env, "agentId": "a9", "parentUuid": "d1", "type": "assistant", "uuid": "d2",
         "timestamp": ts(899), "requestId": "req_d",
         "message": {"model": "claude-sonnet-4-5", "id": "msg_d", "role": "assistant",
                     "content": [{"type": "text", "text": "Explored."}],
                     "usage": _usage(12_000, 40)}}])
    return main_log, pre + 900


@pytest.fixture()
def generated(tmp_path: Path) -> tuple[Path, int]:
    return generated_log(tmp_path)


def test_the_loader_marks_the_summarizer_session_and_says_so(generated) -> None:
    path, total = generated
    t = ctxlab.load(path, sidechains=True)
    sid = t.sessions[0]
    helper = f"{sid}/agent-acompact-5e1f"
    assert t.sessions == [sid, f"{sid}/agent-a9", helper]     # kept: nothing dropped
    meta = t.meta[HELPER_SESSIONS]
    assert list(meta) == [helper]
    assert meta[helper]["kind"] == "compaction_summarizer"
    assert meta[helper]["session"] == sid and meta[helper]["event"] == 0  # its compaction
    assert meta[helper]["marker"].startswith("agentId 'acompact-5e1f'")
    event = json.loads(t.events["meta"].iloc[0])["summarizer_call"]
    assert event["input_total"] == total
    rep = t.load_report.records
    said = rep[rep["reason"].fillna("").str.contains("compaction summarizer request")]
    assert said["status"].tolist() == ["used"] and said["line"].tolist() == [2]
    assert said["reason"].iloc[0] == f"agent-acompact-5e1f {NOTE}"
    assert helper_sessions(t) == {helper: f"agent-acompact-5e1f {NOTE}"}
    assert helper_sessions(ctxlab.load(path)) == {}        # without sidechains: no session


def test_the_agent_id_decides_and_the_file_name_corroborates(generated) -> None:
    path, _ = generated
    sub = path.parent / "gen" / "subagents"
    # renamed: the records still say what it is
    (sub / "agent-acompact-5e1f.jsonl").rename(sub / "agent-b7.jsonl")
    t = ctxlab.load(path, sidechains=True)
    assert list(helper_sessions(t)) == [f"{t.sessions[0]}/agent-b7"]
    # an agent's file that says it is an agent is not a summarizer, whatever its name
    (sub / "agent-a9.jsonl").rename(sub / "agent-acompact-a9.jsonl")
    t = ctxlab.load(path, sidechains=True)
    assert list(helper_sessions(t)) == [f"{t.sessions[0]}/agent-b7"]


def test_replay_leaves_the_summarizer_out(generated) -> None:
    path, total = generated
    t = ctxlab.load(path, sidechains=True)
    helper = next(iter(helper_sessions(t)))
    r = ctxlab.replay(t, "neurolink")
    assert helper not in set(r.calls["session"]) and helper not in r.base.sessions
    assert helper not in r.settings.overhead_tokens
    assert r.not_replayed == {helper: f"agent-acompact-5e1f {NOTE}"}
    assert r.summary()["calls"] == len(t.calls) - 1
    # the replay of the agents' sessions alone, its summarizer call (``total`` reported
    # tokens of input, in a session of two parts) counted nowhere
    agents = ctxlab.replay(t.sessions_of(t.sessions[:2]), "neurolink")
    assert r.summary() == agents.summary() and r.calls.equals(agents.calls)
    assert total not in set(r.calls["input_total"].dropna())
    assert r.rewind(5).resume(threshold=0.6).not_replayed == r.not_replayed


def test_sweep_leaves_the_summarizer_out_and_says_so(generated) -> None:
    path, _ = generated
    t = ctxlab.load(path, sidechains=True)
    helper = next(iter(helper_sessions(t)))
    assert replayed_sessions(t) == t.sessions[:2]
    df = sweep(t, {"preset": ["neurolink"]}, workers=1)
    assert df["session"].tolist() == t.sessions[:2]
    assert [r["where"] for r in df.attrs["not_replayed"]] == [f"session {helper}"]
    assert df.attrs["skipped"] == []
    folder = sweep(ctxlab.load_dir(path.parent, sidechains=True), {"preset": ["neurolink"]},
                   workers=1)
    assert folder["session"].tolist() == t.sessions[:2]
    assert folder.attrs["not_replayed"] == df.attrs["not_replayed"]


def test_a_corpus_dataset_keeps_the_mark(generated, tmp_path: Path) -> None:
    from ctxlab.loaders.corpus_store import write_corpus

    path, _ = generated
    write_corpus(path.parent, tmp_path / "ds", sidechains=True, facts=False)
    c = ctxlab.load_dir(tmp_path / "ds", sidechains=True)
    df = sweep(c, {"preset": ["neurolink"]}, workers=1)
    t = ctxlab.load(path, sidechains=True)
    assert df["session"].tolist() == t.sessions[:2]
    assert [r["reason"] for r in df.attrs["not_replayed"]] == [f"agent-acompact-5e1f {NOTE}"]


def test_cli_replay_notes_it_once(generated, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = generated
    assert main(["replay", str(path), "--sidechains"]) == 0
    out, err = capsys.readouterr()
    assert err.count(NOTE) == 1 and "agent-acompact-5e1f" in err
    n = len(ctxlab.load(path, sidechains=True).calls) - 1
    assert f"({n:,} calls, " in out
    sub = path.parent / "gen" / "subagents" / "agent-acompact-5e1f.jsonl"
    assert main(["replay", str(sub)]) == 2      # nothing else to replay: said why
    assert NOTE in capsys.readouterr().err


@pytest.mark.realdata
def test_spotter_replay_with_sidechains_has_no_summarizer_peak(
        capsys: pytest.CaptureFixture[str]) -> None:
    path = realdata_path(f"claude_code/spotter/{SPOTTER}.jsonl")
    t = ctxlab.load(path, sidechains=True)
    helper = f"{SPOTTER}/agent-acompact-e1f845"
    assert helper in t.sessions and list(helper_sessions(t)) == [helper]
    assert t.meta[HELPER_SESSIONS][helper]["event"] == 0
    assert t.session(helper).calls["input_total"].tolist() == [173514]
    r = ctxlab.replay(t, "neurolink")
    s = r.summary()
    assert s["calls"] == 151 and s["peak_tokens"] < 173514 and s["peak_usage"] < 1.0
    assert s["compactions"] == s["calls_compacted"] == 5
    assert main(["replay", str(path), "--sidechains"]) == 0
    out, err = capsys.readouterr()
    assert f"agent-acompact-e1f845 {NOTE}" in err and "(151 calls, " in out
    assert "127.6%" not in out and "173,514" not in out


@pytest.mark.realdata
@pytest.mark.parametrize("stem", ["258c7280-ae70-4798-800f-63464d01a85d", SPOTTER,
                                  "8463c716-a2ea-4c14-9efa-87158ebd9f20"])
def test_spotter_summarizers_are_marked_and_swept_apart(stem: str) -> None:
    path = realdata_path(f"claude_code/spotter/{stem}.jsonl")
    t = ctxlab.load(path, sidechains=True)
    helpers = helper_sessions(t)
    acompact = [s for s in t.sessions if "/agent-acompact-" in s]
    assert list(helpers) == acompact and len(acompact) == 1
    assert replayed_sessions(t) == [s for s in t.sessions if s not in helpers]
    rep = t.load_report.records
    said = rep[rep["reason"].fillna("").str.endswith(NOTE)]
    assert len(said) == 1 and said["status"].iloc[0] == "used"
    assert said["file"].iloc[0].endswith(acompact[0].rpartition("/")[2] + ".jsonl")
