"""Exact estimators: the models' real tokenizers, offline, imported on first use.

=========================  ==================================================================
spec                       tokenizer
=========================  ==================================================================
``tiktoken:<enc|model>``   OpenAI BPE: ``o200k_base``, ``cl100k_base``… or a model name
                           (``gpt-4o``, ``gpt-4``) resolved by tiktoken; data from packaged
                           files (`ctxlab.tokens.offline`). +3 per message, +3 per request.
``llama3``                 Meta Llama 3 BPE (128,000 tokens + 256 special), from packaged data
``mistral:<version>``      mistral-common's bundled tokenizers: ``v1``, ``v2``, ``v3``, ``v7``
                           (SentencePiece, need the ``sentencepiece`` package) and
                           ``v3-tekken`` (alias ``tekken``; tiktoken-based)
``hf:<tokenizer.json>``    a Hugging Face ``tokenizers`` file on disk
=========================  ==================================================================

Texts are counted as plain text, never as control tokens: text that looks like a
special token (``<|endoftext|>``, ``<s>``, ``[INST]``) costs what its characters
cost. tiktoken and Llama 3 use ``encode_ordinary``; Tekken builds its tiktoken
encoding with no special tokens; SentencePiece never matches control symbols in
input text; for ``hf:`` the tokenizer's *special* added tokens are encoded as text
(``encode_special_tokens``), while its non-special added tokens still match, as
they do in the model. Lone surrogates are replaced by U+FFFD first (tiktoken's
own rule), since SentencePiece and ``tokenizers`` reject them.

Framing: OpenAI's chat format costs 3 tokens per message (``<|im_start|>``, the
role, ``<|im_sep|>``/``<|im_end|>``) and 3 priming the reply
(``<|im_start|>assistant<|im_sep|>``), as in OpenAI's cookbook
"How to count tokens with tiktoken"; ``tiktoken:`` estimators set
``per_message=3, per_conversation=3``. The others leave framing at 0; the
accuracy module fits a provider's overhead separately. A tool schema holding an OpenAI
function definition is counted by ``tiktoken:`` (o200k and cl100k) as OpenAI bills it,
not as its JSON (`ctxlab.tokens.tool_schemas`).

Example:
    >>> from ctxlab.tokens import estimator
    >>> estimator("tiktoken:gpt-4o").count(["hello world", "<|endoftext|>"]).tolist()
    [2, 7]
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.tokens.base import Estimator
from ctxlab.tokens.tool_schemas import FUNCTION_START, function_tokens
from ctxlab.tokens.registry import Family, register

if TYPE_CHECKING:
    import tiktoken

__all__ = ["MISTRAL_VERSIONS", "HFEstimator", "MistralEstimator", "TiktokenEstimator",
           "encoding_fingerprint", "resolve_tiktoken"]

OPENAI_PER_MESSAGE = 3
OPENAI_PER_CONVERSATION = 3
#: spec argument → (mistral-common constructor, its keyword arguments, needs sentencepiece)
MISTRAL_VERSIONS: dict[str, tuple[str, dict[str, bool], bool]] = {
    "v1": ("v1", {}, True),
    "v2": ("v2", {}, True),
    "v3": ("v3", {}, True),
    "v3-tekken": ("v3", {"is_tekken": True}, False),
    "tekken": ("v3", {"is_tekken": True}, False),
    "v7": ("v7", {}, True),
}
_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_lone_surrogates(texts: list[str]) -> list[str]:
    """Texts with lone surrogates replaced by U+FFFD (pairs are joined), as tiktoken does."""
    return [t.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            if _SURROGATE.search(t) else t for t in texts]


def resolve_tiktoken(name: str) -> str:
    """The tiktoken encoding an encoding or model name means.

    Raises:
        ConfigError: neither an encoding nor a model tiktoken knows (lists the encodings).

    Example:
        >>> resolve_tiktoken("gpt-4o"), resolve_tiktoken("cl100k_base")
        ('o200k_base', 'cl100k_base')
    """
    import tiktoken

    if name in tiktoken.list_encoding_names():
        return name
    try:
        return tiktoken.encoding_name_for_model(name)
    except KeyError:
        raise ConfigError(f"tiktoken knows no encoding or model named {name!r}; encodings: "
                          f"{', '.join(sorted(tiktoken.list_encoding_names()))} (or a model "
                          f"name such as gpt-4o, gpt-4)") from None


class TiktokenEstimator(Estimator):
    """Counts with a tiktoken ``Encoding`` loaded by `ctxlab.tokens.offline.get_encoding`.

    Counting is a plain ``encode_ordinary`` loop: on two cores it beat
    ``encode_ordinary_batch`` (whose thread pool costs more than it saves) by 10-35 %.

    Example:
        >>> TiktokenEstimator("cl100k_base").count(["hello world", ""]).tolist()
        [2, 0]
    """

    exact = True

    def __init__(self, encoding: str, *, per_message: int = 0, per_conversation: int = 0) -> None:
        super().__init__()
        self.encoding_name = encoding
        self.per_message = per_message
        self.per_conversation = per_conversation
        self.spec = f"tiktoken:{encoding}"
        self._encoding: tiktoken.Encoding | None = None
        self._functions: dict[str, int | None] = {}     # tool-schema text -> billed tokens

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The ``tiktoken.Encoding``, loaded (offline when packaged) on first use."""
        if self._encoding is None:
            from ctxlab.tokens.offline import get_encoding

            self._encoding = get_encoding(self.encoding_name)
        return self._encoding

    @property
    def facts_key(self) -> str:
        return f"tiktoken:{self.encoding_name}"

    def fingerprint(self) -> str | None:
        """The encoding's identity (`encoding_fingerprint`) and the counting rule
        (``encode_ordinary``: change `COUNT_RULE` with `_count`); loads the encoding. None
        when the encoding has no fingerprint: no stored count is then trusted."""
        encoding = encoding_fingerprint(self.encoding)
        return None if encoding is None else f"{COUNT_RULE}/{encoding}"

    def _count(self, texts: list[str]) -> np.ndarray:
        encode = self.encoding.encode_ordinary
        return np.fromiter((len(encode(t)) for t in texts), dtype=np.int64, count=len(texts))

    def count_parts(self, parts: Any) -> np.ndarray:
        """`Estimator.count_parts`, with each tool schema that holds an OpenAI function
        definition counted as OpenAI bills it (`ctxlab.tokens.tool_schemas`: not its JSON),
        for the encodings whose models take tools.

        Example:
            >>> import pandas as pd
            >>> schema = ('{"name": "go", "parameters": '
            ...           '{"properties": {"url": {"type": "string"}}}}')
            >>> parts = pd.DataFrame({"content": [schema] * 2, "kind": ["tool_schema", "text"]})
            >>> TiktokenEstimator("o200k_base").count_parts(parts).tolist()  # billed; its JSON
            [18, 22]
        """
        counts = super().count_parts(parts)
        start = FUNCTION_START.get(self.encoding_name)
        if start is None:
            return counts
        is_frame = isinstance(parts, pd.DataFrame)
        kind = parts["kind"].to_numpy(dtype=object, na_value="") if is_frame \
            else parts.col("kind")
        rows = np.flatnonzero(kind == "tool_schema")
        if not len(rows):
            return counts
        content = parts["content"].to_numpy(dtype=object, na_value=None) if is_frame \
            else parts.col("content")
        known = self._functions
        for i in rows.tolist():
            text = content[i]
            if not isinstance(text, str):
                continue
            if text not in known:
                known[text] = function_tokens(text, self._count_one, start)
            if known[text] is not None:
                counts[i] = known[text]
        return counts

    def _count_one(self, text: str) -> int:
        return int(self.count([text])[0])

    def clear_cache(self) -> None:
        super().clear_cache()
        self._functions.clear()


