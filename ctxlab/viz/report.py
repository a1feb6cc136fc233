"""One self-contained HTML page of a replay: settings, summary, plots, events, ledger, fidelity.

`report` writes the page; `report_html` returns its text. The page needs no network and
runs no script: plots are inline SVG, styles are inline, and a Content-Security-Policy
forbids anything else. Every text that comes from the log (tool names, file paths,
content previews, reasons, session ids) is HTML-escaped, and with ``redact=True`` API
keys and tokens are masked first (`ctxlab.redact`). The same replay gives the same
bytes: no timestamps, timings, absolute paths of this machine or random ids.

Long tables (events, ledger, per-call fidelity) show their first and last rows and say
how many rows were left out; the full frames are on the `Replay`.

Example:
    >>> import ctxlab
    >>> from ctxlab.viz.report import report_html
    >>> t = ctxlab.load("datasets/coding_session_b.jsonl")
    >>> page = report_html(ctxlab.replay(t, "neuron", window=100_000), transcript=t)
    >>> page.startswith("<!DOCTYPE html>"), "<script" in page
    (True, False)
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ctxlab.redact import redact as redact_text
from ctxlab.viz.style import preview_texts
from ctxlab.wording import usage_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ctxlab.replay import Replay
    from ctxlab.schema import Transcript

MAX_ROWS = 400          # rows shown per table; beyond, the first and last halves
PREVIEW_CHARS = 100     # characters of a part's content shown in the ledger
LONG_TEXT = 24          # a text column with a longer value wraps; shorter ones never do
MAX_PLOT_SESSIONS = 3  # sessions drawn (where compaction saved most, then the busiest)
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1a1a1a;background:#fff}
main{max-width:1180px;margin:0 auto;padding:1.2em 1.5em}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.8em}
nav a{margin-right:1em}dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}
dt{font-weight:600}dd{margin:0}
table{border-collapse:collapse;font-size:12.5px;margin:.6em 0;display:block;overflow-x:auto}
th,td{border:1px solid #ddd;padding:.15em .45em;text-align:left;vertical-align:top}
th{background:#f3f3f3;position:sticky;top:0}td.num{text-align:right;white-space:nowrap}
tr.failed td{background:#fdecea}tr.gap td{background:#fff8dc;font-style:italic}
td.text{white-space:nowrap}td.long{white-space:normal;max-width:24em;overflow-wrap:anywhere}
figure{margin:1em 0}
figure svg{max-width:100%;height:auto}figcaption{color:#555;font-size:.9em}
.note{color:#555}footer{margin-top:2em;color:#777;font-size:.85em}
"""

SUMMARY_DOC = {
    "pipeline": "the pipeline replayed",
    "calls": "LLM calls replayed",
    "compactions": "calls at which the trigger fired",
    "calls_compacted": "calls whose request a stage changed (always-on stages need no trigger: "
                       "the plots count these)",
    "events": "stage applications that changed the request",
    "failures": "summarizer attempts that failed (the pipeline went on without them)",
    "tokens_sent": "input tokens over all replayed requests",
    "peak_tokens": "the largest request sent",
    "peak_usage": "the highest share of its call's limit a request took (with several "
                  "models, not always the largest request's)",
    "over_window": "requests still over the context window after compaction",
    "forced_final": "requests that forced a final turn",
    "recall": "needed facts present in the request when needed (pooled)",
    "missing": "needed facts absent from the request when needed",
}
EVENT_COLUMNS = ("session", "event", "call", "stage", "tokens_before", "tokens_after",
                 "tokens_saved", "hidden", "inserted", "summarizer_calls", "failure", "reason")
LEDGER_COLUMNS = ("session", "event", "call", "stage", "action", "part", "role", "kind",
                  "tool_name", "file_path", "tokens", "preview")


class _Cells:
    """Turns values into escaped (and, when asked, redacted) HTML text."""

    def __init__(self, redact: bool) -> None:
        self.redact = redact

    def text(self, value: Any) -> str:
        s = str(value)
        return html.escape(redact_text(s) if self.redact else s, quote=True)

    def cell(self, value: Any, column: str) -> tuple[str, str]:
        """(class, escaped text) of one table cell."""
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            return "num", "–"
        if isinstance(value, (bool, np.bool_)):
            return "", "yes" if value else "no"
        if isinstance(value, (int, np.integer)):
            return "num", f"{int(value):,}"
        if isinstance(value, (float, np.floating)):
            v = float(value)
            if "usage" in column or column == "recall":
                text = f"{v:.1%}"
            elif "pct" in column:
                text = f"{v:,.1f}"
            else:
                text = f"{v:,.0f}" if "tokens" in column or abs(v) >= 1000 else f"{v:.3g}"
            return "num", _NEGATIVE_ZERO.sub("", text)  # -0.04 % is 0.0, not "-0.0"
        return "text", self.text(value)


