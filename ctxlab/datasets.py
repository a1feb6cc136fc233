"""Seeded synthetic agent sessions, written in real log formats, and the committed set.

`generate_session` scripts a realistic session (a coding agent, or a "projects mode" chat
whose first message carries a ~500k-token project context) as neutral `Message` objects;
`write_claude_code` and `write_openai` render it exactly as Claude Code 2.x session JSONL
or OpenAI chat-completions JSONL, so it loads through ctxlab's own loaders. Planted facts
(stated early, needed later) are recorded so that retention can be measured.

Everything is a pure function of the seed: no clock, no random ids; `build_default`
rewrites ``datasets/`` byte for byte.

Example:
    >>> from ctxlab import datasets
    >>> s = datasets.generate_session("coding", seed=1, calls=12, big_outputs=0)
    >>> s.n_calls >= 12, s.facts[0].name
    (True, 'api_key_env')
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Literal, Mapping, NamedTuple, Sequence

from ctxlab.errors import ConfigError, CtxlabError

__all__ = ["DEFAULT_SET", "Block", "Fact", "Message", "Session", "Usage", "build_default",
           "call_usage", "generate_session", "names", "path", "tokens", "write_claude_code",
           "write_openai"]

CHARS_PER_TOKEN = 3.6
CACHE_TTL_MS = 300_000
DATASETS_DIR = Path(__file__).resolve().parent.parent / "datasets"
FILES = {"coding_session": "coding_session.jsonl", "coding_session_b": "coding_session_b.jsonl",
         "projects_mode": "projects_mode.jsonl", "openai_sessions": "openai_sessions.jsonl"}
SIDECAR = "facts.json"

BlockType = Literal["text", "thinking", "tool_use", "tool_result"]
MessageKind = Literal["system", "prompt", "response", "results", "boundary", "summary"]
_ROLE = {"system": "system", "prompt": "user", "response": "assistant", "results": "user",
         "boundary": "system", "summary": "user"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """One content block, in the neutral (Anthropic-like) shape.

    Attributes:
        type: text, thinking, tool_use or tool_result.
        text: the text, thinking, or tool result content the model sees.
        tool: tool name (tool_use and tool_result).
        tool_id: links a tool_use to its tool_result.
        input: tool arguments (tool_use).
        is_error: the tool failed (tool_result).
        detail: what Claude Code records beside the content: the tool's structured output
            (``toolUseResult``) of a tool_result, the signature of a thinking block.
    """

    type: BlockType
    text: str = ""
    tool: str | None = None
    tool_id: str | None = None
    input: Mapping[str, Any] | None = None
    is_error: bool = False
    detail: Any = None

    @property
    def chars(self) -> int:
        """Characters the model sees (a tool call: its name plus JSON arguments)."""
        if self.type == "tool_use":
            return len(self.tool or "") + len(_dumps(self.input))
        return len(self.text)


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message. ``response`` is one LLM call; ``boundary`` is a recorded compaction.

    Attributes:
        kind: system, prompt (a person wrote it), response, results (tool results),
            boundary (auto compaction) or summary (the compaction summary).
        blocks: the content.
        ts_ms: Unix time in milliseconds.
        turn: number of prompts so far (1 at the first prompt).
        pre_tokens: context size before the compaction (boundary only).
    """

    kind: MessageKind
    blocks: tuple[Block, ...] = ()
    ts_ms: int
    turn: int
    pre_tokens: int | None = None

    @property
    def role(self) -> str:
        return _ROLE[self.kind]

    @property
    def text(self) -> str:
        """All block texts joined (tool calls as name + JSON arguments)."""
        return "\n".join(b.text if b.type != "tool_use" else f"{b.tool}{_dumps(b.input)}"
                         for b in self.blocks)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    """A planted fact: stated once, needed later.

    Attributes:
        name: short identifier, e.g. ``"dev_port"``.
        key: the exact text that must still be in context when it is needed.
        statement: the sentence that states it.
        stated_in: index (in `Session.messages`) of the message that states it.
        needed_in: indices of the responses whose output uses it.
        in_summary: whether the recorded compaction summary restates it (None: no
            compaction after it was stated).
    """

    name: str
    key: str
    statement: str
    stated_in: int
    needed_in: tuple[int, ...]
    in_summary: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """A generated session in neutral form plus what the log formats need to render it."""

    kind: Literal["coding", "projects"]
    seed: int
    session_id: str
    slug: str
    cwd: str
    git_branch: str
    model: str
    overhead_tokens: int
    system_prompt: str
    messages: tuple[Message, ...]
    facts: tuple[Fact, ...]

    @property
    def n_calls(self) -> int:
        """Number of LLM calls (responses)."""
        return sum(m.kind == "response" for m in self.messages)

    @property
    def responses(self) -> list[int]:
        """Message indices of the responses, in call order."""
        return [i for i, m in enumerate(self.messages) if m.kind == "response"]


