"""The estimator interface: count many texts at once, plus the request framing.

Every estimator counts a whole column of texts in one call (``count(texts) ->
ndarray``). Exact tokenizers are slow per text, so `Estimator.count` counts each
distinct text once and keeps the counts in a per-instance cache: replaying a
session counts every part once, however many requests it appears in.

Framing is what a provider adds around the texts: a few tokens per message
(role markers, delimiters) and per conversation; images and documents have flat
costs. `Estimator.count_parts` applies those to a part frame and
`Estimator.request_tokens` adds the framing of one request.
"""

from __future__ import annotations

import itertools
import re
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd

Length = Literal["chars", "utf16", "utf8"]


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


_MEDIA_TYPE = re.compile(r'"media_type":\s*"([^"]*)"')


def _binary_document(meta: Any) -> bool:
    """A part ``meta`` (JSON text) naming a media type that is not text (a PDF)."""
    m = _MEDIA_TYPE.search(meta) if isinstance(meta, str) else None
    return m is not None and not m.group(1).startswith("text/")


def text_series(texts: Iterable[str] | pd.Series) -> pd.Series:
    """The texts as a string Series; NA counts as the empty text.

    Lone UTF-16 surrogates (half an emoji, cut by a truncating writer) cannot be stored
    in a string column; they become U+FFFD, as tiktoken itself treats them.

    Example:
        >>> text_series(["a", None, "x\\ud83d"]).tolist()
        ['a', '', 'x\\ufffd']
    """
    if isinstance(texts, pd.Series) and texts.dtype == "string":
        return texts.fillna("")
    index = texts.index if isinstance(texts, pd.Series) else None
    values = list(texts)
    try:
        s = pd.Series(values, dtype="string", index=index)
    except UnicodeEncodeError:
        s = pd.Series([_LONE_SURROGATE.sub("\ufffd", v) if isinstance(v, str) else v
                       for v in values], dtype="string", index=index)
    return s.fillna("")


def text_lengths(texts: pd.Series, unit: Length = "chars") -> np.ndarray:
    """Length of every text in the unit a system measures it in.

    ``chars`` counts code points (Python), ``utf16`` counts UTF-16 code units
    (JavaScript's ``string.length``: an emoji counts 2), ``utf8`` counts bytes
    (Rust's ``str::len``: a CJK character counts 3).

    Example:
        >>> text_lengths(pd.Series(["ab", "é", "😀", "漢"], dtype="string"), "utf16").tolist()
        [2, 1, 2, 1]
        >>> text_lengths(pd.Series(["ab", "é", "😀", "漢"], dtype="string"), "utf8").tolist()
        [2, 2, 4, 3]
    """
    s = text_series(texts)
    n = s.str.len().to_numpy(dtype=np.int64, na_value=0)
    if unit == "chars":
        return n
    if unit == "utf16":
        return n + s.str.count("[\U00010000-\U0010ffff]").to_numpy(dtype=np.int64, na_value=0)
    if unit == "utf8":
        ascii_only = s.str.isascii().to_numpy(dtype=bool, na_value=True)
        out = n.copy()
        rest = ~ascii_only
        if rest.any():
            out[rest] = [len(t.encode("utf-8", "surrogatepass")) for t in s[rest]]
        return out
    raise ValueError(f"unknown length unit {unit!r}; use chars, utf16 or utf8")


