"""ctxlab.sweep: grids, the local engine (same rows from any worker count), metrics,
recommend, and the ``sweep`` command."""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import ctxlab
from ctxlab.cli_sweep import add_sweep_command, sweep_text
from ctxlab.errors import ConfigError
from ctxlab.recommend import aggregate, pareto_front, ranked, recommend
from ctxlab.measure import request_tokens
from ctxlab.presets import preset
from ctxlab.sweep import MEASURE, METRIC_COLUMNS, PRICES, equal_results, price_for, sweep
from ctxlab.sweep_grid import expand, parse_grid, parse_spec

from conftest import DATASETS, realdata_path

SEEDS = ("neurolink", "probe", "ai-agent", "copilot-legacy", "copilot-fixed", "neuron")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A folder of two logs: 1 + 4 sessions."""
    d = tmp_path_factory.mktemp("small")
    for name in ("coding_session_b", "openai_sessions"):
        shutil.copy(DATASETS / f"{name}.jsonl", d / f"{name}.jsonl")
    return d


GRID = {"preset": ["neurolink", "neuron"], "threshold": [0.5, 0.8],
        "prune.protect_tokens": [10_000, 40_000]}


@pytest.fixture(scope="module")
def serial(small):
    return sweep(small, GRID, workers=1)


# -- grids -------------------------------------------------------------------------------


def test_parse_spec_ranges_include_stop_without_float_drift():
    name, values = parse_spec("threshold=0.6:0.95:0.05")
    assert name == "threshold"
    assert values == [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    assert parse_spec("prune.protect_tokens=10000:30000:10000")[1] == [10_000, 20_000, 30_000]
    assert parse_spec("preset=neurolink, copilot-fixed")[1] == ["neurolink", "copilot-fixed"]
    assert parse_spec("window=100k,none")[1] == [100_000, None]
    assert parse_spec("truncate.keep_tool_pairs=true,false")[1] == [True, False]


@pytest.mark.parametrize("spec, words", [
    ("threshold", "name=a:b:step"), ("bogus=1,2", "names: preset, threshold"),
    ("threshold=0.9:0.6:0.1", "start <= stop"), ("threshold=a:1:0.1", "not a number"),
    ("threshold=0.6:0.95", "write start:stop:step"), ("threshold=0.6..0.9", "start:stop:step"),
    ("prune.protect_tokens=1:2:3:4", "start:stop:step")])
def test_parse_spec_errors_say_what_to_write(spec, words):
    with pytest.raises(ConfigError, match=words):
        parse_spec(spec)


def test_a_text_where_a_ratio_belongs_is_a_config_error_not_a_type_error():
    with pytest.raises(ConfigError, match="threshold must be a ratio"):
        expand({"threshold": ["0.6"]})[0][0].pipeline()
    assert parse_spec("summarize.prefix=Summary: so far")[1] == ["Summary: so far"]


def test_grid_values_may_be_any_iterable_read_once():
    configs, _ = expand({"preset": iter(["neurolink"]), "threshold": map(float, ["0.6", "0.7"])})
    assert [c.pipeline().threshold for c in configs] == [0.6, 0.7]


def test_configurations_the_defaults_make_identical_are_swept_once(small):
    """An estimator spelled out that is the pipeline's own, or a window that the sweep's
    default fills in, asks for the same replay: one configuration, not two counted twice."""
    from ctxlab.presets import preset

    own = preset("probe").estimator
    assert "{" not in own
    df = sweep(small, {"preset": ["probe"], "estimator": [None, own],
                       "window": [None, 100_000]}, window=100_000, workers=1)
    assert df["config"].nunique() == 1 and len(df) == 5
    assert aggregate(df)["sessions"].tolist() == [5]


def test_concatenated_results_keep_a_late_stage_parameter_as_a_key(serial, small):
    other = sweep(small, {"preset": ["neuron"], "threshold": [0.5]}, workers=1)
    both = pd.concat([other, serial], ignore_index=True)   # prune.protect_tokens comes last
    assert both.columns.get_loc("prune.protect_tokens") > both.columns.get_loc("file")
    agg = aggregate(both)
    assert len(agg) == 1 + serial["config"].nunique()
    assert (agg["sessions"] == 5).all()


def test_concatenated_sweeps_that_share_a_configuration_count_its_sessions_once(serial, small):
    """A coarse sweep and a finer one over the same threshold: that configuration's
    totals are its own, not doubled (it fell off the recommendation)."""
    finer = sweep(small, {"preset": ["neurolink"], "threshold": [0.5, 0.6],
                          "prune.protect_tokens": [10_000]}, workers=1)
    both = pd.concat([serial, finer], ignore_index=True)
    agg = aggregate(both)
    assert (agg["sessions"] == 5).all() and len(agg) == serial["config"].nunique() + 1
    alone = aggregate(serial)
    key = ["preset", "threshold", "prune.protect_tokens"]
    merged = agg.merge(alone, on=key, suffixes=("", "_alone"))
    assert (merged["tokens_sent"] == merged["tokens_sent_alone"]).all()
    # the same logs named another way (an absolute path, a trailing separator)
    elsewhere = finer.assign(file=[os.path.join(os.path.dirname(f), ".", os.path.basename(f))
                                   for f in finer["file"]])
    assert not set(elsewhere["file"]) & set(serial["file"])
    assert aggregate(pd.concat([serial, elsewhere], ignore_index=True))["sessions"].eq(5).all()
    # two pipelines that the columns cannot tell apart: an error, not a sum
    changed = finer.assign(tokens_sent=finer["tokens_sent"] + 1)
    with pytest.raises(ConfigError, match="differ in tokens_sent: two pipelines with one "
                                          "name, or sweeps with different prices"):
        aggregate(pd.concat([finer, changed], ignore_index=True))


def test_no_target_and_a_target_at_the_threshold_are_one_configuration():
    configs, _ = expand({"preset": ["neurolink"], "threshold": [0.5], "target": [0.5, None]})
    from ctxlab.sweep_grid import distinct
    assert len(distinct(configs)) == 1


def test_estimator_specs_and_non_finite_ranges_on_the_command_line():
    assert parse_spec("estimator=max:tiktoken:cl100k_base,chars:4,neuron")[1] == [
        "max:tiktoken:cl100k_base,chars:4", "neuron"]
    assert parse_spec("estimator=chars:4;chars:3.6")[1] == ["chars:4", "chars:3.6"]
    for spec in ("threshold=0.5:inf:0.1", "threshold=0.5:0.9:nan"):
        with pytest.raises(ConfigError, match="not a finite number"):
            parse_spec(spec)


def test_a_parameter_declared_optional_takes_none_from_the_grid():
    configs, _ = expand({"preset": ["copilot-fixed"],
                         "carry_forward.min_room": [None, 4_096]})
    rooms = [[s.min_room for s in c.pipeline().enforce if s.name == "carry_forward"]
             for c in configs]
    assert rooms == [[None], [4_096]]
    with pytest.raises(ConfigError, match="takes an integer"):
        expand({"preset": ["neurolink"], "prune.protect_tokens": [None]})[0][0].pipeline()


def test_a_list_parameter_read_back_from_parquet_still_groups(serial, tmp_path):
    df = serial.assign(**{"prune.protected_tools": [("skill",)] * len(serial)})
    df = df[[*serial.columns[:serial.columns.get_loc("file")], "prune.protected_tools",
             *serial.columns[serial.columns.get_loc("file"):]]]
    df.to_parquet(tmp_path / "r.parquet")
    back = pd.read_parquet(tmp_path / "r.parquet")
    assert isinstance(back["prune.protected_tools"].iloc[0], np.ndarray)
    assert len(aggregate(back)) == serial["config"].nunique()


def test_a_whole_number_parameter_stays_whole_beside_presets_it_skips(serial):
    """prune.protect_tokens next to neuron (no prune stage, NA) was 10000.0: the CLI table,
    the CSV and recommend showed floats that --grid then refused."""
    col = serial["prune.protect_tokens"]
    assert str(col.dtype) == "Int64"
    assert set(col.dropna().tolist()) == {10_000, 40_000}
    assert all(type(v) is int for v in col.dropna().tolist())


def test_the_estimator_a_row_shows_can_be_swept_and_replayed_again(serial):
    """A configuration without an estimator shows its pipeline's spec, ``{provider}`` and
    all (neurolink's); given back, in a grid or to `replay`, it was a ConfigError (no
    multiplier for provider '{provider}'): it counts as the pipeline's own."""
    spec = serial.loc[serial["preset"] == "neurolink", "estimator"].iloc[0]
    assert spec == "neurolink:{provider}"
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    grid = {"preset": ["neurolink"], "threshold": [0.5]}
    again = sweep(t, {**grid, "estimator": [spec]}, workers=1, progress=False)
    assert equal_results(again, sweep(t, grid, workers=1, progress=False))
    r = ctxlab.replay(t, "neurolink", window=100_000, estimator=spec)
    pd.testing.assert_frame_equal(r.calls, ctxlab.replay(t, "neurolink", window=100_000).calls)
    assert r.rewind(10).resume(estimator=spec).calls.equals(r.calls)


