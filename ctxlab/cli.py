"""The ``ctxlab`` command.

    ctxlab info PATH            what a log (or a folder of logs) holds
    ctxlab convert PATH -o OUT  save a log as ctxlab Parquet (loads back exactly)
    ctxlab estimators PATH      how wrong each token estimator is, by content class and
                                against the usage the provider reported

examples:
    ctxlab estimators datasets/ -e chars:4 -e neurolink:anthropic -e neuron
    ctxlab estimators session.jsonl --reference tiktoken:cl100k_base --calibrate cal.json
    ctxlab estimators --list
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import pandas as pd

from ctxlab.errors import ConfigError, CtxlabError
from ctxlab.loaders import load, load_dir
from ctxlab.loaders.corpus import Corpus
from ctxlab.overview import parts_by_role_kind_df, sessions_df, usage_summary
from ctxlab.schema import Transcript
from ctxlab.tokens import Estimator

MAX_SKIPPED_SHOWN = 20


def _n(v: int | None) -> str:
    return "-" if v is None or pd.isna(v) else f"{int(v):,}"


def _table(df: pd.DataFrame) -> str:
    return df.to_string(index=False, na_rep="-") if len(df) else "  (none)"


def _report_lines(t: Transcript | Corpus) -> list[str]:
    rep = t.load_report
    lines = [f"load report: {rep}"]
    sk = rep.skipped
    for r in sk.head(MAX_SKIPPED_SHOWN).itertuples():
        loc = f"{r.file}:{r.line}" if not pd.isna(r.line) else f"{r.file} ({r.where})"
        lines.append(f"  skipped {loc}: {r.reason}")
    if len(sk) > MAX_SKIPPED_SHOWN:
        lines.append(f"  ... and {len(sk) - MAX_SKIPPED_SHOWN} more (see Transcript.load_report)")
    return lines


def info_text(t: Transcript) -> str:
    """The ``ctxlab info`` text of one loaded file."""
    m = t.meta
    u = usage_summary(t)
    version = m.get("version") or m.get("cli_version")
    lines = [f"file:        {m.get('path')}",
             f"format:      {m.get('format')}" + (f" (version {version})" if version else ""),
             f"sessions:    {len(t.sessions)}",
             f"parts:       {len(t.frame):,} ({int(t.frame['hidden_by'].isna().sum()):,} visible)",
             f"calls:       {u['calls']:,} ({u['calls_with_usage']:,} with reported usage)",
             f"input_total: sum {_n(u['input_total'])}, max {_n(u['max_input_total'])}; "
             f"cache read {_n(u['cache_read'])}, cache write {_n(u['cache_write'])}; "
             f"output {_n(u['output_tokens'])}"]
    rec = t.events[t.events["origin"] == "recorded"]
    lines.append(f"recorded compactions: {len(rec)}")
    for r in rec.itertuples():
        lines.append(f"  {r.session} event {r.event}: trigger {r.trigger}, "
                     f"pre_tokens {_n(r.pre_tokens)}")
    lines += ["", "parts by role and kind:", _table(parts_by_role_kind_df(t)), ""]
    if len(t.sessions) > 1 or len(t.calls):
        lines += ["sessions:", _table(sessions_df(t).drop(columns=["format"])), ""]
    lines += _report_lines(t)
    return "\n".join(lines)


def corpus_text(c: Corpus) -> str:
    """The ``ctxlab info`` text of a folder."""
    counts = c.files["status"].value_counts()
    lines = [f"folder: {len(c.files)} files: {int(counts.get('log', 0))} logs, "
             f"{int(counts.get('part-of', 0))} sub-agent files, "
             f"{int(counts.get('not-a-log', 0))} not logs"]
    other = c.files[c.files["status"] != "log"]
    for r in other.itertuples():
        lines.append(f"  {r.status}: {r.path}: {r.note}")
    lines += ["", "sessions:", _table(sessions_df(c)), ""]
    lines += _report_lines(c)
    return "\n".join(lines)


def _cmd_info(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if path.is_dir():
        print(corpus_text(load_dir(path, strict=args.strict, sidechains=args.sidechains)))
    else:
        print(info_text(load(path, format=args.format, strict=args.strict,
                             sidechains=args.sidechains)))
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    from ctxlab.loaders.parquet import save_parquet

    t = load(args.path, format=args.format, strict=args.strict, sidechains=args.sidechains)
    out = save_parquet(t, args.output)
    print(f"wrote {out}: {len(t.frame):,} parts, {len(t.calls):,} calls, "
          f"{len(t.events):,} events")
    return 0


DEFAULT_ESTIMATORS = ("chars:4", "neurolink:anthropic", "neuron", "langchain")


def estimators_text(source: Transcript | Corpus, specs: Sequence[str], reference: str,
                    calibration: Path | None = None) -> str:
    """The ``ctxlab estimators`` text: errors by content class, then against reported usage."""
    from ctxlab.tokens.accuracy import (compare_estimators_df, estimator_errors_df,
                                        reported_usage_df, usage_errors_df)
    from ctxlab.tokens.calibration import calibrate

    ests: list[str | Estimator] = list(specs)
    lines: list[str] = []
    has_usage = bool(source.calls["input_total"].notna().sum() >= 3)
    if calibration is not None:
        if not has_usage:
            raise ConfigError("--calibrate needs reported usage (input_total) on 3+ calls")
        cal = calibrate(source, reference="reported")
        cal.save(calibration)
        ests.append(cal)
        lines += [f"calibration written to {calibration} (scale {cal.rates.scale:.3f}, "
                  f"{cal.rates.calls} calls); use it as calibrated:{calibration}", ""]
    errs = estimator_errors_df(compare_estimators_df(source, ests, reference=reference))
    lines += [f"per part against {reference} (error %: estimate - reference):",
              _table(errs.round(1)), ""]
    if has_usage:
        usage = pd.concat([usage_errors_df(reported_usage_df(source, e)) for e in ests])
        lines += ["per call against reported input_total (overhead fitted per session):",
                  _table(usage.round(1))]
    else:
        lines.append("no reported usage in this log: per-call comparison skipped")
    return "\n".join(lines)


def _cmd_estimators(args: argparse.Namespace) -> int:
    if args.list:
        from ctxlab.tokens import families
        for f in families():
            print(f"{f.name:18} {f.doc}")
        return 0
    if not args.path:
        raise ConfigError("give a log file or folder (or --list)")
    path = Path(args.path)
    source = load_dir(path) if path.is_dir() else load(path, format=args.format)
    print(estimators_text(source, args.estimator or DEFAULT_ESTIMATORS, args.reference,
                          Path(args.calibrate) if args.calibrate else None))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ctxlab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("path", help="a log file (or, for info, a folder of logs)")
        sp.add_argument("--format", default=None, help="force a loader instead of detecting")
        sp.add_argument("--strict", action="store_true",
                        help="fail at the first record that cannot be used")
        sp.add_argument("--sidechains", action="store_true",
                        help="also load sub-agent conversations")

    info = sub.add_parser("info", help="what a log or folder of logs holds")
    common(info)
    info.set_defaults(func=_cmd_info)
    conv = sub.add_parser("convert", help="save a log as ctxlab Parquet")
    common(conv)
    conv.add_argument("-o", "--output", required=True, help="output .parquet file")
    conv.set_defaults(func=_cmd_convert)
    est = sub.add_parser("estimators", help="estimator errors by content class and per call")
    est.add_argument("path", nargs="?", help="a log file or a folder of logs")
    est.add_argument("-e", "--estimator", action="append",
                     help=f"estimator spec, repeatable (default: {', '.join(DEFAULT_ESTIMATORS)})")
    est.add_argument("--reference", default="tiktoken:o200k_base",
                     help="exact tokenizer taken as truth per part (default tiktoken:o200k_base)")
    est.add_argument("--calibrate", metavar="FILE", default=None,
                     help="fit a calibrated estimator on the reported usage and save it here")
    est.add_argument("--format", default=None, help="force a loader instead of detecting")
    est.add_argument("--list", action="store_true", help="list the estimator families")
    est.set_defaults(func=_cmd_estimators)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CtxlabError as e:
        print(f"ctxlab: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
