"""The HTML report in a real browser: headless Chromium renders it, runs none of the log's
markup, and draws its plots.

Needs Debian's ``chromium`` (``.ci/run`` installs it when missing); every test here skips,
saying so, when it is absent. Screenshots are kept in ``tests/artifacts/`` (git-ignored).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ctxlab
from ctxlab.viz.report import CSP, report
from tests.conftest import DATASETS, REPO, realdata_path

pytestmark = pytest.mark.slow

ARTIFACTS = REPO / "tests" / "artifacts"
TIMEOUT = 180  # seconds for one Chromium run; a render takes 1-3 s here
MAX_REPORT_BYTES = 5_000_000
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--virtual-time-budget=3000")
WINDOW = (1280, 2400)

# Each would mark <body> if it ran; the attribute names tell which one did.
SCRIPT_X = "<script>document.body.setAttribute('data-pwned-script','1')</script>"
IMG_X = "<img src=x onerror=\"document.body.setAttribute('data-pwned-img','1')\">"
SVG_X = "<svg onload=\"document.body.setAttribute('data-pwned-svg','1')\"></svg>"
PAYLOADS = (SCRIPT_X, IMG_X, SVG_X)


class Dom(HTMLParser):
    """Tags, attributes and visible text of a page (text is unescaped, as a reader sees it)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str | None]] = []
        self.chunks: list[str] = []
        self.feed(page)
        self.close()
        self.text = "".join(self.chunks)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(tag, name, value) for name, value in attrs]

    def handle_data(self, data: str) -> None:
        self.chunks.append(data)

    def pwned(self) -> list[tuple[str, str, str | None]]:
        return [a for a in self.attrs if a[1].startswith("data-pwned")]


def _run(binary: str, profile: Path, *args: str) -> str:
    """Run headless Chromium with a new profile; its stdout, or fail saying what went wrong."""
    cmd = [binary, *FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"Chromium did not finish within {TIMEOUT} s: {' '.join(cmd)}")
    finally:
        try:  # helpers Chromium may leave behind, in its own process group only
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if proc.returncode != 0:
        tail = err.decode("utf-8", "replace")[-2000:]
        pytest.fail(f"Chromium exited {proc.returncode}: {' '.join(cmd)}\n{tail}")
    return out.decode("utf-8", "replace")


class Browser:
    """Headless Chromium, each call in a fresh, empty profile."""

    def __init__(self, binary: str, scratch: pytest.TempPathFactory) -> None:
        self.binary = binary
        self.scratch = scratch

    def dump_dom(self, page: Path) -> Dom:
        """The page's DOM after loading (and after any script that was let run)."""
        out = _run(self.binary, self.scratch.mktemp("profile"), "--dump-dom", page.as_uri())
        assert "<body" in out, f"Chromium dumped no page for {page}: {out[:300]!r}"
        return Dom(out)

    def screenshot(self, page: Path, png: Path) -> Path:
        png.parent.mkdir(parents=True, exist_ok=True)
        png.unlink(missing_ok=True)
        _run(self.binary, self.scratch.mktemp("profile"), f"--window-size={WINDOW[0]},"
             f"{WINDOW[1]}", f"--screenshot={png}", page.as_uri())
        assert png.is_file(), f"Chromium wrote no screenshot at {png}"
        return png


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Browser:
    found = [os.environ.get("CTXLAB_CHROMIUM")] + [shutil.which(n) for n in (
        "chromium", "chromium-browser")]
    binary = next((b for b in found if b), None)
    if binary is None:
        pytest.skip("headless Chromium not found: install Debian's `chromium` "
                    "(apt-get install -y chromium; .ci/run does so) or set CTXLAB_CHROMIUM")
    return Browser(binary, tmp_path_factory)


def _svg_count(page: str) -> int:
    return Dom(page).tags.count("svg")


def _check_screenshot(png: Path) -> None:
    """The PNG is the window's size, not blank, and shows the plots' colours."""
    from PIL import Image

    with Image.open(png) as im:
        assert im.size == WINDOW, f"{png} is {im.size}, not the {WINDOW} window"
        rgb = np.asarray(im.convert("RGB")).reshape(-1, 3).astype(int)
    colours = len(np.unique(rgb[:, 0] << 16 | rgb[:, 1] << 8 | rgb[:, 2]))
    inked = float((rgb.min(axis=1) < 235).mean())          # anything but paper
    coloured = float((rgb.max(axis=1) - rgb.min(axis=1) > 80).mean())   # plot fills
    assert png.stat().st_size > 20_000, f"{png} is only {png.stat().st_size} bytes"
    assert colours > 100, f"{png} has {colours} colours: a blank or one-colour page"
    assert inked > 0.05, f"only {inked:.1%} of {png} is drawn on"
    assert coloured > 0.02, f"only {coloured:.1%} of {png} is in colour: no plot was drawn"


