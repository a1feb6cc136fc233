"""Carry-forward compaction (seed 003, Obsidian Copilot ``L2ContextCompactor``).

When the attachments of a turn are carried into later requests (the L2 layer),
each one is reduced, deterministically and without an LLM, to a structure-and-
preview block: its headings (markdown ``#`` lines outside code fences, or lines
opening an XML-like tag such as ``<file path="...">``) and about ``section_chars``
characters of every section, wrapped in ``<prior_context>``. Attachments under
``min_chars`` characters, attachments an earlier event produced, and blocks that
would not save tokens are left as they are. With ``min_room`` the stage acts only when
the layers other than the history leave less than that many tokens of the limit:
``copilot-fixed`` previews L1 that way, as a last resort, before the history is given
what is left. In L1 only carried context is previewed: a ``<project_context>`` part, or
that block inside the system prompt (whose instructions before it stay as they are);
a system prompt without such a block is left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import (Edit, NewPart, Stage, View, is_na, labels, one_of, optional_text,
                                part_rows, strings)

_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")
_TAG_OPEN = re.compile(r"^\s*<([A-Za-z][\w.:-]*)(\s[^<>]*)?/?>")
_FENCE = re.compile(r"^\s*(```|~~~)")
MAX_HEADING_CHARS = 200


def _is_heading(line: str) -> bool:
    return bool(_MD_HEADING.match(line) or _TAG_OPEN.match(line))


def sections(text: str) -> list[tuple[str, str]]:
    """Split a text into ``(heading, body)`` sections; the preamble has heading ``""``.

    Example:
        >>> sections("intro\\n# A\\none\\n```\\n# not a heading\\n```\\n<note path='x'>\\nbody")
        [('', 'intro'), ('# A', 'one\\n```\\n# not a heading\\n```'), ("<note path='x'>", 'body')]
    """
    out: list[tuple[str, list[str]]] = [("", [])]
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _is_heading(line):
            out.append((line.strip(), []))
            continue
        out[-1][1].append(line)
    return [(h, "\n".join(body).strip("\n")) for h, body in out if h or "".join(body).strip()]


def structure_preview(text: str, section_chars: int, *, source: str | None = None) -> str:
    """The ``<prior_context>`` block of one attachment: headings and section previews.

    Example:
        >>> print(structure_preview("# Plan\\n" + "a" * 30 + "\\n## Risks\\nnone", 10))
        <prior_context chars="51">
        # Plan
        aaaaaaaaaa […20 more chars]
        ## Risks
        none
        </prior_context>
    """
    attrs = f' source="{source.replace(chr(34), "&quot;")}"' if source else ""
    lines = [f'<prior_context{attrs} chars="{len(text)}">']
    for heading, body in sections(text):
        if heading:
            lines.append(heading if len(heading) <= MAX_HEADING_CHARS
                         else heading[:MAX_HEADING_CHARS] + "…")
        if body:
            cut = body[:section_chars].rstrip()
            more = len(body) - len(cut)
            lines.append(cut + (f" […{more:,} more chars]" if more > 0 else ""))
    lines.append("</prior_context>")
    return "\n".join(lines)


_CONTEXT_BLOCK = re.compile(r"(?m)^[^\S\n]*<(project_context|context)[\s>]")


def _preview(text: str, role: str, section_chars: int, source: str | None) -> str | None:
    """The preview of one carried part. The system prompt's own text is the agent's
    instructions, not carried context: only a ``<project_context>`` (or ``<context>``)
    block opening a line inside it is previewed, up to its closing tag, the text around
    it kept as it is (Copilot's Projects mode puts the project's files there, seed 003);
    a system prompt without one: None."""
    if role != "system":
        return structure_preview(text, section_chars, source=source)
    m = _CONTEXT_BLOCK.search(text)
    if m is None:
        return None
    close = f"</{m.group(1)}>"
    end = text.find(close, m.end())
    end = len(text) if end < 0 else end + len(close)
    return (text[:m.start()] + structure_preview(text[m.start():end], section_chars,
                                                 source=source) + text[end:])


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class CarryForward(Stage):
    """Reduce carried-forward attachments (L2) to headings and section previews.

    Attributes:
        section_chars: characters kept of each section (seed 003: ~500).
        min_chars: attachments shorter than this are left alone (2,000).
        layers: which layers' context to preview: ``("carried",)`` is seed 003's
            L2ContextCompactor; adding ``"system"`` previews project context in L1 too (the
            improvement ``copilot-fixed`` uses when L1 alone leaves no room for history).
        min_room: act only when the layers other than the history (L4) leave less than
            this many tokens of ``view.limit_tokens`` (``copilot-fixed``: 4,096, the
            answer's reserve); None: always act.

    Example:
        >>> from ctxlab.stages import stage
        >>> stage("carry_forward")
        CarryForward(section_chars=500, min_chars=2000, layers=('carried',), min_room=None)
    """

    name = "carry_forward"
    source = "seed 003 (Obsidian Copilot L2ContextCompactor)"
    section_chars: int = 500
    min_chars: int = 2_000
    layers: tuple[str, ...] = ("carried",)
    min_room: int | None = None

    def __post_init__(self) -> None:
        for name, value in (("section_chars", self.section_chars), ("min_chars", self.min_chars)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"carry_forward: {name} must be an int >= 1, got {value!r}")
        if not self.layers or not set(self.layers) <= {"system", "carried", "current"}:
            raise ConfigError(f"carry_forward: layers must be some of system, carried, current; "
                              f"got {self.layers!r}")
        if self.min_room is not None and (isinstance(self.min_room, bool) or not isinstance(
                self.min_room, int) or self.min_room < 0):
            raise ConfigError(f"carry_forward: min_room must be None or an int >= 0, got "
                              f"{self.min_room!r}")

    def plan(self, view: View) -> Edit | None:
        p = view
        if self.min_room is not None:
            from ctxlab.stages.trim_history import history_turn_tokens

            rest = view.total_tokens - int(history_turn_tokens(view).sum())
            if view.limit_tokens - rest >= self.min_room:
                return Edit(stage=self.name, reason=f"the layers but the history leave "
                            f"{view.limit_tokens - rest:,} tokens of the limit (at least "
                            f"{self.min_room:,})")
        layer, kind = labels(p, "layer"), labels(p, "kind")
        context = (kind == "attachment") | ((layer == "system") & (kind == "text"))
        rows = np.flatnonzero(one_of(layer, self.layers) & context)
        if not len(rows):
            return None
        text = ["" if t is None else t for t in strings(p, "content")[rows].tolist()]
        long_enough = np.fromiter((len(t) >= self.min_chars and not t.startswith(
            "<prior_context") for t in text), dtype=bool, count=len(text))
        carried = rows[long_enough & is_na(p, "event")[rows]]
        if not len(carried):
            return Edit(stage=self.name, reason=f"every carried attachment is under "
                        f"{self.min_chars:,} chars or already compacted")
        hide: list[int] = []
        inserts: list[NewPart] = []
        saved = 0
        rows = part_rows(p, carried, ("part", "kind", "role", "content", "file_path",
                                      "tool_name", "tokens"))
        blocks = [_preview(str(r.content), r.role, self.section_chars,
                           optional_text(r.file_path)) for r in rows]
        for r, block, tokens_after in zip(rows, blocks, view.estimate_all(
                [b or "" for b in blocks])):
            path = optional_text(r.file_path)
            if block is None:
                continue
            gain = int(r.tokens) - tokens_after
            if gain <= 0:
                continue
            saved += gain
            hide.append(int(r.part))
            inserts.append(NewPart(content=block, kind=r.kind, role=r.role,
                                   anchor=int(r.part), join_message=True, file_path=path,
                                   tool_name=r.tool_name if isinstance(r.tool_name, str)
                                   else None,
                                   meta={"compacted_from_chars": len(str(r.content))}))
        if not hide:
            return Edit(stage=self.name, reason=f"no carried attachment would shrink as a "
                        f"structure preview ({len(carried)} checked)")
        return Edit(stage=self.name, hide=tuple(hide), insert=tuple(inserts),
                    reason=f"compacted {len(hide)} carried attachment(s) to headings and "
                           f"{self.section_chars}-char section previews",
                    details={"compacted": len(hide), "tokens_saved": saved})


__all__ = ["CarryForward", "sections", "structure_preview"]
