"""Summarizer registry, the `Summary` record and the offline `structured` summarizer."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pandas as pd
import pytest

import ctxlab
from ctxlab.errors import ConfigError, CtxlabError
from ctxlab.summarizers import (Summarizer, SummarizerError, Summary, names, register,
                                render_parts, summarizer, tool_arguments, unregister)
from ctxlab.summarizers.structured import TITLES, Structured, error_lines, operation
from ctxlab.tokens import estimator

from tests.conftest import DATASETS, REPO

CHARS = estimator("chars:4")


def _parts(rows: list[tuple[str, str, str, str | None, str | None, str | None]]) -> pd.DataFrame:
    """(role, kind, content, tool_name, tool_call_id, file_path) rows as a part frame."""
    return pd.DataFrame(rows, columns=["role", "kind", "content", "tool_name", "tool_call_id",
                                       "file_path"])


def _call(tool: str, tid: str, path: str | None = None, **args: str) -> tuple:
    if path:
        args = {"file_path": path, **args}
    return ("assistant", "tool_call", f"{tool}({json.dumps(args)})", tool, tid, path)


def _result(tool: str, tid: str, text: str, path: str | None = None) -> tuple:
    return ("user", "tool_result", text, tool, tid, path)


FIX_SESSION = _parts([
    ("user", "text", ("The parser crashes on empty input. Please fix src/app/parser.py and "
                      "run the tests. TODO: update the changelog afterwards."), None, None, None),
    _call("Read", "t1", "/repo/src/app/parser.py"),
    _result("Read", "t1", "     1→import re\n     2→\n     3→def parse_line(text):\n"
            "     4→    raise ValueError('x')\n", "/repo/src/app/parser.py"),
    _call("Bash", "t2", command="python -m pytest tests/test_parser.py -q"),
    _result("Bash", "t2", "Exit code 1\nF.\n    def test_empty():\n"
            "E   IndexError: list index out of range\n"
            "FAILED tests/test_parser.py::test_empty - IndexError\n"
            "===== 1 failed, 1 passed in 0.12s ====="),
    ("assistant", "text", ("The tokenizer indexes the first element without checking the "
                           "length; I'll guard parse_line against empty input."), None, None,
     None),
    _call("Edit", "t3", "/repo/src/app/parser.py", old_string="a", new_string="b"),
    _result("Edit", "t3", "The file /repo/src/app/parser.py has been updated."),
    _call("Bash", "t4", command="python -m pytest tests/test_parser.py -q"),
    _result("Bash", "t4", "..\n===== 2 passed in 0.10s ====="),
    ("assistant", "text", "Both tests pass now. Let me also check the CLI entry point next.",
     None, None, None),
])


def _sections(text: str) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    current = 0
    for line in text.splitlines():
        head = line.split(".", 1)
        if head[0].isdigit() and line.endswith(":") and not line.startswith("-"):
            current = int(head[0])
            out[current] = []
        elif line.startswith("- "):
            out[current].append(line[2:])
        elif line.startswith("  ") and out.get(current):    # an entry's next line
            out[current][-1] += "\n" + line
    return out


# ---- registry and interface ------------------------------------------------------------
def test_registry_lists_structured_and_returns_instances():
    assert "structured" in names()
    s = summarizer("structured")
    assert isinstance(s, Structured) and s.name == "structured" and s.model == "extractive"
    assert summarizer(s) is s
    assert summarizer(" structured ") is s


def test_unknown_name_lists_known_ones():
    with pytest.raises(ConfigError, match=r"unknown summarizer 'gpt-9'; known: .*structured"):
        summarizer("gpt-9")
    with pytest.raises(ConfigError, match="known: .*structured"):
        summarizer("")


class _Echo(Summarizer):
    name = "echo-test"
    model = "none"

    def summarize(self, parts, *, previous, budget_tokens, estimator):
        return Summary(text=str(len(parts)), input_tokens=0, output_tokens=1, ms=0.0,
                       backend=self.name, model=self.model)


def test_register_rejects_duplicates_and_non_summarizers():
    inst = register(_Echo())
    try:
        assert summarizer("echo-test") is inst
        with pytest.raises(ConfigError, match="already registered"):
            register(_Echo())
    finally:
        unregister("echo-test")
    assert "echo-test" not in names()
    with pytest.raises(ConfigError, match="not a Summarizer"):
        register("structured")  # type: ignore[arg-type]


def test_summary_is_frozen_and_reports_a_call_record():
    s = Summary(text="x", input_tokens=10, output_tokens=1, ms=2.5, backend="b", model="m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.text = "y"  # type: ignore[misc]
    assert s.call_record() == {"backend": "b", "model": "m", "input_tokens": 10,
                               "output_tokens": 1, "ms": 2.5}
    assert issubclass(SummarizerError, CtxlabError)


def test_helpers():
    assert tool_arguments('Read({"file_path": "a.py"})', "Read") == {"file_path": "a.py"}
    assert tool_arguments("Read(not json)", "Read") == {}
    assert render_parts(FIX_SESSION.iloc[:0]) == ""
    assert operation("str_replace_editor") == "edited" and operation("") == "used"
    assert error_lines("all good\n3 passed") == []


# ---- the structured summary ------------------------------------------------------------
def test_nine_sections_in_order_filled_by_extraction():
    s = Structured().summarize(FIX_SESSION, previous=None, budget_tokens=2000, estimator=CHARS)
    sec = _sections(s.text)
    assert [line for line in s.text.splitlines() if not line.startswith(("-", "  "))] == \
        [f"{i}. {t}:" for i, t in enumerate(TITLES, start=1)]
    assert sec[1] == [("The parser crashes on empty input. Please fix src/app/parser.py and "
                       "run the tests.")]
    assert "Python" in sec[2] and "pytest" in sec[2]
    assert "/repo/src/app/parser.py (read, edited)" in sec[3]
    assert "parser.py: def parse_line(text)" in sec[3]
    # each error line as the output had it, on a line of its own; then what became of it
    assert sec[4] == [("$ python -m pytest tests/test_parser.py -q:\n  Exit code 1\n  IndexError: "
                       "list index out of range\n  FAILED tests/test_parser.py::test_empty - "
                       "IndexError\n  (fixed by editing /repo/src/app/parser.py)")]
    assert "`$ python -m pytest tests/test_parser.py -q` (exit 1: 1 failed, 1 passed; 2 passed)" \
        in sec[5]
    assert sec[6][0].startswith('"The parser crashes on empty input.')
    assert sec[7] == ["TODO: update the changelog afterwards."]
    assert sec[8][-2:] == ["step 4/4: $ python -m pytest tests/test_parser.py -q",
                           ("Last said: Both tests pass now. Let me also check the CLI entry "
                            "point next.")]
    assert sec[9] == ["Let me also check the CLI entry point next."]
    assert s.backend == "structured" and s.ms == 0.0
    assert s.output_tokens == CHARS.count([s.text])[0]
    assert s.input_tokens == CHARS.count(FIX_SESSION["content"]).sum()


def test_read_outputs_are_not_mistaken_for_errors():
    s = Structured().summarize(FIX_SESSION, previous=None, budget_tokens=2000, estimator=CHARS)
    assert "ValueError('x')" not in _sections(s.text)[4][0]


def test_empty_parts_give_empty_sections():
    s = Structured().summarize(FIX_SESSION.iloc[:0], previous=None, budget_tokens=500,
                               estimator=CHARS)
    assert all(v == ["(none)"] for v in _sections(s.text).values())
    assert s.input_tokens == 0


@pytest.mark.parametrize("spec", ["chars:4", "neurolink:anthropic", "neuron"])
@pytest.mark.parametrize("budget", [1, 5, 40, 120, 300, 2000])
def test_budget_is_never_exceeded(spec, budget):
    est = estimator(spec)
    s = Structured().summarize(FIX_SESSION, previous="1. Primary Request and Intent:\n- an "
                               "earlier ask about /repo/src/app/lexer.py", budget_tokens=budget,
                               estimator=est)
    assert s.output_tokens == est.count([s.text])[0] <= budget


def test_trimming_drops_the_least_important_first():
    full = Structured().summarize(FIX_SESSION, previous=None, budget_tokens=5000, estimator=CHARS)
    small = Structured().summarize(FIX_SESSION, previous=None,
                                   budget_tokens=full.output_tokens * 2 // 3, estimator=CHARS)
    sec = _sections(small.text)
    assert small.output_tokens < full.output_tokens
    assert "/repo/src/app/parser.py (read, edited)" in sec[3]      # files are kept longest
    assert sec[9] == _sections(full.text)[9]                      # and the next step
    assert "parser.py: def parse_line(text)" not in sec[3]          # outlines go first


def test_same_input_gives_identical_text():
    a = Structured().summarize(FIX_SESSION, previous=None, budget_tokens=300, estimator=CHARS)
    b = Structured().summarize(FIX_SESSION.copy(), previous=None, budget_tokens=300,
                               estimator=CHARS)
    assert a == b


def test_text_does_not_depend_on_the_hash_seed():
    code = ("import ctxlab, hashlib; from ctxlab.summarizers import summarizer; "
            "from ctxlab.tokens import estimator; "
            "t = ctxlab.load('datasets/coding_session.jsonl').rewind_recorded(); "
            "s = summarizer('structured').summarize(t.frame.iloc[:250], previous=None, "
            "budget_tokens=1500, estimator=estimator('chars:4')); "
            "print(hashlib.sha256(s.text.encode()).hexdigest())")
    digests = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True,
                             capture_output=True, text=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1


# ---- merging a previous summary --------------------------------------------------------
def test_merge_keeps_the_facts_of_the_previous_summary():
    first = Structured().summarize(FIX_SESSION.iloc[:5], previous=None, budget_tokens=2000,
                                   estimator=CHARS)
    later = _parts([
        ("user", "text", "Now add a --strict flag to the CLI.", None, None, None),
        _call("Write", "t9", "/repo/src/app/cli.py", content="x"),
        _result("Write", "t9", "File created successfully at: /repo/src/app/cli.py"),
    ])
    merged = Structured().summarize(later, previous=first.text, budget_tokens=2000,
                                    estimator=CHARS)
    sec = _sections(merged.text)
    assert sec[3][0] == "/repo/src/app/parser.py (read)"           # old facts first
    assert "/repo/src/app/cli.py (written)" in sec[3]              # new ones added
    assert any("IndexError: list index out of range" in e for e in sec[4])
    assert [m[:20] for m in sec[6]] == ['"The parser crashes ', '"Now add a --strict ']
    assert sec[1][-1] == "Now add a --strict flag to the CLI."
    assert len(sec[9]) == 1 and "--strict" in sec[9][0]           # next step is replaced


def test_merge_is_idempotent_on_repeated_facts():
    first = Structured().summarize(FIX_SESSION, previous=None, budget_tokens=2000,
                                   estimator=CHARS)
    again = Structured().summarize(FIX_SESSION, previous=first.text, budget_tokens=2000,
                                   estimator=CHARS)
    assert _sections(again.text)[3] == _sections(first.text)[3]
    assert _sections(again.text)[6] == _sections(first.text)[6]


def test_merge_reads_claude_codes_recorded_summary():
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    recorded = t.frame.loc[t.frame["kind"] == "summary", "content"].iloc[0]
    s = Structured().summarize(FIX_SESSION.iloc[:0], previous=recorded, budget_tokens=8000,
                               estimator=CHARS)
    sec = _sections(s.text)
    firsts = [e.split("\n", 1)[0] for e in sec[3]]
    assert "/home/dev/projects/quillstack/src/quillstack/worker.py (edited)" in firsts
    assert "/home/dev/projects/quillstack/tests/test_worker.py (read)" in firsts
    assert any("KeyError: 'statement_id'" in e for e in sec[4])
    assert sec[6][0].startswith('"I\'m working on quillstack')


@pytest.mark.parametrize("name", ["258c7280-ae70-4798-800f-63464d01a85d",
                                  "8463c716-a2ea-4c14-9efa-87158ebd9f20"])
def test_merge_keeps_what_claude_code_said_under_each_file(name):
    """Claude Code nests what changed (and code) under each file of "Files and Code
    Sections": that stays with the file, up to FILE_DETAIL_CHARS each (it was dropped),
    and merging the result again keeps one entry per file."""
    from tests.conftest import realdata_path
    from ctxlab.summarizers.structured import FILE_DETAIL_CHARS

    t = ctxlab.load(realdata_path(f"claude_code/spotter/{name}.jsonl"))
    recorded = t.frame.loc[t.frame["kind"] == "summary", "content"].iloc[0]
    nested = [ln.strip()[2:] for ln in recorded.split("3. Files", 1)[1].split("\n4.", 1)[0]
              .splitlines() if ln.startswith("     - ")]
    assert len(nested) >= 5
    s = Structured().summarize(FIX_SESSION.iloc[:0], previous=recorded, budget_tokens=8000,
                               estimator=CHARS).text
    files = _sections(s)[3]
    details = [ln.strip() for e in files for ln in e.split("\n")[1:]]
    kept = [n for n in nested if " ".join(n.split()) in details]
    assert len(kept) >= len(nested) // 2, (len(kept), len(nested))
    assert all(len("\n".join(e.split("\n")[1:])) <= FILE_DETAIL_CHARS + 40 for e in files)
    again = _sections(Structured().summarize(FIX_SESSION.iloc[:0], previous=s,
                                             budget_tokens=8000, estimator=CHARS).text)[3]
    assert [e.split("\n", 1)[0] for e in again] == [e.split("\n", 1)[0] for e in files]


def test_merge_of_free_text_keeps_paths_and_errors():
    prev = ("[Summary of earlier conversation]\nWe edited /repo/src/app/db.py and the run "
            "failed with\nKeyError: 'tenant_id'\nafter that.")
    sec = _sections(Structured().summarize(FIX_SESSION.iloc[:0], previous=prev,
                                           budget_tokens=500, estimator=CHARS).text)
    assert sec[3] == ["/repo/src/app/db.py (mentioned)"]
    assert sec[4] == ["KeyError: 'tenant_id'"]


def test_summary_parts_among_the_input_are_merged_as_previous():
    prev = Structured().summarize(FIX_SESSION.iloc[:3], previous=None, budget_tokens=800,
                                  estimator=CHARS).text
    with_part = pd.concat([_parts([("system", "summary", prev, None, None, None)]),
                           FIX_SESSION.iloc[3:]], ignore_index=True)
    a = Structured().summarize(with_part, previous=None, budget_tokens=2000, estimator=CHARS)
    b = Structured().summarize(FIX_SESSION.iloc[3:], previous=prev, budget_tokens=2000,
                               estimator=CHARS)
    assert a.text == b.text


# ---- it keeps the artifacts a head truncation of the same size loses -------------------
def test_keeps_far_more_paths_and_commands_than_a_truncation_of_equal_tokens():
    t = ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()
    older = t.frame.iloc[: int(len(t.frame) * 0.7)]
    calls = older[older["kind"] == "tool_call"]
    paths = set(calls["file_path"].dropna())
    commands = {tool_arguments(c, n).get("command") for c, n in
                zip(calls["content"], calls["tool_name"], strict=True)} - {None}
    artifacts = paths | commands
    assert len(paths) >= 20 and len(commands) >= 10

    def kept(text: str) -> float:
        return sum(a in text for a in artifacts) / len(artifacts)

    for budget in (2000, 4000):
        s = Structured().summarize(older, previous=None, budget_tokens=budget, estimator=CHARS)
        text = render_parts(older)
        lo, hi = 0, len(text)                # the longest head of the same token count
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if CHARS.count([text[:mid]])[0] <= s.output_tokens \
                else (lo, mid - 1)
        head = text[:lo]
        assert CHARS.count([head])[0] <= s.output_tokens <= budget
        assert kept(s.text) >= 0.9
        assert kept(s.text) >= kept(head) + 0.4, (kept(s.text), kept(head))


@pytest.mark.parametrize("name", ["coding_session.jsonl", "coding_session_b.jsonl"])
def test_structured_reads_a_table_as_it_reads_its_frame(name):
    """The summarize stage hands the structured backend its rows as a table (no DataFrame
    built); the summary is the one the frame gives, with and without a previous one."""
    from ctxlab.stages.table import Table
    parts = ctxlab.load(DATASETS / name).frame
    table = Table.from_frame(parts.reset_index(drop=True))
    s = Structured()
    for previous in (None, "1. Primary Request and Intent:\n- fix the parser"):
        kw = {"previous": previous, "budget_tokens": 900, "estimator": estimator("chars:4")}
        a, b = s.summarize(parts, **kw), s.summarize_table(table, **kw)
        assert (a.text, a.input_tokens, a.output_tokens) == (b.text, b.input_tokens,
                                                             b.output_tokens)
        assert "1. Primary Request and Intent:" in b.text


def test_what_a_structured_summary_keeps_is_found_again_as_the_same_artifacts():
    """An error line, a command of a user's message, the rules a user wrote one per line:
    the summary keeps each as a line the artifact rules read as the same value (a summary
    line "$ cmd: error; error" or a user message squashed onto one line kept none)."""
    from ctxlab.artifacts import artifacts

    user = ("Rules for this repo:\n- Never print the value of CTX_TOKEN_924E\n"
            "- Always run the tests with make check\nKeyError: 'payout_id'")
    parts = _parts([("user", "text", user, None, None, None),
                    _call("Bash", "t1", None, command="cat config.json"),
                    _result("Bash", "t1", "Error: config.json missing")])
    text = Structured().summarize(parts, previous=None, budget_tokens=2000,
                                  estimator=CHARS).text
    kinds = ["error", "instruction"]

    def values(texts: list[str], user_rows: bool) -> set[tuple[str, str]]:
        found = artifacts(pd.Series(texts), user=pd.Series([user_rows] * len(texts)))
        return set(map(tuple, found.loc[found["kind"].isin(kinds), ["kind", "value"]].values))

    stated = values([user], True) | values(["Error: config.json missing"], False)
    assert ("error", "Error: config.json missing") in stated and len(stated) >= 4
    assert stated <= values([text], True)            # a summary restates instructions too


def test_two_long_commands_with_one_beginning_are_two_commands():
    """Commands are shown cut at 200 characters; a failure is known by the whole command,
    so a later, different command with the same 200 first characters does not mark it
    passed (the failing test was never run again)."""
    head = "pytest -q " + " ".join(f"tests/unit/test_module_{i:02d}.py" for i in range(8))
    assert len(head) > 200
    failing, other = head + " tests/integration/test_payments.py", head + " -x"
    s = Structured().summarize(_parts([
        ("user", "text", "Run the tests.", None, None, None),
        _call("Bash", "c1", command=failing),
        _result("Bash", "c1", "Exit code 1\nFAILED tests/integration/test_payments.py::"
                              "test_refund - TimeoutError: gateway"),
        _call("Bash", "c2", command=other),
        _result("Bash", "c2", "12 passed in 3.1s"),
    ]), budget_tokens=2_000, estimator=CHARS).text
    section4 = s.split("4. ")[1].split("\n5. ")[0]
    assert "TimeoutError: gateway" in section4 and "passed on a later run" not in section4


def test_a_failure_an_earlier_summary_left_open_is_fixed_by_a_later_run():
    """Summarizing again with the earlier summary merged says what one pass over all the
    parts says: the failure was fixed (it stayed open for good)."""
    first = _parts([
        ("user", "text", "Fix the parser.", None, None, None),
        _call("Bash", "c1", command="pytest -q"),
        _result("Bash", "c1", "Exit code 1\nFAILED tests/test_parser.py::test_empty - "
                              "KeyError: 'id'"),
    ])
    later = _parts([
        _call("Edit", "c2", "src/parser.py", old_string="a", new_string="b"),
        _result("Edit", "c2", "The file src/parser.py has been updated.", "src/parser.py"),
        _call("Bash", "c3", command="pytest -q"),
        _result("Bash", "c3", "5 passed in 0.4s"),
    ])
    s = Structured()
    earlier = s.summarize(first, budget_tokens=2_000, estimator=CHARS).text
    assert "fixed by" not in earlier
    merged = s.summarize(later, earlier, budget_tokens=2_000, estimator=CHARS).text
    once = s.summarize(pd.concat([first, later], ignore_index=True), budget_tokens=2_000,
                       estimator=CHARS).text
    fixed = "(fixed by editing src/parser.py)"
    assert fixed in once.split("4. ")[1] and fixed in merged.split("4. ")[1]


def test_a_part_whose_kind_is_na_is_rendered_by_its_role():
    df = pd.DataFrame({"role": ["user", "assistant"],
                       "kind": pd.array([pd.NA, "text"], dtype="string"),
                       "content": ["hello there", "hi"], "tool_name": [None, None],
                       "tool_call_id": [None, None], "file_path": [None, None]})
    got = ctxlab.summarizer("truncation").summarize(df, budget_tokens=50, estimator=CHARS)
    assert got.text == "[user] hello there\n\n[assistant] hi"
