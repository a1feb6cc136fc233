"""The summarize stage: seed 000's rules, seed 004's keep-N, seed 003's blocks, fall-through."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import ctxlab
from ctxlab import summarizers
from ctxlab.engine import Budget, build_view, call_end_pos, run_stages
from ctxlab.errors import ConfigError
from ctxlab.history import rewind
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.stages import stage
from ctxlab.stages.base import View
from ctxlab.stages.grammar import check_grammar
from ctxlab.stages.summarize import SEED_004_PREFIX, Summarize
from ctxlab.summarizers import Summarizer, SummarizerError, Summary
from ctxlab.tokens import estimator
from tests.conftest import DATASETS

CHARS = estimator("chars:4")
BUDGET = Budget(window_tokens=200_000, limit_tokens=160_000, target_tokens=100_000)
FILLER = "The ledger keeps every row until the nightly job archives it. " * 6


def _session(turns: int, *, tools: bool = False, prompt: str = "Now add a changelog entry.",
             blocks: bool = False) -> ctxlab.Transcript:
    """A system part, ``turns`` earlier turns, then the current prompt and its call.

    Without tools a turn is 2 messages (user, assistant); with tools 4 (user; assistant
    with a Read and a Bash call; user with both results; assistant).
    """
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("system")
    b.part("text", "You are a coding agent.")
    for i in range(turns):
        b.message("user", real_user=True)
        b.part("text", f"Please fix bug {i} in src/mod{i}.py. {FILLER}")
        if tools:
            b.call()
            b.message("assistant")
            path = f"/repo/src/mod{i}.py"
            b.part("tool_call", f'Read({{"file_path": "{path}"}})', tool_name="Read",
                   tool_call_id=f"r{i}", file_path=path)
            b.part("tool_call", f'Bash({{"command": "pytest tests/test_mod{i}.py"}})',
                   tool_name="Bash", tool_call_id=f"b{i}")
            b.message("user")
            b.part("tool_result", f"     1→def handler_{i}(row):\n     2→    return row\n{FILLER}",
                   tool_name="Read", tool_call_id=f"r{i}", file_path=path)
            b.part("tool_result", f"Exit code 1\nFAILED tests/test_mod{i}.py::test_x - "
                   f"KeyError: 'field_{i}'\n{FILLER}", tool_name="Bash", tool_call_id=f"b{i}")
        b.call()
        b.message("assistant")
        b.part("text", f"Fixed bug {i}: the handler now checks the field. {FILLER}")
    b.message("user", real_user=True)
    b.part("text", prompt)
    if blocks:
        b.part("attachment", _block("prompt-note", 52_000))
        b.call()
        b.message("assistant")
        b.part("tool_call", 'Bash({"command": "make test"})', tool_name="Bash",
               tool_call_id="big")
        b.part("tool_call", 'Bash({"command": "git status"})', tool_name="Bash",
               tool_call_id="small")
        b.message("user")
        b.part("tool_result", "Exit code 2\nerror: build failed\n" + _block("log", 60_000),
               tool_name="Bash", tool_call_id="big")
        b.part("tool_result", "On branch main\n" + _block("status", 1_000), tool_name="Bash",
               tool_call_id="small")
    b.call(call_id="final")
    b.message("assistant")
    b.part("text", "On it.")
    return assemble([b], log, {"format": "test"})


def _block(name: str, chars: int) -> str:
    lines, i = [], 0
    while sum(map(len, lines)) < chars:
        lines.append(f"{name} line {i}: def step_{i % 7}(): value={i * 7919 % 1000}\n")
        i += 1
    return "".join(lines)


def _final_view(t: ctxlab.Transcript, est=CHARS, budget: Budget = BUDGET) -> tuple[View, float]:
    end = call_end_pos(t, "s", int(t.calls["call"].max()))
    return build_view(t, "s", end, est, budget, None), end


def _conversation(view: View) -> list[int]:
    """msg ids of the conversation messages (not system, not the prompt), in order."""
    mf = view.message_frame()
    prompt = set(view.parts.loc[view.parts["layer"] == "prompt", "msg"])
    return [int(m) for m, r in zip(mf["msg"], mf["role"]) if r != "system" and m not in prompt]


def _parts_of(view: View, msgs: list[int]) -> set[int]:
    return set(view.parts.loc[view.parts["msg"].isin(msgs), "part"].astype(int))


def _apply(t: ctxlab.Transcript, st, est=CHARS):
    view, end = _final_view(t, est)
    res = run_stages(t, view, [st], end_pos=end, trigger="test")
    return view, res


def _check_applied(t: ctxlab.Transcript, view: View, res) -> int:
    """Validates, saves tokens, adds no grammar problem, and rewinds exactly."""
    run = res.runs[0]
    assert run.event is not None, run.reason
    res.transcript.validate()
    assert run.tokens_after < run.tokens_before
    assert len(check_grammar(res.view.parts)) <= len(check_grammar(view.parts))
    back = rewind(res.transcript, run.event, session="s")
    pd.testing.assert_frame_equal(back.frame, t.frame)
    pd.testing.assert_frame_equal(back.events, t.events)
    return run.event


# ---- seed 000 ------------------------------------------------------------------------
def test_defaults_are_seed_000s():
    s = Summarize()
    assert (s.keep_recent_ratio, s.min_recent, s.keep_recent, s.role, s.prefix, s.mode,
            s.block_chars, s.summarizer) == (0.3, 4, None, "system", "", "history", 50_000,
                                             "structured")


@pytest.mark.parametrize("turns", [0, 1, 2])
def test_four_or_fewer_messages_are_never_summarized(turns):
    view, _ = _final_view(_session(turns))
    assert len(_conversation(view)) == 2 * turns <= 4
    edit = Summarize().plan(view)
    assert edit is not None and edit.empty and edit.reason.startswith("nothing to summarize")


def test_five_messages_summarize_the_oldest_one():
    view, _ = _final_view(_session(3, tools=False))
    conv = _conversation(view)[1:]          # hide the first reply: 5 messages left visible
    view = View(**{**{f: getattr(view, f) for f in View.__dataclass_fields__},
                   "parts": view.parts[view.parts["msg"] != _conversation(view)[0]]})
    edit = Summarize(role="user").plan(view)
    assert edit.details["messages"] == 5 and edit.details["summarized"] == 1
    assert set(edit.hide) == _parts_of(view, conv[:1])


@pytest.mark.parametrize("turns, kept", [(5, 4), (20, 12), (30, 18)])
def test_keeps_max_of_4_and_30_percent(turns, kept):
    t = _session(turns)
    view, res = _apply(t, Summarize())
    conv = _conversation(view)
    edit = Summarize().plan(view)
    assert edit.details["kept"] == kept == max(4, -(-3 * len(conv) // 10))
    assert set(edit.hide) == _parts_of(view, conv[:-kept])
    (new,) = edit.insert
    assert (new.kind, new.role, new.join_message, new.side) == ("summary", "system", False,
                                                                "before")
    assert new.anchor == min(_parts_of(view, conv[-kept:]))
    after = res.view.parts
    assert after.loc[after["kind"] == "summary", "layer"].tolist() == ["history"]
    assert after["layer"].tolist().count("system") == 1            # L1 stays
    assert "Now add a changelog entry." in after["content"].tolist()  # L5 stays
    assert edit.summarizer_calls == ({"backend": "structured", "model": "extractive",
                                      "input_tokens": view.tokens_of(edit.hide),
                                      "output_tokens": edit.details["summary_tokens"],
                                      "ms": 0.0},)
    _check_applied(t, view, res)


def test_boundary_never_splits_a_tool_pair():
    # 5 turns of 4 messages: keeping 6 would cut between the calls and their results.
    t = _session(5, tools=True)
    view, _ = _final_view(t)
    conv = _conversation(view)
    user = Summarize(role="user").plan(view)
    assert user.details["kept"] == 7                  # moved back over the call message
    system = Summarize().plan(view)
    assert system.details["kept"] == 8                # and to a user message for a system summary
    for edit in (user, system):
        hidden = view.parts[view.parts["part"].isin(edit.hide)]
        kept = view.parts[~view.parts["part"].isin(edit.hide)]
        assert not set(hidden["tool_call_id"].dropna()) & set(kept["tool_call_id"].dropna())
        assert set(edit.hide) == _parts_of(view, conv[:len(conv) - edit.details["kept"]])


def test_iterative_merge_hides_the_previous_summary_and_keeps_its_facts():
    t = _session(12, tools=True)
    mid_end = call_end_pos(t, "s", 20)
    mid = build_view(t, "s", mid_end, CHARS, BUDGET)
    first = run_stages(t, mid, [Summarize()], end_pos=mid_end, trigger="test")
    assert first.runs[0].event is not None
    t1 = first.transcript
    old = first.view.parts.loc[first.view.parts["kind"] == "summary"]
    assert "/repo/src/mod0.py (read)" in old["content"].iloc[0]
    view, end = _final_view(t1)
    assert int(old["part"].iloc[0]) in set(view.parts["part"])
    res = run_stages(t1, view, [Summarize()], end_pos=end, trigger="test")
    edit = Summarize().plan(view)
    assert int(old["part"].iloc[0]) in edit.hide and edit.details["merged_previous"]
    new = edit.insert[0].content
    for fact in ("/repo/src/mod0.py (read)", "KeyError: 'field_0'", "Please fix bug 0",
                 "/repo/src/mod7.py (read)", "KeyError: 'field_7'"):
        assert fact in new
    assert (res.view.parts["kind"] == "summary").sum() == 1
    event = _check_applied(t1, view, res)
    assert json.loads(res.transcript.events["meta"].iloc[-1])["summarizer_calls"][0][
        "backend"] == "structured"
    pd.testing.assert_frame_equal(rewind(res.transcript, event - 1, session="s").frame, t.frame)


def test_system_markers_in_the_older_messages_stay():
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    for i in range(8):
        b.message("user", real_user=True)
        b.part("text", f"Question {i}? {FILLER}")
        b.call()
        b.message("assistant")
        b.part("text", f"Answer {i}. {FILLER}")
        if i == 1:
            b.message("system")
            marker = b.part("marker", "[Earlier conversation history was truncated]")
    b.message("user", real_user=True)
    b.part("text", "Last question?")
    b.call()
    b.message("assistant")
    b.part("text", "Last answer.")
    t = assemble([b], log, {"format": "test"})
    view, res = _apply(t, Summarize())
    edit = Summarize().plan(view)
    assert edit.details["messages"] == 16 and marker not in edit.hide
    assert marker in set(res.view.parts["part"])
    _check_applied(t, view, res)


def test_budget_is_respected():
    view, _ = _final_view(_session(20, tools=True))
    for budget in (60, 300, 1200):
        edit = Summarize(budget_tokens=budget).plan(view)
        assert view.estimate(edit.insert[0].content) <= budget
    default = Summarize().plan(view)
    assert default.details["budget_tokens"] <= BUDGET.target_tokens // 10


def test_same_view_gives_the_same_edit():
    view, _ = _final_view(_session(10, tools=True))
    assert Summarize().plan(view) == Summarize().plan(view)


def test_empty_view_and_tiny_history():
    view, _ = _final_view(_session(6))
    empty = View(**{**{f: getattr(view, f) for f in View.__dataclass_fields__},
                    "parts": view.parts.iloc[0:0]})
    assert Summarize().plan(empty) is None
    edit = Summarize(keep_recent=0, budget_tokens=10_000).plan(view)
    assert edit.details["kept"] == 0 and edit.insert[0].side == "after"


# ---- seed 004 ------------------------------------------------------------------------
def test_seed_004_keeps_exactly_n_with_the_prefix():
    t = _session(10)
    st = stage("summarize", keep_recent=5, prefix=SEED_004_PREFIX, role="user")
    view, res = _apply(t, st)
    conv = _conversation(view)
    edit = st.plan(view)
    assert edit.details["kept"] == 5
    assert set(edit.hide) == _parts_of(view, conv[:-5])
    new = edit.insert[0]
    assert new.role == "user" and new.content.startswith(SEED_004_PREFIX + "\n1. Primary Request")
    _check_applied(t, view, res)
    # Merging a prefixed summary strips the prefix before passing it on.
    rec = _Recorder()
    summarizers.register(rec)
    try:
        v2, _ = _final_view(res.transcript)
        stage("summarize", keep_recent=2, prefix=SEED_004_PREFIX, role="user",
              summarizer="recorder-test").plan(v2)
    finally:
        summarizers.unregister(rec.name)
    assert rec.seen[0][1].startswith("1. Primary Request and Intent:")
    assert "summary" not in set(rec.seen[0][0]["kind"])


# ---- seed 003 (blocks) ---------------------------------------------------------------
def test_blocks_over_50k_chars_are_summarized_and_the_rest_untouched():
    t = _session(2, blocks=True, prompt="Why does the build fail? " * 2200)
    view, res = _apply(t, Summarize(mode="blocks", budget_tokens=3000))
    p = view.parts
    big = p[(p["content"].str.len() > 50_000)]
    assert set(big["layer"]) == {"current", "prompt"}
    targets = set(big.loc[big["layer"] == "current", "part"].astype(int))
    edit = Summarize(mode="blocks", budget_tokens=3000).plan(view)
    assert set(edit.hide) == targets and len(targets) == 2       # attachment + big result
    kinds = {new.kind for new in edit.insert}
    assert kinds == {"attachment", "tool_result"}
    result = next(new for new in edit.insert if new.kind == "tool_result")
    assert result.tool_call_id == "big" and result.join_message
    assert "error: build failed" in result.content
    assert len(edit.summarizer_calls) == 2 and not edit.details["reduced"]
    assert all(view.estimate(new.content) <= 3000 for new in edit.insert)
    after = res.view.parts
    assert after.loc[after["layer"] == "prompt", "content"].str.len().max() > 50_000
    _check_applied(t, view, res)


def test_blocks_reduce_when_the_map_summaries_are_over_budget():
    t = _session(2, blocks=True)
    view, res = _apply(t, Summarize(mode="blocks", budget_tokens=150))
    edit = Summarize(mode="blocks", budget_tokens=150).plan(view)
    assert edit.details["reduced"] and len(edit.summarizer_calls) == 3
    first, second = edit.insert
    assert first.content.startswith("[Summary of the large context blocks]")
    assert second.content.endswith("summarized with the other large blocks above]")
    assert view.estimate(first.content) <= 150
    _check_applied(t, view, res)


def test_blocks_mode_without_large_blocks_does_nothing_and_says_why():
    """copilot-fixed on a real Claude Code log (spotter 4d5611e5): 49 requests sent at up
    to 115.6% of the limit, and the over-target warning said only "summarize: nothing to
    do", though blocks mode had looked for blocks over 50,000 characters and found none."""
    view, _ = _final_view(_session(6, tools=True))
    edit = Summarize(mode="blocks").plan(view)
    assert edit is not None and edit.empty
    assert edit.reason == ("nothing to summarize: no carried or current attachment or tool "
                           "result over 50,000 characters")


