"""Corpus datasets: a folder of logs stored as Parquet, one partition per session.

`write_corpus` (``ctxlab convert DIR -o corpus/``) loads every log of a folder (or a
`Corpus`, or transcripts) once and writes a folder that `ctxlab.load_dir` opens as a
lazy `Corpus`, whose sessions are read one partition at a time: a sweep's workers
read only the sessions they replay. Layout::

    corpus/
      _ctxlab_corpus.json                  the manifest: sources, partitions, options, facts
      _reports/source-00000.parquet        the load report of each source log, once
      session=<id>/part-00000.parquet      one session of source 0 (`parquet.save_parquet`)
      session=<id>/facts-00000.arrow       its facts (`ctxlab.facts`), unless --no-facts

Partition folders are hive-style, ``session=`` and the id percent-encoded (``.`` and
``~`` too); an id too long for a file name, or differing from another only in case,
gets a shortened name with a hash of the id instead. The manifest maps every
partition to its session id and source file, so names are never parsed back. A session
read from the dataset equals ``transcript.session(id)`` of its source log: the same
frame, calls and events with their dtypes, the source's ``meta`` and its whole load
report.

A session's facts are what every replay of it would compute again from its texts alone:
its parts' artifacts and their counts under the presets' tokenizers (`ctxlab.facts`).
`read_session` hands them to the process's caches, so a sweep extracts and counts only
the texts its replays make; facts computed by another extraction or tokenizer (their
fingerprints, in the facts file and the manifest's ``facts``) are ignored. They change no
result, only the time (`write_corpus`'s ``facts``). The manifest's version (`VERSION`)
stays 1: a reader that knows nothing of facts reads such a dataset correctly, and one
written before facts existed is read as one stored without them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import quote

import pandas as pd

from ctxlab.errors import ConfigError, LoadError
from ctxlab.loaders.corpus import Corpus, load_dir
from ctxlab.loaders.records import LoadOptions
from ctxlab.loaders.registry import detect, get
from ctxlab.schema import LoadReport, Transcript

MANIFEST = "_ctxlab_corpus.json"
REPORTS = "_reports"
VERSION = 1
MAX_NAME_BYTES = 150
FILE_COLUMNS = ("path", "format", "status", "note", "session", "source", "source_format",
                "report", "parts", "calls", "events")
"""Columns of ``Corpus.files`` for a dataset: one row per partition (``path``; ``format``
is ``parquet``, ``status`` is ``log``), its ``session`` id, the ``source`` log and its
``source_format``, the ``report`` file of that source, and the partition's row counts."""


def is_dataset(path: str | Path) -> bool:
    """Whether a folder is a corpus dataset written by `write_corpus`."""
    return (Path(path) / MANIFEST).is_file()


def partition_name(session: str, used: dict[str, str]) -> str:
    """The folder name of a session's partition, unique among ``used`` (casefolded name ->
    session id, updated).

    Example:
        >>> used = {}
        >>> partition_name("a/b.c", used)
        'session=a%2Fb%2Ec'
        >>> partition_name("A/B.C", used)  # the same name but for case: hashed
        'session=A%2FB%2EC~f951078ce1f487d0'
    """
    enc = quote(session, safe="", errors="surrogatepass").replace(".", "%2E") \
        .replace("~", "%7E")
    name = "session=" + enc
    key = name.casefold()
    if len(name.encode()) > MAX_NAME_BYTES or used.get(key, session) != session:
        digest = hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        name = f"session={enc[:60]}~{digest}"
        key = name.casefold()
    used[key] = session
    return name


def _sessions_in_order(t: Transcript) -> list[str]:
    """``t.sessions``, with every session that only calls or events name placed after the
    session its rows follow there (so each of ``frame``, ``calls`` and ``events`` read
    back session by session keeps its row order)."""
    order = list(dict.fromkeys(t.sessions))
    for df in (t.calls, t.events):
        placed = set(order)
        after = -1                          # the position of the last session seen
        for s in pd.unique(df["session"].dropna()):
            if s in placed:
                after = order.index(s)
            else:
                after += 1
                order.insert(after, s)
                placed.add(s)
    return order