def test_parse_grid_rejects_a_name_given_twice():
    with pytest.raises(ConfigError, match="given twice"):
        parse_grid(["threshold=0.5", "threshold=0.6"])


def test_expand_orders_combinations_and_skips_a_stage_param_with_a_note():
    configs, stage_cols = expand(GRID)
    assert stage_cols == ["prune.protect_tokens"]
    # neurolink has prune: 2 thresholds x 2 values; neuron has none: 2 thresholds, once each
    assert len(configs) == 6
    cols = [c.columns(stage_cols) for c in configs]
    assert [(c["preset"], c["threshold"], c["prune.protect_tokens"]) for c in cols] == [
        ("neurolink", 0.5, 10_000), ("neurolink", 0.5, 40_000), ("neurolink", 0.8, 10_000),
        ("neurolink", 0.8, 40_000), ("neuron", 0.5, None), ("neuron", 0.8, None)]
    assert cols[0]["note"] is None
    assert "prune.protect_tokens not applied: neuron has no prune stage" in cols[4]["note"]
    assert configs[0].pipeline().stages[0].protect_tokens == 10_000


def test_expand_of_a_list_of_grids_is_their_union_without_duplicates():
    configs, _ = expand([{"preset": ["neurolink"]},
                         {"preset": ["neurolink"], "threshold": [0.8, 0.6]}])
    # neurolink's own threshold is 0.8: the same replay as threshold=0.8, kept once
    assert [c.pipeline().threshold for c in configs] == [0.8, 0.6]
    assert configs[0].fields == ()


