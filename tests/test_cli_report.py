"""``ctxlab replay`` and ``ctxlab report``: output, exit codes, one-line errors, help, progress."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pandas as pd
import pytest

import ctxlab

from ctxlab.cli import main, parse_window
from ctxlab.errors import ConfigError
from tests.conftest import DATASETS, REALDATA

REALDATA_DIR = REALDATA

LOG = str(DATASETS / "coding_session_b.jsonl")


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    assert err[0].startswith("ctxlab: error: ")
    return err[0]


def test_replay_prints_the_summary_and_the_events(capsys: pytest.CaptureFixture[str]):
    assert main(["replay", LOG, "--preset", "neuron", "--window", "100k"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("replay of coding_session_b.jsonl (63 calls, window 100,000): neuron")
    assert "\nsummary:\n" in out and "\nevents:\n" in out
    assert "  compactions      1\n" in out and "recall" in out
    # every value in one column, the longest name (calls_compacted) too
    assert "  calls_compacted  1\n" in out
    events = out.split("\nevents:\n")[1]
    assert "clear_tool_results" in events or "keep_last" in events
    assert "<NA>" not in out


def test_replay_says_what_peak_usage_is_a_share_of(capsys: pytest.CaptureFixture[str]):
    """The limit of a call (the window less the output reserve), not the window printed
    above it; with windows per model, the limit of the peak's call."""
    from ctxlab.cli import summary_lines

    assert main(["replay", LOG, "--preset", "neurolink", "--window", "200k"]) == 0
    out = capsys.readouterr().out
    r = ctxlab.replay(ctxlab.load(LOG), "neurolink", window=200_000)
    limit = int(r.calls["limit_tokens"].iloc[0])
    assert limit < 200_000
    assert f"  peak_usage       {r.summary()['peak_usage']:.1%} (of the {limit:,}-token " \
        f"limit)\n" in out
    # windows per model: the limit of the peak's call
    from types import SimpleNamespace
    calls = pd.DataFrame({"usage_after": [0.5, 0.9], "limit_tokens": [100_000, 20_000]})
    fake = SimpleNamespace(summary=lambda: {"peak_usage": 0.9}, calls=calls)
    assert summary_lines(fake) == ["  peak_usage  90.0% (of its call's 20,000-token limit)"]


def test_a_window_smaller_than_the_first_request_is_warned_of(
        capsys: pytest.CaptureFixture[str]):
    """``--window 100`` (tokens meant as thousands?) replayed without a word, at a peak
    usage of thousands of percent."""
    r = ctxlab.replay(ctxlab.load(LOG), "neurolink", window=100)
    first = int(r.calls["tokens_before"].iloc[0])
    assert first > 100 and r.calls["over_window"].all()
    assert main(["replay", LOG, "--preset", "neurolink", "--window", "100"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"ctxlab: warning: the window (100 tokens) is smaller than the first "
                      f"request ({first:,} tokens), so every call is over it")
    # and no stage can fit a request into it: each triggered call is sent over its target
    assert err[1:] == [over for over in err[1:] if over.startswith(
        "ctxlab: warning: the trigger fired at 63 calls (the summary's compactions), but at "
        "63 of them no stage brought the request within its target")] != []
    assert main(["replay", LOG, "--preset", "neurolink", "--window", "100k"]) == 0
    assert "smaller than" not in capsys.readouterr().err
    # several sessions: how many are concerned, and how many calls are over the window
    log = str(DATASETS / "openai_sessions.jsonl")
    assert main(["replay", log, "--preset", "neurolink", "--window", "30k"]) == 0
    err = capsys.readouterr().err
    assert "smaller than the first request of 1 of 4 sessions (up to " in err
    assert " calls are over it" in err


def test_triggered_calls_left_over_target_are_said(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]):
    """``compactions`` counts the calls at which the trigger fired, whether or not a stage
    could change the request: on a real Claude Code log copilot-fixed printed
    ``compactions 49`` (``calls_compacted 1``), its 49 requests sent at up to 147,961
    tokens (115.6% of the 128,000-token limit) after "stages exhausted", with no word."""
    log = str(DATASETS / "projects_mode.jsonl")
    r = ctxlab.replay(ctxlab.load(log), "neuron")
    over = r.calls[r.calls["triggered"] & ~r.calls["within_target"]]
    assert r.summary()["compactions"] == 6 and r.summary()["calls_compacted"] == 1
    assert len(over) == 5
    peak = int(over["tokens_after"].max())
    assert main(["replay", log, "--preset", "neuron"]) == 0
    err = capsys.readouterr().err
    assert (f"ctxlab: warning: the trigger fired at 6 calls (the summary's compactions), but "
            f"at 5 of them no stage brought the request within its target: sent at up to "
            f"{peak:,} tokens ({peak / 100_000:.1%} of the limit); first at call "
            f"{int(over['call'].iloc[0])}: stages exhausted, still over target "
            f"(clear_tool_results: nothing to do; keep_last: nothing to do)") in err
    out = tmp_path / "r.html"
    assert main(["report", log, "--preset", "neuron", "-o", str(out)]) == 0
    assert "the trigger fired at 6 calls" in capsys.readouterr().err
    page = out.read_text(encoding="utf-8")
    assert "<dt>over target</dt><dd>the trigger fired at 6 calls" in page
    # every triggered request within its target: nothing to say
    assert main(["replay", LOG, "--preset", "neuron", "--window", "100k"]) == 0
    assert "the trigger fired" not in capsys.readouterr().err


