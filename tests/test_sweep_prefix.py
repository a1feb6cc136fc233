"""Sweeps share the beginning of replays that differ only in threshold: every replay equals
the one made from the start, on generated, bundled and real logs."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

import ctxlab
import ctxlab.sweep_prefix as sweep_prefix
from ctxlab import datasets
from ctxlab.pipeline import Pipeline, stages_from
from ctxlab.replay import replay
from ctxlab.stages.base import Stage
from ctxlab.sweep import equal_results, sweep
from ctxlab.sweep_grid import Config
from ctxlab.sweep_prefix import MIN_SHARED, replays
from tests.conftest import DATASETS, REALDATA

THRESHOLDS = (0.5, 0.6, 0.75, 0.8, 0.9, 1.0)


def _assert_same(a: ctxlab.Replay, b: ctxlab.Replay, what: str) -> None:
    pd.testing.assert_frame_equal(a.calls, b.calls, obj=f"{what} calls")
    pd.testing.assert_frame_equal(a.events.drop(columns="ms", errors="ignore"),
                                  b.events.drop(columns="ms", errors="ignore"),
                                  obj=f"{what} events")
    pd.testing.assert_frame_equal(a.ledger, b.ledger, obj=f"{what} ledger")
    pd.testing.assert_frame_equal(a.transcript.frame, b.transcript.frame, obj=f"{what} frame")
    pd.testing.assert_frame_equal(a.transcript.events, b.transcript.events,
                                  obj=f"{what} transcript events")


def _check(t: ctxlab.Transcript, configs: list[Config], monkeypatch) -> int:
    """Every shared replay equals its replay from the start; returns how many were
    continued from another."""
    continued = []
    real = sweep_prefix._continued

    def spy(previous, p):
        r = real(previous, p)
        continued.append(r is not None)
        return r

    monkeypatch.setattr(sweep_prefix, "_continued", spy)
    seen = set()
    for i, config, r, _ in replays(t, list(enumerate(configs))):
        seen.add(i)
        alone = replay(t, config.pipeline(), window=config.window, estimator=config.estimator)
        _assert_same(r, alone, f"{config.preset} {dict(config.fields)}")
    assert seen == set(range(len(configs)))
    return sum(continued)


def _grid(presets, thresholds=THRESHOLDS, window=None, targets=(None,)) -> list[Config]:
    return [Config(name, fields=(("threshold", thr),) + ((("target", tg),) if tg else ()),
                   window=window)
            for name in presets for thr in thresholds for tg in targets
            if tg is None or tg <= thr]


def test_generated_sessions_share_and_equal_replays_from_the_start(monkeypatch, tmp_path):
    s = datasets.generate_session("coding", 3, calls=250, compact_at=None)
    t = ctxlab.load(datasets.write_claude_code(s, tmp_path / "g.jsonl"))
    configs = _grid(["observation-masking", "ai-agent", "neurolink", "copilot-fixed"],
                    window=120_000, targets=(None, 0.5))
    assert _check(t, configs, monkeypatch) > 0


@pytest.mark.parametrize("name", ["coding_session.jsonl", "coding_session_b.jsonl"])
def test_bundled_logs_share_and_equal_replays_from_the_start(name, monkeypatch):
    t = ctxlab.load(DATASETS / name)
    configs = _grid(["observation-masking", "neuron", "claude-code", "copilot-legacy", "probe"],
                    window=100_000)
    assert _check(t, configs, monkeypatch) > 0


REAL = ["claude_code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
        "openhands/basic_gui_mode.json"]


@pytest.mark.parametrize("rel", REAL)
def test_real_logs_share_and_equal_replays_from_the_start(rel, monkeypatch):
    path = REALDATA / rel
    if not path.exists():
        pytest.skip(f"real transcripts not available: {path} is absent")
    t = ctxlab.load(path)
    t = t.session(t.sessions[0])
    configs = _grid(["observation-masking", "neurolink", "claude-code", "ai-agent"],
                    window=32_000)
    _check(t, configs, monkeypatch)


def test_a_shared_configuration_that_never_compacts_has_a_walks_empty_frames(monkeypatch):
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    t = t.session(t.sessions[0])
    configs = _grid(["neuron"], thresholds=(0.2, 0.5), window=20_000)
    assert _check(t, configs, monkeypatch) == 1


def test_a_sweep_gives_the_same_rows_with_and_without_sharing(monkeypatch):
    grid = {"preset": ["observation-masking", "probe", "neuron"],
            "threshold": [0.6, 0.8, 1.0], "window": [100_000]}
    logs = [ctxlab.load(DATASETS / n) for n in ("coding_session.jsonl", "coding_session_b.jsonl")]
    shared = sweep(logs, grid, workers=1, progress=False)
    monkeypatch.setattr(sweep_prefix, "MIN_SHARED", 2.0)     # nothing is worth sharing
    alone = sweep(logs, grid, workers=1, progress=False)
    assert equal_results(shared, alone)
    assert len(shared) == 18


def test_groups_gather_a_presets_thresholds_whatever_the_grid_order(monkeypatch):
    from ctxlab.sweep_grid import expand
    from ctxlab.sweep_prefix import shared_groups

    configs, _ = expand({"threshold": [0.6, 0.8], "preset": ["probe", "neuron"]})
    assert [c.pipeline().name for c in configs] == ["probe", "neuron", "probe", "neuron"]
    assert shared_groups(configs) == [[0, 2], [1, 3]]
    # one session on two workers: the configurations are cut in runs, a group in one run
    import importlib
    sweep_module = importlib.import_module("ctxlab.sweep")  # `ctxlab.sweep` is the function
    tasks = []
    monkeypatch.setattr(sweep_module, "_run_all",
                        lambda tasks_, *a, **k: tasks.extend(tasks_) or {})
    sweep_module._run_local([(sweep_module.Source(path="x"), ["s"])], [], configs, [], {},
                            workers=2, progress=False)
    assert [[c.pipeline().name for _, c in units] for units, _, _ in tasks] == \
        [["probe", "probe"], ["neuron", "neuron"]]


def test_what_decides_sharing():
    from ctxlab.presets import preset
    from ctxlab.sweep_prefix import _shareable

    base = preset("observation-masking")
    a, b = Config("observation-masking", fields=(("threshold", 0.6),)), \
        Config("observation-masking", fields=(("threshold", 0.9), ("target", 0.5)))
    assert _shareable(a, a.pipeline()) == _shareable(b, b.pipeline()) is not None
    assert _shareable(dataclasses.replace(a, window=1000), a.pipeline()) != \
        _shareable(a, a.pipeline())
    # a stage that reads the target runs before the first compaction: nothing shared
    summarizing = dataclasses.replace(base, always=stages_from(["summarize"]))
    assert _shareable(Config(summarizing), summarizing) is None

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Outside(Stage):                      # not a built-in stage: not known to ignore it
        name = "outside"

        def plan(self, view):
            return None

    outside = Pipeline(name="x", always=(Outside(),), threshold=0.8)
    assert _shareable(Config(outside), outside) is None
    assert 0 < MIN_SHARED < 1
