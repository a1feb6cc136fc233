"""Notebook widgets: `ReplayExplorer` (walk a replay, what-if) and `EstimatorLab`.

Each widget keeps its state in plain attributes changed by methods (`set_call`,
`rewind`, `set_threshold`...), so tests and scripts drive it without a browser; its
ipywidgets controls are built on first display and call the same methods. Without a
widget front end (plain Python, terminal IPython, a static notebook viewer) it renders
`static_html`: the same tables and an inline SVG figure. ipywidgets and matplotlib
load only when a widget or figure is built.

`ReplayExplorer` controls: a call slider with a play button, a session menu (when the
log has several), before/after toggle, one checkbox per pipeline stage and a
threshold slider (both re-run the replay with the changed pipeline), and Rewind,
Resume and Reset buttons. Beside them, the request of the current call as a table of
parts — hidden parts struck through with the stage and reason of the event that hid
them, inserted parts highlighted — and `plot_context` / `plot_layers` images.

Rewind (`ReplayExplorer.rewind`) undoes the current call's compaction and every later
one (`ctxlab.Replay.rewind`): the explorer then shows the request of that call as it
stands before its compaction, and later threshold or stage changes resume the replay
from that call (`ctxlab.Replay.resume`) rather than from the session's first call;
`resume` continues with the current settings and `reset` returns to the replay given.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.viz.parts_table import Side, parts_html, request_table_df
from ctxlab.viz.style import session_label
from ctxlab.viz.widgets_base import WidgetView, error_html, mapping_html
from ctxlab.viz.widgets_estimators import EstimatorLab
from ctxlab.wording import counted

if TYPE_CHECKING:
    import ipywidgets

    from ctxlab.pipeline import Pipeline
    from ctxlab.replay import Replay


IMAGE_CACHE = 64
"""Figures kept per replay by `ReplayExplorer` (about 50 kB each)."""


class ReplayExplorer(WidgetView):
    """Walk a replay call by call, see each request's parts, and try what-ifs.

    Args:
        replay: the replay to explore (`ctxlab.replay`).
        session: the session shown first (default: the first with calls).
        call: the call shown first (default: the session's first compacted call, else
            its last call).
        side: ``before`` or ``after`` the call's compaction.

    Example:
        >>> import ctxlab, ctxlab.datasets
        >>> r = ctxlab.replay(ctxlab.load(ctxlab.datasets.path("coding_session")), "neurolink")
        >>> ex = ReplayExplorer(r)
        >>> ex.call, ex.table()["status"].value_counts().to_dict()
        (18, {'kept': 61, 'pruned': 1})
        >>> ex.rewind()
        >>> int(ex.replay.calls["call"].max())
        17
    """

    def __init__(self, replay: Replay, *, session: str | None = None, call: int | None = None,
                 side: Side = "before") -> None:
        self._origin = replay
        self._replay = replay
        calls = replay.base.calls
        self._sessions = [s for s in replay.base.sessions if (calls["session"] == s).any()]
        if not self._sessions:
            raise ConfigError("the replay's log has no LLM calls to explore")
        p = replay.pipeline
        groups = (("always", p.always), ("", p.stages), ("enforce", p.enforce),
                  ("post", p.post))
        where: dict[str, list[str]] = {}    # a name in two groups is one checkbox for both
        for g, stages in groups:
            for st in stages:
                where.setdefault(st.name, []).append(g)
        self._labels = {n: f"{n} ({', '.join(g or 'triggered' for g in gs)})" if gs != [""]
                        else n for n, gs in where.items()}
        self._enabled = tuple(self._labels)
        self._threshold = p.threshold
        self._rewound: Replay | None = None
        self._rewound_at: dict[str, int] = {}
        self._side: Side = "before"
        self._error: str | None = None
        self._w: dict[str, Any] = {}
        self._syncing = False
        self._images: dict[tuple[Any, ...], bytes] = {}
        self._images_of: Replay | None = None
        self._session, self._call = self._sessions[0], 0
        self.set_side(side)
        self.set_session(session if session is not None else self._sessions[0])
        if call is not None:
            self.set_call(call)

    # -- state -----------------------------------------------------------------------------

    @property
    def replay(self) -> Replay:
        """The replay shown now (re-run after threshold or stage changes, or rewound)."""
        return self._replay

    @property
    def call(self) -> int:
        return self._call

    @property
    def session(self) -> str:
        return self._session

    @property
    def side(self) -> Side:
        return self._side

    @property
    def threshold(self) -> float:
        return self._threshold

    @property
    def stages(self) -> tuple[str, ...]:
        """The names of the pipeline's stages that are ticked."""
        return self._enabled

    @property
    def rewound_at(self) -> dict[str, int]:
        """Per session, the call re-runs resume from (empty: from each first call)."""
        return dict(self._rewound_at)

    @property
    def pipeline(self) -> Pipeline:
        """The replay's pipeline with the chosen threshold and only the ticked stages."""
        return self._pipeline(self._threshold, self._enabled)

    def _pipeline(self, threshold: float, enabled: tuple[str, ...]) -> Pipeline:
        p = self._origin.pipeline

        def keep(stages: tuple[Any, ...]) -> tuple[Any, ...]:
            return tuple(s for s in stages if s.name in enabled)
        return replace(p, threshold=threshold, stages=keep(p.stages), always=keep(p.always),
                       enforce=keep(p.enforce), post=keep(p.post))  # validates the threshold

    def calls_of(self, session: str | None = None) -> list[int]:
        """The calls of a session (default: the current one), in order."""
        c = self._origin.base.calls
        s = self._session if session is None else session
        return sorted(int(k) for k in c.loc[c["session"] == s, "call"])

    def table(self) -> pd.DataFrame:
        """The parts table of the current call and side (`request_table_df`)."""
        return request_table_df(self._replay, self._call, side=self._side,
                                session=self._session)

    # -- actions ---------------------------------------------------------------------------

    def set_session(self, session: str) -> None:
        """Show another session, at its first compacted call (else its last call)."""
        if session not in self._sessions:
            raise ConfigError(f"unknown session {session!r}; sessions: {self._sessions}")
        c = self._replay.calls
        done = (c.loc[(c["session"] == session) & c["compacted"].astype(bool), "call"]
                if "compacted" in c else pd.Series([], dtype="int64"))
        self._session = session
        self._call = int(done.min()) if len(done) else self.calls_of(session)[-1]
        self._refresh()

    def set_call(self, call: int) -> None:
        """Show the request of another call of the current session."""
        calls = self.calls_of()
        if int(call) not in calls:
            raise ConfigError(f"call {call} is not a call of session {self._session!r} "
                              f"(calls {calls[0]}–{calls[-1]})")
        self._call = int(call)
        self._refresh()

    def set_side(self, side: Side) -> None:
        """Show the request ``before`` or ``after`` the call's compaction."""
        if side not in ("before", "after"):
            raise ConfigError(f"side must be 'before' or 'after', not {side!r}")
        self._side = side
        self._refresh()

    def set_threshold(self, threshold: float) -> None:
        """Trigger at another fraction of the limit, and re-run the replay."""
        self._rerun(threshold=float(threshold))

    def set_stages(self, names: Sequence[str]) -> None:
        """Keep only these of the pipeline's stages, and re-run the replay.

        A name stands for every stage of that name (always, main and post stages alike).
        """
        if isinstance(names, str):
            raise ConfigError(f"give a list of stage names, not the single {names!r}")
        unknown = [n for n in names if n not in self._labels]
        if unknown:
            raise ConfigError(f"{unknown} are not stages of {self._origin.pipeline.name}; "
                              f"its stages: {list(self._labels)}")
        self._rerun(enabled=tuple(n for n in self._labels if n in set(names)))

    def rewind(self) -> None:
        """Undo the current call's compaction and every later one in this session.

        The replay shown is then `ctxlab.Replay.rewind` of it: calls from this one on are
        not replayed, and the table shows this call's request before any compaction.
        Threshold and stage changes resume from here; `resume` continues unchanged.
        """
        self._rewound = self._replay.rewind(self._call, self._session)
        self._rewound_at[self._session] = self._call
        self._replay = self._rewound
        self._refresh()

    def resume(self) -> None:
        """Replay the calls after the rewind points with the current threshold and stages."""
        self._rerun()

    def reset(self) -> None:
        """Back to the replay given: its threshold and stages, no rewind point."""
        self._threshold = self._origin.pipeline.threshold
        self._enabled = tuple(self._labels)
        self._rewound, self._rewound_at = None, {}
        self._replay = self._origin
        self._refresh()

    def _rerun(self, *, threshold: float | None = None,
               enabled: tuple[str, ...] | None = None) -> None:
        threshold = self._threshold if threshold is None else threshold
        enabled = self._enabled if enabled is None else enabled
        p = self._pipeline(threshold, enabled)
        self._threshold, self._enabled = threshold, enabled
        if self._rewound is None and p == self._origin.pipeline:
            self._replay = self._origin
        else:
            start = self._rewound if self._rewound is not None else self._origin
            for s in self._sessions:
                if s not in self._rewound_at:
                    start = start.rewind(self.calls_of(s)[0], s)
            self._replay = start.resume(p)
        self._refresh()

    # -- rendering -------------------------------------------------------------------------

    def _replayed(self) -> bool:
        c = self._replay.calls
        return bool(((c["session"] == self._session) & (c["call"] == self._call)).any())

    def _caption(self, table: pd.DataFrame) -> str:
        where = f"call {self._call}" + (f" of session {self._session}"
                                        if len(self._sessions) > 1 else "")
        size = f"{counted(len(table), 'part')}, {counted(int(table['tokens'].sum()), 'token')}"
        if not self._replayed():
            return f"{where}, not replayed (rewound): the request as it stands — {size}"
        return f"{where}, {'before' if self._side == 'before' else 'after'} its compaction — {size}"

    def _status_html(self) -> str:
        p, r = self.pipeline, self._replay
        c = r.calls
        n = int(c["compacted"].sum()) if "compacted" in c and len(c) else 0
        stages = " > ".join(s.name for s in p.stages) or "no stages"
        share = f"{round(100 * p.threshold, 2):g}%"
        text = (f"<b>{html.escape(p.name)}</b>: {html.escape(stages)} at {share} "
                f"of the {html.escape(p.limit)} limit — {counted(len(c), 'call')} "
                f"replayed, {n:,} compacted, {counted(len(r.events), 'event')}")
        if self._rewound_at:
            at = ", ".join(f"call {k}" + (f" ({session_label(s)})"
                                          if len(self._sessions) > 1 else "")
                           for s, k in self._rewound_at.items())
            text += f"; rewound at {html.escape(at)}"
        return text + (f"<br>{error_html(self._error)}" if self._error else "")

    def static_html(self, *, full: bool = True) -> str:
        """The explorer as plain HTML: status and parts table, and (``full``) the replay's
        summary and its context map and layers over calls as inline SVG (a second or two)."""
        from ctxlab.viz.plots import figure_svg, plot_context, plot_layers

        table = self.table()
        out = [f"<div><h4>Replay explorer: {html.escape(self._origin.pipeline.name)}</h4>",
               f"<p>{self._status_html()}</p>",
               mapping_html(self._replay.summary()) if full else "",
               parts_html(table, caption=self._caption(table))]
        figs = []
        if full and self._replayed():
            figs.append(plot_context(self._replay, self._call, side=self._side,
                                     session=self._session))
        if full and (self._replay.calls["session"] == self._session).any():
            figs.append(plot_layers(self._replay, session=self._session, side=self._side))
        for fig in figs:
            svg = figure_svg(fig)
            out.append(svg[svg.index("<svg"):])
        return "\n".join(out) + "</div>"

    def _build(self) -> ipywidgets.Widget:
        import ipywidgets as w

        calls = self.calls_of()
        slider = w.IntSlider(value=self._call, min=calls[0], max=calls[-1], description="call",
                             continuous_update=False)
        play = w.Play(value=self._call, min=calls[0], max=calls[-1], interval=900)
        w.link((play, "value"), (slider, "value"))
        self._w = {
            "session": w.Dropdown(options=self._sessions, value=self._session,
                                  description="session", layout=w.Layout(width="480px")),
            "call": slider, "play": play,
            "side": w.ToggleButtons(options=["before", "after"], value=self._side,
                                    tooltips=["the request before this call's compaction",
                                              "the request as sent"]),
            "stages": {n: w.Checkbox(value=n in self._enabled, description=label, indent=False,
                                     layout=w.Layout(width="auto"))
                       for n, label in self._labels.items()},
            "threshold": w.FloatSlider(value=self._threshold, min=0.05,
                                       max=max(1.5, self._threshold), step=0.05,
                                       description="threshold", readout_format=".2f",
                                       continuous_update=False),
            "rewind": w.Button(description="Rewind here", icon="backward",
                               tooltip="undo this call's compaction and all later ones; "
                                       "threshold and stage changes then resume from here"),
            "resume": w.Button(description="Resume", icon="play",
                               tooltip="replay the rest with the current settings"),
            "reset": w.Button(description="Reset", icon="undo",
                              tooltip="back to the replay given"),
            "status": w.HTML(), "table": w.HTML(),
            "context": w.Image(format="png", layout=w.Layout(width="100%")),
            "layers": w.Image(format="png", layout=w.Layout(width="100%")),
        }
        W = self._w
        for key, method in (("session", self.set_session), ("call", self.set_call),
                            ("side", self.set_side), ("threshold", self.set_threshold)):
            W[key].observe(self._on_change(method), names="value")
        boxes = W["stages"]
        for box in boxes.values():
            box.observe(self._on_change(lambda _: self.set_stages(
                [n for n, b in boxes.items() if b.value])), names="value")
        for key, action in (("rewind", self.rewind), ("resume", self.resume),
                            ("reset", self.reset)):
            W[key].on_click(lambda _, act=action: self._guard(act))
        rows = [w.HBox([play, slider, W["side"]]),
                w.HBox([W["threshold"], *boxes.values()]),
                w.HBox([W["rewind"], W["resume"], W["reset"]]), W["status"],
                w.HBox([w.Box([W["table"]], layout=w.Layout(width="48%")),
                        w.VBox([W["context"], W["layers"]], layout=w.Layout(width="52%"))])]
        return w.VBox(([W["session"]] if len(self._sessions) > 1 else []) + rows)

    def _on_change(self, method: Callable[[Any], None]) -> Callable[[dict[str, Any]], None]:
        return lambda change: None if self._syncing else self._guard(method, change["new"])

    def _refresh(self) -> None:
        if not self._w:
            return
        from ctxlab.viz.plots import plot_context, plot_layers

        W, calls = self._w, self.calls_of()
        self._syncing = True
        try:
            W["session"].value = self._session
            for key in ("call", "play"):
                with W[key].hold_trait_notifications():
                    W[key].min, W[key].max, W[key].value = calls[0], calls[-1], self._call
            W["side"].value = self._side
            W["threshold"].max = max(W["threshold"].max, self._threshold)
            W["threshold"].value = self._threshold
            for n, box in W["stages"].items():
                box.value = n in self._enabled
        finally:
            self._syncing = False
        W["status"].value = self._status_html()
        self._error = None
        table = self.table()
        W["table"].value = parts_html(table, caption=self._caption(table))
        r, s, side = self._replay, self._session, self._side
        shown = self._replayed()
        if shown:
            W["context"].value = self._image(("context", s, self._call, side), lambda: plot_context(
                r, self._call, side=side, session=s))
        W["context"].layout.display = None if shown else "none"
        has = bool((r.calls["session"] == s).any())
        if has:
            W["layers"].value = self._image(("layers", s, side), lambda: plot_layers(
                r, session=s, side=side))
        W["layers"].layout.display = None if has else "none"

    def _image(self, key: tuple[Any, ...], draw: Callable[[], Any]) -> bytes:
        """A figure's PNG, cached per replay (a few dozen, so playing back is quick)."""
        from ctxlab.viz.plots import figure_png

        if self._images_of is not self._replay or len(self._images) >= IMAGE_CACHE:
            self._images, self._images_of = {}, self._replay
        if key not in self._images:
            self._images[key] = figure_png(draw())
        return self._images[key]

    def __repr__(self) -> str:
        return (f"ReplayExplorer({self._origin.pipeline.name}, session={self._session[:8]!r}, "
                f"call={self._call}, side={self._side!r})")


__all__ = ["EstimatorLab", "ReplayExplorer", "parts_html", "request_table_df"]