# ---- falling through -----------------------------------------------------------------
class _Failing(Summarizer):
    name = "failing-test"
    model = "none"

    def summarize(self, parts, *, previous, budget_tokens, estimator):
        raise SummarizerError("model unavailable (HTTP 503)")


class _Recorder(Summarizer):
    name = "recorder-test"
    model = "none"

    def __init__(self) -> None:
        self.seen: list[tuple[pd.DataFrame, str | None]] = []

    def summarize(self, parts, *, previous, budget_tokens, estimator):
        self.seen.append((parts, previous))
        return Summary(text="short", input_tokens=1, output_tokens=1, ms=0.0,
                       backend=self.name, model=self.model)


@pytest.fixture
def failing():
    inst = summarizers.register(_Failing())
    yield inst
    summarizers.unregister(inst.name)


@pytest.mark.parametrize("mode", ["history", "blocks"])
def test_a_failing_summarizer_falls_through(failing, mode):
    t = _session(10, blocks=True)
    view, end = _final_view(t)
    st = Summarize(summarizer=failing, mode=mode)
    assert st.summarizer == "failing-test"
    edit = st.plan(view)
    assert edit.empty and edit.reason == "summarizer failed: model unavailable (HTTP 503)"
    res = run_stages(t, view, [st, Summarize(mode=mode)], end_pos=end, trigger="test",
                     until_target=False)
    assert res.runs[0].event is None and res.runs[1].event is not None


