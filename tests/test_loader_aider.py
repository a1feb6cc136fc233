"""Aider chat-history loader: the real 4 MB history, a hand-made history, corruption."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.errors import LoadError
from ctxlab.loaders import aider
from ctxlab.schema import Transcript
from conftest import realdata_path
from golden import check_golden

FIXTURE = """\
# aider chat started at 2024-08-05 19:33:32

> /usr/bin/aider app.py  
> Aider v0.47.2-dev  
> Models: claude-3-5-sonnet-20240620 with diff edit format, weak model claude-3-haiku  
> Git repo: .git with 3 files  
> Added app.py to the chat.  

#### Use the Spinner  
#### in run_install  

Certainly! Here's the change:

app.py
```python
<<<<<<< SEARCH
x = 1
=======
x = 2
>>>>>>> REPLACE
```

> Tokens: 5.2k sent, 1,632 cache write, 604 received. Cost: $0.02 message, $0.02 session.  
> Applied edit to app.py  
> The LLM did not conform to the edit format.  
> https://aider.chat/docs/troubleshooting/edit-errors.html  
> # 1 SEARCH/REPLACE block failed to match!  
> x = 3  

Sorry, here is the fixed block.

> Tokens: 5,300 sent, 5,100 cache hit, 20 received.  

#### /run python app.py  
> Traceback (most recent call last):
  File "app.py", line 1
    x = = 2
SyntaxError: invalid syntax  
> Add the output to the chat? (y/n/instructions): y  
> Traceback (most recent call last):  
> File "app.py", line 1  
> x = = 2  
> SyntaxError: invalid syntax  

The syntax error comes from `x = = 2`.

#### /clear  

#### /ask what is x?  

x is 2.

> Tokens: 900 sent, 5 received.  
> # Fix any errors below, if possible.  
> app.py:1:1: E225  
> Attempt to fix lint errors? y  

Fixed the lint error.

#### /diff  
>  
>  
> ^C KeyboardInterrupt  

# aider chat started at 2024-08-06 10:00:00

