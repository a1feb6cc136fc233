"""The artifacts of a frame as arrays (`ctxlab.occurrences`): instruction flags, the
artifacts a frame takes from the last one, and the interval searches recall and retention
run on them."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import ctxlab
from ctxlab import metrics, occurrences as occ_module
from ctxlab.artifacts import artifact_ids, artifact_values, instruction_rows
from ctxlab.metrics import (_matches, _stabbed, loss_totals, needed_facts_df, needed_recall_df,
                            one_spelling, part_artifacts, retention_df)
from ctxlab.occurrences import instruction_flags, occurrences
from ctxlab.schema import TEXT
from tests.conftest import DATASETS, realdata_path


def _frame(rows: list[tuple]) -> pd.DataFrame:
    cols = ["session", "part", "msg", "turn", "role", "kind", "content"]
    f = pd.DataFrame(rows, columns=cols)
    return f.astype({"session": TEXT, "part": "Int64", "msg": "Int64", "turn": "Int64",
                     "role": TEXT, "kind": TEXT, "content": TEXT})


NA = pd.NA
ODD = _frame([
    ("s1", 0, 0, 1, "user", "text", "Please use uv."),                 # a turn's first
    ("s1", 1, 1, 1, "user", "text", "Always run the tests."),          # not its first
    ("s1", 2, 2, 2, "assistant", "text", "Use uv, then."),
    ("s1", 3, 3, 2, "user", "text", "Never push."),                     # turn 2 began at 2
    ("s1", 4, 4, 3, "user", "text", "<system-reminder> Use uv"),       # injected context
    ("s2", 0, 5, 1, "user", "text", "Please keep it short."),         # turn 1 of s2 too
    ("s2", 1, 6, NA, "user", "text", "Please use tabs."),
    ("s2", 2, NA, 3, "user", "text", "Do not guess."),
    ("s2", 3, 7, 4, NA, "text", "Make sure it builds."),
    ("s2", 4, 8, 5, "user", NA, "Avoid globals."),
    ("s2", 5, 9, 6, "user", "text", NA),
    ("s2", 6, 10, 0, "user", "text", "Prefer pure functions."),         # turn 0: no turn
    ("s2", 7, 9, 6, "assistant", "summary", "Use uv; never push."),
    (NA, 0, 11, 1, "user", "text", "Please log in."),                  # no session
    (NA, 1, 12, 1, "user", "summary", "Keep the port."),
    ("s3", 0, NA, 1, "assistant", "text", "Hi."),                      # a turn's NA msg
    ("s3", 1, 13, 1, "user", "text", "Please be brief."),
])


def test_instruction_flags_are_instruction_rows_with_odd_values():
    got = instruction_flags(ODD)
    assert got.tolist() == instruction_rows(ODD).tolist()
    assert got.sum() >= 5 and not got[1] and not got[3] and not got[4]


@pytest.fixture(scope="module")
def replays():
    """The bundled coding session's log, its replays and their rewound and resumed
    versions, and a log of several sessions: frames one after the other as a sweep or a
    report meets them."""
    log = ctxlab.load(DATASETS / "coding_session.jsonl")
    base = log.rewind_recorded()
    a = ctxlab.replay(base, "observation-masking", window=60_000)
    b = ctxlab.replay(base, "neurolink", window=60_000)
    rewound = b.rewind(int(b.calls["call"].iloc[len(b.calls) // 2]))
    return [log, base, a.transcript, b.transcript, rewound.transcript,
            rewound.resume(threshold=0.6).transcript,
            ctxlab.load(DATASETS / "openai_sessions.jsonl"), a.transcript]


def test_instruction_flags_are_instruction_rows_on_logs_and_replays(replays):
    for t in replays:
        assert instruction_flags(t.frame).tolist() == instruction_rows(t.frame).tolist()


@pytest.mark.realdata
@pytest.mark.parametrize("rel", ["aider/chat-history.md",
                                 "claude_code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"])
def test_instruction_flags_are_instruction_rows_on_real_logs(rel):
    f = ctxlab.load(realdata_path(rel)).frame
    assert instruction_flags(f).tolist() == instruction_rows(f).tolist()


def _measures(t) -> tuple:
    return (loss_totals(t), needed_recall_df(t), retention_df(t), part_artifacts(t),
            needed_facts_df(t, kinds=["path", "number"]))


def _assert_same(got: tuple, want: tuple) -> None:
    totals, *frames = got
    assert totals.keys() == want[0].keys()
    for k, v in totals.items():
        assert v == want[0][k] or (math.isnan(v) and math.isnan(want[0][k])), k
    for a, b in zip(frames, want[1:]):
        pd.testing.assert_frame_equal(a, b)


def _changed(t, rows: np.ndarray, **columns) -> ctxlab.Transcript:
    """``t`` with new values in some rows (a new frame: the same parts)."""
    f = t.frame.copy()
    for name, value in columns.items():
        f.loc[f.index[rows], name] = value
    return dataclasses.replace(t, frame=f)


def test_frames_in_a_row_measure_as_each_alone(replays, monkeypatch):
    """What a frame takes from the last one changes nothing: replays of one session, a
    rewound and a resumed one, another log, and frames with the same parts as the last
    one but other texts, or the same texts with other instruction flags."""
    monkeypatch.setattr(metrics, "_LAST", [])
    a = replays[2]
    said = np.flatnonzero((a.frame["role"] == "assistant").fillna(False).to_numpy())[:40]
    user = np.flatnonzero(instruction_rows(a.frame).to_numpy() & a.frame["kind"].eq(
        "text").fillna(False).to_numpy())
    other_texts = _changed(a, said, content="Edited /srv/app/zz_moved.py at port 9911.")
    other_flags = _changed(a, user, turn=0)          # same texts, no instruction
    assert not instruction_flags(other_flags.frame)[user].any()
    assert _measures(a)[3]["kind"].eq("instruction").any()
    empty = dataclasses.replace(a, frame=a.frame.iloc[:0], calls=a.calls.iloc[:0])
    frames = [*replays, other_texts, a, other_flags, a, empty, replays[3]]
    warm = [_measures(t) for t in frames]
    for t, got in zip(frames, warm):
        metrics._LAST.clear()
        _assert_same(got, _measures(t))
    assert "9911" in set(part_artifacts(other_texts)["value"]) - set(part_artifacts(a)["value"])


def test_a_replay_looks_up_only_the_texts_it_inserted(replays, monkeypatch):
    counted: list[int] = []

    def counting(texts, **kw):
        counted.append(len(texts))
        return artifact_ids(texts, **kw)

    monkeypatch.setattr(occ_module, "artifact_ids", counting)
    log, base, a = replays[:3]
    first = occurrences(base.frame)
    assert counted == [len(set(zip(first.texts.texts.tolist(), first.texts.user.tolist())))]
    counted.clear()
    again = occurrences(a.frame, first.texts)
    inserted = a.frame["event"].notna() & ~a.frame["event"].isin(base.events["event"])
    assert 0 < counted[0] <= inserted.sum()
    cold = occurrences(a.frame)
    for name in ("rows", "scode", "ids", "aid", "codes"):
        assert np.array_equal(getattr(again, name), getattr(cold, name)), name
    # ids of another generation (`ARTIFACT_IDS_MAX` reached) are never taken
    counted.clear()
    monkeypatch.setattr(occ_module, "ids_generation", lambda: first.texts.generation + 1)
    occurrences(a.frame, first.texts)
    assert counted == [len(set(zip(cold.texts.texts.tolist(), cold.texts.user.tolist())))]


def test_occurrences_are_the_artifacts_of_every_text(replays):
    """`occurrences` against the plain recipe: every text's artifacts, one spelling per
    file within a session, numbered in order of first occurrence."""
    for t in replays:
        f = t.frame
        rows, ids = artifact_ids(f["content"], user=instruction_rows(f))
        codes = pd.Index(pd.unique(f["session"].to_numpy(dtype=object))).get_indexer(
            f["session"].to_numpy(dtype=object))[rows]
        ids = one_spelling(ids, codes)
        got = occurrences(f, None)
        assert np.array_equal(got.rows, rows) and np.array_equal(got.ids, ids)
        assert np.array_equal(got.aid, pd.factorize((codes << 32) | ids)[0])
        assert got.values().tolist() == artifact_values(ids).tolist()


def _stabbed_slowly(q_key, q, key, lo, hi):
    return np.array([bool(((key == k) & (lo < v) & (v <= hi)).any()) for k, v in zip(q_key, q)],
                    dtype=bool)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_stabbed_equals_a_brute_force(data):
    n = data.draw(st.integers(0, 30))
    rows = data.draw(st.integers(1, 12))
    bound = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, np.inf])
    lo = np.array(data.draw(st.lists(bound, min_size=rows, max_size=rows)))
    hi = np.array(data.draw(st.lists(bound, min_size=rows, max_size=rows)))
    row = np.array(data.draw(st.lists(st.integers(0, rows - 1), min_size=n, max_size=n)),
                   dtype=np.int64)
    key = np.array(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)),
                   dtype=np.int64)
    m = data.draw(st.integers(0, 20))
    q_key = np.array(data.draw(st.lists(st.integers(0, 6), min_size=m, max_size=m)),
                     dtype=np.int64)
    values = np.array([0.25, 1.0, 1.5, 2.5, 3.0, 9.0])
    q_at = np.array(data.draw(st.lists(st.integers(0, 5), min_size=m, max_size=m)),
                    dtype=np.int64)
    want = _stabbed_slowly(q_key, values[q_at], key, lo[row], hi[row])
    assert _stabbed(q_key, values[q_at], key, lo[row], hi[row]).tolist() == want.tolist()
    by_key = np.argsort(key, kind="stable")
    assert _stabbed(q_key, values, key, lo, hi, row, q_at, by_key).tolist() == want.tolist()


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_matches_equals_a_brute_force(data):
    sparse = data.draw(st.booleans())      # a table of pairs, or a search
    top = 10**9 if sparse else 30
    pairs = data.draw(st.lists(st.tuples(st.integers(-1, 4), st.integers(0, top)),
                               max_size=25))
    right = {p: i for i, p in enumerate(pairs) if p[0] >= 0}
    left = data.draw(st.lists(st.sampled_from([*right, (0, 1), (3, top)]), max_size=25))
    a = np.array([p[0] for p in left], dtype=np.int64)
    b = np.array([p[1] for p in left], dtype=np.int64)
    ra = np.array([p[0] for p in pairs], dtype=np.int64)
    rb = np.array([p[1] for p in pairs], dtype=np.int64)
    if len(right) < sum(p[0] >= 0 for p in pairs):
        with pytest.raises(ValueError, match="repeat"):
            _matches(np.array([0]), np.array([0]), ra, rb)
        return
    got = _matches(a, b, ra, rb)
    assert got.tolist() == [right.get(p, -1) for p in left]