_NEGATIVE_ZERO = re.compile(r"^-(?=[0.]+%?$)")


def _capped(df: pd.DataFrame, limit: int) -> tuple[pd.DataFrame, int]:
    if len(df) <= limit:
        return df, 0
    half = limit // 2
    return pd.concat([df.head(half), df.tail(limit - half)]), len(df) - limit


def _table(df: pd.DataFrame, cells: _Cells, *, frame: str, limit: int | None = None,
           row_class: Callable[[Mapping[str, Any]], str] | None = None,
           prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> str:
    """An HTML table of ``df``; rows beyond ``limit`` are left out with a row saying so
    (``frame`` names where they all are). ``prepare`` adds columns to the rows shown."""
    if df.empty:
        return '<p class="note">(none)</p>'
    limit = MAX_ROWS if limit is None else limit
    shown, left_out = _capped(df, limit)
    if prepare is not None:
        shown = prepare(shown)
    cols = list(shown.columns)
    # columns of long texts (paths, previews, reasons) wrap, anywhere; short ones
    # (kinds, stages, actions) never: squeezed beside long ones they broke as "inserte|d"
    long = {c for c in cols if shown[c].map(lambda v: isinstance(v, str) and len(v) > LONG_TEXT
                                            ).any()}
    out = ["<table><thead><tr>", *(f"<th>{cells.text(c)}</th>" for c in cols),
           "</tr></thead><tbody>"]
    for i, rec in enumerate(shown.to_dict("records")):
        if left_out and i == limit // 2:
            out.append(f'<tr class="gap"><td colspan="{len(cols)}">… {left_out:,} rows left '
                       f"out here (rows {i + 1:,}–{i + left_out:,} of {len(df):,}); every row "
                       f"is in {html.escape(frame)}</td></tr>")
        cls = row_class(rec) if row_class else ""
        out.append(f'<tr class="{cls}">' if cls else "<tr>")
        for c in cols:
            kind, text = cells.cell(rec[c], str(c))
            kind = "text long" if kind == "text" and c in long else kind
            out.append(f'<td class="{kind}">{text}</td>' if kind else f"<td>{text}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _settings(replay: Replay, source: Transcript, cells: _Cells) -> str:
    p, s, meta = replay.pipeline, replay.settings, source.meta
    name = Path(str(meta["path"])).name if meta.get("path") else "(in memory)"
    fmt = meta.get("format") or "?"
    version = meta.get("version") or meta.get("cli_version")
    wins = sorted({int(w) for w in replay.calls.get("window_tokens", pd.Series(dtype=int))})
    window = (f"{s.window:,} tokens" if s.window is not None else
              "each call's model's window: " + (", ".join(f"{w:,}" for w in wins) or "–"))
    if s.window is None:
        from ctxlab.pipeline import call_models
        from ctxlab.schema import frames_unchanged
        from ctxlab.tokens.windows import resolve_window

        # a call that names no model has the window of the one named before it, as the
        # replay gave it (`call_models`): only a session naming none has no model
        with frames_unchanged():
            used = {m for x in pd.unique(replay.base.calls["session"])
                    for m in call_models(replay.base, x).values()}
        guessed = sorted({m for m in used if m is not None and resolve_window(model=m).method
                          in ("provider-default", "global-default")}
                         | ({"(no model named)"} if None in used else set()))
        if guessed:
            window += (f" (a provider's or the default window for {', '.join(guessed[:5])}"
                       f"{' …' if len(guessed) > 5 else ''}: pass --window to set it)")
    est = s.estimator if isinstance(s.estimator, str) else getattr(s.estimator, "spec", None)
    if est is None:     # the pipeline's, for each session's provider: the specs used
        with_calls = set(replay.base.calls["session"])
        used = list(dict.fromkeys(replay.estimator(x).spec for x in replay.base.sessions
                                  if x in with_calls))
        est = (", ".join(used[:4]) + (" …" if len(used) > 4 else "")
               + f" (the pipeline's {p.estimator})") if used else None
    overhead = sorted(int(v) for v in s.overhead_tokens.values())
    fitted = bool(source.calls["input_total"].notna().any())
    rows = [("source", f"{name} ({fmt}{' ' + str(version) if version else ''})"),
            ("sessions", f"{len(replay.base.sessions):,}"),
            ("models", _models(source, meta)),
            ("pipeline", str(p)),
            ("always / enforce / post stages",
             " / ".join(" > ".join(x.name for x in group) or "–"
                        for group in (p.always, p.enforce, p.post))),
            ("trigger", f"{p.trigger_on} tokens over {p.threshold * 100:g}% of the {p.limit} "
                        f"limit, target {(p.target or p.threshold) * 100:g}%"),
            ("window", window),
            ("estimator", est or f"the pipeline's ({p.estimator})"),
            ("unrecorded overhead", "–" if not overhead else
             f"{overhead[-1]:,} tokens: what the log says its client sends unrecorded (no "
             f"call reports its input to fit it from)" if not fitted and overhead[-1] else
             "none counted: the log reports no usage to fit it from" if not fitted else
             f"{overhead[0]:,} tokens" if overhead[0] == overhead[-1] else
             f"{overhead[0]:,}–{overhead[-1]:,} tokens per session"),
            ("load report", _load_report_text(source))]
    from ctxlab.fidelity import inflated_overhead_notes, overhead_notes
    from ctxlab.replay import calls_without_input
    from ctxlab.replay_state import over_target_note

    rows += [("overhead left out", note) for note in overhead_notes(replay)]
    rows += [("overhead overstated", note) for note in inflated_overhead_notes(replay)]
    over = over_target_note(replay.calls)
    if over:
        rows.append(("over target", over))
    bare = calls_without_input(source)
    if len(bare):
        one = len(bare) == 1
        rows.append(("not replayed", f"{len(bare):,} call{'' if one else 's'} with no "
                     f"recorded input ({'its' if one else 'their'} session holds no part)"))
    rows += [("not replayed", note) for note in replay.not_replayed.values()]
    items = "".join(f"<dt>{cells.text(k)}</dt><dd>{cells.text(v)}</dd>" for k, v in rows)
    return f'<section id="settings"><h2>Replay</h2><dl>{items}</dl></section>'


def _models(source: Any, meta: Mapping[str, Any]) -> str:
    """The models the log's calls name (every format records them per call), else what
    its metadata says; at most 6, with how many more."""
    found = [str(m) for m in pd.unique(source.calls["model"].dropna())] or \
        [str(m) for m in (meta.get("models") or [])]
    return (", ".join(found[:6]) + (f" and {len(found) - 6} more" if len(found) > 6 else "")
            ) or "–"


def _load_report_text(source: Transcript, shown: int = 3) -> str:
    """The load report in one line: counts, and the first records skipped (file name and
    line), which a replay of this log lacks."""
    rep = source.load_report
    text = str(rep)
    sk = rep.skipped
    if len(sk):
        where = [f"{Path(str(r.file)).name}:{int(r.line)}" if not pd.isna(r.line) else
                 f"{Path(str(r.file)).name} ({r.where})" for r in sk.head(shown).itertuples()]
        reasons = [str(r.reason) for r in sk.head(shown).itertuples()]
        text += "; skipped: " + "; ".join(f"{w} ({why})" for w, why in zip(where, reasons))
        if len(sk) > shown:
            text += f"; … {len(sk) - shown:,} more (ctxlab info lists them)"
    return text


def _summary(replay: Replay, cells: _Cells) -> str:
    summary = replay.summary()

    def value(k: str, v: Any) -> tuple[str, str]:
        if k == "peak_usage" and isinstance(v, float) and math.isinf(v):
            return "", cells.text(usage_text(v))      # a share of 0 tokens, not "inf%"
        return cells.cell(v, k)
    body = "".join(f"<tr><th>{cells.text(k)}</th>"
                   f"<td class=\"{value(k, v)[0]}\">{value(k, v)[1]}</td>"
                   f"<td>{cells.text(SUMMARY_DOC.get(k, ''))}</td></tr>"
                   for k, v in summary.items())
    return f'<section id="summary"><h2>Summary</h2><table>{body}</table></section>'


def plotted_sessions(replay: Replay, limit: int | None = None) -> list[str]:
    """The sessions the page draws: the ``limit`` (default `MAX_PLOT_SESSIONS`) where
    compaction saved the most tokens, then those with the most requests over the window,
    then the most triggered, then the most replayed calls; in log order."""
    limit = MAX_PLOT_SESSIONS if limit is None else limit
    c = replay.calls
    counts = c["session"].value_counts(sort=False) if len(c) else {}
    ev = replay.events
    saved = ev.groupby("session")["tokens_saved"].sum() \
        if len(ev) and "tokens_saved" in ev else {}
    over = c.groupby("session")["over_window"].sum() if len(c) and "over_window" in c else {}
    fired = c.groupby("session")["triggered"].sum() if len(c) and "triggered" in c else {}
    ranked = sorted(replay.base.sessions, key=lambda s: (-float(saved.get(s, 0) or 0),
                                                         -int(over.get(s, 0)),
                                                         -int(fired.get(s, 0)),
                                                         -int(counts.get(s, 0))))
    chosen = {s for s in ranked[:limit] if counts.get(s, 0)}
    return [s for s in replay.base.sessions if s in chosen]


def _figures(replay: Replay, session: str) -> list[tuple[str, Figure]]:
    """The figures of one session, with captions."""
    from ctxlab.viz.plots import plot_context, plot_layers, plot_retention, plot_stages

    out: list[tuple[str, Figure]] = [
        ("Tokens per layer of every request sent, with the limit, the trigger and the "
         "compactions.", plot_layers(replay, session=session))]
    ev = replay.events[replay.events["session"] == session] if len(replay.events) else None
    if ev is not None and len(ev):
        out.append(("Tokens each stage saved over the replay (a failed attempt is a flat "
                    "step).", plot_stages(replay, session=session)))
    made = ev[ev["event"].notna()] if ev is not None and len(ev) else None
    if made is not None and len(made):
        call = int(made.groupby("call")["tokens_saved"].sum().idxmax())
        for side in ("before", "after"):
            out.append((f"The request of call {call:,}, the biggest compaction, {side} it: "
                        "every part a block, by layer.",
                        plot_context(replay, call, side=side, session=session)))
    out.append(("What survived: needed-fact recall per call and retention per event.",
                plot_retention(replay, session=session)))
    return out


_XML_HEAD = re.compile(r"\A\s*(?:<\?xml[^>]*\?>\s*)?(?:<!DOCTYPE[^>]*>\s*)?")
_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(href="#|url\(#)([^")]+)')
_TEXT_NODE = re.compile(r">([^<]+)<")
_COMMENT = re.compile(r"<!--(.*?)-->", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)


