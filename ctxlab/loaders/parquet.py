"""ctxlab's own Parquet file: a `Transcript` saved by ``ctxlab convert``, loaded back exactly.

The part frame is the Parquet table; calls, events and the load report travel as
Arrow IPC streams in the file's key-value metadata, and ``meta`` as JSON. Loading
the file gives a `Transcript` equal to the one saved (same frames, dtypes, meta).

A session of a corpus dataset (`ctxlab.loaders.corpus_store`) is the same kind of
file, except that its load report, shared by every session of its source log, sits
once in a file of its own that the session's file names (relative to its folder).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from ctxlab.errors import LoadError
from ctxlab.loaders.records import LoadOptions
from ctxlab.loaders.registry import Loader, register
from ctxlab.schema import TEXT, LoadReport, Transcript

MAGIC = "PAR1"
KEY = b"ctxlab"
REPORT_FILE = KEY + b".load_report_file"


def _ipc(data: pd.DataFrame | Any) -> bytes:
    """A frame (or an Arrow table made from one) as an Arrow IPC stream."""
    import pyarrow as pa

    table = pa.Table.from_pandas(data, preserve_index=False) \
        if isinstance(data, pd.DataFrame) else data
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _text(t: Any) -> Any:
    import pyarrow as pa

    return TEXT if pa.types.is_string(t) or pa.types.is_large_string(t) else None


def _pandas(table: Any) -> pd.DataFrame:
    """An Arrow table as pandas, strings read straight into `TEXT` columns (converting
    them afterwards costs four times as much on a small session)."""
    df = table.to_pandas(types_mapper=_text)
    other = {c: TEXT for c, d in df.dtypes.items() if isinstance(d, pd.StringDtype) and d != TEXT}
    return df.astype(other) if other else df


def _from_ipc(data: bytes) -> pd.DataFrame:
    import pyarrow as pa

    return _pandas(pa.ipc.open_stream(pa.py_buffer(data)).read_all())


def save_parquet(t: Transcript, path: str | Path, *, report_file: str | None = None) -> Path:
    """Write a transcript to one Parquet file that `ctxlab.load` reads back exactly.

    Args:
        t: the transcript.
        path: the file to write.
        report_file: leave the load report out and name instead the file that holds it
            (written by `save_report`, relative to ``path``'s folder); used by corpus
            datasets, whose sessions share their source log's report.
    """
    import pyarrow as pa

    return save_tables(path, {k: pa.Table.from_pandas(getattr(t, k), preserve_index=False)
                              for k in ("frame", "calls", "events")}, t.meta,
                       report=t.load_report if report_file is None else None,
                       report_file=report_file)


def save_tables(path: str | Path, tables: Mapping[str, Any], meta: Mapping[str, Any], *,
                report: LoadReport | None = None, report_file: str | None = None) -> Path:
    """`save_parquet` from Arrow tables made from a transcript's ``frame``, ``calls`` and
    ``events`` (with their pandas metadata: rows taken from them keep their dtypes)."""
    import pyarrow.parquet as pq

    path = Path(path)
    table = tables["frame"]
    extra: dict[bytes, bytes] = {
        KEY + b".meta": json.dumps(dict(meta), ensure_ascii=False, default=str).encode(),
        KEY + b".calls": _ipc(tables["calls"]),
        KEY + b".events": _ipc(tables["events"]),
    }
    if report_file is not None:
        extra[REPORT_FILE] = report_file.encode()
    elif report is not None:
        extra[KEY + b".load_report"] = _ipc(report.records)
    else:
        raise ValueError("save_tables needs the load report or the name of its file")
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})
    pq.write_table(table, path)
    return path


def save_report(report: LoadReport, path: str | Path) -> Path:
    """Write a load report to a Parquet file of its own (`read_report` reads it back)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    pq.write_table(pa.Table.from_pandas(report.records, preserve_index=False), path)
    return path


def read_report(path: str | Path) -> LoadReport:
    """A load report written by `save_report`, with its dtypes."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises several unrelated types for damaged files
        raise LoadError(f"not a readable load report ({type(e).__name__}: {e})",
                        path=str(path)) from None
    return LoadReport(records=_pandas(table))


def sniff(path: Path, head: str) -> bool:
    return head.startswith(MAGIC)


def read_transcript(path: str | Path, *, report: LoadReport | None = None,
                    validate: bool = True) -> Transcript:
    """A transcript written by `save_parquet`.

    Args:
        path: the file.
        report: the load report to attach when the file names a report file of its own
            (None: read that file); ignored when the file holds its report.
        validate: check the frames against the schema (`Transcript.validate`); corpus
            datasets skip it for their sessions (a third of the time of reading one).
    """
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises several unrelated types for damaged files
        raise LoadError(f"not a readable Parquet file ({type(e).__name__}: {e})",
                        path=str(path)) from None
    md: dict[bytes, Any] = table.schema.metadata or {}
    missing = [k for k in (b".meta", b".calls", b".events") if KEY + k not in md]
    if missing or (KEY + b".load_report" not in md and REPORT_FILE not in md):
        raise LoadError("a Parquet file without ctxlab metadata; only files written by "
                        "`ctxlab convert` (or save_parquet) can be loaded", path=str(path))
    if KEY + b".load_report" in md:
        report = LoadReport(records=_from_ipc(md[KEY + b".load_report"]))
    elif report is None:
        ref = path.parent / md[REPORT_FILE].decode()
        if not ref.is_file():
            raise LoadError(f"its load report {ref} is missing; a session file of a corpus "
                            f"dataset is read with the dataset's folder around it",
                            path=str(path))
        report = read_report(ref)
    t = Transcript(frame=_pandas(table), calls=_from_ipc(md[KEY + b".calls"]),
                   events=_from_ipc(md[KEY + b".events"]),
                   meta=json.loads(md[KEY + b".meta"]), load_report=report)
    if validate:
        t.validate(strict=True)
    return t


def load(path: Path, options: LoadOptions) -> Transcript:
    from ctxlab.loaders.corpus_store import seed_facts

    t = read_transcript(path)
    seed_facts(t, path)     # a session of a corpus dataset: its stored facts, if any
    return t


LOADER = register(Loader(name="parquet", description="ctxlab's own Parquet (ctxlab convert)",
                         sniff=sniff, load=load, priority=100))