COUNT_RULE = "encode_ordinary-v1"
"""How `TiktokenEstimator` counts a text, in its `fingerprint`: stored counts made another
way are stale."""


def encoding_fingerprint(enc: tiktoken.Encoding) -> str | None:
    """A tiktoken encoding's identity, for stored counts (`Estimator.fingerprint`): its
    name, tiktoken's version, and a sha256 of what decides a count, the split pattern and
    the ranks (and the special tokens); computed once per encoding object. None when the
    encoding does not show them (a tiktoken without these attributes: nothing stored is
    trusted).

    Example:
        >>> from ctxlab.tokens.offline import get_encoding
        >>> name, version, digest = encoding_fingerprint(get_encoding("cl100k_base")).split("/")
        >>> name, version.startswith("tiktoken-"), len(digest)
        ('cl100k_base', True, 71)
    """
    got = _FINGERPRINTS.get(id(enc))
    if got is not None and got[0] is enc:
        return got[1]
    import tiktoken

    try:
        pattern, ranks = enc._pat_str, enc._mergeable_ranks
        special = enc._special_tokens
    except AttributeError:
        return None
    h = hashlib.sha256(pattern.encode("utf-8", "surrogatepass") + b"\0")
    h.update(b"".join(len(tok).to_bytes(4, "little") + tok + rank.to_bytes(8, "little")
                      for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1])))
    h.update(json.dumps(sorted(special.items())).encode())
    out = f"{enc.name}/tiktoken-{tiktoken.__version__}/sha256:{h.hexdigest()}"
    _FINGERPRINTS[id(enc)] = (enc, out)
    return out


