"""The machinery of the scenario scripts behind `ctxlab.datasets.generate_session`.

A `_Script` keeps a virtual repository (files change when the agent edits them, so a
re-read shows the new content), the clock, the running context size (to record an auto
compaction at the threshold, like Claude Code) and the planted facts. Its tool methods
return what Claude Code would record for the call: name, arguments, the text the model
sees, the structured ``toolUseResult`` and whether it failed.
"""

from __future__ import annotations

import base64
import fnmatch
import random
import re
import uuid
from typing import Any

from ctxlab._datagen import text as T
from ctxlab.datasets import Block, Fact, Message, MessageKind, Session, tokens

BASE_MS = 1_768_208_400_000  # 2026-01-12T09:00:00Z
Tool = tuple[str, dict[str, Any], str, Any, bool]  # name, input, result text, detail, error
KEEP_IN_SUMMARY = {"api_key_env": True, "staging_db": True, "dev_port": False,
                   "batch_decision": False, "rate_limit": False}
EXPLORE = ("Can you walk me through how {m} works? I'm new to this part of the code.",
           "How does a {n} get from the API down to storage? Point me at the key functions.",
           "Before we change anything: where is {v}_{n}s used, and what depends on {m}?")
FIX = ("`{t}` is failing on CI since yesterday. Can you find out why and fix it?",
       "The {n} sync keeps timing out in `{t}`. Please take a look and fix it.")
FEATURE = ("Please add a `{new}` module that can {v} {n}s in bulk, wire it into {m}, and add "
           "tests.", "We need {new} for the {n} report. Add it next to {m}, with tests.")
BUILD = ("The frontend build broke after the API change. Please fix the type errors.",
         "Run the web build and fix whatever fails.")
REVIEW = ("Show me what we've changed so far and summarise it for the PR description.",
          "Quick check before I push: what does the diff look like?")
SLUG = (("modular", "radiant", "drifting", "quiet", "brisk"),
        ("petting", "floating", "tumbling", "humming", "folding"),
        ("thompson", "music", "whisper", "lantern", "harbor"))


EDIT_GROWTH_CAP = 40
"""Lines a file may grow past its first version before edits start removing what earlier
edits inserted (reached only in sessions of several hundred calls)."""


