"""The ``ctxlab sweep`` command: replay a grid of configurations over a folder of logs.

`add_sweep_command` adds it to the ``ctxlab`` parser (`ctxlab.cli.build_parser`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from ctxlab.errors import ConfigError

SWEEP_EXAMPLES = """examples:
    ctxlab sweep datasets/ --grid threshold=0.6:0.95:0.05 --preset neurolink,copilot-fixed \\
        -o results.parquet
    ctxlab sweep logs/ --preset neurolink --grid prune.protect_tokens=10000,40000 \\
        --require max_overflows=0 --require min_recall=0.98 -o results.csv
    ctxlab sweep session.jsonl --grid window=100k,200k --workers 1 -o r.parquet
    ctxlab convert logs/ -o corpus/ && ctxlab sweep corpus/ --engine dask --workers 4 \\
        --grid threshold=0.6:0.95:0.05 -o results.parquet

--grid takes name=start:stop:step (stop included) or name=v1,v2 (windows as 200k or
100k:200k:50k); names: preset, threshold, target, window, estimator, or stage.param
(a stage parameter, applied to the presets that have that stage). Rows: one per
configuration and session, the metrics of ctxlab.sweep, the same from either engine.
--require prints the recommended configurations. A corpus dataset (ctxlab convert DIR
-o corpus/) is read one session at a time by the workers.
"""
SHOWN = ("preset", "threshold", "target", "window", "estimator", "sessions", "compactions",
         "calls_compacted", "tokens_sent", "cost", "overflows", "forced_final", "recall",
         "retention", "recall_per_mtok")


def _constraints(specs: list[str] | None) -> dict[str, float]:
    from ctxlab.recommend import CONSTRAINTS, check_constraints

    out: dict[str, float] = {}
    for spec in specs or []:
        name, sep, value = spec.partition("=")
        name = name.strip()
        if not sep or name not in CONSTRAINTS:
            raise ConfigError(f"bad --require {spec!r}: write name=value with name one of "
                              f"{', '.join(CONSTRAINTS)}")
        try:
            out[name] = float(value)
            check_constraints({name: out[name]})
        except ValueError:
            raise ConfigError(f"bad --require {spec!r}: {value!r} is not a number") from None
        except ConfigError as e:
            raise ConfigError(f"bad --require {spec!r}: {e}") from None
    return out


def _table(df: pd.DataFrame) -> str:
    cols = [c for c in SHOWN if c in df] + [c for c in df if "." in c]
    show = df[cols].copy()
    for c in ("recall", "retention"):
        show[c] = show[c].map(lambda v: "-" if pd.isna(v) else f"{v:.1%}")
    show["cost"] = show["cost"].map(lambda v: f"{v:,.2f}")
    show["recall_per_mtok"] = show["recall_per_mtok"].map(lambda v: f"{v:.4f}")
    return show.to_string(index=False, na_rep="-")


def sweep_text(results: pd.DataFrame, constraints: dict[str, float],
               quality: str = "recall") -> str:
    """What ``ctxlab sweep`` prints: totals per configuration, then the recommendation
    (configurations alike in every number as one row: `alike`) on the cost/``quality``
    front."""
    from ctxlab.recommend import aggregate, recommend

    agg = aggregate(results)
    measure = results["measure"].iloc[0] if "measure" in results and len(results) else None
    counted_by = f", tokens sent and cost counted by {measure}" if measure else ""
    lines = [f"per configuration (totals over sessions; cost in USD, illustrative prices"
             f"{counted_by}):",
             _table(agg)]
    if constraints:
        lines += ["", "recommended (" + ", ".join(f"{k}={v:g}" for k, v in constraints.items())
                  + f"; cost/{quality} Pareto front, best {quality} per million tokens "
                    f"first):"]
        try:
            lines.append(_table(alike(recommend(results, quality=quality, **constraints),
                                      agg)))
        except ConfigError as e:
            lines.append(f"  {e}")
    return "\n".join(lines)


def alike(rows: pd.DataFrame, agg: pd.DataFrame) -> pd.DataFrame:
    """Rows of `ctxlab.recommend.recommend` (or `aggregate`) whose numbers are all alike as
    one row, at the first one's place: a column that varies among them lists its values
    (a run of ``agg``'s values as ``first–last``), the first such one with how many
    configurations are alike.

    Example:
        >>> agg = pd.DataFrame({"preset": ["a", "a", "a", "b"], "threshold": [0.6, 0.7, 0.8, 0.7],
        ...                     "sessions": 1, "cost": [1.0, 1.0, 1.0, 2.0]})
        >>> alike(agg, agg)[["preset", "threshold", "cost"]].astype(str).values.tolist()
        [['a', '0.6–0.8 (3 alike)', '1.0'], ['b', '0.7', '2.0']]
        >>> alike(agg.iloc[[0, 2]], agg)["threshold"].tolist()  # 0.7 is not one of them
        ['0.6, 0.8 (2 alike)']
    """
    at = rows.columns.get_loc("sessions")
    keys, numbers = list(rows.columns[:at]), [c for c in rows.columns[at:] if c != "seconds"]
    group = rows.groupby(numbers, sort=False, dropna=False).ngroup().to_numpy()
    if len(set(group)) == len(rows):
        return rows
    out = []
    for g in pd.unique(group):
        same = rows[group == g]
        row = same.iloc[0].astype(object)
        counted = False
        for k in keys if len(same) > 1 else []:
            values = list(pd.unique(same[k].dropna()))
            if len(values) > 1:
                row[k] = _values(values, list(pd.unique(agg[k].dropna()))) + (
                    "" if counted else f" ({len(same)} alike)")
                counted = True
        out.append(row)
    return pd.DataFrame(out, columns=rows.columns)


def _values(values: list[Any], every: list[Any]) -> str:
    """Some values of a column: ``first–last`` when they are a run of three or more of
    ``every`` value it takes (sorted), else each."""
    def text(v: Any) -> str:
        return f"{v:g}" if isinstance(v, float) else str(v)
    try:
        values, every = sorted(values), sorted(every)
    except TypeError:       # values that do not sort: each, as given
        return ", ".join(map(text, values))
    at = every.index(values[0]) if values[0] in every else -1
    if len(values) >= 3 and at >= 0 and every[at:at + len(values)] == values:
        return f"{text(values[0])}–{text(values[-1])}"
    return ", ".join(map(text, values))


def left_out_lines(attrs: dict[str, Any], path: str) -> list[str]:
    """The warnings and notes on what a sweep of ``path`` left out (its result's
    ``attrs``, `ctxlab.sweep.sweep`): records that could not be used, calls without
    recorded input, sessions without an LLM call, files that are not logs; worded as
    ``replay`` and ``info`` word them."""
    from ctxlab.cli import file_lines, no_input_warning, skipped_lines
    from ctxlab.wording import counted

    lines, more = [], f"ctxlab info {path} lists them"
    if attrs.get("skipped"):
        skipped = pd.DataFrame(attrs["skipped"])
        logs = skipped["file"].nunique()
        lines += [f"ctxlab: warning: {counted(len(skipped), 'record')} of "
                  f"{counted(logs, 'log')} could not be used; the sweep ran without them:",
                  *skipped_lines(skipped, more)]
    bare = attrs.get("calls_without_input")
    if bare:
        lines.append(no_input_warning([str(c["source"] or f"{c['file']} session "
                                           f"{c['session']}") for c in bare], path))
    idle = attrs.get("sessions_without_calls")
    if idle:
        lines.append(f"ctxlab: note: {counted(len(idle), 'session')} of {path} "
                     f"{'has' if len(idle) == 1 else 'have'} no LLM call: nothing to replay, "
                     f"left out")
    for rep in attrs.get("sessions_in_several_files") or ():
        lines.append(f"ctxlab: note: session {rep['session']} is in "
                     f"{counted(len(rep['files']), 'file')} ({', '.join(rep['files'])}): each "
                     f"copy was replayed and counts in the totals; sweep one copy to count it "
                     f"once")
    agents = attrs.get("sub_agent_files")
    if agents:
        lines += [f"ctxlab: note: {counted(len(agents), 'sub-agent log')} of {path} not "
                  f"swept: --sidechains sweeps {'it' if len(agents) == 1 else 'them'} with "
                  f"the sessions they belong to",
                  *file_lines(pd.DataFrame(agents).assign(status="part-of"), more)]
    other = attrs.get("not_logs")
    if other:
        lines += [f"ctxlab: note: {counted(len(other), 'file')} of {path} "
                  f"{'is not a log' if len(other) == 1 else 'are not logs'}: not swept",
                  *file_lines(pd.DataFrame(other).assign(status="not-a-log"), more)]
    return lines


NOTES_SHOWN = 12


def note_lines(results: pd.DataFrame) -> list[str]:
    """The configurations' notes (the results' ``note`` column: a stage parameter not
    applied, a window a fixed limit ignores), each once, which the table leaves out: they
    say why rows that differ in a column may not differ in their numbers.

    Example:
        >>> df = pd.DataFrame({"note": ["a; b", None, "b; c"]})
        >>> note_lines(df)
        ['ctxlab: note: a', 'ctxlab: note: b', 'ctxlab: note: c']
    """
    notes = results["note"].dropna().astype(str) if "note" in results \
        else pd.Series(dtype=object)
    said = list(dict.fromkeys(n for note in notes for n in note.split("; ") if n))
    lines = [f"ctxlab: note: {n}" for n in said[:NOTES_SHOWN]]
    if len(said) > NOTES_SHOWN:
        lines.append(f"ctxlab: note: ... and {len(said) - NOTES_SHOWN} more (the results' "
                     f"note column has them)")
    return lines


def _write(df: pd.DataFrame, out: Path) -> None:
    try:
        if out.suffix.lower() == ".csv":
            df.to_csv(out, index=False)
        else:
            df.to_parquet(out, index=False)
    except OSError as e:
        raise ConfigError(f"cannot write {out}: {e.strerror or e}") from None
    except ImportError as e:
        raise ConfigError(f"writing Parquet needs pyarrow ({e}); pip install pyarrow, or "
                          f"write a .csv") from None


def _cmd_sweep(args: argparse.Namespace) -> int:
    from ctxlab.cli import parse_window
    from ctxlab.sweep import sweep
    from ctxlab.sweep_grid import parse_grid

    grid = parse_grid(args.grid or [])
    if args.preset:
        if "preset" in grid:
            raise ConfigError("give presets with --preset or --grid preset=..., not both")
        grid = {"preset": [p.strip() for p in args.preset.split(",") if p.strip()], **grid}
    for name, given in (("window", args.window), ("estimator", args.estimator)):
        if given is not None and name in grid:
            raise ConfigError(f"give {name} with --{name} or --grid {name}=..., not both "
                              f"(--{name} would be left unused)")
    constraints = _constraints(args.require)
    from ctxlab.cli import output_path

    if Path(args.output).suffix.lower() not in (".parquet", ".csv"):
        raise ConfigError(f"-o {args.output}: write a .parquet or .csv file")
    out = output_path(args.output, inputs=[args.path])
    corpus: Any = args.path
    if args.sidechains:             # sub-agents' logs loaded with the sessions they belong to
        from ctxlab import load, load_dir
        corpus = load_dir(args.path, sidechains=True) if Path(args.path).is_dir() else \
            load(args.path, sidechains=True)
    df = sweep(corpus, grid, engine=args.engine, estimator=args.estimator,
               window=parse_window(args.window), workers=args.workers,
               measure=args.measure, progress=True if args.progress else None)
    notes = left_out_lines(df.attrs, args.path)
    left = df.attrs.get("not_replayed") or []
    if left:        # sessions that are no agent's (Claude Code's compaction summarizer)
        from ctxlab.wording import counted
        notes.append(f"ctxlab: note: {counted(len(left), 'session')} left out: "
                     + "; ".join(str(r["reason"]) for r in left[:3])
                     + (" …" if len(left) > 3 else ""))
    if notes:
        print("\n".join(notes), file=sys.stderr)
    if df.empty:
        why = ("no log could be read or replayed (see the warning above)"
               if df.attrs.get("skipped") else
               "its logs record no LLM call with input to replay")
        raise ConfigError(f"nothing to sweep in {args.path}: {why} (ctxlab info {args.path} "
                          f"shows what they hold); nothing was written")
    _write(df, out)
    from ctxlab.wording import counted
    configs = counted(df["config"].nunique(), "configuration")
    sessions = counted(len(df[["file", "session"]].drop_duplicates()), "session")
    print(f"wrote {out}: {counted(len(df), 'row')} ({configs} x {sessions})")
    print(sweep_text(df, constraints, args.front))
    notes = note_lines(df)
    if notes:
        sys.stdout.flush()          # below the table on a terminal
        print("\n".join(notes), file=sys.stderr)
    return 0


def add_sweep_command(sub: Any) -> argparse.ArgumentParser:
    """Add ``sweep`` to the subparsers of the ``ctxlab`` parser."""
    sp = sub.add_parser("sweep", help="replay a grid of configurations over a folder of logs",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog=SWEEP_EXAMPLES)
    sp.add_argument("path", help="a folder of logs, a corpus dataset, or one log file")
    sp.add_argument("--grid", action="append", metavar="NAME=VALUES",
                    help="a grid dimension, repeatable: threshold=0.6:0.95:0.05, "
                         "prune.protect_tokens=10000,40000")
    sp.add_argument("--preset", default=None,
                    help="comma-separated presets (default neurolink)")
    sp.add_argument("--window", default=None, metavar="TOKENS",
                    help="context window, e.g. 200k (default: each call's model's)")
    sp.add_argument("--estimator", default=None,
                    help="token estimator spec (default: each pipeline's)")
    sp.add_argument("--measure", default=None, metavar="SPEC",
                    help="the estimator that counts tokens sent and cost for every "
                         "configuration alike (default: tiktoken:o200k_base)")
    sp.add_argument("--engine", choices=("local", "dask"), default="local",
                    help="local: a process pool (default); dask: a Dask LocalCluster, one "
                         "task per session (pip install 'ctxlab[dask]')")
    sp.add_argument("--workers", type=int, default=None,
                    help="processes (default: the CPU count; local 1: no process pool)")
    sp.add_argument("--require", action="append", metavar="NAME=VALUE",
                    help="a constraint for the recommendation, repeatable: max_overflows=0, "
                         "min_recall=0.98, max_cost=..., min_retention=...")
    sp.add_argument("--front", choices=("recall", "retention"), default="recall",
                    help="what the recommendation's Pareto front weighs against cost: "
                         "recall of needed facts (default) or retention of artifacts")
    sp.add_argument("--sidechains", action="store_true",
                    help="also sweep sub-agent conversations, with the sessions they belong "
                         "to")
    sp.add_argument("--progress", action="store_true",
                    help="show the progress bar even when stderr is not a terminal")
    sp.add_argument("-o", "--output", required=True,
                    help="results file: .parquet or .csv (by its suffix; any other is "
                         "refused)")
    sp.set_defaults(func=_cmd_sweep)
    return sp


__all__ = ["add_sweep_command", "sweep_text"]
