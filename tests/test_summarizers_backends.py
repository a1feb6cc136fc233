"""LLM summarizer backends without a network: the official SDKs over an httpx mock transport.

What is checked: the request ctxlab sends (nine sections, the conversation, budget,
temperature 0), what comes back (text, reported tokens, cut to budget), every failure
kind (timeout, HTTP 4xx/5xx, overflow, connection, empty, missing key), recorded
responses (record, replay, missing, bad lines), configured instances in the registry,
and a pipeline that falls through to the next stage when the summarizer fails, with
the failure in the replay's events.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import httpx2
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import ctxlab
from ctxlab import datasets
from ctxlab.errors import ConfigError, LoadError
from ctxlab.pipeline import Pipeline, stages_from
from ctxlab.stages.summarize import Summarize
from ctxlab.summarizers import SummarizerError, summarizer, unregister
from ctxlab.summarizers.anthropic_chat import AnthropicChat
from ctxlab.summarizers.openai_chat import OpenAIChat
from ctxlab.summarizers.prompt import fit_text
from ctxlab.summarizers.responses import ResponseCache
from ctxlab.summarizers.structured import TITLES

CHARS4 = ctxlab.estimator("chars:4")
PARTS = pd.DataFrame({
    "role": ["user", "assistant", "user"], "kind": ["text", "tool_call", "tool_result"],
    "content": ["Please fix src/app/parser.py", 'Bash({"command": "pytest -q tests"})',
                "Exit code 1\nFAILED tests/test_parser.py::test_empty - KeyError: 'x'"],
    "tool_name": [None, "Bash", "Bash"], "tool_call_id": [None, "t1", "t1"],
    "file_path": [None, None, None]})


def completion(text: str, prompt_tokens: int = 321, completion_tokens: int = 12) -> dict:
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


class Server:
    """A mock endpoint: answers with ``reply(request) -> Response``, keeps requests.
    ``http`` is the HTTP package of the SDK (openai: httpx; anthropic: its fork httpx2)."""

    def __init__(self, reply: Callable, http=httpx) -> None:
        self.reply, self.requests, self.http = reply, [], http

    def __call__(self, request):
        self.requests.append(request)
        return self.reply(request)

    def client(self):
        return self.http.Client(transport=self.http.MockTransport(self))

    def body(self, i: int = -1) -> dict:
        return json.loads(self.requests[i].content)


def openai_backend(server: Server, **kw) -> OpenAIChat:
    return OpenAIChat(model="m", base_url="http://llm.test/v1", api_key="k", max_retries=0,
                      http_client=server.client(), **kw)


def test_openai_request_and_summary():
    srv = Server(lambda r: httpx.Response(200, json=completion("1. Primary Request: fix it")))
    s = openai_backend(srv).summarize(PARTS, budget_tokens=300, estimator=CHARS4)
    assert s.text == "1. Primary Request: fix it"
    assert (s.input_tokens, s.backend, s.model) == (321, "openai", "m")
    assert s.output_tokens == int(CHARS4.count([s.text])[0]) and s.ms > 0
    body = srv.body()
    assert srv.requests[0].url.path == "/v1/chat/completions"
    assert srv.requests[0].headers["authorization"] == "Bearer k"
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (300, 0.0, 0)
    system, user = (m["content"] for m in body["messages"])
    assert "verbatim" in system
    assert all(f"{i}. {t}:" in user for i, t in enumerate(TITLES, 1))
    assert "src/app/parser.py" in user and "FAILED tests/test_parser.py::test_empty" in user


def test_previous_summary_is_part_of_the_prompt():
    srv = Server(lambda r: httpx.Response(200, json=completion("merged")))
    openai_backend(srv).summarize(PARTS, previous="Earlier: port 8321 is used",
                                  budget_tokens=100, estimator=CHARS4)
    assert "<earlier-summary>\nEarlier: port 8321 is used\n</earlier-summary>" in \
        srv.body()["messages"][1]["content"]


def test_an_answer_over_budget_is_cut_at_a_line():
    long = "\n".join(f"- point {i} about src/mod_{i}.py" for i in range(200))
    srv = Server(lambda r: httpx.Response(200, json=completion(long)))
    s = openai_backend(srv).summarize(PARTS, budget_tokens=50, estimator=CHARS4)
    assert s.output_tokens <= 50 and long.startswith(s.text) and s.text.endswith(".py")


@pytest.mark.parametrize(("status", "message", "kind"), [
    (500, "internal error", "http"),
    (503, "Service Unavailable", "http"),
    (429, "Rate limit reached for requests", "http"),
    (401, "Incorrect API key provided", "http"),
    (400, "This model's maximum context length is 4096 tokens. However, you requested 9000 "
          "tokens.", "overflow"),
    (400, "Requested tokens (9000) exceed context window of 4096", "overflow"),
])
def test_openai_http_errors_have_a_kind_and_status(status, message, kind):
    srv = Server(lambda r: httpx.Response(status, json={"error": {"message": message,
                                                                  "type": "x"}}))
    with pytest.raises(SummarizerError) as e:
        openai_backend(srv).summarize(PARTS, budget_tokens=100, estimator=CHARS4)
    assert (e.value.kind, e.value.status) == (kind, status)
    assert f"HTTP {status}" in str(e.value) and message[:20] in str(e.value)
    assert str(e.value).startswith("openai (m at http://llm.test/v1)")


def test_retries_are_the_sdks_and_then_the_error_surfaces():
    srv = Server(lambda r: httpx.Response(503, json={"error": {"message": "busy"}}))
    b = OpenAIChat(model="m", base_url="http://llm.test/v1", api_key="k", max_retries=1,
                   http_client=srv.client(), timeout=5)
    with pytest.raises(SummarizerError, match="HTTP 503"):
        b.summarize(PARTS, budget_tokens=100, estimator=CHARS4)
    assert len(srv.requests) == 2


def _raise(exc: Exception) -> Callable[[httpx.Request], httpx.Response]:
    def reply(request: httpx.Request) -> httpx.Response:
        raise exc
    return reply


@pytest.mark.parametrize(("exc", "kind", "words"), [
    (httpx.ReadTimeout("read timed out"), "timeout", "no answer within 7 s"),
    (httpx.ConnectError("[Errno 111] Connection refused"), "connection", "cannot connect"),
])
def test_timeouts_and_connection_errors(exc, kind, words):
    b = openai_backend(Server(_raise(exc)), timeout=7)
    with pytest.raises(SummarizerError, match=words) as e:
        b.summarize(PARTS, budget_tokens=100, estimator=CHARS4)
    assert e.value.kind == kind and e.value.status is None


def test_empty_answers_and_missing_keys(monkeypatch):
    srv = Server(lambda r: httpx.Response(200, json=completion("  \n")))
    with pytest.raises(SummarizerError, match="empty summary") as e:
        openai_backend(srv).summarize(PARTS, budget_tokens=100, estimator=CHARS4)
    assert e.value.kind == "empty"
    monkeypatch.delenv("CTXLAB_TEST_KEY", raising=False)
    b = OpenAIChat(model="m", api_key_env="CTXLAB_TEST_KEY", http_client=srv.client())
    with pytest.raises(SummarizerError, match="set the environment variable CTXLAB_TEST_KEY"):
        b.summarize(PARTS, budget_tokens=100, estimator=CHARS4)
    monkeypatch.setenv("CTXLAB_TEST_KEY", "from-env")
    srv.reply = lambda r: httpx.Response(200, json=completion("ok"))
    assert b.summarize(PARTS, budget_tokens=100, estimator=CHARS4).text == "ok"
    assert srv.requests[-1].headers["authorization"] == "Bearer from-env"


def anthropic_reply(request):
    return httpx2.Response(200, json={
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "text", "text": "1. Primary Request and Intent: fix parser.py"}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 456, "output_tokens": 11}})


def test_anthropic_request_summary_and_overflow():
    srv = Server(anthropic_reply, http=httpx2)
    b = AnthropicChat(model="claude-x", api_key="k", base_url="http://llm.test",
                      max_retries=0, http_client=srv.client())
    s = b.summarize(PARTS, budget_tokens=200, estimator=CHARS4)
    assert (s.text, s.input_tokens, s.backend) == \
        ("1. Primary Request and Intent: fix parser.py", 456, "anthropic")
    body = srv.body()
    assert srv.requests[0].url.path == "/v1/messages"
    assert body["max_tokens"] == 200 and "verbatim" in body["system"]
    assert body["messages"][0]["role"] == "user"
    srv.reply = lambda r: httpx2.Response(400, json={"type": "error", "error": {
        "type": "invalid_request_error", "message": "prompt is too long: 250000 tokens > "
        "200000 maximum"}})
    with pytest.raises(SummarizerError) as e:
        b.summarize(PARTS, budget_tokens=200, estimator=CHARS4)
    assert (e.value.kind, e.value.status) == ("overflow", 400)


# ---- recorded responses ------------------------------------------------------------------

def test_record_then_replay_without_any_request(tmp_path: Path):
    path = tmp_path / "responses.jsonl"
    live = Server(lambda r: httpx.Response(200, json=completion("recorded text", 99, 3)))
    first = openai_backend(live, cache=path, cache_mode="record").summarize(
        PARTS, budget_tokens=100, estimator=CHARS4)
    assert len(live.requests) == 1 and len(path.read_text().splitlines()) == 1
    rec = json.loads(path.read_text())
    assert (rec["backend"], rec["model"], rec["text"], rec["input_tokens"]) == \
        ("openai", "m", "recorded text", 99)
    dead = Server(_raise(AssertionError("the network must not be used in replay mode")))
    again = openai_backend(dead, cache=path, cache_mode="replay").summarize(
        PARTS, budget_tokens=100, estimator=CHARS4)
    assert again == first and not dead.requests   # same text, tokens and recorded ms
    auto = openai_backend(dead, cache=path).summarize(PARTS, budget_tokens=100,
                                                      estimator=CHARS4)
    assert auto.text == "recorded text" and not dead.requests


def test_replay_mode_says_when_a_response_is_missing(tmp_path: Path):
    path = tmp_path / "responses.jsonl"
    dead = Server(_raise(AssertionError("no network")))
    b = openai_backend(dead, cache=path, cache_mode="replay")
    with pytest.raises(SummarizerError, match="no recorded response for request") as e:
        b.summarize(PARTS, budget_tokens=100, estimator=CHARS4)
    assert e.value.kind == "missing" and "cache_mode='record'" in str(e.value)
    assert not dead.requests and not path.exists()


def test_a_different_prompt_is_a_different_key(tmp_path: Path):
    path = tmp_path / "r.jsonl"
    srv = Server(lambda r: httpx.Response(200, json=completion("x")))
    b = openai_backend(srv, cache=path)
    b.summarize(PARTS, budget_tokens=100, estimator=CHARS4)
    b.summarize(PARTS, budget_tokens=101, estimator=CHARS4)
    b.summarize(PARTS.iloc[:2], budget_tokens=100, estimator=CHARS4)
    b.summarize(PARTS, budget_tokens=100, estimator=CHARS4)
    assert len(srv.requests) == 3 and len(ResponseCache(path)) == 3


def test_bad_cache_lines_name_the_file_and_line(tmp_path: Path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"key": "a", "backend": "openai", "model": "m", "text": "t", '
                    '"input_tokens": 1, "output_tokens": 1, "ms": 1.0}\n\nnot json\n')
    with pytest.raises(LoadError, match=r"r\.jsonl:3: not a JSON line"):
        ResponseCache(path)
    path.write_text('{"key": "a", "text": "t"}\n')
    with pytest.raises(LoadError, match=r"r\.jsonl:1: a recorded response needs backend"):
        ResponseCache(path)


# ---- configuration and registry ----------------------------------------------------------

def test_configured_instances_are_registered_once_under_a_derived_name():
    a = summarizer("openai", model="tiny", base_url="http://127.0.0.1:1/v1", api_key="secret")
    try:
        assert a.name.startswith("openai[") and "secret" not in a.name
        assert summarizer("openai", model="tiny", base_url="http://127.0.0.1:1/v1",
                          api_key="secret") is a
        assert summarizer(a.name) is a and summarizer("openai") is not a
        assert Summarize(summarizer=a.name).summarizer == a.name
    finally:
        unregister(a.name)


def test_two_caches_with_one_file_name_are_two_summarizers_or_an_error(tmp_path: Path):
    """The derived name holds the cache's file name only: a second project's a/r.jsonl and
    b/r.jsonl got the first one's summarizer, replaying (or recording into) its file."""
    a = summarizer("openai", cache=tmp_path / "a" / "r.jsonl", cache_mode="replay")
    try:
        with pytest.raises(ConfigError, match="already exists with another cache_path"):
            summarizer("openai", cache=tmp_path / "b" / "r.jsonl", cache_mode="replay")
        b = summarizer("openai", cache=tmp_path / "b" / "r.jsonl", cache_mode="replay",
                       name="openai-b")
        assert b is not a and b.cache_path == tmp_path / "b" / "r.jsonl"
        assert summarizer("openai", cache=tmp_path / "a" / "r.jsonl", cache_mode="replay") is a
    finally:
        unregister(a.name)
        unregister("openai-b")


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="unknown option.*temprature"):
        summarizer("openai", temprature=0.5)
    with pytest.raises(ConfigError, match="timeout must be a positive number"):
        summarizer("anthropic", timeout=0)
    with pytest.raises(ConfigError, match="cache_mode must be one of"):
        summarizer("openai", cache_mode="sometimes")
    with pytest.raises(ConfigError, match="takes no options"):
        summarizer("structured", model="x")
    with pytest.raises(ConfigError, match="go with a summarizer name"):
        summarizer(summarizer("structured"), model="x")


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab \n-é"), max_size=300), st.integers(0, 40))
def test_fit_text_never_exceeds_the_budget_and_keeps_a_prefix(text, budget):
    out = fit_text(text, budget, CHARS4)
    assert text.startswith(out)
    assert out == "" or int(CHARS4.count([out])[0]) <= budget
    if int(CHARS4.count([text])[0]) <= budget:
        assert out == text