> Aider v0.48.0  
"""


def write(tmp_path: Path, text: str, name: str = "chat.md") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def n_lines(text: str) -> int:
    lines = text.split("\n")
    return len(lines) - 1 if text.endswith("\n") else len(lines)


def accounts_for_every_line(t: Transcript, text: str) -> bool:
    """Each line has one entry of its own (an entry for a piece of it, ``line 3 bytes``,
    sits beside it)."""
    rep = t.load_report.records
    whole = rep["where"] == "line " + rep["line"].astype("string")
    assert set(rep.loc[~whole, "line"]) <= set(rep.loc[whole, "line"])
    return sorted(rep.loc[whole, "line"].tolist()) == list(range(1, n_lines(text) + 1))


# ---- the real history -------------------------------------------------------------------
@pytest.fixture(scope="module")
def real() -> tuple[Transcript, list[str], float]:
    path = realdata_path("aider/chat-history.md")
    start = time.perf_counter()
    t = ctxlab.load(path)
    seconds = time.perf_counter() - start
    return t, path.read_text(encoding="utf-8").split("\n"), seconds


@pytest.mark.realdata
def test_golden(real: tuple[Transcript, list[str], float]) -> None:
    check_golden("aider__chat-history", real[0])


@pytest.mark.realdata
def test_real_history_facts(real: tuple[Transcript, list[str], float]) -> None:
    t, lines, seconds = real
    print(f"aider chat-history.md loaded in {seconds:.2f} s")   # measured, not asserted
    rep = t.load_report.records
    assert sorted(rep["line"]) == list(range(1, 99962))        # every line, exactly once
    assert (rep["record"] == "session_start").sum() == 1133 == t.meta["sessions_started"]
    token_lines = [i + 1 for i, ln in enumerate(lines) if ln.startswith("> Tokens:")]
    assert len(token_lines) == 839
    by_line = rep.set_index("line")
    assert (by_line.loc[token_lines, "record"] == "tokens").all()
    c = t.calls
    assert c["input_total"].notna().sum() == 839 == c["output_tokens"].notna().sum()
    assert len(c) == 890                 # 876 replies + 14 requests whose reply was not logged
    # 876 replies and 385 "Ok." answers to the auto-commit notes aider adds to the chat
    assert (t.frame["role"] == "assistant").sum() == 876 + 385
    # each call has the main model of the latest banner (22 come before any banner)
    assert c["model"].notna().sum() == 868
    assert c["model"].iloc[0] == "claude-3-5-sonnet-20240620"
    assert c["model"].value_counts()["gpt-4o-mini"] == 94           # "> Model: gpt-4o-mini"
    # line 211, "> Commit fd43cd4 feat: ...", after a reply: two parts, later requests see them
    assert by_line.loc[211, ["record", "status", "parts"]].tolist() == ["commit", "used", 2]
    note = t.frame[t.frame["content"].str.startswith("I committed the changes with git hash "
                                                     "fd43cd4 & commit msg: feat: Use the "
                                                     "Spinner")]
    assert note["role"].tolist() == ["user"] and note["session"].tolist() == ["chat-history:2"]
    # the startup commit of dirty files (line 101, in the banner) is not sent
    assert by_line.loc[101, "status"] == "ignored"
    # one note per reply whose edits were committed (382), or found nothing to commit (3);
    # a dirty-file commit before the edits (line 26388) or a linter's after them is not one
    said = t.frame["content"]
    assert said.str.startswith("I committed the changes with git hash ").sum() == 382
    assert (said == "I didn't see any properly formatted edits in your reply?!").sum() == 3
    assert lines[26387].startswith("> Commit bba0735") and \
        by_line.loc[26388, "status"] == "ignored"
    assert by_line.loc[26390, ["record", "parts"]].tolist() == ["commit", 2]
    # interrupts, API retries and /undo hints among sent output are not sent
    sent = t.frame[t.frame["meta"].fillna("").str.contains("command_output|reflected")]
    assert not sent["content"].str.contains(r"(?m)^(?:\^C again to exit|\^C KeyboardInterrupt"
                                            r"|Retrying in |You can use /undo)").any()
    # a "#### " heading inside a reply (no trailing spaces) is reply text, not a user turn:
    # session 437's third reply holds four, and its usage stays on its own call
    s437 = c[c["session"] == "chat-history:437"]
    assert s437["input_total"].tolist() == [6625, 10569, 11580]
    first = c.iloc[0]
    assert (first["session"], first["input_total"], first["output_tokens"]) == \
        ("chat-history:2", 5244, 604)
    cached = c[c["session"] == "chat-history:961"]
    assert cached["input_total"].tolist() == [1650, 1711]       # sent includes the cache
    assert cached["cache_write"].fillna(0).tolist() == [1632, 0]
    assert cached["cache_read"].fillna(0).tolist() == [0, 1632]
    assert cached["input_tokens"].tolist() == [18, 79]
    # the early v0.50 build reported sent < cache write: taken as exclusive
    odd = c[c["session"] == "chat-history:893"].iloc[0]
    assert (odd["input_total"], odd["input_tokens"], odd["cache_write"]) == (2930, 202, 2728)
    assert c[c["session"] == "chat-history:1011"]["input_total"].tolist() == [3900]  # "3.9k"
    assert len(t.events) == 68 and set(t.events["trigger"]) == {"manual"}      # /clear, /reset
    assert set(t.events["origin"]) == {"clear"} and t.rewind_recorded() is t
    f = t.frame
    assert t.meta["prompt_recorded"] is False
    assert set(f["role"]) == {"user", "assistant"} and set(f["kind"]) == {"text"}
    kinds = rep[rep["parts"] > 0].groupby("record")["parts"].sum().to_dict()
    assert kinds == {"assistant": 876, "user": 1020, "command_output": 27,
                     "reflection": 54, "lint_output": 27, "commit": 2 * 385}
    assert int(f.groupby("session")["turn"].max().sum()) == 1007
    assert t.load_report.parts_made == len(f)
    assert t.load_report.skipped.empty


# ---- hand-made history -------------------------------------------------------------------
def test_fixture(tmp_path: Path) -> None:
    p = write(tmp_path, FIXTURE)
    assert ctxlab.loaders.detect(p).name == "aider"
    t = ctxlab.load(p)
    assert accounts_for_every_line(t, FIXTURE)
    f = t.frame
    assert t.sessions == ["chat:1"]               # session 2 holds only its banner
    assert t.meta["sessions_started"] == 2
    got = list(zip(f["role"], f["content"].str.slice(0, 20)))
    assert got == [("user", "Use the Spinner\nin r"), ("assistant", "Certainly! Here's th"),
                   ("user", "# 1 SEARCH/REPLACE b"), ("assistant", "Sorry, here is the f"),
                   ("user", "Traceback (most rece"), ("assistant", "The syntax error com"),
                   ("user", "what is x?"), ("assistant", "x is 2."),
                   ("user", "# Fix any errors bel"), ("assistant", "Fixed the lint error")]
    assert f["content"].iloc[0] == "Use the Spinner\nin run_install"
    assert f["content"].iloc[4] == ("Traceback (most recent call last):\nFile \"app.py\", line 1"
                                    "\nx = = 2\nSyntaxError: invalid syntax")
    assert f["turn"].tolist() == [1, 1, 1, 1, 1, 1, 2, 2, 2, 2]
    c = t.calls
    assert c["input_total"].tolist()[:2] == [5200, 5300]
    assert c["cache_write"].tolist()[0] == 1632 and c["input_tokens"].tolist()[:2] == [3568, 200]
    assert c["output_tokens"].tolist()[:2] == [604, 20] and pd.isna(c["output_tokens"].iloc[2])
    assert c["input_total"].tolist()[3] == 900 and pd.isna(c["input_total"].iloc[4])
    assert (f.loc[f["role"] == "assistant", "call"].tolist() == [0, 1, 2, 3, 4])
    # /clear hides everything before it: the user's edit of the history, which a replay
    # keeps (it used to be a recorded compaction, undone before every replay, so the
    # replay sent what the user had dropped)
    assert len(t.events) == 1 and t.events["origin"].tolist() == ["clear"]
    assert f["hidden_by"].notna().tolist() == [True] * 6 + [False] * 4
    r = ctxlab.replay(t, "neurolink", window=200_000)
    assert len(r.events) == 0 and len(r.base.events) == 1
    sent = r.at(int(r.calls["call"].iloc[-1]))[0]["content"]
    assert sent.str.startswith("what is x?").any()
    assert not sent.str.startswith("Use the Spinner").any()
    rep = t.load_report.records.set_index("line")
    assert rep.loc[3, "record"] == "banner" and rep.loc[3, "status"] == "ignored"
    run_output = FIXTURE.split("\n").index("> Traceback (most recent call last):") + 1
    assert rep.loc[run_output, "record"] == "tool_output"          # the display copy
    assert rep.loc[run_output + 1, "parts"] == 0                   # its continuation lines


def test_token_reports() -> None:
    u = aider.tokens_usage("Tokens: 12,566 sent, 84 received. Cost: $0.0019 request")
    assert (u["input_total"], u["input_tokens"], u["output_tokens"]) == (12566, 12566, 84)
    u = aider.tokens_usage("Tokens: 23,172 sent, 10,496 cached, 9 received.")
    assert (u["input_total"], u["cache_read"], u["input_tokens"]) == (23172, 10496, 12676)
    u = aider.tokens_usage("Tokens: 11k sent, 2.1k cache write, 1.5k cache hit, 3.2k received.")
    assert (u["input_total"], u["cache_write"], u["cache_read"], u["output_tokens"]) == \
        (11000, 2100, 1500, 3200)


def test_strict_raises_on_garbled_token_line(tmp_path: Path) -> None:
    text = FIXTURE.replace("> Tokens: 900 sent, 5 received.", "> Tokens: 90")
    p = write(tmp_path, text)
    line = text.split("\n").index("> Tokens: 90  ") + 1
    with pytest.raises(LoadError) as e:
        ctxlab.load(p, strict=True)
    assert f"{p}:{line}" in str(e.value)
    t = ctxlab.load(p)
    assert t.load_report.skipped["line"].tolist() == [line]
    assert accounts_for_every_line(t, text)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_corruption_is_reported_or_raises(tmp_path_factory: pytest.TempPathFactory,
                                          data: st.DataObject) -> None:
    lines = FIXTURE.split("\n")
    op = data.draw(st.sampled_from(["drop", "dup", "truncate", "bytes", "cut"]))
    i = data.draw(st.integers(0, len(lines) - 1))
    if op == "drop":
        del lines[i]
    elif op == "dup":
        lines.insert(i, lines[i])
    elif op == "truncate":
        lines[i] = lines[i][: data.draw(st.integers(0, max(0, len(lines[i]) - 1)))]
    raw = "\n".join(lines).encode("utf-8")
    if op == "bytes":
        at = data.draw(st.integers(0, len(raw) - 1))
        raw = raw[:at] + data.draw(st.sampled_from([b"\x00", b"\xff\xfe", b"\r", b"> ", b"#### "]))\
            + raw[at:]
    elif op == "cut":
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    p = tmp_path_factory.mktemp("aider") / "chat.md"
    p.write_bytes(raw)
    try:
        t = ctxlab.load(p, format="aider")
    except LoadError:
        return
    assert accounts_for_every_line(t, raw.decode("utf-8", errors="replace"))
    assert t.load_report.parts_made == len(t.frame)


HEADINGS = ("# aider chat started at 2024-08-11 09:00:00\n\n"
            "#### refactor io{sp}\n\n"
            "Here is the plan.\n\n#### `InputOutput` Class\n\nChange A.\n\n"
            "#### `Coder` Class\n\nChange B.\n\n"
            "> Tokens: 1,000 sent, 50 received. Cost: $0.01 request, $0.01 session.  \n")


def test_a_heading_inside_a_reply_is_reply_text(tmp_path: Path) -> None:
    """Aider ends a user line with two spaces; a model's ``#### `` heading has none."""
    t = ctxlab.load(write(tmp_path, HEADINGS.format(sp="  "), "h.aider.chat.history.md"))
    f, c = t.frame, t.calls
    assert f["role"].tolist() == ["user", "assistant"]
    assert "#### `Coder` Class" in f["content"].iloc[1]
    assert c[["input_total", "output_tokens"]].values.tolist() == [[1000, 50]]