def _split(t: Transcript) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(id, rows)`` for every session: the positions of its rows in ``t.frame``,
    ``t.calls`` and ``t.events`` (those `Transcript.session` keeps, in order)."""
    import numpy as np

    groups = {name: getattr(t, name).groupby("session", sort=False).indices
              for name in ("frame", "calls", "events")}
    lost = {name: len(getattr(t, name)) - sum(len(ix) for ix in g.values())
            for name, g in groups.items()}
    if any(lost.values()):
        raise LoadError(f"rows without a session id ({lost}); every part, call and event "
                        f"needs one to be stored by session", path=str(t.meta.get("path")))
    none = np.array([], dtype=np.intp)
    for s in _sessions_in_order(t):
        yield s, {name: g.get(s, none) for name, g in groups.items()}


Loaded = tuple[str, str | None, Callable[[], Transcript]]


def _inputs(source: Any, options: LoadOptions) -> tuple[list[Loaded], list[dict[str, Any]],
                                                         LoadOptions]:
    """(source path, format, load) per log, the other files, and the options used."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():
            source = load_dir(path, strict=options.strict, sidechains=options.sidechains)
        elif path.is_file():
            fmt = detect(path).name
            return [(str(path), fmt, lambda: get(fmt).load(path, options))], [], options
        else:
            raise ConfigError(f"{path}: no such file or folder")
    if isinstance(source, Corpus):
        if source.dataset is not None:
            raise ConfigError(f"{source.dataset} is already a corpus dataset; copy the folder "
                              f"to have a second one")
        files = source.files
        logs = files[files["status"] == "log"]
        other = files[files["status"] != "log"]
        out = [(str(p), str(f), (lambda p=p, f=f: _corpus_file(source, str(p), str(f))))
               for p, f in zip(logs["path"], logs["format"])]
        return out, [{k: (None if pd.isna(v) else str(v)) for k, v in r.items()}
                     for r in other.to_dict("records")], source.options
    if isinstance(source, Transcript):
        source = [source]
    if isinstance(source, Sequence) and source and all(isinstance(t, Transcript)
                                                       for t in source):
        return [(str(t.meta.get("path") or f"<transcript {i}>"),
                 None if t.meta.get("format") is None else str(t.meta.get("format")),
                 (lambda t=t: t)) for i, t in enumerate(source)], [], options
    raise ConfigError("write_corpus takes a folder or file path, a Corpus, a Transcript or a "
                      f"list of Transcripts, not {type(source).__name__}")


def _corpus_file(corpus: Corpus, path: str, fmt: str) -> Transcript:
    """A file of a corpus: the one it already loaded, else loaded now and not kept."""
    cached = corpus._cache.get(path)
    return cached if cached is not None else get(fmt).load(Path(path), corpus.options)


