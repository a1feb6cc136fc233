"""Character-ratio estimators, as the seed systems define them.

Each is one `CharRatio`: characters (in the unit the system measures: JavaScript
counts UTF-16 units, Rust counts bytes) divided by a ratio, rounded up, times a
multiplier, plus the system's framing.

========================  =====================================================================
spec                      behaviour
========================  =====================================================================
``chars:<ratio>``         ⌈chars / ratio⌉ (default ratio 4)
``probe``                 ProbeAgent (seed 001): ⌈UTF-16 length / 4⌉
``neurolink[:provider]``  NeuroLink (seed 000): ⌈⌈len/4⌉ × provider multiplier × 1.15⌉,
                          +4 per message, +24 per conversation, images 1024; tool
                          definitions ⌈len/4⌉ (its budget check counts them apart,
                          ``JSON.stringify(tool).length / 4``, with no multiplier)
``neuron``                neuron-context (seed 004): ⌈UTF-8 bytes / 4.0⌉, +4 per message,
                          images 300 (documents 500)
``langchain``             ``count_tokens_approximately``: ⌈chars / 4⌉ + 3 per message
========================  =====================================================================
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.tokens.base import Estimator, Length, text_lengths, text_lengths_of, text_series
from ctxlab.tokens.registry import Family, register

# Seed 000: multipliers over a GPT-style baseline, by provider name.
NEUROLINK_MULTIPLIERS: dict[str, float] = {
    "anthropic": 1.23, "google-ai": 1.18, "vertex": 1.18, "mistral": 1.26, "openai": 1.0,
    "azure": 1.0, "bedrock": 1.23, "ollama": 1.0, "litellm": 1.0, "huggingface": 1.0,
    "sagemaker": 1.0,
}
NEUROLINK_MARGIN = 1.15
NEUROLINK_CHARS_PER_TOKEN = 4
NEUROLINK_CODE_CHARS_PER_TOKEN = 3
NEUROLINK_PER_MESSAGE = 4
NEUROLINK_PER_CONVERSATION = 24
NEUROLINK_IMAGE = 1024
NEURON_RATIO = 4.0
NEURON_PER_MESSAGE = 4
NEURON_IMAGE = 300
NEURON_DOCUMENT = 500
LANGCHAIN_PER_MESSAGE = 3


class CharRatio(Estimator):
    """⌈⌈length / ratio⌉ × multiplier⌉ per text, vectorised over the whole column.

    Example:
        >>> CharRatio(ratio=4, multiplier=1.23 * 1.15).count(["a" * 100]).tolist()
        [36]
    """

    # `count` measures lengths every time (cheap); `count_values`, which a replay calls
    # on every request, remembers each text's count in UTF-8 or UTF-16 units (encoding
    # costs), and takes lengths in characters afresh (cheaper than a lookup)
    cached = True

    def __init__(self, *, ratio: float, unit: Length = "chars", multiplier: float = 1.0,
                 per_message: int = 0, per_conversation: int = 0,
                 image_tokens: int | None = None, document_tokens: int | None = None,
                 plain_schemas: bool = False, spec: str = "") -> None:
        super().__init__()
        if not (ratio > 0 and math.isfinite(ratio)):
            raise ConfigError(f"characters per token must be a positive number, not {ratio!r}")
        self.ratio = float(ratio)
        self.unit: Length = unit
        self.multiplier = float(multiplier)
        self.per_message = per_message
        self.per_conversation = per_conversation
        self.image_tokens = image_tokens
        self.document_tokens = document_tokens
        self.plain_schemas = plain_schemas
        self.spec = spec or f"chars:{ratio:g}"

    def _count(self, texts: list[str]) -> np.ndarray:
        return self.from_lengths(text_lengths(pd.Series(texts, dtype="string"), self.unit))

    def count(self, texts: object) -> np.ndarray:  # type: ignore[override]
        if isinstance(texts, pd.Series) and texts.dtype == "string":
            texts = texts.fillna("").tolist()   # measured one by one below: no regex pass
        if isinstance(texts, (list, tuple, np.ndarray)):
            try:                            # texts measured one by one: no Series built
                return self.from_lengths(text_lengths_of(texts, self.unit))
            except (TypeError, AttributeError):
                pass                        # NA among them: text_series makes it ""
        return self.from_lengths(text_lengths(text_series(texts), self.unit))  # type: ignore[arg-type]

    def count_values(self, texts: np.ndarray) -> np.ndarray:
        """`Estimator.count_values`; a length in characters costs less to take than to
        look up, so only the other units use the cache."""
        if self.unit == "chars" and len(texts):
            try:
                return self.from_lengths(np.fromiter(map(len, texts), dtype=np.int64,
                                                     count=len(texts)))
            except TypeError:                   # NA among them: counted as ""
                pass
        return super().count_values(texts)

    def count_parts(self, parts: Any) -> np.ndarray:
        """`Estimator.count_parts`; with ``plain_schemas`` (NeuroLink) a tool definition
        is ⌈length / ratio⌉, without the multiplier.

        Example:
            >>> from ctxlab.tokens import estimator
            >>> df = pd.DataFrame({"content": ["x" * 400] * 2, "kind": ["text", "tool_schema"]})
            >>> estimator("neurolink:anthropic").count_parts(df).tolist()
            [142, 100]
        """
        counts = super().count_parts(parts)
        if not self.plain_schemas:
            return counts
        if isinstance(parts, pd.DataFrame):
            kind = parts["kind"].to_numpy(dtype=object, na_value="")
            content = parts["content"].to_numpy(dtype=object, na_value="")
        else:
            kind, content = parts.col("kind"), parts.col("content")
        rows = np.flatnonzero(kind == "tool_schema")
        if len(rows):
            texts = ["" if content[i] is None else content[i] for i in rows]
            counts[rows] = np.ceil(text_lengths_of(texts, self.unit) / self.ratio)
        return counts

    def from_lengths(self, lengths: np.ndarray) -> np.ndarray:
        """Counts from lengths already measured in this estimator's unit."""
        base = np.ceil(lengths / self.ratio)
        if self.multiplier != 1.0:
            base = np.ceil(base * self.multiplier)
        return base.astype(np.int64)


