"""Layers L1–L5 on generated and real requests."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.engine import call_end_pos, request_parts, with_layers
from ctxlab.layers import LAYERS, added_layers, assign_layers, layer_context, layers_df
from ctxlab.stages.table import Table, append
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


_ROLES = ["system", "user", "user", "assistant", None]
_KINDS = ["text", "text", "tool_result", "attachment", "tool_schema", "summary", "marker", None]
_CONTENTS = ["plain", "<system-reminder>x</system-reminder>", "  <context>\nproject", None]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_ROLES), st.sampled_from(_KINDS),
                          st.sampled_from(_CONTENTS), st.integers(0, 3)), min_size=17,
                max_size=40))
def test_layers_of_a_grown_request_equal_those_of_the_whole(rows):
    """What of a layer depends on the part alone is computed once per part and travels
    with the rows: a request assembled from small tables (as a replay's, call by call)
    has the layers of the same request read whole, and of the DataFrame."""
    df = pd.DataFrame({"role": pd.array([r[0] for r in rows], dtype="string"),
                       "kind": pd.array([r[1] for r in rows], dtype="string"),
                       "content": pd.array([r[2] for r in rows], dtype="string"),
                       "turn": [r[3] for r in rows], "msg": list(range(len(rows)))})
    whole = Table.from_frame(df)
    pieces = [Table.from_frame(df.iloc[i:i + 3].reset_index(drop=True))
              for i in range(0, len(df), 3)]
    grown = pieces[0]
    for piece in pieces[1:]:
        assign_layers(grown)                  # classes kept with the rows, as in a replay
        grown = append(grown, piece)
    want = assign_layers(whole).tolist()
    assert assign_layers(grown).tolist() == want == assign_layers(df).tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_ROLES), st.sampled_from(_KINDS),
                          st.sampled_from(_CONTENTS), st.integers(0, 3),
                          st.integers(0, 6)), min_size=2, max_size=30),
       st.integers(1, 29))
def test_layers_assigned_to_the_new_rows_alone_equal_those_of_the_whole(rows, cut):
    """`added_layers` (a replay's request: the last one's rows, then those that arrived)
    gives the new rows the layers they have in the whole request, or None when they
    change the layer context (a new turn, an earlier prompt): then every layer may
    change."""
    df = pd.DataFrame({"role": pd.array([r[0] for r in rows], dtype="string"),
                       "kind": pd.array([r[1] for r in rows], dtype="string"),
                       "content": pd.array([r[2] for r in rows], dtype="string"),
                       "turn": [r[3] for r in rows], "msg": [r[4] for r in rows]})
    cut = min(cut, len(df) - 1)
    first = Table.from_frame(df.iloc[:cut].reset_index(drop=True))
    before = layer_context(first)
    first = with_layers(first, assign_layers(first, before))
    new = Table.from_frame(df.iloc[cut:].reset_index(drop=True))
    got = added_layers(new, before)
    whole = assign_layers(df).tolist()
    if layer_context(Table.from_frame(df)) == before:
        assert got is not None
        assert first.col("layer").tolist() + got.tolist() == whole
    else:
        assert got is None


def test_a_user_text_after_the_prompt_is_current_one_before_it_changes_the_prompt():
    def table(rows):
        return Table.from_frame(pd.DataFrame({
            "role": pd.array([r[0] for r in rows], dtype="string"),
            "kind": pd.array([r[1] for r in rows], dtype="string"),
            "content": pd.array(["x"] * len(rows), dtype="string"),
            "turn": [r[2] for r in rows], "msg": [r[3] for r in rows]}))

    first = table([("system", "text", 0, 0), ("user", "text", 1, 5), ("assistant", "text", 1, 6)])
    before = layer_context(first)
    assert before == (1, 5)
    later = table([("user", "text", 1, 7), ("user", "attachment", 1, 7)])
    assert added_layers(later, before).tolist() == ["current", "current"]
    assert added_layers(table([("user", "text", 1, 3)]), before) is None     # earlier prompt
    assert added_layers(table([("assistant", "text", 2, 8)]), before) is None  # a new turn
    many = table([("assistant", "text", 1, 7 + i) for i in range(20)])      # (with NumPy)
    assert added_layers(many, before).tolist() == ["current"] * 20