def text_lengths_of(texts: Sequence[str] | np.ndarray, unit: Length = "chars") -> np.ndarray:
    """`text_lengths` of a list or object array of texts, measured one by one in Python
    (faster than building a string Series for a request's worth of texts). Raises
    TypeError for a value that is not a text (NA): use `text_lengths` then.

    Example:
        >>> text_lengths_of(["ab", "é", "😀", "漢"], "utf16").tolist()
        [2, 1, 2, 1]
        >>> text_lengths_of(["ab", "é", "😀", "漢"], "utf8").tolist()
        [2, 2, 4, 3]
    """
    n = len(texts)
    if unit == "chars":
        return np.fromiter(map(len, texts), dtype=np.int64, count=n)
    if unit == "utf16":
        return np.fromiter((len(t) if t.isascii() else
                            len(t.encode("utf-16-le", "surrogatepass")) // 2 for t in texts),
                           dtype=np.int64, count=n)
    if unit == "utf8":
        return np.fromiter((len(t) if t.isascii() else len(t.encode("utf-8", "surrogatepass"))
                            for t in texts), dtype=np.int64, count=n)
    raise ValueError(f"unknown length unit {unit!r}; use chars, utf16 or utf8")


class Estimator(ABC):
    """Counts tokens of many texts at once.

    Subclasses implement `_count` (a list of distinct texts → counts) and set
    `spec`. Counting goes through a per-instance cache keyed by the text, so
    the same estimator object counts each distinct text once.

    Attributes:
        spec: the spec string that names this estimator (``"tiktoken:o200k_base"``).
        exact: whether counts come from the model's real tokenizer.
        per_message: framing tokens per message.
        per_conversation: framing tokens per request.
        image_tokens: flat cost of an image part (None: count its content as text).
        document_tokens: flat cost of a document attachment, one whose ``meta`` names a
            ``media_type`` that is not text (a PDF: seed 004); None: its content as text.
        schema_scale: factor applied to tool-schema parts (seed 002 scales by 2.09).
    """

    cached: ClassVar[bool] = True
    spec: str = ""
    exact: bool = False
    per_message: int = 0
    per_conversation: int = 0
    image_tokens: int | None = None
    document_tokens: int | None = None
    schema_scale: float = 1.0

    _offers_taken: int = 0      # the last `offer_counts` this instance looked at

    def __init__(self) -> None:
        self._cache: dict[str, int] = {}

    @property
    def facts_key(self) -> str | None:
        """What counts stored ahead of time (`offer_counts`, a corpus dataset's facts) are
        filed under for this estimator: the tokenizer it counts with
        (``tiktoken:o200k_base`` for the specs ``tiktoken:o200k_base`` and
        ``tiktoken:gpt-4o`` alike); None (the default) for estimators cheap enough to
        count again, which never take stored counts."""
        return None

    def fingerprint(self) -> str | None:
        """The identity of what this estimator's counts depend on (for a tokenizer: its
        encoding's data and the counting rule), compared with that of stored counts
        before they are used: a different one means they are stale. None (the default):
        nothing stored is trusted. May load the tokenizer."""
        return None

    @abstractmethod
    def _count(self, texts: list[str]) -> np.ndarray:
        """Token counts of distinct texts (int64, same order)."""

    def count(self, texts: Iterable[str] | pd.Series) -> np.ndarray:
        """Token count of every text (no framing), as an int64 array.

        Example:
            >>> from ctxlab.tokens import estimator
            >>> estimator("chars:4").count(["abcd", "abcde", ""]).tolist()
            [1, 2, 0]
        """
        if self.cached and isinstance(texts, (list, tuple)):
            cache = self._cache           # every text known: no Series to build
            try:
                return np.array([cache[t] for t in texts], dtype=np.int64)
            except (KeyError, TypeError):
                pass
        s = text_series(texts)
        if not self.cached:
            return np.asarray(self._count(s.tolist()), dtype=np.int64)
        codes, uniques = pd.factorize(s, use_na_sentinel=False)
        cache = self._cache
        missing = [u for u in uniques if u not in cache]
        if missing and _OFFERS and self._take_offers():
            missing = [u for u in missing if u not in cache]
        if missing:
            cache.update(zip(missing, np.asarray(self._count(missing), dtype=np.int64).tolist()))
        per_unique = np.fromiter((cache[u] for u in uniques), dtype=np.int64, count=len(uniques))
        return per_unique[codes] if len(codes) else np.zeros(0, dtype=np.int64)

    def count_values(self, texts: np.ndarray) -> np.ndarray:
        """`count` of an object array of texts (None counts as the empty text), looked up
        in the cache text by text: no string Series is built when every text is known.

        Example:
            >>> from ctxlab.tokens import estimator
            >>> estimator("chars:4").count_values(np.array(["abcd", None], dtype=object)).tolist()
            [1, 0]
        """
        if not self.cached or not len(texts):
            return self.count(["" if t is None else t for t in texts])
        cache = self._cache
        out = np.fromiter((cache.get("" if t is None else t, -1) for t in texts),
                          dtype=np.int64, count=len(texts))
        miss = np.flatnonzero(out < 0)
        if len(miss):
            new = ["" if texts[i] is None else texts[i] for i in miss]
            out[miss] = counts = self.count(new)
            cache.update(zip(new, counts.tolist()))
        return out

    def count_parts(self, parts: Any) -> np.ndarray:
        """Tokens of every part of a part frame (or `ctxlab.stages.table.Table`): content,
        flat image costs, schema scaling."""
        if isinstance(parts, pd.DataFrame):
            counts = self.count(parts["content"]).astype(np.float64)
            kind = parts["kind"].to_numpy(dtype=object, na_value="")
        else:
            counts = self.count_values(parts.col("content")).astype(np.float64)
            kind = parts.col("kind")
        if self.schema_scale != 1.0:
            schema = kind == "tool_schema"
            counts[schema] = np.ceil(counts[schema] * self.schema_scale)
        if self.image_tokens is not None:
            counts[kind == "image"] = self.image_tokens
        if self.document_tokens is not None:
            rows = np.flatnonzero(kind == "attachment")
            if len(rows):
                meta = (parts["meta"].to_numpy(dtype=object, na_value=None)
                        if isinstance(parts, pd.DataFrame) else
                        parts.col("meta") if "meta" in parts else None)
                if meta is not None:
                    docs = [i for i in rows if _binary_document(meta[i])]
                    counts[docs] = self.document_tokens
        return counts.astype(np.int64)

    def framing(self, messages: int) -> int:
        """Framing tokens of a request holding ``messages`` messages."""
        return self.per_message * int(messages) + (self.per_conversation if messages else 0)

    def framings(self, messages: Any) -> np.ndarray:
        """`framing` of many requests at once (``messages``: their message counts)."""
        m = np.asarray(messages)
        return self.per_message * m + np.where(m > 0, self.per_conversation, 0)

    def request_tokens(self, parts: pd.DataFrame) -> int:
        """Tokens of one request: every part plus the framing of its messages."""
        if parts.empty:
            return 0
        return int(self.count_parts(parts).sum()) + self.framing(parts["msg"].nunique())

    def _take_offers(self) -> bool:
        """Put in the cache the counts offered since this instance last looked
        (`offer_counts`) for its `facts_key` and `fingerprint`; whether any were. Asked
        only when a text is not cached, so a tokenizer nobody counts with is never loaded
        to check a fingerprint."""
        key = self.facts_key
        if key is None or not self.cached or not _OFFERS:
            return False
        new = [o for o in list(_OFFERS) if o[0] > self._offers_taken]
        if not new:
            return False
        self._offers_taken = max(o[0] for o in new)
        mine = self.fingerprint()
        took = False
        for _, source in new:
            try:
                got = source(key, mine) if mine is not None else None
            except Exception:       # unusable stored counts: counted here instead
                got = None
            if got is not None:
                self._cache.update(zip(*got))
                took = True
        return took

    def clear_cache(self) -> None:
        """Forget every cached count (offered counts still waiting are taken again)."""
        self._cache.clear()
        self._offers_taken = 0

    @property
    def cache_size(self) -> int:
        """How many distinct texts have been counted."""
        return len(self._cache)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec}>"


