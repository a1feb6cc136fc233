"""What a stage sees (`View`), what it returns (`Edit`), and the `Stage` base class.

A stage is a pure planner: given the request of one call — its visible parts in
position order with their token counts and layers, and the budget — it returns an
`Edit` (parts to hide, parts to insert, why) or None. It never changes the view
or the transcript; the engine (`ctxlab.history.apply_edit`) records the edit as an
event, so every stage application can be rewound.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd

from ctxlab.schema import Kind, Role
from ctxlab.tokens.base import Estimator

Side = Literal["before", "after"]


@dataclass(frozen=True, slots=True, kw_only=True)
class View:
    """The request of one call, as a stage sees it.

    Attributes:
        parts: the visible parts of the request in position order: the part columns of
            `ctxlab.schema.PART_COLUMNS` plus ``tokens`` (int64, this estimator's count,
            with flat image costs) and ``layer`` (see `ctxlab.layers`).
        estimator: the estimator that counted ``tokens``; stages estimate new text with it.
        window_tokens: the model's context window.
        limit_tokens: the input budget the trigger compares against (e.g. seed 000's
            available input tokens, or seed 003's ``autoCompactThreshold``).
        target_tokens: what the pipeline tries to get under.
        overhead_tokens: unrecorded input (system prompt, tool schemas) the log lacks.
        session: the session id.
        call: the call whose request this is (None: a request being assembled).
    """

    parts: pd.DataFrame
    estimator: Estimator
    window_tokens: int
    limit_tokens: int
    target_tokens: int
    overhead_tokens: int = 0
    session: str = ""
    call: int | None = None

    @property
    def messages(self) -> int:
        """Distinct messages in the request."""
        return int(self.parts["msg"].nunique())

    @property
    def content_tokens(self) -> int:
        """Tokens of the parts alone (no framing, no overhead)."""
        return int(self.parts["tokens"].sum())

    @property
    def total_tokens(self) -> int:
        """Everything the request costs: parts, message framing and the overhead."""
        return self.content_tokens + self.estimator.framing(self.messages) + self.overhead_tokens

    @property
    def usage_ratio(self) -> float:
        """``total_tokens / limit_tokens``."""
        return self.total_tokens / self.limit_tokens if self.limit_tokens > 0 else float("inf")

    def tokens_of(self, part_ids: Any) -> int:
        """Summed tokens of some parts of the view (by part id)."""
        ids = np.asarray(list(part_ids), dtype=np.int64)
        mask = self.parts["part"].isin(ids).to_numpy()
        return int(self.parts["tokens"].to_numpy()[mask].sum())

    def estimate(self, text: str) -> int:
        """Tokens of a text a stage is about to insert."""
        return int(self.estimator.count([text])[0])

    def message_frame(self) -> pd.DataFrame:
        """One row per message in order: ``msg``, ``role``, ``turn``, first/last ``pos``,
        ``parts``, ``tokens``, ``kinds`` (set of kinds), ``part_ids`` (tuple)."""
        p = self.parts
        g = p.groupby("msg", sort=False)
        out = pd.DataFrame({
            "role": g["role"].first(), "turn": g["turn"].first(), "first_pos": g["pos"].min(),
            "last_pos": g["pos"].max(), "parts": g.size(), "tokens": g["tokens"].sum(),
            "kinds": g["kind"].agg(lambda k: frozenset(k)),
            "part_ids": g["part"].agg(lambda ids: tuple(int(i) for i in ids)),
        })
        return out.sort_values("first_pos", kind="stable").reset_index()


@dataclass(frozen=True, slots=True, kw_only=True)
class NewPart:
    """A part an edit inserts: a placeholder, a summary, a truncation marker...

    Attributes:
        content: the text the model will see.
        kind: ``marker`` for placeholders and truncation notices, ``summary`` for summaries.
        role: the speaker.
        anchor: the part id it is placed next to (in the full session, hidden or not).
        side: ``"after"`` or ``"before"`` the anchor.
        join_message: True: part of the anchor's message (a placeholder in place of a
            tool result keeps the message well-formed); False: a message of its own.
        tool_name, tool_call_id, file_path: linkage, as for original parts.
        meta: what the stage wants recorded about it.
    """

    content: str
    kind: Kind
    role: Role
    anchor: int
    side: Side = "after"
    join_message: bool = False
    tool_name: str | None = None
    tool_call_id: str | None = None
    file_path: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Edit:
    """What a stage wants done to the request.

    Attributes:
        stage: the stage's name.
        reason: one line, for the ledger (``"pruned 14 tool results older than the 40k
            protected window"``).
        hide: ids of visible parts to hide.
        insert: parts to insert.
        details: numbers the stage reports (files deduplicated, messages removed...).
        summarizer_calls: summaries requested from a summarizer, with their token counts.
    """

    stage: str
    reason: str
    hide: tuple[int, ...] = ()
    insert: tuple[NewPart, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    summarizer_calls: tuple[Mapping[str, Any], ...] = ()

    @property
    def empty(self) -> bool:
        return not self.hide and not self.insert


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    """Base of every stage: a frozen dataclass of parameters with a `plan` method.

    Subclasses set the class attribute ``name`` (the registry key) and ``source``
    (which seed the behaviour comes from), declare their parameters as fields with the
    seed's defaults, and implement `plan`.
    """

    name: ClassVar[str] = ""
    source: ClassVar[str] = ""

    def plan(self, view: View) -> Edit | None:
        """The edit this stage makes to ``view``, or None when it does nothing."""
        raise NotImplementedError(f"{type(self).__name__} must implement plan(view)")

    def params(self) -> dict[str, Any]:
        """The stage's parameters, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{self.name}({args})"
