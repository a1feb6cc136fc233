"""Claude Code session JSONL loader: real sessions, a hand-made fixture, corruption."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

import ctxlab
from conftest import DATASETS as DATASETS_DIR, realdata_path
from corrupt_strategies import (assert_accounts, corrupt, corruptions, expected_wheres,
                                orphan_entries, record_wheres)
from ctxlab.errors import LoadError
from ctxlab.loaders import claude_code, claude_code_chain
from golden import check_golden

SPOTTER = {  # session -> (calls, preTokens, last pre-compaction prompt total) per FORMATS.md
    "4d5611e5-241a-462a-8d15-5122611a9569": (139, 170251, 164831),
    "258c7280-ae70-4798-800f-63464d01a85d": (152, 167094, 166759),
    "8463c716-a2ea-4c14-9efa-87158ebd9f20": (143, 167731, 167094),
}
VIEWER = ["5c0375b4-57a5-4f26-b12d-d022ee4e51b7", "fe5e1c67-53e7-4862-81ae-d0e013e3270b"]
REAL = {  # golden name -> file; the ones with sub-agents also get a sidechains=True golden
    **{f"spotter_{s[:8]}": f"spotter/{s}.jsonl" for s in SPOTTER},
    **{f"viewer_{s[:8]}": f"claude-code-viewer/{s}.jsonl" for s in VIEWER},
    "vibecodingtracker": "vibecodingtracker/claude_code.jsonl",
}
GOLDEN = [(name, False) for name in REAL] + [(n, True) for n in REAL if n != "vibecodingtracker"]


def lines_of(path: Path) -> list[int]:
    text = path.read_bytes().decode("utf-8", errors="replace")
    return [i for i, ln in enumerate(text.split("\n"), 1) if ln.strip()]


def assert_every_line_once(t: ctxlab.Transcript, path: Path) -> None:
    """Each line of the file has one entry of its own (an entry for a piece of a record,
    ``line 12 tool_result t1``, sits beside it)."""
    rep = t.load_report.records
    whole = rep["where"].str.split(" ").str.len() <= 2
    got = sorted(rep.loc[(rep["file"] == str(path)) & whole, "line"].astype(int).tolist())
    assert got == lines_of(path)


# ---- real files -------------------------------------------------------------------------
@pytest.mark.realdata
@pytest.mark.parametrize(("name", "sidechains"), GOLDEN)
def test_golden(name: str, sidechains: bool) -> None:
    path = realdata_path(f"claude_code/{REAL[name]}")
    t = ctxlab.load(path, sidechains=sidechains)
    assert t.meta["format"] == "claude_code" and t.meta["path"] == str(path)
    check_golden(f"claude_code__{name}" + ("_sidechains" if sidechains else ""), t)
    for f in t.load_report.records["file"].unique():
        assert_every_line_once(t, Path(f))
    assert t.load_report.parts_made == len(t.frame)
    assert t.load_report.skipped.empty
    assert ctxlab.load(path, sidechains=sidechains, strict=True).frame.equals(t.frame)


@pytest.mark.realdata
@pytest.mark.parametrize("sid", list(SPOTTER))
def test_spotter_calls_and_compaction(sid: str) -> None:
    n_calls, pre_tokens, last_before = SPOTTER[sid]
    path = realdata_path(f"claude_code/spotter/{sid}.jsonl")
    t = ctxlab.load(path)
    assert t.sessions == [sid] and t.meta["version"] == "2.1.39"
    assert t.meta["models"] == ["claude-opus-4-6"] and t.meta["session_ids"] == [sid]
    c = t.calls
    assert len(c) == n_calls == c["call_id"].nunique()
    assert (c["input_total"] == c["input_tokens"] + c["cache_write"] + c["cache_read"]).all()
    ev = t.events
    assert len(ev) == 1 and ev["trigger"].tolist() == ["auto"]
    assert ev["pre_tokens"].tolist() == [pre_tokens] and ev["origin"].tolist() == ["recorded"]
    before = c[c["input_end_pos"] <= ev["pos"].iloc[0]]
    after = c[c["input_end_pos"] > ev["pos"].iloc[0]]
    assert before["input_total"].iloc[-1] == last_before
    assert 32_000 <= after["input_total"].iloc[0] <= 45_000
    f = t.frame
    summary = f[f["kind"] == "summary"]
    assert len(summary) == 1 and summary["role"].iloc[0] == "user"
    assert summary["event"].iloc[0] == 0 and summary["pos"].iloc[0] == ev["pos"].iloc[0]
    assert summary["content"].iloc[0].startswith("This session is being continued")
    assert (f.loc[f["pos"] < ev["pos"].iloc[0], "hidden_by"] == 0).all()
    assert f.loc[f["pos"] >= ev["pos"].iloc[0], "hidden_by"].isna().all()
    eff = t.effective()
    assert eff["hidden_by"].isna().all() and (eff["kind"] == "summary").sum() == 1
    assert eff["pos"].iloc[0] == ev["pos"].iloc[0]
    r = t.rewind_recorded()
    assert (r.frame["kind"] != "summary").all() and r.frame["hidden_by"].isna().all()
    assert len(r.frame) == len(f) - 1 and r.events.empty
    # tool linkage: every call has exactly one result, same tool and file
    calls = f[f["kind"] == "tool_call"].set_index("tool_call_id")
    results = f[f["kind"] == "tool_result"].set_index("tool_call_id")
    assert sorted(calls.index) == sorted(results.index) and calls.index.is_unique
    assert (results["tool_name"] == calls.loc[results.index, "tool_name"]).all()
    assert results["file_path"].fillna("").equals(
        calls.loc[results.index, "file_path"].fillna(""))
    assert (f.loc[f["role"] == "assistant", "call"].notna()).all()
    assert f.loc[f["role"] != "assistant", "call"].isna().all()


@pytest.mark.realdata
def test_spotter_4d5611e5_facts() -> None:
    sid = "4d5611e5-241a-462a-8d15-5122611a9569"
    path = realdata_path(f"claude_code/spotter/{sid}.jsonl")
    recs = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines()]
    usage_lines = sum(r["type"] == "assistant" and "usage" in r["message"] for r in recs)
    assert usage_lines == 254
    t = ctxlab.load(path)
    first = t.calls.iloc[0]
    assert (first["input_tokens"], first["cache_write"], first["cache_read"]) == (3, 15005, 11442)
    assert first["input_total"] == 26450
    meta = json.loads(t.events["meta"].iloc[0])
    s = meta["summarizer_call"]
    assert (s["input_tokens"], s["cache_write"], s["cache_read"]) == (3, 8681, 164830)
    assert s["input_total"] == 173514 and s["model"] == "claude-opus-4-6"
    assert s["source"].endswith("agent-acompact-e1f845.jsonl:5")
    # the boundary's logicalParentUuid is not in the file: the chain continues from line 753
    assert meta["logical_parent_missing"] is True and meta["continued_from_line"] == 753
    f = t.frame
    assert f.loc[f["kind"] == "summary", "pos"].iloc[0] == 191 == (f["hidden_by"] == 0).sum()
    humans = f[(f["turn"].diff().fillna(1) != 0)]
    assert humans["content"].str[:8].tolist() == ["Work on ", "continue"]
    notes = f[f["content"].str.startswith("<task-notification>")]
    assert len(notes) == 1 and json.loads(notes["meta"].iloc[0])["category"] == "task_notification"
    # the acompact file is read for the event, and its records are accounted for
    rep = t.load_report.records
    compact = rep[rep["file"].str.endswith("agent-acompact-e1f845.jsonl")]
    assert compact["status"].tolist() == ["ignored"] * 4 + ["used"]


@pytest.mark.realdata
def test_spotter_sidechains_and_owner() -> None:
    sid = "4d5611e5-241a-462a-8d15-5122611a9569"
    path = realdata_path(f"claude_code/spotter/{sid}.jsonl")
    t = ctxlab.load(path, sidechains=True)
    assert t.sessions == [sid, f"{sid}/agent-a2898e3", f"{sid}/agent-acompact-e1f845"]
    assert t.calls.groupby("session").size().to_dict() == {
        sid: 139, f"{sid}/agent-a2898e3": 12, f"{sid}/agent-acompact-e1f845": 1}
    sub = t.session(f"{sid}/agent-a2898e3")
    assert sub.frame["turn"].max() == 1 and set(sub.calls["model"]) == {
        "claude-sonnet-4-5-20250929"}
    comp = t.session(f"{sid}/agent-acompact-e1f845")
    assert comp.calls["input_total"].tolist() == [173514]
    assert comp.frame["kind"].tolist() == ["text"] * 5     # 3 hook reminders, prompt, reply
    folder = path.parent / sid / "subagents"
    for p in folder.glob("*.jsonl"):
        assert claude_code.owner(p) == path
    assert claude_code.owner(path) is None
    corpus = ctxlab.load_dir(path.parent)
    files = corpus.files.set_index("path")
    assert files.loc[str(folder / "agent-a2898e3.jsonl"), "status"] == "part-of"
    assert files.loc[str(path), "status"] == "log"


@pytest.mark.realdata
def test_viewer_interleaved_sidechains() -> None:
    path = realdata_path(f"claude_code/claude-code-viewer/{VIEWER[1]}.jsonl")
    t = ctxlab.load(path)
    rep = t.load_report.records
    assert (rep["reason"] == claude_code.SIDECHAIN).sum() == 405
    assert len(t.calls) == 9 and t.meta["titles"] == [
        "Empty Repo Setup: CLAUDE.md Foundation Created"]
    assert rep.loc[rep["record"] == "summary", "status"].tolist() == ["ignored"]
    assert t.frame["turn"].max() == 2            # the /orchestrator prompt command, "Thanks!..."
    ts = ctxlab.load(path, sidechains=True)
    assert len(ts.sessions) == 6 and len(ts.calls) == 170
    assert all(s.startswith(f"{VIEWER[1]}/") for s in ts.sessions[1:])
    assert (ts.load_report.records["status"] == "used").sum() == 437


@pytest.mark.realdata
def test_vibecodingtracker_resumed_session() -> None:
    path = realdata_path("claude_code/vibecodingtracker/claude_code.jsonl")
    t = ctxlab.load(path)
    assert t.sessions == ["b162b1ae-97bc-475f-9b5f-ffbf55ca5b3f"]
    assert t.meta["session_ids"] == ["e9f146fa-3b20-48d0-9be4-d99ca901cae4",
                                     "b162b1ae-97bc-475f-9b5f-ffbf55ca5b3f"]
    assert len(t.calls) == 32
    na = t.calls[t.calls["input_total"].isna()]
    assert na["call_id"].tolist() == ["msg_taskstop_1"]       # recorded with "usage": {}
    rep = t.load_report.records.set_index("line")
    assert rep.loc[48, "reason"] == "duplicate uuid: superseded by the copy at line 49"
    f = t.frame
    assert f["turn"].max() == 4                      # /mcp and /exit are local commands
    cats = f["meta"].map(lambda m: json.loads(m).get("category"))
    assert cats.value_counts().to_dict() == {"local_command": 2, "command": 2, "interrupt": 2}
    assert (f["content"].str.contains("[\u4e00-\u9fff]", regex=True)).any()
    mcp = f[f["tool_name"].fillna("").str.startswith("mcp__")]
    assert len(mcp) == 10 and set(mcp["kind"]) == {"tool_call", "tool_result"}


@pytest.mark.realdata
def test_strict_raises_on_corrupted_real_copy(tmp_path: Path) -> None:
    src = realdata_path("claude_code/vibecodingtracker/claude_code.jsonl")
    lines = src.read_text(encoding="utf-8").split("\n")
    cid = claude_code_chain.tool_use_ids(json.loads(lines[9]))[0]    # the call of line 10
    lines[9] = lines[9][: len(lines[9]) // 2]
    p = tmp_path / "copy.jsonl"
    p.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(LoadError) as e:
        ctxlab.load(p, strict=True)
    assert f"{p}:10" in str(e.value)
    t = ctxlab.load(p)
    assert t.load_report.skipped["line"].tolist() == [10, 12]
    assert orphan_entries(t) == [(12, f"line 12 tool_result {cid}")]   # its result: kept
    assert_every_line_once(t, p)


# ---- hand-made fixture ------------------------------------------------------------------
def _usage(inp: int, write: int, read: int, out: int) -> dict[str, Any]:
    return {"input_tokens": inp, "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read, "output_tokens": out}


class _Log:
    """Writes records with Claude Code's envelope; parents chain unless given."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.last: str | None = None
        self.n = 0

    def add(self, kind: str, parent: Any = "last", **fields: Any) -> str:
        self.n += 1
        uuid = fields.pop("uuid", f"u{self.n}")
        rec = {"parentUuid": self.last if parent == "last" else parent, "isSidechain": False,
               "userType": "external", "cwd": "/w", "sessionId": "sess-1", "version": "2.1.0",
               "gitBranch": "main", "type": kind, "uuid": uuid,
               "timestamp": f"2026-01-01T00:00:{self.n:02d}.000Z", **fields}
        self.records.append(rec)
        if not rec["isSidechain"]:
            self.last = uuid
        return uuid

    def user(self, content: Any, parent: Any = "last", **kw: Any) -> str:
        return self.add("user", parent, message={"role": "user", "content": content}, **kw)

    def assistant(self, mid: str, block: dict[str, Any], usage: dict[str, Any] | None,
                  parent: Any = "last", model: str = "claude-test", **kw: Any) -> str:
        msg = {"model": model, "id": mid, "type": "message", "role": "assistant",
               "content": [block], "stop_reason": None}
        if usage is not None:
            msg["usage"] = usage
        return self.add("assistant", parent, message=msg, requestId=f"req_{mid}", **kw)


