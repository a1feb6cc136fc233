"""ctxlab: load agent transcripts, replay context compaction over them, see what it costs.

    ctxlab info PATH            what a log (or a folder of logs) holds
    ctxlab convert PATH -o OUT  save a log as ctxlab Parquet (loads back exactly), or a
                                folder of logs as a corpus dataset (Parquet by session)
    ctxlab estimators PATH      how wrong each token estimator is, by content class and
                                against the usage the provider reported
    ctxlab replay LOG           replay a compaction pipeline over a log: summary and events
    ctxlab report LOG -o OUT    the same as one self-contained HTML page (plots, ledger,
                                fidelity against reported usage)
    ctxlab sweep DIR -o OUT     replay a grid of configurations over a folder of logs and
                                recommend one (per session metrics, .parquet or .csv)

examples:
    ctxlab info datasets/
    ctxlab replay datasets/coding_session.jsonl --preset neurolink --window 200k
    ctxlab report datasets/coding_session.jsonl --preset claude-code -o report.html
    ctxlab report session.jsonl --preset neuron -o shared.html --redact
    ctxlab estimators datasets/ -e chars:4 -e neurolink:anthropic -e neuron
    ctxlab estimators session.jsonl --reference tiktoken:cl100k_base --calibrate cal.json
    ctxlab estimators --list
    ctxlab sweep datasets/ --preset neurolink,copilot-fixed --grid threshold=0.6:0.95:0.05 \\
        -o results.parquet --require max_overflows=0

Run "ctxlab COMMAND --help" for a command's options and examples."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from ctxlab.cli_sweep import add_sweep_command
from ctxlab.errors import ConfigError, CtxlabError, LoadError
from ctxlab.loaders import load, load_dir
from ctxlab.loaders.corpus import Corpus
from ctxlab.overview import parts_by_role_kind_df, recorded_totals, sessions_df, usage_summary
from ctxlab.presets import preset_names
from ctxlab.schema import LoadReport, Transcript
from ctxlab.wording import counted, usage_text
from ctxlab.tokens import Estimator

if TYPE_CHECKING:
    from ctxlab.replay import Replay

MAX_SKIPPED_SHOWN = 20


def _n(v: int | None) -> str:
    return "-" if v is None or pd.isna(v) else f"{int(v):,}"


def _table(df: pd.DataFrame) -> str:
    return df.to_string(index=False, na_rep="-") if len(df) else "  (none)"


def _report_lines(t: Transcript | Corpus) -> list[str]:
    rep = t.load_report
    return [f"load report: {rep}", *skipped_lines(rep.skipped, "see Transcript.load_report")]


def skipped_warning(sk: pd.DataFrame, where: str, outcome: str) -> str | None:
    """The warning on records of ``where`` that could not be used (`LoadReport.skipped`),
    for every command that reads a log, with what the command did without them
    (``outcome``); None when there are none.

    Example:
        >>> sk = pd.DataFrame({"file": ["s.jsonl"], "line": [3], "where": [None],
        ...                    "reason": ["malformed JSON"]})
        >>> print(skipped_warning(sk, "s.jsonl", "the output is written without them"))
        ctxlab: warning: 1 record of s.jsonl could not be used; the output is written \