def _chars(arg: str | None) -> Estimator:
    try:
        ratio = float(arg) if arg else 4.0
    except ValueError:
        raise ConfigError(f"chars:<ratio> takes a number of characters per token, not {arg!r} "
                          f"(e.g. chars:4 or chars:3.5)") from None
    return CharRatio(ratio=ratio)


def _neurolink(arg: str | None) -> Estimator:
    provider = (arg or "").lower()
    if provider and provider not in NEUROLINK_MULTIPLIERS:
        raise ConfigError(f"neurolink has no multiplier for provider {provider!r}; known: "
                          f"{', '.join(sorted(NEUROLINK_MULTIPLIERS))} (or plain 'neurolink')")
    return CharRatio(ratio=NEUROLINK_CHARS_PER_TOKEN, unit="utf16",
                     multiplier=NEUROLINK_MULTIPLIERS.get(provider, 1.0) * NEUROLINK_MARGIN,
                     per_message=NEUROLINK_PER_MESSAGE,
                     per_conversation=NEUROLINK_PER_CONVERSATION, image_tokens=NEUROLINK_IMAGE,
                     plain_schemas=True)


def _neuron(arg: str | None) -> Estimator:
    return CharRatio(ratio=NEURON_RATIO, unit="utf8", per_message=NEURON_PER_MESSAGE,
                     image_tokens=NEURON_IMAGE, document_tokens=NEURON_DOCUMENT)


def _probe(arg: str | None) -> Estimator:
    return CharRatio(ratio=4, unit="utf16")


def _langchain(arg: str | None) -> Estimator:
    return CharRatio(ratio=4, per_message=LANGCHAIN_PER_MESSAGE)


register(Family(name="chars", make=_chars, doc="chars:<ratio>, ceil(characters / ratio); "
                "default 4"))
register(Family(name="neurolink", make=_neurolink,
                doc="neurolink:<provider>, seed 000: chars/4 x provider multiplier x 1.15, "
                    "+4/message, +24/conversation, images 1024"))
register(Family(name="neuron", make=_neuron, argument="none",
                doc="seed 004: UTF-8 bytes / 4.0, +4/message, images 300, documents 500"))
register(Family(name="probe", make=_probe, argument="none",
                doc="seed 001: UTF-16 length / 4"))
register(Family(name="langchain", make=_langchain, argument="none",
                doc="LangChain count_tokens_approximately: chars/4 + 3/message"))
