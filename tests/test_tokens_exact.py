"""ctxlab.tokens.exact: tiktoken, Llama 3, Mistral and Hugging Face counts, offline."""

from __future__ import annotations

import base64
import functools
import importlib.util
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import ctxlab
from ctxlab.errors import ConfigError
from ctxlab.tokens import estimator, names
from ctxlab.tokens.exact import (
    MISTRAL_VERSIONS,
    HFEstimator,
    MistralEstimator,
    TiktokenEstimator,
    resolve_tiktoken,
)

HAS_SENTENCEPIECE = importlib.util.find_spec("sentencepiece") is not None


def _base64_megabyte() -> str:
    rng = random.Random(0)
    return base64.b64encode(rng.randbytes(786_432)).decode()  # 1 MiB of base64


ADVERSARIAL = {
    "endoftext": "<|endoftext|>",
    "im_start": "<|im_start|>system<|im_sep|>hi<|im_end|>",
    "endofprompt": "before <|endofprompt|> after <|fim_prefix|>",
    "llama_special": "<|begin_of_text|><|start_header_id|>user<|end_header_id|><|eot_id|>",
    "mistral_control": "<s>[INST] hi [/INST]</s>[AVAILABLE_TOOLS]",
    "surrogates_replaced": "a\ufffdb \ufffd tail",  # what loaders make of lone surrogates
    "emoji": "👩‍👩‍👧‍👦 family, 🇫🇷 flag, 😀",
    "cjk": "漢字とひらがな、カタカナ。한국어 텍스트。中文标点！",
    "base64_1mb": _base64_megabyte(),
    "empty": "",
    "whitespace": " \n\n\t   \r\n  ",
}


# Lone surrogates cannot enter a pandas string Series (Estimator.count), but the exact
# estimators' own _count must survive them: they are replaced as tiktoken does.
SURROGATES = {"a\ud800b": "a\ufffdb", "\udc00 tail": "\ufffd tail",
              "\ud83d\ude00 joined": "\U0001f600 joined"}


@pytest.fixture(scope="module", autouse=True)
def _tiktoken_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Install tiktoken's files into a throwaway cache, not the machine's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path_factory.mktemp("tiktoken-cache")))
        from ctxlab.tokens.offline import install_offline_encodings

        install_offline_encodings()  # so plain tiktoken.get_encoding works offline below
        yield


@pytest.fixture(scope="module")
def real_parts() -> pd.Series:
    from conftest import REALDATA

    if not REALDATA.is_dir():
        pytest.skip(f"real transcripts not available: {REALDATA} is absent")
    parts = ctxlab.load_dir(REALDATA).frame["content"]
    assert len(parts) > 1000
    return parts


def test_families_are_registered() -> None:
    assert {"tiktoken", "llama3", "mistral", "hf"} <= set(names())


@pytest.mark.realdata
@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_counts_equal_tiktoken_on_every_real_part(encoding: str, real_parts: pd.Series) -> None:
    import tiktoken

    enc = tiktoken.get_encoding(encoding)
    want = np.array([len(enc.encode_ordinary(t)) for t in real_parts], dtype=np.int64)
    fresh = TiktokenEstimator(encoding)
    np.testing.assert_array_equal(fresh.count(real_parts), want)
    assert fresh.cache_size == real_parts.nunique()
    np.testing.assert_array_equal(fresh.count(real_parts), want)  # from the cache
    np.testing.assert_array_equal(estimator(f"tiktoken:{encoding}").count(real_parts), want)


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_adversarial_strings_count_as_ordinary_text(encoding: str) -> None:
    import tiktoken

    enc = tiktoken.get_encoding(encoding)
    texts = list(ADVERSARIAL.values())
    got = TiktokenEstimator(encoding).count(texts)
    want = [len(enc.encode_ordinary(t)) for t in texts]
    assert got.tolist() == want
    counts = dict(zip(ADVERSARIAL, got.tolist(), strict=True))
    assert counts["endoftext"] == 7 and counts["empty"] == 0
    assert counts["base64_1mb"] > 100_000


def _surrogate_safe(est: object) -> None:
    raw, clean = list(SURROGATES), list(SURROGATES.values())
    assert est._count(raw).tolist() == est._count(clean).tolist()  # type: ignore[attr-defined]
    assert min(est._count(raw)) > 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_lone_surrogates_are_replaced_not_fatal(encoding: str) -> None:
    _surrogate_safe(TiktokenEstimator(encoding))


def test_tiktoken_specs_resolve_models_and_frame_like_openai() -> None:
    gpt4o, o200k = estimator("tiktoken:gpt-4o"), estimator("tiktoken:o200k_base")
    assert isinstance(gpt4o, TiktokenEstimator) and gpt4o.encoding_name == "o200k_base"
    assert gpt4o.spec == "tiktoken:gpt-4o" and gpt4o is not o200k
    assert estimator("tiktoken:gpt-4").encoding_name == "cl100k_base"  # type: ignore[attr-defined]
    assert gpt4o.count(["hello world"]).tolist() == o200k.count(["hello world"]).tolist() == [2]
    assert gpt4o.exact and gpt4o.per_message == 3 and gpt4o.per_conversation == 3
    assert gpt4o.framing(2) == 9 and gpt4o.framing(0) == 0
    assert resolve_tiktoken("gpt-4o-mini-2024-07-18") == "o200k_base"


