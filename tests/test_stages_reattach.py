"""The reattach stage: Claude Code's compaction — one summary, then recent files and the plan."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest

import ctxlab
from ctxlab import summarizers
from ctxlab.engine import Budget, build_view, call_end_pos, run_stages
from ctxlab.errors import ConfigError
from ctxlab.history import rewind
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.presets import claude_code
from ctxlab.stages import stage
from ctxlab.stages.base import View
from ctxlab.stages.file_state import numbered
from ctxlab.stages.grammar import check_grammar
from ctxlab.stages.reattach import (
    Reattach,
    attachment_text,
    claude_code_summarize,
    plan_text,
)
from ctxlab.summarizers import Summarizer, SummarizerError
from ctxlab.tokens import estimator
from tests.conftest import DATASETS

CHARS = estimator("chars:4")
BUDGET = Budget(window_tokens=200_000, limit_tokens=160_000, target_tokens=100_000)
NOTE = "The handler validates the row before it writes the ledger entry. "


def _body(path: str, tokens: int) -> str:
    """A file's text of about ``tokens`` chars:4 tokens, naming its path on every line."""
    line = f"# {path}: {NOTE}\n"
    return (line * (tokens * 4 // len(line) + 1))[:tokens * 4]


def _session(reads: list[tuple[str, int]], *, lead: int = 0, tail: int = 0,
             tail_tokens: int = 2) -> ctxlab.Transcript:
    """A prompt, ``lead`` Bash steps with 2,000-token outputs, one Read per ``(path,
    tokens)`` (each its own call and result), ``tail`` Bash steps with outputs of
    ``tail_tokens``, then a final call. A read of an existing path
    again gets a ``v2`` marker so the latest read can be told apart."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("system")
    b.part("text", "You are a coding agent.")
    b.message("user", real_user=True)
    b.part("text", "Implement the ledger export and keep the tests green.")
    for i in range(lead):
        _bash(b, f"lead{i}", 2_000)
    seen: dict[str, int] = {}
    for i, (path, tokens) in enumerate(reads):
        seen[path] = seen.get(path, 0) + 1
        b.call()
        b.message("assistant")
        b.part("text", f"Let me read {path}.")
        b.part("tool_call", f'Read({{"file_path": "{path}"}})', tool_name="Read",
               tool_call_id=f"r{i}", file_path=path)
        b.message("user")
        b.part("tool_result", f"v{seen[path]} " + _body(path, tokens), tool_name="Read",
               tool_call_id=f"r{i}", file_path=path)
    for i in range(tail):
        _bash(b, f"tail{i}", tail_tokens)
    b.call(call_id="final")
    b.message("assistant")
    b.part("text", "Done.")
    return assemble([b], log, {"format": "test"})


def _bash(b: SessionBuilder, name: str, tokens: int) -> None:
    b.call()
    b.message("assistant")
    b.part("tool_call", f'Bash({{"command": "make {name}"}})', tool_name="Bash",
           tool_call_id=name)
    b.message("user")
    b.part("tool_result", f"ok {name} " + _body("make", tokens), tool_name="Bash",
           tool_call_id=name)


def _view(t: ctxlab.Transcript, call: int | None = None) -> tuple[View, float]:
    k = int(t.calls["call"].max()) if call is None else call
    end = call_end_pos(t, "s", k)
    return build_view(t, "s", end, CHARS, BUDGET, k), end


def _apply(t: ctxlab.Transcript, st: Reattach, call: int | None = None):
    view, end = _view(t, call)
    return view, run_stages(t, view, [st], end_pos=end, trigger="test")


def _attachments(parts: pd.DataFrame) -> pd.DataFrame:
    return parts[(parts["kind"] == "attachment") & parts["event"].notna()]


FILES = [(f"/repo/src/mod{i}.py", 300 + 50 * i) for i in range(8)]


# ---- defaults and parameters -------------------------------------------------------------
def test_defaults_are_claude_codes():
    r = Reattach()
    assert (r.max_files, r.max_tokens_per_file, r.max_tokens, r.oversize, r.order) == \
        (5, 5_000, 50_000, "reference", "modified")
    assert r.plans == ("*/.claude/plans/*",) and set(r.plans) <= set(r.exclude)
    s = r.summarize
    assert (s.keep_recent, s.role, s.budget_tokens, s.mode) == (0, "user", 4_000, "history")
    assert s.prefix.startswith("This session is being continued from a previous conversation")
    assert stage("reattach") == r
    assert claude_code_summarize(budget_tokens=6_000).budget_tokens == 6_000


@pytest.mark.parametrize("params, message", [
    ({"max_files": -1}, "max_files"), ({"max_tokens": 1.5}, "max_tokens"),
    ({"max_tokens_per_file": True}, "max_tokens_per_file"), ({"oversize": "cut"}, "oversize"),
    ({"exclude": "CLAUDE.md"}, "exclude"), ({"summarize": "summarize"}, "Summarize stage"),
    ({"order": "newest"}, "order"), ({"plans": "plan.md"}, "plans")])
def test_bad_parameters_are_config_errors(params, message):
    with pytest.raises(ConfigError, match=message):
        Reattach(**params)


# ---- what is re-attached -------------------------------------------------------------------
def test_the_five_newest_files_follow_the_summary_newest_first():
    t = _session(FILES, tail=2)
    _, res = _apply(t, Reattach())
    after = res.view.parts
    att = _attachments(after)
    assert att["file_path"].tolist() == [p for p, _ in FILES[::-1][:5]]
    # right after the summary, in that order, each a user message of its own
    summary = after[after["kind"] == "summary"]
    assert len(summary) == 1 and summary["role"].iloc[0] == "user"
    inserted = after[after["event"].notna()]
    assert inserted["kind"].tolist() == ["summary"] + ["attachment"] * 5
    assert inserted["pos"].is_monotonic_increasing
    assert inserted["msg"].nunique() == 6 and (inserted["role"] == "user").all()
    # the content is the latest read, numbered as the Read tool does, under a header
    path, tokens = FILES[-1]
    assert att["content"].iloc[0] == attachment_text(path, numbered("v1 " + _body(path, tokens)))
    details = json.loads(res.transcript.events["meta"].iloc[-1])["stage_details"]
    assert details["reattached"] == 5 and details["candidates"] == 8
    assert details["reattached_files"] == att["file_path"].tolist()


@pytest.mark.parametrize("max_files", [0, 1, 3, 8, 20])
def test_max_files(max_files):
    _, res = _apply(_session(FILES, lead=3), Reattach(max_files=max_files))
    assert len(_attachments(res.view.parts)) == min(max_files, len(FILES))


def test_the_latest_read_of_a_file_counts_and_sets_its_recency():
    reads = [("/repo/a.py", 200), ("/repo/b.py", 200), ("/repo/c.py", 200), ("/repo/a.py", 220)]
    _, res = _apply(_session(reads), Reattach(max_files=2))
    att = _attachments(res.view.parts)
    assert att["file_path"].tolist() == ["/repo/a.py", "/repo/c.py"]
    assert att["content"].iloc[0].split("\n", 1)[1].startswith("     1→v2 ")


@pytest.mark.parametrize("oversize", ["reference", "truncate", "skip"])
def test_a_file_over_the_per_file_limit(oversize):
    reads = [("/repo/small.py", 400), ("/repo/big.py", 7_000)]
    _, res = _apply(_session(reads, lead=2), Reattach(oversize=oversize))
    att = _attachments(res.view.parts).set_index("file_path")
    assert "/repo/small.py" in att.index
    tokens = CHARS.count(att["content"].tolist())
    assert (tokens <= 5_000).all()
    if oversize == "skip":
        assert "/repo/big.py" not in att.index
        return
    big = att.loc["/repo/big.py"]
    meta = json.loads(big["meta"])
    if oversize == "reference":
        assert meta["reference"] is True and "too large" in big["content"]
        assert CHARS.count([big["content"]])[0] < 100
    else:
        assert meta["truncated"] is True
        assert 4_990 <= CHARS.count([big["content"]])[0] <= 5_000
        assert big["content"] == attachment_text(
            "/repo/big.py", numbered("v1 " + _body("/repo/big.py", 7_000)))[:len(big["content"])]


def test_the_total_budget_leaves_out_what_does_not_fit_and_tries_the_next():
    reads = [("/repo/a.py", 300), ("/repo/b.py", 300), ("/repo/c.py", 3_000),
             ("/repo/d.py", 300)]
    _, res = _apply(_session(reads, lead=1), Reattach(max_tokens=1_200))
    att = _attachments(res.view.parts)
    assert att["file_path"].tolist() == ["/repo/d.py", "/repo/b.py", "/repo/a.py"]
    assert CHARS.count(att["content"].tolist()).sum() <= 1_200


def test_excluded_paths_are_not_reattached():
    reads = [("/repo/CLAUDE.md", 300), ("/repo/a.py", 300)]
    _, res = _apply(_session(reads, lead=1), Reattach())
    assert _attachments(res.view.parts)["file_path"].tolist() == ["/repo/a.py"]
    _, res = _apply(_session(reads, lead=1), Reattach(exclude=()))
    assert _attachments(res.view.parts)["file_path"].tolist() == ["/repo/a.py",
                                                                   "/repo/CLAUDE.md"]


def test_files_whose_latest_read_stays_visible_are_not_reattached():
    t = _session(FILES[:4], lead=1)
    # keep the last 2 messages: the newest read (call + result) stays verbatim
    _, res = _apply(t, Reattach(summarize=claude_code_summarize(keep_recent=2)))
    att = _attachments(res.view.parts)
    assert FILES[3][0] not in set(att["file_path"])
    assert att["file_path"].tolist() == [p for p, _ in FILES[:3][::-1]]
    # the files come after the summary and before the kept messages
    inserted = res.view.parts[res.view.parts["event"].notna()]
    kept_read = res.view.parts[(res.view.parts["kind"] == "tool_result")
                               & res.view.parts["event"].isna()]
    assert inserted["pos"].max() < kept_read["pos"].min()


# ---- written files, edits and the plan ----------------------------------------------------
PLAN = "/home/u/.claude/plans/calm-river.md"


def _work(steps: list[tuple], *, lead: int = 2) -> ctxlab.Transcript:
    """``lead`` Bash steps with 2,000-token outputs, then one call per step: ``("read",
    path, tokens)``, ``("write", path, text)`` or ``("edit", path, old, new)``."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("user", real_user=True)
    b.part("text", "Implement the ledger export.")
    for i in range(lead):
        _bash(b, f"lead{i}", 2_000)
    for i, step in enumerate(steps):
        op, path = step[0], step[1]
        if op == "read":
            tool, args, result = "Read", {"file_path": path}, numbered(_body(path, step[2]))
        elif op == "write":
            tool, args, result = "Write", {"file_path": path, "content": step[2]}, "created"
        else:
            tool, args, result = "Edit", {"file_path": path, "old_string": step[2],
                                          "new_string": step[3]}, "updated"
        b.call()
        b.message("assistant")
        b.part("tool_call", f"{tool}({json.dumps(args)})", tool_name=tool,
               tool_call_id=f"w{i}", file_path=path)
        b.message("user")
        b.part("tool_result", result, tool_name=tool, tool_call_id=f"w{i}", file_path=path)
    b.call(call_id="final")
    b.message("assistant")
    b.part("text", "Done.")
    return assemble([b], log, {"format": "test"})


STEPS = [("read", "/repo/a.py", 200), ("write", "/repo/new.py", "x = 1\ny = 2\n"),
         ("read", "/repo/b.py", 200), ("edit", "/repo/new.py", "y = 2", "y = 3"),
         ("read", "/repo/c.py", 200)]


def test_written_files_come_first_with_their_edits_applied():
    _, res = _apply(_work(STEPS), Reattach())
    att = _attachments(res.view.parts)
    # new.py was modified last of all the files it wrote or edited; c.py, b.py, a.py were
    # only read, newest read first
    assert att["file_path"].tolist() == ["/repo/new.py", "/repo/c.py", "/repo/b.py",
                                         "/repo/a.py"]
    assert att["content"].iloc[0] == attachment_text("/repo/new.py", numbered("x = 1\ny = 3\n"))


def test_order_read_ranks_files_by_their_latest_read_or_write():
    _, res = _apply(_work(STEPS), Reattach(order="read"))
    assert _attachments(res.view.parts)["file_path"].tolist() == [
        "/repo/c.py", "/repo/new.py", "/repo/b.py", "/repo/a.py"]


def test_the_plan_is_reattached_whole_and_not_as_a_file():
    plan = "# Plan\n\n1. Export the ledger.\n2. Test it.\n"
    steps = [("read", "/repo/a.py", 200), ("write", PLAN, plan),
             ("edit", PLAN, "2. Test it.", "2. Test it, then ship.")]
    _, res = _apply(_work(steps), Reattach())
    att = _attachments(res.view.parts)
    assert att["file_path"].tolist() == ["/repo/a.py", PLAN]
    assert att["content"].iloc[1] == plan_text(PLAN, plan.replace("2. Test it.",
                                                                  "2. Test it, then ship."))
    details = json.loads(res.transcript.events["meta"].iloc[-1])["stage_details"]
    assert details["plan"] is True and details["reattached_files"] == ["/repo/a.py"]
    _, res = _apply(_work(steps), Reattach(plans=()))
    assert _attachments(res.view.parts)["file_path"].tolist() == ["/repo/a.py"]


def test_a_second_compaction_keeps_the_plan_and_the_written_files():
    plan = "# Plan\n\n1. Export.\n"
    steps = [("write", PLAN, plan), ("write", "/repo/new.py", "x = 1\n"),
             ("read", "/repo/a.py", 200)]
    t = _work(steps)
    _, res = _apply(t, Reattach(), call=int(t.calls["call"].max()) - 1)
    assert _attachments(res.view.parts)["file_path"].tolist() == ["/repo/new.py", PLAN]
    t2 = res.transcript
    _, res2 = _apply(t2, Reattach(summarize=claude_code_summarize(min_messages=1,
                                                                  budget_tokens=100)))
    att = _attachments(res2.view.parts)
    # the first compaction's copies are what the agent knows now; a.py was read after it
    assert att["file_path"].tolist() == ["/repo/new.py", "/repo/a.py", PLAN]
    assert att["content"].iloc[0] == attachment_text("/repo/new.py", numbered("x = 1\n"))
    assert att["content"].iloc[2] == plan_text(PLAN, plan)


# ---- nothing without a summary -----------------------------------------------------------
def test_nothing_is_reattached_without_a_summary():
    t = _session([("/repo/a.py", 300)])  # 3 conversation messages: under min_messages
    view, _ = _view(t)
    edit = Reattach().plan(view)
    assert edit is not None and edit.empty and edit.reason.startswith("no summary")
    assert Reattach().plan(View(parts=view.parts.iloc[0:0], estimator=CHARS,
                                window_tokens=1, limit_tokens=1, target_tokens=1)) is None


class _Failing(Summarizer):
    name = "test-failing-reattach"
    model = "none"

    def summarize(self, parts, *, previous, budget_tokens, estimator):
        raise SummarizerError("backend down")


def test_a_failing_summarizer_reattaches_nothing():
    summarizers.register(_Failing())
    try:
        st = Reattach(summarize=claude_code_summarize(summarizer="test-failing-reattach"))
        view, _ = _view(_session(FILES))
        edit = st.plan(view)
        assert edit is not None and edit.empty and "backend down" in edit.reason
    finally:
        summarizers.unregister("test-failing-reattach")


# ---- applied through the engine ----------------------------------------------------------
def test_applied_it_validates_saves_tokens_and_rewinds_exactly():
    t = _session(FILES, tail=3)
    view, res = _apply(t, Reattach())
    run = res.runs[0]
    assert run.event is not None and len(res.runs) == 1
    res.transcript.validate()
    assert run.tokens_after < run.tokens_before
    assert len(check_grammar(res.view.parts)) <= len(check_grammar(view.parts))
    # one event: the summary and the files together
    assert res.transcript.events["origin"].tolist() == ["reattach"]
    back = rewind(res.transcript, run.event, session="s")
    pd.testing.assert_frame_equal(back.frame, t.frame)
    pd.testing.assert_frame_equal(back.events, t.events)


def test_a_compaction_never_grows_the_request():
    # hidden history is little more than one file: re-attaching it would cost more than the
    # compaction saves, so it is left out
    t = _session([("/repo/a.py", 600)], tail=2)
    view, res = _apply(t, Reattach(summarize=claude_code_summarize(budget_tokens=300)))
    assert res.runs[0].event is not None
    assert res.view.total_tokens <= view.total_tokens
    details = json.loads(res.transcript.events["meta"].iloc[-1])["stage_details"]
    assert (details["candidates"], details["reattached"], details["left_out"]) == (1, 0, 1)


def test_a_second_compaction_reattaches_from_the_first_ones_files():
    t = _session(FILES[:4] + FILES[4:6], lead=1, tail=1)
    first_call = 5  # the request after the 4th read
    _, res = _apply(t, Reattach(max_files=3), call=first_call)
    t1 = res.transcript
    first = _attachments(res.view.parts)["file_path"].tolist()
    assert first == [p for p, _ in FILES[:4][::-1][:3]]
    _, res2 = _apply(t1, Reattach(max_files=4))
    att = _attachments(res2.view.parts)
    # newest first: the two files read after the first compaction, then the newest two of
    # the first compaction's files (by when they were read), their text not wrapped twice
    assert att["file_path"].tolist() == [FILES[5][0], FILES[4][0], FILES[3][0], FILES[2][0]]
    path, tokens = FILES[3]
    assert att["content"].iloc[2] == attachment_text(path, numbered("v1 " + _body(path, tokens)))
    assert res2.runs[0].tokens_after < res2.runs[0].tokens_before
    back = rewind(res2.transcript, res2.runs[0].event, session="s")
    pd.testing.assert_frame_equal(back.frame, t1.frame)


def test_the_claude_code_preset_uses_it():
    p = ctxlab.preset("claude-code")
    assert [s.name for s in p.stages] == ["reattach"] and [s.name for s in p.post] == ["repair"]
    assert (p.limit, p.threshold, p.estimator) == ("autocompact", 1.0, "tiktoken:o200k_base")
    assert p.limit_for(200_000) * p.threshold == pytest.approx(167_000)
    # Claude Code's rule at any window (83.5% of a 100k window would be 83.5k), and with
    # a max output under its 20k reserve
    assert p.limit_for(100_000) == 67_000
    assert replace(p, max_tokens=8_000).limit_for(200_000) == 179_000
    assert p.stages[0] == Reattach() and p == claude_code()
    # for a log: its recorded summaries, through a registered summarizer of its own
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    q = claude_code(t)
    name = q.stages[0].summarize.summarizer
    assert name.startswith("recorded:") and summarizers.summarizer(name).points
    assert claude_code(t).stages[0].summarize.summarizer == name
    assert replace(q, stages=p.stages) == p