without them:
          skipped s.jsonl:3: malformed JSON
    """
    if not len(sk):
        return None
    return "\n".join([f"ctxlab: warning: {counted(len(sk), 'record')} of {where} could not "
                      f"be used; {outcome}:",
                      *skipped_lines(sk, f"ctxlab info {where} lists them")])


def skipped_why(t: Transcript, path: str, fmt: str | None) -> str:
    """Words on a log none of whose records could be used, for an error: how many were
    skipped, the format read, and the ``ctxlab info`` command (with the ``--format`` given,
    ``fmt``) that lists them; "" when none was skipped."""
    skipped = t.load_report.skipped
    if not len(skipped):
        return ""
    again = f"ctxlab info {path}" + (f" --format {fmt}" if fmt else "")
    return (f" ({counted(len(skipped), 'record')} skipped: is it a {t.meta.get('format')} log? "
            f"{again} says why)")


def skipped_lines(sk: pd.DataFrame, more: str) -> list[str]:
    """One line per skipped record (`LoadReport.skipped`: file:line and why), the first
    `MAX_SKIPPED_SHOWN`, then how many more (``more``: where to see them)."""
    lines = []
    for r in sk.head(MAX_SKIPPED_SHOWN).itertuples():
        loc = f"{r.file}:{int(r.line)}" if not pd.isna(r.line) else f"{r.file} ({r.where})"
        lines.append(f"  skipped {loc}: {r.reason}")
    if len(sk) > MAX_SKIPPED_SHOWN:
        lines.append(f"  ... and {len(sk) - MAX_SKIPPED_SHOWN} more ({more})")
    return lines


def file_lines(files: pd.DataFrame, more: str = "") -> list[str]:
    """One line per file of a folder that is not a log of its own (`Corpus.files` rows:
    its status, path and why); with ``more`` (where to see them), the first
    `MAX_SKIPPED_SHOWN`, then how many more."""
    shown = files.head(MAX_SKIPPED_SHOWN) if more else files
    lines = [f"  {r.status}: {r.path}: {r.note}" for r in shown.itertuples()]
    if len(files) > len(shown):
        lines.append(f"  ... and {len(files) - len(shown)} more ({more})")
    return lines


def no_input_warning(sources: Sequence[str], where: str) -> str:
    """The warning on calls without recorded input (`ctxlab.replay.calls_without_input`),
    which a replay or a sweep leaves out: ``sources``, the calls' sources, in ``where``.

    Example:
        >>> no_input_warning(["log.md:12"], "log.md")
        'ctxlab: warning: 1 call of log.md (log.md:12) has no recorded input (its session \
holds no part): not replayed'
    """
    one = len(sources) == 1
    return (f"ctxlab: warning: {counted(len(sources), 'call')} of {where} "
            f"({', '.join(sources[:3])}{' …' if len(sources) > 3 else ''}) "
            f"{'has' if one else 'have'} no recorded input ({'its' if one else 'their'} "
            f"session holds no part): not replayed")


def info_text(t: Transcript, path: Path | None = None) -> str:
    """The ``ctxlab info`` text of one loaded file (``path``: the file given, when it is a
    saved copy of the log the transcript names)."""
    m = t.meta
    u = usage_summary(t)
    version = m.get("version") or m.get("cli_version")
    shown = str(path) if path is not None else str(m.get("path"))
    if path is not None and m.get("path") and Path(str(m["path"])).resolve() != path.resolve():
        shown += f" (saved from {m['path']})"
    lines = [f"file:        {shown}",
             f"format:      {m.get('format')}" + (f" (version {version})" if version else ""),
             f"sessions:    {len(t.sessions)}",
             f"parts:       {len(t.frame):,} ({int(t.frame['hidden_by'].isna().sum()):,} visible)",
             f"calls:       {u['calls']:,} ({u['calls_with_usage']:,} with reported usage)",
             f"input_total: sum {_n(u['input_total'])}, max {_n(u['max_input_total'])}; "
             f"cache read {_n(u['cache_read'])}, cache write {_n(u['cache_write'])}; "
             f"output {_n(u['output_tokens'])}"]
    totals = recorded_totals(t)
    if totals:
        lines.append(f"recorded:    {totals}")
    rec = t.events[t.events["origin"] == "recorded"]
    lines.append(f"recorded compactions: {len(rec)}")
    for r in rec.itertuples():
        lines.append(f"  {r.session} event {r.event}: trigger {r.trigger}, "
                     f"pre_tokens {_n(r.pre_tokens)}")
    lines += ["", "parts by role and kind:", _table(parts_by_role_kind_df(t)), ""]
    if len(t.sessions) > 1 or len(t.calls):
        lines += ["sessions:", _table(sessions_df(t).drop(columns=["format"])), ""]
    from ctxlab.replay import helper_sessions
    lines += [f"not replayed: {note}" for note in helper_sessions(t).values()]
    lines += _report_lines(t)
    return "\n".join(lines)


def corpus_text(c: Corpus, root: Path | None = None) -> str:
    """The ``ctxlab info`` text of a folder (of logs, or a corpus dataset)."""
    from ctxlab.loaders.corpus_store import describe, is_dataset

    sessions = _table(sessions_df(c))       # loads the logs: an unreadable one is marked
    counts = c.files["status"].value_counts()
    others = int(counts.get("not-a-log", 0))
    logs = int(counts.get("log", 0))
    lines = [f"folder: {counted(len(c.files), 'file')}: {counted(logs, 'log')}, "
             f"{counted(int(counts.get('part-of', 0)), 'sub-agent file')}, "
             f"{others:,} {'not a log' if others == 1 else 'not logs'}"
             + (f", {int(counts['unreadable'])} unreadable" if counts.get("unreadable") else "")]
    if root is not None and is_dataset(root):
        lines = [f"corpus dataset: {describe(root)}"]
    lines += file_lines(c.files[c.files["status"] != "log"])
    lines += ["", "sessions:", sessions, ""]
    lines += _report_lines(c)
    return "\n".join(lines)


def _folder(args: argparse.Namespace, path: Path) -> bool:
    """Is ``path`` a folder? A folder's logs are detected one by one: ``--format``, which
    forces the loader of one file, is refused rather than left unused."""
    if not path.is_dir():
        return False
    if getattr(args, "format", None) is not None:
        raise ConfigError(f"{path} is a folder, whose logs are detected one by one: --format "
                          f"forces the loader of one log file (drop it, or give one file)")
    return True


def _cmd_info(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if _folder(args, path):
        if not any(p.is_file() for p in path.rglob("*")):
            raise ConfigError(f"{path}: an empty folder, no logs to describe")
        print(corpus_text(load_dir(path, strict=args.strict, sidechains=args.sidechains),
                          path))
    else:
        print(info_text(load(path, format=args.format, strict=args.strict,
                             sidechains=args.sidechains), path))
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    from ctxlab.loaders.corpus_store import describe, load_reports, read_manifest, write_corpus
    from ctxlab.loaders.parquet import save_parquet

    path, out = Path(args.path), Path(args.output)
    _not_an_input(out, "-o", [path])
    if path.is_dir() and (args.format is not None or out.suffix.lower() == ".parquet"):
        raise ConfigError("a folder of logs becomes a corpus dataset folder (its logs detected "
                          "one by one): give -o a folder name, and no --format")
    if path.is_dir() or out.is_dir() or args.output.endswith(("/", "\\")):
        if path.is_dir() and _within(out, path):
            raise ConfigError(f"-o {out}: is inside {path}, the folder it converts; a later "
                              f"info, sweep or convert of {path} would read the dataset's "
                              f"files as logs: write it outside that folder")
        if path.is_dir() and not any(p.is_file() for p in path.rglob("*")):
            raise ConfigError(f"{path}: an empty folder, no logs to convert")
        src = path if path.is_dir() else [_usable(path, args, out)]
        write_corpus(src, out, strict=args.strict, sidechains=args.sidechains,
                     facts=args.facts)
        print(f"wrote {out}: {describe(out)}; open it with ctxlab.load_dir")
        warn = skipped_warning(LoadReport.concat(load_reports(out)).skipped, str(path),
                               "written without them (the dataset's load reports keep them)")
        if warn:
            print(warn, file=sys.stderr)
        for f in read_manifest(out)["other_files"]:
            if f.get("status") == "unreadable":
                print(f"ctxlab: warning: not stored, could not be read: {f['note']}",
                      file=sys.stderr)
        return 0
    if out.suffix.lower() not in ("", ".parquet", ".pq", ".parq"):
        raise ConfigError(f"-o {out}: a log is saved as a Parquet file (.parquet), or give "
                          f"a folder name ending in / for a corpus dataset")
    if not args.facts:     # (a Parquet file of one log stores no facts: nothing to leave out)
        raise ConfigError(f"--no-facts: -o {out} is a Parquet file of one log, which stores "
                          f"no facts; --no-facts applies to a corpus dataset (-o a folder "
                          f"name ending in /)")
    out = output_path(args.output, inputs=[path])
    t = _usable(path, args, out)
    try:
        save_parquet(t, out)
    except OSError as e:
        raise ConfigError(f"cannot write {out}: {e.strerror or e}") from None
    print(f"wrote {out}: {counted(len(t.frame), 'part')}, {counted(len(t.calls), 'call')}, "
          f"{counted(len(t.events), 'event')}")
    warn = skipped_warning(t.load_report.skipped, str(path),
                           "written without them (the file's load report keeps them)")
    if warn:
        print(warn, file=sys.stderr)
    return 0


def _usable(path: Path, args: argparse.Namespace, out: Path) -> Transcript:
    """The log to convert; an error when none of its records could be used (a wrong
    ``--format``), rather than an empty file."""
    t = load(path, format=args.format, strict=args.strict, sidechains=args.sidechains)
    why = skipped_why(t, args.path, args.format)
    if t.frame.empty and t.calls.empty and why:
        raise ConfigError(f"{path}: not written to {out}: no record could be used{why}")
    return t


DEFAULT_ESTIMATORS = ("chars:4", "neurolink:anthropic", "neuron", "langchain")


def estimators_text(source: Transcript | Corpus, specs: Sequence[str], reference: str,
                    calibration: Path | None = None) -> str:
    """The ``ctxlab estimators`` text: errors by content class, then against reported usage,
    each table with the estimators in the order given (``specs``, then the one fitted and
    written to ``calibration``, named ``calibrated:FILE`` as it is used later)."""
    from ctxlab.tokens.accuracy import (MIN_FIT_CALLS, compare_estimators_df,
                                        estimator_errors_df, reported_usage_df,
                                        usage_errors_df)
    from ctxlab.tokens.calibration import calibrate, reported_calls

    ests: list[str | Estimator] = list(specs)
    lines: list[str] = []
    reported = reported_calls(source)
    if calibration is not None:
        if reported < 3:
            raise ConfigError("--calibrate needs reported usage (an input_total above 0) on "
                              "3+ calls")
        cal = calibrate(source, reference="reported")
        try:
            cal.save(calibration)
        except OSError as e:
            raise ConfigError(f"--calibrate {calibration}: cannot write it "
                              f"({e.strerror or e})") from None
        ests.append(f"calibrated:{calibration}")     # named as it is used: the file's
        lines += [f"calibration written to {calibration} (scale {cal.rates.scale:.3f}, "
                  f"{counted(cal.rates.calls, 'call')}); use it as calibrated:{calibration}", ""]
    compared = compare_estimators_df(source, ests, reference=reference)
    errs = estimator_errors_df(compared)     # (sorted by name) in the order given
    order = {e: i for i, e in enumerate(pd.unique(compared["estimator"]))}
    errs = errs.iloc[np.lexsort((errs["estimator"].map(order).to_numpy(),
                                 (errs.iloc[:, 1] == "all").to_numpy()))]
    from ctxlab.tokens import estimator
    what = "error %" if estimator(reference).exact else \
        "not an exact tokenizer, so difference % rather than error"
    lines += [f"per part against {reference} ({what}: estimate - reference):",
              _table(errs.round(1)), ""]
    if reported:
        per_call = [reported_usage_df(source, e) for e in ests]
        usage = pd.concat([usage_errors_df(u) for u in per_call])
        lines += ["per call against reported input_total (overhead fitted per session):",
                  _table(usage.round(1))]
        few = per_call[0]
        few = few[(few["overhead_fitted_on"] > 0) & few["error_pct"].isna()
                  & few["input_total"].notna()]
        if len(few):
            lines.append(f"({len(few):,} call{'s' if len(few) != 1 else ''} in session "
                         f"segments of fewer than {MIN_FIT_CALLS} reporting calls left out: "
                         f"an overhead fitted on them would absorb their error)")
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
    calibration = output_path(args.calibrate, "--calibrate", [args.path]) if args.calibrate \
        else None
    source = load_dir(path) if _folder(args, path) else load(path, format=args.format)
    if source.frame.empty:
        why = skipped_why(source, args.path, args.format) if isinstance(source, Transcript) \
            else ""
        raise ConfigError(f"{path}: no parts to count" + (why or f" (ctxlab info {path} says "
                                                                 f"why)"))
    warn = skipped_warning(source.load_report.skipped, str(path),
                           "the estimators are compared without them")
    if warn:
        print(warn, file=sys.stderr)
    print(estimators_text(source, args.estimator or DEFAULT_ESTIMATORS, args.reference,
                          calibration))
    return 0


MAX_EVENTS_SHOWN = 40
REASON_CHARS = 90
_WINDOW = re.compile(r"(\d[\d_,]*(?:\.\d+)?)([km]?)", re.I)


def parse_window(text: str | None) -> int | None:
    """``--window``: tokens as ``200000``, ``200_000``, ``200k``, ``1.5k`` or ``1m``; None:
    per model. A number that is not a whole number of tokens is refused.

    Example:
        >>> [parse_window(w) for w in ("200k", "1_048_576", "1.5k", None)]
        [200000, 1048576, 1500, None]
    """
    from decimal import Decimal

    if text is None:
        return None
    m = _WINDOW.fullmatch(text.strip())
    n = Decimal(m.group(1).replace("_", "").replace(",", "")) * {
        "": 1, "k": 1_000, "m": 1_000_000}[m.group(2).lower()] if m else Decimal(0)
    if n <= 0:
        raise ConfigError(f"bad --window {text!r}: give the context window in tokens, "
                          f"e.g. 200000, 200k or 1.5m")
    if n != n.to_integral_value():
        raise ConfigError(f"bad --window {text!r}: {n.normalize():,f} is not a whole number "
                          f"of tokens; give the context window in tokens, e.g. 200000, 200k "
                          f"or 1.5m")
    return int(n)


class _Steps:
    """A tqdm bar over a command's steps, on a terminal only (none without tqdm)."""

    def __init__(self, total: int) -> None:
        try:
            from tqdm import tqdm
        except ImportError:
            self.bar: Any = None
        else:
            self.bar = tqdm(total=total, disable=None, leave=False, file=sys.stderr,
                            bar_format="{desc:<32} {bar:24} {n}/{total} [{elapsed}]")
        self.started = False

    def next(self, desc: str) -> None:
        if self.bar is not None:
            if self.started:
                self.bar.update(1)
            self.bar.set_description_str(desc)
            self.started = True

    def write(self, text: str) -> None:
        """A message on stderr that does not break the bar."""
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _load_log(args: argparse.Namespace) -> Transcript:
    path = Path(args.path)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder; {args.command} takes one log file "
                          f"(ctxlab info {path} lists the logs in it)")
    return load(path, format=args.format, strict=args.strict, sidechains=args.sidechains)


