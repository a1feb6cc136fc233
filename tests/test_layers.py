"""Layers L1–L5 on generated and real requests."""

from __future__ import annotations

import pandas as pd

import ctxlab
from ctxlab.engine import call_end_pos, request_parts
from ctxlab.layers import LAYERS, assign_layers, layers_df
from tests.conftest import DATASETS


def _request(name, call=None):
    t = ctxlab.load(DATASETS / name).rewind_recorded()
    s = t.sessions[0]
    k = int(t.calls.loc[t.calls["session"] == s, "call"].max()) if call is None else call
    return t, request_parts(t, s, call_end_pos(t, s, k))


def test_every_part_gets_a_layer_and_the_prompt_is_the_last_user_message():
    t, parts = _request("coding_session.jsonl")
    layer = assign_layers(parts)
    assert set(layer) <= set(LAYERS)
    current = parts["turn"].max()
    prompt = parts[layer == "prompt"]
    assert prompt["msg"].nunique() == 1 and (prompt["turn"] == current).all()
    assert (prompt["role"] == "user").all()
    assert (layer[(parts["turn"] < current).to_numpy()] != "current").all()
    after_prompt = parts["pos"] > prompt["pos"].max()
    assert set(layer[after_prompt.to_numpy()]) <= {"current"}


def test_projects_mode_puts_the_project_in_l1():
    t, parts = _request("projects_mode.jsonl")
    parts = parts.assign(tokens=ctxlab.estimator("chars:4").count_parts(parts))
    df = layers_df(parts, overhead_tokens=1000).set_index("layer")
    assert list(df.index) == list(LAYERS)
    assert df.loc["system", "share"] > 0.8  # ~500k tokens of project context
    assert df.loc["system", "overhead_tokens"] == 1000
    assert df["tokens"].sum() == parts["tokens"].sum() + 1000


def test_attachments_of_earlier_turns_are_carried():
    parts = pd.DataFrame({
        "msg": [0, 1, 1, 2, 3, 3, 4], "turn": [0, 1, 1, 1, 2, 2, 2],
        "role": ["system", "user", "user", "assistant", "user", "user", "assistant"],
        "kind": ["text", "attachment", "text", "text", "attachment", "text", "tool_call"]})
    assert assign_layers(parts).tolist() == ["system", "carried", "history", "history",
                                             "current", "prompt", "current"]
