"""Estimators: spec strings, the seeds' heuristics exactly, framing, caching, max:."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlab.errors import ConfigError
from ctxlab.tokens import Estimator, estimator, names, text_lengths
from ctxlab.tokens.combined import Max
from ctxlab.tokens.heuristics import NEUROLINK_MULTIPLIERS, CharRatio


def test_unknown_spec_lists_the_known_families():
    with pytest.raises(ConfigError) as e:
        estimator("gpt5-magic")
    for name in ("chars", "neurolink", "neuron", "probe", "langchain", "max", "calibrated"):
        assert name in str(e.value)


@pytest.mark.parametrize("spec", ["chars:four", "neurolink:openrouterx", "neuron:3", "max:chars:4",
                                  "max:,chars:4", "calibrated", "", "chars:0", "chars:-2"])
def test_bad_arguments_are_config_errors(spec):
    with pytest.raises(ConfigError):
        estimator(spec)


def test_instances_pass_through_and_specs_share_one_instance():
    est = CharRatio(ratio=3)
    assert estimator(est) is est
    assert estimator("neuron") is estimator("neuron")
    assert estimator("chars:3").spec == "chars:3"


def test_chars_rounds_up_per_text():
    assert estimator("chars:4").count(["", "a", "abcd", "abcde", "x" * 401]).tolist() == \
        [0, 1, 1, 2, 101]
    assert estimator("chars:3.5").count(["x" * 7, "x" * 8]).tolist() == [2, 3]


@pytest.mark.parametrize("provider", sorted(NEUROLINK_MULTIPLIERS))
def test_neurolink_formula_per_provider(provider):
    """Seed 000: ceil(len/4) x multiplier x 1.15, rounded up; UTF-16 length."""
    est = estimator(f"neurolink:{provider}")
    texts = ["hello world", "x" * 1000, "😀" * 10, ""]
    want = [math.ceil(math.ceil(n / 4) * NEUROLINK_MULTIPLIERS[provider] * 1.15 - 1e-9)
            for n in (11, 1000, 20, 0)]
    assert est.count(texts).tolist() == want
    assert (est.per_message, est.per_conversation, est.image_tokens) == (4, 24, 1024)


def test_neurolink_anthropic_numbers():
    # 1000 chars -> 250 -> x1.23 -> 307.5 -> x1.15 -> 353.625 -> 354
    assert estimator("neurolink:anthropic").count(["x" * 1000]).tolist() == [354]
    assert estimator("neurolink").count(["x" * 1000]).tolist() == [288]  # 250 x 1.15 = 287.5


def test_neurolink_counts_tool_definitions_without_the_multiplier():
    """Seed 000's budget check: toolDefinitions is JSON.stringify(tool).length / 4; the
    provider multiplier and safety margin apply to messages, not to tool definitions."""
    import ctxlab
    from ctxlab.stages.table import Table
    from tests.conftest import DATASETS

    f = ctxlab.load(DATASETS / "openai_sessions.jsonl").frame
    schema = (f["kind"] == "tool_schema").to_numpy()
    assert schema.sum() == 24
    est, plain = estimator("neurolink:anthropic"), estimator("probe")   # probe: ⌈UTF-16/4⌉
    got = est.count_parts(f)
    assert (got[schema] == plain.count_parts(f)[schema]).all()
    assert (got[~schema] == est.count(f["content"])[~schema]).all()
    table = Table.from_frame(f.reset_index(drop=True))
    assert est.count_parts(table).tolist() == got.tolist()
    assert (est.count_parts(f)[schema] < est.count(f["content"])[schema]).all()


def test_neuron_counts_utf8_bytes_and_frames_messages():
    est = estimator("neuron")
    assert est.count(["abcd", "漢字", "é"]).tolist() == [1, 2, 1]  # 4, 6, 2 bytes
    assert (est.per_message, est.per_conversation, est.image_tokens) == (4, 0, 300)


def test_neuron_counts_a_binary_document_at_seed_004s_flat_500():
    """An Anthropic document block (a PDF as base64) is an attachment with its media type
    in meta: seed 004 counts it 500 tokens; a text attachment is counted as text."""
    import json

    from ctxlab.stages.table import Table

    parts = pd.DataFrame({"kind": ["attachment", "attachment", "text"],
                          "content": ["JVBERi0xLjQK" * 3_000, "notes " * 100, "hi"],
                          "meta": [json.dumps({"type": "base64",
                                               "media_type": "application/pdf"}),
                                   json.dumps({"media_type": "text/plain"}), None]})
    est = estimator("neuron")
    assert est.count_parts(parts).tolist() == [500, 150, 1]
    assert est.count_parts(Table.from_frame(parts)).tolist() == [500, 150, 1]
    assert estimator("chars:4").count_parts(parts).tolist()[0] == 9_000
    with pytest.raises(ConfigError, match="positive number"):
        estimator("chars:inf")


def test_probe_and_langchain():
    assert estimator("probe").count(["abcdefghi", "😀😀"]).tolist() == [3, 1]
    lc = estimator("langchain")
    assert lc.count(["abcdefghi"]).tolist() == [3] and lc.per_message == 3


def test_request_tokens_adds_framing_and_flat_image_cost():
    parts = pd.DataFrame({"msg": [0, 0, 1, 2], "kind": ["text", "image", "text", "tool_schema"],
                          "content": ["x" * 40, "<image 1.2 MB>", "y" * 8, "z" * 4]})
    nl = estimator("neurolink:openai")
    per_part = nl.count_parts(parts).tolist()
    assert per_part[1] == 1024
    assert nl.request_tokens(parts) == sum(per_part) + 3 * 4 + 24
    assert estimator("neuron").request_tokens(parts) == 10 + 300 + 2 + 1 + 3 * 4
    assert estimator("chars:4").request_tokens(parts.iloc[:0]) == 0


def test_max_takes_the_larger_per_text_and_scales_schemas():
    m = estimator("max:chars:4,chars:2")
    assert isinstance(m, Max)
    assert m.count(["abcd", "ab"]).tolist() == [2, 1]
    parts = pd.DataFrame({"msg": [0, 1], "kind": ["text", "tool_schema"],
                          "content": ["x" * 100, "x" * 100]})
    assert m.count_parts(parts).tolist() == [50, math.ceil(50 * 2.09)]


def test_cache_counts_each_distinct_text_once():
    calls: list[list[str]] = []

    class Spy(Estimator):
        spec = "spy"

        def _count(self, texts):
            calls.append(list(texts))
            return np.array([len(t) for t in texts])

    spy = Spy()
    assert spy.count(["aa", "b", "aa", "b", "ccc"]).tolist() == [2, 1, 2, 1, 3]
    assert spy.count(pd.Series(["ccc", "aa", "dddd"])).tolist() == [3, 2, 4]
    assert calls == [["aa", "b", "ccc"], ["dddd"]]
    assert spy.cache_size == 4
    spy.clear_cache()
    assert spy.cache_size == 0


def test_na_counts_as_empty_text():
    s = pd.Series(["abcd", None], dtype="string")
    assert estimator("chars:4").count(s).tolist() == [1, 0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=12))
def test_lengths_match_python_encodings(texts):
    s = pd.Series(texts, dtype="string")
    assert text_lengths(s, "chars").tolist() == [len(t) for t in texts]
    assert text_lengths(s, "utf16").tolist() == [len(t.encode("utf-16-le", "surrogatepass")) // 2
                                                for t in texts]
    assert text_lengths(s, "utf8").tolist() == [len(t.encode("utf-8", "surrogatepass"))
                                               for t in texts]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=10))
def test_every_heuristic_is_monotone_in_length_and_non_negative(texts):
    for spec in ("chars:4", "neurolink:anthropic", "neuron", "probe", "langchain"):
        est = estimator(spec)
        counts = est.count(texts)
        assert (counts >= 0).all()
        assert (est.count([t + t for t in texts]) >= counts).all()


def test_builtin_families_are_listed():
    assert {"chars", "neurolink", "neuron", "probe", "langchain", "max", "calibrated"} <= \
        set(names())
