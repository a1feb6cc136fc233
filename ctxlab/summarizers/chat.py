"""What every LLM summarizer shares: options, the request, recorded responses, errors.

`ChatSummarizer` builds the nine-section prompt (`ctxlab.summarizers.prompt`), asks
its backend for at most ``budget_tokens`` tokens at temperature 0, consults the
recorded-response cache (`ctxlab.summarizers.responses`) before any network call, cuts
an answer that still runs over the budget, and turns every failure into a
`SummarizerError` with a ``kind`` (timeout, http, overflow, connection, empty,
missing...). Subclasses (`openai`, `anthropic`) only say how a request looks and how
it is sent.

Options (keyword arguments of the constructor and of
``ctxlab.summarizer(name, **options)``):

* ``model``: the model name the endpoint knows;
* ``base_url``: the endpoint (None: the SDK's default, or its environment variable);
* ``api_key`` / ``api_key_env``: the key, or the environment variable holding it
  (read when the first request is sent; a key never appears in a name or an event);
* ``timeout`` (seconds per request), ``max_retries`` (the SDK's retries on
  connection errors, 429 and 5xx), ``temperature``, ``seed``;
* ``cache`` (a JSONL path) and ``cache_mode`` (``replay``, ``record``, ``auto``);
* ``name``: the registry name (default: derived from the options that differ from the
  backend's defaults, e.g. ``openai[base_url=http://127.0.0.1:8080/v1,model=smollm2]``).
"""

from __future__ import annotations

import hashlib
import os
import time
from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.overflow import is_context_overflow
from ctxlab.summarizers.base import (DEFAULT_BUDGET_TOKENS, Summarizer, SummarizerError,
                                     Summary, resolve_estimator)
from ctxlab.summarizers.prompt import build_prompt, fit_text
from ctxlab.summarizers.responses import ResponseCache, check_mode, request_key
from ctxlab.tokens.base import Estimator