def _replay(args: argparse.Namespace, steps: _Steps) -> tuple[Transcript, Replay]:
    from ctxlab.pipeline import resolve_pipeline, window_note
    from ctxlab.replay import calls_without_input, helper_sessions, replay

    window = parse_window(args.window)
    pipeline = resolve_pipeline(args.preset)  # a bad name fails before the log is read
    steps.next(f"loading {Path(args.path).name}")
    t = _load_log(args)
    skipped = t.load_report.skipped
    if t.calls.empty:
        raise ConfigError(f"{args.path}: the log has no LLM calls to replay"
                          f"{skipped_why(t, args.path, args.format)}")
    if len(skipped):
        steps.write(skipped_warning(skipped, args.path, "the replay runs without them"))
    helpers = helper_sessions(t)    # e.g. Claude Code's compaction summarizer (--sidechains)
    if t.calls["session"].isin(helpers).all():
        raise ConfigError(f"{args.path}: no call to replay: {'; '.join(helpers.values())}")
    if helpers:
        steps.write(f"ctxlab: note: {args.path}: {'; '.join(helpers.values())}")
    bare = calls_without_input(t)
    if len(bare) == (~t.calls["session"].isin(helpers)).sum():
        raise ConfigError(f"{args.path}: no call to replay: its {counted(len(bare), 'call')} "
                          f"record{'s' if len(bare) == 1 else ''} no input (the log holds no "
                          f"part, e.g. {bare['source'].astype(str).iloc[0]})")
    if len(bare):
        steps.write(no_input_warning(bare["source"].astype(str).tolist(), args.path))
    note = window_note(pipeline, window)
    if note:
        steps.write(f"ctxlab: note: {note}")
    steps.next(f"replaying {counted(int((~t.calls['session'].isin(helpers)).sum()), 'call')}")
    r = replay(t, pipeline, window=window, estimator=args.estimator)
    small = small_window_warning(r.calls)
    if small:
        steps.write(small)
    from ctxlab.fidelity import inflated_overhead_notes, overhead_notes
    from ctxlab.replay_state import over_target_note

    for note in [*overhead_notes(r), *inflated_overhead_notes(r)]:
        steps.write(f"ctxlab: warning: {note}")
    over = over_target_note(r.calls)
    if over:
        steps.write(f"ctxlab: warning: {over}")
    return t, r


