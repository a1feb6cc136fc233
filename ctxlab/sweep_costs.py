"""What a sweep's rows cost: illustrative prices per model family (`PRICES`,
`price_for`, `price_table` with a user's entries) and the estimator that counts every
configuration's requests alike (`MEASURE`, `Metering`; `ctxlab.measure`). `ctxlab.sweep`
re-exports them."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxlab.errors import ConfigError

PRICES: dict[str, tuple[float, float]] = {
    "claude-opus": (15.0, 75.0), "claude-opus-4-5": (5.0, 25.0), "claude-opus-4-6": (5.0, 25.0),
    "claude-sonnet": (3.0, 15.0), "claude-haiku": (1.0, 5.0), "claude-3-5-haiku": (0.8, 4.0),
    "claude-3-opus": (15.0, 75.0), "claude-3-haiku": (0.25, 1.25),
    "gpt-4.1": (2.0, 8.0), "gpt-4.1-mini": (0.4, 1.6), "gpt-4.1-nano": (0.1, 0.4),
    "gpt-4o": (2.5, 10.0), "gpt-4o-mini": (0.15, 0.6), "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0), "gpt-5-nano": (0.05, 0.4), "o3": (2.0, 8.0),
    "o4-mini": (1.1, 4.4), "gemini-2.5-pro": (1.25, 10.0), "gemini-2.5-flash": (0.3, 2.5),
    "gemini-3-pro": (2.0, 12.0), "default": (3.0, 15.0)}
"""USD per million (input, output) tokens by model family: the longest key a model name
starts with (case ignored; a provider's prefix dropped: ``openrouter/openai/gpt-4o-mini``,
``us.anthropic.claude-...``), else ``default``. Illustrative list prices (no cache or batch
discounts) for comparing configurations, not a bill; pass ``prices=`` to `sweep` to
change or add families. Requests are priced as input at their call's model; summarizer
input and output at the session's first model. The agent's own output is the same under
every configuration and is left out."""

MEASURE = "tiktoken:o200k_base"
"""The estimator that counts ``tokens_sent`` and ``cost`` for every configuration of a
sweep (`ctxlab.measure`) unless ``measure=`` names another: configurations that count
tokens their own way would otherwise differ in what they report, not in what they send.
An exact tokenizer, stored with a corpus dataset's facts (`ctxlab.facts`)."""


@dataclass(frozen=True)
class Metering:
    """How a sweep's rows price and count the requests: USD per million tokens by model
    family (`price_table`) and the estimator spec that counts them (`MEASURE`)."""

    prices: Mapping[str, tuple[float, float]]
    measure: str


def measure_spec(spec: Any) -> str:
    """A sweep's ``measure``: an estimator spec that resolves (default `MEASURE`)."""
    from ctxlab.tokens import estimator as get_estimator

    if spec is None:
        return MEASURE
    if not isinstance(spec, str):
        raise ConfigError(f"measure is an estimator spec such as {MEASURE!r}, not {spec!r} "
                          f"(the workers build it from its spec)")
    if "{provider}" not in spec:
        get_estimator(spec)         # an unknown spec fails here, not in every worker
    return spec


def price_for(model: Any, prices: Mapping[str, tuple[float, float]] = PRICES
              ) -> tuple[float, float]:
    """(input, output) USD per million tokens for a model name (`PRICES` rules).

    Example:
        >>> price_for("claude-sonnet-4-5-20250929"), price_for("gpt-4.1-mini-2025")
        ((3.0, 15.0), (0.4, 1.6))
    """
    name = _family(model) if isinstance(model, str) else ""
    keys = [k for k in prices if k != "default" and name.startswith(k.lower())]
    if keys:
        return prices[max(keys, key=len)]
    if "default" not in prices:
        raise ConfigError(f"no price for model {model!r} and no 'default' in the price table")
    return prices["default"]


_VENDOR = re.compile(r"^(?:(?:us|eu|apac|us-gov|global)\.)?(?:anthropic|meta|mistral|amazon|"
                     r"cohere|ai21|deepseek|openai|google|qwen)\.")
"""A Bedrock model id's vendor (and inference profile's region): ``us.anthropic.``."""


def _family(name: str) -> str:
    """A model name as price keys are matched: lower case, without the provider prefix a
    log or router adds (``openrouter/openai/``, Bedrock's ``us.anthropic.``)."""
    return _VENDOR.sub("", name.strip().lower().rsplit("/", 1)[-1])


def price_table(prices: Mapping[str, Any] | None) -> dict[str, tuple[float, float]]:
    """`PRICES` with a user's entries over it (keys ignore case: a user's ``GPT-4.1``
    replaces the built-in ``gpt-4.1``); each entry checked.

    Example:
        >>> price_table({"GPT-4.1": (1, 4)})["gpt-4.1"]
        (1.0, 4.0)
    """
    table = {k.lower(): v for k, v in PRICES.items()}
    for key, value in (prices or {}).items():
        ok = isinstance(value, (tuple, list)) and len(value) == 2 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            and x >= 0 for x in value)
        if not isinstance(key, str) or not key.strip() or not ok:
            raise ConfigError(f"prices[{key!r}] = {value!r}: give a model family name and "
                              f"(input, output) USD per million tokens, two numbers >= 0")
        name = key.strip().lower()      # matched as model names are: provider prefix off
        table[_family(name) if name != "default" else name] = (
            float(value[0]), float(value[1]))
    return table


__all__ = ["MEASURE", "PRICES", "Metering", "measure_spec", "price_for", "price_table"]