def fixture_records() -> list[dict[str, Any]]:
    g = _Log()
    g.records.append({"type": "file-history-snapshot", "messageId": "m0", "snapshot": {},
                      "isSnapshotUpdate": False})
    g.records.append({"type": "summary", "summary": "Fixture title", "leafUuid": "zz"})
    g.add("progress", None, data={"type": "hook_progress", "hookEvent": "SessionStart"})
    g.user("Fix the bug in a.py")
    g.assistant("msg_1", {"type": "thinking", "thinking": "Look first.", "signature": "sig"},
                _usage(10, 100, 1000, 3))
    read = g.assistant("msg_1", {"type": "tool_use", "id": "t1", "name": "Read",
                                 "input": {"file_path": "/w/a.py"}}, _usage(10, 100, 1000, 3))
    g.add("progress", data={"type": "hook_progress", "hookEvent": "PreToolUse"})
    g.user([{"type": "tool_result", "tool_use_id": "t1", "content": [
        {"type": "text", "text": "1\tprint(1)"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBO"}}]}],
        parent=read, toolUseResult={"file": {"filePath": "/w/a.py", "content": "print(1)"}})
    g.last = read
    g.assistant("msg_1", {"type": "tool_use", "id": "t2", "name": "Bash",
                          "input": {"command": "ls"}}, _usage(10, 100, 1000, 77))
    g.user([{"type": "tool_result", "tool_use_id": "t2", "content": "a.py", "is_error": True}],
           toolUseResult="Error: exit 1")
    found = g.assistant("msg_2", {"type": "text", "text": "Found it."}, _usage(1, 50, 1110, 5))
    g.user("Actually, stop.", parent=found)                    # abandoned: the user edited it
    g.user([{"type": "text", "text": "Please also add tests"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "AAAA"}}], parent=found)
    g.add("user", isSidechain=True, parent=None, uuid="side-root",
          message={"role": "user", "content": "Sub task"})
    g.add("assistant", isSidechain=True, parent="side-root", requestId="r",
          message={"model": "claude-sub", "id": "msg_s", "role": "assistant",
                   "content": [{"type": "text", "text": "Sub done"}], "usage": _usage(5, 0, 0, 2)})
    g.assistant("msg_3", {"type": "text", "text": "Added tests."}, _usage(1, 20, 1160, 4))
    g.user("Caveat: The messages below were generated by the user while running local "
           "commands.", isMeta=True)
    g.user("<command-name>/mcp</command-name>\n<command-message>mcp</command-message>")
    g.user("<local-command-stdout>ok</local-command-stdout>")
    g.add("system", subtype="api_error", level="error", content="overloaded")
    last_before = g.last
    g.add("system", None, subtype="compact_boundary", content="Conversation compacted",
          logicalParentUuid=last_before, compactMetadata={"trigger": "manual", "preTokens": 1234})
    g.user("This session is being continued from a previous conversation. Summary: bug fixed.",
           isCompactSummary=True, isVisibleInTranscriptOnly=True)
    g.user("shown in the UI only", isVisibleInTranscriptOnly=True)
    g.user("<task-notification>\n<task-id>b1</task-id>\n</task-notification>")
    g.user("Continue please")
    g.assistant("msg_s0", {"type": "text", "text": "No response requested."},
                _usage(0, 0, 0, 0), model="<synthetic>")
    g.assistant("msg_4", {"type": "text", "text": "Continuing."}, _usage(2, 300, 0, 6))
    g.records.append({"type": "weird-type", "uuid": "w1"})
    return g.records


def write(tmp_path: Path, records: list[dict[str, Any]], name: str = "sess-1.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                 encoding="utf-8")
    return p


def write_subagents(main: Path) -> Path:
    folder = main.parent / main.stem / "subagents"
    folder.mkdir(parents=True)
    env = {"isSidechain": True, "userType": "external", "cwd": "/w", "sessionId": "sess-1",
           "version": "2.1.0", "gitBranch": "main"}
    write(folder, [
        {**env, "agentId": "acompact-1", "parentUuid": "u20", "type": "user", "uuid": "c1",
         "timestamp": "2026-01-01T00:00:20.500Z",
         "message": {"role": "user", "content": "Your task is to create a detailed summary"}},
        {**env, "agentId": "acompact-1", "parentUuid": "c1", "type": "assistant", "uuid": "c2",
         "timestamp": "2026-01-01T00:00:21.000Z", "requestId": "req_c",
         "message": {"model": "claude-test", "id": "msg_c", "role": "assistant",
                     "content": [{"type": "text", "text": "Summary: bug fixed."}],
                     "usage": _usage(3, 8, 1300, 40)}}], "agent-acompact-1.jsonl")
    write(folder, [
        {**env, "agentId": "a9", "parentUuid": None, "type": "user", "uuid": "d1",
         "timestamp": "2026-01-01T00:00:05.000Z",
         "message": {"role": "user", "content": "Explore"}},
        {**env, "agentId": "a9", "parentUuid": "d1", "type": "assistant", "uuid": "d2",
         "timestamp": "2026-01-01T00:00:06.000Z", "requestId": "req_d",
         "message": {"model": "claude-sub", "id": "msg_d", "role": "assistant",
                     "content": [{"type": "text", "text": "Explored."}],
                     "usage": _usage(1, 2, 3, 4)}}], "agent-a9.jsonl")
    return folder


def test_fixture_parts_calls_turns(tmp_path: Path) -> None:
    p = write(tmp_path, fixture_records())
    assert ctxlab.loaders.detect(p).name == "claude_code"
    t = ctxlab.load(p)
    f = t.frame.sort_values("pos")
    assert t.sessions == ["sess-1"] and t.meta["titles"] == ["Fixture title"]
    assert t.meta["version"] == "2.1.0" and t.meta["cwd"] == "/w" and t.meta["git_branch"] == "main"
    assert f["kind"].tolist() == [
        "text", "thinking", "tool_call", "tool_call", "tool_result", "image", "tool_result",
        "text", "text", "image", "text", "text", "text", "text", "summary", "text", "text",
        "text", "text"]
    assert f["turn"].tolist() == [1] * 8 + [2] * 8 + [3] * 3
    assert f["msg"].tolist() == [0, 1, 1, 1, 2, 2, 2, 3, 4, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    # one call per message.id, usage of the last line; the <synthetic> line makes no call
    c = t.calls
    assert c["call_id"].tolist() == ["msg_1", "msg_2", "msg_3", "msg_4"]
    assert c["input_total"].tolist() == [1110, 1161, 1181, 302]
    assert c["output_tokens"].tolist() == [77, 5, 4, 6]
    assert c["input_end_pos"].tolist() == [1.0, 7.0, 10.0, 18.0]
    assert f["call"].fillna(-1).tolist() == [-1, 0, 0, 0, -1, -1, -1, 1, -1, -1, 2] + [-1] * 6 \
        + [-1, 3]
    # tool linkage, file path from the call's arguments, images split from the result
    res = f[f["tool_call_id"].notna() & (f["role"] == "user")]
    assert res["tool_name"].tolist() == ["Read", "Read", "Bash"]
    assert res["file_path"].fillna("-").tolist() == ["/w/a.py", "/w/a.py", "-"]
    assert res["content"].iloc[0] == "1\tprint(1)"
    meta = [json.loads(m) for m in res["meta"]]
    assert meta[0]["toolUseResult"] == {"keys": ["file"], "size": 56}
    assert meta[2]["is_error"] is True and meta[2]["toolUseResult"]["keys"] == "str"
    assert json.loads(f["meta"].iloc[1])["signature"] == "sig"
    cats = f["meta"].map(lambda m: json.loads(m).get("category")).fillna("-").tolist()
    assert cats[11:17] == ["-", "command", "local_command", "-", "task_notification", "-"]
    assert json.loads(f["meta"].iloc[11])["isMeta"] is True
    # the recorded compaction
    ev = t.events.iloc[0]
    assert (ev["trigger"], ev["pre_tokens"], ev["pos"]) == ("manual", 1234, 14.0)
    assert "summarizer_call" not in json.loads(ev["meta"])
    assert (f["hidden_by"].fillna(-1) == [0] * 14 + [-1] * 5).all()
    assert f.loc[f["kind"] == "summary", "event"].tolist() == [0]
    assert t.effective()["kind"].tolist()[0] == "summary"
    r = t.rewind_recorded()
    assert len(r.frame) == 18 and r.frame["hidden_by"].isna().all()
    # the report: one entry per line, with the reasons
    assert_every_line_once(t, p)
    rep = t.load_report.records.set_index("line")
    assert rep.loc[12, "reason"] == claude_code.OFF_CHAIN          # "Actually, stop."
    assert rep.loc[14, "reason"] == rep.loc[15, "reason"] == claude_code.SIDECHAIN
    assert rep.loc[20, "reason"].startswith("system (api_error)")
    assert rep.loc[23, "reason"].startswith("visible in the transcript only")
    assert rep.loc[2, "reason"].startswith("session title")
    assert rep.loc[7, "reason"].startswith("progress (hook_progress)")
    assert rep.loc[28, "status"] == "skipped" and "weird-type" in rep.loc[28, "reason"]
    assert rep.loc[21, "status"] == "used" and rep.loc[21, "parts"] == 0   # the boundary


def test_fixture_sidechains_and_subagent_files(tmp_path: Path) -> None:
    p = write(tmp_path, fixture_records())
    folder = write_subagents(p)
    t = ctxlab.load(p)
    s = json.loads(t.events["meta"].iloc[0])["summarizer_call"]
    assert s["input_total"] == 1311 and s["call_id"] == "msg_c" and s["agent_id"] == "acompact-1"
    assert t.sessions == ["sess-1"]
    rep = t.load_report.records
    assert set(rep["file"]) == {str(p), str(folder / "agent-acompact-1.jsonl"),
                                str(folder / "agent-a9.jsonl")}
    assert_every_line_once(t, folder / "agent-a9.jsonl")       # its lines: ignored, said so
    assert set(rep.loc[rep["file"] == str(folder / "agent-a9.jsonl"), "status"]) == {"ignored"}
    ts = ctxlab.load(p, sidechains=True)
    assert ts.sessions == ["sess-1", "sess-1/side-root", "sess-1/agent-a9",
                           "sess-1/agent-acompact-1"]
    assert ts.calls.groupby("session", sort=False)["call_id"].agg(list).to_dict() == {
        "sess-1": ["msg_1", "msg_2", "msg_3", "msg_4"], "sess-1/side-root": ["msg_s"],
        "sess-1/agent-a9": ["msg_d"], "sess-1/agent-acompact-1": ["msg_c"]}
    for f in ts.load_report.records["file"].unique():
        assert_every_line_once(ts, Path(f))
    assert claude_code.owner(folder / "agent-a9.jsonl") == p
    alone = ctxlab.load(folder / "agent-a9.jsonl")
    assert alone.sessions == ["sess-1/agent-a9"] and alone.frame["turn"].max() == 1


def test_strict_raises_on_unknown_record(tmp_path: Path) -> None:
    p = write(tmp_path, fixture_records())
    with pytest.raises(LoadError, match=rf"{p.name}:28.*weird-type"):
        ctxlab.load(p, strict=True)


def test_shape_errors_are_skipped_not_raised(tmp_path: Path) -> None:
    recs = fixture_records()
    recs[3]["message"]["content"] = 5                        # the first user prompt
    recs[8]["message"]["content"][0]["name"] = ["x"]         # the Bash tool_use
    recs.append([1, 2])
    p = write(tmp_path, recs)
    t = ctxlab.load(p)
    skipped = t.load_report.skipped.set_index("line")["reason"]
    assert sorted(skipped.index) == [4, 9, 10, 28, 29]
    assert skipped[4].startswith("unexpected shape")
    assert orphan_entries(t) == [(10, "line 10 tool_result t2")]    # the Bash call was line 9
    assert_every_line_once(t, p)
    with pytest.raises(LoadError, match=rf"{p.name}:(4|9|28|29): "):
        ctxlab.load(p, strict=True)


def test_sniff_does_not_claim_other_jsonl(tmp_path: Path) -> None:
    gemini = tmp_path / "session.jsonl"
    gemini.write_text(json.dumps({"sessionId": "s", "projectHash": "h", "kind": "main"}) + "\n"
                      + json.dumps({"id": "1", "type": "user", "content": "hi"}) + "\n")
    codex = tmp_path / "rollout.jsonl"
    codex.write_text(json.dumps({"timestamp": "t", "type": "session_meta",
                                 "payload": {"id": "x", "parentUuid": "y"}}) + "\n")
    for other in (gemini, codex):
        assert not claude_code.sniff(other, other.read_text())
    p = write(tmp_path, fixture_records())
    assert claude_code.sniff(p, p.read_text())
    assert not claude_code.sniff(p.with_suffix(".json"), p.read_text())


@settings(max_examples=40, deadline=None)
@given(c=corruptions)
def test_corruption_is_reported_or_raises(tmp_path_factory: pytest.TempPathFactory,
                                          c: tuple[str, int, int, bytes]) -> None:
    good = "".join(json.dumps(r) + "\n" for r in fixture_records()).encode()
    data = corrupt(good, c)
    p = tmp_path_factory.mktemp("cc") / "sess.jsonl"
    p.write_bytes(data)
    try:
        t = ctxlab.load(p)
    except LoadError:
        return
    expected = expected_wheres(data, jsonl=True)
    assert expected is not None
    assert_accounts(t, expected)
    # no other entry, but for pieces of a record beside its own (an orphan tool result)
    assert record_wheres(t) == sorted(expected)
    assert t.load_report.parts_made == len(t.frame)


def test_cut_file_reports_truncated_last_line(tmp_path: Path) -> None:
    data = write(tmp_path, fixture_records()).read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) // 2])
    t = ctxlab.load(cut)
    assert t.load_report.skipped["reason"].str.startswith("truncated last line").all()
    assert len(t.load_report.skipped) == 1
    assert_every_line_once(t, cut)


@pytest.mark.parametrize("how", ["unparseable", "no message object"])
@pytest.mark.parametrize("which", [0.25, 0.5, 0.9])
def test_a_lost_line_does_not_cut_the_conversation_before_it(tmp_path: Path,
                                                             which: float, how: str) -> None:
    """One unreadable line mid-file (not JSON, or a record of an unexpected shape), a
    message that later records hang off: the records whose parent it was continue from
    the conversation record before it (meta ``chain_bridged``), instead of every earlier
    record falling off the chain (reported as never sent, which they were)."""
    from tests.conftest import DATASETS

    lines = (DATASETS / "coding_session_b.jsonl").read_text(encoding="utf-8").split("\n")
    recs = [json.loads(x) for x in lines if x.strip()]
    parents = {r.get("parentUuid") for r in recs}
    linked = [i + 1 for i, r in enumerate(recs)
              if r.get("type") in ("user", "assistant") and r.get("uuid") in parents]
    lost = linked[int(which * len(linked))]
    whole = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    if how == "unparseable":
        lines[lost - 1] = lines[lost - 1][10:]
    else:
        lines[lost - 1] = json.dumps({k: v for k, v in recs[lost - 1].items()
                                      if k != "message"})
    p = tmp_path / "lost.jsonl"
    p.write_text("\n".join(lines), encoding="utf-8")
    t = ctxlab.load(p)
    rep = t.load_report.records
    orphans = orphan_entries(t)     # results of the lost line's tool calls: kept, reported
    assert {w.split(" ")[-1] for _, w in orphans} <= \
        set(claude_code_chain.tool_use_ids(recs[lost - 1]))
    assert rep.loc[rep["status"] == "skipped", "line"].tolist() == \
        sorted([lost] + [line for line, _ in orphans])
    assert (rep["reason"] == claude_code.OFF_CHAIN).sum() <= 2
    assert len(t.calls) >= len(whole.calls) - 1
    assert t.meta.get("chain_bridged") and "chain_bridged" not in whole.meta
    assert t.frame["content"].iloc[:5].tolist() == whole.frame["content"].iloc[:5].tolist()


@pytest.mark.parametrize("name", ["258c7280-ae70-4798-800f-63464d01a85d",
                                  "4d5611e5-241a-462a-8d15-5122611a9569",
                                  "8463c716-a2ea-4c14-9efa-87158ebd9f20"])
def test_a_lost_compaction_summary_keeps_the_compaction(tmp_path: Path, name: str) -> None:
    """The summary record after a compact_boundary lost: the chain goes on from the
    boundary (and through it), so the compaction stays and the old history stays hidden."""
    path = realdata_path(f"claude_code/spotter/{name}.jsonl")
    lines = path.read_text(encoding="utf-8").split("\n")
    at = next(i for i, x in enumerate(lines) if '"isCompactSummary":true' in x.replace(" ", ""))
    lines[at] = lines[at][:len(lines[at]) // 2]
    p = tmp_path / f"{name}.jsonl"
    p.write_text("\n".join(lines), encoding="utf-8")
    whole, t = ctxlab.load(path), ctxlab.load(p)
    assert len(t.events) == len(whole.events) >= 1
    visible = int(t.frame["hidden_by"].isna().sum())
    assert visible <= int(whole.frame["hidden_by"].isna().sum())
    assert list(t.meta["chain_bridged"].values()) == [at]      # the boundary's line (1-based)


def test_a_lost_line_does_not_bring_back_a_branch_a_rewind_left(tmp_path: Path) -> None:
    """The user edited message 21 (a new copy hangs off line 20), then line 20 was lost:
    both copies continue from line 19, and the abandoned branch (21-30) stays off."""
    src = realdata_path("claude_code/vibecodingtracker/claude_code.jsonl")
    recs = [json.loads(x) for x in src.read_text(encoding="utf-8").split("\n")[:30]]
    assert recs[20]["type"] == "user" and recs[20]["parentUuid"] == recs[19]["uuid"]
    edited = {**recs[20], "uuid": "edited-21", "message": {"role": "user",
                                                           "content": "EDITED PROMPT"}}
    answer = {"type": "assistant", "uuid": "answer-32", "parentUuid": "edited-21",
              "isSidechain": False, "sessionId": recs[0]["sessionId"],
              "message": {"id": "msg-answer-32", "role": "assistant", "model": "m",
                          "content": [{"type": "text", "text": "EDITED ANSWER"}]}}
    lines = [json.dumps(r) for r in recs + [edited, answer]]

    def used(lost: int | None) -> set[int]:
        out = list(lines)
        if lost is not None:
            out[lost - 1] = out[lost - 1][:30]
        p = tmp_path / f"rewound{lost}.jsonl"
        p.write_text("\n".join(out) + "\n", encoding="utf-8")
        rep = ctxlab.load(p).load_report.records.set_index("line")
        return {int(x) for x in rep.index[rep["status"] == "used"]}

    intact = used(None)
    assert {31, 32} <= intact and not intact & set(range(21, 31))
    assert used(20) == intact - {20}


def test_a_usage_count_that_is_no_count_leaves_the_total_unknown_and_is_reported(
        tmp_path: Path) -> None:
    """cache_read_input_tokens as a text: the total was summed from the other counts
    (14,603 billed instead of 36,081) with nothing in the report."""
    import pandas as pd

    src = realdata_path("claude_code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl")
    lines = src.read_text(encoding="utf-8").split("\n")
    rec = json.loads(lines[762])
    assert rec["message"]["usage"]["cache_read_input_tokens"] == 21478
    rec["message"]["usage"]["cache_read_input_tokens"] = "21478"
    lines[762] = json.dumps(rec)
    p = tmp_path / src.name
    p.write_text("\n".join(lines), encoding="utf-8")
    t = ctxlab.load(p)
    good = ctxlab.load(src)
    mid = rec["message"]["id"]
    row = t.calls[t.calls["call_id"] == mid].iloc[0]
    assert pd.isna(row["input_total"]) and pd.isna(row["cache_read"])
    assert good.calls.loc[good.calls["call_id"] == mid, "input_total"].iloc[0] == 36_081
    sk = t.load_report.skipped
    assert sk["record"].tolist() == ["usage"] and sk["line"].tolist() == [763]
    assert "'21478' is not a whole number" in sk["reason"].iloc[0]


@pytest.mark.parametrize("which", [0.3, 0.7])
def test_a_message_without_its_parent_key_continues_the_conversation(tmp_path: Path,
                                                                     which: float) -> None:
    """A user or assistant record written without the ``parentUuid`` key (a root has it,
    as null) continues from the record written before it (meta ``chain_bridged``): every
    record before it used to fall off the chain, reported as never sent."""
    from tests.conftest import DATASETS

    lines = (DATASETS / "coding_session_b.jsonl").read_text(encoding="utf-8").split("\n")
    recs = [json.loads(x) for x in lines if x.strip()]
    parents = {r.get("parentUuid") for r in recs}
    convo = [i for i, r in enumerate(recs) if r.get("type") in ("user", "assistant")
             and isinstance(r.get("parentUuid"), str) and r.get("uuid") in parents]
    at = convo[int(which * len(convo))]
    whole = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    lines[at] = json.dumps({k: v for k, v in recs[at].items() if k != "parentUuid"})
    p = tmp_path / "unlinked.jsonl"
    p.write_text("\n".join(lines), encoding="utf-8")
    t = ctxlab.load(p)
    rep = t.load_report.records
    assert not (rep["reason"] == claude_code.OFF_CHAIN).any()
    assert len(t.calls) == len(whole.calls)
    assert t.frame["content"].tolist() == whole.frame["content"].tolist()
    assert list(t.meta["chain_bridged"]) == [f"unlinked.jsonl:{at + 1}"]


def test_prompts_queued_while_the_agent_worked_reach_the_model():
    """spotter 258c7280: the user typed "check again" and "new beads ... tackle them"
    while tools ran (queue-operation enqueue, then remove). No user record holds them,
    yet Claude Code's summary lists both among the user's messages: they are user
    messages of their own, new turns, after the results sent with them. Task
    notifications queued the same way arrive as user records and are not doubled."""
    t = ctxlab.load(realdata_path(
        "claude_code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"))
    f = t.frame
    queued = f[f["meta"].astype(str).str.contains('"category": "queued"')]
    said = claude_code.QUEUED
    assert queued["content"].tolist() == [said + "check again",
                                          said + "new beads for the epic were added. tackle them"]
    assert (queued["role"] == "user").all() and (queued["kind"] == "text").all()
    for _, q in queued.iterrows():
        before = f[f["msg"] == q["msg"] - 1]
        assert (before["kind"] == "tool_result").all()            # sent with these results
        assert q["turn"] == before["turn"].iloc[0] + 1
    summary = f.loc[f["kind"] == "summary", "content"].iloc[0]
    assert "check again" in summary and "tackle them" in summary
    rep = t.load_report.records
    ops = rep[rep["record"] == "queue-operation"].set_index("line")
    assert ops.loc[[497, 505, 603, 604], "status"].tolist() == ["used"] * 4
    assert (ops.loc[[280, 520], "status"] == "ignored").all()     # task notifications
    notes = f["content"].str.startswith("<task-notification>").sum()
    assert notes == 2


def test_a_queued_prompt_sent_as_a_record_or_never_taken_is_not_added(tmp_path: Path):
    """A prompt dequeued (sent as a turn of its own: the user record follows) or left
    in the queue adds nothing; a user record with its text while it is queued is it."""
    lines = (DATASETS_DIR / "coding_session_b.jsonl").read_text(encoding="utf-8").split("\n")
    recs = [json.loads(x) for x in lines if x.strip()]
    user = next(r for r in recs[5:] if r.get("type") == "user"
                and isinstance(r["message"]["content"], str))
    sid = recs[0].get("sessionId")
    extra = [{"type": "queue-operation", "operation": "enqueue", "sessionId": sid,
              "timestamp": "2026-01-01T00:00:00Z", "content": user["message"]["content"]},
             {"type": "queue-operation", "operation": "dequeue", "sessionId": sid,
              "timestamp": "2026-01-01T00:00:01Z"},
             {"type": "queue-operation", "operation": "enqueue", "sessionId": sid,
              "timestamp": "2026-01-01T00:00:02Z", "content": "never taken"}]
    p = tmp_path / "q.jsonl"
    p.write_text("\n".join([json.dumps(r) for r in recs[:3] + extra + recs[3:]]),
                 encoding="utf-8")
    t, whole = ctxlab.load(p), ctxlab.load(DATASETS_DIR / "coding_session_b.jsonl")
    assert t.frame["content"].tolist() == whole.frame["content"].tolist()
    ops = t.load_report.records
    ops = ops[ops["record"] == "queue-operation"]
    assert ops["status"].tolist() == ["ignored"] * 3


def _with_queue(tmp_path: Path, ops: list[dict[str, Any]], at: int = 3) -> ctxlab.Transcript:
    """coding_session_b with queue records (and user records) inserted after line ``at``."""
    lines = (DATASETS_DIR / "coding_session_b.jsonl").read_text(encoding="utf-8").split("\n")
    recs = [json.loads(x) for x in lines if x.strip()]
    sid = recs[0].get("sessionId")
    extra = [{"type": "queue-operation", "sessionId": sid,
              "timestamp": "2026-01-01T00:00:00Z", **op} for op in ops]
    p = tmp_path / "q.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs[:at] + extra + recs[at:]),
                 encoding="utf-8")
    return ctxlab.load(p)


def _queued(t: ctxlab.Transcript) -> list[str]:
    f = t.frame
    return f.loc[f["meta"].astype(str).str.contains('"category": "queued"'),
                 "content"].str.removeprefix(claude_code.QUEUED).tolist()


@pytest.mark.parametrize("ops, want", [
    # popAll puts the prompt back in the input box: the later remove takes "check again"
    ([{"operation": "enqueue", "content": "fix X"}, {"operation": "popAll"},
      {"operation": "enqueue", "content": "check again"}, {"operation": "remove"}],
     ["check again"]),
    # dequeue sends it as a turn of its own (a user record): not this prompt's place
    ([{"operation": "enqueue", "content": "look"}, {"operation": "dequeue"},
      {"operation": "enqueue", "content": "stop"}, {"operation": "remove"}], ["stop"]),
    # a remove that names its text takes that one
    ([{"operation": "enqueue", "content": "a"}, {"operation": "enqueue", "content": "b"},
      {"operation": "remove", "content": "b"}], ["b"]),
    # one queued prompt, one remove
    ([{"operation": "enqueue", "content": "yes"}, {"operation": "remove"}], ["yes"]),
])
def test_the_queue_operations_decide_which_prompt_was_taken(tmp_path, ops, want):
    assert _queued(_with_queue(tmp_path, ops)) == want


def test_a_microcompaction_clears_the_named_tool_results(tmp_path: Path):
    """Newer Claude Code clears old tool results in place and writes a
    ``microcompact_boundary``: it was ignored as a CLI status record, so every cleared
    result stayed in every later request."""
    lines = (DATASETS_DIR / "coding_session_b.jsonl").read_text(encoding="utf-8").split("\n")
    recs = [json.loads(x) for x in lines if x.strip()]
    whole = ctxlab.load(DATASETS_DIR / "coding_session_b.jsonl")
    results = whole.frame[whole.frame["kind"] == "tool_result"]
    ids = results["tool_call_id"].head(3).tolist()
    # the boundary goes after the 40th record, linked into the chain like any record
    at = 40
    prev = next(r for r in reversed(recs[:at]) if r.get("type") in ("user", "assistant"))
    nxt = next(i for i in range(at, len(recs)) if recs[i].get("parentUuid") == prev["uuid"])
    boundary = {"type": "system", "subtype": "microcompact_boundary", "uuid": "mc-1",
                "parentUuid": prev["uuid"], "isSidechain": False,
                "sessionId": prev["sessionId"], "timestamp": prev["timestamp"],
                "content": "Context microcompacted",
                "microcompactMetadata": {"trigger": "auto", "preTokens": 91234,
                                         "tokensSaved": 5000, "compactedToolIds": ids}}
    recs[nxt] = {**recs[nxt], "parentUuid": "mc-1"}
    p = tmp_path / "mc.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs[:at] + [boundary] + recs[at:]),
                 encoding="utf-8")
    t = ctxlab.load(p)
    ev = t.events
    assert len(ev) == len(whole.events) + 1
    e = ev.iloc[-1]
    assert (e["origin"], e["trigger"], int(e["pre_tokens"])) == ("recorded", "auto", 91234)
    f = t.frame
    cleared = f[f["tool_call_id"].isin(ids) & (f["kind"] == "tool_result")]
    assert (cleared["hidden_by"] == e["event"]).sum() == 3
    new = cleared[cleared["event"] == e["event"]]
    assert new["content"].tolist() == ["[Old tool result content cleared]"] * 3
    for _, row in new.iterrows():            # in the place of the result it replaced
        old = cleared[(cleared["tool_call_id"] == row["tool_call_id"])
                      & (cleared["hidden_by"] == e["event"])].iloc[0]
        assert row["msg"] == old["msg"] and row["pos"] > old["pos"]
    assert t.rewind_recorded().frame["content"].tolist() == whole.frame["content"].tolist()
    later = t.effective()
    assert (later["content"] == "[Old tool result content cleared]").sum() == 3


def test_a_queued_command_attachment_is_the_prompt_and_other_attachments_are_said(
        tmp_path: Path):
    """Newer CLIs record a prompt taken into the running turn as an ``attachment`` record
    (type queued_command) on the chain, then a ``remove``: one user message, not two.
    Other attachments are reported as ignored with their type; they were skipped as an
    unknown record type (an error under strict), the chain bridged over them."""
    lines = (DATASETS_DIR / "coding_session_b.jsonl").read_text(encoding="utf-8").split("\n")
    recs = [json.loads(x) for x in lines if x.strip()]
    at = 40
    prev = next(r for r in reversed(recs[:at]) if r.get("type") in ("user", "assistant"))
    nxt = next(i for i in range(at, len(recs)) if recs[i].get("parentUuid") == prev["uuid"])
    base = {"parentUuid": prev["uuid"], "isSidechain": False, "sessionId": prev["sessionId"],
            "timestamp": prev["timestamp"]}
    hook = {**base, "type": "attachment", "uuid": "att-1",
            "attachment": {"type": "hook_success", "content": "ok"}}
    queued = {**base, "type": "attachment", "uuid": "att-2", "parentUuid": "att-1",
              "attachment": {"type": "queued_command", "commandMode": "prompt",
                             "origin": {"kind": "human"}, "prompt": "also run the linter"}}
    ops = [{"type": "queue-operation", "operation": "enqueue", "sessionId": base["sessionId"],
            "timestamp": base["timestamp"], "content": "also run the linter"},
           {"type": "queue-operation", "operation": "remove", "sessionId": base["sessionId"],
            "timestamp": base["timestamp"]}]
    recs[nxt] = {**recs[nxt], "parentUuid": "att-2"}
    p = tmp_path / "att.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs[:at] + ops[:1] + [hook, queued]
                           + ops[1:] + recs[at:]), encoding="utf-8")
    for strict in (False, True):
        t = ctxlab.load(p, strict=strict)
        assert _queued(t) == ["also run the linter"]
        rep = t.load_report.records.set_index("line")
        assert rep.loc[at + 2, "status"] == "ignored" and "hook_success" in rep.loc[at + 2,
                                                                                   "reason"]
        assert rep.loc[at + 3, "status"] == "used"
        assert "chain_bridged" not in t.meta


def test_queue_edge_cases_from_a_fuzz(tmp_path: Path):
    """A queued "yes" taken by a remove is a prompt even though the user types "yes"
    again later; a task notification queued before another prompt is not what a later
    remove takes; an unreadable timestamp on a queued prompt is reported, not a crash (the
    prompt is kept); a
    queue record with a uuid is still reported as used."""
    later = [{"operation": "enqueue", "content": "yes"}, {"operation": "remove"}]
    t = _with_queue(tmp_path, later)
    assert _queued(t) == ["yes"]
    note = [{"operation": "enqueue", "content": "<task-notification>\n<task-id>x</task-id>"},
            {"operation": "enqueue", "content": "tackle them"}, {"operation": "remove"}]
    assert _queued(_with_queue(tmp_path, note)) == ["tackle them"]
    bad = [{"operation": "enqueue", "content": "stop", "timestamp": 1e20},
           {"operation": "remove"}]
    t = _with_queue(tmp_path, bad)
    rep = t.load_report.records
    assert _queued(t) == ["stop"]       # kept; only its time is left empty, and reported
    assert rep.loc[rep["record"] == "queue-operation", "status"].tolist() == ["used", "used"]
    assert rep.loc[rep["record"] == "timestamp", "where"].tolist() == ["line 4 timestamp"]
    uuid = [{"operation": "enqueue", "content": "stop", "uuid": "q1"}, {"operation": "remove"}]
    t = _with_queue(tmp_path, uuid)
    rep = t.load_report.records
    assert _queued(t) == ["stop"]
    assert rep.loc[rep["record"] == "queue-operation", "status"].tolist() == ["used", "used"]
    assert int(rep["parts"].sum()) == len(t.frame)


def test_a_microcompaction_before_a_compaction_keeps_its_results_cleared(tmp_path: Path):
    """The compaction hides every earlier part: it took over the results the
    microcompaction had hidden, so between the two they were sent twice (in full and as
    the placeholder). The first event to hide a part keeps it."""
    lines = (DATASETS_DIR / "coding_session.jsonl").read_text(encoding="utf-8").split("\n")
    recs = [json.loads(x) for x in lines if x.strip()]
    whole = ctxlab.load(DATASETS_DIR / "coding_session.jsonl")
    ids = whole.frame.loc[whole.frame["kind"] == "tool_result", "tool_call_id"].head(2).tolist()
    # before a prompt of the user's, well before the compaction
    nxt = next(i for i in range(40, len(recs)) if recs[i].get("type") == "user"
               and isinstance(recs[i]["message"]["content"], str))
    at = nxt
    prev = next(r for r in recs if r.get("uuid") == recs[nxt]["parentUuid"])
    mc = {"type": "system", "subtype": "microcompact_boundary", "uuid": "mc-1",
          "parentUuid": prev["uuid"], "isSidechain": False, "sessionId": prev["sessionId"],
          "timestamp": prev["timestamp"],
          "microcompactMetadata": {"trigger": "auto", "preTokens": 50000,
                                   "compactedToolIds": ids}}
    recs[nxt] = {**recs[nxt], "parentUuid": "mc-1"}
    p = tmp_path / "mc.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs[:at] + [mc] + recs[at:]),
                 encoding="utf-8")
    t = ctxlab.load(p)
    micro = int(t.events["event"].iloc[0])
    f = t.frame
    olds = f[f["tool_call_id"].isin(ids) & (f["kind"] == "tool_result") & f["event"].isna()]
    assert (olds["hidden_by"] == micro).all() and len(olds) == 2
    assert len(t.events) == len(whole.events) + 1


