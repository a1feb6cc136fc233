"""Tests of the `carry_forward` stage (seed 003, Obsidian Copilot L2ContextCompactor)."""

from __future__ import annotations

import pandas as pd
import pytest

import ctxlab
from ctxlab.engine import Budget, build_view, call_end_pos, run_stages
from ctxlab.errors import ConfigError
from ctxlab.history import rewind
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.schema import Transcript
from ctxlab.stages import stage
from ctxlab.stages.base import View
from ctxlab.stages.carry_forward import CarryForward, sections, structure_preview
from tests.conftest import DATASETS

BUDGET = Budget(window_tokens=200_000, limit_tokens=128_000, target_tokens=1)

NOTE = "\n".join([
    "# Atlas migration plan",
    "Intro paragraph. " * 60,
    "## Risks",
    "The upstream API times out under load. " * 40,
    "```python",
    "# a comment, not a heading",
    "retry(times=3)",
    "```",
    "## Budget",
    "Capped at 40k EUR for Q3. " * 30,
])

XML_NOTE = "\n".join([
    '<note_context path="Notes/Ops/Webhook spec.md">',
    "<title>Webhook spec</title>",
    "Webhooks are signed with HMAC-SHA256. " * 80,
    "</note_context>",
])


def _session(attachments: list[tuple[str, str]], current: str | None = "x" * 3_000) -> Transcript:
    """Turn 1 brings attachments (path, text); turn 2 brings one of its own (current)."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("system")
    b.part("text", "You are Obsidian Copilot.")
    b.message("user", real_user=True)
    b.part("text", "Summarize these notes.")
    for path, text in attachments:
        b.part("attachment", text, file_path=path)
    c = b.call()
    b.message("assistant")
    b.part("text", "Here is the summary.", call=c)
    b.message("user", real_user=True)
    b.part("text", "What is the budget cap?")
    if current is not None:
        b.part("attachment", current, file_path="Notes/current.md")
    return assemble([b], log, {"format": "test"})


def _end(t: Transcript) -> float:
    return float(t.frame["pos"].max()) + 1.0


def _view(t: Transcript) -> View:
    return build_view(t, "s", _end(t), ctxlab.estimator("chars:4"), BUDGET)


def test_sections_split_at_markdown_and_tag_headings_outside_code():
    got = sections(NOTE)
    assert [h for h, _ in got] == ["# Atlas migration plan", "## Risks", "## Budget"]
    assert "# a comment, not a heading" in got[1][1]
    assert [h for h, _ in sections(XML_NOTE)] == [
        '<note_context path="Notes/Ops/Webhook spec.md">', "<title>Webhook spec</title>"]
    assert sections("plain text only") == [("", "plain text only")]
    assert sections("") == []


def test_structure_preview_keeps_headings_and_section_previews():
    block = structure_preview(NOTE, 500, source="Notes/plan.md")
    lines = block.split("\n")
    assert lines[0] == f'<prior_context source="Notes/plan.md" chars="{len(NOTE)}">'
    assert lines[-1] == "</prior_context>"
    for heading in ("# Atlas migration plan", "## Risks", "## Budget"):
        assert heading in lines
    assert "more chars]" in block
    assert len(block) < len(NOTE) / 2
    # Every section keeps at most section_chars of its body.
    body = block.split("## Risks\n")[1].split("\n## Budget")[0]
    assert len(body.split(" […")[0]) <= 500
    assert structure_preview("short", 500) == '<prior_context chars="5">\nshort\n</prior_context>'


def test_carried_attachments_become_prior_context_blocks():
    t = _session([("Notes/plan.md", NOTE), ("Notes/Ops/Webhook spec.md", XML_NOTE)])
    view = _view(t)
    assert view.parts.loc[view.parts["kind"] == "attachment", "layer"].tolist() == [
        "carried", "carried", "current"]
    res = run_stages(t, view, [stage("carry_forward")], end_pos=_end(t), trigger="test")
    run = res.runs[0]
    vis = res.view.parts
    att = vis[vis["kind"] == "attachment"]
    assert att["content"].str.startswith("<prior_context").tolist() == [True, True, False]
    assert att["file_path"].tolist() == ["Notes/plan.md", "Notes/Ops/Webhook spec.md",
                                         "Notes/current.md"]
    original_msg = t.frame.loc[t.frame["file_path"] == "Notes/plan.md", "msg"].iloc[0]
    assert att["msg"].iloc[0] == original_msg and att["role"].iloc[0] == "user"
    assert "<title>Webhook spec</title>" in att["content"].iloc[1]
    assert run.hidden == run.inserted == 2
    res.transcript.validate()
    assert run.tokens_after < run.tokens_before
    assert run.grammar_after == run.grammar_before
    back = rewind(res.transcript, run.event, session="s")
    pd.testing.assert_frame_equal(back.frame, t.frame)
    pd.testing.assert_frame_equal(back.events, t.events)
    # Compacted blocks are not compacted again.
    again = CarryForward(min_chars=1).plan(res.view)
    assert again is not None and again.empty


def test_small_attachments_are_left_alone():
    t = _session([("Notes/small.md", "# Small\n" + "s" * 500)])
    edit = CarryForward().plan(_view(t))
    assert edit is not None and edit.empty and "2,000" in edit.reason
    assert CarryForward(min_chars=100, section_chars=50).plan(_view(t)).hide


def test_attachment_that_would_not_shrink_is_left_alone():
    many_headings = "\n".join(f"# h{i}\nx" for i in range(400))
    edit = CarryForward(min_chars=10).plan(_view(_session([("a.md", many_headings)])))
    assert edit is not None and edit.empty and "would shrink" in edit.reason


def test_nothing_carried_nothing_to_do():
    assert CarryForward().plan(_view(_session([]))) is None
    view = _view(_session([]))
    empty = View(parts=view.parts.iloc[:0], estimator=view.estimator, window_tokens=1,
                 limit_tokens=1, target_tokens=1)
    assert CarryForward().plan(empty) is None


@pytest.mark.parametrize("params", [{"section_chars": 0}, {"min_chars": -1},
                                    {"section_chars": "500"}])
def test_bad_parameters_raise_config_error(params):
    with pytest.raises(ConfigError, match="carry_forward"):
        CarryForward(**params)


def test_registered_with_seed_defaults():
    st = stage("carry_forward")
    assert isinstance(st, CarryForward)
    assert st.params() == {"section_chars": 500, "min_chars": 2_000, "layers": ("carried",),
                           "min_room": None}
    with pytest.raises(ConfigError, match="layers"):
        stage("carry_forward", layers=("history",))


def test_system_layer_previews_injected_project_context_and_keeps_it_in_l1():
    """The copilot-fixed addition: project files in L1 previewed; the preview stays in L1."""
    t = ctxlab.load(DATASETS / "projects_mode.jsonl")
    s = t.sessions[0]
    k = int(t.calls["call"].max())
    end = call_end_pos(t, s, k)
    view = build_view(t, s, end, ctxlab.estimator("chars:4"), BUDGET, call=k)
    l1 = view.parts[view.parts["layer"] == "system"]
    assert len(l1) == 1 and l1["content"].iloc[0].startswith("<project_context>")
    plain = run_stages(t, view, [stage("carry_forward")], end_pos=end, trigger="test")
    assert plain.runs[0].event is None  # seed 003's compactor never looks at L1
    res = run_stages(t, view, [stage("carry_forward", layers=("system",), section_chars=100)],
                     end_pos=end, trigger="test")
    after = res.view.parts[res.view.parts["layer"] == "system"]
    assert len(after) == 1 and after["content"].iloc[0].startswith("<prior_context")
    assert after["tokens"].sum() < l1["tokens"].sum() / 3
    assert after["kind"].iloc[0] == "text" and after["role"].iloc[0] == "user"


def test_the_system_prompts_own_instructions_are_never_previewed():
    """In L1, only carried context is previewed: a system prompt of rules stays whole; one
    that holds the project's files (Copilot's Projects mode) keeps the rules before
    them and previews the <project_context> block."""
    rules = "You are Obsidian Copilot.\n# Output rules\n" + "".join(
        f"- Rule {i}: never do thing number {i} without asking the user first.\n"
        for i in range(120))
    rules = rules.replace("# Output rules\n", "# Output rules\nNotes come in <context> tags.\n")
    after = "\n# After the notes\nAlways cite the note path."
    for with_project in (False, True):
        log = RecordLog("mem.jsonl")
        b = SessionBuilder("s", log)
        b.message("system")
        b.part("text", rules + ("<project_context>\n# Notes\n" + NOTE + "\n"
                                "</project_context>" + after if with_project else ""))
        b.message("user", real_user=True)
        b.part("text", "What is the budget cap?")
        b.call()
        t = assemble([b], log, {"format": "test"})
        res = run_stages(t, _view(t), [stage("carry_forward", layers=("system",),
                                             section_chars=100)],
                         end_pos=_end(t), trigger="test")
        sent = res.view.parts[res.view.parts["role"] == "system"]["content"].iloc[0]
        if not with_project:
            assert res.runs[0].event is None and sent == rules
        else:
            assert res.runs[0].event is not None
            assert sent.startswith(rules + "<prior_context") and sent.endswith(after)
            assert "Rule 119: never do thing number 119" in sent and len(sent) < len(rules) + 2000


def test_coding_session_has_nothing_carried_and_stays_unchanged():
    t = ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()
    s = str(t.frame["session"].iloc[0])
    end = call_end_pos(t, s, 120)
    view = build_view(t, s, end, ctxlab.estimator("chars:4"), BUDGET, call=120)
    res = run_stages(t, view, [stage("carry_forward")], end_pos=end, trigger="test")
    assert res.runs[0].event is None
    pd.testing.assert_frame_equal(res.transcript.frame, t.frame)