class Usage(NamedTuple):
    """Synthetic usage of one call: total = input_tokens + cache_read + cache_write."""

    total: int
    input_tokens: int
    cache_read: int
    cache_write: int
    output_tokens: int


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tokens(chars: int) -> int:
    """The synthetic tokenizer: ``ceil(chars / 3.6)``."""
    return math.ceil(chars / CHARS_PER_TOKEN)


def generate_session(kind: Literal["coding", "projects"], seed: int, *, calls: int = 180,
                     compact_at: int | None = 167_000, big_outputs: int = 1,
                     context_tokens: int = 500_000) -> Session:
    """Script one realistic session from a seed.

    Args:
        kind: ``"coding"`` (a coding agent: reads, edits, tests, builds, parallel tool
            calls) or ``"projects"`` (a chat whose first message carries the project).
        seed: everything follows from it.
        calls: coding: keep adding user turns until at least this many LLM calls exist
            and every planted fact has been asked for.
        compact_at: coding: record an auto compaction whenever the synthetic prompt total
            reaches this many tokens (Claude Code compacts near 167k; at least
            `MIN_COMPACT_AT`); None: never.
        big_outputs: coding: how many tool outputs run to thousands of lines (a verbose
            frontend build or a full ``pytest -v`` run; other outputs stay in the hundreds).
        context_tokens: projects: size of the project context, in synthetic tokens.

    Knobs of the other kind are ignored.

    Raises:
        ConfigError: unknown kind or a size out of range.
    """
    from ctxlab._datagen import scenarios as _scenarios
    if kind == "coding":
        if calls < 8 or big_outputs < 0:
            raise ConfigError(f"calls must be >= 8 and big_outputs >= 0 (got {calls}, "
                              f"{big_outputs})")
        if compact_at is not None and compact_at < MIN_COMPACT_AT:
            raise ConfigError(f"compact_at must be at least {MIN_COMPACT_AT:,} tokens (got "
                              f"{compact_at:,}): the system prompt and tools alone take up to "
                              f"23,000, so smaller compacts every few messages")
        return _scenarios.coding(seed, calls=calls, compact_at=compact_at,
                                 big_outputs=big_outputs)
    if kind == "projects":
        if context_tokens < 1000:
            raise ConfigError(f"context_tokens must be >= 1000 (got {context_tokens})")
        return _scenarios.projects(seed, context_tokens=context_tokens)
    raise ConfigError(f"unknown session kind {kind!r}; kinds: 'coding', 'projects'")


MIN_COMPACT_AT = 40_000
"""The smallest ``compact_at`` of a coding session (its fixed overhead is 14,000–23,000)."""