def test_a_message_without_its_parent_after_a_boundary_or_attachment_keeps_it(
        tmp_path: Path):
    lines = (DATASETS_DIR / "coding_session_b.jsonl").read_text(encoding="utf-8").split("\n")
    recs = [json.loads(x) for x in lines if x.strip()]
    whole = ctxlab.load(DATASETS_DIR / "coding_session_b.jsonl")
    ids = whole.frame.loc[whole.frame["kind"] == "tool_result", "tool_call_id"].head(2).tolist()
    at = 40
    prev = next(r for r in reversed(recs[:at]) if r.get("type") in ("user", "assistant"))
    nxt = next(i for i in range(at, len(recs)) if recs[i].get("parentUuid") == prev["uuid"])
    mc = {"type": "system", "subtype": "microcompact_boundary", "uuid": "mc-1",
          "parentUuid": prev["uuid"], "isSidechain": False, "sessionId": prev["sessionId"],
          "timestamp": prev["timestamp"],
          "microcompactMetadata": {"trigger": "auto", "compactedToolIds": ids}}
    recs[nxt] = {k: v for k, v in recs[nxt].items() if k != "parentUuid"}
    p = tmp_path / "mc.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs[:at] + [mc] + recs[at:]),
                 encoding="utf-8")
    t = ctxlab.load(p)
    assert len(t.events) == 1 and t.meta["chain_bridged"] == {f"mc.jsonl:{nxt + 2}": at + 1}