class _Script:
    """Builds one session message by message; two seeded streams keep the text (``rng``)
    apart from ids and timing (``meta``)."""

    def __init__(self, kind: str, seed: int) -> None:
        self.kind, self.seed = kind, seed
        self.rng = random.Random(f"ctxlab:{kind}:{seed}")
        self.meta = random.Random(f"ctxlab-meta:{kind}:{seed}")
        self.clock = BASE_MS + seed * 7_919_000
        self.msgs: list[Message] = []
        self.turn = self.ctx = self.calls = 0
        self.overhead = 14_000 + self.meta.randint(0, 9_000)
        self.compact_at: int | None = None
        self.compactions = 0
        self.facts: dict[str, dict[str, Any]] = {}
        self.files: dict[str, str] = {}
        self.orig: dict[str, str] = {}
        self.inserted: dict[str, list[tuple[str, str]]] = {}
        self.touched: dict[str, str] = {}
        self.prompts: list[str] = []
        self.errors: list[str] = []
        self.root = ""

    # ---- messages ------------------------------------------------------------------------
    def tick(self, lo: float, hi: float) -> None:
        self.clock += int(self.meta.uniform(lo, hi) * 1000)

    def add(self, kind: MessageKind, blocks: list[Block], pre_tokens: int | None = None) -> int:
        self.msgs.append(Message(kind=kind, blocks=tuple(blocks), ts_ms=self.clock,
                                 turn=self.turn, pre_tokens=pre_tokens))
        self.ctx += sum(b.chars for b in blocks)
        return len(self.msgs) - 1

    def fact(self, name: str, key: str, statement: str, where: int) -> None:
        self.facts[name] = {"key": key, "statement": statement, "stated": where,
                            "needed": [], "in_summary": None}

    def prompt(self, text: str, pause: tuple[float, float] = (20, 420)) -> int:
        self.turn += 1
        self.tick(*pause)
        self.prompts.append(text)
        return self.add("prompt", [Block(type="text", text=text)])

    def respond(self, think: str | None = None, say: str | None = None,
                tools: list[Tool] | None = None, uses: tuple[str, ...] = ()) -> int:
        if self.compact_at is not None and self.overhead + tokens(self.ctx) >= self.compact_at:
            self.compact()
        self.tick(2, 14)
        blocks = []
        if think:
            blocks.append(Block(type="thinking", text=think,
                                detail=base64.b64encode(self.meta.randbytes(96)).decode()))
        if say or not tools:
            blocks.append(Block(type="text", text=say or T.prose(self.rng, 2)))
        results = []
        for name, inp, text, detail, err in tools or []:
            tid = "toolu_01" + "".join(self.meta.choice(T.B58) for _ in range(22))
            blocks.append(Block(type="tool_use", tool=name, tool_id=tid, input=inp))
            results.append(Block(type="tool_result", tool=name, tool_id=tid, text=text,
                                 detail=detail, is_error=err))
        i = self.add("response", blocks)
        self.calls += 1
        for f in uses:
            self.facts[f]["needed"].append(i)
        if results:
            self.tick(0.2, 3 + sum(len(b.text) for b in results) / 20_000)
            self.add("results", results)
        return i

    def compact(self) -> None:
        pre = self.overhead + tokens(self.ctx)
        self.tick(40, 110)
        self.add("boundary", [], pre_tokens=pre)
        for name, f in self.facts.items():
            if f["in_summary"] is None:
                f["in_summary"] = KEEP_IN_SUMMARY.get(name, False)
        self.ctx = 0
        self.add("summary", [Block(type="text", text=self.summary())])
        self.compactions += 1

    def summary(self) -> str:
        """A compaction summary in Claude Code's layout; keeps only some planted facts."""
        rng = self.rng

        def first(p: str) -> str:
            return re.split(r"(?<=[.?!])\s", p, maxsplit=1)[0]
        out = ["This session is being continued from a previous conversation that ran out of "
               "context. The summary below covers the earlier portion of the conversation.", "",
               "Analysis:", "Let me chronologically analyze the conversation:", ""]
        out += [f"{k}. **Request {k}**: {first(p)} {T.prose(rng, 2)}"
                for k, p in enumerate(self.prompts, 1)]
        out += ["", "Summary:", "1. Primary Request and Intent:",
                f"   {first(self.prompts[0])} {T.prose(rng, 2)}", "", "2. Key Technical Concepts:"]
        out += [f"   - {f['statement']}" for f in self.facts.values() if f["in_summary"]]
        out += [f"   - {T.fill(rng, rng.choice(T.PROSE))}" for _ in range(4)]
        out += ["", "3. Files and Code Sections:"]
        for p, how in list(self.touched.items())[-10:]:
            out += [f"   - {self.root}/{p}", f"     - {how}: {T.fill(rng, rng.choice(T.PROSE))}"]
            if how == "edited":
                lang = "python" if p.endswith(".py") else "typescript"
                out += [f"     ```{lang}", *("     " + x for x in self.files[p].split("\n")[:6]),
                        "     ```"]
        out += ["", "4. Errors and fixes:"] + [f"   - {e}" for e in self.errors[-6:]]
        out += ["", "5. Problem Solving:", f"   {T.prose(rng, 3)}", "", "6. All user messages:"]
        out += [f'   - "{first(p)}"' for p in self.prompts]
        out += ["", "7. Pending Tasks:", f"   - {T.fill(rng, rng.choice(T.PROSE))}", "",
                "8. Current Work:", f"   {T.prose(rng, 2)}", "", "9. Optional Next Step:",
                f"   {T.fill(rng, rng.choice(T.SAY), f='the failing module')}"]
        return "\n".join(out)

    # ---- tools ---------------------------------------------------------------------------
    def read(self, p: str) -> Tool:
        text, a = self.files[p], f"{self.root}/{p}"
        lines = text.split("\n")
        self.touched.setdefault(p, "read")
        body = "\n".join(f"{n:>6}→{line}" for n, line in enumerate(lines, 1))
        return ("Read", {"file_path": a}, body, {"type": "text", "file": {
            "filePath": a, "content": text, "numLines": len(lines), "startLine": 1,
            "totalLines": len(lines)}}, False)

    def edit(self, p: str, old: str | None = None, new: str | None = None) -> Tool:
        text, a = self.files[p], f"{self.root}/{p}"
        if old is None or new is None:
            old, new = self._pick_edit(text, p)
        at = text.index(old)
        updated = text[:at] + new + text[at + len(old):]
        start = text[:at].count("\n") + 1
        before = text.split("\n")[max(0, start - 4):start - 1]
        after = updated.split("\n")[start - 1 + new.count("\n") + 1:][:3]
        patch = {"oldStart": max(1, start - 3), "oldLines": len(before) + old.count("\n") + 1
                 + len(after), "newStart": max(1, start - 3),
                 "newLines": len(before) + new.count("\n") + 1 + len(after),
                 "lines": [" " + x for x in before] + ["-" + x for x in old.split("\n")]
                 + ["+" + x for x in new.split("\n")] + [" " + x for x in after]}
        self.orig.setdefault(p, text)
        self.files[p] = updated
        self.touched[p] = "edited"
        return ("Edit", {"replace_all": False, "file_path": a, "old_string": old,
                         "new_string": new}, f"The file {a} has been updated successfully.",
                {"filePath": a, "oldString": old, "newString": new, "originalFile": text,
                 "structuredPatch": [patch], "userModified": False, "replaceAll": False}, False)

    def _pick_edit(self, text: str, p: str) -> tuple[str, str]:
        """An edit of ``p``: a statement inserted before a unique line, or — once the file
        has grown `EDIT_GROWTH_CAP` lines past its first version — the removal of the oldest
        statement an edit inserted, so that files in long sessions stop growing (real edits
        delete as well as add)."""
        lines, in_doc, ok = text.split("\n"), False, []
        grown = len(lines) - self.orig.get(p, text).count("\n") - 1
        if grown >= EDIT_GROWTH_CAP:
            undo = self._undo_insert(text, p)
            if undo is not None:
                return undo
        for i, line in enumerate(lines):
            if line.count('"""') % 2:
                in_doc = not in_doc
                continue
            prev = lines[i - 1].rstrip() if i else ""
            s = line.strip()
            py = p.endswith(".py")
            if (not in_doc and line.startswith("    " if py else "  ") and s
                    and text.count(line) == 1 and not re.match(r"^\w+\??: ", s)
                    and not prev.endswith(("(", "[", "{", ",", '"""', ":" if not py else "\\"))
                    and not s.startswith((")", "]", "}", "for ", "except", "else", "elif", "<",
                                          "{", "|", "'", '"', "#", "if", "return", "import"))
                    and (py or s.endswith(";"))):
                ok.append(i)
        line = lines[self.rng.choice(ok)]
        pad = line[:len(line) - len(line.lstrip())]
        stmt = T.fill(self.rng, self.rng.choice(
            ('logger.debug("{v}: %s {n}s", len({n}s))', "# keep in sync with web/src/api",
             "started = time.monotonic()", 'metrics.incr("{n}.{v}")') if p.endswith(".py")
            else ('console.debug("[{n}] {v}");', "// keep the order stable for the table view",
                  'performance.mark("{n}-{v}");')))
        self.inserted.setdefault(p, []).append((f"{pad}{stmt}\n{line}", line))
        return line, f"{pad}{stmt}\n{line}"

    def _undo_insert(self, text: str, p: str) -> tuple[str, str] | None:
        """Remove the oldest inserted statement that is still in ``text`` exactly once."""
        queue = self.inserted.get(p, [])
        while queue:
            pair, line = queue.pop(0)
            if text.count(pair) == 1:
                return pair, line
        return None

    def write(self, p: str, content: str) -> Tool:
        a = f"{self.root}/{p}"
        self.files[p] = content
        self.touched[p] = "created"
        return ("Write", {"file_path": a, "content": content},
                f"File created successfully at: {a}",
                {"type": "create", "filePath": a, "content": content, "structuredPatch": [],
                 "originalFile": None}, False)

    def bash(self, command: str, description: str, out: str, code: int = 0) -> Tool:
        inp = {"command": command, "description": description}
        if code:
            text = f"Exit code {code}\n{out}"
            return ("Bash", inp, text, f"Error: {text}", True)
        return ("Bash", inp, out, {"stdout": out, "stderr": "", "interrupted": False,
                                   "isImage": False, "noOutputExpected": False}, False)

    def grep(self, pattern: str, glob: str | None = None, content: bool = False) -> Tool:
        hits = [p for p in sorted(self.files) if pattern in self.files[p]
                and (glob is None or fnmatch.fnmatch(p.rsplit("/", 1)[-1], glob))]
        inp: dict[str, Any] = {"pattern": pattern, "path": self.root}
        if glob:
            inp["glob"] = glob
        if content:
            inp.update({"output_mode": "content", "-n": True})
            found = [f"{self.root}/{p}:{n}:{line}" for p in hits
                     for n, line in enumerate(self.files[p].split("\n"), 1) if pattern in line]
            text = "\n".join(found[:80]) or "No matches found"
            return ("Grep", inp, text, {"mode": "content", "numFiles": len(hits), "filenames": [],
                                        "content": text, "numLines": len(found[:80])}, False)
        paths = [f"{self.root}/{p}" for p in hits]
        text = f"Found {len(paths)} files\n" + "\n".join(paths) if paths else "No files found"
        return ("Grep", inp, text, {"mode": "files_with_matches", "filenames": paths,
                                    "numFiles": len(paths)}, False)

    def glob(self, pattern: str) -> Tool:
        paths = [f"{self.root}/{p}" for p in sorted(self.files) if fnmatch.fnmatch(p, pattern)]
        return ("Glob", {"pattern": pattern}, "\n".join(paths) or "No files found",
                {"filenames": paths, "durationMs": self.meta.randint(8, 400),
                 "numFiles": len(paths), "truncated": False}, False)

    def think(self, f: str) -> str | None:
        """Thinking about file ``f``, in about two responses out of three."""
        if self.rng.random() < 0.65:
            return T.fill(self.rng, self.rng.choice(T.THINK), f=f)
        return None

    def say(self, f: str) -> str | None:
        """A short remark before the tool calls, in about half the responses."""
        if self.rng.random() < 0.55:
            return T.fill(self.rng, self.rng.choice(T.SAY), f=f)
        return None

    def answer(self, extra: str = "") -> None:
        """The closing response of a turn: prose, touched files, sometimes a snippet."""
        rng = self.rng
        touched = list(self.touched)
        bullets = "\n".join(f"- `{p}`: {T.fill(rng, rng.choice(T.PROSE))}"
                            for p in touched[-rng.randint(2, 4):])
        code = [p for p in touched if p.endswith((".py", ".ts", ".tsx"))]
        if code and rng.random() < 0.35:
            lines = self.files[code[-1]].split("\n")
            at = rng.randrange(max(1, len(lines) - 6))
            lang = "python" if code[-1].endswith(".py") else "typescript"
            extra = "\n".join([f"In `{code[-1]}`:", f"```{lang}", *lines[at:at + 6], "```",
                               extra])
        self.respond(None, f"{T.prose(rng, rng.randint(2, 4))}\n\n{bullets}\n\n{extra}".strip())

    def finish(self, kind: str, model: str, branch: str, system_prompt: str) -> Session:
        facts = tuple(Fact(name=n, key=f["key"], statement=f["statement"], stated_in=f["stated"],
                           needed_in=tuple(f["needed"]), in_summary=f["in_summary"])
                      for n, f in self.facts.items())
        msgs = tuple(self.msgs)
        for f in facts:  # the planted text must be where the sidecar says, and nowhere earlier
            ok = (f.key in msgs[f.stated_in].text and bool(f.needed_in)
                  and all(f.key in msgs[i].text for i in f.needed_in)
                  and not any(f.key in m.text for m in msgs[:f.stated_in])
                  and all((f.key in m.text) == bool(f.in_summary)
                          for m in msgs[f.stated_in:] if m.kind == "summary"))
            if not ok:
                raise RuntimeError(f"ctxlab.datasets bug: planted fact {f.name!r} of "
                                   f"{kind} seed {self.seed} is not where it should be")
        slug = "-".join(self.meta.choice(w) for w in SLUG)
        return Session(kind=kind, seed=self.seed,  # type: ignore[arg-type]
                       session_id=str(uuid.UUID(int=self.meta.getrandbits(128), version=4)),
                       slug=slug, cwd=self.root, git_branch=branch, model=model,
                       overhead_tokens=self.overhead, system_prompt=system_prompt,
                       messages=msgs, facts=facts)

