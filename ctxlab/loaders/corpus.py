"""A corpus: many logs under one folder, loaded lazily, seen as one frame.

A folder written by ``ctxlab convert DIR -o corpus/`` (`ctxlab.loaders.corpus_store`)
opens as a corpus too, with one entry per session: each is read from its own Parquet
partition when used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pandas as pd

from ctxlab.errors import LoadError
from ctxlab.loaders.records import LoadOptions
from ctxlab.loaders.registry import detect, get
from ctxlab.schema import LoadReport, Transcript, empty_frame, CALL_COLUMNS, EVENT_COLUMNS, \
    PART_COLUMNS

SKIP_SUFFIXES = {".md", ".txt", ".py", ".parquet", ".png", ".html", ".ipynb"}


@dataclass(slots=True)
class Corpus:
    """Logs found under a folder; each is loaded on first use and kept.

    Attributes:
        files: one row per file: ``path``, ``format`` (NA when not a log), ``status``
            (``log``, ``part-of`` another log, ``not-a-log``, ``unreadable`` once loading
            it failed) and ``note``. For a corpus
            dataset, one row per session partition, with more columns
            (`ctxlab.loaders.corpus_store.FILE_COLUMNS`: ``session``, ``source``...).
        options: options passed to every loader (for a dataset: those it was written with).
        dataset: the folder of a corpus dataset, or None for a folder of logs.
    """

    files: pd.DataFrame
    options: LoadOptions = field(default_factory=LoadOptions)
    dataset: Path | None = None
    _cache: dict[str, Transcript] = field(default_factory=dict, repr=False)
    _reports: dict[str, LoadReport] = field(default_factory=dict, repr=False)

    @property
    def paths(self) -> list[Path]:
        """Files that are logs of their own, in sorted order (a dataset: its partitions,
        in source then session order)."""
        return [Path(p) for p in self.files.loc[self.files["status"] == "log", "path"]]

    def __len__(self) -> int:
        return len(self.paths)

    def __iter__(self) -> Iterator[Transcript]:
        """Every log, loaded. Outside strict mode a log that cannot be read at all is
        left out and listed in ``files`` (status ``unreadable``, the error as its note),
        as ``ctxlab convert`` does: one bad file does not stop a corpus."""
        for p in self.paths:
            try:
                t = self.transcript(p)
            except LoadError as e:
                if self.options.strict or self.dataset is not None:
                    raise
                at = self.files["path"] == str(p)
                self.files.loc[at, "status"] = "unreadable"
                self.files.loc[at, "note"] = str(e)
                continue
            yield t

    def transcript(self, path: str | Path) -> Transcript:
        """The transcript of one file of the corpus (loaded once). For a dataset, a
        partition's path: its session alone, read from that partition only."""
        key = str(path)
        if key not in self._cache:
            row = self.files[self.files["path"] == key]
            if row.empty:
                raise KeyError(f"{key} is not in this corpus")
            if self.dataset is not None:
                from ctxlab.loaders.corpus_store import read_session
                self._cache[key] = read_session(key, self._report(str(row["report"].iloc[0])))
            else:
                self._cache[key] = get(str(row["format"].iloc[0])).load(Path(key),
                                                                        self.options)
        return self._cache[key]

    def _report(self, path: str) -> LoadReport:
        if path not in self._reports:
            from ctxlab.loaders.parquet import read_report
            self._reports[path] = read_report(path)
        return self._reports[path]

    def _cat(self, attr: str, columns: tuple) -> pd.DataFrame:
        frames = [getattr(t, attr) for t in self if len(getattr(t, attr))]
        return pd.concat(frames, ignore_index=True) if frames else empty_frame(columns)

    @property
    def frame(self) -> pd.DataFrame:
        """Every part of every session (loads every file)."""
        return self._cat("frame", PART_COLUMNS)

    @property
    def calls(self) -> pd.DataFrame:
        return self._cat("calls", CALL_COLUMNS)

    @property
    def events(self) -> pd.DataFrame:
        return self._cat("events", EVENT_COLUMNS)

    @property
    def load_report(self) -> LoadReport:
        """What became of every record of every log (a dataset: of each source log once)."""
        if self.dataset is not None:     # every source's, also one that gave no session
            from ctxlab.loaders.corpus_store import read_manifest
            root = Path(self.dataset)
            return LoadReport.concat([self._report(str(root / r))
                                      for r in read_manifest(root)["reports"]])
        return LoadReport.concat([t.load_report for t in self])

    def __repr__(self) -> str:
        if self.dataset is not None:
            return (f"Corpus(dataset {self.dataset}: {len(self)} sessions from "
                    f"{self.files['source'].nunique()} logs)")
        counts = self.files["status"].value_counts().to_dict()
        return f"Corpus({len(self)} logs, files={counts})"


def load_dir(path: str | Path, *, strict: bool = False, sidechains: bool = False,
             recursive: bool = True) -> Corpus:
    """Find every log under a folder. Files are detected now and loaded when used.

    Files that are not logs are listed in ``corpus.files`` with the reason, never
    silently left out; sub-agent files are listed as part of their main log.

    A corpus dataset (``ctxlab convert DIR -o corpus/``) opens with its manifest only:
    one entry per session, each read from its partition when used
    (`ctxlab.loaders.corpus_store.open_dataset`).
    """
    root = Path(path)
    if not root.is_dir():
        raise LoadError("not a directory; use ctxlab.load() for a single file", path=str(root))
    from ctxlab.loaders.corpus_store import MANIFEST, open_dataset
    if (root / MANIFEST).is_file():
        return open_dataset(root, strict=strict, sidechains=sidechains)
    rows: list[dict[str, object]] = []
    candidates: list[Path] = []
    hidden: set[Path] = set()           # hidden folders (.git, .venv...): listed, not searched
    for p in sorted(root.rglob("*") if recursive else root.iterdir()):
        parts = p.relative_to(root).parts
        dot = next((i for i, part in enumerate(parts[:-1]) if part.startswith(".")), None)
        if dot is not None:
            hidden.add(root.joinpath(*parts[:dot + 1]))
        elif p.is_dir() and parts[-1].startswith("."):
            hidden.add(p)
        elif p.is_file():           # hidden files too: aider's .aider.chat.history.md
            candidates.append(p)
    for d in sorted(hidden):
        rows.append(dict(path=str(d), format=None, status="not-a-log",
                         note="hidden folder: not searched (load_dir on it to search it)"))
    for p in candidates:
        if p.suffix.lower() in SKIP_SUFFIXES and p.suffix.lower() != ".md":
            note = (".parquet files are not searched in a folder (a log converted by ctxlab "
                    "convert loads on its own: ctxlab.load or ctxlab info FILE)"
                    if p.suffix.lower() == ".parquet" else
                    f"{p.suffix} files are not transcripts")
            rows.append(dict(path=str(p), format=None, status="not-a-log", note=note))
            continue
        try:
            loader = detect(p)
        except LoadError as e:
            rows.append(dict(path=str(p), format=None, status="not-a-log", note=e.reason))
            continue
        owner = loader.owner(p) if loader.owner else None
        if owner is not None:
            rows.append(dict(path=str(p), format=loader.name, status="part-of",
                             note=f"sub-agent of {owner.name}; loaded with it when "
                                  f"sidechains=True (--sidechains)"))
        else:
            rows.append(dict(path=str(p), format=loader.name, status="log", note=None))
    files = pd.DataFrame(rows, columns=["path", "format", "status", "note"]).astype("string")
    return Corpus(files=files, options=LoadOptions(strict=strict, sidechains=sidechains))