_FINGERPRINTS: dict[int, tuple[Any, str]] = {}


class MistralEstimator(Estimator):
    """Counts with one of mistral-common's bundled tokenizers, without BOS/EOS.

    Example:
        >>> MistralEstimator("v3-tekken").count(["hello world", "[INST]"]).tolist()
        [2, 4]
    """

    exact = True

    def __init__(self, version: str) -> None:
        super().__init__()
        key = version.strip().lower()
        if key not in MISTRAL_VERSIONS:
            raise ConfigError(f"mistral-common bundles no tokenizer {version!r}; use one of "
                              f"{', '.join(MISTRAL_VERSIONS)} (e.g. mistral:v3-tekken)")
        self.version = key
        self.spec = f"mistral:{key}"
        if MISTRAL_VERSIONS[key][2] and importlib.util.find_spec("sentencepiece") is None:
            raise ConfigError(f"mistral:{key} is a SentencePiece tokenizer and the sentencepiece "
                              f"package is not installed: pip install "
                              f"'mistral-common[sentencepiece]', or use mistral:v3-tekken")
        self._tokenizer: Any = None

    @property
    def tokenizer(self) -> Any:
        """mistral-common's raw tokenizer (``SentencePieceTokenizer`` or ``Tekkenizer``)."""
        if self._tokenizer is None:
            from mistral_common.tokens.tokenizers.mistral import MistralTokenizer as Mistral

            method, kwargs, _ = MISTRAL_VERSIONS[self.version]
            self._tokenizer = getattr(Mistral, method)(**kwargs).instruct_tokenizer.tokenizer
        return self._tokenizer

    def _count(self, texts: list[str]) -> np.ndarray:
        encode = self.tokenizer.encode
        return np.fromiter((len(encode(t, bos=False, eos=False))
                            for t in _no_lone_surrogates(texts)), dtype=np.int64, count=len(texts))


class HFEstimator(Estimator):
    """Counts with a Hugging Face ``tokenizer.json`` read from disk (never downloaded).

    Example:
        >>> HFEstimator("no/such/tokenizer.json")
        Traceback (most recent call last):
        ...
        ctxlab.errors.ConfigError: hf:no/such/tokenizer.json: no such file; ...
    """

    exact = True

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path).expanduser()
        self.spec = f"hf:{path}"
        if not self.path.is_file():
            raise ConfigError(f"hf:{path}: no such file; hf:<path> takes a local tokenizer.json "
                              f"(ctxlab never downloads one), e.g. hf:./models/tokenizer.json")
        self._tokenizer: Any = None

    @property
    def tokenizer(self) -> Any:
        """The ``tokenizers.Tokenizer``, loaded on first use, special tokens read as text."""
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            try:
                tok = Tokenizer.from_file(str(self.path))
            except Exception as e:
                raise ConfigError(f"hf:{self.path}: not a tokenizers file ({e}); pass the "
                                  f"tokenizer.json saved by tokenizers or transformers") from e
            tok.encode_special_tokens = True
            self._tokenizer = tok
        return self._tokenizer

    def _count(self, texts: list[str]) -> np.ndarray:
        tok = self.tokenizer
        encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
        out = encode(_no_lone_surrogates(texts), add_special_tokens=False)
        return np.fromiter((len(e.ids) for e in out), dtype=np.int64, count=len(texts))


def _tiktoken(arg: str | None) -> Estimator:
    return TiktokenEstimator(resolve_tiktoken(arg or ""), per_message=OPENAI_PER_MESSAGE,
                             per_conversation=OPENAI_PER_CONVERSATION)


def _mistral(arg: str | None) -> Estimator:
    return MistralEstimator(arg or "")


def _hf(arg: str | None) -> Estimator:
    return HFEstimator(arg or "")


def _llama3(arg: str | None) -> Estimator:
    est = TiktokenEstimator("llama3")
    est.spec = "llama3"
    return est


register(Family(name="tiktoken", make=_tiktoken, argument="required",
                doc="tiktoken:<encoding or model>, OpenAI BPE offline, e.g. tiktoken:o200k_base "
                    "or tiktoken:gpt-4o; +3/message, +3/request"))
register(Family(name="llama3", make=_llama3, argument="none",
                doc="llama3, Meta Llama 3 BPE from packaged data"))
register(Family(name="mistral", make=_mistral, argument="required",
                doc=f"mistral:<version>, mistral-common's bundled tokenizer "
                    f"({', '.join(MISTRAL_VERSIONS)}), e.g. mistral:v3-tekken"))
register(Family(name="hf", make=_hf, argument="required", file_argument=True,
                doc="hf:<path to tokenizer.json>, a local Hugging Face tokenizers file"))