def inline_svg(svg: str, prefix: str, *, redact: bool = False) -> str:
    """SVG text ready to sit inside an HTML page beside others.

    The XML declaration, doctype and metadata go; every ``id`` (and reference to it) gets
    ``prefix`` so two figures' clip paths and glyphs cannot collide; with ``redact``,
    secrets in text and comments are masked.

    Example:
        >>> inline_svg('<?xml version="1.0"?><svg><clipPath id="c1"/>'
        ...            '<g clip-path="url(#c1)"><!-- sk-ant-' + 'x1' * 12 + ' --></g></svg>',
        ...            "f0-", redact=True)  # doctest: +NORMALIZE_WHITESPACE
        '<svg><clipPath id="f0-c1"/><g clip-path="url(#f0-c1)"><!--
         [REDACTED:anthropic-key] --></g></svg>'
    """
    svg = _METADATA.sub("", _XML_HEAD.sub("", svg))
    svg = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', svg)
    svg = _REF.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}", svg)
    if redact:
        svg = _COMMENT.sub(lambda m: f"<!--{redact_text(m.group(1))}-->", svg)
        svg = _TEXT_NODE.sub(lambda m: f">{redact_text(m.group(1))}<", svg)
    return svg.strip()


def _plots(replay: Replay, cells: _Cells) -> str:
    from ctxlab.viz.plots import figure_svg

    parts = ['<section id="plots"><h2>Plots</h2>']
    sessions = plotted_sessions(replay)
    replayed = set(replay.calls["session"]) if len(replay.calls) else set()
    left_out = len(replayed - set(sessions))
    bare = len(set(replay.base.sessions) - replayed)
    if left_out or bare:
        said = [f"{left_out:,} other session{'s are' if left_out != 1 else ' is'} not drawn "
                "(their rows are in the tables)"] if left_out else []
        if bare:
            said.append(f"{bare:,} session{'s have' if bare != 1 else ' has'} no replayed "
                        "call")
        parts.append(f'<p class="note">Plots of the {len(sessions)} sessions where '
                     f"compaction saved the most tokens, then with the most requests over "
                     f"the window, triggers and calls; {'; '.join(said)}.</p>")
    k = 0
    for session in sessions:
        if len(replay.base.sessions) > 1:
            parts.append(f"<h3>Session {cells.text(session)}</h3>")
        for caption, fig in _figures(replay, session):
            svg = inline_svg(figure_svg(fig), f"f{k}-", redact=cells.redact)
            parts.append(f"<figure>{svg}<figcaption>{cells.text(caption)}</figcaption>"
                         "</figure>")
            k += 1
    if not sessions:
        parts.append('<p class="note">No plots: no call was replayed.</p>')
    parts.append("</section>")
    return "".join(parts)