def test_a_file_without_spaced_user_lines_reads_every_heading_as_one(tmp_path: Path) -> None:
    """A history whose user lines do not end in two spaces (not aider's writer): every
    ``#### `` line is a user line, as before."""
    t = ctxlab.load(write(tmp_path, HEADINGS.format(sp=""), "o.aider.chat.history.md"))
    assert (t.frame["role"] == "user").sum() == 3 and len(t.calls) == 3


AUTO_COMMITS = """\
# aider chat started at 2024-08-05 19:33:32

> Aider v0.48.0  
> Models: claude-3-5-sonnet-20240620 with diff edit format, weak model claude-3-haiku-20240307  
> Git repo: .git with 3 files  

#### change x  

Here is the change.

> Tokens: 1,000 sent, 50 received.  
> Committing app.py before applying edits.  
> Commit 1111111 fix: dirty work of the user  
> Applied edit to app.py  
> Commit 2222222 feat: change x  
> You can use /undo to revert and discard commit 2222222.  
> Commit 3333333 style: Fix formatting  
> You can use /undo to revert and discard commit 3333333.  

#### change y  

Here is y.

> Tokens: 1,100 sent, 40 received.  
> Committing app.py before applying edits.  
> Commit 4444444 fix: more dirty work  
> Applied edit to app.py  
> No changes made to git tracked files.  

#### /run python call.py  
> Traceback (most recent call last):
  File "call.py", line 3, in <module>
litellm.exceptions.BadRequestError: model not found  
> Add the output to the chat? (y/n/instructions): y  
> Traceback (most recent call last):  
> File "call.py", line 3, in <module>  
> litellm.exceptions.BadRequestError: model not found  
> Retrying in 5 seconds (attempt 2 of 3)  
> ^C again to exit  
"""


