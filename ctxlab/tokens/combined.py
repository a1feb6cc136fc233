"""``max:<a>,<b>``: the larger of two estimates, per text (seed 002's context guard).

Seed 002 counts with the configured tokenizer and with ⌈chars/4⌉ and keeps the larger,
so it never under-counts when the tokenizer is the wrong one for the model. It scales
tool schemas by 2.09 (their JSON costs more on the wire than its characters suggest).
Both sides may be any spec, including exact tokenizers; framing is the larger of the two.
"""

from __future__ import annotations

import numpy as np

from ctxlab.errors import ConfigError
from ctxlab.tokens.base import Estimator
from ctxlab.tokens.registry import Family, estimator, register

SCHEMA_SCALE = 2.09


def split_pair(arg: str) -> tuple[str, str]:
    """Split ``"a,b"`` at the top-level comma (specs themselves hold no commas but ``max:``)."""
    if arg.lower().startswith("max:"):
        raise ConfigError("max:<a>,<b> cannot nest another max: as its first side")
    a, sep, b = arg.partition(",")
    if not sep or not a.strip() or not b.strip():
        raise ConfigError(f"max:<a>,<b> needs two estimator specs separated by a comma, "
                          f"not {arg!r} (e.g. max:tiktoken:cl100k_base,chars:4)")
    return a.strip(), b.strip()


class Max(Estimator):
    """Per text, the larger of two estimators' counts.

    Example:
        >>> Max(estimator("chars:4"), estimator("chars:2")).count(["abcdefgh"]).tolist()
        [4]
    """

    def __init__(self, a: Estimator, b: Estimator, *, schema_scale: float = SCHEMA_SCALE) -> None:
        super().__init__()
        self.a, self.b = a, b
        self.exact = False
        self.schema_scale = schema_scale
        self.per_message = max(a.per_message, b.per_message)
        self.per_conversation = max(a.per_conversation, b.per_conversation)
        self.image_tokens = (None if a.image_tokens is None and b.image_tokens is None
                             else max(a.image_tokens or 0, b.image_tokens or 0))
        self.spec = f"max:{a.spec},{b.spec}"

    def _count(self, texts: list[str]) -> np.ndarray:
        return np.maximum(self.a.count(texts), self.b.count(texts))


def _max(arg: str | None) -> Estimator:
    a, b = split_pair(arg or "")
    return Max(estimator(a), estimator(b))


register(Family(name="max", make=_max, argument="required",
                doc="max:<a>,<b>, seed 002: the larger of two estimates, tool schemas x 2.09"))
