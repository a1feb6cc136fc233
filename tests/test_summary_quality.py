"""The summary-retention metric, the truncation baseline, and real summaries against both.

On the three real Claude Code sessions (``../shared/realdata/claude_code/spotter``, one
auto-compaction each), the recorded summary, `structured` and `truncation` are scored
on the conversation before the compaction, the last two with the recorded summary's
tokens as budget. Measured with ``chars:4`` (kept/total; tokens; budget = recorded):

=========  =====  ==============================  ===============  ===============
session    tok    paths  rec / struct / trunc     commands r/s/t   errors r/s/t
=========  =====  ==============================  ===============  ===============
258c7280   3592   35 / 52 / 32 of 120             0 / 42 / 5 of 42  0 / 2 / 0 of 2
4d5611e5   3898   23 / 30 / 27 of 70              5 / 24 / 3 of 24  none (0 errors)
8463c716   3007   30 / 47 / 23 of 118             5 / 25 / 3 of 25  0 / 1 / 0 of 1
=========  =====  ==============================  ===============  ===============

`structured` used 3424 / 2927 / 2192 tokens. With the estimator calibrated on the three
logs' reported usage the budgets are 5433 / 5896 / 4549 tokens and the counts are the
same. 4d5611e5 has no error line that `ctxlab.artifacts` recognises before its
compaction, so its error shares are undefined for every summary.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.errors import ConfigError
from ctxlab.summarizers import render_parts, summarizer
from ctxlab.summarizers.recorded import recorded_points
from ctxlab.summarizers.structured import Structured
from ctxlab.summarizers.truncation import Truncation, cut_text, fit_cut
from ctxlab.summary_quality import (KEY_CHARS, SCORE_COLUMNS, compare_summaries_df,
                                    condensed_artifacts, condensed_parts, kept_mask,
                                    recorded_comparison_df, summary_retention)
from ctxlab.tokens import estimator
from conftest import DATASETS, realdata_path

CHARS = estimator("chars:4")
KINDS = ("paths", "commands", "errors")


def _parts(*contents: str) -> pd.DataFrame:
    """Parts with only what the metric and the summarizers read."""
    n = len(contents)
    return pd.DataFrame({"role": ["user"] * n, "kind": ["text"] * n, "content": list(contents),
                         "tool_name": [None] * n})


def _bash(command: str) -> str:
    return f"Bash({json.dumps({'command': command})})"


def _kept(kind: str, key: str, text: str) -> bool:
    return bool(kept_mask(pd.DataFrame({"kind": [kind], "key": [key]}), text)[0])


# ---- what "keeps" means -----------------------------------------------------------------
@pytest.mark.parametrize(("path", "text", "kept"), [
    ("/home/u/proj/lib/app/a.ex", "edited /home/u/proj/lib/app/a.ex", True),
    ("/home/u/proj/lib/app/a.ex", "edited `lib/app/a.ex` (twice)", True),   # names its dir
    ("/home/u/proj/lib/app/a.ex", "edited app/a.ex.", True),
    ("/home/u/proj/lib/app/a.ex", "edited a.ex", False),                    # bare name
    ("/home/u/proj/lib/app/a.ex", "edited lib/other/a.ex", False),
    ("src/a.py", "see /repo/src/a.py:12", True),                            # longer form
    ("app.ex", "see lib/myapp.ex", False),                                  # not a segment
    ("/repo/src/a.py", "see /repo/src/a.pyc and /repo/src/a.py.bak", False),
    ("/home/u/projects/spotter", "/home/u/projects/spotter-worktrees/x/a.ex", False),
])
def test_a_path_is_kept_in_full_or_by_a_tail_that_names_its_directory(path, text, kept):
    assert _kept("path", path, text) is kept


def test_commands_and_errors_are_kept_verbatim_up_to_whitespace_and_their_head():
    cmd = "cd /repo && mix test test/a_test.exs\n  --trace 2>&1 | tail -5"
    key = condensed_artifacts(_parts(_bash(cmd)))
    (key,) = key.loc[key["kind"] == "command", "key"]
    assert key == " ".join(cmd.split())
    assert _kept("command", key, "Ran:\n`cd /repo && mix test test/a_test.exs --trace\n"
                                 "2>&1 | tail -5` and it passed")
    assert not _kept("command", key, "ran mix test test/a_test.exs --trace")
    assert not _kept("command", key, key.upper())
    long_err = "ERROR: " + "x" * 250
    found = condensed_artifacts(_parts(f"log\n{long_err}\nmore"))
    (err,) = found.loc[found["kind"] == "error", "key"]
    assert len(err) == KEY_CHARS and long_err.startswith(err)
    assert _kept("error", err, f"Failed with {long_err[:KEY_CHARS + 10]}…")
    assert not _kept("error", err, long_err[: KEY_CHARS - 1])
    # a short command is kept as a whole, not inside a word
    prose = "Looked at the tools and details; we will make git diffs smaller."
    assert not _kept("command", "ls", prose) and not _kept("command", "git diff", prose)
    assert _kept("command", "git diff", "then ran git diff.")


def test_a_summary_quoting_a_tool_call_keeps_its_command():
    cmd = 'git commit -m "$(cat <<\'EOF\'\nfix: parser\nEOF\n)"'
    parts = _parts(_bash(cmd))
    assert summary_retention(parts, render_parts(parts))["commands_share"] == 1.0
    assert summary_retention(parts, "ran git commit")["commands_share"] == 0.0


def test_distinct_artifacts_are_counted_once_and_no_artifacts_give_nan():
    parts = _parts("Edit src/a.py", "Edit src/a.py again", "Read ./docs/b.md",
                   "FAILED t.py::x", "FAILED t.py::x")
    r = summary_retention(parts, "src/a.py")
    assert (r["paths_kept"], r["paths_total"], r["errors_total"]) == (1, 3, 1)
    assert r["paths_share"] == pytest.approx(1 / 3)
    assert math.isnan(r["commands_share"]) and r["commands_total"] == 0
    empty = summary_retention(_parts(), "anything")
    assert all(math.isnan(empty[f"{k}_share"]) and empty[f"{k}_total"] == 0 for k in KINDS)
    assert set(r) == set(SCORE_COLUMNS)


def test_compare_summaries_scores_every_text_with_one_extraction():
    parts = _parts(_bash("pytest -q tests/test_a.py"), "Exit code 1\nFAILED tests/test_a.py::t",
                   "Edited /repo/src/app.py")
    texts = {"good": "src/app.py; `$ pytest -q tests/test_a.py`; FAILED tests/test_a.py::t",
             "none": "", "half": "tests/test_a.py"}
    df = compare_summaries_df(parts, texts, "chars:4")
    assert df.columns.tolist() == ["summary", "tokens", "chars", *SCORE_COLUMNS]
    assert df["summary"].tolist() == list(texts)
    assert df["tokens"].tolist() == CHARS.count(list(texts.values())).tolist()
    assert df["paths_total"].tolist() == [2, 2, 2] and df["commands_total"].tolist() == [1] * 3
    assert df["paths_share"].tolist() == [1.0, 0.0, 0.5]
    assert df["errors_share"].tolist() == [1.0, 0.0, 0.0]
    assert df.dtypes["paths_kept"] == np.int64 and df.dtypes["paths_share"] == np.float64
    assert compare_summaries_df(parts, texts, CHARS).equals(df)       # an instance too
    assert compare_summaries_df(parts, {}, CHARS).empty


_SEG = st.builds(str.__add__, st.sampled_from("abcdefgh"),
                 st.text(alphabet="abcdefgh_", max_size=5))
_PATH = st.builds(lambda lead, segs, ext: lead + "/".join(segs) + "." + ext,
                  st.sampled_from(["", "/repo/", "./"]), st.lists(_SEG, min_size=1, max_size=3),
                  st.sampled_from(["py", "md", "json", "toml"]))
_WORD = st.text(alphabet="abcdefgh-=", min_size=1, max_size=8)
_COMMAND = st.builds(lambda prog, args, q: f"{prog} " + (f'"{" ".join(args)}"' if q else
                                                       "\n  ".join(args)),
                     st.sampled_from(["make", "git log", "ls -la", "mix test"]),
                     st.lists(_WORD, min_size=1, max_size=4), st.booleans())
_ERROR = st.builds(lambda name, msg: f"{name}Error: {msg}",
                   st.sampled_from(["Key", "Value", "Runtime"]), st.text(alphabet="abc xyz",
                                                                        max_size=150))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(_PATH, _COMMAND, _ERROR), min_size=1, max_size=5))
def test_the_transcript_itself_keeps_everything_and_nothing_keeps_nothing(steps):
    rows = []
    for path, cmd, err in steps:
        rows += [("assistant", "tool_call", _bash(f"{cmd} {path}"), "Bash"),
                 ("user", "tool_result", f"Exit code 1\n{err}\nsee {path}", "Bash")]
    parts = pd.DataFrame(rows, columns=["role", "kind", "content", "tool_name"])
    whole = summary_retention(parts, render_parts(parts))
    nothing = summary_retention(parts, "")
    for k in KINDS:
        assert whole[f"{k}_total"] >= 1
        assert whole[f"{k}_share"] == 1.0 and nothing[f"{k}_kept"] == 0
    big = Truncation().summarize(parts, previous=None, budget_tokens=10**6, estimator=CHARS)
    assert summary_retention(parts, big.text) == whole


# ---- the truncation baseline ------------------------------------------------------------
LONG = _parts(*(f"step {i}: edited src/mod_{i}.py and ran `$ make t{i}`" for i in range(60)))


def test_truncation_is_registered_and_keeps_head_and_tail():
    t = summarizer("truncation")
    assert isinstance(t, Truncation) and t.keep == "both" and t.model == "head+tail"
    s = t.summarize(LONG, previous=None, budget_tokens=100, estimator=CHARS)
    text = render_parts(LONG)
    head, cut, tail = re.split(r"\n\[\.\.\. (\d+) characters cut \.\.\.\]\n", s.text)
    assert text.startswith(head) and text.endswith(tail) and abs(len(head) - len(tail)) <= 1
    assert int(cut) == len(text) - len(head) - len(tail) > 0
    assert s.output_tokens == CHARS.count([s.text])[0] <= 100 < s.output_tokens + 3
    assert s.input_tokens == int(CHARS.count(LONG["content"]).sum())
    assert (s.backend, s.ms) == ("truncation", 0.0)


def test_truncation_keeps_one_end_and_puts_the_previous_summary_first():
    text = render_parts(LONG)
    head = Truncation("head").summarize(LONG, previous=None, budget_tokens=80, estimator=CHARS)
    assert text.startswith(head.text.split("\n[...")[0]) and head.text.endswith("cut ...]")
    tail = Truncation("tail").summarize(LONG, previous=None, budget_tokens=80, estimator=CHARS)
    assert tail.text.startswith("[...") and text.endswith(tail.text.split("...]\n", 1)[1])
    prev = Truncation().summarize(LONG, previous="EARLIER: a.py", budget_tokens=80,
                                  estimator=CHARS)
    assert prev.text.startswith("EARLIER: a.py\n\n[user] step 0")
    whole = Truncation().summarize(LONG.iloc[:2], previous="P", budget_tokens=10**6,
                                   estimator=CHARS)
    assert whole.text == "P\n\n" + render_parts(LONG.iloc[:2])     # fits: nothing is cut
    assert Truncation().summarize(LONG, previous=None, budget_tokens=3,
                                  estimator=CHARS).text == ""   # not even the marker fits
    with pytest.raises(ConfigError, match="keep must be one of both, head, tail"):
        Truncation("middle")  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", ["chars:4", "chars:3", "neurolink:anthropic"])
@pytest.mark.parametrize("budget", [0, 1, 17, 150, 900])
def test_truncation_never_exceeds_the_budget_and_is_deterministic(spec, budget):
    est = estimator(spec)
    for keep in ("both", "head", "tail"):
        a = Truncation(keep).summarize(LONG, previous="prev", budget_tokens=budget,
                                       estimator=est)
        assert a.output_tokens <= budget
        assert a == Truncation(keep).summarize(LONG, previous="prev", budget_tokens=budget,
                                               estimator=est)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300), st.integers(0, 120), st.sampled_from(["both", "head", "tail"]))
def test_fit_cut_finds_the_longest_cut_within_a_monotone_budget(text, budget, keep):
    def tokens(s: str) -> int:
        return len(s) // 4

    out = fit_cut(text, budget, tokens, keep)
    assert tokens(out) <= budget
    if out == text:
        return
    cuts = [n for n in range(len(text)) if cut_text(text, n, keep) == out]
    kept = cuts[0] if cuts else -1                   # -1: nothing fits, the text is ""
    assert out == "" or cuts
    assert tokens(cut_text(text, kept + 1, keep)) > budget  # one more character won't fit


# ---- recorded summaries against the others ----------------------------------------------
def test_recorded_comparison_on_the_committed_session():
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    df = recorded_comparison_df(t).set_index("summary")
    assert df.index.tolist() == ["recorded", "structured", "truncation"]
    (point,) = recorded_points(t)
    assert (df["pos"] == point.pos).all() and (df["compaction"] == 0).all()
    assert df.loc["recorded", "tokens"] == df.loc["recorded", "budget_tokens"]
    assert (df["tokens"] <= df["budget_tokens"]).all()
    parts = condensed_parts(t.rewind_recorded(), point)
    assert (df["parts"] == len(parts)).all() and parts["pos"].max() < point.pos
    assert not (parts["kind"] == "summary").any()
    # measured: paths 51 / 24 / 37 of 61, commands 14 / 0 / 0 of 14, errors 19 / 2 / 2 of 25
    for k in KINDS:
        s = df.loc["structured", f"{k}_share"]
        assert s > df.loc["recorded", f"{k}_share"] and s > df.loc["truncation", f"{k}_share"]
    assert df.loc["structured", "commands_share"] == 1.0
    assert df.loc["structured", "paths_share"] >= 0.8


def test_recorded_comparison_without_compactions_and_with_clashing_names():
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    empty = recorded_comparison_df(t.rewind_recorded())
    assert empty.empty and {"session", "summary", "budget_tokens", *SCORE_COLUMNS} <= set(
        empty.columns)
    with pytest.raises(ConfigError, match="repeat"):
        recorded_comparison_df(t, summarizers=("structured", Structured()))
    two = recorded_comparison_df(t, summarizers=(Truncation("head"),), estimator=CHARS)
    assert two["summary"].tolist() == ["recorded", "truncation"]


# ---- the real Claude Code sessions ------------------------------------------------------
REAL_ERRORS = {"258c7280": 2, "4d5611e5": 0, "8463c716": 1}


@pytest.fixture(scope="module")
def spotter_corpus():
    return ctxlab.load_dir(realdata_path("claude_code/spotter"))


@pytest.fixture(scope="module", params=["chars:4", "calibrated"])
def spotter_scores(request, spotter_corpus):
    est = ctxlab.calibrate(spotter_corpus) if request.param == "calibrated" else CHARS
    df = pd.concat([recorded_comparison_df(t, estimator=est) for t in spotter_corpus],
                   ignore_index=True)
    return df.assign(session=df["session"].str[:8])


@pytest.mark.realdata
@pytest.mark.parametrize("sid", sorted(REAL_ERRORS))
def test_structured_keeps_more_than_the_real_summary_at_no_more_tokens(spotter_scores, sid):
    df = spotter_scores[spotter_scores["session"] == sid].set_index("summary")
    assert df.index.tolist() == ["recorded", "structured", "truncation"]  # one compaction
    real, mine, cut = df.loc["recorded"], df.loc["structured"], df.loc["truncation"]
    assert mine["tokens"] <= real["tokens"] == real["budget_tokens"]
    assert cut["tokens"] <= real["tokens"]
    assert real["errors_total"] == REAL_ERRORS[sid]
    for k in KINDS:
        if real[f"{k}_total"] == 0:      # 4d5611e5 shows no error line before compacting
            assert math.isnan(real[f"{k}_share"]) and math.isnan(mine[f"{k}_share"])
            continue
        assert mine[f"{k}_share"] > real[f"{k}_share"], (k, mine[f"{k}_share"],
                                                         real[f"{k}_share"])
        assert mine[f"{k}_share"] > cut[f"{k}_share"], (k, mine[f"{k}_share"],
                                                        cut[f"{k}_share"])
    assert mine["commands_share"] == 1.0
    assert mine["paths_share"] >= real["paths_share"] + 0.09
