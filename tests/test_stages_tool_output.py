"""Single tool-output truncation (seed 000's limits, seed 002's handles): the defaults,
lines then bytes, head or tail, the notice, UTF-8 boundaries, handles and saved files."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.engine import Budget
from ctxlab.errors import ConfigError
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.stages import stage
from ctxlab.stages.tool_output import (TruncateToolOutput, cut_bytes, truncate_text,
                                       truncation_notice)
from tests.stage_helpers import apply_checked, last_view
from tests.conftest import DATASETS

BUDGET = Budget(window_tokens=200_000, limit_tokens=20_000, target_tokens=10_000)


def _build(outputs, *, role="tool"):
    """A prompt, then one tool call and its result per output."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s1", log)
    b.message("user", real_user=True)
    b.part("text", "run the tests")
    for i, out in enumerate(outputs):
        b.message("assistant")
        b.part("tool_call", f'Bash({{"command": "step {i}"}})', tool_name="Bash",
               tool_call_id=f"c{i}")
        b.message(role)
        b.part("tool_result", out, tool_name="Bash", tool_call_id=f"c{i}")
    b.message("assistant")
    b.call(call_id="k")
    b.part("text", "done")
    return assemble([b], log, {"format": "test"})


def _view(t):
    return last_view(t, BUDGET)


def _run(t, st_):
    view = _view(t)
    return view, apply_checked(t, view, st_)


def _new(r):
    return r.view.parts[r.view.parts["event"] == r.runs[0].event]


def test_defaults_are_seed_000s():
    st_ = stage("truncate_tool_output")
    assert isinstance(st_, TruncateToolOutput)
    assert (st_.max_bytes, st_.max_lines, st_.direction, st_.save_dir, st_.handle) == (
        51_200, 2_000, "tail", None, False)


def test_the_notice_is_the_seeds():
    assert truncation_notice(60_000, 51_200) == "[Output truncated from 60000 bytes to 51200 bytes]"
    assert truncation_notice(1, 0, saved_path="/x/y.txt").endswith("; full output: /x/y.txt]")


def test_lines_are_cut_before_bytes():
    text = "".join(f"{i}\n" for i in range(10))
    r = truncate_text(text, max_bytes=5, max_lines=4)
    # the last 4 lines "6\n7\n8\n9\n" are 8 bytes; their last 5 bytes stay
    assert r.text == "\n8\n9\n" and (r.original_bytes, r.kept_bytes, r.kept_lines) == (20, 5, 3)
    r = truncate_text(text, max_bytes=100, max_lines=3, direction="head")
    assert r.text == "0\n1\n2\n" and (r.original_lines, r.kept_lines) == (10, 3)
    assert not truncate_text("short", max_bytes=5, max_lines=1).truncated


def test_a_multibyte_character_is_never_cut_in_half():
    text = "é" * 10 + "🙂" * 10  # 2-byte then 4-byte characters
    for limit in range(1, 61):
        for direction in ("head", "tail"):
            data = cut_bytes(text.encode(), limit, direction)
            kept = data.decode("utf-8")  # raises if a character was cut
            assert len(data) <= limit and len(data) > limit - 4
            assert text.startswith(kept) if direction == "head" else text.endswith(kept)


@settings(max_examples=150, deadline=None)
@given(text=st.text(), max_bytes=st.integers(1, 200), max_lines=st.integers(1, 20),
       direction=st.sampled_from(["head", "tail"]))
def test_truncation_keeps_one_end_within_both_limits(text, max_bytes, max_lines, direction):
    r = truncate_text(text, max_bytes=max_bytes, max_lines=max_lines, direction=direction)
    assert r.kept_bytes == len(r.text.encode("utf-8", "surrogatepass")) <= r.original_bytes
    assert text.startswith(r.text) if direction == "head" else text.endswith(r.text)
    if r.truncated:
        assert r.kept_bytes <= max_bytes and r.kept_lines <= max_lines
    else:
        assert r.text == text


def test_worked_example_a_60kb_output_keeps_its_last_50kb():
    body = "".join(f"line {i:05d} " + "x" * 48 + "\n" for i in range(1000))  # 60,000 bytes
    t = _build(["small output", body])
    view, r = _run(t, TruncateToolOutput())
    new = _new(r)
    assert len(new) == 1
    row = new.iloc[0]
    kept = body.encode()[-51_200:].decode()
    assert row["content"] == kept + "\n\n[Output truncated from 60000 bytes to 51200 bytes]"
    old = view.parts[view.parts["content"] == body].iloc[0]
    assert (row["kind"], row["role"], row["tool_call_id"], row["tool_name"], row["msg"]) == (
        "tool_result", "tool", "c1", "Bash", old["msg"])
    meta = json.loads(row["meta"])
    assert meta["truncated"] and (meta["original_bytes"], meta["kept_bytes"]) == (60_000, 51_200)
    assert "small output" in set(r.view.parts["content"])


def test_head_direction_keeps_the_beginning():
    body = "A" * 30_000 + "B" * 30_000
    _, r = _run(_build([body]), TruncateToolOutput(direction="head"))
    assert _new(r).iloc[0]["content"].startswith("A" * 30_000 + "B" * 21_200 + "\n\n[Output")


def test_nothing_to_do_under_the_limits():
    t = _build(["x" * 51_200, "y\n" * 1_999])
    assert TruncateToolOutput().plan(_view(t)) is None


