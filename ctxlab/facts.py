"""Session facts: what every replay of a session computes again from its texts alone,
stored once in a corpus dataset (`ctxlab.loaders.corpus_store`) and handed to the
in-process caches when the session is read back.

Two facts, per part of a session, depend only on its text:

* its **artifacts** (`ctxlab.artifacts`), cached by (text, instruction flag): the
  flag `instruction_rows` gives the part is stored with them, and a replay that asks
  with the other flag extracts again;
* its **token counts** under the costly estimators: the tokenizers the presets count
  with (`preset_tokenizers`: ``tiktoken:cl100k_base`` for ``ai-agent``,
  ``tiktoken:o200k_base`` for ``claude-code``), cached by text
  (`ctxlab.tokens.base.Estimator.count`).

`write_corpus` stores them (`LogFacts`: an Arrow IPC stream, zstd-compressed, in a file
beside each session's Parquet file, `ctxlab.loaders.corpus_store.facts_path`) with what
they were computed by:
`ctxlab.artifacts.extraction_fingerprint` (a hash of the extraction's code and the
Python and pandas versions) and each tokenizer's `Estimator.fingerprint` (its encoding's name, a
hash of its pattern and ranks, tiktoken's version, the counting rule), and a hash of the
session's texts. A session read back (`ctxlab.loaders.corpus_store.read_session`) offers
them (`SessionFacts.offer`) without reading them: the artifact cache reads and checks them
the first time it misses a text (`ctxlab.artifacts.offer_artifacts`), and takes them if
their extraction fingerprint is this process's; an estimator, the first time it misses a
text, takes the counts filed under its `Estimator.facts_key` if their fingerprint is its
own (`ctxlab.tokens.base.offer_counts`; a sweep that never counts with a tokenizer never
loads it). Stale, foreign or damaged facts are ignored: the work is done again, never
answered wrongly (the header holds a hash of every stored value, `payload_digest`). A
facts file is trusted as the dataset's parts are: values rewritten on purpose with their
hash would be taken, and, counts being cached by text, would count for any log of the
process that holds the same texts. Nothing here imports a tokenizer at import time.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError

KEY = b"ctxlab.facts"
"""The schema metadata key of a facts stream: its header (JSON)."""
VERSION = 1
"""The layout of the facts stream; another version is ignored when read."""


def preset_tokenizers() -> list[str]:
    """The specs of the tokenizers the presets count with, each once, sorted: the
    estimators whose counts a corpus dataset stores by default (those with a
    `Estimator.facts_key`; a ``max:`` spec's sides are looked at). Builds the estimators
    (imports tiktoken), loads no encoding.

    Example:
        >>> preset_tokenizers()
        ['tiktoken:cl100k_base', 'tiktoken:o200k_base']
    """
    from ctxlab.presets import preset, preset_names
    from ctxlab.tokens import estimator

    out: set[str] = set()
    for name in preset_names():
        spec = preset(name).estimator
        if "{provider}" in spec:
            continue            # chars per token times a provider's multiplier: cheap
        sides = [spec]
        if spec.lower().startswith("max:"):
            from ctxlab.tokens.combined import split_pair
            sides = list(split_pair(spec[4:]))
        for s in sides:
            if estimator(s).facts_key is not None:
                out.add(s.strip())
    return sorted(out)


def storable(specs: Sequence[str]) -> list[Any]:
    """The estimators of ``specs``, each checked to have stored counts (a `facts_key` and
    a `fingerprint`; loads its tokenizer).

    Raises:
        ConfigError: an estimator whose counts are never stored (a cheap one).
    """
    from ctxlab.tokens import estimator

    out = []
    for spec in specs:
        est = estimator(spec)
        if est.facts_key is None or est.fingerprint() is None:
            raise ConfigError(f"{spec}: its counts are not stored in a corpus dataset (only "
                              f"tokenizers, e.g. {', '.join(preset_tokenizers())}: the "
                              f"others count again as fast as they would be read)")
        out.append(est)
    return out


def texts_digest(texts: Sequence[str]) -> str:
    """A sha256 of texts in order (each with its length): what stored facts were computed
    from, checked before they are used.

    Example:
        >>> texts_digest(["ab", "c"]) == texts_digest(["a", "bc"])
        False
    """
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def _texts(frame: pd.DataFrame) -> list[str]:
    """The ``content`` of every part as `ctxlab.artifacts.artifact_ids` and the estimators'
    caches key it (NA is the empty text)."""
    c = frame["content"]
    return c.astype(object).where(c.notna(), "").tolist()


class LogFacts:
    """The facts of every part of a log, computed once (`write_corpus` calls `session`
    for each of its sessions).

    Args:
        frame: the log's part frame (every session).
        estimators: the tokenizers whose counts are stored (`storable`).
    """

    def __init__(self, frame: pd.DataFrame, estimators: Sequence[Any]) -> None:
        from ctxlab.artifacts import artifacts, extraction_fingerprint, instruction_rows
        from ctxlab.tokens.base import text_series

        self.texts = _texts(frame)
        self.user = instruction_rows(frame).to_numpy(dtype=bool)
        self.fingerprint = extraction_fingerprint()
        keys = list(zip(self.texts, self.user.tolist()))
        index: dict[tuple[str, bool], int] = {}
        self.key_code = np.fromiter((index.setdefault(k, len(index)) for k in keys),
                                    dtype=np.int64, count=len(keys))
        distinct = list(index)
        found = artifacts(pd.Series([k[0] for k in distinct], dtype=object),
                          user=pd.Series([k[1] for k in distinct], dtype=bool))
        rows = found["row"].to_numpy(dtype=np.int64)
        self.cut = np.searchsorted(rows, np.arange(len(distinct) + 1))
        # each artifact as one text, ``kind:value`` (no kind holds a colon)
        self.pairs = (found["kind"].astype(object) + ":" + found["value"].astype(object)
                      ).to_numpy(dtype=object)
        self.tokens: list[tuple[str, str, np.ndarray]] = []
        codes, uniques = pd.factorize(pd.Series(self.texts, dtype=object),
                                      use_na_sentinel=False)
        plain = text_series(list(uniques)).tolist()
        for est in estimators:
            # counted afresh, not through the shared instance's cache (a corpus's texts
            # would all stay in it)
            counts = np.asarray(est._count(plain), dtype=np.int64)
            self.tokens.append((est.facts_key, est.fingerprint(), counts[codes]))

    def session(self, rows: np.ndarray) -> bytes:
        """The facts of the parts at ``rows`` (positions in the log's frame, in the
        session's order) as an Arrow IPC stream: per part its instruction flag
        (``user``), its artifacts (``kind:value`` texts, dictionary-encoded: each distinct
        artifact once; null for a (text, flag) met earlier in the session) and a count
        per tokenizer (``tokens_<i>``); the header (`KEY`) holds the fingerprints and a
        digest of the texts."""
        import pyarrow as pa

        rows = np.asarray(rows, dtype=np.int64)
        codes = self.key_code[rows]
        _, first = np.unique(codes, return_index=True)
        stored = np.zeros(len(rows), dtype=bool)
        stored[first] = True             # a (text, flag) met before in the session: null
        sizes = np.where(stored, self.cut[codes + 1] - self.cut[codes], 0)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
        take = np.concatenate([np.arange(self.cut[c], self.cut[c + 1])
                               for c in codes[stored]]) if stored.any() else \
            np.zeros(0, dtype=np.int64)
        flat = pa.array(self.pairs[take].tolist(), pa.string()).dictionary_encode()
        arts = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), flat,
                                        mask=pa.array(~stored))
        texts = [self.texts[i] for i in rows.tolist()]
        header = {"version": VERSION, "rows": len(rows), "texts": texts_digest(texts),
                  "artifacts": self.fingerprint,
                  "tokens": [{"key": k, "fingerprint": f, "column": f"tokens_{i}"}
                             for i, (k, f, _) in enumerate(self.tokens)]}
        columns = {"user": pa.array(self.user[rows]), "artifacts": arts}
        for i, (_, _, counts) in enumerate(self.tokens):
            columns[f"tokens_{i}"] = pa.array(counts[rows].astype(np.int32))
        table = pa.table(columns)
        header["payload"] = payload_digest(table)
        table = table.replace_schema_metadata({KEY: json.dumps(header).encode()})
        sink = pa.BufferOutputStream()
        options = pa.ipc.IpcWriteOptions(compression="zstd")
        with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
            writer.write_table(table)
        return sink.getvalue().to_pybytes()



def payload_digest(table: Any) -> str:
    """A sha256 of every value of a facts table (`LogFacts.session`; its columns, not its
    header), kept in the header: Arrow IPC holds no checksum, and a flipped bit in a
    count or an artifact would otherwise read as valid facts (a review flipped every bit
    of a real facts file: 82,000 flips read as valid with other values). Raises
    ValueError on a table that is not of that layout (a flag or a count that is null, a
    count that is negative or not an integer)."""
    import pyarrow as pa

    h = hashlib.sha256()
    for name in table.column_names:
        column = table.column(name)
        arr = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
        h.update(f"{name}\0{arr.type}\0{len(arr)}\0{arr.null_count}\0".encode())
        if name == "artifacts":
            h.update(arr.is_null().to_numpy(zero_copy_only=False).tobytes())
            offsets = arr.offsets.to_numpy().astype(np.int64)
            h.update((offsets - offsets[0]).tobytes())
            flat = arr.flatten()
            for value in flat.dictionary.to_pylist():
                h.update(value.encode("utf-8", "surrogatepass") + b"\0")
            h.update(flat.indices.to_numpy(zero_copy_only=False).astype(np.int64).tobytes())
            continue
        if arr.null_count:
            raise ValueError(f"facts column {name} holds nulls")
        if name == "user":
            if not pa.types.is_boolean(arr.type):
                raise ValueError(f"facts column user is {arr.type}, not bool")
            h.update(arr.to_numpy(zero_copy_only=False).astype(np.uint8).tobytes())
            continue
        if not pa.types.is_integer(arr.type):
            raise ValueError(f"facts column {name} is {arr.type}, not integers")
        values = arr.to_numpy(zero_copy_only=False).astype(np.int64)
        if len(values) and values.min() < 0:
            raise ValueError(f"facts column {name} holds a negative count")
        h.update(values.tobytes())
    return h.hexdigest()


def describe_facts(estimators: Sequence[Any]) -> dict[str, Any]:
    """What facts are computed by here (for a dataset's manifest): the layout
    (``version``), the artifact extraction's fingerprint, and each tokenizer's (by
    `Estimator.facts_key`)."""
    from ctxlab.artifacts import extraction_fingerprint

    return {"version": VERSION, "artifacts": extraction_fingerprint(),
            "tokens": {e.facts_key: e.fingerprint() for e in estimators}}


class SessionFacts:
    """The stored facts of one session read back, read and checked on first use (once,
    whichever cache asks first): `offer` hands them to the caches as a promise.

    Args:
        frame: the session's part frame, as read back (its texts are the keys).
        load: gives the facts (`LogFacts.session`); raising OSError: none stored.

    Attributes:
        status: ``"not read"``, ``"valid"``, or why they are not used (``"none stored"``,
            ``"facts of version 2"``, ``"facts whose values changed since they were
            written"``, ``"facts of other texts"``, ``"unreadable facts (...)"``);
            `artifacts` may still find the extraction changed.
    """

    def __init__(self, frame: pd.DataFrame, load: Callable[[], bytes]) -> None:
        self._content = frame["content"]
        self._load = load
        self._lock = threading.Lock()
        self._table: Any = None
        self._header: dict[str, Any] = {}
        self._texts: list[str] = []
        self.status = "not read"

    def _read(self) -> bool:
        """Read and check the facts (once): whether they are those of these texts."""
        with self._lock:
            if self.status == "not read":
                try:
                    self.status = self._check()
                except OSError:
                    self.status = "none stored"
                except Exception as e:      # damaged: done again, never answered wrongly
                    self.status = f"unreadable facts ({type(e).__name__}: {e})"
                if self.status != "valid":
                    self._table = None
        return self.status == "valid"

    def _check(self) -> str:
        import pyarrow as pa

        table = pa.ipc.open_stream(pa.py_buffer(self._load())).read_all()
        table.validate(full=True)       # offsets and dictionary indices within bounds
        header = json.loads((table.schema.metadata or {})[KEY])
        if header.get("version") != VERSION:
            return f"facts of version {header.get('version')!r}"
        if header.get("payload") != payload_digest(table):
            return "facts whose values changed since they were written"
        entries = header.get("tokens")
        if not isinstance(entries, list) or any(
                not isinstance(e, dict) or e.get("column") != f"tokens_{i}"
                or e["column"] not in table.column_names for i, e in enumerate(entries)):
            return "facts whose header does not name their columns"     # (a changed bit)
        content = self._content
        texts = content.astype(object).where(content.notna(), "").tolist()
        if header.get("rows") != len(texts) or len(table) != len(texts) or \
                header.get("texts") != texts_digest(texts):
            return "facts of other texts"
        self._table, self._header, self._texts = table, header, texts
        return "valid"

    def artifacts(self) -> tuple[list[tuple[str, bool]], np.ndarray, list[str], list[str],
                                 np.ndarray] | None:
        """The stored artifacts as `ctxlab.artifacts.seed_artifacts` takes them; None
        when not valid, or extracted by another extraction
        (`ctxlab.artifacts.extraction_fingerprint`)."""
        from ctxlab.artifacts import extraction_fingerprint

        if not self._read():
            return None
        mine = extraction_fingerprint()
        if mine is None or self._header.get("artifacts") != mine:
            return None
        column = self._table.column("artifacts")
        arts = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
        user = self._table.column("user").to_numpy(zero_copy_only=False).tolist()
        offsets = arts.offsets.to_numpy()
        offsets = offsets - offsets[0]
        valid = np.flatnonzero(~arts.is_null().to_numpy(zero_copy_only=False))
        flat = arts.flatten()
        sizes = offsets[valid + 1] - offsets[valid]
        pairs = [p.partition(":") for p in flat.dictionary.to_pylist()]
        texts = self._texts
        return ([(texts[i], user[i]) for i in valid.tolist()],
                np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                [p[0] for p in pairs], [p[2] for p in pairs],
                flat.indices.to_numpy(zero_copy_only=False).astype(np.int64))

    def counts(self, key: str, fingerprint: str | None) -> tuple[list[str], list[int]] | None:
        """(texts, counts) stored for the tokenizer ``key`` with this ``fingerprint``
        (`Estimator.fingerprint`); None when none are (or not valid)."""
        if fingerprint is None or not self._read():
            return None
        for entry in self._header.get("tokens", []):
            if entry.get("key") == key and entry.get("fingerprint") == fingerprint:
                return self._texts, self._table.column(entry["column"]).to_numpy().tolist()
        return None

    def offer(self) -> SessionFacts:
        """Offer the facts to the artifact cache and the estimators (each reads them only
        when it meets a text it does not know): nothing is read now."""
        from ctxlab.artifacts import offer_artifacts
        from ctxlab.tokens.base import offer_counts

        offer_artifacts(self.artifacts)
        offer_counts(self.counts)
        return self


__all__ = ["KEY", "LogFacts", "SessionFacts", "VERSION", "describe_facts", "payload_digest",
           "preset_tokenizers", "storable", "texts_digest"]