# ---- parameters ----------------------------------------------------------------------
@pytest.mark.parametrize("params, match", [
    ({"keep_recent_ratio": 1.5}, "keep_recent_ratio"),
    ({"min_recent": -1}, "min_recent"),
    ({"keep_recent": -2}, "keep_recent"),
    ({"role": "assistant"}, "role"),
    ({"mode": "chunks"}, "mode"),
    ({"block_chars": 0}, "block_chars"),
    ({"budget_tokens": 0}, "budget_tokens"),
    ({"summarizer": "gpt-9"}, "known: .*structured"),
])
def test_bad_parameters_raise_config_errors(params, match):
    with pytest.raises(ConfigError, match=match):
        stage("summarize", **params)


def test_an_unregistered_instance_is_refused():
    with pytest.raises(ConfigError, match="not registered"):
        Summarize(summarizer=_Failing())  # type: ignore[arg-type]


# ---- the coding session --------------------------------------------------------------
@pytest.mark.parametrize("spec", ["chars:4", "neurolink:anthropic"])
@pytest.mark.parametrize("call", [12, 60, 150])
def test_on_the_coding_session(spec, call):
    t = ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()
    session = t.frame["session"].iloc[0]
    est = estimator(spec)
    end = call_end_pos(t, session, call)
    view = build_view(t, session, end, est, BUDGET, call)
    res = run_stages(t, view, [Summarize()], end_pos=end, trigger="test")
    run = res.runs[0]
    assert run.event is not None and run.tokens_after < run.tokens_before
    res.transcript.validate()
    assert run.grammar_after <= run.grammar_before
    hidden = view.parts[view.parts["part"].isin(res.transcript.frame.loc[
        res.transcript.frame["hidden_by"] == run.event, "part"])]
    assert set(hidden["layer"]) <= {"history", "current", "carried"}
    assert (hidden["role"] != "system").all()
    back = rewind(res.transcript, run.event, session=session)
    pd.testing.assert_frame_equal(back.frame, t.frame)
    # Again at the last call: the first summary is merged into the second one.
    if call < 150:
        end2 = call_end_pos(t, session, 150)
        v2 = build_view(res.transcript, session, end2, est, BUDGET, 150)
        res2 = run_stages(res.transcript, v2, [Summarize()], end_pos=end2, trigger="test")
        assert res2.runs[0].event is not None
        assert (res2.view.parts["kind"] == "summary").sum() == 1
        summary = res2.view.parts.loc[res2.view.parts["kind"] == "summary", "content"].iloc[0]
        assert "/home/dev/projects/quillstack/README.md (read)" in summary
        pd.testing.assert_frame_equal(rewind(res2.transcript, run.event, session=session).frame,
                                      t.frame)


