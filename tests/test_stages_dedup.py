"""File-read deduplication (seed 000, stage 2): the seed's regex (prose included), the
real read paths, the 30% threshold, placeholders that keep tool pairs whole."""

from __future__ import annotations

import json

import pytest

import ctxlab
from ctxlab.engine import Budget, build_view
from ctxlab.errors import ConfigError
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.stages import stage
from ctxlab.stages.dedup import (PLACEHOLDER, Dedup, call_arguments, cat_path, file_reads,
                                 regex_read_path)
from tests.stage_helpers import apply_checked, last_view
from tests.conftest import DATASETS

BUDGET = Budget(window_tokens=200_000, limit_tokens=20_000, target_tokens=10_000)


def _build(messages, *, final_prompt: str | None = "thanks, now add a test"):
    """A session from (role, [(kind, content, {extra})...]); a last user prompt and call."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    for role, parts in messages + ([("user", [("text", final_prompt)])] if final_prompt else []):
        b.message(role, real_user=role == "user" and parts[0][0] == "text")
        for kind, content, *extra in parts:
            b.part(kind, content, **(extra[0] if extra else {}))
    b.call(call_id="c")
    return assemble([b], log, {"format": "test"})


def _read(cid, path, body, *, name="Read", args=None, role="user", meta=None):
    """An assistant tool call reading ``path`` and its result."""
    args = {"file_path": path} if args is None else args
    return [("assistant", [("tool_call", f"{name}({json.dumps(args)})",
                            {"tool_name": name, "tool_call_id": cid,
                             "file_path": args.get("file_path")})]),
            (role, [("tool_result", body, {"tool_name": name, "tool_call_id": cid,
                                           "file_path": args.get("file_path"),
                                           **({"meta": meta} if meta else {})})])]


def _view(t):
    return last_view(t, BUDGET)


def _run(t, st_):
    view = _view(t)
    return view, apply_checked(t, view, st_)


def _hidden(r):
    f = r.transcript.frame
    return f[f["hidden_by"] == r.runs[0].event] if r.stages_used else f.iloc[:0]


def _details(r):
    return json.loads(r.transcript.events.iloc[-1]["meta"])["stage_details"]


def test_defaults_are_the_seeds():
    st_ = stage("dedup")
    assert isinstance(st_, Dedup)
    assert (st_.mode, st_.threshold, st_.placeholder) == (
        "regex", 0.3, "[File - refer to latest read below]")


@pytest.mark.parametrize("text, path", [
    ("I read README.md and then cat setup.py", "README.md"),  # first match only
    ("Reading 'src/a.py' now", "src/a.py"),
    ("read_file `config.json`", "config.json"),
    ("readFile \"x/y.ts\"", "x/y.ts"),
    ("$ cat    notes.txt", "notes.txt"),
    ("READ Makefile", "Makefile"),                      # case-insensitive
    ("Read file foo.py", "file"),                       # "read" wins the alternation
    ("I read the docs", "the"),                         # the seed's bug: prose matches
    ("the thread\n  8→import os", "8→import"),          # no word boundary either
    (PLACEHOLDER, "below]"),                            # ...and so does its placeholder
    ('Read({"file_path": "a.py"})', None),              # a Claude Code call does not
    ("nothing here", None)])
def test_the_seeds_regex(text, path):
    assert regex_read_path(text) == path


def test_regex_matches_prose_and_paths_does_not():
    first = "I read README.md and then cat setup.py" + ", thinking it over" * 20
    t = _build([("user", [("text", "look around")]),
                ("assistant", [("text", first)]),
                ("user", [("text", "and?")]),
                ("assistant", [("text", "I read README.md again")])])
    _, r = _run(t, Dedup())
    assert _hidden(r)["content"].tolist() == [first]
    new = r.view.parts[r.view.parts["event"] == r.runs[0].event].iloc[0]
    assert (new["kind"], new["role"], new["content"]) == ("marker", "assistant", PLACEHOLDER)
    assert _details(r)["files_deduped"] == 1
    assert Dedup(mode="paths").plan(_view(t)) is None


def test_regex_worked_example_keeps_the_latest_read_and_the_tool_pair():
    body = "reading a.py\n" + "def f():\n    return 1\n" * 40
    t = _build([("user", [("text", "fix a.py")])]
               + _read("t1", "a.py", body, name="tool", role="tool")
               + _read("t2", "a.py", body + "# edited\n", name="tool", role="tool"))
    _, r = _run(t, Dedup())
    hidden = _hidden(r)
    assert hidden["tool_call_id"].tolist() == ["t1"] and hidden["content"].tolist() == [body]
    new = r.view.parts[r.view.parts["event"] == r.runs[0].event].iloc[0]
    assert (new["kind"], new["tool_call_id"], new["tool_name"], new["role"], new["content"]) == (
        "tool_result", "t1", "tool", "tool", PLACEHOLDER)
    assert new["msg"] == hidden["msg"].iloc[0]
    assert body + "# edited\n" in set(r.view.parts["content"])


def test_threshold_is_30_percent_of_the_file_read_tokens_considered():
    # chars:4 tokens: a.py read twice (100 + 100), b.py once; the placeholder is 9 tokens,
    # so replacing the first a.py read saves 91 of 200 + b tokens
    def case(b_chars):
        return _build([("user", [("text", "go")])] + _read("1", "a.py", "a" * 400)
                      + _read("2", "b.py", "b" * b_chars) + _read("3", "a.py", "a" * 400))
    _, r = _run(case(412), Dedup(mode="paths"))  # 91 >= 0.3 * 303
    assert _details(r) == {"mode": "paths", "files_deduped": 1, "replaced": 1,
                           "tokens_saved": 91, "considered_tokens": 303}
    edit = Dedup(mode="paths").plan(_view(case(416)))  # 91 < 0.3 * 304
    assert edit is not None and edit.empty and "30%" in edit.reason
    assert not Dedup(mode="paths", threshold=0.0).plan(_view(case(416))).empty


def test_paths_mode_keys_on_the_file_every_read_tool_really_read():
    body = "x = 1\n" * 100
    t = _build([("user", [("text", "go")])]
               + _read("cc", "/repo/src/app.py", body)                          # Claude Code
               + _read("gm", "/repo/src/app.py", body, name="read_file")        # Gemini CLI
               + _read("oh", None, body, name="str_replace_editor", role="tool",  # OpenHands
                       args={"command": "view", "path": "/repo/src/./app.py"})
               + _read("cx", None, body, name="shell", role="tool",             # Codex
                       args={"command": ["bash", "-lc", "cat /repo/src/app.py"]})
               + _read("ls", None, body, name="shell", role="tool",
                       args={"command": "ls /repo/src/app.py"})
               + _read("ed", None, body, name="str_replace_editor", role="tool",
                       args={"command": "create", "path": "/repo/src/app.py"})
               + _read("bh", None, body, name="Bash",                           # latest read
                       args={"command": "cat /repo/src/app.py"}))
    reads = file_reads(_view(t).parts)
    assert set(reads["path"]) == {"/repo/src/app.py"} and len(reads) == 5
    _, r = _run(t, Dedup(mode="paths"))
    assert _hidden(r)["tool_call_id"].tolist() == ["cc", "gm", "oh", "cx"]


def test_paths_mode_respects_partial_reads():
    full, part = "y = 2\n" * 200, "y = 2\n" * 50
    t = _build([("user", [("text", "go")])]
               + _read("p1", "a.py", part, args={"file_path": "a.py", "offset": 1, "limit": 50})
               + _read("p2", "a.py", part, args={"file_path": "a.py", "offset": 100, "limit": 50})
               + _read("p3", "a.py", part, args={"file_path": "a.py", "offset": 100, "limit": 50})
               + _read("f1", "a.py", full)
               + _read("p4", "a.py", part, args={"file_path": "a.py", "offset": 1, "limit": 50}))
    _, r = _run(t, Dedup(mode="paths", threshold=0.0))
    # p1, p2 (same range as p3) and p3 go before the whole read f1; f1 stays: p4 is partial
    assert _hidden(r)["tool_call_id"].tolist() == ["p1", "p2", "p3"]


def test_paths_mode_ignores_error_results_and_unknown_arguments():
    body = "z = 3\n" * 100
    t = _build([("user", [("text", "go")])]
               + _read("ok", "a.py", body)
               + _read("err", "a.py", "File does not exist.", meta={"is_error": True}))
    assert Dedup(mode="paths", threshold=0.0).plan(_view(t)) is None
    # a read whose call is not in the request (SWE-agent's open) never replaces others
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("user", real_user=True)
    b.part("text", "go")
    for _ in range(2):
        b.message("assistant")
        b.part("text", "open a.py")
        b.message("user")
        b.part("tool_result", body, tool_name="open", file_path="a.py")
    b.call(call_id="c")
    t = assemble([b], log, {"format": "test"})
    reads = file_reads(_view(t).parts)
    assert len(reads) == 2 and Dedup(mode="paths", threshold=0.0).plan(_view(t)) is None


def test_running_twice_changes_nothing_more():
    body = "reading a.py\n" + "q" * 400
    t = _build([("user", [("text", "go")])] + _read("1", "a.py", body, name="t", role="tool")
               + _read("2", "a.py", body, name="t", role="tool")
               + _read("3", "b.py", "reading b.py\n" + "r" * 400, name="t", role="tool"))
    for mode in ("regex", "paths"):
        _, r = _run(t, Dedup(mode=mode, threshold=0.0))
        # the placeholder reads "below" to the regex, but placeholders are never replaced
        assert Dedup(mode=mode, threshold=0.0).plan(r.view) is None


def test_the_system_prompt_and_current_prompt_are_never_replaced():
    t = _build([("system", [("text", "You read files with care: read AGENTS.md first.")]),
                ("user", [("text", "hello")]),
                ("assistant", [("text", "I read AGENTS.md")])],
               final_prompt="read AGENTS.md again")
    assert Dedup(threshold=0.0).plan(_view(t)) is None


def test_nothing_to_do():
    assert Dedup().plan(_view(_build([("user", [("text", "hi")])]))) is None
    t = _build([("user", [("text", "hi")])])
    assert Dedup().plan(build_view(t, "s", -1.0, ctxlab.estimator("chars:4"), BUDGET)) is None


def test_helpers():
    assert call_arguments('shell({"command":["bash","-lc","cat a"]})', "shell") == {
        "command": ["bash", "-lc", "cat a"]}
    assert call_arguments("not a call") is None
    assert cat_path("cat a.py b.py") is None and cat_path("cat $HOME/x") is None
    assert cat_path("cat 'unterminated") is None


@pytest.mark.parametrize("params, message", [
    ({"mode": "glob"}, "mode"), ({"threshold": 1.5}, "threshold"),
    ({"threshold": -0.1}, "threshold"), ({"placeholder": ""}, "placeholder")])
def test_bad_parameters_are_refused(params, message):
    with pytest.raises(ConfigError, match=message):
        Dedup(**params)


@pytest.fixture(scope="module")
def coding():
    return ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()


def test_real_session_regex_mode_matches_prose(coding):
    _, r = _run(coding, Dedup())
    hidden = _hidden(r)
    assert len(hidden) > 0 and r.runs[0].tokens_saved > 0
    # the seed's pattern replaced assistant/user prose, not only file contents
    assert (hidden["kind"] == "text").any()
    assert set(hidden["kind"]) <= {"text", "tool_call", "tool_result"}
    d = _details(r)
    assert d["tokens_saved"] >= 0.3 * d["considered_tokens"]


def test_real_session_paths_mode_replaces_only_superseded_reads(coding):
    _, r = _run(coding, Dedup(mode="paths"))
    hidden = _hidden(r)
    assert len(hidden) > 0
    assert set(hidden["kind"]) == {"tool_result"} and set(hidden["tool_name"]) == {"Read"}
    kept = r.view.parts[(r.view.parts["tool_name"] == "Read")
                        & (r.view.parts["kind"] == "tool_result")
                        & (r.view.parts["content"] != PLACEHOLDER)]
    for _, h in hidden.iterrows():  # a later read of the same file is still visible
        assert ((kept["file_path"] == h["file_path"]) & (kept["pos"] > h["pos"])).any()
    new = r.view.parts[r.view.parts["event"] == r.runs[0].event]
    assert sorted(new["tool_call_id"]) == sorted(hidden["tool_call_id"])
    assert (new["content"] == PLACEHOLDER).all()


def test_paths_mode_a_later_whole_read_replaces_a_read_of_unknown_range():
    """A read whose call is not in the request has an unknown range; a later whole-file read
    of the same file replaces it (whole reads are None, never NaN, when no read in the
    request is partial)."""
    body = "x = 1\n" * 300
    orphan = [("user", [("tool_result", body, {"tool_name": "Read", "tool_call_id": "gone",
                                               "file_path": "a.py"})])]
    t = _build(orphan + _read("w1", "a.py", body))
    reads = Dedup(mode="paths")._reads(_view(t).parts)
    assert [r[2] for r in reads] == ["?", None]
    view, r = _run(t, Dedup(mode="paths"))
    assert _hidden(r)["content"].tolist() == [body]
    assert _hidden(r)["tool_call_id"].tolist() == ["gone"]
