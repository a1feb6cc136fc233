"""Folders of logs (load_dir), discover(), the CLI, and the Parquet round trip."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

import ctxlab
from ctxlab import datasets
from ctxlab.cli import main
from ctxlab.loaders.parquet import save_parquet

from conftest import DATASETS, REALDATA, realdata_path


def test_load_dir_on_datasets_lists_every_file():
    c = ctxlab.load_dir(DATASETS)
    files = c.files.set_index("path")
    assert files.loc[str(DATASETS / "README.md"), "status"] == "not-a-log"
    assert len(c) == len(datasets.names())
    frame = c.frame
    assert frame["session"].nunique() >= len(c)
    assert len(c.calls) == sum(len(t.calls) for t in c)
    assert c.load_report.skipped.empty


def test_load_dir_keeps_subagent_files_with_their_session():
    root = REALDATA / "claude_code" / "spotter"
    if not root.is_dir():
        pytest.skip(f"real transcripts not available: {root} is absent")
    c = ctxlab.load_dir(root)
    part_of = c.files[c.files["status"] == "part-of"]
    assert len(part_of) == 6 and part_of["path"].str.contains("/subagents/").all()
    assert len(c) == 3


def test_load_dir_rejects_a_file(tmp_path: Path):
    p = tmp_path / "a.jsonl"
    p.write_text("{}\n")
    with pytest.raises(ctxlab.LoadError, match="not a directory"):
        ctxlab.load_dir(p)


def test_discover_finds_logs_in_default_locations(tmp_path: Path):
    src = datasets.path("coding_session_b")
    proj = tmp_path / ".claude" / "projects" / "-home-me-app"
    proj.mkdir(parents=True)
    shutil.copy(src, proj / "abc.jsonl")
    codex = tmp_path / ".codex" / "sessions" / "2026" / "01" / "02"
    codex.mkdir(parents=True)
    (codex / "rollout-2026-01-02T10-00-00-x.jsonl").write_text("{}\n")
    (tmp_path / ".gemini" / "tmp" / "h" / "chats").mkdir(parents=True)
    found = ctxlab.discover(home=tmp_path)
    assert sorted(found["format"]) == ["claude_code", "codex"]
    assert ctxlab.discover(home=tmp_path / "empty").empty


def test_parquet_round_trip_is_exact(tmp_path: Path):
    t = ctxlab.load(datasets.path("coding_session"))
    out = save_parquet(t, tmp_path / "t.parquet")
    back = ctxlab.load(out)
    pd.testing.assert_frame_equal(back.frame, t.frame)
    pd.testing.assert_frame_equal(back.calls, t.calls)
    pd.testing.assert_frame_equal(back.events, t.events)
    pd.testing.assert_frame_equal(back.load_report.records, t.load_report.records)
    assert dict(back.meta) == dict(t.meta)
    pd.testing.assert_frame_equal(back.rewind_recorded().frame, t.rewind_recorded().frame)


def test_foreign_parquet_is_refused(tmp_path: Path):
    p = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(p)
    with pytest.raises(ctxlab.LoadError, match="without ctxlab metadata"):
        ctxlab.load(p)


def test_cli_info_on_a_file(capsys: pytest.CaptureFixture[str]):
    assert main(["info", str(datasets.path("coding_session"))]) == 0
    out = capsys.readouterr().out
    t = ctxlab.load(datasets.path("coding_session"))
    assert "format:      claude_code" in out
    assert f"calls:       {len(t.calls):,}" in out
    assert "recorded compactions: 1" in out
    assert "load report:" in out and "parts by role and kind" in out


@pytest.mark.parametrize(("rel", "line"), [
    ("swe_agent/pydicom__pydicom-1458.traj",
     "recorded:    122,612 input, 1,369 output over 12 API calls: the run's totals"),
    ("copilot_cli/vibecodingtracker/copilot.jsonl",
     "recorded:    186,809 input (cache read 151,738, cache write 0), 2,848 output over 6 "
     "requests of claude-sonnet-4.6: the last session's totals"),
])
def test_cli_info_shows_the_usage_a_log_records_per_run_only(
        rel: str, line: str, capsys: pytest.CaptureFixture[str]):
    """SWE-agent records ``model_stats`` (tokens_sent 122,612 over api_calls 12) and Copilot
    CLI its shutdown metrics (inputTokens 186,809 over 6 requests), not per-call usage:
    info printed ``input_total: sum -, max -`` and nothing else, as if no usage was
    recorded at all."""
    assert main(["info", str(realdata_path(rel))]) == 0
    out = capsys.readouterr().out
    assert "input_total: sum -, max -" in out and line in out


def test_cli_info_on_a_folder(capsys: pytest.CaptureFixture[str]):
    assert main(["info", str(DATASETS)]) == 0
    out = capsys.readouterr().out
    assert f"{len(datasets.names())} logs" in out
    for name in datasets.names():
        sid = ctxlab.load(datasets.path(name)).sessions[0]
        assert sid in out


def test_cli_info_on_a_corpus_dataset_describes_it(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]):
    from ctxlab.loaders.corpus_store import write_corpus

    write_corpus(datasets.path("coding_session"), tmp_path / "corpus")
    assert main(["info", str(tmp_path / "corpus")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("corpus dataset: 1 session from 1 log (")
    assert ctxlab.load(datasets.path("coding_session")).sessions[0] in out


def test_cli_convert_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "s.parquet"
    assert main(["convert", str(datasets.path("openai_sessions")), "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    a, b = ctxlab.load(datasets.path("openai_sessions")), ctxlab.load(out)
    pd.testing.assert_frame_equal(a.frame, b.frame)


def test_a_reader_that_stops_early_is_no_error():
    """`ctxlab info log | head -1`: the pipe closes before ctxlab has written everything.
    That is no error (it printed "ctxlab: error: Broken pipe" and exited 2): exit 141, as
    a shell reports such a command, and nothing on stderr."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "ctxlab", "info",
                             str(DATASETS / "coding_session.jsonl")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=Path(__file__).resolve().parents[1])
    proc.stdout.close()             # the reader is gone before the first line
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait() == 141 and err == ""