@pytest.mark.parametrize("name", ["258c7280-ae70-4798-800f-63464d01a85d",
                                  "4d5611e5-241a-462a-8d15-5122611a9569",
                                  "8463c716-a2ea-4c14-9efa-87158ebd9f20"])
def test_a_tool_loop_after_a_recorded_compaction_is_summarized(name):
    """After Claude Code's own compaction the conversation is its summary, then tool calls
    and results with no user message: no boundary keeps a user message first, and the
    stage did nothing at any of these calls. Seed 000 keeps [summary, ...recent] whatever
    opens them: summarized, no tool pair split, the previous summary merged."""
    from tests.conftest import realdata_path

    t = ctxlab.load(realdata_path(f"claude_code/spotter/{name}.jsonl"))
    session = t.frame["session"].iloc[0]
    k = int(t.calls["call"].iloc[-1])
    end = call_end_pos(t, session, k)
    view = build_view(t, session, end, CHARS, BUDGET, k)
    res = run_stages(t, view, [Summarize()], end_pos=end, trigger="test")
    run = res.runs[0]
    assert run.event is not None, run.reason
    assert "which no user message opens" in run.reason and "merged" in run.reason
    assert run.tokens_after < run.tokens_before
    problems = {p.problem for p in check_grammar(res.view.parts)}
    assert not problems & {"orphan_result", "unanswered_call"}
    res.transcript.validate()
    pd.testing.assert_frame_equal(rewind(res.transcript, run.event, session=session).frame,
                                  t.frame)