def call_usage(session: Session, *, fmt: Literal["claude_code", "openai"] = "claude_code",
               ) -> list[Usage]:
    """The usage each writer reports: overhead + tokens of the input so far.

    The input of a call is every message since the last compaction as the format records
    it (`Block.chars`; the OpenAI rendering adds its system message and drops thinking
    from the input). Output tokens are the response's tokens plus one. The cache
    reads the previous call's prompt when it came less than 5 minutes earlier, else only
    the cached system prefix; the rest is written to the cache.
    """
    out: list[Usage] = []
    base = len(session.system_prompt) if fmt == "openai" else 0
    ctx, prev, prev_ts = base, 0, None
    prefix = session.overhead_tokens * 6 // 10
    for m in session.messages:
        if m.kind == "boundary":
            ctx, prev, prev_ts = base, 0, None
            continue
        if m.kind == "response":
            total = session.overhead_tokens + tokens(ctx)
            warm = prev_ts is not None and m.ts_ms - prev_ts < CACHE_TTL_MS
            read = prev if warm else min(prefix, total)
            fresh = min(1 if warm else 3, total - read)
            out.append(Usage(total, fresh, read, total - read - fresh,
                             tokens(sum(b.chars for b in m.blocks)) + 1))
            prev, prev_ts = total, m.ts_ms
        ctx += sum(b.chars for b in m.blocks if not (fmt == "openai" and b.type == "thinking"))
    return out


