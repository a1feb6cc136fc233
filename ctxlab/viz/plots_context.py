"""A map of one request: every part a block sized by its tokens, by layer and by status.

`context_parts_df` says, for the request of one replayed call, what became of each part
(from the ledger: the stage of the event that hid or inserted it); `plot_context` draws
it — one row per layer, parts in position order, widths in tokens. The layer is the
colour; the status is the fill: solid when kept, pale and hatched when hidden (one hatch
per status), outlined in black when inserted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.layers import LAYER_CODES, LAYERS
from ctxlab.viz.plots_replay import replay_session
from ctxlab.viz.style import LAYER_COLOURS, NEUTRAL, literal_text, new_figure, thousands

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ctxlab.replay import Replay

Status = Literal["kept", "pruned", "deduped", "summarised", "dropped", "hidden", "inserted"]
STATUSES: tuple[str, ...] = ("kept", "pruned", "deduped", "summarised", "dropped", "hidden",
                             "inserted")
STAGE_STATUS = {"prune": "pruned", "clear_tool_results": "pruned",
                "truncate_tool_output": "pruned", "file_budget": "pruned",
                "dedup": "deduped",
                "summarize": "summarised", "carry_forward": "summarised",
                "reattach": "summarised",
                "truncate": "dropped", "trim_history": "dropped", "keep_last": "dropped",
                "monologue": "dropped", "repair": "dropped"}
"""What hiding a part means, per stage: replaced by a placeholder or a cut (pruned), by a
pointer to a later copy (deduped), folded into a summary or preview (summarised), or
removed (dropped). Stages not listed (plugins) give ``hidden``."""
OVERHEAD_HATCH = "++"
"""The fill of the session's unrecorded overhead (L1, fitted: no part holds it)."""
HATCHES = {"pruned": "////", "deduped": "xxxx", "summarised": "--", "dropped": "||",
           "hidden": "\\\\\\\\"}
"""Line hatches only: a dot or circle hatch is drawn as hundreds of SVG shapes (``"...."``
added 256 kB to a figure, ``"oo"`` 139 kB; a line hatch under 1.3 kB)."""


def context_parts_df(replay: Replay, call: int, *, side: Literal["before", "after"] = "before",
                     session: str | None = None) -> pd.DataFrame:
    """The parts of one call's request, with what the call's compaction did to each.

    Args:
        replay: the replay.
        call: the call.
        side: the request ``before`` the call's compaction (statuses kept, or the status
            of the stage that hid the part: `STAGE_STATUS`) or ``after`` it (kept or
            inserted).
        session: the session (default: the first).

    Returns:
        In position order: ``part``, ``pos``, ``role``, ``kind``, ``layer``, ``tokens``,
        ``status``, ``stage`` (that hid or inserted it; NA when kept) and ``offset_tokens``
        (tokens of the parts before it in its layer).

    Example:
        >>> import ctxlab
        >>> r = ctxlab.replay(ctxlab.load("datasets/coding_session.jsonl"), "neurolink")
        >>> parts = context_parts_df(r, 62)
        >>> parts.groupby("status")["tokens"].sum().to_dict()
        {'kept': 66586, 'pruned': 41795}
    """
    if side not in ("before", "after"):
        raise ConfigError(f"side must be 'before' or 'after', not {side!r}")
    s, _ = replay_session(replay, session)
    before, after = replay.at(call, session=s)
    parts = before if side == "before" else after
    led = replay.ledger[(replay.ledger["session"] == s) & (replay.ledger["call"] == call)]
    action = "hidden" if side == "before" else "inserted"
    mine = led[led["action"] == action].drop_duplicates("part", keep="last")
    stage = pd.Series(mine["stage"].astype(str).to_numpy(), index=mine["part"].to_numpy())
    out = parts[["part", "pos", "role", "kind", "layer", "tokens"]].astype(
        {"role": object, "kind": object, "layer": object}).reset_index(drop=True)
    out["stage"] = out["part"].map(stage).astype("string")
    touched = out["stage"].notna().to_numpy(dtype=bool)
    what = (out["stage"].astype(object).map(STAGE_STATUS).fillna("hidden").to_numpy(dtype=object)
            if side == "before" else np.full(len(out), "inserted", dtype=object))
    out["status"] = np.where(touched, what, "kept").astype(object)
    out["tokens"] = out["tokens"].astype("int64")
    out["offset_tokens"] = out.groupby("layer", sort=False)["tokens"].cumsum() - out["tokens"]
    return out[["part", "pos", "role", "kind", "layer", "tokens", "status", "stage",
                "offset_tokens"]]