def small_window_warning(calls: pd.DataFrame) -> str | None:
    """A warning when the window is smaller than a session's first request (a window
    given in the wrong unit, ``--window 100``): nothing can be compacted below it, and
    the replay's calls are over the window (``calls``: `Replay.calls`).

    Example:
        >>> calls = pd.DataFrame({"session": "s", "call": [0, 1], "tokens_before": [900, 1800],
        ...                       "window_tokens": 100, "over_window": True})
        >>> small_window_warning(calls)
        'ctxlab: warning: the window (100 tokens) is smaller than the first request (900 \
tokens), so every call is over it'
    """
    first = calls.sort_values("call", kind="stable").groupby("session", sort=False).head(1)
    small = first[first["tokens_before"] > first["window_tokens"]]
    if small.empty:
        return None
    worst = small.loc[small["tokens_before"].idxmax()]
    n, over = len(calls), int(calls["over_window"].sum())
    sessions = "every session" if len(small) == len(first) else \
        f"{len(small):,} of {len(first):,} sessions"
    which = "the first request (" if len(first) == 1 else \
        f"the first request of {sessions} (up to "
    return (f"ctxlab: warning: the window ({int(worst['window_tokens']):,} tokens) is smaller "
            f"than {which}{int(worst['tokens_before']):,} tokens), so "
            f"{'every call is' if over == n else f'{over:,} of {n:,} calls are'} over it")