def test_too_many_lines_cut_to_the_last_2000():
    body = "".join(f"row {i}\n" for i in range(3_000))
    _, r = _run(_build([body]), TruncateToolOutput())
    content = _new(r).iloc[0]["content"]
    kept = content.split("\n\n[Output")[0]
    assert kept.splitlines()[0] == "row 1000" and len(kept.splitlines()) == 2_000


def test_a_replacement_that_would_not_save_tokens_is_not_made():
    # 2,001 one-character lines: cutting one line saves less than the notice costs
    edit = TruncateToolOutput().plan(_view(_build(["y\n" * 2_001])))
    assert edit is not None and edit.empty and "would not get smaller" in edit.reason


def test_ai_agent_handle_names_the_hidden_original():
    body = "z" * 20_000
    view, r = _run(_build([body]), TruncateToolOutput(max_bytes=12_288, handle=True))
    old = int(view.parts.loc[view.parts["content"] == body, "part"].iloc[0])
    content = _new(r).iloc[0]["content"]
    assert content.endswith(f"[Output truncated from 20000 bytes to 12288 bytes; full output: "
                            f"part:s1/{old}]")
    # the handle resolves: the full output is the hidden original part
    f = r.transcript.frame
    assert f.loc[f["part"] == old, "content"].item() == body
    assert f.loc[f["part"] == old, "hidden_by"].item() == r.runs[0].event


def test_ai_agent_cuts_on_bytes_only_as_seed_002_sets():
    """Seed 002's only limit is ``toolResponseMaxBytes`` (12,288): 3,000 short lines stay
    whole under the ai-agent preset (seed 000's 2,000-line limit is not its), a big
    output is cut to 12,288 bytes, and the reason names bytes alone."""
    from ctxlab.presets import preset

    cut = preset("ai-agent").always[0]
    assert (cut.max_bytes, cut.max_lines) == (12_288, None)
    lines = "".join(f"r{i % 10}\n" for i in range(3_000))          # 9,000 bytes
    assert cut.plan(_view(_build([lines]))) is None
    assert TruncateToolOutput().plan(_view(_build([lines]))).hide   # seed 000 would cut it
    _, r = _run(_build([lines, "z" * 20_000]), cut)
    assert r.runs[0].hidden == 1 and "12,288 bytes to their tail" in r.runs[0].reason
    assert "lines" not in r.runs[0].reason


def test_save_dir_writes_the_full_output_there_and_nowhere_else(tmp_path):
    out = tmp_path / "outputs"
    body = "w" * 60_000
    source = DATASETS / "coding_session.jsonl"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    for _ in range(2):  # deterministic: planning twice writes one file
        _, r = _run(_build([body]), TruncateToolOutput(save_dir=str(out), handle=True))
    files = list(tmp_path.rglob("*"))
    assert files == [out, *out.iterdir()] and len(list(out.iterdir())) == 1
    saved = next(out.iterdir())
    assert saved.read_text(encoding="utf-8") == body
    content = _new(r).iloc[0]["content"]
    assert f"full output: {saved} and part:s1/" in content
    assert json.loads(_new(r).iloc[0]["meta"])["saved_path"] == str(saved)
    assert hashlib.sha256(source.read_bytes()).hexdigest() == digest


def test_save_dir_without_a_parent_is_refused(tmp_path):
    st_ = TruncateToolOutput(save_dir=str(tmp_path / "a" / "b"))
    with pytest.raises(ConfigError, match="save_dir"):
        st_.plan(_view(_build(["q" * 60_000])))
    assert list(tmp_path.iterdir()) == []


def test_an_already_truncated_output_is_left_alone():
    t = _build(["v" * 60_000])
    _, r = _run(t, TruncateToolOutput())
    assert TruncateToolOutput().plan(r.view) is None


@pytest.mark.parametrize("params, message", [
    ({"max_bytes": 0}, "max_bytes"), ({"max_lines": -1}, "max_lines"),
    ({"max_bytes": True}, "max_bytes"), ({"direction": "middle"}, "direction"),
    ({"save_dir": ""}, "save_dir")])
def test_bad_parameters_are_refused(params, message):
    with pytest.raises(ConfigError, match=message):
        TruncateToolOutput(**params)


@pytest.fixture(scope="module")
def coding():
    t = ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()
    return t


def test_real_session_170kb_bash_output_is_cut(coding):
    view, r = _run(coding, TruncateToolOutput())
    new = _new(r)
    assert len(new) == 1
    row = new.iloc[0]
    old = view.parts[view.parts["tool_call_id"] == row["tool_call_id"]]
    original = old.loc[old["kind"] == "tool_result", "content"].iloc[0]
    assert len(original.encode()) > 51_200
    kept, notice = row["content"].rsplit("\n\n", 1)
    assert original.endswith(kept) and len(kept.encode()) <= 51_200
    assert notice == f"[Output truncated from {len(original.encode())} bytes to " \
                     f"{len(kept.encode())} bytes]"
    assert r.runs[0].tokens_saved > 20_000


def test_real_session_with_the_ai_agent_settings(coding):
    view, r = _run(coding, TruncateToolOutput(max_bytes=12_288, handle=True))
    results = view.parts[(view.parts["kind"] == "tool_result")]
    big = results["content"].map(lambda c: len(c.encode()) > 12_288 or c.count("\n") >= 2_000)
    assert len(_new(r)) == int(big.sum()) > 1
    assert _new(r)["content"].str.contains(r"; full output: part:").all()
