"""Loader registry, format detection, and garbage input across every loader."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ctxlab
from ctxlab.errors import ConfigError, LoadError
from ctxlab.loaders import registry
from ctxlab.loaders.registry import Loader, get, names, register

from conftest import REALDATA

EXPECTED_FORMAT = {
    "claude_code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl": "claude_code",
    "claude_code/spotter/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl":
        "claude_code",
    "claude_code/claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl": "claude_code",
    "claude_code/vibecodingtracker/claude_code.jsonl": "claude_code",
    "codex_cli/vibecodingtracker/codex.jsonl": "codex",
    "gemini_cli/vibecodingtracker/gemini.jsonl": "gemini",
    "gemini_cli/vibecodingtracker/test_conversation_gemini.json": "gemini",
    "copilot_cli/vibecodingtracker/copilot.jsonl": "copilot_cli",
    "mini_swe_agent/astropy__astropy-12907.traj.json": "mini_swe_agent",
    "mini_swe_agent/psf__requests-1142.traj.json": "mini_swe_agent",
    "swe_agent/pydicom__pydicom-1458.traj": "swe_agent",
    "swe_agent/swe-agent__test-repo-i1.traj": "swe_agent",
    "openhands/basic.json": "openhands",
    "openhands/basic_gui_mode.json": "openhands",
    "inspect_ai/2025-05-12T20-27-36-04-00_browser.json": "inspect_ai",
    "aider/chat-history.md": "aider",
}

ALL_FORMATS = {"claude_code", "codex", "gemini", "copilot_cli", "mini_swe_agent", "swe_agent",
               "openhands", "inspect_ai", "openai_messages", "anthropic_messages", "aider",
               "parquet"}


def test_every_builtin_format_is_registered():
    assert set(names()) >= ALL_FORMATS


def test_unknown_format_lists_known_ones():
    with pytest.raises(ConfigError, match="unknown format .*known: .*claude_code"):
        get("no-such-format")


def test_get_accepts_an_instance():
    ld = get("codex")
    assert get(ld) is ld


def test_duplicate_registration_is_an_error():
    with pytest.raises(ConfigError, match="already registered"):
        register(get("codex"))


def test_plugin_registers_like_a_builtin(tmp_path: Path):
    def sniff(path: Path, head: str) -> bool:
        return head.startswith("PLUGINFMT")

    def load(path: Path, options: ctxlab.LoadOptions) -> ctxlab.Transcript:
        return ctxlab.load(path.with_suffix(".jsonl"), format="openai_messages")

    ld = Loader(name="test-plugin", description="a test plugin", sniff=sniff, load=load)
    register(ld)
    try:
        p = tmp_path / "x.plug"
        p.write_text("PLUGINFMT\n")
        assert registry.detect(p) is ld
    finally:
        registry.REGISTRY.unregister("test-plugin")


@pytest.mark.parametrize("rel,fmt", sorted(EXPECTED_FORMAT.items()))
def test_real_files_are_detected(rel: str, fmt: str):
    p = REALDATA / rel
    if not p.exists():
        pytest.skip(f"real transcripts not available: {p} is absent")
    assert registry.detect(p).name == fmt


def test_unknown_file_names_the_formats_tried(tmp_path: Path):
    p = tmp_path / "notes.txt"
    p.write_text("just some notes\n")
    with pytest.raises(LoadError, match="tried: .*claude_code.*codex"):
        ctxlab.load(p)


def test_missing_file_and_directory_errors(tmp_path: Path):
    with pytest.raises(LoadError, match="no such file"):
        ctxlab.load(tmp_path / "absent.jsonl")
    with pytest.raises(LoadError, match="load_dir"):
        ctxlab.load(tmp_path)


@pytest.mark.parametrize("fmt", sorted(ALL_FORMATS))
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=400), st.text(max_size=400).map(str.encode),
                      st.lists(st.sampled_from([b'{"type":"user"}', b'{"role":"user"}', b"[",
                                                b'{"messages":[]}', b"{}", b"null", b"#### hi",
                                                b"> Tokens: 1k sent, 2 received.", b"PAR1"]),
                               max_size=8).map(b"\n".join)))
def test_garbage_raises_only_load_error(fmt: str, data: bytes, tmp_path: Path):
    """Any loader fed anything: a Transcript (whose every skip is reported) or LoadError."""
    p = tmp_path / f"garbage.{ 'md' if fmt == 'aider' else 'json'}"
    p.write_bytes(data)
    try:
        t = ctxlab.load(p, format=fmt)
    except LoadError:
        return
    t.validate()
    assert (t.load_report.records["status"].isin(["used", "ignored", "skipped"])).all()