def _share(v: float) -> str:
    """A ratio as a percentage; "–" when there is none (NaN: e.g. no needed fact)."""
    return "–" if v != v else f"{v:.1%}"


def _usage(v: float, limit: int, one_limit: bool) -> str:
    """``peak_usage`` and what it is a share of; a limit of 0 tokens (a window that leaves
    no room once output is kept) said as such, not as an infinite share."""
    of = "the" if one_limit else "its call's"
    if limit <= 0:
        return usage_text(float("inf"), of)
    return f"{usage_text(v)} (of {of} {limit:,}-token limit)"


def summary_lines(r: Replay) -> list[str]:
    """The replay summary, one measure a line; ``peak_usage`` says what it is a share of:
    the limit of its call (the input available: the window less what is kept for output),
    not the window."""
    out = []
    summary = r.summary()
    width = max(map(len, summary)) + 2
    for k, v in summary.items():
        if isinstance(v, float):
            text = _share(v) if k in ("peak_usage", "recall") else \
                "–" if v != v else f"{v:,.3g}"
        else:
            text = f"{v:,}" if isinstance(v, int) else str(v)
        if k == "peak_usage" and len(r.calls):
            limits = r.calls["limit_tokens"]
            limit = int(limits.loc[r.calls["usage_after"].idxmax()])
            text = _usage(v, limit, limits.nunique() == 1)
        out.append(f"  {k:<{width}}{text}")
    return out