@literal_text
def plot_context(replay: Replay, call: int, *, side: Literal["before", "after"] = "before",
                 session: str | None = None, ax: Axes | None = None) -> Figure:
    """A map of one call's request: every part a block, sized by tokens, by layer and status.

    Args:
        replay: the replay.
        call: the call.
        side: ``before`` its compaction (each hidden part shows how: pruned, deduped,
            summarised, dropped) or ``after`` (what was sent; inserted parts outlined).
        session: the session (default: the first).
        ax: draw into this axes instead of a new figure.

    One row per layer (L1 system at the top), parts left to right in position order,
    block width in tokens. Each block's ``gid`` is ``part-<id>-<status>``; each row
    ends with its tokens per status. The session's unrecorded overhead (system prompt and
    tool definitions the log does not hold, fitted from its reported usage) opens the L1
    row as a block of its own (``gid`` ``overhead``); message framing belongs to no part
    and layer, so it is not drawn, and the title gives it with the request's total.

    Example:
        >>> import ctxlab
        >>> r = ctxlab.replay(ctxlab.load("datasets/coding_session.jsonl"), "neurolink")
        >>> ax = plot_context(r, 62).axes[0]
        >>> sorted({p.get_gid().rsplit("-", 1)[1] for p in ax.patches})
        ['kept', 'pruned']
    """
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch, Rectangle

    parts = context_parts_df(replay, call, side=side, session=session)
    s, calls = replay_session(replay, session)
    overhead = int(replay.settings.overhead_tokens.get(s, 0))
    total = int(calls.loc[calls["call"] == call,
                          "tokens_before" if side == "before" else "tokens_after"].iloc[0])
    fig, ax = new_figure(ax, (10, 3.8))
    row = {layer: len(LAYERS) - 1 - i for i, layer in enumerate(LAYERS)}
    if overhead:
        colour = LAYER_COLOURS["system"]
        ax.add_patch(Rectangle((0, row["system"] - 0.38), overhead / 1000, 0.76,
                               facecolor=to_rgba(colour, 0.35), edgecolor=colour, linewidth=0.4,
                               hatch=OVERHEAD_HATCH, gid="overhead"))
        parts = parts.assign(offset_tokens=parts["offset_tokens"]
                             + np.where(parts["layer"] == "system", overhead, 0))
    for p in parts.itertuples(index=False):
        colour = LAYER_COLOURS.get(p.layer, NEUTRAL[0])
        hatch = HATCHES.get(p.status)
        if p.status == "kept":
            face, edge, width = to_rgba(colour, 0.9), "white", 0.4
        elif p.status == "inserted":
            face, edge, width = to_rgba(colour, 0.9), "black", 1.2
        else:
            face, edge, width = to_rgba(colour, 0.18), colour, 0.4
        ax.add_patch(Rectangle((p.offset_tokens / 1000, row[p.layer] - 0.38), p.tokens / 1000,
                               0.76, facecolor=face, edgecolor=edge, linewidth=width,
                               hatch=hatch, gid=f"part-{p.part}-{p.status}"))
    totals = parts.groupby(["layer", "status"], sort=False)["tokens"].sum()
    widths = parts.groupby("layer")["tokens"].sum().to_dict()
    widths["system"] = widths.get("system", 0) + overhead
    widest = float(max(widths.values()))
    ends = []       # per row: its width and its totals' text, which must fit right of it
    for layer in LAYERS:
        if layer not in totals.index.get_level_values(0) and not (layer == "system" and overhead):
            continue
        t = totals[layer] if layer in totals.index.get_level_values(0) else pd.Series(dtype=int)
        text = ", ".join([f"{thousands(overhead)} unrecorded"] if layer == "system" and overhead
                         else [])
        text = ", ".join([x for x in (text, ", ".join(
            f"{thousands(t[st])} {st}" for st in STATUSES if st in t.index)) if x])
        ends.append((widths[layer], len(text)))
        ax.annotate(text, (widths[layer] / 1000, row[layer]), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks([row[k] for k in LAYERS],
                  [f"{LAYER_CODES[k]} {k}" if LAYER_CODES[k] != k else k for k in LAYERS])
    ax.set_ylim(-0.6, len(LAYERS) - 0.4)
    # room for each row's totals: 30% past the widest row, or more when a long text (four
    # statuses) on a wide row would run past the axes into the legend. The text's share of
    # the axes is estimated: 4 pt a character (7 pt type), of an axes ~75% of the figure wide
    axes_pt = 0.75 * fig.get_figwidth() * 72
    need = [w / max(0.05, 1 - (4 + 4.0 * n) / axes_pt) for w, n in ends]
    ax.set_xlim(0, max(widest * 1.3, *need, 1.0) / 1000)
    ax.set_xlabel("tokens (thousands), parts in position order")
    shown = [st for st in STATUSES if st in set(parts["status"])]
    handles = [_legend_patch(Patch, st) for st in shown]
    if overhead:
        handles.append(Patch(facecolor="white", edgecolor=NEUTRAL[1], hatch=OVERHEAD_HATCH,
                             label="unrecorded (fitted)"))
    # beside the rows: inside, with four or more statuses it rose over the history row's
    # end, where the row's totals are written
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1),
              borderaxespad=0, title="part status", title_fontsize=7)
    what = "before compaction" if side == "before" else "as sent"
    drawn = int(parts["tokens"].sum())
    extra = [f"{overhead:,} unrecorded"] if overhead else []
    if total - drawn - overhead:
        extra.append(f"{total - drawn - overhead:,} message framing")
    ax.set_title(f"Request of call {call} {what}: {total:,} tokens — {len(parts):,} parts "
                 f"{drawn:,}" + "".join(f" + {x}" for x in extra), fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return fig


def _legend_patch(patch: type, status: str) -> object:
    if status == "kept":
        return patch(facecolor=NEUTRAL[0], edgecolor="white", label=status)
    if status == "inserted":
        return patch(facecolor=NEUTRAL[0], edgecolor="black", linewidth=1.2, label=status)
    return patch(facecolor="white", edgecolor=NEUTRAL[1], hatch=HATCHES[status], label=status)
