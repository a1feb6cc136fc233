"""Figures of a `ctxlab.replay.Replay`: tokens per layer, savings per stage, what survived.

Every function takes the replay (and what to look at), draws with the shared style
(`ctxlab.viz.style`) and returns a `matplotlib.figure.Figure`; none touches pyplot or
rcParams. Artists carry ``gid``s (``compactions``, ``stage-<name>``...) that name them
in SVG output and let tests find them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.layers import LAYER_CODES, LAYERS
from ctxlab.viz.style import (FRAMING_COLOUR, LAYER_COLOURS, MISSING_COLOUR, NEUTRAL,
                              literal_text, new_figure, plural, session_label, share,
                              show_nothing, stage_colours, thousands)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ctxlab.replay import Replay


def replay_session(replay: Replay, session: str | None) -> tuple[str, pd.DataFrame]:
    """The session (default: the first with replayed calls) and its replayed calls, in
    call order."""
    with_calls = pd.unique(replay.calls["session"]).tolist() if len(replay.calls) else []
    s = session if session is not None else next(
        (x for x in replay.base.sessions if x in set(with_calls)), "")
    calls = replay.calls[replay.calls["session"] == s] if len(replay.calls) else replay.calls
    if calls.empty:
        some = ", ".join(repr(x) for x in with_calls[:5])
        more = f" and {len(with_calls) - 5:,} more" if len(with_calls) > 5 else ""
        raise ConfigError(f"session {s!r} has no replayed calls; sessions with calls: "
                          f"{some or 'none'}{more}")
    return s, calls.sort_values("call", kind="stable")


def replay_stage_colours(replay: Replay) -> dict[str, str]:
    """A colour per stage: the pipeline's order (always, stages, enforce, post), then the
    others."""
    p = replay.pipeline
    names = [s.name for s in (*p.always, *p.stages, *p.enforce, *p.post)]
    if "stage" in replay.events:
        names += [str(s) for s in pd.unique(replay.events["stage"])]
    return stage_colours(names)


def _logged(replay: Replay, session: str, calls: pd.DataFrame,
            side: Literal["after", "before"] = "before") -> np.ndarray:
    """Which calls' requests (on ``side`` of compaction) are the ones the log sent: up to
    the replay's first compaction (its request before, not after it) and before the log's
    first recorded one."""
    base = replay.base.calls[replay.base.calls["session"] == session]
    end = calls["call"].map(base.set_index("call")["input_end_pos"]).to_numpy(dtype=float)
    until = float(replay.settings.reported_until.get(session, np.inf))
    done = calls.loc[calls["compacted"], "call"]
    first = float(done.min()) if len(done) else np.inf
    call = calls["call"].to_numpy(dtype=float)
    return (end < until) & ((call <= first) if side == "before" else (call < first))


def call_steps(calls: np.ndarray) -> np.ndarray:
    """Three x per call to draw its value as a step: its left edge (half a call before it),
    the call, its right edge (the next call's left edge; half a call after the last). With
    every value repeated three times, a band is flat over each call and changes by a
    vertical edge between two calls, never by a slope across them.

    Example:
        >>> call_steps(np.array([0, 1, 3])).tolist()
        [-0.5, 0.0, 0.5, 0.5, 1.0, 2.5, 2.5, 3.0, 3.5]
    """
    x = np.asarray(calls, dtype=float)
    left = x - 0.5
    right = np.append(left[1:], x[-1] + 0.5) if len(x) else x
    return np.column_stack([left, x, right]).ravel()


@literal_text
def plot_layers(replay: Replay, *, session: str | None = None,
                side: Literal["after", "before"] = "after", ax: Axes | None = None) -> Figure:
    """Tokens per layer of every call's request, stacked, with the limits and compactions.

    Args:
        replay: the replay.
        session: which session (default: the first).
        side: stack what each call sent (``after`` its compaction) or what it would
            have sent without it (``before``).
        ax: draw into this axes instead of a new figure.

    Each call's tokens are a step as wide as the call (`call_steps`): a compaction is
    a vertical drop at the left edge of the compacted call, not a slope from the call
    before. The top band is message framing (the estimator's per-message overhead),
    so the stack's top is the request's total. Lines, stepped alike: the context
    window, the pipeline's limit, the trigger threshold (and target when it differs),
    the reported ``input_total`` while the replayed request is still the one the log
    sent (up to the replay's first compaction and the log's first recorded one;
    afterwards it measures another request), and what the trigger measured where that
    is not the total. A triangle marks every call whose compaction hid or inserted
    parts, with a vertical drop from its tokens before to its tokens after. Requests
    that stay under `ZOOM_BELOW` of the trigger line get an axis scaled to them, with a
    note that the lines lie above.

    Example:
        >>> import ctxlab
        >>> r = ctxlab.replay(ctxlab.load("datasets/coding_session.jsonl"), "neurolink")
        >>> ax = plot_layers(r).axes[0]
        >>> marks = next(line for line in ax.lines if line.get_gid() == "compactions")
        >>> marks.get_xdata().tolist()  # the calls whose compaction hid parts
        [18, 62, 89, 112, 141]
    """
    if side not in ("after", "before"):
        raise ConfigError(f"side must be 'after' or 'before', not {side!r}")
    fig, ax = new_figure(ax, (10, 4.2))
    s, c = replay_session(replay, session)
    calls = c["call"].to_numpy(dtype=np.int64)
    layers = c[[f"{k}_{side}" for k in LAYERS]].to_numpy(dtype=float)
    total = c[f"tokens_{side}"].to_numpy(dtype=float)
    bands = [*layers.T, total - layers.sum(axis=1)]
    names = [*LAYERS, "framing"]
    labels = [f"{LAYER_CODES[k]} {k}" if LAYER_CODES[k] != k else k for k in LAYERS]
    x = call_steps(calls)       # each call's value held over its width: three x per call

    def held(values: np.ndarray) -> np.ndarray:
        return np.repeat(values, 3) / 1000

    low = np.zeros(len(x))
    for band, name, label, colour in zip(bands, names, [*labels, "message framing"],
                                         [*LAYER_COLOURS.values(), FRAMING_COLOUR]):
        high = low + held(band)
        ax.fill_between(x, low, high, color=colour, alpha=0.85, linewidth=0, label=label,
                        gid=f"layer-{name}")
        low = high
    p = replay.pipeline
    limit = c["limit_tokens"].to_numpy(dtype=float)
    ax.plot(x, held(c["window_tokens"].to_numpy(dtype=float)), color="black", linewidth=1.6,
            label="context window", gid="window")
    ax.plot(x, held(limit), color=NEUTRAL[1], linestyle="--", linewidth=1.2,
            label=f"limit ({p.limit})", gid="limit")
    ax.plot(x, held(p.threshold * limit), color="black", linestyle=":", linewidth=1.4,
            label=f"trigger at {p.threshold * 100:g}% of limit", gid="threshold")
    target = c["target_tokens"].to_numpy(dtype=float)
    if not np.allclose(target, p.threshold * limit, atol=1):
        ax.plot(x, held(target), color=NEUTRAL[1], linestyle="-.", linewidth=1.2,
                label="target", gid="target")
    checked = c["checked_tokens"].to_numpy(dtype=float)
    if not np.array_equal(checked, c["tokens_before"].to_numpy(dtype=float)):
        ax.plot(x, held(checked), color=NEUTRAL[1], linewidth=1, linestyle=(0, (4, 1, 1, 1)),
                label="measured by the trigger", gid="checked")
    done = c["compacted"].to_numpy(dtype=bool)
    reported = np.where(_logged(replay, s, c, side), pd.to_numeric(c["input_total"],
                                                                  errors="coerce")
                        .to_numpy(dtype=float), np.nan)
    if np.isfinite(reported).any():
        ax.plot(x, held(reported), color="black", linewidth=0.9, marker=".", markersize=3,
                markevery=slice(1, None, 3), label="reported input_total (logged request)",
                gid="reported")   # a dot at each call
    before = c["tokens_before"].to_numpy(dtype=float) / 1000
    after = c["tokens_after"].to_numpy(dtype=float) / 1000
    x = calls                   # the marks at the calls themselves
    ax.vlines(x[done], after[done], before[done], colors="black", linewidth=1,
              gid="compaction-drops")
    ax.plot(x[done], before[done], "v", color="black", markersize=6, linestyle="none",
            label=f"compacted call ({int(done.sum()):,}): before → after" if done.any()
            else "_nothing compacted", gid="compactions")
    idle = c["triggered"].to_numpy(dtype=bool) & ~done
    if idle.any():
        ax.plot(x[idle], before[idle], "x", color=NEUTRAL[1], markersize=5, linestyle="none",
                label=f"triggered, nothing hidden ({int(idle.sum())})", gid="triggered-idle")
    ax.set_xlabel("LLM call")
    ax.set_ylabel("tokens (thousands)")
    ax.set_ylim(bottom=0)
    _zoom_on_requests(ax, max(float(np.nanmax(before)), float(np.nanmax(total)) / 1000,
                              float(np.nanmax(checked, initial=0)) / 1000,
                              float(np.nanmax(reported, initial=0)) / 1000),
                      float((p.threshold * limit).min()) / 1000,
                      int(c["window_tokens"].max()))
    ax.set_xlim(calls.min() - 0.5, calls.max() + 0.5)     # no tick past the last call
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # calls: whole numbers
    what = "sent" if side == "after" else "before compaction"
    where = f" — session {session_label(s)}" if len(replay.base.sessions) > 1 else ""
    n_done = int(done.sum())
    ax.set_title(f"{p.name}: tokens per layer {what} at each call{where} — "
                 f"{plural(n_done, 'call')} compacted, peak {int(total.max()):,} tokens",
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    ax.grid(alpha=0.3)
    return fig


ZOOM_BELOW = 0.25
"""`plot_layers` scales its axis to the requests when they stay under this share of the
trigger line (a 1,657-token session in a 200k window was a flat sliver at the bottom)."""


def _zoom_on_requests(ax: Axes, top: float, trigger: float, window: int) -> None:
    """Scale the y axis to the requests (``top`` and ``trigger`` in thousands of tokens)
    when they stay far under the trigger line, saying that the window's lines lie above."""
    if not top > 0 or top >= ZOOM_BELOW * trigger:
        return
    ax.set_ylim(0, top * 1.2)
    ax.text(0.99, 0.97, f"requests stay under {top / trigger:.0%} of the trigger: window "
            f"({window:,} tokens), limit and trigger lie above this scale",
            transform=ax.transAxes, ha="right", va="top", fontsize=7, color=NEUTRAL[1],
            gid="lines-above")


def _steps(ev: pd.DataFrame, order: list[str], per_call: bool) -> pd.DataFrame:
    """One waterfall step per event (``per_call``) or per stage summed over events."""
    ev = ev.assign(saved=pd.to_numeric(ev["tokens_saved"], errors="coerce").fillna(0),
                   failed=ev["failure"].notna().to_numpy(dtype=bool),
                   made=ev["event"].notna().to_numpy(dtype=bool))
    if per_call:
        return pd.DataFrame({"stage": ev["stage"].astype(str).to_numpy(),
                             "saved": ev["saved"].to_numpy(dtype=float),
                             "events": ev["made"].to_numpy(dtype=np.int64),
                             "failures": ev["failed"].to_numpy(dtype=np.int64)})
    g = ev.groupby(ev["stage"].astype(str), sort=False).agg(
        saved=("saved", "sum"), events=("made", "sum"), failures=("failed", "sum"))
    rank = {name: i for i, name in enumerate(order)}
    g = g.reset_index().rename(columns={"index": "stage"})
    return g.sort_values("stage", key=lambda s: s.map(rank), kind="stable")


@literal_text
def plot_stages(replay: Replay, *, call: int | None = None, session: str | None = None,
                ax: Axes | None = None) -> Figure:
    """Waterfall of the tokens each stage saved: one call's compaction, or the whole replay.

    Args:
        replay: the replay.
        call: one call: its request's tokens before, each stage application in the order
            it ran, the tokens sent. None: every compaction summed — the tokens before
            at all compacted calls, each stage's savings over the replay, the tokens sent.
        session: the session (default: the first for ``call``, every session otherwise).
        ax: draw into this axes instead of a new figure.

    A stage that added tokens (tool-pair repair, a summary longer than what it
    replaced) rises, hatched; a failed attempt is a flat step labelled ``failed``.

    Example:
        >>> import ctxlab
        >>> r = ctxlab.replay(ctxlab.load("datasets/coding_session.jsonl"), "neurolink")
        >>> bars = plot_stages(r, call=62).axes[0].patches
        >>> [b.get_gid() for b in bars], round(bars[1].get_height() * 1000)
        (['before', 'stage-prune', 'after'], 41426)
    """
    fig, ax = new_figure(ax, (8, 4))
    ev = replay.events
    if "tokens_saved" not in ev or ev.empty:
        ev = pd.DataFrame(columns=["session", "event", "call", "stage", "tokens_before",
                                   "tokens_saved", "failure"])
    if session is not None and session not in set(replay.base.sessions):
        replay_session(replay, session)     # raises, naming the sessions with calls
    if call is not None or session is not None:
        s = session if session is not None else replay_session(replay, None)[0]
        ev = ev[ev["session"] == s]
    if call is not None:
        ran = sorted(pd.unique(ev["call"]).tolist())    # this session's, not every session's
        ev = ev[ev["call"] == call]
        if ev.empty:
            where = f" of session {s!r}" if len(replay.base.sessions) > 1 else ""
            raise ConfigError(f"no stage ran at call {call}{where}; calls with stage runs: "
                              f"{ran}")
    colours = replay_stage_colours(replay)
    if ev.empty:    # every session's, or one session's: no stage ran anywhere
        where = f" in session {session_label(str(session))}" if session is not None else ""
        show_nothing(ax, f"No stage ran{where}: {replay.pipeline.name} compacted no "
                         "request, so there are no savings to show.")
        ax.set_title(f"{replay.pipeline.name}: tokens saved per stage — nothing compacted",
                     fontsize=10)
        return fig
    steps = _steps(ev, list(colours), per_call=call is not None)
    firsts = ev.groupby(["session", "call"], sort=False)["tokens_before"].first()
    start = float(pd.to_numeric(firsts).sum())
    end = start - float(steps["saved"].sum())
    ticks = [f"before\n({plural(len(firsts), 'call')})" if call is None else "before"]
    ax.bar(0, start / 1000, width=0.7, color=NEUTRAL[0], gid="before")
    level = start
    for i, st in enumerate(steps.itertuples(index=False), start=1):
        saved = float(st.saved)
        low = min(level, level - saved)
        ax.bar(i, abs(saved) / 1000, bottom=low / 1000, width=0.7, color=colours[st.stage],
               hatch="//" if saved < 0 else None, edgecolor="white" if saved < 0 else None,
               gid=f"stage-{st.stage}")
        ax.plot([i - 1.35, i + 0.35], [level / 1000] * 2, color=NEUTRAL[1], linewidth=0.7,
                linestyle=":")
        sign = "−" if saved >= 0 else "+"
        ax.annotate(f"{sign}{thousands(abs(saved))}", (i, max(level, level - saved) / 1000),
                    xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                    fontsize=8)
        note = f"\n×{int(st.events)}" if call is None else ""
        if int(st.failures):
            note += "\nfailed" if call is not None else f", {int(st.failures)} failed"
        ticks.append(f"{st.stage}{note}")
        level -= saved
    n = len(steps) + 1
    ax.plot([n - 1.35, n + 0.35], [level / 1000] * 2, color=NEUTRAL[1], linewidth=0.7,
            linestyle=":")
    ax.bar(n, end / 1000, width=0.7, color=NEUTRAL[1], gid="after")
    ticks.append("sent")
    ax.set_xticks(range(n + 1), ticks, fontsize=8)
    ax.set_ylabel("tokens (thousands)")
    ax.set_ylim(bottom=0)
    saved = f" ({share(start - end, start)} saved)" if start else ""
    if call is not None:
        ax.set_title(f"Call {call:,}: {thousands(start)} → {thousands(end)} tokens{saved}",
                     fontsize=10)
    else:
        ax.set_title(f"{replay.pipeline.name}: tokens saved per stage over "
                     f"{plural(len(firsts), 'compacted call')}{saved}", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    return fig


@literal_text
def plot_retention(replay: Replay, *, session: str | None = None,
                   ax: Axes | None = None) -> Figure:
    """What survived compaction: needed-fact recall per call, retention per event.

    Args:
        replay: the replay (`Replay.recall` and `Replay.retention` are computed here).
        session: which session (default: the first).
        ax: draw into this axes instead of a new figure.

    Dots: each call that needed facts stated earlier, at the share its input still
    showed (grey when all, black crosses when some were missing: stage colours stay the
    diamonds'); the line is
    recall pooled over the calls so far. Diamonds: each compaction event that hid
    artifacts, at the share of them the request after it still showed, coloured by
    stage. Dotted verticals mark the compacted calls.
    """
    fig, ax = new_figure(ax, (10, 3.8))
    s, c = replay_session(replay, session)
    rec = replay.recall()
    rec = rec[(rec["session"] == s) & (rec["needed"] > 0)].sort_values("call")
    ret = replay.retention()
    ret = ret[(ret["session"] == s) & (ret["kind"] == "all") & (ret["hidden_artifacts"] > 0)]
    done = c.loc[c["compacted"], "call"].to_numpy(dtype=np.int64)
    ax.vlines(done, 0, 100, colors=NEUTRAL[0], linewidth=0.8, linestyles=":",
              gid="compactions")
    full, lost = rec[rec["missing"] == 0], rec[rec["missing"] > 0]
    ax.scatter(full["call"], full["recall"] * 100, s=12, color=NEUTRAL[0],
               label=f"calls with every needed fact ({len(full):,})", gid="recall-full")
    ax.scatter(lost["call"], lost["recall"] * 100, s=36, marker="X", color=MISSING_COLOUR,
               label=f"calls missing facts ({len(lost):,})" if len(lost) else "_none missing",
               gid="recall-missing")
    needed, missing = rec["needed"].cumsum(), rec["missing"].cumsum()
    ax.plot(rec["call"], (1 - missing / needed) * 100, color="black", linewidth=1.2,
            label="recall so far (pooled)", gid="recall-cumulative")
    if len(ret):
        made = replay.events.dropna(subset=["event"])
        made = made[made["session"] == s]
        call_of = pd.Series(made["call"].to_numpy(), index=made["event"].astype("int64"))
        colours = replay_stage_colours(replay)
        for stage, g in ret.groupby(ret["stage"].astype(str), sort=False):
            ax.scatter(g["event"].map(call_of), g["retention"] * 100, s=40, marker="D",
                       color=colours.get(stage, NEUTRAL[1]), edgecolor="black",
                       linewidth=0.6, zorder=3, gid=f"retention-{stage}",
                       label=f"{stage}: hidden artifacts still shown")
    ax.set_xlabel("LLM call")
    ax.set_ylabel("artifacts in the request (%)")
    ax.set_ylim(-3, 105)
    x = c["call"].to_numpy(dtype=np.int64)
    ax.set_xlim(x.min() - 0.5, x.max() + 0.5)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # calls: whole numbers
    if rec.empty and ret.empty:
        ax.text(0.5, 0.5, f"No replayed call ({len(c):,} in this session) needed a fact stated "
                "earlier, and no compaction hid an artifact: nothing to measure.",
                transform=ax.transAxes, ha="center", va="center", fontsize=10,
                color=NEUTRAL[1], wrap=True, gid="empty-message")
    n_need, n_miss = int(rec["needed"].sum()), int(rec["missing"].sum())
    kept, hidden = int(ret["retained"].sum()), int(ret["hidden_artifacts"].sum())
    recall = f"{1 - n_miss / n_need:.1%}" if n_need else "n/a"
    retention = f"{kept / hidden:.0%} of {hidden:,}" if hidden else "none"
    ax.set_title(f"What survived — needed-fact recall {recall} ({n_miss:,} of {n_need:,} "
                 f"missing); hidden artifacts still shown: {retention}", fontsize=10)
    if not (rec.empty and ret.empty):   # beside the axes: inside, it hid dots and diamonds
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    ax.grid(alpha=0.3)
    return fig