def events_text(r: Replay, limit: int = MAX_EVENTS_SHOWN) -> str:
    """The events table of a replay (first and last rows when long)."""
    ev = r.events
    if ev.empty:
        return "  (none: the trigger never fired or no stage changed the request)"
    cols = [c for c in ("session", "event", "call", "stage", "tokens_before", "tokens_after",
                        "tokens_saved", "hidden", "inserted", "failure", "reason")
            if c in ev.columns and (c != "session" or len(r.base.sessions) > 1)]
    df = ev[cols].astype(object)
    df = df.where(df.notna(), "-")
    df["reason"] = df["reason"].astype(str).map(
        lambda s: s if len(s) <= REASON_CHARS else s[:REASON_CHARS - 1] + "…")
    if len(df) <= limit:
        return _table(df)
    half = limit // 2
    return "\n".join([_table(df.head(half)), f"  ... {counted(len(df) - limit, 'event')} left out "
                      f"(Replay.events has them all)", _table(df.tail(half))])


def _cmd_replay(args: argparse.Namespace) -> int:
    steps = _Steps(2)
    try:
        t, r = _replay(args, steps)
    finally:
        steps.close()
    name = Path(str(t.meta.get("path") or args.path)).name
    window = f"{r.settings.window:,}" if r.settings.window else _model_windows(r.base, r.calls)
    print(f"replay of {name} ({counted(len(r.calls), 'call')}, window {window}): {r.pipeline}")
    print("\n".join(["", "summary:", *summary_lines(r), "", "events:", events_text(r)]))
    return 0


def _model_windows(t: Transcript, calls: pd.DataFrame, most: int = 3) -> str:
    """The windows a replay without ``--window`` used, per model (``each call's model's``
    then what they were), saying which are a provider's default or the default for a
    model the registry does not know."""
    from ctxlab.pipeline import call_models
    from ctxlab.schema import frames_unchanged
    from ctxlab.tokens.windows import resolve_window

    if calls.empty or "window_tokens" not in calls:
        return "each call's model's"
    # a call that names no model has the window of the one named before it (`call_models`)
    with frames_unchanged():        # (a log of many sessions: its calls read once)
        filled = {s: call_models(t, s) for s in pd.unique(calls["session"])}
    model = [filled[s].get(int(k)) for s, k in zip(calls["session"], calls["call"])]
    pairs = pd.DataFrame({"model": model, "window_tokens": calls["window_tokens"].to_numpy()},
                         dtype=object).drop_duplicates()
    shown = []
    for model, win in pairs.head(most).itertuples(index=False):
        model = model if isinstance(model, str) else None
        how = resolve_window(model=model)
        shown.append(f"{model or 'no model'} {int(win):,}" + (
            f" ({how.provider}'s default)" if how.method == "provider-default" else
            " (a default: the model is unknown)" if how.method == "global-default" else ""))
    more = f", {len(pairs) - most} more" if len(pairs) > most else ""
    return f"each call's model's: {', '.join(shown)}{more}"




def _cmd_report(args: argparse.Namespace) -> int:
    from ctxlab.viz.report import report

    output_path(args.output, inputs=[args.path])      # a bad -o fails before the work
    steps = _Steps(3)
    try:
        t, r = _replay(args, steps)
        steps.next("writing the report")
        try:
            out = report(r, args.output, transcript=t, redact=args.redact, title=args.title)
        except OSError as e:
            raise ConfigError(f"cannot write {args.output}: {e.strerror or e}") from None
    finally:
        steps.close()
    s = r.summary()
    print(f"wrote {out} ({out.stat().st_size / 1024:,.0f} KB)")
    print(f"{r.pipeline.name} over {counted(s['calls'], 'call')}: "
          f"{counted(s['compactions'], 'compaction')}, {counted(s['events'], 'event')}, "
          f"{counted(s['failures'], 'failed summarizer attempt')}; "
          f"largest request {counted(s['peak_tokens'], 'token')}; highest usage "
          + (f"{s['peak_usage']:.1%} of its call's limit; " if np.isfinite(s["peak_usage"])
             else f"{usage_text(s['peak_usage'])}; ")
          + f"{counted(s['over_window'], 'request')} over the window; "
          f"needed-fact recall {_share(s['recall'])}")
    return 0


