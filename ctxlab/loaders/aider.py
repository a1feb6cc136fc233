"""Aider chat history Markdown (``.aider.chat.history.md``).

Aider appends to one file across runs. Records are LINES: every line gets one report
entry; the lines of a block share its status and the first carries the part count.

* ``# aider chat started at YYYY-MM-DD HH:MM:SS`` opens session ``f"{stem}:{n}"``
  (n = 1, 2, ...; lines before the first header, a history cut from a longer file, form
  session ``f"{stem}:0"``). Aider records no per-message time: parts and calls carry the
  session start as ``ts`` (local time, read as UTC).
* Consecutive ``#### `` lines are one user message (a real turn); aider ends each with two
  spaces, and in a file that has such lines only those are (a ``#### `` heading inside a
  reply is reply text). Slash commands are
  handled by aider locally and are ignored, except ``/ask``, ``/code``, ``/architect`` and
  ``/help`` with a message (the message is sent). ``/clear`` and ``/reset`` drop the chat
  history: an event (origin ``clear``, trigger "manual") hides every earlier part of the
  session. It is the user's edit of the history, not a compaction: a replay keeps it
  (`ctxlab.schema.HISTORY_EDITS`) and recall does not count what it hid as lost.
  A ``# Fix any errors below`` message is aider's lint reflection (not a real turn).
* Unprefixed text is an assistant reply: one text part, one call. The ``> Tokens: ...``
  line that follows gives its usage (``sent`` -> input_total, ``received`` ->
  output_tokens, ``cache write``/``cache hit``/``cached`` -> cache_write/cache_read, ``5.2k``
  -> 5200). ``sent`` includes the cached tokens in the aider versions of the real file
  (a cache-hit call sends what the previous call sent plus its reply), except an early
  v0.50 build where ``sent`` < the cache write: when ``sent < cache_read + cache_write``
  the input is taken as exclusive. A Tokens line with no reply before it is a call with no
  recorded output. Replies without a Tokens line are calls with NA usage.
* ``> `` lines are aider's console output. A tool message is one ``> `` line ending with
  the two-space Markdown line break, or a ``> `` line without it followed by unprefixed
  lines up to the one that ends with it (multi-line output). Consecutive ``> `` lines form
  blocks. None of it is model input except two cases, kept as USER text (aider sends them
  as plain user messages, with no tool-call protocol, so they are not tool results): the
  command output re-logged after ``Add the output to the chat? ... y`` (``/run``,
  ``/test``), and lint errors followed by ``Attempt to fix lint errors? y``. Everything
  else (settings banner, Tokens, "Applied edit", commits, errors, declined output) is
  ignored with a reason, except the auto-commit of a reply's edits (``Commit <hash>
  <message>`` right after ``Applied edit to ...``): aider adds "I committed the changes
  with git hash ... & commit msg: ..." (or, when there was nothing to commit, "I didn't
  see any properly formatted edits in your reply?!") to the chat as a user message,
  answered "Ok." (two parts, in every later request of the session); a dirty-file commit
  before the edits and a linter's commit after them are not added.
  Console lines among sent output (``^C``, API retries, ``/undo`` hints) are not sent.
  The banner's main model (``Model:``, ``Main model:``,
  ``Models: X with ..., weak model Y``; printed again after ``/model``) is the model of
  the calls that follow it in the session.

The prompt aider actually sent (system prompt, repo map, file contents, aider's own chat
summaries) is not in the file: ``meta["prompt_recorded"]`` is False and ``sent`` counts
far more than the parts hold.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import LoadOptions, RecordLog, read_text
from ctxlab.loaders.safe import count, refused_counts
from ctxlab.loaders.registry import Loader, register
from ctxlab.schema import Transcript

NAME = "aider"
HEADER = "# aider chat started at "
SENT_COMMANDS = ("/ask", "/code", "/architect", "/help")
CLEAR_COMMANDS = ("/clear", "/reset")
BANNER = ("Aider v", "Main model:", "Weak model:", "Model:", "Models:", "Git repo:", "Repo-map:",
          "Use /help", "Added ", "Cur working dir:", "Git working dir:", "Command Line Args:",
          "VSCode terminal", "Loaded ", "Searched for model", "No model settings",
          "Approximate context window", "Too soon to check version", "Editor model:",
          "Newer aider version", "Warning for ", "Restored previous conversation history")
_TOKEN = re.compile(r"([\d][\d,]*(?:\.\d+)?)([kKmM]?) (sent|cache write|cache hit|cached|received)")
_COMMIT = re.compile(r"Commit ([0-9a-f]{7,40}) (.+)$", re.S)
COMMITTED = "I committed the changes with git hash {hash} & commit msg: {message}"
"""What aider adds to the chat after the auto-commit of a reply's edits (as a user message,
answered "Ok.")."""
NOT_COMMITTED = "I didn't see any properly formatted edits in your reply?!"
"""What it adds instead when that commit found nothing to commit."""
_CONSOLE = re.compile(r"\^C again to exit$|\^C KeyboardInterrupt$|You can use /undo "
                      r"|litellm\.[A-Z]\w*: |Retrying in \d+(?:\.\d+)? seconds\.\.\.$")
"""Console lines aider prints among output it sends, and does not send: interrupts, its
/undo hint, its API errors (``litellm.InternalServerError: ...``, not a traceback's
``litellm.exceptions...``) and retries."""
_MODEL = re.compile(r"(?:Main model|Models?):\s*([\w./@:+-]+)")
_ANSWER = re.compile(r"\?\s*(?:\([^)]*\))?\s*(?:\[[^\]]*\])?\s*:?\s*(.*)$", re.S)


def parse_count(number: str, suffix: str) -> int | None:
    """``"12,566"`` -> 12566, ``"5.2"``+``"k"`` -> 5200; None when out of range."""
    try:
        value = float(number.replace(",", "")) * {"": 1, "k": 1e3, "m": 1e6}[suffix.lower()]
    except ValueError:
        return None
    return count(round(value)) if math.isfinite(value) else None


def tokens_usage(text: str) -> dict[str, int | None]:
    """Call columns from a ``Tokens: ... sent, ... received.`` report."""
    got: dict[str, int] = {}
    for num, suf, what in _TOKEN.findall(text):
        n = parse_count(num, suf)
        if n is not None:
            got[{"cache hit": "read", "cached": "read", "cache write": "write"}.get(what, what)] = n
    sent, read, write = got.get("sent"), got.get("read", 0), got.get("write", 0)
    fields: dict[str, int | None] = {"output_tokens": got.get("received"),
                                     "cache_read": got.get("read"),
                                     "cache_write": got.get("write")}
    if sent is not None:
        inclusive = sent >= read + write
        fields["input_total"] = sent if inclusive else sent + read + write
        fields["input_tokens"] = sent - read - write if inclusive else sent
    return fields


def _is_user(line: str, spaced: bool) -> bool:
    """A user line: ``####``, then text; with ``spaced`` (the file's user lines end in two
    spaces, as aider writes them) only one that ends so (a ``#### `` heading inside a reply
    does not)."""
    return line.startswith("####") and (len(line) == 4 or line[4] == " ") and (
        not spaced or line.endswith("  "))


def _is_tool(line: str) -> bool:
    return line.startswith(">") and (len(line) == 1 or line[1] == " ")


def _ends_message(lines: list[str], i: int, spaced: bool) -> bool:
    """Is line ``i`` the last line of a ``>`` message? Aider writes ``text.rstrip() + "  "``,
    so the line ends in two spaces after a non-space, and a boundary follows (``>``, ``####``,
    a blank line, a header or the end)."""
    line = lines[i]
    if not (line.endswith("  ") and len(line) > 2 and not line[-3].isspace()):
        return False
    if i + 1 >= len(lines):
        return True
    nxt = lines[i + 1]
    return not nxt.strip() or _is_tool(nxt) or _is_user(nxt, spaced) or nxt.startswith(HEADER)


def _unmark(line: str) -> str:
    """A line without aider's trailing two-space Markdown line break."""
    return line[:-2] if line.endswith("  ") else line