def test_a_tool_result_without_its_tool_use_is_kept_and_reported(tmp_path: Path) -> None:
    """A tool result on the conversation whose tool_use is not in the file (or answers no
    earlier call): kept, unlinked, and reported at its line; --strict stops there."""
    g = _Log()
    g.user("Fix the bug")
    g.assistant("msg_1", {"type": "tool_use", "id": "t1", "name": "Read",
                          "input": {"file_path": "/w/a.py"}}, _usage(10, 0, 0, 3))
    g.user([{"type": "tool_result", "tool_use_id": "t1", "content": "print(1)"}])
    g.assistant("msg_2", {"type": "text", "text": "Checking."}, _usage(12, 0, 0, 2))
    g.user([{"type": "tool_result", "tool_use_id": "t_gone", "content": "lost output"},
            {"type": "tool_result", "tool_use_id": "t1", "content": "again"}])     # line 5
    g.assistant("msg_3", {"type": "text", "text": "Done."}, _usage(14, 0, 0, 2))
    p = write(tmp_path, g.records)
    t = ctxlab.load(p)
    assert orphan_entries(t) == [(5, "line 5 tool_result t_gone")]
    f = t.frame
    assert f.loc[f["tool_call_id"] == "t_gone", "content"].tolist() == ["lost output"]
    assert_accounts(t, expected_wheres(p.read_bytes(), jsonl=True))  # its own entry: used
    with pytest.raises(LoadError, match=rf"{p}:5 .*call id 't_gone'"):
        ctxlab.load(p, strict=True)