INFO_EXAMPLES = """examples:
    ctxlab info datasets/coding_session.jsonl
    ctxlab info datasets/
    ctxlab info ~/.claude/projects/my-project/ --sidechains

Skipped records are listed with file:line and why; nothing is dropped silently.
"""
CONVERT_EXAMPLES = """examples:
    ctxlab convert session.jsonl -o session.parquet
    ctxlab convert logs/ -o corpus/
    ctxlab convert session.jsonl -o corpus/          (one log as a corpus dataset)
    ctxlab convert logs/ -o corpus/ --no-facts       (without the sessions' facts)

A .parquet file loads back exactly (ctxlab.load); a corpus dataset is Parquet
partitioned by session, read lazily by ctxlab.load_dir and by sweep workers. It
stores each session's facts (its parts' artifacts and counts under the presets'
tokenizers), which replays then take instead of computing them, while still valid.
"""
ESTIMATORS_EXAMPLES = """examples:
    ctxlab estimators datasets/
    ctxlab estimators session.jsonl -e chars:4 -e neurolink:anthropic -e neuron
    ctxlab estimators session.jsonl --reference tiktoken:cl100k_base
    ctxlab estimators session.jsonl --calibrate cal.json   (then --estimator calibrated:cal.json)
    ctxlab estimators --list
"""
REPLAY_EXAMPLES = """examples:
    ctxlab replay datasets/coding_session.jsonl
    ctxlab replay datasets/coding_session.jsonl --preset neuron --window 100k
    ctxlab replay session.jsonl --preset claude-code --estimator tiktoken:o200k_base
"""
REPORT_EXAMPLES = """examples:
    ctxlab report datasets/coding_session.jsonl -o reports/demo.html
    ctxlab report session.jsonl --preset neuron -o shared.html --redact
    ctxlab estimators session.jsonl --calibrate cal.json
    ctxlab report session.jsonl --preset claude-code --window 200k \\
        --estimator calibrated:cal.json -o cc.html

A Claude Code log replayed as claude-code predicts its real compactions and input best
with an estimator calibrated on its own reported usage (the last two lines); the default
o200k tokenizer counts Claude's tokens less well.

The page needs no network and runs no script; the log's text is escaped.
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ctxlab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    from ctxlab.loaders.registry import names as loader_names

    formats = ", ".join(loader_names())

    def common(sp: argparse.ArgumentParser, path_help: str = "a log file") -> None:
        sp.add_argument("path", help=path_help)
        sp.add_argument("--format", default=None, metavar="NAME",
                        help=f"force a loader instead of detecting: {formats}")
        sp.add_argument("--strict", action="store_true",
                        help="fail at the first record that cannot be used")
        sp.add_argument("--sidechains", action="store_true",
                        help="also load sub-agent conversations")

    info = sub.add_parser("info", help="what a log or folder of logs holds",
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          epilog=INFO_EXAMPLES)
    common(info, "a log file, a folder of logs or a corpus dataset")
    info.set_defaults(func=_cmd_info)
    conv = sub.add_parser("convert", help="save a log as ctxlab Parquet, or a folder of "
                                          "logs as a corpus dataset",
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          epilog=CONVERT_EXAMPLES)
    common(conv, "a log file, or a folder of logs")
    conv.add_argument("-o", "--output", required=True,
                      help="output .parquet file; for a folder of logs (or a folder given as "
                           "OUT), the corpus dataset folder: new, empty, or a dataset to "
                           "replace")
    conv.add_argument("--no-facts", dest="facts", action="store_false",
                      help="a corpus dataset without its sessions' facts (artifacts and "
                           "tokenizer counts that spare every sweep recomputing them): "
                           "smaller and written faster")
    conv.set_defaults(func=_cmd_convert)
    est = sub.add_parser("estimators", help="estimator errors by content class and per call",
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         epilog=ESTIMATORS_EXAMPLES)
    est.add_argument("path", nargs="?", help="a log file or a folder of logs")
    est.add_argument("-e", "--estimator", action="append",
                     help=f"estimator spec, repeatable (default: {', '.join(DEFAULT_ESTIMATORS)})")
    est.add_argument("--reference", default="tiktoken:o200k_base",
                     help="the counts taken as truth per part: an exact tokenizer (default "
                          "tiktoken:o200k_base); another estimator gives differences from "
                          "its counts, not errors")
    est.add_argument("--calibrate", metavar="FILE", default=None,
                     help="fit a calibrated estimator on the reported usage and save it here")
    est.add_argument("--format", default=None, metavar="NAME",
                     help=f"force a loader instead of detecting: {formats}")
    est.add_argument("--list", action="store_true", help="list the estimator families")
    est.set_defaults(func=_cmd_estimators)

    def replayed(sp: argparse.ArgumentParser) -> None:
        common(sp)
        sp.add_argument("--preset", default="neurolink",
                        help="the pipeline to replay (default neurolink); presets: "
                             f"{', '.join(preset_names())}")
        sp.add_argument("--window", default=None, metavar="TOKENS",
                        help="context window, e.g. 200000 or 200k (default: each call's "
                             "model's window)")
        sp.add_argument("--estimator", default=None,
                        help="token estimator spec (default: the pipeline's)")

    rep = sub.add_parser(
        "replay", help="replay a compaction pipeline over a log: summary and events",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=REPLAY_EXAMPLES)
    replayed(rep)
    rep.set_defaults(func=_cmd_replay)
    page = sub.add_parser(
        "report", help="write a replay as one self-contained HTML page",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=REPORT_EXAMPLES)
    replayed(page)
    page.add_argument("-o", "--output", required=True, help="the .html file to write")
    page.add_argument("--redact", action="store_true",
                      help="mask API keys and tokens found in the log's text")
    page.add_argument("--title", default=None, help="the page's title")
    page.set_defaults(func=_cmd_report)
    add_sweep_command(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(_window_values(sys.argv[1:] if argv is None else argv))
    try:
        code = int(args.func(args))
        sys.stdout.flush()          # a reader gone before the end is caught here, not at exit
        return code
    except CtxlabError as e:
        print(f"ctxlab: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:        # `ctxlab replay ... | head`: the reader has what it wanted
        # (stdout is pointed at nothing so that Python's flush at exit does not fail again)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141                  # a shell's code for a pipe closed early (128 + SIGPIPE)
    except OSError as e:           # a file the command reads or writes
        where = f"{e.filename}: " if e.filename else ""
        print(f"ctxlab: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2


def _window_values(argv: Sequence[str]) -> list[str]:
    """``--window -5k`` as ``--window=-5k``: a value, not an option (argparse stopped at
    "expected one argument"), so `parse_window` says what a window is."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--window" and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"--window={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def output_path(text: str, option: str = "-o", inputs: Sequence[str | Path] = ()) -> Path:
    """An output file the command will write, checked before any work: not a folder, not
    one of the command's ``inputs`` (an input is never modified), its folder made when
    missing (as ``report`` does), and writable (an existing file is left as it is)."""
    out = Path(text)
    if text.endswith(("/", "\\")):
        raise ConfigError(f"{option} {text}: names a folder; give a file name")
    _not_an_input(out, option, inputs)
    if out.is_dir():
        raise ConfigError(f"{option} {out}: is a folder; give a file name")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"{option} {out}: cannot create its folder "
                          f"({e.strerror or e})") from None
    existed = out.exists()
    try:                # can it be written? (a file system or folder that refuses it)
        with open(out, "ab"):
            pass
    except OSError as e:
        raise ConfigError(f"{option} {out}: cannot be written ({e.strerror or e})") from None
    if not existed:
        out.unlink()
    return out


