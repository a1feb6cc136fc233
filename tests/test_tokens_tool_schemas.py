"""Tool schemas counted as OpenAI bills them (ctxlab.tokens.tool_schemas), on a real log."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import ctxlab
from ctxlab.tokens import estimator
from ctxlab.tokens.tool_schemas import function_of, function_tokens

from conftest import DATASETS, realdata_path

INSPECT = "inspect_ai/2025-05-12T20-27-36-04-00_browser.json"


def _words(text: str) -> int:
    """A stand-in tokenizer: words, with ':' a separator."""
    return len(text.replace(":", " ").split())


def test_the_accounting_of_one_function():
    fn = {"name": "pick", "description": "Pick a colour.",
          "parameters": {"type": "object", "properties": {
              "colour": {"type": "string", "enum": ["red", "green"], "description": "Which."},
              "n": {"type": ["integer", "null"]}}}}
    # 7 + "pick Pick a colour" (4) + 3 + [3 - 3 + (3 + 1) * 2 + "colour string Which" (3)]
    #   + [3 + "n integer|null" (2)]
    assert function_tokens(json.dumps(fn), _words, 7) == 7 + 4 + 3 + (3 - 3 + 8 + 3) + (3 + 2)
    # OpenAI's wrapper is the same function; gpt-4's encodings open each with 10
    wrapped = json.dumps({"type": "function", "function": fn})
    assert function_tokens(wrapped, _words, 10) == function_tokens(json.dumps(fn), _words, 7) + 3
    no_params = json.dumps({"name": "now", "description": "The time"})
    assert function_tokens(no_params, _words, 7) == 7 + 3


@pytest.mark.parametrize("text", [
    "not json", "[1, 2]", '{"description": "no name"}',
    '{"name": "f", "input_schema": {"type": "object"}}',       # Anthropic's: another rendering
    '{"name": "f", "parameters": "a string"}'])
def test_what_is_no_openai_function_keeps_its_json_count(text):
    assert function_of(text) is None and function_tokens(text, _words, 7) is None
    parts = pd.DataFrame({"content": [text], "kind": ["tool_schema"]})
    o200k = estimator("tiktoken:o200k_base")
    assert o200k.count_parts(parts).tolist() == o200k.count([text]).tolist()


def test_only_tiktoken_encodings_whose_models_take_tools_render_them():
    schema = json.dumps({"name": "go", "description": "Open a page.", "parameters": {
        "type": "object", "properties": {"url": {"type": "string", "description": "Where."}}}})
    parts = pd.DataFrame({"content": [schema, schema], "kind": ["tool_schema", "text"]})
    for spec, start in (("tiktoken:o200k_base", 7), ("tiktoken:cl100k_base", 10)):
        e = estimator(spec)
        schema_count, as_text = e.count_parts(parts).tolist()
        assert as_text == e.count([schema])[0] > schema_count
        assert schema_count == start + e.count(["go:Open a page"])[0] + 3 + 3 + \
            e.count(["url:string:Where"])[0]
    llama3 = estimator("llama3")        # a tiktoken encoding, but no OpenAI model's
    assert llama3.count_parts(parts).tolist() == [llama3.count([schema])[0]] * 2


def test_o200k_is_within_2_percent_of_what_openai_billed_on_a_real_tool_log():
    """gpt-4o-mini with 8 browser tools: o200k counted the schemas' JSON (1,426 tokens)
    and overstated every request, the first by 31.9% (1,482 against 1,124 billed)."""
    t = ctxlab.load(realdata_path(INSPECT))
    r = ctxlab.replay(t, "probe", estimator="tiktoken:o200k_base", overhead_tokens=0,
                      window=10**9)
    c = r.calls
    error = (c["tokens_before"] - c["input_total"]) / c["input_total"]
    assert c["input_total"].tolist() == [1124, 1568, 2732, 3896, 5915]
    assert error.abs().max() < 0.021, error.tolist()
    schemas = t.frame[t.frame["kind"] == "tool_schema"]
    o200k = estimator("tiktoken:o200k_base")
    assert int(o200k.count(schemas["content"]).sum()) == 1426
    assert int(o200k.count_parts(schemas).sum()) < 1124


def test_stored_counts_and_the_bundled_openai_log_agree_with_a_fresh_count():
    """Stored per-text counts (a dataset's facts) hold the JSON's count; the schema's
    billed count is made from them the same way, cached or not."""
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    schemas = t.frame[t.frame["kind"] == "tool_schema"]
    assert len(schemas) == 24
    fresh = estimator("tiktoken:o200k_base")
    fresh.clear_cache()
    first = fresh.count_parts(schemas).tolist()
    assert fresh.count_parts(schemas).tolist() == first            # from its caches
    assert all(a < b for a, b in zip(first, fresh.count(schemas["content"]).tolist()))