def _columns(df: pd.DataFrame, wanted: Iterable[str], sessions: int) -> pd.DataFrame:
    cols = [c for c in wanted if c in df.columns and (c != "session" or sessions > 1)]
    return df[cols]


def _events(replay: Replay, cells: _Cells) -> str:
    ev = replay.events
    n_sessions = len(replay.base.sessions)
    failed = int(ev["failure"].notna().sum()) if "failure" in ev else 0
    made = len(ev) - failed
    note = (f"{made:,} event{'' if made == 1 else 's'}"
            + (f" and {failed:,} failed summarizer attempt{'' if failed == 1 else 's'} "
               "(highlighted: no event was made and the next stage ran)" if failed else "")
            + ".")
    table = _table(_columns(ev, EVENT_COLUMNS, n_sessions), cells, frame="Replay.events",
                   row_class=lambda r: "failed" if pd.notna(r.get("failure")) else "")
    return (f'<section id="events"><h2>Events</h2><p class="note">{cells.text(note)}</p>'
            f"{table}</section>")


def _previews(replay: Replay, ledger: pd.DataFrame, cells: _Cells) -> pd.Series:
    f = replay.transcript.frame[["session", "part", "content"]].drop_duplicates(
        ["session", "part"])
    merged = ledger[["session", "part"]].astype({"part": "int64"}).merge(
        f.astype({"part": "int64"}), on=["session", "part"], how="left")

    content = merged["content"].astype("string")
    if cells.redact:
        content = content.map(redact_text, na_action="ignore").astype("string")
    shown = preview_texts(content, PREVIEW_CHARS)
    return pd.Series(shown.astype(object).where(shown.notna(), pd.NA).tolist(),
                     index=ledger.index, dtype=object)