def test_replay_without_events_says_so(capsys: pytest.CaptureFixture[str]):
    assert main(["replay", LOG, "--preset", "probe", "--window", "1m"]) == 0
    assert "(none: the trigger never fired" in capsys.readouterr().out


def test_report_writes_the_page_and_prints_its_path_and_a_summary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "sub" / "r.html"
    assert main(["report", LOG, "--preset", "neuron", "--window", "100_000", "-o", str(out),
                 "--redact", "--title", "mine"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"wrote {out} (") and lines[0].endswith(" KB)")
    assert lines[1].startswith("neuron over 63 calls: 1 compaction, 1 event, 0 failed ")
    # the largest request and the highest usage are each their own (with several models
    # they are different calls: one figure each, not one beside the other's)
    r = ctxlab.replay(ctxlab.load(LOG), "neuron", window=100_000).summary()
    assert (f"largest request {r['peak_tokens']:,} tokens; highest usage "
            f"{r['peak_usage']:.1%} of its call's limit; {r['over_window']} requests over "
            f"the window;") in lines[1]
    page = out.read_text(encoding="utf-8")
    assert "<title>mine</title>" in page and "secrets redacted" in page
    assert '<section id="fidelity">' in page


@pytest.mark.parametrize(("argv", "words"), [
    (["replay", "nope.jsonl"], "nope.jsonl: no such file"),
    (["replay", LOG, "--preset", "nope"], "unknown preset 'nope'; presets: ai-agent"),
    (["replay", LOG, "--window", "12x"], "bad --window '12x'"),
    (["replay", LOG, "--window", "0"], "bad --window '0'"),
    (["replay", LOG, "--estimator", "bogus"], "bogus"),
    (["report", str(DATASETS), "-o", "x.html"], "is a folder; report takes one log file"),
])
def test_bad_input_exits_2_with_one_clear_line(argv: list[str], words: str,
                                               capsys: pytest.CaptureFixture[str]):
    assert main(argv) == 2
    assert words in _one_error_line(capsys)


def test_an_unwritable_output_is_one_line_too(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["report", LOG, "--preset", "neuron", "-o", str(blocker / "r.html")]) == 2
    line = _one_error_line(capsys)     # found before the replay runs
    assert f"-o {blocker / 'r.html'}: cannot create its folder" in line


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_output_the_file_system_refuses_is_found_before_the_work(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    def ran(*a: object, **k: object) -> None:
        raise AssertionError("the sweep ran before its output was checked")

    monkeypatch.setattr(sys.modules["ctxlab.sweep"], "sweep", ran)
    assert main(["sweep", LOG, "--preset", "neuron", "-o", "/proc/ctxlab-r.parquet"]) == 2
    assert "-o /proc/ctxlab-r.parquet: cannot be written" in _one_error_line(capsys)
    monkeypatch.undo()
    empty = tmp_path / "empty"              # checked, then the sweep finds no logs
    empty.mkdir()
    kept = tmp_path / "old.csv"             # an existing output is checked, not changed
    kept.write_text("a,b\n1,2\n")
    assert main(["sweep", str(empty), "-o", str(kept)]) == 2
    assert "no logs to sweep" in _one_error_line(capsys)
    assert kept.read_text() == "a,b\n1,2\n"
    assert main(["sweep", str(empty), "-o", str(tmp_path / "new.csv")]) == 2
    assert not (tmp_path / "new.csv").exists()   # the check leaves no empty file behind


@pytest.mark.parametrize(("argv", "words"), [
    (["sweep", LOG, "--grid", "prune.protect_tokens=abc", "--workers", "1", "-o", "{tmp}/s.csv"],
     "prune.protect_tokens takes an integer (now 40000), not 'abc'"),
    (["sweep", LOG, "--grid", "prune.protect_tokens=-100", "--workers", "1", "-o", "{tmp}/s.csv"],
     "protect_tokens must be an int >= 0"),
    (["sweep", LOG, "--grid", "window=abc", "-o", "{tmp}/s.csv"], "bad --grid 'window=abc'"),
    (["sweep", LOG, "-o", "{tmp}/dir.csv"], "is a folder; give a file name"),
    (["estimators", LOG, "--calibrate", "{tmp}/file/cal.json"], "cannot create its folder"),
    (["estimators", "{tmp}/empty"], "no parts to count"),
    (["convert", LOG, "-o", "{tmp}/x.json"], "a log is saved as a Parquet file (.parquet)"),
    (["convert", LOG, "-o", "{tmp}/x.parquet", "--no-facts"],     # (was ignored in silence)
     "--no-facts applies to a corpus dataset"),
    (["convert", "{tmp}/empty", "-o", "{tmp}/c/"], "an empty folder, no logs to convert"),
    (["info", "{tmp}/zero.jsonl"], "an empty file"),
    (["info", "{tmp}/blank.jsonl"], "a file of blank lines only"),
    (["sweep", "{tmp}/empty", "-o", "{tmp}/s.csv"], "empty: no logs to sweep"),
])
def test_bad_input_is_refused_before_any_work(argv: list[str], words: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]):
    (tmp_path / "empty").mkdir()
    (tmp_path / "dir.csv").mkdir()
    (tmp_path / "file").write_text("")
    (tmp_path / "zero.jsonl").write_bytes(b"")
    (tmp_path / "blank.jsonl").write_bytes(b"\n  \r\n\t\n")
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    assert words in _one_error_line(capsys)


def test_a_missing_output_folder_is_made_first(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "new" / "deeper" / "s.csv"
    assert main(["sweep", LOG, "--preset", "neuron", "--workers", "1", "-o", str(out)]) == 0
    assert out.is_file() and f"wrote {out}" in capsys.readouterr().out


def test_skipped_records_are_announced_by_replay_and_shown_by_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    lines = Path(LOG).read_text(encoding="utf-8").split("\n")
    lines[50] = lines[50][10:]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines), encoding="utf-8")
    assert main(["replay", str(bad), "--preset", "neuron"]) == 0
    err = capsys.readouterr().err
    assert "warning: 1 record of" in err and f"{bad}:51: malformed JSON" in err
    assert main(["report", str(bad), "--preset", "neuron", "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "1 skipped" in page and "bad.jsonl:51 (malformed JSON" in page
    assert str(tmp_path) not in page


def test_a_sweep_says_which_records_its_replays_ran_without(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from ctxlab.loaders.corpus_store import write_corpus
    from ctxlab.sweep import equal_results, sweep

    folder = tmp_path / "logs"
    folder.mkdir()
    lines = Path(LOG).read_text(encoding="utf-8").split("\n")
    (folder / "intact.jsonl").write_text("\n".join(lines), encoding="utf-8")
    lines[50], lines[60] = lines[50][10:], "{not json"
    bad = folder / "bad.jsonl"
    bad.write_text("\n".join(lines), encoding="utf-8")
    grid = {"preset": ["neuron"], "threshold": [0.5, 0.8]}
    one = sweep(folder, grid, workers=1)
    sk = one.attrs["skipped"]
    assert [(r["file"], r["line"]) for r in sk] == [(str(bad), 51), (str(bad), 61)]
    assert all("malformed JSON" in r["reason"] for r in sk)
    two = sweep(folder, grid, workers=2)
    assert equal_results(one, two) and two.attrs["skipped"] == sk
    ds = write_corpus(folder, tmp_path / "ds")        # a dataset keeps its logs' reports
    assert sweep(ds, grid, workers=1).attrs["skipped"] == sk
    assert sweep(folder / "intact.jsonl", grid, workers=1).attrs["skipped"] == []
    # sessions of one log swept in memory share its report: each record once
    t = ctxlab.load(bad)
    pieces = sweep([t.session(s) for s in t.sessions] * 2, grid, workers=1)
    assert pieces.attrs["skipped"] == sk
    # pandas copies attrs at every step; the records are handed on, not copied
    import copy
    assert copy.deepcopy(one.attrs)["skipped"] is sk
    assert one.groupby("preset")["cost"].sum().to_frame().attrs.get("skipped") in (None, sk)
    out = tmp_path / "r.parquet"
    assert main(["sweep", str(folder), "--preset", "neuron", "--workers", "1",
                 "-o", str(out)]) == 0
    assert pd.read_parquet(out).attrs["skipped"] == sk    # the results file keeps them
    err = capsys.readouterr().err
    assert "warning: 2 records of 1 log could not be used; the sweep ran without them" in err
    assert f"{bad}:51: malformed JSON" in err and f"{bad}:61: malformed JSON" in err


AIDER_LEFT_OUT = """
# aider chat started at 2024-08-20 08:50:00

#### hello there  

Hi! How can I help?

> Tokens: 1,200 sent, 10 received.

# aider chat started at 2024-08-20 08:51:00

#### just a note  

# aider chat started at 2024-08-20 08:52:43

>  
> ^C again to exit  
> Tokens: 9,921 sent, 0 received.
"""


def test_a_sweep_says_what_else_it_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A session without an LLM call, a call without recorded input and files that are not
    logs: said on stderr as replay and info say them, and kept in the result's attrs."""
    from ctxlab.loaders.corpus_store import write_corpus
    from ctxlab.sweep import sweep

    folder = tmp_path / "logs"
    folder.mkdir()
    log = folder / ".aider.chat.history.md"
    log.write_text(AIDER_LEFT_OUT, encoding="utf-8")
    (folder / "blob.bin").write_bytes(bytes(range(256)))
    (folder / "empty.jsonl").write_text("", encoding="utf-8")
    (folder / "other.json").write_text('{"a": 1}', encoding="utf-8")
    out = tmp_path / "r.parquet"
    assert main(["sweep", str(folder), "--preset", "neuron", "--workers", "1",
                 "-o", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"ctxlab: warning: 1 call of {folder} ({log}:18) has no recorded input "
                      f"(its session holds no part): not replayed")
    assert err[1] == f"ctxlab: note: 1 session of {folder} has no LLM call: nothing to " \
                     f"replay, left out"
    assert err[2] == f"ctxlab: note: 3 files of {folder} are not logs: not swept"
    assert main(["info", str(folder)]) == 0
    info = capsys.readouterr().out.splitlines()
    assert err[3:] == [line for line in info if line.startswith("  not-a-log: ")]
    assert len(err) == 6
    df = pd.read_parquet(out)
    name = ".aider.chat.history"
    assert df.attrs["sessions_without_calls"] == [{"file": str(log), "session": f"{name}:2"}]
    assert df.attrs["calls_without_input"] == [
        {"file": str(log), "session": f"{name}:3", "call": 0, "source": f"{log}:18"}]
    assert [r["path"] for r in df.attrs["not_logs"]] == \
        [str(folder / n) for n in ("blob.bin", "empty.jsonl", "other.json")]
    # its dataset and the log in memory leave out the same sessions and calls
    ds = write_corpus(folder, tmp_path / "ds")
    # (the dataset names the folder's other files too, from its manifest; one log, none)
    for other, not_logs in ((sweep(ds, {"preset": ["neuron"]}, workers=1), df.attrs["not_logs"]),
                            (sweep(ctxlab.load(log), {"preset": ["neuron"]}, workers=1), [])):
        assert {k: other.attrs[k] for k in ("sessions_without_calls", "calls_without_input")} \
            == {k: df.attrs[k] for k in ("sessions_without_calls", "calls_without_input")}
        assert other.attrs["not_logs"] == not_logs


def test_the_wrong_format_says_its_records_were_skipped(capsys: pytest.CaptureFixture[str]):
    assert main(["replay", LOG, "--format", "codex"]) == 2
    line = _one_error_line(capsys)
    assert "no LLM calls to replay" in line and "records skipped: is it a codex log?" in line


def test_a_log_without_calls_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    log = tmp_path / "empty.jsonl"
    log.write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    assert main(["replay", str(log), "--format", "openai_messages"]) == 2
    assert "no LLM calls to replay" in _one_error_line(capsys)


@pytest.mark.parametrize("command", ["info", "convert", "estimators", "replay", "report",
                                     "sweep"])
def test_help_has_examples(command: str, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and f"ctxlab {command} " in out
    assert "\\\n" not in out.replace(" \\\n", "")    # a continuation ends its line
    if command in ("replay", "report", "sweep"):
        assert "--preset" in out


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("info", "convert", "estimators", "replay", "report", "sweep"):
        assert f"ctxlab {command}" in out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_progress_bar_is_drawn_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]):
    pytest.importorskip("tqdm")
    assert main(["replay", LOG, "--preset", "neuron"]) == 0
    err = capsys.readouterr().err                  # not a terminal: no bar (a warning,
    assert "loading" not in err and "replaying" not in err    # e.g. on the overhead, may be)
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["replay", LOG, "--preset", "neuron"]) == 0
    assert "loading coding_session_b.jsonl" in term.getvalue()
    assert "replaying 63 calls" in term.getvalue()


@pytest.mark.parametrize(("text", "tokens"), [("200000", 200_000), ("200k", 200_000),
                                               ("1M", 1_000_000), ("128_000", 128_000),
                                               ("1,000,000", 1_000_000), (None, None),
                                               ("1.5k", 1_500), ("0.5m", 500_000),
                                               ("2.25k", 2_250), ("1_000.5k", 1_000_500),
                                               ("0.0001m", 100)])
def test_parse_window(text: str | None, tokens: int | None):
    assert parse_window(text) == tokens


@pytest.mark.parametrize("text", ["", "k", "-5", "200 tokens", "0k", "1.k", ".5k", "1.5.1k"])
def test_parse_window_refuses(text: str):
    with pytest.raises(ConfigError, match="give the context window in tokens"):
        parse_window(text)


@pytest.mark.parametrize(("text", "value"), [("1.5", "1.5"), ("1.0005k", "1,000.5")])
def test_parse_window_refuses_part_of_a_token(text: str, value: str):
    with pytest.raises(ConfigError, match=f"bad --window '{text}': {value} is not a whole "
                                          f"number of tokens"):
        parse_window(text)


def test_counts_of_one_are_singular(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A count of one is singular (it read "1 configurations x 1 sessions", "1 records")."""
    out = tmp_path / "r.csv"
    assert main(["sweep", LOG, "--preset", "neuron", "--workers", "1", "-o", str(out)]) == 0
    assert f"wrote {out}: 1 row (1 configuration x 1 session)" in capsys.readouterr().out
    lines = Path(LOG).read_text(encoding="utf-8").split("\n")
    lines[50] = lines[50][10:]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines), encoding="utf-8")
    assert main(["replay", str(bad), "--preset", "neuron"]) == 0
    assert f"warning: 1 record of {bad} could not be used" in capsys.readouterr().err
    log = DATASETS / "coding_session.jsonl"         # one recorded compaction
    assert len(ctxlab.load(log).events) == 1
    assert main(["convert", str(log), "-o", str(tmp_path / "c.parquet")]) == 0
    assert capsys.readouterr().out.endswith(" calls, 1 event\n")


def test_the_sweep_help_lists_the_grid_names_on_one_line(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    assert "names: preset, threshold, target, window, estimator, or stage.param" in \
        capsys.readouterr().out


def test_the_sweep_help_states_no_default_format_for_its_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """-o said ".parquet (default) or .csv", but a name without either suffix is refused."""
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "results file: .parquet or .csv" in out and ".parquet (default)" not in out
    assert main(["sweep", LOG, "--workers", "1", "-o", str(tmp_path / "results")]) == 2
    assert "write a .parquet or .csv file" in _one_error_line(capsys)


def test_long_event_lists_show_both_ends_and_say_how_many_were_left_out():
    import ctxlab
    from ctxlab.cli import events_text

    r = ctxlab.replay(ctxlab.load(DATASETS / "openai_sessions.jsonl"), "observation-masking")
    text = events_text(r, limit=10)
    left = len(r.events) - 10
    assert left > 0 and f"... {left:,} events left out (Replay.events has them all)" in text
    assert "session" in text.splitlines()[0]       # several sessions: the column is shown


@pytest.mark.skipif(not (REALDATA_DIR / "aider" / "chat-history.md").is_file(),
                    reason="../shared/realdata is absent")
def test_calls_with_no_recorded_input_are_said_not_replayed(tmp_path, capsys):
    """Two real aider sessions start with an interrupted request's token count and no
    message: the replay cannot rebuild them, and says so rather than count fewer calls."""
    from ctxlab.replay import calls_without_input

    path = REALDATA_DIR / "aider" / "chat-history.md"
    t = ctxlab.load(path)
    bare = calls_without_input(t)
    assert len(bare) == 2 and set(bare["session"]).isdisjoint(t.sessions)
    assert main(["replay", str(path), "--preset", "neuron"]) == 0
    err = capsys.readouterr().err
    assert "2 calls of" in err and "have no recorded input" in err


def test_a_log_whose_only_call_has_no_input_is_not_replayed(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]):
    """An aider history that records an interrupted request's token count and nothing it
    was sent: the replay used to "replay" it as the fitted overhead alone, silently."""
    from ctxlab.replay import calls_without_input

    log = tmp_path / ".aider.chat.history.md"
    log.write_text("\n# aider chat started at 2024-08-20 08:52:43\n\n>  \n> ^C again to exit  \n"
                   "> Tokens: 9,921 sent, 0 received.\n", encoding="utf-8")
    t = ctxlab.load(log)
    assert len(t.calls) == 1 and t.frame.empty
    assert len(calls_without_input(t)) == 1
    assert ctxlab.replay(t, "neuron").calls.empty
    assert main(["replay", str(log)]) == 2
    assert "no call to replay: its 1 call records no input" in capsys.readouterr().err
