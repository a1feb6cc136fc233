"""What an agent last knew of each file: reads, writes and edits replayed in order."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import ctxlab
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.stages.file_state import file_states, numbered, strip_line_numbers


def _log(steps: list[tuple[str, dict, str, bool]]) -> pd.DataFrame:
    """The parts of a session: one tool call and result per ``(tool, args, result,
    failed)``, the call's ``file_path`` taken from the arguments."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("user", real_user=True)
    b.part("text", "Work on the parser.")
    for i, (tool, args, result, failed) in enumerate(steps):
        path = args.get("file_path")
        b.call()
        b.message("assistant")
        b.part("tool_call", f"{tool}({json.dumps(args)})", tool_name=tool,
               tool_call_id=f"c{i}", file_path=path)
        b.message("user")
        b.part("tool_result", result, tool_name=tool, tool_call_id=f"c{i}", file_path=path,
               meta={"is_error": True} if failed else None)
    return assemble([b], log, {"format": "test"}).frame


def _read(path: str, text: str, **rng: int) -> tuple[str, dict, str, bool]:
    first = rng.get("offset", 1)
    return "Read", {"file_path": path, **rng}, numbered(text, first), False


def _edit(path: str, old: str, new: str, *, every: bool = False,
          failed: bool = False) -> tuple[str, dict, str, bool]:
    return ("Edit", {"file_path": path, "old_string": old, "new_string": new,
                     "replace_all": every}, "updated", failed)


def test_line_numbers_come_off_and_go_back_on():
    text = "def f():\n    return 1\n"
    assert strip_line_numbers(numbered(text, 7)) == (text, 7)
    body, first = strip_line_numbers(numbered("a\nb", 3))
    assert (body, first) == ("a\nb", 3)
    assert numbered(body, first) == "     3→a\n     4→b"
    assert strip_line_numbers("1\tx\n2\ty") == ("x\ny", 1)  # cat -n with tabs
    assert strip_line_numbers("     1→x\nnot numbered") == ("     1→x\nnot numbered", 1)


def test_claude_codes_reminder_after_a_read_is_not_part_of_the_file():
    """Claude Code 1.0.x appends an unnumbered ``<system-reminder>`` to every Read: the
    numbers still come off (a multi-line edit then applies) and the reminder is left out."""
    reminder = ("\n\n<system-reminder>\nWhenever you read a file, you should consider "
                "whether it looks malicious.\n</system-reminder>\n")
    tool, args, result, failed = _read("a.py", "def f():\n    return 1\n\ndef g():\n    return 2")
    f = _log([(tool, args, result + reminder, failed),
              _edit("a.py", "def f():\n    return 1", "def f():\n    return 42")])
    s = file_states(f).iloc[0]
    assert s["content"] == "def f():\n    return 42\n\ndef g():\n    return 2"
    assert strip_line_numbers("     1→x" + reminder) == ("x", 1)
    assert strip_line_numbers("     1→x" + reminder.rstrip("\n") + reminder) == ("x", 1)
    # a reminder inside the file (a numbered line) is the file's
    inside = numbered("<system-reminder>\nx\n</system-reminder>")
    assert strip_line_numbers(inside) == ("<system-reminder>\nx\n</system-reminder>", 1)


@pytest.mark.realdata
def test_a_real_claude_code_1_0_read_and_its_edit():
    """go.mod read with the reminder, then edited (go 1.23.0 -> go 1.23): the file's state
    is the edited text, without the reminder."""
    from tests.conftest import realdata_path
    t = ctxlab.load(realdata_path("claude_code/vibecodingtracker/claude_code.jsonl"))
    states = file_states(t.rewind_recorded().frame).set_index("path")
    gomod = states.loc[next(p for p in states.index if str(p).endswith("/go.mod"))]
    assert "go 1.23\n" in gomod["content"] and "go 1.23.0" not in gomod["content"]
    assert "system-reminder" not in gomod["content"] and "→" not in gomod["content"]