def test_an_assistant_line_without_a_message_id_is_said_to_make_no_call(tmp_path: Path) -> None:
    """A response line without ``message.id`` (not ``<synthetic>``): its parts are kept but
    it makes no call, so its usage is not loaded; the report says so at its line."""
    g = _Log()
    g.user("hi")
    g.assistant("msg_1", {"type": "text", "text": "one"}, _usage(10, 0, 0, 3))
    g.user("again")
    g.assistant("msg_x", {"type": "text", "text": "two"}, _usage(20, 0, 0, 4))     # line 4
    del g.records[-1]["message"]["id"]
    g.user("more")
    g.assistant("msg_3", {"type": "text", "text": "three"}, _usage(30, 0, 0, 5))
    g.assistant("msg_s", {"type": "text", "text": "note"}, None, model="<synthetic>")
    del g.records[-1]["message"]["id"]                  # the CLI's own: no call, said nowhere
    p = write(tmp_path, g.records)
    t = ctxlab.load(p)
    assert t.calls["input_total"].tolist() == [10, 30]
    assert "two" in t.frame["content"].tolist()
    sk = t.load_report.skipped
    assert sk["where"].tolist() == ["line 4 message.id"]
    assert "make no call (its usage is not loaded)" in sk["reason"].iloc[0]
    assert_accounts(t, expected_wheres(p.read_bytes(), jsonl=True))
    with pytest.raises(LoadError, match=rf"{p}:4 .*without message.id"):
        ctxlab.load(p, strict=True)


