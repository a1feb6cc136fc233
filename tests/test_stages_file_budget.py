"""File token budget (seed 000): the budget formula, preview over 5 MB, the 100 KB fast
path, per-file truncation, the aggregate rule, linkage kept."""

from __future__ import annotations

import json
import math

import pytest

import ctxlab
from ctxlab.engine import Budget, build_view
from ctxlab.errors import ConfigError
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.stages import stage
from ctxlab.stages.file_budget import FileBudget, file_action, file_token_budget
from ctxlab.tokens.windows import output_reserve
from tests.stage_helpers import apply_checked, last_view
from tests.conftest import DATASETS


def _build(files=(), reads=(), bash=()):
    """A prompt with attachments, then Read and Bash tool pairs, then the call."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("user", real_user=True)
    b.part("text", "look at these files")
    for path, content in files:
        b.part("attachment", content, file_path=path)
    for i, (path, content) in enumerate(reads):
        b.message("assistant")
        b.part("tool_call", json.dumps({"file_path": path}).join(["Read(", ")"]),
               tool_name="Read", tool_call_id=f"r{i}", file_path=path)
        b.message("user")
        b.part("tool_result", content, tool_name="Read", tool_call_id=f"r{i}", file_path=path)
    for i, content in enumerate(bash):
        b.message("assistant")
        b.part("tool_call", 'Bash({"command": "make"})', tool_name="Bash", tool_call_id=f"b{i}")
        b.message("user")
        b.part("tool_result", content, tool_name="Bash", tool_call_id=f"b{i}")
    b.call(call_id="c")
    return assemble([b], log, {"format": "test"})


def _view(t, window=200_000):
    return last_view(t, Budget(window_tokens=window, limit_tokens=window,
                               target_tokens=window // 2))


def _run(t, st_, window=200_000):
    view = _view(t, window)
    return view, apply_checked(t, view, st_)


def _details(r):
    return json.loads(r.transcript.events.iloc[-1]["meta"])["stage_details"]


def _new(r):
    return r.view.parts[r.view.parts["event"] == r.runs[0].event]


def _expected_budget(view, file_tokens, max_output=None):
    current = view.total_tokens - file_tokens
    reserve = output_reserve(view.window_tokens) if max_output is None else max_output
    return file_token_budget(view.window_tokens, current, reserve)


def test_defaults_are_seed_000s():
    st_ = stage("file_budget")
    assert isinstance(st_, FileBudget)
    assert (st_.budget_percent, st_.fast_path_bytes, st_.preview_mode_bytes, st_.preview_chars,
            st_.max_output_tokens, st_.chars_per_token) == (0.6, 102_400, 5_242_880, 2_000,
                                                             None, 4.0)


@pytest.mark.parametrize("window, current, out, expected", [
    (200_000, 0, 0, 120_000), (200_000, 50_000, 64_000, 51_600),
    (128_000, 40_000, 44_800, 25_920), (100_000, 99_000, 4_000, 0), (10, 10, 0, 0)])
def test_the_budget_formula(window, current, out, expected):
    assert file_token_budget(window, current, out) == expected


@pytest.mark.parametrize("size, budget, expected", [
    (5_242_881, 10 ** 9, ("preview", 2_000)),      # over 5 MB: preview, whatever the budget
    (5_242_880, 10 ** 9, ("keep", 5_242_880)),      # exactly 5 MB is not over
    (102_399, 0, ("keep", 102_399)),                # under 100 KB: fast path
    (102_400, 25_600, ("keep", 102_400)),           # 25,600 tokens fit a 25,600 budget
    (102_400, 25_599, ("truncate", 102_396)),       # one token short: cut to budget * 4
    (1_000_000, 0, ("truncate", 0))])
def test_the_per_file_decision(size, budget, expected):
    assert file_action(size, size, budget) == expected


def test_a_file_over_5mb_is_previewed():
    big = "0123456789" * 524_300  # 5,243,000 bytes
    view, r = _run(_build(files=[("big.log", big)]), FileBudget())
    row = _new(r).iloc[0]
    assert row["kind"] == "attachment" and row["file_path"] == "big.log"
    assert row["content"] == big[:2_000] + ("\n\n[File preview: first 2,000 of 5,243,000 "
                                            "characters; the file is larger than 5,242,880 "
                                            "bytes]")
    assert row["msg"] == view.parts.loc[view.parts["kind"] == "text", "msg"].iloc[0]
    assert _details(r)["previewed"] == 1


def test_a_mid_size_file_is_cut_to_the_budget():
    # 200,000 characters = 50,000 estimated tokens against a 128k window
    text = "a" * 200_000
    t = _build(files=[("data.csv", text)])
    view = _view(t, 128_000)
    budget = _expected_budget(view, 50_000)
    assert budget < 50_000
    _, r = _run(t, FileBudget(), 128_000)
    d = _details(r)
    assert (d["budget_tokens"], d["truncated"], d["current_tokens"]) == (
        budget, 1, view.total_tokens - 50_000)
    assert d["max_output_tokens"] == 44_800  # seed 000's reserve: min(64k, 35% of 128k)
    content = _new(r).iloc[0]["content"]
    assert content.startswith("a" * (budget * 4) + "\n\n[File truncated to ")
    assert f"to fit the file token budget of {budget:,} tokens]" in content


def test_a_file_under_100kb_that_fits_is_untouched():
    t = _build(files=[("small.txt", "s" * 100_000)])
    edit = FileBudget().plan(_view(t))
    assert edit is not None and edit.empty and "fit the file budget" in edit.reason


def test_aggregate_rule_shares_the_budget_and_drops_tiny_shares():
    reads = [(f"f{i}.py", chr(97 + i) * 60_000) for i in range(5)] + [("tiny.py", "t" * 300)]
    t = _build(reads=reads, bash=["b" * 60_000])
    view = _view(t, 128_000)
    file_tokens = 5 * 15_000 + 75
    budget = _expected_budget(view, file_tokens)
    assert budget < file_tokens
    _, r = _run(t, FileBudget(), 128_000)
    new = _new(r).set_index("tool_call_id")
    share = math.floor(budget * 15_000 / file_tokens * 4)
    for i in range(5):  # every 60 KB file (fast path alone) gets its proportional share
        assert new.loc[f"r{i}", "content"].startswith(chr(97 + i) * share + "\n\n[File truncated")
        assert new.loc[f"r{i}", "kind"] == "tool_result" and new.loc[f"r{i}", "file_path"] == \
            f"f{i}.py"
    tiny_share = math.floor(budget * 75 / file_tokens * 4)
    assert tiny_share < 200
    assert new.loc["r5", "content"] == (f"[File tiny.py omitted: the files of this request "
                                        f"exceed the file token budget of {budget:,} tokens]")
    assert "b0" not in new.index  # a Bash output is not a file
    d = _details(r)
    assert (d["files"], d["cut_to_share"], d["dropped"], d["file_tokens"]) == (6, 5, 1,
                                                                             file_tokens)


def test_explicit_max_output_tokens():
    t = _build(files=[("a.txt", "x" * 150_000)])
    view = _view(t)
    edit = FileBudget(max_output_tokens=150_000).plan(view)
    assert edit.details["budget_tokens"] == _expected_budget(view, 37_500, 150_000)
    assert edit.details["max_output_tokens"] == 150_000 and edit.details["truncated"] == 1
    assert FileBudget().plan(view).empty  # 200k window, 64k reserve: it fits


def test_nothing_to_do_without_files():
    assert FileBudget().plan(_view(_build(bash=["b" * 200_000]))) is None
    t = _build()
    assert FileBudget().plan(build_view(t, "s", -1.0, ctxlab.estimator("chars:4"), Budget(
        window_tokens=10, limit_tokens=10, target_tokens=5))) is None


@pytest.mark.parametrize("params, message", [
    ({"budget_percent": 0}, "budget_percent"), ({"budget_percent": 1.5}, "budget_percent"),
    ({"fast_path_bytes": -1}, "fast_path_bytes"), ({"preview_chars": 2.5}, "preview_chars"),
    ({"fast_path_bytes": 10, "preview_mode_bytes": 5}, "must not exceed"),
    ({"max_output_tokens": -5}, "max_output_tokens"), ({"chars_per_token": 0}, "chars_per_token")])
def test_bad_parameters_are_refused(params, message):
    with pytest.raises(ConfigError, match=message):
        FileBudget(**params)


@pytest.fixture(scope="module")
def coding():
    return ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()


def test_real_session_read_results_share_the_budget(coding):
    view, r = _run(coding, FileBudget())
    d = _details(r)
    reads = view.parts[(view.parts["kind"] == "tool_result") & (view.parts["tool_name"] == "Read")]
    assert d["files"] == len(reads) and d["file_tokens"] == int(reads["tokens"].sum())
    assert d["file_tokens"] > d["budget_tokens"]  # the aggregate rule applies
    assert d["budget_tokens"] == _expected_budget(view, d["file_tokens"])
    new = _new(r)
    assert set(new["kind"]) == {"tool_result"} and set(new["tool_name"]) == {"Read"}
    hidden = r.transcript.frame[r.transcript.frame["hidden_by"] == r.runs[0].event]
    assert sorted(new["tool_call_id"]) == sorted(hidden["tool_call_id"])
    assert r.runs[0].tokens_saved > 0