def _ledger(replay: Replay, cells: _Cells) -> str:
    led = replay.ledger
    n_sessions = len(replay.base.sessions)

    def with_preview(shown: pd.DataFrame) -> pd.DataFrame:
        return _columns(shown.assign(preview=_previews(replay, shown, cells)), LEDGER_COLUMNS,
                        n_sessions)

    table = _table(led, cells, frame="Replay.ledger", prepare=with_preview)
    note = (f"{len(led):,} rows: every part an event hid or inserted, with the first "
            f"{PREVIEW_CHARS} characters of its content; the reason of each event is in "
            "the events table.")
    return (f'<section id="ledger"><h2>Ledger</h2><p class="note">{cells.text(note)}</p>'
            f"{table}</section>")


def _fidelity(replay: Replay, t: Transcript, given: bool, cells: _Cells) -> str:
    from ctxlab.fidelity import compaction_points_df, fidelity_df, fidelity_errors_df

    if not t.calls["input_total"].notna().any():
        note = ("This log reports no per-call usage (input_total): there is nothing to "
                "compare the replay's estimated requests with.")
        return ('<section id="fidelity"><h2>Fidelity</h2>'
                f'<p class="note">{cells.text(note)}</p></section>')
    if not len(replay.calls) or "tokens_after" not in replay.calls:
        note = ("No call was replayed (the log's calls record no input): there is nothing "
                "to compare with the input the provider reported.")
        return ('<section id="fidelity"><h2>Fidelity</h2>'
                f'<p class="note">{cells.text(note)}</p></section>')
    fid = fidelity_df(t, replay)
    n = len(t.sessions)
    per_session = _table(fidelity_errors_df(fid), cells, frame="fidelity_errors_df")
    points = compaction_points_df(t, replay)
    points = _table(_columns(points, points.columns, n), cells, frame="compaction_points_df")
    per_call = _table(_columns(fid, fid.columns, n), cells, frame="fidelity_df")
    note = ("The replay's requests against the input the provider reported, per session, "
            "per compaction and per call.")
    if not given:
        note += (" Recorded compactions are not known to the report (it was given no "
                 "transcript), so the real compaction points are missing.")
    legend = {k: f'<p class="note">{cells.text(v)}</p>' for k, v in FIDELITY_LEGENDS.items()}
    return ('<section id="fidelity"><h2>Fidelity</h2>'
            f'<p class="note">{cells.text(note)}</p>'
            f"<h3>Per session</h3>{legend['session']}{per_session}"
            f"<h3>Compaction points</h3>{legend['points']}{points}"
            f"<h3>Per call</h3>{legend['call']}{per_call}</section>")


