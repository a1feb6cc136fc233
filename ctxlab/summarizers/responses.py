"""Recorded responses: LLM summaries stored as JSONL and replayed without a network.

A notebook that summarizes with a real model must give the same output under nbval,
on a machine with no model and no network. `ResponseCache` keeps one JSON object per
line — the response text, its token counts and the time the call took — keyed by the
SHA-256 of the backend, the model and the full request (messages, token limit,
temperature, seed). An LLM summarizer created with ``cache=PATH`` consults it first:

* ``cache_mode="replay"``: only recorded responses; a missing one is a `SummarizerError`
  of kind ``"missing"`` naming the key, never a network call;
* ``cache_mode="record"``: call the backend and append what it answers;
* ``cache_mode="auto"`` (default): recorded when present, else call and append.

A recorded response replays its recorded ``ms`` too, so events stay identical. An
answer that is an error about the request itself — an HTTP error, a prompt that does not
fit the model — is recorded as well (``error``, ``status``, ``message``) and raised again
on replay; timeouts and connection failures are not, for they say nothing about the
request. The file is only ever appended to, one line per new key; a line that is not a
response record is an error naming ``file:line``.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "r.jsonl"
    >>> cache = ResponseCache(path)
    >>> key = request_key("openai", "m", {"messages": [{"role": "user", "content": "hi"}]})
    >>> cache.get(key) is None
    True
    >>> cache.put(key, backend="openai", model="m", text="Hello.", input_tokens=9,
    ...           output_tokens=2, ms=12.5)
    >>> ResponseCache(path).get(key)["text"]
    'Hello.'
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from ctxlab.errors import ConfigError, LoadError

CacheMode = Literal["replay", "record", "auto"]
CACHE_MODES: tuple[str, ...] = ("replay", "record", "auto")
_FIELDS = ("key", "backend", "model", "text", "input_tokens", "output_tokens", "ms")
_ERROR_FIELDS = ("key", "backend", "model", "error", "status", "message", "ms")
RECORDED_ERRORS: tuple[str, ...] = ("http", "overflow")
"""Failure kinds that are recorded: answers about the request, which a replay repeats."""
TRANSIENT_STATUS = frozenset({401, 403, 408, 409, 429})
"""HTTP answers about the moment or the credentials, not the request (rate limits,
overload, a bad key): never recorded, like 5xx answers, timeouts and connection errors."""


def is_recorded_error(error: str, status: int | None) -> bool:
    """Whether a failure is an answer about the request itself, which a replay repeats:
    an overflow, or an HTTP 4xx other than `TRANSIENT_STATUS`.

    Example:
        >>> [is_recorded_error("http", s) for s in (400, 413, 429, 503, None)]
        [True, True, False, False, False]
    """
    if error == "overflow":
        return True
    return error in RECORDED_ERRORS and status is not None and 400 <= status < 500 \
        and status not in TRANSIENT_STATUS


def request_key(backend: str, model: str, request: dict[str, Any]) -> str:
    """SHA-256 (hex) of a request: backend, model and the request as canonical JSON."""
    blob = json.dumps({"backend": backend, "model": model, "request": request},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Recorded responses in one JSONL file (read once, appended to).

    Args:
        path: the file; it need not exist yet (it is created on the first `put`).

    Raises:
        LoadError: a line is not JSON, or lacks a field of a response record.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._records: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            with self.path.open(encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    if line.strip():
                        self._read(line, n)

    def _read(self, line: str, n: int) -> None:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise LoadError(f"not a JSON line ({e.msg}); a recorded-response file holds one "
                            f"JSON object per line: fix or remove this line",
                            path=str(self.path), line=n) from None
        need = _ERROR_FIELDS if isinstance(rec, dict) and "error" in rec else _FIELDS
        missing = [f for f in need if not isinstance(rec, dict) or f not in rec]
        if missing:
            raise LoadError(f"a recorded response needs {', '.join(missing)}; fix or remove "
                            f"this line", path=str(self.path), line=n)
        self._records[rec["key"]] = rec

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, key: str) -> bool:
        return key in self._records

    def get(self, key: str) -> dict[str, Any] | None:
        """The record of a key, or None."""
        return self._records.get(key)

    def put(self, key: str, *, backend: str, model: str, text: str, input_tokens: int,
            output_tokens: int, ms: float) -> None:
        """Record a response (appended as one line; a key already present is kept)."""
        self._append({"key": key, "backend": backend, "model": model, "text": text,
                      "input_tokens": int(input_tokens), "output_tokens": int(output_tokens),
                      "ms": round(float(ms), 1)})

    def put_error(self, key: str, *, backend: str, model: str, error: str,
                  status: int | None, message: str, ms: float) -> None:
        """Record an error answer about the request (`is_recorded_error`; others, such
        as a rate limit or an overloaded server, are not: a later run tries again)."""
        if is_recorded_error(error, status):
            self._append({"key": key, "backend": backend, "model": model, "error": error,
                          "status": status, "message": message, "ms": round(float(ms), 1)})

    def _append(self, rec: dict[str, Any]) -> None:
        if rec["key"] in self._records:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
        self._records[rec["key"]] = rec


def check_mode(mode: str) -> CacheMode:
    """``mode`` when it is a cache mode.

    Raises:
        ConfigError: it is not one.
    """
    if mode not in CACHE_MODES:
        raise ConfigError(f"cache_mode must be one of {', '.join(CACHE_MODES)}, not {mode!r}")
    return mode  # type: ignore[return-value]