def test_a_queued_prompt_s_image_is_reported_as_left_out(tmp_path: Path) -> None:
    """A ``queued_command`` attachment whose prompt is a list of blocks: its text is the
    queued message, and a block of another kind (a pasted image) is reported as left out
    at its line (it was dropped silently)."""
    g = _Log()
    g.user("go")
    g.assistant("msg_1", {"type": "text", "text": "working"}, _usage(10, 0, 0, 3))
    g.add("attachment", attachment={"type": "queued_command", "commandMode": "prompt",
                                    "prompt": [{"type": "text", "text": "look at this"},
                                               {"type": "image", "source": {"data": "iVBO"}}]})
    g.user("and go on")
    g.assistant("msg_2", {"type": "text", "text": "ok"}, _usage(20, 0, 0, 3))
    p = write(tmp_path, g.records)
    t = ctxlab.load(p)
    assert claude_code.QUEUED + "look at this" in t.frame["content"].tolist()
    sk = t.load_report.skipped
    assert sk["where"].tolist() == ["line 3 prompt[1]"]
    assert sk["reason"].iloc[0].startswith("a block of type 'image' in a queued prompt: left out")
    assert_accounts(t, expected_wheres(p.read_bytes(), jsonl=True))


@pytest.mark.realdata
@pytest.mark.parametrize("sid, agent, n", [
    ("4d5611e5-241a-462a-8d15-5122611a9569", "agent-a2898e3", 144),
    ("258c7280-ae70-4798-800f-63464d01a85d", "agent-a881341", 10),
    ("8463c716-a2ea-4c14-9efa-87158ebd9f20", "agent-a7be2f0", 131)])
def test_unread_subagent_file_is_in_the_load_report(sid: str, agent: str, n: int) -> None:
    """Without sidechains a 2.x sub-agent's file (144, 10 and 131 lines here) was not read
    and only named in meta["subagent_files"]: the load report said nothing of its lines."""
    path = realdata_path(f"claude_code/spotter/{sid}.jsonl")
    sub = path.parent / sid / "subagents" / f"{agent}.jsonl"
    t = ctxlab.load(path)
    assert_every_line_once(t, sub)
    own = t.load_report.records[t.load_report.records["file"] == str(sub)]
    assert len(own) == n and (own["status"] == "ignored").all()
    assert (own["reason"] == "sub-agent conversation (sidechain): load with sidechains=True "
                             "(--sidechains)").all()
    assert t.sessions == [sid]