def _answer(text: str) -> bool:
    """Did the user agree to a ``...? (y/n): y`` prompt?"""
    m = _ANSWER.search(text)
    ans = (m.group(1) if m else "").strip().lower()
    return bool(ans) and not ans.startswith("n")


class _Parser:
    """One pass over the lines, one builder per session."""

    def __init__(self, path: Path, lines: list[str], log: RecordLog) -> None:
        self.lines, self.log, self.stem = lines, log, path.stem
        # aider ends a user line with two spaces; a file written so has only such user lines
        self.spaced = any(ln.startswith("#### ") and ln.endswith("  ") for ln in lines)
        self.builders: list[SessionBuilder] = []
        self.new_session(0, None)

    def new_session(self, n: int, ts: str | None) -> None:
        self.b = SessionBuilder(f"{self.stem}:{n}", self.log)
        self.builders.append(self.b)
        self.ts, self.pending, self.visible = ts, None, []
        self.model: str | None = None       # the main model of the latest banner
        self.replied = False                # a reply since the last user message
        self.command: str | None = None
        self.after_command = False
        self.startup = n > 0          # the first > block after a header is the banner

    def block(self, start: int, end: int, record: str, parts: int = 0,
              reason: str | None = None) -> None:
        """Report lines ``start..end-1`` (0-based) as one block."""
        for i in range(start, end):
            if reason is None:
                self.log.used(record, line=i + 1, parts=parts if i == start else 0)
            else:
                self.log.ignored(record, reason, line=i + 1)

    def text_part(self, role: str, text: str, line: int, *, real_user: bool = False,
                  call: int | None = None, meta: dict[str, Any] | None = None) -> None:
        self.b.message(role, real_user=real_user)
        pid = self.b.part("text", text, call=call, ts=self.ts,
                          source=self.log.location(line=line), meta=meta)
        self.visible.append(pid)

    # ---- the three kinds of block --------------------------------------------------------
    def user(self, start: int, end: int) -> None:
        text = "\n".join(_unmark(ln[5:]) for ln in self.lines[start:end])
        self.startup, self.pending, self.replied = False, None, False
        if text.startswith("/"):
            cmd, _, rest = text.partition(" ")
            cmd = cmd.split("\n")[0]
            self.command, self.after_command = text, True
            if cmd in SENT_COMMANDS and rest.strip():
                self.text_part("user", rest, start + 1, real_user=True, meta={"command": cmd})
                self.block(start, end, "user", 1)
            elif len(cmd) >= 4 and any(c.startswith(cmd) for c in CLEAR_COMMANDS):
                ev = self.b.event(origin="clear", trigger="manual", pre_tokens=None,
                                  reason=f"{cmd}: aider dropped the chat history",
                                  source=self.log.location(line=start + 1),
                                  meta={"command": cmd})
                self.b.hide(self.visible, ev)
                self.visible = []
                self.block(start, end, "clear")
            else:
                self.block(start, end, "command", reason="aider command, handled locally and "
                           "not sent to the model")
            return
        reflected = text.startswith("# Fix any errors below")
        self.text_part("user", text, start + 1, real_user=not reflected,
                       meta={"reflected": "lint"} if reflected else None)
        self.block(start, end, "user", 1)

    def reply(self, start: int, end: int) -> None:
        self.startup = self.after_command = False
        self.replied = True
        call = self.b.call(ts=self.ts, model=self.model,
                           source=self.log.location(line=start + 1))
        self.text_part("assistant", "\n".join(self.lines[start:end]), start + 1, call=call)
        self.pending = call
        self.block(start, end, "assistant", 1)

    def tool_region(self, start: int) -> int:
        """Read the ``>`` messages from ``start``; returns the index after them."""
        lines, n = self.lines, len(self.lines)
        msgs: list[tuple[int, int, str]] = []
        i = start
        while i < n and _is_tool(lines[i]):
            j = i + 1
            if not (lines[i] == ">  " or _ends_message(lines, i, self.spaced)):
                while j < n and not _is_user(lines[j], self.spaced) \
                        and not lines[j].startswith(HEADER):
                    j += 1
                    if _ends_message(lines, j - 1, self.spaced):
                        break
            body = [lines[i][2:] if lines[i].startswith("> ") else lines[i][1:]] + lines[i + 1:j]
            msgs.append((i, j, _unmark("\n".join(body))))
            i = j
        self.classify(msgs)
        self.startup = False
        return i

    def classify(self, msgs: list[tuple[int, int, str]]) -> None:
        after_test = self.after_command and (self.command or "").startswith("/test")
        self.after_command = False
        k = 0
        while k < len(msgs):
            s, e, text = msgs[k]
            # the outcome of the auto-commit of a reply's edits: right after "Applied edit
            # to ..." (a dirty-file commit comes before the edits, a linter's after others)
            outcome = self.replied and k > 0 and msgs[k - 1][2].startswith("Applied edit to")
            if text.startswith("Tokens:"):
                self.tokens(s, e, text)
            elif text.startswith("Add the output to the chat?") and _answer(text):
                self.block(s, e, "confirm", reason="confirmation prompt (UI)")
                self.sent_block(msgs[k + 1:], "command_output", {"command_output": True,
                                                                 "command": self.command})
                return
            elif k == 0 and after_test and e - s > 1 and len(msgs) > 1:
                # failing /test output is added without asking: shown once, then re-logged
                self.block(s, e, "tool_output", reason="test output as displayed; the re-logged "
                           "copy that follows is what the model was sent")
                self.sent_block(msgs[1:], "command_output", {"command_output": True,
                                                             "command": self.command})
                return
            elif text.startswith("The LLM did not conform to the edit format.") and not any(
                    m[2].startswith("Only 3 reflections allowed") for m in msgs[k:]):
                self.block(s, e, "tool_output", reason="edit-format error notice (UI)")
                k += 1
                if k < len(msgs) and msgs[k][2].startswith("https://"):
                    self.block(msgs[k][0], msgs[k][1], "tool_output", reason="help link (UI)")
                    k += 1
                self.sent_block(msgs[k:], "reflection", {"reflected": "edit_error"})
                return
            elif text.startswith("# Fix any errors below"):
                q = next((j for j in range(k + 1, len(msgs))
                          if msgs[j][2].startswith("Attempt to fix lint errors?")), None)
                if q is not None and _answer(msgs[q][2]):
                    self.sent_block(msgs[k:q], "lint_output", {"reflected": "lint"})
                    k = q
                    continue
                self.block(s, e, "tool_output", reason="lint output the model was not sent")
            elif outcome and _COMMIT.match(text):
                m = _COMMIT.match(text)
                assert m is not None
                self.noted(s, e, COMMITTED.format(hash=m.group(1), message=m.group(2).strip()),
                           m.group(1))
            elif outcome and text.startswith("No changes made to git tracked files."):
                self.noted(s, e, NOT_COMMITTED, None)
            elif self.startup or text.startswith(BANNER):
                m = _MODEL.match(text)
                if m:               # the model the calls that follow are made with
                    self.model = m.group(1)
                self.block(s, e, "banner", reason="settings banner / chat file bookkeeping (UI)")
            else:
                self.block(s, e, "tool_output", reason="console output (edits applied, commits, "
                           "errors, prompts); aider does not send it to the model")
            k += 1

    def noted(self, s: int, e: int, said: str, commit: str | None) -> None:
        """The auto-commit of a reply's edits: aider adds its outcome to the chat as a
        user message and an "Ok." from the assistant (``move_back_cur_messages``), which
        every later request of the session holds; once per reply."""
        meta = {"auto_commit": commit}
        self.text_part("user", said, s + 1, meta=meta)
        self.text_part("assistant", "Ok.", s + 1, meta=meta)
        self.block(s, e, "commit", 2)
        self.replied = False

    def sent_block(self, msgs: list[tuple[int, int, str]], record: str,
                   meta: dict[str, Any]) -> None:
        """``>`` messages aider sent to the model as one user message (not a real turn).

        Token reports among them stay usage records; console lines among them (`_CONSOLE`:
        interrupts, API retries, hints) are not sent."""
        body = [m for m in msgs if not (m[2].startswith("Tokens:") or _CONSOLE.match(m[2]))]
        if body:
            text = "\n".join(m[2] for m in body).rstrip("\n")
            self.text_part("user", text, body[0][0] + 1, meta=meta)
        first = True
        for s, e, text in msgs:
            if text.startswith("Tokens:"):
                self.tokens(s, e, text)
            elif _CONSOLE.match(text):
                self.block(s, e, "tool_output", reason="console output (interrupt, API retry, "
                           "hint); aider does not send it to the model")
            else:
                self.block(s, e, record, 1 if first else 0)
                first = False

    def tokens(self, s: int, e: int, text: str) -> None:
        usage = tokens_usage(text)
        if usage.get("input_total") is None or usage.get("output_tokens") is None:
            refused_counts()    # what parse_count refused here is no later call's
            self.log.skipped("tokens", "token report without 'N sent' and 'N received' (cut or "
                             "garbled line)", line=s + 1)
            self.block(s + 1, e, "tokens", reason="continuation of a garbled token report")
            return
        if self.pending is None:      # a request whose reply was not logged
            self.pending = self.b.call(ts=self.ts, model=self.model,
                                       source=self.log.location(line=s + 1))
        self.b.update_call(self.pending, source=self.log.location(line=s + 1), **usage)
        self.pending = None
        self.block(s, e, "tokens")

    # ---- main loop -----------------------------------------------------------------------
    def run(self) -> None:
        lines, n, i = self.lines, len(self.lines), 0
        sessions = 0
        while i < n:
            line = lines[i]
            if line.startswith(HEADER):
                sessions += 1
                self.new_session(sessions, line[len(HEADER):].strip() or None)
                self.log.used("session_start", line=i + 1)
                i += 1
            elif _is_user(line, self.spaced):
                j = i
                while j < n and _is_user(lines[j], self.spaced):
                    j += 1
                self.user(i, j)
                i = j
            elif _is_tool(line):
                i = self.tool_region(i)
            elif not line.strip():
                self.log.ignored("blank", "blank line (Markdown separator)", line=i + 1)
                i += 1
            elif i == 0 and re.fullmatch(r"\s*-\*-.*-\*-\s*", line):
                self.log.ignored("mode_line", "editor mode line", line=1)
                i += 1
            else:
                j = i
                while j < n and not (_is_user(lines[j], self.spaced) or _is_tool(lines[j])
                                     or lines[j].startswith(HEADER)):
                    j += 1
                k = j
                while k > i and not lines[k - 1].strip():
                    k -= 1
                self.reply(i, k)
                for b in range(k, j):
                    self.log.ignored("blank", "blank line (Markdown separator)", line=b + 1)
                i = j
        self.sessions = sessions


def sniff(path: Path, head: str) -> bool:
    """Aider's session header near the top of a Markdown file."""
    if re.search(r"(?m)^# aider chat started at \d{4}-", head):
        return True
    return (path.name.endswith(".aider.chat.history.md")
            and re.search(r"(?m)^#### ", head) is not None)


def load(path: Path, options: LoadOptions) -> Transcript:
    """Load an Aider chat history: one session per ``# aider chat started at`` header."""
    path = Path(path)
    log = RecordLog(path, strict=options.strict)
    text = read_text(path, log)
    if not re.search(r"(?m)^(?:# aider chat started at |#### )", text):
        raise log.error("not an Aider chat history: no '# aider chat started at' header and "
                        "no '#### ' user prompt (is --format aider right? ctxlab info "
                        "detects the format)")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    p = _Parser(path, lines, log)
    p.run()
    meta = {"format": NAME, "path": str(path), "prompt_recorded": False,
            "sessions_started": p.sessions}
    return assemble(p.builders, log, meta)


LOADER = register(Loader(name=NAME, description="Aider chat history Markdown "
                         "(.aider.chat.history.md)", sniff=sniff, load=load, priority=50))
