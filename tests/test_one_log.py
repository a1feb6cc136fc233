"""Functions of one log given a folder's logs (a `Corpus`) or a path say what they take."""

from __future__ import annotations

import shutil

import pytest

import ctxlab
from ctxlab.errors import ConfigError
from ctxlab.pipeline import compact_all


@pytest.fixture(scope="module")
def corpus():
    return ctxlab.load_dir("datasets")


@pytest.mark.parametrize("call", [
    lambda c: ctxlab.replay(c, "neurolink"),
    lambda c: ctxlab.compact(c, "neurolink"),
    lambda c: compact_all(c, "neurolink"),
    lambda c: ctxlab.fidelity_df(c, None),
], ids=["replay", "compact", "compact_all", "fidelity_df"])
def test_a_corpus_is_refused_with_the_way_to_go_over_it(corpus, call):
    """They raised AttributeError ('Corpus' object has no attribute 'rewind_recorded')."""
    with pytest.raises(ConfigError, match=rf"holds {len(corpus)} logs: go over them .*"
                                          r"ctxlab\.sweep\(corpus, grid\)"):
        call(corpus)


def test_a_path_is_refused_naming_ctxlab_load():
    with pytest.raises(ConfigError, match=r"replay\(\) takes one log, a Transcript "
                                          r"\(ctxlab\.load\(path\)\), not a str"):
        ctxlab.replay("datasets/coding_session.jsonl", "neurolink")


def test_every_log_of_the_corpus_replays_as_the_message_says(corpus):
    got = [ctxlab.replay(t, "neurolink") for t in corpus]
    assert len(got) == len(corpus) and all(len(r.calls) for r in got)


def test_a_corpus_of_one_log_is_counted_in_the_singular(tmp_path):
    """The message said 'this Corpus holds 1 logs' (ctxlab.wording's rule: plural but for one)."""
    shutil.copy("datasets/coding_session.jsonl", tmp_path)
    one = ctxlab.load_dir(tmp_path)
    assert len(one) == 1
    with pytest.raises(ConfigError, match=r"this Corpus holds 1 log: go over them"):
        ctxlab.replay(one, "neurolink")
