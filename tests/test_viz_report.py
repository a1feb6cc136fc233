"""The HTML report: self-contained, deterministic, escaped, redacted on request, capped."""

from __future__ import annotations

import datetime
import subprocess
import sys
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

import ctxlab
from ctxlab.pipeline import Pipeline, stages_from
from ctxlab.summarizers import Summarizer, SummarizerError, register, unregister
from ctxlab.viz import report as report_module
from ctxlab.viz.report import inline_svg, plotted_sessions, report, report_html
from tests.conftest import DATASETS, REALDATA, REPO, realdata_path

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
KEY = "sk-ant-api03-" + "Q7w_e9R-" * 5


class Tags(HTMLParser):
    """Every start tag and attribute of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [name for name, _ in attrs]


def tags_of(page: str) -> Tags:
    t = Tags()
    t.feed(page)
    return t


@pytest.fixture(scope="module")
def small() -> tuple[ctxlab.Transcript, ctxlab.Replay]:
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    return t, ctxlab.replay(t, "neuron", window=100_000)


@pytest.fixture(scope="module")
def small_page(small) -> str:
    t, r = small
    return report_html(r, transcript=t)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[ctxlab.Transcript,
                                                                ctxlab.Replay]:
    """coding_session_b with markup in tool names, file paths and tool results, and a key."""
    text = (DATASETS / "coding_session_b.jsonl").read_text(encoding="utf-8")
    text = text.replace('"name":"Read"', f'"name":"Read{SCRIPT}"')
    text = text.replace('"file_path":"', f'"file_path":"{IMG}')
    text = text.replace('"type":"tool_result","content":"',
                        f'"type":"tool_result","content":"{SCRIPT} {KEY} ')
    path = tmp_path_factory.mktemp("hostile") / "hostile.jsonl"
    path.write_text(text, encoding="utf-8")
    t = ctxlab.load(path)
    return t, ctxlab.replay(t, "neuron", window=100_000)


def test_the_page_is_self_contained_and_has_every_section(small, small_page):
    _, r = small
    page = small_page
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    for section in ("settings", "summary", "plots", "events", "ledger", "fidelity"):
        assert f'<section id="{section}">' in page
    tags = tags_of(page)
    assert "script" not in tags.tags and "link" not in tags.tags and "img" not in tags.tags
    assert tags.tags.count("svg") >= 4  # layers, stages, context before/after, retention
    assert "src" not in tags.attrs
    assert not any(a.startswith("on") for a in tags.attrs)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    # every event and the ledger's row count are on the page
    assert f"{len(r.ledger):,} rows" in page
    for reason in r.events["reason"]:
        assert reason.replace("'", "&#x27;") in page


def test_same_replay_gives_the_same_bytes_even_in_another_process(small, small_page,
                                                                   tmp_path: Path):
    t, r = small
    a = report(r, tmp_path / "a.html", transcript=t).read_bytes()
    assert a == small_page.encode("utf-8")
    code = ("import ctxlab, sys\nfrom ctxlab.viz.report import report\n"
            f"t = ctxlab.load({str(DATASETS / 'coding_session_b.jsonl')!r})\n"
            "r = ctxlab.replay(t, 'neuron', window=100_000)\n"
            f"report(r, {str(tmp_path / 'c.html')!r}, transcript=t)\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO,
                   env={"PYTHONHASHSEED": "123", "PATH": ""})
    assert (tmp_path / "c.html").read_bytes() == a


def test_no_timestamp_or_path_of_this_machine(small_page):
    page = small_page
    assert str(DATASETS) not in page and str(REPO) not in page and "/tmp" not in page
    assert datetime.date.today().isoformat() not in page
    assert "coding_session_b.jsonl" in page  # the source, by name


def test_log_text_is_escaped_everywhere(hostile):
    t, r = hostile
    assert r.ledger["tool_name"].str.contains("<script>", regex=False).any()
    assert r.ledger["file_path"].str.contains("<img", regex=False).any()
    page = report_html(r, transcript=t, title=f"title {SCRIPT}")
    tags = tags_of(page)
    assert "script" not in tags.tags and "img" not in tags.tags
    assert not any(a.startswith("on") for a in tags.attrs)
    assert SCRIPT not in page and IMG not in page
    assert "Read&lt;script&gt;alert(1)&lt;/script&gt;" in page       # tool name, shown escaped
    assert "&lt;img src=x onerror=alert(2)&gt;" in page              # file path
    assert "<title>title &lt;script&gt;" in page                     # the title
    assert KEY in page                                                 # no redaction asked


def test_redact_masks_keys_in_every_text(hostile):
    t, r = hostile
    page = report_html(r, transcript=t, redact=True, title=f"mine {KEY}")
    assert KEY not in page and KEY[:20] not in page
    assert page.count("[REDACTED:anthropic-key]") >= 2   # title and ledger previews
    assert "secrets redacted" in page


class Failing(Summarizer):
    name = "report-test-failing"
    model = "none"

    def summarize(self, parts, previous=None, *, budget_tokens=0, estimator=None):
        raise SummarizerError(f"backend down {SCRIPT}", kind="backend")


@pytest.fixture
def failing():
    s = register(Failing())
    yield s.name
    unregister(s.name)


def test_failed_summarizer_attempts_are_rows_with_their_reason(failing):
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    p = Pipeline(name="summarize-then-truncate", threshold=0.5, target=0.3, limit="window",
                 estimator="chars:4",
                 stages=stages_from([("summarize", {"summarizer": failing}), "truncate"]))
    r = ctxlab.replay(t, p, window=60_000)
    n_failed = int(r.events["failure"].notna().sum())
    assert n_failed >= 1
    page = report_html(r, transcript=t)
    assert page.count('<tr class="failed">') == n_failed
    assert f"{n_failed:,} failed summarizer attempts" in page
    assert "backend down &lt;script&gt;" in page and SCRIPT not in page


def test_fidelity_tables_say_what_their_columns_mean(small_page):
    """mape_pct, aligned_calls, segment and offset_calls were shown with no word of what
    they measure (a helper's review of the report on real logs)."""
    fidelity = small_page[small_page.index('<section id="fidelity">'):]
    for heading, words in (("Per session", "aligned_calls and aligned_mape_pct: the same over"),
                           ("Compaction points", "offset_calls is predicted − real"),
                           ("Per call", "segment: recorded compactions before the call")):
        after = fidelity[fidelity.index(f"<h3>{heading}</h3>"):]
        assert after.index(words) < after.index("<table")     # under its heading, first


def test_fidelity_says_so_when_the_log_reports_no_usage(small, small_page):
    t, _ = small
    assert '<section id="fidelity">' in small_page and "<h3>Per call</h3>" in small_page
    calls = t.calls.assign(input_total=pd.array([pd.NA] * len(t.calls), dtype="Int64"))
    bare = replace(t, calls=calls)
    page = report_html(ctxlab.replay(bare, "neuron", window=100_000), transcript=bare)
    fidelity = page[page.index('<section id="fidelity">'):]
    assert "reports no per-call usage" in fidelity and "<h3>Per call</h3>" not in fidelity
    assert "none counted: the log reports no usage to fit it from" in page
    # what the log says its client sent unrecorded (Copilot CLI's tool definitions) counts
    told = replace(bare, meta={**bare.meta, "unrecorded_input": {bare.sessions[0]: 4321}})
    page = report_html(ctxlab.replay(told, "neuron", window=100_000), transcript=told)
    assert "4,321 tokens: what the log says its client sends unrecorded" in page


def test_the_settings_name_the_estimator_each_session_was_counted_with():
    """A pipeline's estimator spec is a template (``neurolink:{provider}``): the settings
    name the specs the sessions were counted with."""
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    page = report_html(ctxlab.replay(t, "neurolink", window=100_000), transcript=t)
    assert "neurolink:openai (the pipeline&#x27;s neurolink:{provider})" in page \
        or "neurolink:openai (the pipeline's neurolink:{provider})" in page


def test_without_the_transcript_the_page_says_real_compactions_are_unknown(small):
    _, r = small
    assert "real compaction points are missing" in report_html(r)


def test_long_tables_say_how_many_rows_were_left_out(small, monkeypatch):
    t, r = small
    monkeypatch.setattr(report_module, "MAX_ROWS", 10)
    page = report_html(r, transcript=t)
    ledger = page[page.index('<section id="ledger">'):page.index('<section id="fidelity">')]
    left = len(r.ledger) - 10
    assert f"… {left:,} rows left out here (rows 6–{5 + left:,} of {len(r.ledger):,})" in ledger
    assert "Replay.ledger" in ledger
    assert ledger.count("<tr>") == 10 + 1  # header row + 10 shown (the gap row has a class)
    fidelity = page[page.index('<section id="fidelity">'):]
    assert f"{len(r.calls) - 10:,} rows left out" in fidelity


def test_plots_are_drawn_for_the_busiest_sessions_and_the_rest_is_said(monkeypatch):
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    r = ctxlab.replay(t, "observation-masking")
    counts = r.calls["session"].value_counts()
    saved = r.events.groupby("session")["tokens_saved"].sum()
    chosen = plotted_sessions(r, limit=2)
    # sessions where compaction saved the most first, then the busiest
    ranked = sorted(t.sessions, key=lambda s: (-saved.get(s, 0), -counts.get(s, 0)))
    assert chosen == [s for s in t.sessions if s in set(ranked[:2])]
    quiet = replace(r, events=r.events.iloc[:0])
    assert plotted_sessions(quiet, limit=2) == [s for s in t.sessions
                                                if s in set(counts.index[:2])]
    monkeypatch.setattr(report_module, "MAX_PLOT_SESSIONS", 1)
    page = report_html(r, transcript=t)
    plots = page[page.index('<section id="plots">'):page.index('<section id="events">')]
    assert f"{len(t.sessions) - 1:,} other sessions are not drawn" in plots
    assert plots.count("<h3>Session ") == 1 and ranked[0] in plots


def test_inline_svg_prefixes_ids_and_drops_the_xml_head():
    svg = ('<?xml version="1.0" encoding="utf-8" standalone="no"?>\n'
           '<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"\n  "http://x/svg11.dtd">\n'
           '<svg><metadata><rdf:RDF>date</rdf:RDF></metadata><defs><path id="g1"/></defs>'
           '<use xlink:href="#g1"/><clipPath id="c1"/><g clip-path="url(#c1)">'
           f"<text>{KEY}</text></g></svg>")
    out = inline_svg(svg, "f3-")
    assert out.startswith("<svg>") and "metadata" not in out and "DOCTYPE" not in out
    assert 'id="f3-g1"' in out and 'href="#f3-g1"' in out and "url(#f3-c1)" in out
    assert 'id="g1"' not in out and KEY in out
    assert KEY not in inline_svg(svg, "f3-", redact=True)


def test_importing_the_report_module_loads_no_plotting():
    code = ("import ctxlab.viz.report, sys\n"
            "print(sorted(m for m in ('matplotlib', 'tqdm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


def _longest_claude_code_log() -> Path:
    root = REALDATA / "claude_code"
    logs = [p for p in root.rglob("*.jsonl") if "subagents" not in p.parts] \
        if root.is_dir() else []
    if not logs:
        pytest.skip(f"real transcripts not available: no Claude Code log under {root}")
    return max(logs, key=lambda p: (p.stat().st_size, str(p)))


@pytest.mark.realdata
@pytest.mark.slow
def test_the_longest_real_claude_code_session_gives_a_report_under_5_mb(tmp_path: Path):
    path = _longest_claude_code_log()
    t = ctxlab.load(path)
    r = ctxlab.replay(t, "neurolink")
    out = report(r, tmp_path / "real.html", transcript=t, redact=True)
    size = out.stat().st_size
    assert 50_000 < size < 5_000_000, size
    page = out.read_text(encoding="utf-8")
    tags = tags_of(page)
    assert "script" not in tags.tags and tags.tags.count("svg") >= 4
    assert '<section id="fidelity">' in page and path.name in page


def test_the_settings_give_the_trigger_as_set():
    """A trigger at 83.5% of the limit: the settings say so (they said 84%, while the
    summary and the plot legend on the same page say 83.5%)."""
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    p = ctxlab.preset("claude-code").with_threshold(0.835)
    page = report_html(ctxlab.replay(t, p, window=100_000), transcript=t)
    assert "tokens over 83.5% of the autocompact limit" in page
    page = report_html(ctxlab.replay(t, "neuron", window=100_000), transcript=t)
    assert "tokens over 100% of the fixed limit" in page


def test_the_summary_names_the_models_of_the_calls_in_every_format(tmp_path):
    """The models come from the calls (mini-swe-agent, Inspect, OpenHands, aider... name
    none in their metadata: the page said '–')."""
    from ctxlab.loaders.builder import SessionBuilder, assemble
    from ctxlab.loaders.records import RecordLog

    b = SessionBuilder("s", RecordLog("mem.jsonl"))
    b.message("user", real_user=True)
    b.part("text", "hello " * 20)
    for model in ("gpt-4o-mini-2024-07-18", "claude-3-5-haiku"):
        b.call(model=model, input_total=40)
        b.message("assistant")
        b.part("text", "hi")
    t = assemble([b], RecordLog("mem.jsonl"), {"format": "test"})
    assert "models" not in t.meta
    page = report_html(ctxlab.replay(t, "neuron"), transcript=t)
    row = page[page.index(">models<"):][:200]
    assert "gpt-4o-mini-2024-07-18, claude-3-5-haiku" in row


def test_a_session_that_overflowed_without_saving_anything_is_drawn():
    """Ranked by tokens saved then calls, a session whose requests went over the window
    (or triggered) without a compaction saving anything was never drawn: the aider
    report's two overflows were in no figure."""
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    r = ctxlab.replay(t, "observation-masking")
    quiet = replace(r, events=r.events.iloc[:0])
    last = t.sessions[-1]
    c = quiet.calls.copy()
    c["over_window"] = c["session"] == last
    assert plotted_sessions(replace(quiet, calls=c), limit=1) == [last]
    c["over_window"], c["triggered"] = False, c["session"] == last
    assert plotted_sessions(replace(quiet, calls=c), limit=1) == [last]


def test_a_replay_of_calls_without_input_gives_a_page_that_says_so(tmp_path):
    """An aider session interrupted before its prompt was logged: one call with usage
    and no part. The CLI refused it; report_html crashed in the fidelity section."""
    log = tmp_path / "bare.aider.chat.history.md"
    log.write_text("\n# aider chat started at 2024-05-01 10:00:00\n\n"
                   "> Tokens: 9,921 sent, 120 received. Cost: $0.03 message, $0.03 session.\n",
                   encoding="utf-8")
    t = ctxlab.load(log, format="aider")
    if len(t.calls) != 1 or len(t.frame):
        pytest.skip(f"this aider text gives {len(t.calls)} calls, {len(t.frame)} parts")
    page = report_html(ctxlab.replay(t, "neurolink"), transcript=t)
    assert "No call was replayed" in page


def test_the_plots_note_counts_sessions_without_calls_apart(tmp_path, monkeypatch):
    import json

    convo = [{"role": "user", "content": "fix src/app.py"},
             {"role": "assistant", "content": "done", "usage": {"prompt_tokens": 40,
                                                                "completion_tokens": 5}}]
    lines = [json.dumps({"id": f"s{i}", "messages": convo}) for i in range(3)]
    lines.append(json.dumps({"id": "bare", "messages": [{"role": "user", "content": "hi"}]}))
    p = tmp_path / "four.jsonl"
    p.write_text("\n".join(lines), encoding="utf-8")
    t = ctxlab.load(p)
    monkeypatch.setattr(report_module, "MAX_PLOT_SESSIONS", 2)
    page = report_html(ctxlab.replay(t, "neurolink"), transcript=t)
    assert "1 other session is not drawn" in page and "1 session has no replayed call" in page


@pytest.mark.realdata
def test_a_peak_usage_of_a_zero_token_limit_is_said_not_inf():
    """Claude Code's preset over an 8,192-token window leaves a limit of 0 tokens: the
    summary showed peak_usage "inf%" (the CLI says "–" and why); the explorer too."""
    from ctxlab.viz.widgets_base import mapping_html

    t = ctxlab.load(realdata_path("openhands/basic.json"))
    r = ctxlab.replay(t, "claude-code", window=8192)
    assert r.summary()["peak_usage"] == float("inf")
    page = report_html(r, transcript=t)
    row = page[page.index(">peak_usage<"):][:200]
    assert "inf" not in row and "limit is 0 tokens" in row
    assert "inf%" not in mapping_html(r.summary())


@pytest.mark.realdata
def test_one_event_is_one_event():
    """SWE-agent's run under observation-masking makes one event: the note said
    "1 events."."""
    t = ctxlab.load(realdata_path("swe_agent/pydicom__pydicom-1458.traj"))
    page = report_html(ctxlab.replay(t, "observation-masking"), transcript=t)
    assert '<p class="note">1 event.</p>' in page


@pytest.mark.realdata
def test_a_call_naming_no_model_has_the_window_of_the_model_before_it():
    """OpenHands' last step names no model; the replay gives it claude-3-5-sonnet's
    200,000 (as the CLI says), but the settings called its window a default for
    "(no model named)" and asked for --window."""
    t = ctxlab.load(realdata_path("openhands/basic_gui_mode.json"))
    assert t.calls["model"].isna().any()
    page = report_html(ctxlab.replay(t, "claude-code"), transcript=t)
    row = page[page.index("<dt>window</dt>"):][:200]
    assert "window: 200,000</dd>" in row and "no model named" not in row
    t = ctxlab.load(realdata_path("swe_agent/pydicom__pydicom-1458.traj"))  # names none
    page = report_html(ctxlab.replay(t, "claude-code"), transcript=t)
    assert "(no model named)" in page[page.index("<dt>window</dt>"):][:200]