class ChatSummarizer(Summarizer):
    """Base of the LLM backends (see the module docstring for the options)."""

    backend: ClassVar[str] = ""
    default_model: ClassVar[str] = ""
    default_key_env: ClassVar[str] = ""
    package: ClassVar[str] = ""
    client_class: ClassVar[str] = ""
    base_error: ClassVar[str] = ""

    def __init__(self, *, model: str | None = None, base_url: str | None = None,
                 api_key: str | None = None, api_key_env: str | None = None,
                 timeout: float = 60.0, max_retries: int = 2, temperature: float = 0.0,
                 seed: int | None = 0, cache: str | Path | None = None,
                 cache_mode: str = "auto", name: str | None = None,
                 http_client: Any = None) -> None:
        self.model = model or self.default_model
        self.base_url = base_url
        self.api_key, self.api_key_env = api_key, api_key_env or self.default_key_env
        self.timeout, self.max_retries = timeout, max_retries
        self.temperature, self.seed = temperature, seed
        self.cache_path = Path(cache) if cache is not None else None
        self.cache_mode = check_mode(cache_mode)
        self.http_client = http_client
        problems = []
        if not isinstance(self.model, str) or not self.model:
            problems.append(f"model must be a non-empty string, not {model!r}")
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            problems.append(f"timeout must be a positive number of seconds, not {timeout!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            problems.append(f"max_retries must be an integer >= 0, not {max_retries!r}")
        if not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2:
            problems.append(f"temperature must be in [0, 2], not {temperature!r}")
        if problems:
            raise ConfigError(f"{self.backend}: " + "; ".join(problems))
        self.name = name or self._derived_name()
        self._cache = ResponseCache(self.cache_path) if self.cache_path is not None else None
        self._client: Any = None

    # ---- identity -------------------------------------------------------------------------
    def options(self) -> dict[str, Any]:
        """The options that differ from the backend's defaults (the key as a short hash)."""
        out: dict[str, Any] = {}
        defaults = {"model": self.default_model, "base_url": None,
                    "api_key_env": self.default_key_env, "timeout": 60.0, "max_retries": 2,
                    "temperature": 0.0, "seed": 0, "cache_mode": "auto"}
        for k, default in defaults.items():
            if getattr(self, k) != default:
                out[k] = getattr(self, k)
        if self.api_key:
            out["key"] = hashlib.sha256(self.api_key.encode()).hexdigest()[:8]
        if self.cache_path is not None:
            out["cache"] = self.cache_path.name
        return out

    def _derived_name(self) -> str:
        opts = self.options()
        if not opts:
            return self.backend
        return f"{self.backend}[{','.join(f'{k}={v}' for k, v in sorted(opts.items()))}]"

    @property
    def label(self) -> str:
        """How errors name this backend: ``openai (model at base_url)``."""
        where = f" at {self.base_url}" if self.base_url else ""
        return f"{self.backend} ({self.model}{where})"

    def with_options(self, **options: Any) -> ChatSummarizer:
        known = ("model", "base_url", "api_key", "api_key_env", "timeout", "max_retries",
                 "temperature", "seed", "cache", "cache_mode", "name", "http_client")
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ConfigError(f"{self.backend}: unknown option(s) {', '.join(unknown)}; "
                              f"options: {', '.join(known)}")
        return type(self)(**options)

    def key(self) -> str:
        """The API key: the ``api_key`` option, else the ``api_key_env`` variable.

        Raises:
            SummarizerError: (kind ``config``) neither is set.
        """
        key = self.api_key or os.environ.get(self.api_key_env or "")
        if not key:
            raise SummarizerError(f"{self.label}: no API key: set the environment variable "
                                  f"{self.api_key_env} or pass api_key=...", kind="config")
        return key

    # ---- what subclasses provide --------------------------------------------------------
    @abstractmethod
    def request(self, system: str, user: str, max_tokens: int) -> dict[str, Any]:
        """The request body (JSON-able; it is also what the cache key is made of)."""

    @abstractmethod
    def call(self, request: dict[str, Any]) -> Any:
        """Send a request with the SDK client; the SDK's response object."""

    @abstractmethod
    def parse(self, response: Any) -> tuple[str, int | None, int | None]:
        """The answer's text and the reported input and output tokens."""

    def client(self) -> Any:
        """The SDK client (class ``client_class`` of the SDK), made on first use."""
        if self._client is None:
            make = getattr(self.sdk(), self.client_class)
            self._client = make(api_key=self.key(), base_url=self.base_url,
                                timeout=float(self.timeout), max_retries=int(self.max_retries),
                                http_client=self.http_client)
        return self._client

    def send(self, request: dict[str, Any]) -> tuple[str, int | None, int | None]:
        """Send a request: the answer's text and the reported input and output tokens.

        Raises:
            SummarizerError: every failure, with its kind (the SDK has already retried
                what it retries: connection errors, 408, 409, 429 and 5xx).
        """
        sdk = self.sdk()
        try:
            response = self.call(request)
        except sdk.APITimeoutError:
            raise SummarizerError(f"{self.label}: no answer within {self.timeout:g} s "
                                  f"(timeout=...)", kind="timeout") from None
        except sdk.APIConnectionError as e:
            raise SummarizerError(f"{self.label}: cannot connect: {e.__cause__ or e}",
                                  kind="connection") from None
        except sdk.APIStatusError as e:
            raise self.http_error(e.status_code, status_message(e)) from None
        except getattr(sdk, self.base_error) as e:
            raise SummarizerError(f"{self.label}: {type(e).__name__}: {e}") from None
        return self.parse(response)

    def sdk(self) -> Any:
        """The backend's SDK module, imported on first use.

        Raises:
            SummarizerError: (kind ``config``) the package is not installed.
        """
        try:
            return __import__(self.package)
        except ImportError:
            raise SummarizerError(f"{self.label}: the {self.package!r} package is not "
                                  f"installed: pip install {self.package}",
                                  kind="config") from None

    def http_error(self, status: int, message: str) -> SummarizerError:
        """The error for an HTTP error answer: ``overflow`` when its text says the prompt
        did not fit the context window, else ``http``."""
        kind = "overflow" if is_context_overflow(message) else "http"
        what = "the prompt does not fit the model's context window: " if kind == "overflow" \
            else ""
        return SummarizerError(f"{self.label}: HTTP {status}: {what}{message[:300]}",
                               kind=kind, status=status)

    # ---- the summary --------------------------------------------------------------------
    def summarize(self, parts: pd.DataFrame, previous: str | None = None, *,
                  budget_tokens: int = DEFAULT_BUDGET_TOKENS,
                  estimator: Estimator | str | None = None) -> Summary:
        est = resolve_estimator(estimator)
        budget = max(1, int(budget_tokens))
        system, user = build_prompt(parts, previous=previous, budget_tokens=budget)
        req = self.request(system, user, budget)
        key = request_key(self.backend, self.model, req)
        rec = self._cache.get(key) if self._cache is not None \
            and self.cache_mode != "record" else None
        if rec is not None and "error" in rec:
            raise SummarizerError(rec["message"], kind=rec["error"], status=rec["status"])
        if rec is not None:
            text, n_in, n_out, ms = rec["text"], rec["input_tokens"], rec["output_tokens"], \
                float(rec["ms"])
        elif self._cache is not None and self.cache_mode == "replay":
            raise SummarizerError(
                f"{self.label}: no recorded response for request {key[:16]} in "
                f"{self.cache_path}; record it once against a live endpoint with "
                f"cache_mode='record' (or 'auto')", kind="missing")
        else:
            t0 = time.perf_counter()
            try:
                text, n_in, n_out = self.send(req)
            except SummarizerError as e:
                if self._cache is not None:
                    self._cache.put_error(key, backend=self.backend, model=self.model,
                                          error=e.kind, status=e.status, message=str(e),
                                          ms=1000 * (time.perf_counter() - t0))
                raise
            ms = round(1000 * (time.perf_counter() - t0), 1)  # as the cache records it
            if self._cache is not None:
                self._cache.put(key, backend=self.backend, model=self.model, text=text,
                                input_tokens=n_in if n_in is not None else -1,
                                output_tokens=n_out if n_out is not None else -1, ms=ms)
        text = (text or "").strip()
        if not text:
            raise SummarizerError(f"{self.label}: the model returned an empty summary",
                                  kind="empty")
        text = fit_text(text, budget, est)
        if n_in is None or n_in < 0:
            n_in = int(est.count([system, user]).sum())
        return Summary(text=text, input_tokens=int(n_in),
                       output_tokens=int(est.count([text])[0]), ms=float(ms),
                       backend=self.backend, model=self.model)


def status_message(e: Any) -> str:
    """The most telling text of an SDK status error: the body's message, else the body."""
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
    try:
        return e.response.text or str(e)
    except Exception:  # noqa: BLE001 - a response without text
        return str(e)