# ---- the pipeline falls through ----------------------------------------------------------

@pytest.fixture
def failing_openai() -> Iterator[str]:
    srv = Server(lambda r: httpx.Response(503, json={"error": {"message": "overloaded"}}))
    s = summarizer("openai", model="m", base_url="http://llm.test/v1", api_key="k",
                   max_retries=0, http_client=srv.client(), name="openai-test-503")
    yield s.name
    unregister(s.name)


def test_a_failing_summarizer_falls_through_and_the_events_say_why(failing_openai):
    t = ctxlab.load(datasets.path("coding_session"))
    p = Pipeline(name="summarize-then-truncate", threshold=0.5, target=0.3, limit="window",
                 estimator="chars:4",
                 stages=stages_from([("summarize", {"summarizer": failing_openai}),
                                     "truncate"]))
    r = ctxlab.replay(t, p, window=120_000)
    failed = r.events[r.events["failure"].notna()]
    assert len(failed) >= 1 and (failed["stage"] == "summarize").all()
    assert (failed["failure"] == "http").all() and failed["event"].isna().all()
    assert failed["reason"].str.contains("summarizer failed: openai .* HTTP 503").all()
    assert (failed["tokens_saved"] == 0).all() and (failed["summarizer_calls"] == 0).all()
    made = r.events[r.events["event"].notna()]
    for call in failed["call"]:          # the next stage ran at the same call
        assert "truncate" in set(made.loc[made["call"] == call, "stage"])
    assert r.summary()["failures"] == len(failed)
    assert r.summary()["events"] == len(made)


