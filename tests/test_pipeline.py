"""Pipelines and presets: triggers, targets, post-steps, the seed stories, real sessions."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

import ctxlab
from ctxlab.errors import ConfigError
from ctxlab.layers import layers_df
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.pipeline import Pipeline, compact, compact_all, stages_from
from ctxlab.presets import preset, preset_names
from ctxlab.tokens.accuracy import session_overheads
from tests.conftest import DATASETS, REALDATA

PRESETS = ["neurolink", "probe", "ai-agent", "copilot-legacy", "copilot-fixed", "neuron",
           "observation-masking"]


@pytest.fixture(scope="module")
def coding():
    return ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()


def test_every_seed_preset_is_registered_and_unknown_names_list_them():
    assert set(PRESETS) <= set(preset_names())
    with pytest.raises(ConfigError, match="presets: .*neurolink"):
        preset("langchain-magic")
    with pytest.raises(ConfigError, match="no field 'thresh'; fields: .*threshold"):
        preset("neurolink", thresh=0.5)
    assert preset("neurolink", threshold=0.6).threshold == 0.6


def test_pipeline_validates_its_fields():
    with pytest.raises(ConfigError, match="threshold"):
        Pipeline(name="x", threshold=0)
    with pytest.raises(ConfigError, match="limit_tokens"):
        Pipeline(name="x", limit="fixed")
    with pytest.raises(ConfigError, match="unknown layers"):
        Pipeline(name="x", trigger_layers=("L9",))


def test_neurolink_compacts_the_last_request_like_seed_000(coding):
    r = compact(coding, "neurolink", window=200_000)
    assert r.triggered and r.compacted
    assert r.limit_tokens == 200_000 - 64_000 and r.target_tokens == int(0.8 * 136_000)
    # seed 000's tool-output limit first (a 170 kB output), then the triggered stages
    assert r.stages_used[:2] == ("truncate_tool_output", "prune") and r.within_target
    assert r.tokens_after <= r.target_tokens < r.tokens_before
    assert r.tokens_saved == r.tokens_before - r.tokens_after
    assert r.grammar_after["orphan_result"] == r.grammar_after["unanswered_call"] == 0
    # stages stop once under target: nothing after the stage that got there
    assert r.runs[-1].stage == "repair" or r.runs[-1].tokens_after <= r.target_tokens
    assert r.transcript.validate(strict=False) == []
    back = r.transcript.rewind()
    pd.testing.assert_frame_equal(back.frame, coding.frame)


def test_neuron_triggers_on_the_messages_without_the_tool_definitions():
    """Seed 004's loop compares ``token_estimate(messages)`` (per-message framing
    included) with the trigger; tool definitions are estimated apart
    (``estimate_tools``)."""
    from dataclasses import replace

    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    s = t.sessions[0]
    k = int(t.calls.loc[t.calls["session"] == s, "call"].max())
    roomy = compact(t, replace(preset("neuron"), limit_tokens=10**7), session=s, call=k)
    parts = roomy.view.parts
    tools = int(parts.loc[parts["layer"] == "tools", "tokens"].sum())
    assert tools > 0
    limit = roomy.tokens_before - tools // 2     # messages fit, messages + tools do not
    res = compact(t, replace(preset("neuron"), limit_tokens=limit), session=s, call=k)
    assert res.tokens_before > limit and not res.triggered and not res.compacted
    with pytest.raises(ConfigError, match="trigger_tools=False"):
        replace(preset("neuron"), trigger_layers=("history",))
    assert preset("neuron").trigger_tools is False
    c = ctxlab.replay(t, "neuron").calls              # the replay checks the same measure
    assert (c["checked_tokens"] == c["tokens_before"] - c["tools_before"]).all()
    assert (c["tools_before"] > 0).any()
    whole = replace(preset("neuron"), limit_tokens=limit, trigger_tools=True)
    assert compact(t, whole, session=s, call=k).triggered


def test_neuron_stops_once_the_messages_are_under_target_whatever_the_tools():
    """Seed 004's composite strategy re-estimates the messages after each strategy and
    stops once they are under the threshold: the tool definitions, which its trigger
    leaves out, keep no later strategy running (nor make the request 'over target')."""
    from dataclasses import replace

    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    s = t.sessions[0]
    k = int(t.calls.loc[t.calls["session"] == s, "call"].max())
    p = preset("neuron")
    roomy = compact(t, replace(p, limit_tokens=10**8), session=s, call=k)
    tokens = roomy.view.parts["tokens"]
    messages = roomy.tokens_before - int(tokens[roomy.view.parts["layer"] == "tools"].sum())
    cleared = compact(t, replace(p, limit_tokens=10**8, stages=p.stages[:1]), session=s,
                      call=k, force=True)
    assert cleared.stages_used == ("clear_tool_results",)
    after = cleared.tokens_after - (roomy.tokens_before - messages)   # messages left
    assert after < messages
    # a limit whose threshold the cleared messages are under, but not with the tools
    limit = int((after + 1) / p.threshold) + 1
    tool_heavy = replace(p, limit_tokens=limit)
    res = compact(t, tool_heavy, session=s, call=k, force=True)
    assert res.tokens_after > res.target_tokens >= after       # the whole request is over
    assert res.stages_used == ("clear_tool_results",) and res.within_target
    assert res.note == ""
    # the replay's verdict measures the same
    c = ctxlab.replay(t.session(s), replace(p, limit_tokens=limit)).calls
    fired = c[c["triggered"]]
    messages_in = fired["tokens_after"] - fired["tools_after"] <= fired["target_tokens"]
    assert fired["within_target"].tolist() == messages_in.tolist()
    assert len(fired) and fired["tools_after"].gt(0).all()


def test_ai_agent_lets_a_first_turn_through_that_only_its_schemas_push_over():
    """Seed 002: "If only schema tokens overflow and base projection (without schema) fits
    within limit, the guard returns ok" (in the first turn the projection leaves the
    schemas out; later they are in the committed context)."""
    from dataclasses import replace

    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    s = t.sessions[0]
    roomy = replace(preset("ai-agent"), limit="fixed", limit_tokens=10**7)
    first = ctxlab.replay(t, roomy).calls.query("session == @s").iloc[0]
    assert first["tools_before"] > 0
    limit = int(first["tokens_before"] - first["tools_before"] // 2)
    tight = replace(roomy, limit_tokens=limit)
    calls = ctxlab.replay(t, tight).calls
    row = calls.query("session == @s").iloc[0]
    assert row["tokens_after"] > limit and not row["forced_final"]
    assert not compact(t, tight, session=s, call=int(row["call"])).forced_final
    over = calls[calls["tokens_after"] - calls["tools_after"] > limit]
    assert len(over) and over["forced_final"].all()     # over without the schemas too
    # a later turn: the schemas are committed context, no exemption
    r = ctxlab.replay(t, roomy)
    later = next(c for c in r.calls.query("session == @s").itertuples()
                 if r.at(c.call, session=s)[0].query("turn > 0")["turn"].nunique() > 1)
    limit = int(later.tokens_before - later.tools_before // 2)
    row = ctxlab.replay(t, replace(roomy, limit_tokens=limit)).calls.query(
        "session == @s and call == @later.call").iloc[0]
    assert row["tokens_after"] - row["tools_after"] <= limit < row["tokens_after"]
    assert row["forced_final"]


@pytest.mark.parametrize("name, window", [("probe", 4_000), ("copilot-legacy", None),
                                          ("copilot-fixed", None)])
def test_monologue_presets_send_no_tool_result_without_its_call(name, window):
    """monologue keeps an older segment's final tool results and hides their calls
    (seed 001's ``User → Tool result``); a provider refuses such a request, so these
    presets repair it with placeholder calls."""
    from tests.stage_helpers import build_transcript

    msgs: list = []
    for i in range(4):
        msgs += [("user", [("text", f"task {i}")]),
                 ("assistant", [("thinking", "plan " + "t" * 3000),
                                ("tool_call", f'search({{"q": "{i}"}})',
                                 {"tool_name": "search", "tool_call_id": f"c{i}"})]),
                 ("user", [("tool_result", "result " + "r" * 3000,
                            {"tool_name": "search", "tool_call_id": f"c{i}"})])]
    t = build_transcript(msgs + [("user", [("text", "task 5")])])
    r = compact(t, name, window=window) if window else compact(t, name)
    assert "monologue" in r.stages_used and "repair" in r.stages_used
    assert r.grammar_after["orphan_result"] == 0
    results = r.view.parts[r.view.parts["kind"] == "tool_result"]
    assert len(results) == 4         # the older segments' final answers are kept


def test_ai_agent_on_a_window_too_small_for_its_buffer_forces_final_turns():
    """gpt-4's 8,192-token window leaves seed 002's guard no room: every request is over
    the limit and forces a final turn (a replay used to stop with an error)."""
    b = SessionBuilder("s", RecordLog("mem.jsonl"))
    b.message("user", real_user=True)
    b.part("text", "hello " * 50)
    b.call(model="gpt-4", input_total=300)
    b.message("assistant")
    b.part("text", "hi")
    t = assemble([b], RecordLog("mem.jsonl"), {"format": "test"})
    r = ctxlab.replay(t, "ai-agent")
    row = r.calls.iloc[0]
    assert row["limit_tokens"] == 0 and bool(row["forced_final"])
    assert preset("ai-agent").limit_for(8_192) == 0


def test_below_threshold_nothing_happens(coding):
    r = compact(coding, preset("neurolink", always=()), window=2_000_000)
    assert not r.triggered and not r.compacted and r.tokens_after == r.tokens_before
    assert r.transcript is coding
    # NeuroLink's tool-output limit holds on every request, trigger or not
    r = compact(coding, "neurolink", window=2_000_000)
    assert not r.triggered and r.compacted and r.stages_used == ("truncate_tool_output",)


def test_force_runs_the_stages_anyway(coding):
    r = compact(coding, preset("neuron"), window=2_000_000, force=True)
    assert r.triggered and r.compacted


def _seed_003_request(project_chars: int = 2_000_000) -> ctxlab.Transcript:
    """Seed 003's Projects-mode arithmetic, in chars/4 tokens: L1 500k, L2 20k, L3 50k,
    L4 15 turns = 200k, L5 2k; 772k in all (L1 ``project_chars`` / 4)."""
    log = RecordLog("seed003.jsonl")
    b = SessionBuilder("s", log)
    b.message("system")
    b.part("text", "<project_context>" + "p" * (project_chars - 17))
    for turn in range(15):
        b.message("user", real_user=True)
        if turn == 14:
            b.part("attachment", "<note>" + "c" * (80_000 - 6))  # carried into turn 16
        b.part("text", "u" * 26_664)
        b.message("assistant")
        b.part("text", "a" * 26_664, call=b.n_calls)
        b.call(call_id=f"c{turn}")
    b.message("user", real_user=True)
    b.part("attachment", "<selection>" + "s" * (200_000 - 11))
    b.part("text", "q" * 8_000)
    b.call(call_id="last")
    for i in range(5):
        log.used("line", line=i + 1, parts=1)
    return assemble([b], log, meta={"format": "test"})


def test_seed_003_story_legacy_lets_772k_through_and_the_fix_holds_128k():
    t = _seed_003_request()
    legacy = preset("copilot-legacy", limit_tokens=1_000_000, always=())  # Projects mode
    r = compact(t, legacy, window=1_048_576, estimator="chars:4")
    layers = layers_df(r.view.parts).set_index("layer")["tokens"]
    assert abs(layers.sum() - 772_000) < 2_000
    assert layers["system"] == 500_000 and abs(layers["history"] - 200_000) < 1_000
    assert not r.triggered and r.tokens_after == r.tokens_before  # L2+L3+L5 = 72k < 1M
    fixed = compact(t, "copilot-fixed", window=1_048_576, estimator="chars:4")
    assert fixed.triggered and fixed.within_target and fixed.tokens_after <= 128_000
    # L1 alone leaves no room: it is previewed, then the history gets what is left
    assert fixed.stages_used[-2:] == ("carry_forward", "trim_history")
    history = layers_df(fixed.view.parts).set_index("layer")["tokens"]["history"]
    assert history > 100_000 and fixed.tokens_after > 128_000 - 4_096 - 30_000
    # without the L1 preview (the plan as written), trimming history cannot hold the budget
    plan_only = preset("copilot-fixed", enforce=stages_from(["trim_history"]))
    as_written = compact(t, plan_only, window=1_048_576, estimator="chars:4")
    assert "trim_history" in as_written.stages_used and not as_written.within_target
    assert "over" in as_written.note


def test_seed_003_fix_trigger_leaves_history_out_and_history_is_budgeted_every_request():
    """L1 2k: L1+L2+L3+L5 is at most 74k, under 128k, so nothing is summarized (a
    whole-request trigger would fire at 274k); besides the shipped L2 compactor (always),
    the history alone is trimmed, by the enforced stage, to what the other layers leave
    less the output reserve."""
    t = _seed_003_request(project_chars=8_000)
    r = compact(t, "copilot-fixed", window=1_048_576, estimator="chars:4")
    assert r.tokens_before > 250_000 and not r.triggered
    assert r.stages_used == ("carry_forward", "trim_history")
    ran = {run.stage: run for run in r.runs if run.event is not None}
    ev = r.transcript.events.set_index("event").loc[ran["trim_history"].event]
    assert ev["trigger"] == "enforce"
    layers = layers_df(r.view.parts).set_index("layer")["tokens"]
    rest = r.tokens_after - layers["history"]
    assert r.tokens_after <= 128_000 - 4_096 and layers["history"] > 0
    assert 128_000 - 4_096 - rest - layers["history"] < 30_000   # whole turns dropped
    # the L1 preview is a last resort: with room left beside the history, it does nothing
    preview = next(run for run in r.runs if run.stage == "carry_forward" and run.event is None
                   and "limit" in run.reason)
    assert "leave" in preview.reason and r.within_target
    # enforced stages run on requests the trigger leaves alone, in a replay too
    replayed = ctxlab.replay(t, "copilot-fixed", window=1_048_576)
    last = replayed.calls.iloc[-1]
    assert not last["triggered"] and last["tokens_after"] == r.tokens_after
    assert set(replayed.transcript.events["trigger"]) == {"always", "enforce"}


def test_a_request_the_enforced_budget_cannot_hold_is_not_within_target():
    """No trigger (the history is not measured) but still over 128k after the history was
    trimmed as far as it goes: over target, and the note says why."""
    log = RecordLog("x.jsonl")
    b = SessionBuilder("s", log)
    b.message("system")
    b.part("text", "you are helpful")
    b.message("user", real_user=True)
    b.part("text", "u" * 240_000)                     # a 60k-token old question
    b.message("assistant")
    b.part("text", "ok", call=b.n_calls)
    b.call(call_id="c0")
    b.message("user", real_user=True)
    b.part("text", "q" * 400_000)                     # a 100k-token prompt
    b.call(call_id="last")
    for i in range(3):
        log.used("line", line=i + 1, parts=1)
    t = assemble([b], log, meta={"format": "test"})
    r = compact(t, "copilot-fixed", window=1_048_576, estimator="chars:4")
    assert not r.triggered and r.tokens_after > 128_000
    assert not r.within_target and "trim_history: still" in r.note
    last = ctxlab.replay(t, "copilot-fixed", window=1_048_576).calls.iloc[-1]
    assert not last["within_target"] and "trim_history: still" in last["note"]
    # with two old turns it drops one and is still over: its warning is in the note too
    b2 = SessionBuilder("s", log := RecordLog("y.jsonl"))
    b2.message("system")
    b2.part("text", "you are helpful")
    for i in range(2):
        b2.message("user", real_user=True)
        b2.part("text", "u" * 240_000)
        b2.message("assistant")
        b2.part("text", "ok", call=b2.n_calls)
        b2.call(call_id=f"c{i}")
    b2.message("user", real_user=True)
    b2.part("text", "q" * 400_000)
    b2.call(call_id="last")
    for i in range(3):
        log.used("line", line=i + 1, parts=1)
    r2 = compact(assemble([b2], log, meta={"format": "test"}), "copilot-fixed",
                 window=1_048_576, estimator="chars:4")
    assert r2.stages_used == ("trim_history",) and not r2.within_target
    assert "trim_history: the request is still" in r2.note and "oldest" not in r2.note


def test_enforced_stages_run_after_the_triggered_ones_on_every_request(coding):
    p = Pipeline(name="t", stages=stages_from([("keep_last", {"keep": 40})]),
                 enforce=stages_from([("keep_last", {"keep": 20})]), threshold=0.5,
                 limit="fixed", limit_tokens=10_000)
    r = compact(coding, p, window=200_000)
    assert r.triggered and r.stages_used == ("keep_last", "keep_last")
    triggers = r.transcript.events.sort_values("event")["trigger"].tolist()
    assert triggers == ["threshold", "enforce"]
    quiet = compact(coding, replace(p, limit_tokens=1_000_000), window=200_000)
    assert not quiet.triggered and quiet.stages_used == ("keep_last",)
    with pytest.raises(ConfigError, match="not a Stage"):
        Pipeline(name="bad", enforce=("trim_history",))


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_runs_on_every_call_of_a_dataset_session(name):
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    out, rows = compact_all(t.rewind_recorded(), name, window=100_000,
                            overhead_tokens=session_overheads(t, "chars:4"))
    assert len(rows) == len(t.calls)
    assert out.validate(strict=False) == []
    stuck = rows[~rows["within_target"] | rows["over_window"]]
    assert (stuck["note"] != "").all()  # every request over its target says why


@pytest.mark.realdata
@pytest.mark.slow
@pytest.mark.parametrize("name", PRESETS)
def test_presets_on_real_claude_code_sessions_at_their_real_window(name):
    """Every request at or under its target, or a note saying why it could not be."""
    folder = REALDATA / "claude_code" / "spotter"
    if not folder.is_dir():
        pytest.skip(f"real transcripts not available: {folder} is absent")
    for path in sorted(folder.glob("*.jsonl")):
        t = ctxlab.load(path)
        est = preset(name).estimator.replace("{provider}", "anthropic")
        out, rows = compact_all(t.rewind_recorded(), name, window=200_000,
                                overhead_tokens=session_overheads(t, est))
        assert len(rows) == len(t.calls)
        ok = rows["within_target"] & ~rows["over_window"]
        assert (ok | (rows["note"] != "")).all(), rows[~ok].head()
        if name in ("neurolink", "neuron", "observation-masking"):
            assert rows["over_window"].sum() == 0


def test_ai_agent_gives_an_unknown_model_seed_002s_fallback_window():
    """Seed 002 falls back to 131,072 tokens for a model it does not know (seed 000, and
    the other presets, to 128,000); a known model keeps its window."""
    from dataclasses import replace

    from ctxlab.errors import ConfigError

    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    s = t.sessions[0]
    calls = t.calls.copy()
    calls["model"] = "some-model-nobody-knows"
    unknown = replace(t, calls=calls)
    k = int(calls.loc[calls["session"] == s, "call"].max())
    assert compact(unknown, "ai-agent", session=s, call=k).window_tokens == 131_072
    assert compact(unknown, "neuron", session=s, call=k).window_tokens == 128_000
    c = ctxlab.replay(unknown.session(s), "ai-agent").calls
    assert set(c["window_tokens"]) == {131_072}
    assert set(ctxlab.replay(t.session(s), "ai-agent").calls["window_tokens"]) != {131_072}
    with pytest.raises(ConfigError, match="default_window"):
        replace(preset("ai-agent"), default_window=0)


def test_a_pipelines_text_names_the_stages_that_run_without_the_trigger():
    """ai-agent read "no stages" though it cuts every big tool output: the text names the
    stages run on every request and those enforced after the triggered ones."""
    assert str(preset("ai-agent")) == ("ai-agent: truncate_tool_output on every request; "
                                       "no stages at 100% of effective")
    assert str(preset("copilot-fixed")).startswith(
        "copilot-fixed: monologue + keep_last + carry_forward on every request; "
        "carry_forward + trim_history enforced after; summarize at 100% of 128,000 tokens "
        "(fixed)")
    assert str(preset("neuron")) == ("neuron: clear_tool_results > keep_last at 100% of "
                                     "100,000 tokens (fixed)")
    # the threshold as set (it read "84%" for 83.5%)
    assert str(preset("claude-code")) == "claude-code: reattach at 100% of autocompact"
    assert str(preset("claude-code").with_threshold(0.835)) == \
        "claude-code: reattach at 83.5% of autocompact"


def test_a_field_of_the_wrong_type_is_a_config_error():
    with pytest.raises(ConfigError, match="pipeline 'neuron': "):
        preset("neuron", limit_tokens="100k")


def test_a_window_given_to_a_fixed_limit_pipeline_says_what_it_does_not_do(capsys):
    """neuron and copilot trigger at a fixed limit: --window 50k only moves the overflows.
    The command line says so, and so does a sweep's note; a window-relative preset or no
    window has nothing to say."""
    from ctxlab.cli import main
    from ctxlab.pipeline import window_note
    from ctxlab.sweep_grid import expand

    assert window_note(preset("neurolink"), 50_000) is None
    assert window_note(preset("neuron"), None) is None
    assert main(["replay", str(DATASETS / "coding_session.jsonl"), "--preset", "neuron",
                 "--window", "50k"]) == 0
    err = capsys.readouterr().err
    assert "neuron triggers at a fixed 100,000 tokens whatever the window: 50,000 counts " \
           "overflows only" in err
    configs, cols = expand({"preset": ["neuron", "neurolink"], "window": [50_000, None]})
    notes = [c.columns(cols)["note"] for c in configs]
    assert notes[1:] == [None, None, None] and "fixed 100,000 tokens" in notes[0]


def test_an_unknown_limit_is_an_error_not_the_available_input():
    """A misspelt limit fell through to ``available`` (window − output reserve)."""
    from ctxlab.pipeline import Pipeline
    with pytest.raises(ConfigError, match="'autocompact'"):
        Pipeline(name="x", limit="autocompat")
    assert Pipeline(name="x", limit="autocompact").limit_for(200_000) == 167_000