@pytest.mark.parametrize("spec, match", [
    ("tiktoken:nope-model", "encodings: .*cl100k_base.*o200k_base"),
    ("tiktoken", "needs an argument"),
    ("llama3:8b", "takes no argument"),
    ("mistral:v9", "v1, v2, v3, v3-tekken, tekken, v7"),
    ("hf:/no/such/dir/tokenizer.json", "/no/such/dir/tokenizer.json: no such file"),
])
def test_bad_specs_say_what_to_do(spec: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        estimator(spec)


def test_llama3_counts_ordinary_text() -> None:
    from ctxlab.tokens.offline import get_encoding

    est = estimator("llama3")
    enc = get_encoding("llama3")
    texts = list(ADVERSARIAL.values())
    assert est.exact and est.spec == "llama3" and est.per_message == 0
    assert est.count(texts).tolist() == [len(enc.encode_ordinary(t)) for t in texts]
    assert est.count(["hello world", "<|begin_of_text|>"]).tolist() == [2, 7]
    _surrogate_safe(est)


@functools.cache
def _mistral_raw(version: str) -> Any:
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    method, kwargs, _ = MISTRAL_VERSIONS[version]
    return getattr(MistralTokenizer, method)(**kwargs).instruct_tokenizer.tokenizer


KNOWN_MISTRAL = ["hello world", "def f(x):\n    return x", "漢字 😀", "", "  spaces  ",
                 "<s>[INST] hi [/INST]</s>", "[AVAILABLE_TOOLS][TOOL_CALLS]"]


@pytest.mark.parametrize("version", ["v3-tekken", "tekken"])
def test_mistral_tekken_counts_like_mistral_common(version: str) -> None:
    raw = _mistral_raw(version)
    est = MistralEstimator(version)
    assert est.exact
    want = [len(raw.encode(t, bos=False, eos=False)) for t in KNOWN_MISTRAL]
    assert est.count(KNOWN_MISTRAL).tolist() == want
    assert want[0] == 2 and want[3] == 0
    assert est.count(["[INST]"]).tolist() == [4]  # control-token text counts as text
    _surrogate_safe(est)


@pytest.mark.skipif(not HAS_SENTENCEPIECE, reason="sentencepiece is not installed "
                    "(pip install 'mistral-common[sentencepiece]')")
@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v7"])
def test_mistral_sentencepiece_counts_like_mistral_common(version: str) -> None:
    raw = _mistral_raw(version)
    est = estimator(f"mistral:{version}")
    want = [len(raw.encode(t, bos=False, eos=False)) for t in KNOWN_MISTRAL]
    assert est.count(KNOWN_MISTRAL).tolist() == want
    assert want[0] > 0 and want[3] == 0
    assert est.count(["<s>"]).tolist()[0] > 1  # control symbols are not matched in text
    _surrogate_safe(est)  # sentencepiece alone raises on a lone surrogate


def test_mistral_sentencepiece_without_the_package_says_how_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sentencepiece" else real(name, *a))
    with pytest.raises(ConfigError, match=r"pip install 'mistral-common\[sentencepiece\]'"):
        MistralEstimator("v3")


@pytest.fixture
def tiny_tokenizer(tmp_path: Path) -> Path:
    """A BPE trained here on a few lines, with a template that adds <s> … </s>."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=150, special_tokens=["[UNK]", "<s>", "</s>"],
                                  show_progress=False)
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog",
                             "hello world, hello tokens", "counting tokens offline"], trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


def test_hf_counts_like_tokenizers_without_special_tokens(tiny_tokenizer: Path) -> None:
    from tokenizers import Tokenizer

    ref = Tokenizer.from_file(str(tiny_tokenizer))
    texts = ["hello world", "the lazy fox", "", "漢字", "unknown words here"]
    est = estimator(f"hf:{tiny_tokenizer}")
    assert isinstance(est, HFEstimator) and est.exact
    assert est.count(texts).tolist() == [len(ref.encode(t, add_special_tokens=False).ids)
                                         for t in texts]
    assert est.count(["hello world"]).tolist() == [2]  # not 4: no <s> … </s>
    assert est.count(["<s>"]).tolist() == [3]  # special-token text is text: < s >
    _surrogate_safe(est)  # tokenizers alone raises on a lone surrogate


def test_hf_refuses_a_file_that_is_not_a_tokenizer(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text(json.dumps({"not": "a tokenizer"}))
    with pytest.raises(ConfigError, match="not a tokenizers file"):
        HFEstimator(bad).count(["x"])


def test_exact_estimators_never_raise_on_adversarial_text(tiny_tokenizer: Path) -> None:
    texts = pd.Series(list(ADVERSARIAL.values()), dtype="string")
    for est in (estimator("llama3"), MistralEstimator("v3-tekken"), HFEstimator(tiny_tokenizer)):
        counts = est.count(texts)
        assert counts.dtype == np.int64 and len(counts) == len(texts)
        assert counts[list(ADVERSARIAL).index("empty")] == 0


HEAVY = ("tiktoken", "tokenizers", "mistral_common", "quicktok", "sentencepiece")


def _loaded_after(code: str) -> list[str]:
    probe = (f"{code}\nimport sys, json\n"
             f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_and_heuristic_estimators_load_no_tokenizer() -> None:
    assert _loaded_after("import ctxlab.tokens") == []
    assert _loaded_after("import ctxlab.tokens as t\nassert t.estimator('chars:4').count(['abcd'])"
                         ".tolist() == [1]\nt.families()\nimport ctxlab.tokens.exact, "
                         "ctxlab.tokens.offline") == []


def test_making_a_mistral_or_hf_estimator_loads_nothing_until_counting(tmp_path: Path) -> None:
    f = tmp_path / "tokenizer.json"
    f.write_text("{}")
    code = f"import ctxlab.tokens as t\nt.estimator('mistral:tekken')\nt.estimator('hf:{f}')"
    assert _loaded_after(code) == []