def test_only_the_auto_commit_of_a_replys_edits_is_added_to_the_chat(tmp_path: Path) -> None:
    """aider tells the model the outcome of the commit of a reply's edits (answered "Ok."):
    not a dirty-file commit before them, not a linter's after them. Program output that
    merely starts like aider's console lines is sent; the console lines are not."""
    t = ctxlab.load(write(tmp_path, AUTO_COMMITS))
    assert accounts_for_every_line(t, AUTO_COMMITS)
    f = t.frame
    assert list(zip(f["role"], f["content"].str.slice(0, 48))) == [
        ("user", "change x"), ("assistant", "Here is the change."),
        ("user", "I committed the changes with git hash 2222222 & "), ("assistant", "Ok."),
        ("user", "change y"), ("assistant", "Here is y."),
        ("user", "I didn't see any properly formatted edits in you"), ("assistant", "Ok."),
        ("user", "Traceback (most recent call last):\nFile \"call.py")]
    assert f["content"].iloc[-1].endswith("litellm.exceptions.BadRequestError: model not "
                                          "found\nRetrying in 5 seconds (attempt 2 of 3)")
    assert t.calls["model"].tolist() == ["claude-3-5-sonnet-20240620"] * 2


def test_forcing_aider_on_another_log_is_a_load_error(tmp_path: Path) -> None:
    """Without a session header or a '#### ' prompt nothing is an aider history: a JSONL
    log forced to aider was 'used' whole and replayed as 0 tokens."""
    with pytest.raises(LoadError, match="not an Aider chat history: no '# aider chat "
                                        "started at' header"):
        ctxlab.load(Path(__file__).parent.parent / "datasets" / "coding_session_b.jsonl",
                    format="aider")