def _check_output(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file; a corpus dataset is a folder: give -o a folder")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not is_dataset(out):
        raise ConfigError(f"{out} is not empty and not a corpus dataset; write to a new or "
                          f"empty folder (nothing was changed)")
    try:
        m = read_manifest(out)
    except LoadError as e:
        raise ConfigError(f"{out} holds a corpus manifest that cannot be read ({e}); delete "
                          f"the folder or write elsewhere (nothing was changed)") from None
    ours = {out / MANIFEST} | {out / r for r in m["reports"]} \
        | {out / p["path"] for p in m["partitions"]} \
        | {out / p["facts"] for p in m["partitions"] if isinstance(p.get("facts"), str)}
    foreign = [p for p in out.rglob("*") if p.is_file() and p not in ours]
    if foreign:
        raise ConfigError(f"{out} is a corpus dataset but also holds {len(foreign)} other "
                          f"file(s), e.g. {foreign[0]}; move them or write elsewhere "
                          f"(nothing was changed)")


def write_corpus(source: str | Path | Corpus | Transcript | Sequence[Transcript],
                 out: str | Path, *, strict: bool = False, sidechains: bool = False,
                 facts: bool | Sequence[str] = True) -> Corpus:
    """Store logs as a corpus dataset: one Parquet partition per session.

    Args:
        source: a folder of logs (every log under it), a log file, a `Corpus` or
            transcripts. Input files are only read.
        out: the dataset folder: new, empty, or a dataset to replace (holding nothing
            else). Written next to it first, then moved in place.
        strict, sidechains: loader options when ``source`` is a path (a `Corpus` keeps
            its own).
        facts: store each session's facts (`ctxlab.facts`): the artifacts of its parts
            and their token counts under the presets' tokenizers
            (`ctxlab.facts.preset_tokenizers`), so that replays of a session read back
            (a sweep) do not compute them again. A list of tokenizer specs stores the
            counts of those instead (``[]``: artifacts only); False: no facts (``ctxlab
            convert --no-facts``; a smaller dataset written faster).

    Returns:
        The dataset opened with `ctxlab.load_dir` (lazy: nothing read yet).

    Example:
        >>> import tempfile, ctxlab.datasets
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     d = write_corpus(ctxlab.datasets.path("openai_sessions"), tmp + "/corpus")
        ...     print(len(d), d.files["session"].iloc[2], len(d.transcript(d.paths[2]).calls))
        4 1150e3ba-4f91-45d3-845b-3b91e0d331f9/2 20
    """
    given, out = Path(out), Path(out).absolute()
    logs, other, options = _inputs(source, LoadOptions(strict=strict, sidechains=sidechains))
    _check_output(out)
    # a dataset written inside the folder it stores: its own files are not the input's
    other = [f for f in other if out not in Path(f["path"]).absolute().parents]
    tmp = out.parent / f".{out.name}.writing-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / REPORTS).mkdir(parents=True)
        manifest = _write_all(logs, other, options, tmp, _fact_estimators(facts))
        (tmp / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1),
                                    encoding="utf-8")
        if out.exists():
            _replace(out, tmp)
        else:
            tmp.rename(out)
    except OSError as e:
        raise ConfigError(f"cannot write the corpus dataset {out}: {e.strerror or e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return load_dir(given)


def _fact_estimators(facts: bool | Sequence[str]) -> list[Any] | None:
    """The estimators whose counts are stored (None: no facts at all)."""
    if facts is False:
        return None
    from ctxlab.facts import preset_tokenizers, storable

    if facts is True:       # a tokenizer that cannot say what it is: its counts left out
        from ctxlab.tokens import estimator

        return storable([s for s in preset_tokenizers()
                         if estimator(s).fingerprint() is not None])
    if isinstance(facts, str) or not all(isinstance(s, str) for s in facts):
        raise ConfigError(f"facts= takes True, False or a list of tokenizer specs, not "
                          f"{facts!r}")
    return storable(list(dict.fromkeys(facts)))


def _replace(out: Path, tmp: Path) -> None:
    """Empty ``out`` (an empty folder or a dataset holding nothing else) and move the new
    dataset in, its manifest last: the folder itself stays (a shell may be in it)."""
    if is_dataset(out):
        (out / MANIFEST).unlink()
    for p in sorted(out.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if p.is_dir():
            p.rmdir()
        else:
            p.unlink()
    for p in sorted(tmp.iterdir(), key=lambda p: p.name == MANIFEST):
        p.rename(out / p.name)


def _write_all(logs: list[Loaded], other: list[dict[str, Any]], options: LoadOptions,
               tmp: Path, estimators: list[Any] | None) -> dict[str, Any]:
    import pyarrow as pa

    from ctxlab.loaders.parquet import save_report, save_tables
    from ctxlab.replay import helper_sessions

    sources: list[dict[str, Any]] = []
    partitions: list[dict[str, Any]] = []
    if estimators is not None:
        from ctxlab.facts import LogFacts, describe_facts
    facts_of = None if estimators is None else describe_facts(estimators)
    used: dict[str, str] = {}
    names: dict[str, str] = {}
    for path, fmt, loader in logs:
        try:
            t = loader()
        except LoadError as e:
            if options.strict:
                raise
            # one log that cannot be read is listed with its reason; the others are stored
            other.append(dict(path=path, format=fmt, status="unreadable", note=str(e)))
            continue
        k = len(sources)                # the source's index in the manifest
        report = f"{REPORTS}/source-{k:05d}.parquet"
        save_report(t.load_report, tmp / report)
        # one Arrow conversion per log; each session takes its rows from it
        tables = {name: pa.Table.from_pandas(getattr(t, name), preserve_index=False)
                  for name in ("frame", "calls", "events")}
        if estimators is not None:
            log_facts = LogFacts(t.frame, estimators)
        helpers = helper_sessions(t)
        n = 0
        for s, rows in _split(t):
            if s not in names:
                names[s] = partition_name(s, used)
            (tmp / names[s]).mkdir(exist_ok=True)
            rel = f"{names[s]}/part-{k:05d}.parquet"
            save_tables(tmp / rel, {name: tables[name].take(ix) for name, ix in rows.items()},
                        t.meta, report_file=f"../{report}")
            entry = dict(path=rel, session=s, source=k, parts=len(rows["frame"]),
                         calls=len(rows["calls"]), events=len(rows["events"]))
            if s in helpers:    # no agent's conversation: a sweep leaves it out
                entry["not_replayed"] = helpers[s]
            blob = log_facts.session(rows["frame"]) if estimators is not None else None
            if blob is not None:
                entry["facts"] = facts_path(rel)
                (tmp / entry["facts"]).write_bytes(blob)
            partitions.append(entry)
            n += 1
        sources.append(dict(path=path, format=fmt or t.meta.get("format"), report=report,
                            sessions=n, parts=len(t.frame), calls=len(t.calls),
                            events=len(t.events)))
    return {"ctxlab_corpus": VERSION,
            "facts": facts_of,
            "options": {"strict": options.strict, "sidechains": options.sidechains},
            "sources": sources, "partitions": partitions, "other_files": other,
            "reports": [s["report"] for s in sources]}


def read_manifest(root: str | Path) -> dict[str, Any]:
    """The manifest of a dataset (sources, partitions, the input's other files, options)."""
    path = Path(root) / MANIFEST
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
        if m.get("ctxlab_corpus") != VERSION:
            raise LoadError(f"a corpus dataset of version {m.get('ctxlab_corpus')!r}; this "
                            f"ctxlab reads version {VERSION}: convert the logs again",
                            path=str(path))
        for key in ("options", "sources", "partitions", "other_files", "reports"):
            m[key]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise LoadError(f"not a readable corpus manifest ({type(e).__name__}: {e}); convert "
                        f"the logs again", path=str(path)) from None
    return m


def open_dataset(root: str | Path, *, strict: bool = False, sidechains: bool = False) -> Corpus:
    """A dataset as a lazy `Corpus`: reads the manifest only; one row of ``files`` per
    partition (`FILE_COLUMNS`).

    Raises:
        LoadError: the manifest is damaged, or ``strict``/``sidechains`` asks for what the
            dataset was not written with.
    """
    root = Path(root)
    m = read_manifest(root)
    opts = m["options"]
    for name, asked in (("strict", strict), ("sidechains", sidechains)):
        if asked and not opts.get(name):
            raise LoadError(f"this corpus dataset was written with {name}=False; convert the "
                            f"logs again with --{name} to have it", path=str(root))
    src = m["sources"]
    rows = [dict(path=str(root / p["path"]), format="parquet", status="log",
                 note=p.get("not_replayed"),
                 session=p["session"], source=src[p["source"]]["path"],
                 source_format=src[p["source"]]["format"],
                 report=str(root / src[p["source"]]["report"]), parts=p["parts"],
                 calls=p["calls"], events=p["events"]) for p in m["partitions"]]
    files = pd.DataFrame(rows, columns=list(FILE_COLUMNS))
    files = files.astype({c: "string" for c in FILE_COLUMNS[:8]}
                         | {c: "Int64" for c in FILE_COLUMNS[8:]})
    return Corpus(files=files, options=LoadOptions(strict=bool(opts.get("strict")),
                                                   sidechains=bool(opts.get("sidechains"))),
                  dataset=root)


def read_session(path: str | Path, report: LoadReport | None = None, *,
                 facts: bool = True) -> Transcript:
    """One partition of a dataset: a session, with its source's report (``report``, or
    read from the dataset when None). Not validated again: `write_corpus` wrote it from a
    loaded transcript, and the Parquet file checks its own data.

    With ``facts``, the session's stored facts (`facts_path`), if any, are offered to this
    process's caches (`seed_facts`), which take them if still valid: replays of the
    session then neither extract its artifacts nor count its texts again."""
    from ctxlab.loaders.parquet import read_transcript

    t = read_transcript(path, report=report, validate=False)
    if facts:
        seed_facts(t, path)
    return t


def facts_path(partition: str) -> str:
    """The facts file of a partition file: beside it, ``facts-<n>.arrow`` for
    ``part-<n>.parquet`` (an Arrow IPC stream, `ctxlab.facts.LogFacts.session`).

    Example:
        >>> facts_path("session=a/part-00003.parquet")
        'session=a/facts-00003.arrow'
    """
    folder, _, name = partition.rpartition("/")
    name = "facts-" + name.removeprefix("part-").removesuffix(".parquet") + ".arrow"
    return f"{folder}/{name}" if folder else name


def seed_facts(t: Transcript, path: str | Path) -> Any:
    """Offer the facts stored beside the partition file ``path`` (`facts_path`), if any,
    to this process's caches, for ``t`` read from it (`ctxlab.facts.SessionFacts.offer`:
    read and checked only when a cache misses a text); the `SessionFacts`."""
    from ctxlab.facts import SessionFacts

    p = Path(path)
    f = p.parent / facts_path(p.name)
    facts = SessionFacts(t.frame, f.read_bytes)
    return facts.offer() if f.is_file() else facts


def describe(root: str | Path) -> str:
    """One line on a dataset: sessions, source logs, rows, the input's other files, its
    sessions' facts."""
    m = read_manifest(root)

    def n(k: int, word: str) -> str:
        return f"{k:,} {word}{'' if k == 1 else 's'}"
    rows = [n(sum(int(p[k]) for p in m["partitions"]), k[:-1])
            for k in ("parts", "calls", "events")]
    bad = [f for f in m["other_files"] if f.get("status") == "unreadable"]
    return (f"{n(len(m['partitions']), 'session')} from {n(len(m['sources']), 'log')} "
            f"({', '.join(rows)}); {n(len(m['other_files']) - len(bad), 'other file')} (not "
            f"logs){'' if not bad else ', ' + n(len(bad), 'log') + ' that could not be read'} "
            f"listed in its {MANIFEST}; {_facts_words(m)}")


def _facts_words(m: dict[str, Any]) -> str:
    f = m.get("facts")
    if not isinstance(f, dict):
        return "no session facts (every sweep extracts artifacts and counts tokens itself)"
    tokens = list(f.get("tokens") or {})
    return ("session facts stored (artifacts" + (f"; counts of {', '.join(tokens)}"
                                                 if tokens else "") + ")")


def load_reports(root: str | Path) -> list[LoadReport]:
    """The load report of every source log of a dataset, in source order."""
    from ctxlab.loaders.parquet import read_report

    return [read_report(Path(root) / r) for r in read_manifest(root)["reports"]]


__all__ = ["FILE_COLUMNS", "MANIFEST", "describe", "is_dataset", "load_reports", "open_dataset",
           "partition_name", "read_manifest", "read_session", "write_corpus"]