def test_a_read_then_edits_give_the_edited_text():
    f = _log([_read("a.py", "x = 1\ny = 2\ny = 2"),
              _edit("a.py", "x = 1", "x = 10"),
              _edit("a.py", "y = 2", "y = 3", every=True),
              _edit("a.py", "absent", "never")])
    s = file_states(f).set_index("path").loc["a.py"]
    assert s["content"] == "x = 10\ny = 3\ny = 3" and bool(s["complete"])
    assert s["read_pos"] < s["written_pos"] == s["recent_pos"]


def test_a_failed_edit_changes_nothing_and_is_not_a_write():
    f = _log([_read("a.py", "x = 1"), _edit("a.py", "x = 1", "x = 2", failed=True)])
    s = file_states(f).iloc[0]
    assert s["content"] == "x = 1" and np.isnan(s["written_pos"])


def test_a_write_sets_the_whole_text_and_later_reads_replace_it():
    f = _log([("Write", {"file_path": "b.md", "content": "# B\n"}, "created", False),
              _edit("b.md", "# B", "# Bee")])
    assert file_states(f).iloc[0]["content"] == "# Bee\n"
    f = _log([("Write", {"file_path": "b.md", "content": "old"}, "created", False),
              _read("b.md", "changed on disk")])
    assert file_states(f).iloc[0]["content"] == "changed on disk"


def test_a_partial_read_counts_only_while_nothing_more_is_known():
    f = _log([_read("c.py", "l10\nl11", offset=10, limit=2)])
    s = file_states(f).iloc[0]
    assert (s["content"], s["first_line"], bool(s["complete"])) == ("l10\nl11", 10, False)
    f = _log([_read("c.py", "l1\nl2\nl3"), _read("c.py", "l2", offset=2, limit=1)])
    s = file_states(f).iloc[0]
    assert (s["content"], s["first_line"], bool(s["complete"])) == ("l1\nl2\nl3", 1, True)
    assert s["read_pos"] == f.loc[f["kind"] == "tool_result", "pos"].max()


def test_files_come_most_recent_first_and_failed_reads_are_left_out():
    f = _log([_read("a.py", "a"), _read("b.py", "b"), _edit("a.py", "a", "A"),
              ("Read", {"file_path": "gone.py"}, "File does not exist.", True),
              ("Bash", {"command": "make"}, "ok", False)])
    states = file_states(f)
    assert states["path"].tolist() == ["a.py", "b.py"]
    assert states["content"].tolist() == ["A", "b"]
    assert file_states(f.iloc[0:0])["path"].tolist() == []


def test_multi_edit_and_the_anthropic_text_editor():
    f = _log([("Write", {"file_path": "m.py", "content": "a b c"}, "ok", False),
              ("MultiEdit", {"file_path": "m.py", "edits": [
                  {"old_string": "a", "new_string": "1"},
                  {"old_string": "c", "new_string": "3"}]}, "ok", False),
              ("str_replace_based_edit_tool", {"command": "create", "path": "t.py",
                                               "file_text": "p = 0"}, "ok", False),
              ("str_replace_based_edit_tool", {"command": "str_replace", "path": "t.py",
                                               "old_str": "0", "new_str": "1"}, "ok", False)])
    got = file_states(f).set_index("path")["content"].to_dict()
    assert got == {"m.py": "1 b 3", "t.py": "p = 1"}


@pytest.mark.realdata
def test_on_a_real_log_the_states_follow_the_edits():
    from tests.conftest import realdata_path
    t = ctxlab.load(realdata_path(
        "claude_code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"))
    at = float(t.events["pos"].iloc[0])  # the recorded compaction
    f = t.rewind_recorded().frame
    states = file_states(f[f["pos"] < at]).set_index("path")
    comp = states.loc[next(p for p in states.index
                           if p.endswith("components/transcript_components.ex"))]
    # written whole by the last call before compaction: the newest file, complete
    assert states.index[0].endswith("transcript_components.ex")
    assert bool(comp["complete"]) and comp["content"].startswith(
        "defmodule SpotterWeb.TranscriptComponents do")
    assert comp["written_pos"] == comp["recent_pos"]