def _hostile_line(record: dict[str, Any]) -> dict[str, Any]:
    """One record of a Claude Code log with markup in tool names, paths and contents."""

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(x) for x in node]
        if not isinstance(node, dict):
            return node
        out = {k: walk(v) for k, v in node.items()}
        if isinstance(out.get("file_path"), str):
            out["file_path"] = SVG_X + out["file_path"]
        if out.get("type") == "tool_use" and out.get("name") == "Read":
            out["name"] = "Read" + SCRIPT_X
        if out.get("type") == "tool_result" and isinstance(out.get("content"), str):
            out["content"] = IMG_X + " " + out["content"]
        return out

    record = walk(record)
    message = record.get("message")
    if isinstance(message, dict) and message.get("role") == "user" and isinstance(
            message.get("content"), str):
        message["content"] = SCRIPT_X + " " + message["content"]
    return record


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[ctxlab.Replay, Path]:
    folder = tmp_path_factory.mktemp("hostile-report")
    log = folder / "hostile.jsonl"
    lines = (DATASETS / "coding_session_b.jsonl").read_text(encoding="utf-8").splitlines()
    log.write_text("".join(json.dumps(_hostile_line(json.loads(x))) + "\n" for x in lines
                           if x.strip()), encoding="utf-8")
    t = ctxlab.load(log)
    r = ctxlab.replay(t, "neuron", window=100_000)
    # the markup reached every kind of text the page shows
    assert r.ledger["tool_name"].str.contains("<script>", regex=False).any()
    assert r.ledger["file_path"].str.contains("<svg onload", regex=False).any()
    return r, report(r, folder / "hostile.html", transcript=t, title=f"report {SCRIPT_X}")


def test_the_check_catches_markup_that_runs(browser: Browser, tmp_path: Path):
    """Unescaped, the payloads do mark the page, and the report's CSP alone stops them:
    so an absent mark in the tests below means nothing ran."""
    body = "".join(PAYLOADS)
    bare = tmp_path / "bare.html"
    bare.write_text(f"<!DOCTYPE html><html><body><p>x</p>{body}</body></html>", "utf-8")
    marks = {a[1] for a in browser.dump_dom(bare).pwned()}
    assert marks == {"data-pwned-script", "data-pwned-img", "data-pwned-svg"}
    fenced = tmp_path / "fenced.html"
    fenced.write_text(f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-'
                      f'Policy" content="{CSP}"></head><body><p>x</p>{body}</body></html>',
                      "utf-8")
    assert browser.dump_dom(fenced).pwned() == []


def test_log_markup_shows_as_text_and_never_runs(browser: Browser, hostile_report):
    r, page = hostile_report
    dom = browser.dump_dom(page)
    assert dom.pwned() == [], f"markup from the log ran: {dom.pwned()}"
    assert "script" not in dom.tags and "img" not in dom.tags
    assert not [a for a in dom.attrs if a[1].startswith("on")]
    for payload in PAYLOADS:            # shown to the reader, character for character
        assert payload in dom.text, f"{payload!r} is not visible on the page"
    assert f"report {SCRIPT_X}" in dom.text                       # the title
    # the plots: one per figure of the page, at least layers and stages
    svgs = dom.tags.count("svg")
    assert svgs == _svg_count(page.read_text(encoding="utf-8")) >= 2
    assert len(r.events) > 0 and "Tokens each stage saved" in dom.text


def test_screenshot_shows_the_page(browser: Browser, hostile_report):
    _, page = hostile_report
    png = browser.screenshot(page, ARTIFACTS / "report_hostile.png")
    _check_screenshot(png)


def _longest_claude_code_log() -> Path:
    root = realdata_path("claude_code")
    logs = sorted(root.rglob("*.jsonl"), key=lambda p: (p.stat().st_size, str(p)))
    if not logs:
        pytest.skip(f"no Claude Code log under {root}")
    return logs[-1]


@pytest.mark.realdata
def test_report_of_the_longest_real_claude_code_session(browser: Browser, tmp_path: Path):
    log = _longest_claude_code_log()
    t = ctxlab.load(log)
    r = ctxlab.replay(t, "neurolink", window=200_000)
    page = report(r, tmp_path / "real.html", transcript=t)
    size = page.stat().st_size
    assert size < MAX_REPORT_BYTES, f"the report of {log.name} is {size:,} bytes"
    dom = browser.dump_dom(page)
    assert dom.pwned() == [] and "script" not in dom.tags
    svgs = _svg_count(page.read_text(encoding="utf-8"))
    assert dom.tags.count("svg") == svgs >= 2
    for section in ("settings", "summary", "plots", "events", "ledger", "fidelity"):
        assert ("section", "id", section) in dom.attrs, f"section {section} not rendered"
    assert f"{len(r.ledger):,} rows" in dom.text and "Made by ctxlab" in dom.text
    _check_screenshot(browser.screenshot(page, ARTIFACTS / "report_realdata.png"))
