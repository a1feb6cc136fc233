"""Calibrated estimators: characters-per-token fitted per content class, saved as JSON.

Two references:

* a tokenizer spec (``"tiktoken:o200k_base"``): per rate group (content class, or
  ``thinking``), the ratio of summed tokens to summed characters over every part —
  closest to that tokenizer in total;
* ``"reported"`` (billed input per call; the default): in two stages. The shape
  comes from a tokenizer (per-group rates, as above, from thousands of parts);
  then a weighted least-squares fit of every call's ``input_total`` on the
  shaped tokens of the call's input gives one *scale* per model (Claude bills
  about 1.2 o200k tokens per o200k token) and a separate rate for thinking (its
  logged text is a summary; the provider bills the original), with one free
  intercept per session segment (between recorded compactions) for the unrecorded
  system prompt, tool schemas and re-attached files.
  Weights are 1/√``input_total``; the scale and thinking rate are pulled gently
  towards the tokenizer's values so a log with little thinking keeps a sane
  rate. Message framing is held at 4 tokens: message counts grow in step with
  characters, and a free coefficient soaks up the other rates' error (an early
  version fitted 160 tokens per message and 0.06 per character of tool output,
  which was wrong on the next session). Fits are per model and pooled (``"*"``).

`calibrate` returns the pooled estimator; `fit_calibration` every table.
`Calibrated.upper()` scales the rates by the 95th percentile of the fit's
under-estimation, for triggers that must not fire late. The family
``calibrated:<file>`` loads a saved calibration; ``calibrated-upper:<file>`` its upper bound.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.tokens.accuracy import PartsSource, segment_keys
from ctxlab.tokens.base import Estimator, text_lengths, text_series
from ctxlab.tokens.content import CLASSES, classify
from ctxlab.tokens.registry import Family, estimator as get_estimator, register
from ctxlab.visibility import call_segments, call_sums, sent_parts

FORMAT = "ctxlab-calibration/1"
PRIOR_RATE = 0.25
DEFAULT_SHAPE = "tiktoken:o200k_base"
PRIOR_WEIGHT = 10.0
PER_MESSAGE = 4.0
MAX_THINKING_RATE = 1.0  # tokens per character: more means the fit is absorbing other error
GROUPS: tuple[str, ...] = (*CLASSES, "thinking")


def groups(texts: pd.Series, kinds: pd.Series | None) -> np.ndarray:
    """The rate group of every text: its content class, or ``thinking`` for thinking parts.

    Thinking gets its own rate because providers treat earlier reasoning differently
    (dropped, summarised or kept), whatever its text looks like.
    """
    cls = classify(texts, kinds).astype(str).to_numpy()
    if kinds is None:
        return cls
    return np.where(kinds.to_numpy(dtype=object, na_value="") == "thinking", "thinking", cls)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rates:
    """One fitted table: tokens per character by content class, framing, upper margin."""

    tokens_per_char: Mapping[str, float]
    per_message: float = 0.0
    upper_margin: float = 1.0
    calls: int = 0
    mape_pct: float | None = None
    scale: float = 1.0

    def to_json(self) -> dict[str, Any]:
        return {"tokens_per_char": dict(self.tokens_per_char), "per_message": self.per_message,
                "upper_margin": self.upper_margin, "calls": self.calls, "mape_pct": self.mape_pct,
                "scale": self.scale}


class Calibrated(Estimator):
    """⌈characters × fitted tokens-per-character of the text's content class⌉.

    Example:
        >>> est = Calibrated(Rates(tokens_per_char={"prose": 0.25, "code": 0.4}))
        >>> est.count(["Some plain words here.", "def f(x):\\n    return x"]).tolist()
        [6, 9]
    """

    cached = False

    def __init__(self, rates: Rates, *, reference: str = "", model: str = "*",
                 spec: str = "", calibration: Calibration | None = None) -> None:
        super().__init__()
        self.rates = rates
        self.calibration = calibration
        self.reference = reference
        self.model = model
        self.per_message = rates.per_message  # type: ignore[assignment]
        self.spec = spec or f"calibrated({reference or '?'}, {model})"
        self._rate = np.array([rates.tokens_per_char.get(c, PRIOR_RATE) for c in GROUPS])

    def _count(self, texts: list[str]) -> np.ndarray:
        return self._estimate(pd.Series(texts, dtype="string"), None)

    def count(self, texts: object) -> np.ndarray:  # type: ignore[override]
        return self._estimate(text_series(texts), None)  # type: ignore[arg-type]

    def count_parts(self, parts: Any) -> np.ndarray:
        if not isinstance(parts, pd.DataFrame):      # a ctxlab.stages.table.Table
            return self._estimate(text_series(parts.col("content")),
                                  pd.Series(parts.col("kind"), dtype="string"))
        return self._estimate(parts["content"], parts["kind"])

    def _estimate(self, texts: pd.Series, kinds: pd.Series | None) -> np.ndarray:
        codes = pd.Categorical(groups(texts, kinds), categories=GROUPS).codes
        return np.ceil(text_lengths(texts) * self._rate[codes]).astype(np.int64)

    def framing(self, messages: int) -> int:
        return int(round(self.per_message * int(messages)))

    def upper(self) -> Calibrated:
        """The same estimator scaled up by the fit's 95th-percentile under-estimation."""
        m = self.rates.upper_margin
        rates = Rates(tokens_per_char={k: v * m for k, v in self.rates.tokens_per_char.items()},
                      per_message=self.rates.per_message * m, upper_margin=1.0,
                      calls=self.rates.calls, mape_pct=None)
        return Calibrated(rates, reference=self.reference, model=self.model,
                          spec=f"{self.spec} upper", calibration=self.calibration)

    def save(self, path: str | Path) -> Path:
        """Write the calibration this estimator came from (load it as ``calibrated:<path>``)."""
        if self.calibration is None:
            raise ConfigError("this estimator was built from rates alone; nothing to save")
        return self.calibration.save(path)


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """Fitted tables per model (``"*"`` pooled), with what they were fitted on."""

    reference: str
    tables: Mapping[str, Rates]
    overhead_tokens: Mapping[str, float]

    def estimator(self, model: str = "*", *, upper: bool = False) -> Calibrated:
        """The estimator of one model's table (``"*"``: pooled)."""
        if model not in self.tables:
            raise ConfigError(f"no calibration for model {model!r}; fitted: {sorted(self.tables)}")
        est = Calibrated(self.tables[model], reference=self.reference, model=model,
                         calibration=self)
        return est.upper() if upper else est

    def save(self, path: str | Path) -> Path:
        """Write the calibration as JSON."""
        p = Path(path)
        p.write_text(json.dumps({"format": FORMAT, "reference": self.reference,
                                 "tables": {k: v.to_json() for k, v in self.tables.items()},
                                 "overhead_tokens": dict(self.overhead_tokens)},
                                indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return p

    @staticmethod
    def load(path: str | Path) -> Calibration:
        """Read a calibration written by `save`."""
        p = Path(path)
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
            if doc.get("format") != FORMAT:
                raise ValueError(f"format is {doc.get('format')!r}, expected {FORMAT!r}")
            tables = {k: Rates(tokens_per_char={c: float(r) for c, r in
                                                v["tokens_per_char"].items()},
                               per_message=float(v["per_message"]),
                               upper_margin=float(v["upper_margin"]), calls=int(v["calls"]),
                               mape_pct=v.get("mape_pct"), scale=float(v.get("scale", 1.0)))
                      for k, v in doc["tables"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise ConfigError(f"{p}: not a ctxlab calibration file ({e}); write one with "
                              f"ctxlab.calibrate(...).save(path) or ctxlab estimators LOG "
                              f"--calibrate FILE") from None
        return Calibration(reference=str(doc.get("reference", "")), tables=tables,
                           overhead_tokens=doc.get("overhead_tokens", {}))


def calibrate(source: PartsSource, reference: str | None = None,
              shape: str | Estimator = DEFAULT_SHAPE) -> Calibrated:
    """A calibrated estimator fitted on a transcript or corpus.

    Args:
        source: a transcript or corpus.
        reference: ``"reported"`` (billed input per call), a tokenizer spec, or None:
            reported usage where the log has it (3+ calls), else ``shape``.
        shape: the tokenizer whose per-class rates give the shape that reported usage
            then scales (any exact tokenizer close to the model's).

    Returns:
        The pooled estimator; ``.calibration`` holds every table and the fitted
        overheads, ``.save(path)`` writes them for ``calibrated:<path>``.

    Raises:
        ConfigError: ``"reported"`` on a log with fewer than 3 calls with reported usage.
    """
    if reference is None:
        reference = "reported" if reported_calls(source) >= 3 else str(
            shape if isinstance(shape, str) else shape.spec)
    return fit_calibration(source, reference, shape).estimator()


def reported_calls(source: PartsSource) -> int:
    """Calls with a reported input above 0 (some logs write 0 for a call they did not
    count: no usage to fit or compare)."""
    return int((source.calls["input_total"].astype("Float64") > 0).sum())


def fit_calibration(source: PartsSource, reference: str = "reported",
                    shape: str | Estimator = DEFAULT_SHAPE) -> Calibration:
    """Every table `calibrate` fits: per model for ``"reported"``, plus the pooled ``"*"``."""
    if reference != "reported":
        return _fit_tokenizer(source, reference)
    calls = source.calls
    if reported_calls(source) < 3:
        raise ConfigError("calibrating on reported usage needs at least 3 calls with a reported "
                          "input_total above 0; this source has fewer — pass "
                          "reference='tiktoken:...'")
    # the shape from what the calls were sent: a part no call saw (mini-swe-agent's
    # submission diff) must not set the rates the billed input is fitted on
    base = _fit_tokenizer(source, shape, sent_parts(source)).tables["*"]
    features = _call_features(source, base)
    pooled, overhead = _fit_reported(features, base)
    tables: dict[str, Rates] = {"*": pooled}
    models = calls["model"].dropna().unique()
    if len(models) > 1:
        for m in models:
            sub = features[calls["model"].eq(m).fillna(False).to_numpy(dtype=bool)]
            if (sub["input_total"] > 0).sum() >= 3:
                tables[str(m)] = _fit_reported(sub, base)[0]
    return Calibration(reference="reported", tables=tables, overhead_tokens=overhead)


CLASS_SAMPLES: dict[str, str] = {
    "prose": "The migration plan moves the billing service to the new cluster next week, "
             "after the team reviews the rollback steps and the on-call rota.",
    "code": "def parse_invoices(rows):\n    out = []\n    for row in rows:\n        if "
            "row.get(\"total\") is None:\n            continue\n        out.append("
            "Invoice(**row))\n    return out\n",
    "json": '{"id": 4812, "status": "open", "items": [{"sku": "A-17", "qty": 3, "price": '
            '12.5}], "customer": {"name": "Ada", "tier": "gold"}}',
    "logs": "2026-03-23 10:15:42,123 INFO worker-3 job=4812 status=done in 1532ms\n"
            "2026-03-23 10:15:43,020 WARN worker-1 retry=2 upstream timeout\n",
    "non_latin": "数据迁移计划将在下周把计费服务迁到新集群，团队会先检查回滚步骤和值班安排。"
                 "Миграция данных пройдет на следующей неделе.",
    "base64": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kg"
              "AAAABJRU5ErkJggg" * 3,
}
"""A text of each content class: a class the fitted log lacks gets the reference's rate on
it (a calibration fitted on English code still counts a Chinese note as its tokenizer
would, not at a flat 0.25 tokens per character)."""


def _fit_tokenizer(source: PartsSource, reference: str | Estimator,
                   parts: np.ndarray | None = None) -> Calibration:
    """Rates from every part of ``source`` (``parts``: only those where it is True, when
    any is)."""
    frame = source.frame
    if parts is not None and parts.any():
        frame = frame[parts]
    ref = get_estimator(reference)
    df = pd.DataFrame({"group": groups(frame["content"], frame["kind"]),
                       "chars": text_lengths(frame["content"]),
                       "tokens": ref.count_parts(frame)})
    sums = df.groupby("group")[["chars", "tokens"]].sum()
    rates = {str(g): float(r["tokens"] / r["chars"]) for g, r in sums.iterrows() if r["chars"] > 0}
    unseen = [c for c in CLASS_SAMPLES if c not in rates]
    if unseen:
        texts = [CLASS_SAMPLES[c] for c in unseen]
        counts = ref.count(texts)
        rates.update({c: float(n) / len(t) for c, t, n in zip(unseen, texts, counts)})
    est = df["chars"] * df["group"].map(rates).astype(float).fillna(PRIOR_RATE)
    big = df["tokens"] >= 20       # the factor that lifts 95% of the parts to their count
    ratio = (df["tokens"] / est.clip(lower=1e-9))[big]
    margin = max(1.0, float(ratio.quantile(0.95))) if big.any() else 1.0
    return Calibration(reference=ref.spec, overhead_tokens={},
                       tables={"*": Rates(tokens_per_char=rates, per_message=ref.per_message,
                                          upper_margin=margin, calls=0)})


def _call_features(source: PartsSource, base: Rates) -> pd.DataFrame:
    """Per call: tokenizer-shaped tokens of non-thinking parts, thinking chars, messages."""
    frame = source.frame
    g = groups(frame["content"], frame["kind"])
    chars = text_lengths(frame["content"]).astype(np.float64)
    rate = pd.Series(g).map(dict(base.tokens_per_char)).astype(float).fillna(PRIOR_RATE)
    thinking = g == "thinking"
    sums = call_sums(source, {"shaped": np.where(thinking, 0.0, chars * rate.to_numpy()),
                              "thinking": np.where(thinking, chars, 0.0)})
    sums["input_total"] = source.calls["input_total"].to_numpy(dtype=np.float64, na_value=np.nan)
    sums["unit"] = segment_keys(sums["session"], call_segments(source))
    return sums


def _fit_reported(features: pd.DataFrame, base: Rates) -> tuple[Rates, dict[str, float]]:
    """Weighted least squares: input = overhead[segment] + k·shaped + t·thinking + 4·messages."""
    f = features.dropna(subset=["input_total"])
    f = f[f["input_total"] > 0]
    sessions = list(pd.unique(f["unit"]))
    y = f["input_total"].to_numpy()
    w = 1.0 / np.sqrt(y)
    x = f[["shaped", "thinking"]].to_numpy(dtype=np.float64)
    prior = np.array([1.0, base.tokens_per_char.get("thinking", PRIOR_RATE)])
    dummies = (f["unit"].to_numpy()[:, None] == np.array(sessions)[None, :]).astype(float)
    a = np.hstack([x, dummies]) * w[:, None]
    b = (y - PER_MESSAGE * f["messages"].to_numpy()) * w
    scale = np.sqrt((a[:, :2] ** 2).mean(axis=0)) + 1e-12
    reg = np.zeros((2, a.shape[1]))
    reg[[0, 1], [0, 1]] = np.sqrt(PRIOR_WEIGHT) * scale
    sol = np.linalg.lstsq(np.vstack([a, reg]), np.concatenate([b, reg[[0, 1], [0, 1]] * prior]),
                          rcond=None)[0]
    k, t = max(sol[0], 0.0), min(max(sol[1], 0.0), MAX_THINKING_RATE)
    if not (x[:, 1] > 0).any():     # no thinking to fit: its rate stays the tokenizer's
        t = float(prior[1])
    intercepts = sol[2:]
    content = x @ np.array([k, t]) + PER_MESSAGE * f["messages"].to_numpy()
    pred = content + dummies @ intercepts
    rel = (pred - y) / y
    # the upper bound scales the content (not the overhead): the factor that covers 95% of calls
    needed = (y - dummies @ intercepts) / np.maximum(content, 1.0)
    rates = {c: r * k for c, r in base.tokens_per_char.items() if c != "thinking"}
    rates["thinking"] = t
    return (Rates(tokens_per_char=rates, per_message=PER_MESSAGE,
                  upper_margin=max(1.0, float(np.quantile(needed, 0.95))), calls=len(y),
                  mape_pct=float(100 * np.abs(rel).mean()), scale=float(k)),
            {s: float(v) for s, v in zip(sessions, intercepts)})


def _calibrated(arg: str | None) -> Estimator:
    return Calibration.load(arg or "").estimator()


def _calibrated_upper(arg: str | None) -> Estimator:
    return Calibration.load(arg or "").estimator(upper=True)


register(Family(name="calibrated", make=_calibrated, argument="required",
                file_argument=True,
                doc="calibrated:<file>, rates fitted by ctxlab.calibrate(...).save(file)"))
register(Family(name="calibrated-upper", make=_calibrated_upper, argument="required",
                file_argument=True,
                doc="calibrated-upper:<file>, the same scaled to its p95 under-estimate"))