def test_error_answers_are_recorded_and_raised_again_on_replay(tmp_path: Path):
    path = tmp_path / "r.jsonl"
    overflow = "This model's maximum context length is 4096 tokens. However, you requested 9000"
    live = Server(lambda r: httpx.Response(400, json={"error": {"message": overflow}}))
    with pytest.raises(SummarizerError) as first:
        openai_backend(live, cache=path).summarize(PARTS, budget_tokens=100, estimator=CHARS4)
    rec = json.loads(path.read_text())
    assert (rec["error"], rec["status"]) == ("overflow", 400) and "text" not in rec
    dead = Server(_raise(AssertionError("no network")))
    with pytest.raises(SummarizerError) as again:
        openai_backend(dead, cache=path, cache_mode="replay").summarize(
            PARTS, budget_tokens=100, estimator=CHARS4)
    assert (again.value.kind, again.value.status, str(again.value)) == \
        (first.value.kind, first.value.status, str(first.value)) and not dead.requests
    flaky = Server(_raise(httpx.ConnectError("refused")))       # transient: not recorded
    with pytest.raises(SummarizerError, match="cannot connect"):
        openai_backend(flaky, cache=tmp_path / "t.jsonl").summarize(
            PARTS, budget_tokens=100, estimator=CHARS4)
    assert not (tmp_path / "t.jsonl").exists()