OFFERS_KEPT = 4
"""The last offers kept (`offer_counts`): those of the sessions a sweep worker has loaded
lately."""
_OFFERS: deque[tuple[int, Callable[[str, str | None], tuple[Sequence[str], Sequence[int]]
                                   | None]]] = deque(maxlen=OFFERS_KEPT)
_OFFER_SEQ = itertools.count(1)


def offer_counts(source: Callable[[str, str | None],
                                  tuple[Sequence[str], Sequence[int]] | None]) -> None:
    """Offer token counts computed elsewhere (a corpus dataset's stored facts,
    `ctxlab.facts.SessionFacts.counts`) to every estimator with a `Estimator.facts_key`:
    the next time one meets a text it has not counted, it calls ``source(facts_key,
    fingerprint)`` with its own key and `Estimator.fingerprint`, and takes the (texts,
    counts) it gives into its cache (None: no counts of that tokenizer, or stale ones).
    Only the last `OFFERS_KEPT` offers wait; nothing is loaded or counted now.

    Example:
        >>> class Words(Estimator):
        ...     facts_key = "words"
        ...     def fingerprint(self): return "split-v1"
        ...     def _count(self, texts): return np.array([len(t.split()) for t in texts])
        >>> stored = {("words", "split-v1"): (["a b c"], [99]),    # trusted
        ...           ("words", "split-v0"): (["d e"], [99])}      # stale: never asked for
        >>> offer_counts(lambda key, fingerprint, stored=stored: stored.get((key, fingerprint)))
        >>> Words().count(["a b c", "d e"]).tolist()
        [99, 2]
    """
    _OFFERS.append((next(_OFFER_SEQ), source))