@pytest.mark.parametrize("grid, words", [
    ({"treshold": [0.5]}, "unknown grid name 'treshold'; names: preset, threshold"),
    ({"preset": ["nope"]}, "unknown preset 'nope'; presets:"),
    ({"preset": ["neuron"], "prune.protect_tokens": [1]},
     "no preset of the grid has a 'prune' stage; their stages: clear_tool_results, keep_last"),
    ({"prune.protect": [1]}, "stage 'prune' has no parameter 'protect'; its parameters: "),
    ({"threshold": [0.5, 20]}, "threshold must be a ratio"),
    ({"threshold": 0.5}, "give a list of values"), ({"threshold": []}, "has no values"),
    ({"window": ["big"]}, "not a window in tokens")])
def test_expand_errors_name_the_valid_choices(grid, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        expand(grid)


# -- the local engine ----------------------------------------------------------------------


def test_rows_are_configuration_then_session_order_with_every_metric(serial):
    df = serial
    assert len(df) == 6 * 5
    assert df["config"].tolist() == [i for i in range(6) for _ in range(5)]
    sessions = df["session"].iloc[:5].tolist()
    assert sessions[0] == ctxlab.load(DATASETS / "coding_session_b.jsonl").sessions[0]
    assert all(df["session"].iloc[i * 5:(i + 1) * 5].tolist() == sessions for i in range(6))
    assert set(METRIC_COLUMNS) <= set(df.columns)
    assert df["file"].str.endswith("coding_session_b.jsonl").sum() == 6
    assert (df["seconds"] > 0).all()


def test_two_workers_give_the_same_rows_in_the_same_order(small, serial):
    parallel = sweep(small, GRID, workers=2)
    assert equal_results(serial, parallel)
    # and the equality check is not vacuous: the rows differ between configurations
    assert serial.groupby("config")["tokens_sent"].sum().nunique() > 1


def test_one_worker_reads_each_file_once_and_counts_every_replay(tmp_path, monkeypatch,
                                                                 capsys):
    from ctxlab.loaders import registry

    sweep_module = importlib.import_module("ctxlab.sweep")   # ctxlab.sweep is the function

    for i in range(3):      # more logs than a worker keeps loaded, one with 4 sessions
        shutil.copy(DATASETS / "coding_session_b.jsonl", tmp_path / f"a{i}.jsonl")
    shutil.copy(DATASETS / "openai_sessions.jsonl", tmp_path / "b.jsonl")
    assert sweep_module.FILES_KEPT < 4
    reads: list[str] = []
    real_get = registry.get

    def counting_get(name):
        loader = real_get(name)

        class Counting:
            def load(self, path, options):
                reads.append(path.name)
                return loader.load(path, options)
        return Counting()

    monkeypatch.setattr(registry, "get", counting_get)
    bars = []
    real_bar = sweep_module._bar
    monkeypatch.setattr(sweep_module, "_bar", lambda *a: bars.append(real_bar(*a)) or bars[-1])
    df = sweep(tmp_path, {"preset": ["neuron"], "threshold": [0.5, 0.7]}, workers=1,
               progress=True)
    assert sorted(reads) == ["a0.jsonl", "a1.jsonl", "a2.jsonl", "b.jsonl"]
    assert len(df) == 2 * 7 and df["config"].tolist() == [0] * 7 + [1] * 7
    assert bars[0].total == bars[0].n == 14      # b.jsonl's 4 sessions found on the way
    assert "sweep:   0%|          | 0/8" in capsys.readouterr().err
    # the bar never runs past its total: a log's sessions count once it is listed
    seen = []

    class Recording:
        def __init__(self, total, *_):
            self.total, self.n = total, 0

        def update(self, k):
            self.n += k
            seen.append((self.n, self.total))

        def refresh(self):
            pass

        def close(self):
            pass

    monkeypatch.setattr(sweep_module, "_bar", lambda total, *a: Recording(total))
    sweep(tmp_path, {"preset": ["neuron"], "threshold": [0.5, 0.7]}, workers=1)
    assert seen[-1] == (14, 14) and all(n <= total for n, total in seen)
    # two workers: the same rows
    pooled = sweep(tmp_path, {"preset": ["neuron"], "threshold": [0.5, 0.7]}, workers=2)
    assert equal_results(df, pooled)


def test_calls_compacted_apart_from_trigger_firings():
    """``compactions`` counts the calls at which the trigger fired; ``calls_compacted`` the
    calls whose request a stage changed. They part both ways on the bundled session: an
    always-on stage (observation masking) edits requests its trigger never fires at, and
    ai-agent's trigger fires at a call over its limit where only a final turn is forced."""
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    df = sweep(t, {"preset": ["observation-masking", "ai-agent"], "threshold": [0.5]},
               workers=1)
    for _, row in df.iterrows():
        s = ctxlab.replay(t, preset(row["preset"], threshold=0.5)).summary()
        assert (row["compactions"], row["calls_compacted"]) == (s["compactions"],
                                                                  s["calls_compacted"])
    masking, ai_agent = df.iloc[0], df.iloc[1]
    assert masking["compactions"] == 0 < masking["calls_compacted"] == masking["events"]
    assert ai_agent["compactions"] > ai_agent["calls_compacted"] > 0
    # and the totals of a configuration keep both
    agg = aggregate(df).set_index("preset")
    assert agg.loc["observation-masking", "calls_compacted"] == masking["calls_compacted"]


def test_row_metrics_match_the_replay_itself(serial):
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    p = expand(GRID)[0][2].pipeline()  # neurolink at 0.8, protect 10k
    r = ctxlab.replay(t, p)
    s = r.summary()
    row = serial[serial["config"] == 2].iloc[0]
    assert row["session"] == t.sessions[0]
    assert (row["calls"], row["compactions"], row["calls_compacted"], row["overflows"]) == (
        s["calls"], s["compactions"], s["calls_compacted"], s["over_window"])
    # what it sent, counted by the sweep's measure (with neurolink's own: the replay's)
    assert row["tokens_sent"] == int(request_tokens(r, MEASURE).sum()) != s["tokens_sent"]
    assert int(request_tokens(r, r.settings.pipeline.estimator.replace(
        "{provider}", "anthropic")).sum()) == s["tokens_sent"]
    assert row["recall"] == pytest.approx(s["recall"]) and row["missing"] == s["missing"]
    assert row["peak_usage"] == pytest.approx(s["peak_usage"])
    ev = r.events
    assert row["summarizer_input_tokens"] == int(ev["summarizer_input_tokens"].fillna(0).sum())
    # claude-opus at the illustrative price: requests as input, summarizer tokens added
    pin, pout = price_for("claude-opus-4-6")
    expected = (row["tokens_sent"] + row["summarizer_input_tokens"]) * pin / 1e6 \
        + row["summarizer_output_tokens"] * pout / 1e6
    assert row["cost"] == pytest.approx(expected)


def test_prices_can_be_overridden_and_transcripts_swept_in_memory():
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    grid = {"preset": ["neuron"]}
    base = sweep(t, grid, workers=1)
    cheap = sweep([t], grid, workers=1, prices={"gpt-4.1": (1.0, 4.0)})
    assert PRICES["gpt-4.1"] == (2.0, 8.0)
    assert cheap["cost"].to_numpy() == pytest.approx(base["cost"].to_numpy() / 2)
    assert equal_results(base.drop(columns="cost"), cheap.drop(columns="cost"))
    assert len(base) == len(t.sessions)
    assert price_for("mystery-model") == PRICES["default"]
    # Claude 3 models are not priced as their later namesakes or the default
    assert price_for("claude-3-opus-20240229") == (15.0, 75.0)
    assert price_for("claude-3-haiku-20240307") == (0.25, 1.25)
    # a user's key replaces the built-in one whatever its case
    upper = sweep([t], grid, workers=1, prices={"GPT-4.1": (1.0, 4.0)})
    assert upper["cost"].to_numpy() == pytest.approx(cheap["cost"].to_numpy())
    with pytest.raises(ConfigError, match=r"prices\['gemini'\] = 2.0: give a model family"):
        sweep([t], grid, workers=1, prices={"gemini": 2.0})


@pytest.mark.parametrize("model, price", [
    ("claude-opus-4-6", (5.0, 25.0)),                  # not claude-opus's (15, 75)
    ("anthropic/claude-3-haiku-20240307", (0.25, 1.25)),  # aider's names: provider first
    ("openrouter/openai/gpt-4o-mini", (0.15, 0.6)),
    ("us.anthropic.claude-3-haiku-20240307-v1:0", (0.25, 1.25)),  # Bedrock
    ("google/gemini-3-pro-preview", (2.0, 12.0)),
    ("gpt-5-nano", (0.05, 0.4)),
])
def test_price_for_model_names_as_logs_record_them(model, price):
    assert price_for(model) == price


def test_a_users_price_key_may_name_the_provider_as_the_log_does():
    from ctxlab.sweep import price_table

    t = price_table({"anthropic/claude-sonnet-4": (1, 2),
                     "openrouter/openai/gpt-4o-mini": (9, 9)})
    assert price_for("anthropic/claude-sonnet-4-20250514", t) == (1.0, 2.0)
    assert price_for("openrouter/openai/gpt-4o-mini", t) == (9.0, 9.0)


def test_engine_and_source_errors():
    with pytest.raises(ConfigError, match="client= runs a sweep on Dask: pass engine='dask'"):
        sweep(DATASETS, {"preset": ["neuron"]}, client=object())
    with pytest.raises(ConfigError, match="unknown engine 'ray'; engines: local, dask"):
        sweep(DATASETS, {"preset": ["neuron"]}, engine="ray")
    with pytest.raises(ConfigError, match="no such file or folder"):
        sweep(DATASETS / "absent", {"preset": ["neuron"]})
    with pytest.raises(ConfigError, match="workers must be >= 1"):
        sweep(DATASETS, {"preset": ["neuron"]}, workers=0)


def test_a_dataset_sweeps_like_its_folder_reading_only_its_partitions(small, tmp_path,
                                                                     monkeypatch):
    from ctxlab.loaders import corpus_store, registry

    grid = {"preset": ["neuron"], "threshold": [0.5, 0.8]}
    folder = sweep(small, grid, workers=1)
    ds = corpus_store.write_corpus(small, tmp_path / "ds")
    read, loaded = [], []
    real_read, real_get = corpus_store.read_session, registry.get
    monkeypatch.setattr(corpus_store, "read_session",
                        lambda path, report=None: read.append(path) or real_read(path, report))
    monkeypatch.setattr(registry, "get", lambda name: loaded.append(name) or real_get(name))
    serial = sweep(ds, grid, workers=1)
    assert equal_results(folder, serial)  # the same rows, `file` naming the source logs
    # sessions are read one partition each (sessions first, then configurations); no log
    assert read == [str(p) for p in ds.paths] and loaded == []
    assert equal_results(folder, sweep(tmp_path / "ds", grid, workers=2))


def test_a_dataset_sweep_names_the_other_files_of_its_folder_as_the_folder_sweep_does(
        tmp_path):
    """The files of the folder that are not logs, and a log that could not be read, are
    stored in the dataset's manifest only: a sweep of the dataset lists them in its
    ``attrs`` as one of the folder does, instead of leaving them out silently."""
    from ctxlab.loaders import corpus_store

    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(DATASETS / "openai_sessions.jsonl", logs / "good.jsonl")
    (logs / "README.md").write_text("# my runs\n", encoding="utf-8")
    (logs / "cut.json").write_text('[{"role": "user", "content": "hi"},\n{"role": "assis',
                                   encoding="utf-8")
    grid = {"preset": ["neuron"], "threshold": [0.8]}
    folder = sweep(logs, grid, workers=1)
    ds = sweep(corpus_store.write_corpus(logs, tmp_path / "ds"), grid, workers=1)
    assert equal_results(folder, ds)
    assert ds.attrs["not_logs"] == folder.attrs["not_logs"]
    assert [p["path"] for p in ds.attrs["not_logs"]] == [str(logs / "README.md")]
    unread = [r for r in ds.attrs["skipped"] if r["record"] == "log"]
    assert [r["file"] for r in unread] == [str(logs / "cut.json")]
    assert "could not be read" in unread[0]["reason"] and "malformed JSON" in unread[0]["reason"]


def test_an_error_in_a_worker_process_names_the_file_as_it_was_raised(tmp_path):
    """A load error raised in a worker of the process pool (a damaged dataset partition)
    reaches the caller as it was raised: its message starts with the file, not with
    ``<input>: `` before the whole message, and keeps its path and reason."""
    import pickle

    from ctxlab.errors import LoadError
    from ctxlab.loaders import corpus_store

    e = pickle.loads(pickle.dumps(LoadError("malformed JSON", path="a.json", line=3)))
    assert (str(e), e.path, e.line, e.reason) == ("a.json:3: malformed JSON", "a.json", 3,
                                                  "malformed JSON")
    ds = corpus_store.write_corpus(DATASETS / "openai_sessions.jsonl", tmp_path / "ds",
                                   facts=False)
    gone = ds.paths[1]
    gone.unlink()
    with pytest.raises(LoadError) as got:
        sweep(tmp_path / "ds", {"preset": ["neuron"]}, workers=2)
    assert str(got.value).startswith(f"{gone}: not a readable Parquet file")
    assert got.value.path == str(gone)
    assert "is missing or damaged: convert its logs again" in str(got.value)


# -- recommend -----------------------------------------------------------------------------


def _results(rows):
    cols = ["preset", "file", "session", "tokens_sent", "cost", "overflows", "needed",
            "missing", "peak_usage"]
    return pd.DataFrame(rows, columns=cols)


FAKE = _results([
    ("a", "f", "1", 1_000_000, 1.0, 0, 10, 1, 0.5), ("a", "f", "2", 1_000_000, 1.0, 0, 10, 1, 0.9),
    ("b", "f", "1", 3_000_000, 3.0, 0, 10, 0, 0.5), ("b", "f", "2", 3_000_000, 3.0, 0, 10, 0, 0.5),
    ("c", "f", "1", 1_000_000, 1.0, 1, 10, 0, 1.2), ("c", "f", "2", 1_000_000, 1.0, 0, 10, 0, 0.5),
    ("d", "f", "1", 3_000_000, 3.0, 0, 10, 2, 0.5), ("d", "f", "2", 3_000_000, 3.0, 0, 10, 2, 0.5)])


def test_aggregate_pools_recall_over_sessions():
    agg = aggregate(FAKE).set_index("preset")
    assert agg.loc["a", "recall"] == pytest.approx(0.9)
    assert agg.loc["a", "peak_usage"] == 0.9 and agg.loc["c", "overflows"] == 1
    assert agg.loc["b", "recall_per_mtok"] == pytest.approx(1.0 / 6)


def test_recommend_keeps_the_pareto_front_that_meets_the_constraints():
    rec = recommend(FAKE, max_overflows=0)
    # c overflows; d is dominated by a (cheaper and better); a and b are the front
    assert rec["preset"].tolist() == ["a", "b"]
    assert recommend(FAKE)["preset"].tolist() == ["c"]  # c dominates a once overflow is allowed
    assert recommend(FAKE, max_overflows=0, min_recall=0.95)["preset"].tolist() == ["b"]


def test_recommend_on_the_retention_front():
    """``quality="retention"`` weighs artifacts kept through the compactions against cost:
    d keeps every artifact for b's cost, so it replaces b on the front; the order is
    retention per million tokens (a: 0.5 / 2M before d: 1.0 / 6M)."""
    kept = {"a": 5, "b": 6, "c": 9, "d": 10}        # of 10 hidden per session
    df = FAKE.assign(hidden_artifacts=10, retained=FAKE["preset"].map(kept))
    assert recommend(df, max_overflows=0)["preset"].tolist() == ["a", "b"]
    rec = recommend(df, quality="retention", max_overflows=0)
    assert rec["preset"].tolist() == ["a", "d"]
    assert rec["retention"].tolist() == [0.5, 1.0]
    # nothing hidden anywhere: NaN retention counts as nothing lost, the cheapest wins
    none = FAKE.assign(hidden_artifacts=0, retained=0)
    assert recommend(none, quality="retention", max_overflows=0)["preset"].tolist() == ["a"]
    with pytest.raises(ConfigError, match="quality must be one of recall, retention, not 'cost'"):
        recommend(df, quality="cost")
    with pytest.raises(ConfigError, match="no 'retention' column"):
        ranked(aggregate(FAKE), quality="retention")
    text = sweep_text(df, {"max_overflows": 0}, "retention")
    assert "cost/retention Pareto front, best retention per million tokens first" in text


def test_recommend_errors_list_the_closest_configurations():
    with pytest.raises(ConfigError, match=r"(?s)no configuration meets.*closest:\n  preset=a"):
        recommend(FAKE, max_overflows=0, max_cost=5.0, min_recall=0.99)
    with pytest.raises(ConfigError, match="unknown constraint.*min_recal;"):
        recommend(FAKE, min_recal=0.9)


@pytest.mark.parametrize("constraint, value, words", [
    ("min_recall", 99, r"min_recall must be between 0 and 1 \(a ratio: did you mean 0\.99\?\)"),
    ("min_retention", 80, r"min_retention .* did you mean 0\.8\?"),
    ("min_recall", -0.5, r"min_recall must be between 0 and 1 \(a ratio: e\.g\. 0\.98\)"),
    ("min_recall", 1000, r"e\.g\. 0\.98"), ("min_recall", float("nan"), "between 0 and 1")])
def test_a_ratio_constraint_outside_0_to_1_is_refused(constraint, value, words, tmp_path):
    """Recall and retention are ratios, shown as percentages: a percentage given as the
    constraint met nothing, or (min_recall=-1) everything, without a word."""
    with pytest.raises(ConfigError, match=words):
        recommend(FAKE, **{constraint: value})
    # the command refuses it before the sweep, in one line
    with pytest.raises(ConfigError, match=f"bad --require '{constraint}={value}': .*{words}"):
        _run(["sweep", str(DATASETS / "coding_session_b.jsonl"), "--require",
              f"{constraint}={value}", "-o", str(tmp_path / "r.csv")])
    assert not (tmp_path / "r.csv").exists()
    assert len(recommend(FAKE, min_recall=0)) and len(recommend(FAKE, min_recall=1))  # bounds


def test_pareto_front_keeps_ties_and_drops_dominated_points():
    front = pareto_front(np.array([1.0, 1.0, 2.0, 0.5]), np.array([0.9, 0.9, 0.95, 0.1]))
    assert front.tolist() == [True, True, True, True]
    assert pareto_front(np.array([1.0, 1.0]), np.array([0.9, 0.8])).tolist() == [True, False]


# -- the command ---------------------------------------------------------------------------


def _run(argv):
    p = argparse.ArgumentParser(prog="ctxlab")
    add_sweep_command(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


def test_sweep_command_writes_results_and_prints_the_recommendation(tmp_path, capsys):
    out = tmp_path / "r.parquet"
    log = DATASETS / "openai_sessions.jsonl"
    assert _run(["sweep", str(log), "--preset", "neuron,neurolink", "--grid",
                 "threshold=0.7:0.8:0.1", "--workers", "1", "--require", "max_overflows=0",
                 "-o", str(out)]) == 0
    df = pd.read_parquet(out)
    assert len(df) == 4 * 4 and df["preset"].unique().tolist() == ["neuron", "neurolink"]
    text = capsys.readouterr().out
    assert f"wrote {out}: 16 rows (4 configurations x 4 sessions)" in text
    assert "recommended (max_overflows=0" in text
    with pytest.raises(ConfigError, match="bad --require 'recall=1'"):
        _run(["sweep", str(log), "--require", "recall=1", "-o", str(out)])
    with pytest.raises(ConfigError, match="write a .parquet or .csv"):
        _run(["sweep", str(log), "-o", str(tmp_path / "r.xlsx")])
    # --window / --estimator beside a grid of the same name would be unused: refused
    for flag, spec in (("--window", "window=100k,200k"), ("--estimator", "estimator=neuron")):
        with pytest.raises(ConfigError, match=f"give {flag[2:]} with {flag} or --grid"):
            _run(["sweep", str(log), flag, "50k" if flag == "--window" else "chars:4",
                  "--grid", spec, "-o", str(tmp_path / "w.csv")])
    # a log without calls: an error that says so, nothing written
    quiet = tmp_path / "quiet.jsonl"
    quiet.write_text('{"role": "user", "content": "hello"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="nothing to sweep in .*quiet.jsonl: its logs record "
                                          "no LLM call"):
        _run(["sweep", str(quiet), "-o", str(tmp_path / "q.csv")])
    assert not (tmp_path / "q.csv").exists()


def test_sweep_command_says_the_configurations_notes_once_below_the_table(tmp_path, capsys):
    """The table has no note column: rows of a fixed-limit preset at two windows came out
    alike and nothing said why."""
    out = tmp_path / "r.parquet"
    assert _run(["sweep", str(DATASETS / "coding_session_b.jsonl"), "--preset", "neuron",
                 "--grid", "window=32k,64k", "--grid", "threshold=0.7,0.8", "--workers", "1",
                 "-o", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"ctxlab: note: neuron triggers at a fixed 100,000 tokens whatever the "
                   f"window: {w} counts overflows only" for w in ("32,000", "64,000")]


def test_sweep_command_shows_configurations_alike_in_every_number_as_one_row(tmp_path, capsys):
    """copilot-fixed triggers at its own limit: its thresholds tie, and the recommendation
    listed each as a row of the same numbers. recommend() still returns each."""
    out = tmp_path / "r.parquet"
    assert _run(["sweep", str(DATASETS / "coding_session_b.jsonl"), "--preset",
                 "copilot-fixed", "--grid", "threshold=0.6,0.7,0.8", "--workers", "1",
                 "--require", "max_overflows=0", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    table = text.split("\nrecommended (")[1].splitlines()[1:]
    assert len(table) == 2 and "copilot-fixed 0.6–0.8 (3 alike) 0.6–0.8 " in table[1]
    assert len(text.split("\nrecommended (")[0].splitlines()) == 2 + 1 + 3   # all listed above
    assert len(recommend(pd.read_parquet(out), max_overflows=0)) == 3


# -- must show: on datasets/, the recommendation beats every seed preset -------------------


@pytest.mark.slow
def test_recommendation_on_datasets_has_no_overflow_and_beats_every_seed_per_token():
    """Recall per token = pooled recall / million tokens sent, over all 7 sessions."""
    grid = [{"preset": list(SEEDS)},  # each seed at its own threshold
            {"preset": ["copilot-fixed", "neuron"], "threshold": [0.5]}]
    results = sweep(DATASETS, grid, workers=2)
    assert results["session"].nunique() == 7
    best = recommend(results, max_overflows=0).iloc[0]
    assert best["overflows"] == 0
    seeds = aggregate(results).iloc[:len(SEEDS)]
    assert seeds["preset"].tolist() == list(SEEDS)
    assert (best["recall_per_mtok"] > seeds["recall_per_mtok"]).all(), (
        best.to_dict(), seeds[["preset", "recall_per_mtok"]].to_string())


def test_skipped_lines_print_a_line_number_whole_beside_a_record_without_one():
    """Records with and without a line number (a log that could not be read at all) in
    one frame: the numbers are floats there, and print as whole numbers."""
    from ctxlab.cli import skipped_lines

    sk = pd.DataFrame([{"file": "a.jsonl", "line": 291, "where": "line 291", "reason": "cut"},
                       {"file": "b.json", "line": None, "where": "file", "reason": "bad"}])
    assert skipped_lines(sk, "") == ["  skipped a.jsonl:291: cut", "  skipped b.json (file): bad"]


def test_a_session_in_two_files_is_named_in_the_results_and_by_the_cli(tmp_path, capsys):
    """A log copied under another name was swept twice, weighing twice in the totals
    recommend compares, and nothing said so."""
    from ctxlab.cli import main

    for name in ("coding_session.jsonl", "copy_of_it.jsonl"):
        shutil.copy(DATASETS / "coding_session.jsonl", tmp_path / name)
    shutil.copy(DATASETS / "coding_session_b.jsonl", tmp_path / "other.jsonl")
    df = sweep(tmp_path, {"preset": ["probe"]}, workers=1, progress=False)
    assert len(df) == 3
    (rep,) = df.attrs["sessions_in_several_files"]
    assert [Path(f).name for f in rep["files"]] == ["coding_session.jsonl", "copy_of_it.jsonl"]
    assert main(["sweep", str(tmp_path), "--preset", "probe", "--workers", "1",
                 "-o", str(tmp_path / "r.csv")]) == 0
    err = capsys.readouterr().err
    assert f"session {rep['session']} is in 2 files" in err and "counts in the totals" in err


def test_a_folders_sub_agent_logs_are_named_unless_swept_with_sidechains(tmp_path, capsys):
    """A sweep of a Claude Code folder left its sub-agents' logs out without a word
    (ctxlab info lists them); it now names them, and --sidechains sweeps them."""
    from ctxlab.cli import main

    src = realdata_path("claude_code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl")
    shutil.copy(src, tmp_path / src.name)
    shutil.copytree(src.with_suffix(""), tmp_path / src.stem)
    df = sweep(tmp_path, {"preset": ["probe"]}, workers=1, progress=False)
    agents = df.attrs["sub_agent_files"]
    assert len(agents) == 2 and all("sub-agent of" in a["note"] for a in agents)
    out = tmp_path / "r.csv"
    assert main(["sweep", str(tmp_path), "--preset", "probe", "--workers", "1",
                 "-o", str(out)]) == 0
    assert "2 sub-agent logs of" in capsys.readouterr().err
    assert main(["sweep", str(tmp_path), "--preset", "probe", "--workers", "1", "--sidechains",
                 "-o", str(out)]) == 0
    assert "sub-agent log" not in capsys.readouterr().err
    assert pd.read_csv(out)["session"].nunique() > df["session"].nunique()
    # a dataset of the folder names them too, unless written with them
    from ctxlab.loaders.corpus_store import write_corpus

    for sidechains, named in ((False, 2), (True, 0)):
        data = tmp_path.parent / f"{tmp_path.name}-data-{sidechains}"
        write_corpus(tmp_path, data, sidechains=sidechains)
        got = sweep(data, {"preset": ["probe"]}, workers=1, progress=False)
        assert len(got.attrs["sub_agent_files"]) == named