@pytest.mark.parametrize("status", [503, 500, 429, 401])
def test_an_overloaded_server_or_a_bad_key_is_not_recorded(tmp_path: Path, status: int):
    """A 503 once, then an answer: the next run gets the answer (one overloaded moment
    made the summary fail for good, and a fixed key changed nothing)."""
    path = tmp_path / "r.jsonl"
    answers = iter([httpx.Response(status, json={"error": {"message": "try later"}}),
                    httpx.Response(200, json=completion("1. Primary Request: fix it"))])
    srv = Server(lambda r: next(answers))
    with pytest.raises(SummarizerError) as e:
        openai_backend(srv, cache=path).summarize(PARTS, budget_tokens=100, estimator=CHARS4)
    assert e.value.status == status and not path.exists()
    got = openai_backend(srv, cache=path).summarize(PARTS, budget_tokens=100,
                                                    estimator=CHARS4)
    assert "fix it" in got.text and len(srv.requests) == 2


def test_every_summarizer_call_is_in_the_replays_events_with_tokens_and_time():
    srv = Server(lambda r: httpx.Response(200, json=completion("1. Primary Request: x", 4321, 9)))
    s = summarizer("openai", model="m", base_url="http://llm.test/v1", api_key="k",
                   max_retries=0, http_client=srv.client(), name="openai-test-ok")
    try:
        t = ctxlab.load(datasets.path("coding_session"))
        p = Pipeline(name="summarize", threshold=0.5, target=0.3, limit="window",
                     estimator="chars:4", stages=stages_from([("summarize",
                                                               {"summarizer": s.name})]))
        r = ctxlab.replay(t, p, window=120_000)
    finally:
        unregister(s.name)
    ev = r.events[r.events["stage"] == "summarize"]
    assert len(ev) == len(srv.requests) >= 1 and ev["event"].notna().all()
    assert (ev["summarizer_calls"] == 1).all() and (ev["summarizer_input_tokens"] == 4321).all()
    assert (ev["summarizer_output_tokens"] == int(CHARS4.count(["1. Primary Request: x"])[0])).all()
    assert (ev["summarizer_ms"] > 0).all()


def test_a_replay_whose_only_rows_are_failures_rewinds_and_resumes(failing_openai):
    t = ctxlab.load(datasets.path("coding_session"))
    p = Pipeline(name="summarize-only", threshold=0.5, target=0.3, limit="window",
                 estimator="chars:4",
                 stages=stages_from([("summarize", {"summarizer": failing_openai})]))
    r = ctxlab.replay(t, p, window=120_000)
    assert len(r.events) and r.events["event"].isna().all()
    k = int(r.events["call"].iloc[0])
    before, after = r.at(k)                  # nothing was hidden: the same request
    pd.testing.assert_frame_equal(before, after)
    again = r.rewind(k).resume(p)
    pd.testing.assert_frame_equal(again.events.drop(columns=["ms", "summarizer_ms"]),
                                  r.events.drop(columns=["ms", "summarizer_ms"]))
    with pytest.raises(ctxlab.CtxlabError, match="was not replayed"):
        r.at(10_000)
