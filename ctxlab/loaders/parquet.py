"""ctxlab's own Parquet file: a `Transcript` saved by ``ctxlab convert``, loaded back exactly.

The part frame is the Parquet table; calls, events and the load report travel as
Arrow IPC streams in the file's key-value metadata, and ``meta`` as JSON. Loading
the file gives a `Transcript` equal to the one saved (same frames, dtypes, meta).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from ctxlab.errors import LoadError
from ctxlab.loaders.records import LoadOptions
from ctxlab.loaders.registry import Loader, register
from ctxlab.schema import LoadReport, Transcript, text_columns

MAGIC = "PAR1"
KEY = b"ctxlab"


def _ipc(df: pd.DataFrame) -> bytes:
    import pyarrow as pa

    table = pa.Table.from_pandas(df, preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _from_ipc(data: bytes) -> pd.DataFrame:
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(data)).read_all().to_pandas()


def save_parquet(t: Transcript, path: str | Path) -> Path:
    """Write a transcript to one Parquet file that `ctxlab.load` reads back exactly."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    table = pa.Table.from_pandas(t.frame, preserve_index=False)
    extra: dict[bytes, bytes] = {
        KEY + b".meta": json.dumps(dict(t.meta), ensure_ascii=False, default=str).encode(),
        KEY + b".calls": _ipc(t.calls),
        KEY + b".events": _ipc(t.events),
        KEY + b".load_report": _ipc(t.load_report.records),
    }
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})
    pq.write_table(table, path)
    return path


def sniff(path: Path, head: str) -> bool:
    return head.startswith(MAGIC)


def load(path: Path, options: LoadOptions) -> Transcript:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises several unrelated types for damaged files
        raise LoadError(f"not a readable Parquet file ({type(e).__name__}: {e})",
                        path=str(path)) from None
    md: dict[bytes, Any] = table.schema.metadata or {}
    missing = [k for k in (b".meta", b".calls", b".events", b".load_report") if KEY + k not in md]
    if missing:
        raise LoadError("a Parquet file without ctxlab metadata; only files written by "
                        "`ctxlab convert` (or save_parquet) can be loaded", path=str(path))
    t = Transcript(frame=text_columns(table.to_pandas()),
                   calls=text_columns(_from_ipc(md[KEY + b".calls"])),
                   events=text_columns(_from_ipc(md[KEY + b".events"])),
                   meta=json.loads(md[KEY + b".meta"]),
                   load_report=LoadReport(records=text_columns(
                       _from_ipc(md[KEY + b".load_report"]))))
    t.validate(strict=True)
    return t


LOADER = register(Loader(name="parquet", description="ctxlab's own Parquet (ctxlab convert)",
                         sniff=sniff, load=load, priority=100))
