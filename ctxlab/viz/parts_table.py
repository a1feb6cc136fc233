"""The request of one replayed call as a table of parts, and its HTML.

`request_table_df` says, per part of a call's request, what the call's compaction did
to it and why (the stage and reason of the event, from the replay's ledger), with a
short preview of its content; `parts_html` renders it for `ReplayExplorer`
(`ctxlab.viz.widgets`): hidden parts struck through beside their reason, inserted
parts highlighted, every cell escaped.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.viz.style import preview_texts

if TYPE_CHECKING:
    from ctxlab.replay import Replay

Side = Literal["before", "after"]
PREVIEW_CHARS = 80
TABLE_COLUMNS = ("part", "pos", "role", "kind", "layer", "tokens", "status", "stage", "reason",
                 "preview")
INSERTED_BACKGROUND = "#FFF3C4"
HIDDEN_COLOUR = "#777777"
PARTS_CSS = (".ctxlab-parts td,.ctxlab-parts th{padding:1px 6px;text-align:left;"
             "vertical-align:top}")


def request_table_df(replay: Replay, call: int, *, side: Side = "before",
                     session: str | None = None) -> pd.DataFrame:
    """The parts of one call's request, with what its compaction did to each and why.

    Args:
        replay: the replay (possibly rewound: a call it has not replayed shows its
            request as the replay leaves it, every part ``kept``).
        call: the call.
        side: ``before`` the call's compaction (hidden parts carry the status and stage
            of `ctxlab.viz.context_parts_df`) or ``after`` it (inserted parts marked).
        session: the session (default: the first).

    Returns:
        In position order: ``part``, ``pos``, ``role``, ``kind``, ``layer``, ``tokens``,
        ``status``, ``stage`` and ``reason`` (of the event that hid or inserted the part;
        NA when kept) and ``preview`` (the content, whitespace collapsed, cut at 80 chars).

    Example:
        >>> import ctxlab, ctxlab.datasets
        >>> r = ctxlab.replay(ctxlab.load(ctxlab.datasets.path("coding_session")), "neurolink")
        >>> t = request_table_df(r, 62)
        >>> t.loc[t["status"] == "pruned", ["stage", "reason"]].iloc[0].tolist()
        ['prune', 'cleared 41 tool results older than the newest 40,000 tokens of tool output']
    """
    if side not in ("before", "after"):
        raise ConfigError(f"side must be 'before' or 'after', not {side!r}")
    s = session if session is not None else replay.base.sessions[0]
    c = replay.calls
    if ((c["session"] == s) & (c["call"] == call)).any():
        from ctxlab.viz.plots_context import context_parts_df
        parts = context_parts_df(replay, call, side=side, session=s)
        led = replay.ledger
        led = led[(led["session"] == s) & (led["call"] == call)
                  & (led["action"] == ("hidden" if side == "before" else "inserted"))]
        led = led.drop_duplicates("part", keep="last")
        reason = parts["part"].map(pd.Series(led["reason"].astype(object).to_numpy(),
                                             index=led["part"].to_numpy()))
    else:
        parts = _pending_parts(replay, s, call)
        reason = pd.Series(pd.NA, index=parts.index, dtype=object)
    frame = replay.transcript.frame
    content = frame.loc[frame["session"] == s].set_index("part")["content"]
    out = parts[["part", "pos", "role", "kind", "layer", "tokens", "status", "stage"]].copy()
    out["reason"] = reason.astype("string")
    out["preview"] = preview_texts(parts["part"].map(content).astype("string").fillna(""),
                                   PREVIEW_CHARS)
    return out[list(TABLE_COLUMNS)].reset_index(drop=True)


def _pending_parts(replay: Replay, session: str, call: int) -> pd.DataFrame:
    """The request of a call the replay has not replayed (after a rewind), all kept."""
    from ctxlab.engine import request_parts
    from ctxlab.layers import assign_layers

    base = replay.base.calls
    row = base[(base["session"] == session) & (base["call"] == call)]
    if row.empty:
        raise ConfigError(f"call {call} is not a call of session {session!r}")
    end = float(row["input_end_pos"].iloc[0])
    parts = request_parts(replay.transcript, session, end).reset_index(drop=True)
    est = replay.estimator(session)
    parts["tokens"] = (est.count_parts(parts) if len(parts) else np.zeros(0, np.int64))
    parts["tokens"] = parts["tokens"].astype("int64")
    parts["layer"] = assign_layers(parts)
    parts["status"] = "kept"
    parts["stage"] = pd.Series(pd.NA, index=parts.index, dtype="string")
    return parts


def parts_html(table: pd.DataFrame, *, caption: str = "", max_height: int | None = 520) -> str:
    """`request_table_df` as HTML: hidden parts struck through with the stage and reason
    of their event, inserted parts highlighted; every cell escaped."""
    rows = []
    for p in table.itertuples(index=False):
        status = str(p.status)
        hidden = status not in ("kept", "inserted")
        preview = html.escape(str(p.preview))
        why = "" if pd.isna(p.stage) else html.escape(
            f"{p.stage}: {'' if pd.isna(p.reason) else p.reason}")
        style = (f' style="background:{INSERTED_BACKGROUND}"' if status == "inserted" else
                 f' style="color:{HIDDEN_COLOUR}"' if hidden else "")
        cells = (str(p.part), html.escape(str(p.role)), html.escape(str(p.kind)),
                 html.escape(str(p.layer)), f"{int(p.tokens):,}", html.escape(status),
                 f"<s>{preview}</s>" if hidden else preview, why)
        rows.append(f'<tr data-status="{html.escape(status)}"{style}>'
                    + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("part", "role", "kind", "layer", "tokens",
                                              "status", "content", "hidden or inserted by"))
    box = f' style="max-height:{max_height}px;overflow-y:auto"' if max_height else ""
    return (f"<style>{PARTS_CSS}</style><div{box}><table class=\"ctxlab-parts\" "
            f"style=\"border-collapse:collapse;font-size:12px\"><caption style=\"text-align:"
            f"left\">{html.escape(caption)}</caption><thead><tr>{head}</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>")


__all__ = ["PREVIEW_CHARS", "TABLE_COLUMNS", "Side", "parts_html", "request_table_df"]