def iso(ms: int) -> str:
    """``2026-01-12T09:00:00.000Z`` from Unix milliseconds."""
    dt = datetime.fromtimestamp(ms // 1000, tz=timezone.utc)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def write_claude_code(session: Session, path: str | Path) -> Path:
    """Write a session as a Claude Code 2.x session file (``<sessionId>.jsonl`` lines)."""
    from ctxlab._datagen.render import claude_code_records
    path = Path(path)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for _, record in claude_code_records(session):
            fh.write(_dumps(record) + "\n")
    return path


def write_openai(sessions: Sequence[Session], path: str | Path) -> Path:
    """Write sessions as OpenAI chat-completions JSONL: one conversation object per line.

    A recorded compaction cannot be expressed in a message list, so the context after it
    becomes a conversation of its own (id suffixed ``/2``) that opens with the summary.
    """
    path = Path(path)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for s in sessions:
            for conv, _ in openai_conversations(s):
                fh.write(_dumps(conv) + "\n")
    return path


def openai_conversations(session: Session) -> Iterator[tuple[dict[str, Any], list[int | None]]]:
    """Conversation objects of a session, each with the session message index of every
    entry of its ``messages`` (None for the system prompt)."""
    from ctxlab._datagen.text import TOOL_SCHEMAS
    usage = iter(call_usage(session, fmt="openai"))
    part = 1

    def new() -> tuple[dict[str, Any], list[int | None]]:
        cid = session.session_id if part == 1 else f"{session.session_id}/{part}"
        return ({"id": cid, "model": "gpt-4.1-2025-04-14",
                 "metadata": {"generator": "ctxlab.datasets", "kind": session.kind,
                              "seed": session.seed},
                 "tools": [{"type": "function", "function": t} for t in TOOL_SCHEMAS],
                 "messages": [{"role": "system", "content": session.system_prompt}]}, [None])

    conv, where = new()
    for i, m in enumerate(session.messages):
        msgs = conv["messages"]
        if m.kind == "boundary":
            yield conv, where
            part += 1
            conv, where = new()
        elif m.kind == "system":
            msgs[0]["content"] += "\n\n" + m.text
            where[0] = i
        elif m.kind in ("prompt", "summary"):
            msgs.append({"role": "user", "content": "\n\n".join(b.text for b in m.blocks)})
            where.append(i)
        elif m.kind == "results":
            for b in m.blocks:
                msgs.append({"role": "tool", "tool_call_id": _call_id(b.tool_id),
                             "content": b.text})
                where.append(i)
        else:
            u = next(usage)
            text = "\n\n".join(b.text for b in m.blocks if b.type == "text")
            thinking = sum(b.chars for b in m.blocks if b.type == "thinking")
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            calls = [{"id": _call_id(b.tool_id), "type": "function",
                      "function": {"name": b.tool, "arguments": _dumps(b.input)}}
                     for b in m.blocks if b.type == "tool_use"]
            if calls:
                msg["tool_calls"] = calls
            cached = u.cache_read // 128 * 128 if u.cache_read >= 1024 else 0
            msg["usage"] = {"prompt_tokens": u.total, "completion_tokens": u.output_tokens,
                            "total_tokens": u.total + u.output_tokens,
                            "prompt_tokens_details": {"cached_tokens": cached},
                            "completion_tokens_details": {"reasoning_tokens": tokens(thinking)}}
            msgs.append(msg)
            where.append(i)
    yield conv, where


def _call_id(tool_id: str | None) -> str:
    return "call_" + (tool_id or "")[-22:]


# ---- the committed set ----------------------------------------------------------------
DEFAULT_SET: dict[str, tuple[dict[str, Any], ...]] = {
    "coding_session": ({"kind": "coding", "seed": 5, "calls": 150, "compact_at": 167_000,
                        "big_outputs": 1},),
    "coding_session_b": ({"kind": "coding", "seed": 8, "calls": 60, "compact_at": None,
                          "big_outputs": 1},),
    "projects_mode": ({"kind": "projects", "seed": 3, "context_tokens": 500_000},),
    "openai_sessions": ({"kind": "coding", "seed": 21, "calls": 20, "big_outputs": 0},
                        {"kind": "coding", "seed": 22, "calls": 40, "compact_at": 45_000,
                         "big_outputs": 0},
                        {"kind": "projects", "seed": 23, "context_tokens": 20_000}),
}
"""The arguments of `generate_session` behind each committed file."""


def build_default(out_dir: str | Path | None = None) -> list[Path]:
    """(Re)write the committed data set: four transcripts and ``facts.json``.

    Args:
        out_dir: target folder (default: ``datasets/`` of the repository).

    Returns:
        The files written. Two runs give byte-identical files.
    """
    from ctxlab._datagen.render import facts_sidecar
    out = Path(out_dir) if out_dir is not None else DATASETS_DIR
    out.mkdir(parents=True, exist_ok=True)
    written, sidecar = [], {}
    for name, specs in DEFAULT_SET.items():
        sessions = [generate_session(**spec) for spec in specs]
        target = out / FILES[name]
        if name == "openai_sessions":
            write_openai(sessions, target)
        else:
            write_claude_code(sessions[0], target)
        sidecar[FILES[name]] = facts_sidecar(sessions, "openai" if name == "openai_sessions"
                                             else "claude_code")
        written.append(target)
    facts = out / SIDECAR
    facts.write_text(json.dumps({"chars_per_token": CHARS_PER_TOKEN, "files": sidecar},
                                ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return written + [facts]


def names() -> list[str]:
    """Names of the committed transcripts (each loads with ``ctxlab.load(path(name))``)."""
    return sorted(FILES)


def path(name: str) -> Path:
    """The committed file for a name (``"coding_session"``, ``"facts"``...).

    Raises:
        ConfigError: unknown name (the message lists the known ones).
        CtxlabError: the ``datasets/`` folder is absent (e.g. an installed wheel).
    """
    stem = name.rsplit(".", 1)[0] if name.endswith((".jsonl", ".json")) else name
    file = SIDECAR if stem == "facts" else FILES.get(stem)
    if file is None:
        raise ConfigError(f"unknown dataset {name!r}; known: {', '.join(names() + ['facts'])}")
    p = DATASETS_DIR / file
    if not p.exists():
        raise CtxlabError(f"{p} is absent: the data sets live in the repository's datasets/ "
                          f"folder, next to the ctxlab package. Rebuild them with "
                          f"`python -m ctxlab.datasets build DIR`")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ctxlab.datasets build [OUT]``: rebuild the committed set."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "build" or len(args) > 2:
        print("usage: python -m ctxlab.datasets build [OUT_DIR]", file=sys.stderr)
        return 2
    for p in build_default(args[1] if len(args) == 2 else None):
        print(f"{p}  {p.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":  # run through the imported module, not a second copy of it
    from ctxlab.datasets import main as _main
    raise SystemExit(_main())