def _not_an_input(out: Path, option: str, inputs: Sequence[str | Path]) -> None:
    """Refuse an output that is an input of the command: a file or folder it reads, a log
    (or a converted log, or any file of a corpus dataset) inside a folder it reads, or a
    folder that holds one of its inputs (``convert`` writes a dataset folder whole)."""
    for given in inputs:
        src = Path(given)
        try:
            same = out.exists() and src.exists() and os.path.samefile(out, src)
        except OSError:
            same = False
        if same or out.resolve() == src.resolve():
            raise ConfigError(f"{option} {out}: is the input {src}; ctxlab never writes over "
                              f"its input: give another name")
        inside = _within(out, src)
        if inside and src.is_dir() and _read_from(out, src):
            raise ConfigError(f"{option} {out}: is one of the files the command reads in "
                              f"{src}; ctxlab never writes over its input: write it "
                              f"outside that folder")
        if (out.is_dir() or not out.suffix) and _within(src, out):
            raise ConfigError(f"{option} {out}: holds the input {src}, and would be "
                              f"written over; write the output to another folder")


def _within(path: Path, folder: Path) -> bool:
    """Whether ``path`` is inside ``folder`` (not the folder itself), as written or with
    links resolved: a folder reads a linked log under the link's own name."""
    for a, b in ((Path(os.path.abspath(path)), Path(os.path.abspath(folder))),
                 (path.resolve(), folder.resolve())):
        if a != b and a.is_relative_to(b):
            return True
    return False


def _read_from(out: Path, folder: Path) -> bool:
    """Whether an existing file inside an input folder is something the command reads: any
    file of a corpus dataset, or a log (a converted .parquet log is not searched in a
    folder: results written beside the logs may be written again)."""
    from ctxlab.loaders.corpus_store import is_dataset
    from ctxlab.loaders.registry import detect

    if any(is_dataset(d) for d in (folder, *out.resolve().parents)
           if _within(d, folder) or d.resolve() == folder.resolve()):
        return True
    if not out.is_file() or out.suffix.lower() == ".parquet":
        return False
    try:
        detect(out)
    except LoadError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