FIDELITY_LEGENDS = {
    "session": "calls: calls with both a reported and an estimated input; mape_pct: the mean "
               "of |error| over them, bias_pct: of the signed error (positive: the replay "
               "counts more than was billed), p95 and max: the 95th percentile and the worst "
               "call; aligned_calls and aligned_mape_pct: the same over the calls where the "
               "log and the replay had compacted equally often, so that a compaction "
               "predicted a few calls late does not count as estimation error.",
    "points": "The k-th compaction the log recorded in a session beside the replay's k-th: "
              "real_call is the first call after the recorded one, offset_calls is "
              "predicted − real (within ±2 calls: the trigger predicted it). pre_tokens: "
              "the agent's own count when it compacted, and the replay's request at its "
              "call and at the real one. post_error_pct compares the replay's request right "
              "after its compaction with the input reported right after the real one: far "
              "apart when the offset is, since the two come from different calls.",
    "call": "segment: recorded compactions before the call; est_tokens_before and "
            "est_tokens: the replay's request before and after compacting at the call, "
            "against input_total, what the provider reported; error = est_tokens − "
            "input_total. real_compaction: the log compacted just before this call; "
            "predicted_compaction: the replay compacted at it."}
"""What the columns of the fidelity section's three tables mean, under each heading."""


def report_html(replay: Replay, *, transcript: Transcript | None = None, redact: bool = False,
                title: str | None = None) -> str:
    """The report page of a replay, as text (see `report`)."""
    from ctxlab import __version__

    cells = _Cells(redact)
    source = transcript if transcript is not None else replay.base
    name = Path(str(source.meta["path"])).name if source.meta.get("path") else "a log"
    title = title if title is not None else f"ctxlab report: {replay.pipeline.name} on {name}"
    fidelity = _fidelity(replay, source, transcript is not None, cells)
    nav = "".join(f'<a href="#{k}">{k.capitalize()}</a>' for k in (
        "settings", "summary", "plots", "events", "ledger") + (("fidelity",) if fidelity
                                                              else ()))
    body = [_settings(replay, source, cells), _summary(replay, cells), _plots(replay, cells),
            _events(replay, cells), _ledger(replay, cells), fidelity]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{cells.text(title)}</title><style>{STYLE}</style></head>\n<body><main>"
            f"<h1>{cells.text(title)}</h1><nav>{nav}</nav>\n" + "\n".join(b for b in body if b)
            + f"\n<footer>Made by ctxlab {html.escape(__version__)}"
            + (", secrets redacted" if redact else "") + ".</footer></main></body></html>\n")


def report(replay: Replay, path: str | Path, *, transcript: Transcript | None = None,
           redact: bool = False, title: str | None = None) -> Path:
    """Write one self-contained HTML report of a replay.

    Args:
        replay: the result of `ctxlab.replay`.
        path: the ``.html`` file to write (its folder is created).
        transcript: the log the replay ran over, as loaded. It gives the page its
            fidelity section (which says so when the log reports no usage) with the
            recorded compaction points, and the load report; without it the replay's own
            rewound log is used.
        redact: mask API keys and tokens in every text shown (`ctxlab.redact.redact`).
        title: the page's title (default: pipeline and file name).

    Returns:
        The path written.

    Example:
        >>> import ctxlab
        >>> t = ctxlab.load("datasets/coding_session_b.jsonl")
        >>> r = ctxlab.replay(t, "neuron", window=100_000)
        >>> report(r, "/tmp/ctxlab-doctest-report.html", transcript=t).suffix  # doctest: +SKIP
        '.html'
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report_html(replay, transcript=transcript, redact=redact, title=title),
                   encoding="utf-8", newline="\n")
    return out


__all__ = ["inline_svg", "plotted_sessions", "report", "report_html"]
