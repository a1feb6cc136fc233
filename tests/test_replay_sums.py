"""ctxlab.replay_state.Sums: a table of parts added at once gives the sums of adding its
parts one by one (the walk adds a stage's hidden and inserted rows in one go)."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlab import replay_state
from ctxlab.replay_state import Sums
from ctxlab.layers import layer_categories, user_texts
from ctxlab.stages.table import Table

KINDS = [("system", "text"), ("user", "text"), ("user", "attachment"),
         ("assistant", "text"), ("tool", "tool_result"), ("system", "tool_schema"),
         ("system", "summary")]

part = st.tuples(st.sampled_from(KINDS), st.integers(0, 500), st.integers(0, 4),
                 st.integers(0, 9), st.sampled_from(["text", "<system-reminder>x"]))


def _table(parts: list) -> Table:
    return Table.from_frame(pd.DataFrame({
        "role": [p[0][0] for p in parts], "kind": [p[0][1] for p in parts],
        "content": [p[4] for p in parts], "tokens": np.array([p[1] for p in parts], np.int64),
        "turn": np.array([p[2] for p in parts], np.int64),
        "msg": np.array([p[3] for p in parts], np.int64)}))


def _state(s: Sums) -> tuple:
    return (s.system, s.tools, s.attach, s.other, s.attach_turn, s.other_turn, s.msg_tokens,
            s.msg_refs, s.turn_refs, {k: v for k, v in s.user_msgs.items() if v}, s.max_turn,
            s.layers(), s.messages)


@settings(max_examples=150, deadline=None)
@given(st.lists(part, min_size=1, max_size=60), st.lists(st.booleans(), min_size=60,
                                                          max_size=60))
def test_a_table_at_once_gives_the_sums_of_its_rows_one_by_one(parts, leave):
    start = _table(parts)
    gone = start.take(np.flatnonzero(np.array(leave[:len(parts)])))
    one, batch, numpy_only = Sums(7), Sums(7), Sums(7)
    for t, sign in ((start, +1), (gone, -1)):
        for row in zip(layer_categories(t).tolist(), t.ints("tokens").tolist(),
                       t.ints("turn").tolist(), t.ints("msg").tolist(),
                       user_texts(t).tolist()):
            one.add(*row[:4], sign, row[4])
        batch.add_table(t, sign)
        with mock.patch.object(replay_state, "_ROW_BY_ROW", 0):   # even a table of one
            numpy_only.add_table(t, sign)
        assert _state(batch) == _state(numpy_only) == _state(one)