def test_replay_says_which_window_each_model_got(capsys: pytest.CaptureFixture[str]):
    """Without --window the header said only "each call's model's": it names them, and
    which are a default (the codex log's aide-gpt-5 got 128,000 without a word)."""
    assert main(["replay", str(DATASETS / "coding_session.jsonl")]) == 0
    assert ("window each call's model's: claude-opus-4-6 200,000 (anthropic's default))"
            in capsys.readouterr().out)
    assert main(["replay", str(DATASETS / "openai_sessions.jsonl"), "--window", "64k"]) == 0
    assert "window 64,000)" in capsys.readouterr().out
    # a call that names no model has the window of the model named before it
    import dataclasses

    from ctxlab.cli import _model_windows
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    calls = t.calls.copy()
    calls.loc[0, "model"] = pd.NA
    r = ctxlab.replay(dataclasses.replace(t, calls=calls), "neurolink")
    assert _model_windows(r.base, r.calls) == \
        "each call's model's: claude-opus-4-6 200,000 (anthropic's default)"


def test_cli_errors_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    p = tmp_path / "bad.txt"
    p.write_text("hello\n")
    assert main(["info", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxlab: error: ") and "tried:" in err
    # a negative window is a window argparse took for an option ("expected one argument")
    log = str(datasets.path("coding_session_b"))
    assert main(["replay", log, "--window", "-5k"]) == 2
    assert "ctxlab: error: bad --window '-5k'" in capsys.readouterr().err


def test_cli_strict_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    src = datasets.path("coding_session_b").read_text(encoding="utf-8").splitlines()
    src.insert(3, "{not json")
    p = tmp_path / "broken.jsonl"
    p.write_text("\n".join(src) + "\n", encoding="utf-8")
    assert main(["info", str(p), "--format", "claude_code"]) == 0
    assert "skipped " + f"{p}:4" in capsys.readouterr().out
    assert main(["info", str(p), "--format", "claude_code", "--strict"]) == 2
    assert f"{p}:4" in capsys.readouterr().err


def test_cli_estimators_prints_both_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cal = tmp_path / "cal.json"
    assert main(["estimators", str(datasets.path("coding_session_b")), "-e", "chars:4",
                 "--reference", "chars:3", "--calibrate", str(cal)]) == 0
    out = capsys.readouterr().out
    assert "per part against chars:3" in out and "per call against reported input_total" in out
    assert cal.exists() and f"calibrated:{cal}" in out
    assert main(["estimators", str(datasets.path("coding_session_b")), "-e",
                 f"calibrated:{cal}", "--reference", "chars:3"]) == 0


def test_cli_estimators_names_a_fitted_calibration_by_its_file_and_keeps_the_order_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """The fitted estimator was shown as calibrated(reported, *) beside the same one read
    from a file as calibrated:FILE; the per-part table sorted the estimators by name."""
    log = str(datasets.path("coding_session_b"))
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    assert main(["estimators", log, "-e", "chars:4", "--calibrate", str(old)]) == 0
    capsys.readouterr()
    assert main(["estimators", log, "-e", "neuron", "-e", f"calibrated:{old}", "-e", "chars:4",
                 "--calibrate", str(new)]) == 0
    out = capsys.readouterr().out
    assert "calibrated(" not in out
    per_part, per_call = out.split("\nper part against ")[1].split("\nper call against ")
    given = ["neuron", f"calibrated:{old}", "chars:4", f"calibrated:{new}"]
    for table in (per_part, per_call):
        names = [line.split()[0] for line in table.splitlines()[2:] if line.strip()]
        assert list(dict.fromkeys(names)) == given, table
    assert [line.split()[0] for line in per_part.splitlines() if " all " in line] == given


def test_cli_estimators_says_when_its_reference_is_not_an_exact_tokenizer(
        capsys: pytest.CaptureFixture[str]):
    """--reference takes any estimator (a heuristic is quick to compare with), but only an
    exact tokenizer's counts are the truth the help promised: the table says which."""
    log = str(datasets.path("coding_session_b"))
    assert main(["estimators", log, "-e", "chars:4", "--reference", "chars:3"]) == 0
    assert "per part against chars:3 (not an exact tokenizer, so difference % rather than " \
        "error: estimate - reference):" in capsys.readouterr().out
    assert main(["estimators", log, "-e", "chars:4"]) == 0
    assert "per part against tiktoken:o200k_base (error %: estimate - reference):" in \
        capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["estimators", "--help"])
    assert "another estimator gives differences" in " ".join(capsys.readouterr().out.split())


def test_cli_estimators_list_and_errors(capsys: pytest.CaptureFixture[str]):
    assert main(["estimators", "--list"]) == 0
    assert "neurolink" in capsys.readouterr().out
    assert main(["estimators", str(datasets.path("coding_session_b")), "-e", "bogus"]) == 2
    err = capsys.readouterr().err
    assert "unknown estimator 'bogus'" in err and "chars" in err


def test_cli_refuses_a_format_for_a_folder_and_compares_one_call_with_usage(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """``--format`` forces one file's loader: with a folder it is an error, not ignored.
    A log with reported usage on one call gets its per-call comparison (the 3 calls
    calibration needs are not needed there); inputs reported as 0 are no usage, and
    calibrating on them is a one-line error."""
    import json

    def conversation(cid: str, prompt_tokens: int) -> dict:
        return {"id": cid, "model": "gpt-4o", "messages": [
            {"role": "user", "content": "Hello there " * 10},
            {"role": "assistant", "content": "Hi.",
             "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 3,
                       "total_tokens": prompt_tokens + 3}}]}

    one = tmp_path / "logs" / "one.jsonl"
    one.parent.mkdir()
    one.write_text(json.dumps(conversation("a", 40)) + "\n", encoding="utf-8")
    for command in (["info"], ["estimators", "-e", "chars:4"]):
        assert main([*command, str(one.parent), "--format", "gemini"]) == 2
        assert "is a folder" in capsys.readouterr().err
    assert main(["estimators", str(one), "-e", "chars:4"]) == 0
    out = capsys.readouterr().out
    assert "per call against reported input_total" in out and "no reported usage" not in out
    zero = tmp_path / "zero.jsonl"
    zero.write_text("".join(json.dumps(conversation(c, 0)) + "\n" for c in "abc"),
                    encoding="utf-8")
    assert main(["estimators", str(zero), "-e", "chars:4"]) == 0
    assert "no reported usage" in capsys.readouterr().out
    assert main(["estimators", str(zero), "-e", "chars:4", "--calibrate",
                 str(tmp_path / "cal.json")]) == 2
    assert "input_total above 0" in capsys.readouterr().err
    # the shape tokenizer, not reported usage (it failed on the zeros)
    assert ctxlab.calibrate(ctxlab.load(zero)).calibration.reference != "reported"


def test_a_replay_with_no_needed_fact_says_so_rather_than_nan(tmp_path: Path):
    import json

    from ctxlab.cli import summary_lines

    log = tmp_path / "one.jsonl"
    log.write_text(json.dumps({"id": "a", "model": "gpt-4o", "messages": [
        {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": "Hi.",
         "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}}]}) + "\n",
        encoding="utf-8")
    r = ctxlab.replay(ctxlab.load(log), "neuron")
    assert r.summary()["recall"] != r.summary()["recall"]        # NaN: nothing needed
    lines = summary_lines(r)
    assert any(line.split() == ["recall", "–"] for line in lines)
    assert not any("nan" in line for line in lines)


def test_no_command_writes_over_its_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """``-o`` naming the input itself (no suffix, a .parquet input, the same folder) is a
    one-line error before any work, and the input is left as it was."""
    import hashlib

    log = tmp_path / "session"
    shutil.copy(datasets.path("coding_session_b"), log)
    digest = hashlib.sha256(log.read_bytes()).hexdigest()
    for argv in (["convert", str(log), "-o", str(log)],
                 ["report", str(log), "--preset", "neuron", "-o", str(log)],
                 ["estimators", str(log), "-e", "chars:4", "--calibrate", str(log)],
                 ["convert", str(tmp_path), "-o", str(tmp_path)]):
        assert main(argv) == 2, argv
        assert "never writes over its input" in capsys.readouterr().err
    assert hashlib.sha256(log.read_bytes()).hexdigest() == digest
    pq = tmp_path / "s.parquet"
    assert main(["convert", str(log), "--format", "claude_code", "-o", str(pq)]) == 0
    before = pq.read_bytes()
    assert main(["convert", str(pq), "-o", str(pq)]) == 2 and pq.read_bytes() == before


def test_a_dataset_is_not_written_inside_the_folder_it_converts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """convert logs/ -o logs/corpus/ was allowed: a later info of logs/ listed the
    dataset's files as 14 entries that are not logs."""
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(datasets.path("coding_session_b"), logs / "a.jsonl")
    assert main(["convert", str(logs), "-o", str(logs / "corpus")]) == 2
    assert "is inside" in capsys.readouterr().err and not (logs / "corpus").exists()
    assert main(["convert", str(logs), "-o", str(tmp_path / "corpus")]) == 0


def test_hidden_files_are_logs_too_and_hidden_folders_are_listed(tmp_path: Path):
    """Aider writes .aider.chat.history.md: a hidden file is a candidate like any other;
    a hidden folder (.git) is listed as not searched rather than left out silently."""
    shutil.copy(DATASETS / "coding_session_b.jsonl", tmp_path / ".session.jsonl")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    c = ctxlab.load_dir(tmp_path)
    files = c.files.set_index("path")
    assert files.loc[str(tmp_path / ".session.jsonl"), "status"] == "log"
    assert files.loc[str(tmp_path / ".git"), "status"] == "not-a-log"
    assert "hidden folder" in files.loc[str(tmp_path / ".git"), "note"]
    assert str(tmp_path / ".git" / "HEAD") not in files.index
    assert len(c) == 1


def test_no_command_writes_over_a_file_it_reads_in_a_folder(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]):
    """A log inside a folder the command reads, any file of a corpus dataset it reads, and
    a folder holding the input are inputs too (a calibration replaced a log it had just
    read; a sweep wrote over a dataset's partition; convert replaced the dataset that held
    its input). A new file beside them is fine."""
    import hashlib

    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("coding_session_b", "openai_sessions"):
        shutil.copy(datasets.path(name), logs / f"{name}.jsonl")
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in logs.iterdir()}
    corpus = tmp_path / "corpus"
    assert main(["convert", str(logs), "-o", str(corpus)]) == 0
    part = next(corpus.rglob("*.parquet"))
    part_bytes = part.read_bytes()
    capsys.readouterr()
    for argv, words in (
            (["estimators", str(logs), "-e", "chars:4", "--calibrate",
              str(logs / "coding_session_b.jsonl")], "one of the files the command reads"),
            (["sweep", str(corpus), "--preset", "neuron", "--workers", "1", "-o", str(part)],
             "one of the files the command reads"),
            (["convert", str(part), "-o", str(corpus)], "holds the input")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert words in err and "never writes over its input" in err or "holds the input" in err
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in logs.iterdir()} == before
    assert part.read_bytes() == part_bytes and (corpus / "_ctxlab_corpus.json").is_file()
    out = logs / "results.csv"                 # a new file beside the logs: written
    assert main(["sweep", str(logs), "--preset", "neuron", "--workers", "1", "-o",
                 str(out)]) == 0 and out.is_file()


def test_one_unreadable_log_does_not_stop_a_folder(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]):
    """A truncated JSON document beside a good log: info, estimators and sweep go on with
    the good one and name the bad one (file:line, why), as convert does; --strict stops."""
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(datasets.path("coding_session_b"), logs / "good.jsonl")
    (logs / "cut.json").write_text('[{"role": "user", "content": "hi"},\n{"role": "assis',
                                   encoding="utf-8")
    corpus = ctxlab.load_dir(logs)
    assert len(list(corpus)) == 1
    row = corpus.files.set_index("path").loc[str(logs / "cut.json")]
    assert row["status"] == "unreadable" and "cut.json:2: malformed JSON" in row["note"]
    assert main(["info", str(logs)]) == 0
    out = capsys.readouterr().out
    assert "1 unreadable" in out and "unreadable: " in out and "f2a5cd4f" in out
    assert main(["sweep", str(logs), "--preset", "neuron", "--workers", "1", "-o",
                 str(tmp_path / "r.csv")]) == 0
    err = capsys.readouterr().err
    assert "cut.json:2: the log could not be read, so none of it was replayed" in err
    assert len(pd.read_csv(tmp_path / "r.csv")) == 1
    assert main(["info", str(logs), "--strict"]) == 2
    assert "cut.json:2: malformed JSON" in capsys.readouterr().err


def test_small_command_line_promises(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """info on an empty folder exits 2 (as the README says); -o ending in a separator is a
    folder, not a file name; the sweep header counts a session of each log apart; a
    converted log in a folder is named as such."""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["info", str(empty)]) == 2
    assert "an empty folder" in capsys.readouterr().err
    log = datasets.path("coding_session_b")
    assert main(["report", str(log), "--preset", "neuron", "-o", str(tmp_path / "new") + "/"]) \
        == 2
    assert "names a folder; give a file name" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    two = tmp_path / "two"
    two.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        shutil.copy(log, two / name)
    assert main(["sweep", str(two), "--preset", "neuron", "--workers", "1", "-o",
                 str(tmp_path / "r.csv")]) == 0
    assert "2 rows (1 configuration x 2 sessions)" in capsys.readouterr().out
    assert main(["convert", str(two / "a.jsonl"), "-o", str(two / "a.parquet")]) == 0
    files = ctxlab.load_dir(two).files.set_index("path")
    assert "a log converted by ctxlab convert loads on its own" in \
        files.loc[str(two / "a.parquet"), "note"]


def test_a_linked_log_in_an_input_folder_is_an_input_and_results_may_be_written_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A folder reads a symlinked log under the link's name: writing to the link would
    replace the log it points to. A sweep's .parquet results beside the logs are not
    read (a folder does not search .parquet files): the sweep may write them again. A
    folder of unreadable logs says why there is nothing to sweep."""
    import hashlib

    ext = tmp_path / "ext"
    ext.mkdir()
    shutil.copy(datasets.path("openai_sessions"), ext / "o.jsonl")
    digest = hashlib.sha256((ext / "o.jsonl").read_bytes()).hexdigest()
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "link.jsonl").symlink_to(ext / "o.jsonl")
    assert main(["estimators", str(logs), "-e", "chars:4", "--calibrate",
                 str(logs / "link.jsonl")]) == 2
    assert "one of the files the command reads" in capsys.readouterr().err
    assert hashlib.sha256((ext / "o.jsonl").read_bytes()).hexdigest() == digest
    out = logs / "results.parquet"
    for _ in range(2):
        assert main(["sweep", str(logs), "--preset", "neuron", "--workers", "1", "-o",
                     str(out)]) == 0
    capsys.readouterr()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "cut.json").write_text('[{"role": "user", "content": "hi"},\n{"ro', encoding="utf-8")
    assert main(["sweep", str(bad), "--preset", "neuron", "-o", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "cut.json:2: the log could not be read" in err
    assert "nothing to sweep in" in err and "no log could be read or replayed" in err


def test_cli_estimators_says_why_calls_have_no_error(capsys: pytest.CaptureFixture[str]):
    """A one-call sub-agent file: its overhead fitted on that call would absorb its error,
    so the table has no row; the output says why instead of an unexplained "(none)"."""
    from tests.conftest import realdata_path

    subs = sorted(realdata_path("claude_code/spotter/258c7280-ae70-4798-800f-63464d01a85d")
                  .glob("**/agent-a*.jsonl"))
    sub = next(p for p in subs if ctxlab.load(p).calls["input_total"].notna().sum() == 1)
    assert main(["estimators", str(sub)]) == 0
    assert "1 call in session segments of fewer than 3 reporting calls left out" in \
        capsys.readouterr().out


def test_a_replay_whose_window_leaves_no_limit_warns_instead_of_dividing_by_zero(
        capsys: pytest.CaptureFixture[str]):
    """claude-code's autocompact limit is the window less 33k, at least 0: at a 20k window
    (or the aider log's gpt-4 calls, 8,192) the over-target warning divided by that 0 limit
    and the replay ended in a ZeroDivisionError traceback."""
    assert main(["replay", str(DATASETS / "openai_sessions.jsonl"), "--preset", "claude-code",
                 "--window", "20k"]) == 0
    out = capsys.readouterr()
    assert "the limit is 0 tokens: a 20,000-token window leaves no room" in out.err
    # nor is the peak an infinite share of that limit ("inf%" before)
    assert "  peak_usage       – (the limit is 0 tokens: its window leaves no room once " \
        "output is kept)\n" in out.out and "inf%" not in out.out


def test_convert_and_estimators_say_which_records_they_could_not_use(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """``info`` and ``replay`` named a log's skipped records; ``convert`` (to a file or a
    dataset) and ``estimators`` went on without a word, a malformed line of a real Codex
    rollout cut from the Parquet and from the comparison in silence."""
    lines = (DATASETS / "coding_session_b.jsonl").read_text(encoding="utf-8").splitlines()
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "damaged.jsonl"
    log.write_text("\n".join([*lines[:5], '{"type": "user", "message": {', *lines[5:]]) + "\n",
                   encoding="utf-8")
    where = f"skipped {log}:6: malformed JSON"
    assert main(["convert", str(log), "-o", str(tmp_path / "d.parquet")]) == 0
    err = capsys.readouterr().err
    assert f"1 record of {log} could not be used; written without them" in err and where in err
    assert main(["convert", str(logs), "-o", str(tmp_path / "corpus")]) == 0
    err = capsys.readouterr().err
    assert f"1 record of {logs} could not be used; written without them" in err and where in err
    assert main(["estimators", str(log), "-e", "chars:4"]) == 0
    err = capsys.readouterr().err
    assert "could not be used; the estimators are compared without them" in err and where in err
    assert main(["estimators", str(DATASETS / "coding_session_b.jsonl"), "-e", "chars:4"]) == 0
    assert capsys.readouterr().err == ""


def test_a_wrong_format_writes_no_empty_file_and_the_hint_repeats_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """``convert codex.jsonl --format gemini`` wrote a Parquet file of 0 parts and 0 calls
    and exited 0, all 110 records skipped; ``estimators`` and ``replay`` sent the user to
    ``ctxlab info PATH``, which detects codex and reports 0 skipped."""
    log = str(realdata_path("codex_cli/vibecodingtracker/codex.jsonl"))
    hint = f"(110 records skipped: is it a gemini log? ctxlab info {log} --format gemini says why)"
    for out, given in ((tmp_path / "t.parquet", "t.parquet"), (tmp_path / "corpus", "corpus/")):
        assert main(["convert", log, "--format", "gemini", "-o", str(tmp_path / given)]) == 2
        assert f"not written to {out}: no record could be used {hint}" in capsys.readouterr().err
        assert not out.exists()
    assert main(["estimators", log, "--format", "gemini"]) == 2
    assert f"no parts to count {hint}" in capsys.readouterr().err
    assert main(["replay", log, "--format", "gemini"]) == 2
    assert f"no LLM calls to replay {hint}" in capsys.readouterr().err
