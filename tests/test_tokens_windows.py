"""Context-window registry: seed constants, resolution order, overrides, budgets, display."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pandas as pd
import pytest

from ctxlab.errors import ConfigError
from ctxlab.tokens import windows as w
from ctxlab.tokens.windows import (
    DEFAULT_REGISTRY,
    SEED_000_WINDOWS,
    SEED_REFERENCE_WINDOWS,
    ContextWindow,
    WindowRegistry,
    available_input_tokens,
    context_window,
    effective_limit,
    output_reserve,
    resolve_window,
    windows_df,
)

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
SEED_000 = next(SEEDS.glob("000_*.txt"), None) if SEEDS.is_dir() else None


# --- seed constants -------------------------------------------------------------------------

def test_seed_constants() -> None:
    assert w.DEFAULT_CONTEXT_WINDOW == 128_000
    assert w.MAX_DEFAULT_OUTPUT_RESERVE == 64_000
    assert w.DEFAULT_OUTPUT_RESERVE_RATIO == 0.35
    assert w.DEFAULT_BUFFER_TOKENS == 8_192
    assert w.AI_AGENT_DEFAULT_CONTEXT_WINDOW == 131_072
    assert DEFAULT_REGISTRY.default_window == 128_000


# --- the built-in table ---------------------------------------------------------------------

def test_table_size_and_providers() -> None:
    assert len(SEED_000_WINDOWS) == 61
    assert DEFAULT_REGISTRY.providers() == (
        "anthropic", "openai", "google-ai", "vertex", "bedrock", "azure", "mistral", "ollama",
        "litellm", "huggingface", "sagemaker")
    counts = pd.Series([e.provider for e in SEED_000_WINDOWS]).value_counts().to_dict()
    assert counts == {"openai": 16, "anthropic": 9, "google-ai": 8, "bedrock": 8, "vertex": 6,
                      "azure": 5, "mistral": 5, "ollama": 1, "litellm": 1, "huggingface": 1,
                      "sagemaker": 1}
    assert all(e.source == "seed 000" and e.max_output_tokens is None for e in SEED_000_WINDOWS)


@pytest.mark.parametrize(("provider", "default"), [
    ("anthropic", 200_000), ("openai", 128_000), ("google-ai", 1_048_576), ("vertex", 1_048_576),
    ("bedrock", 200_000), ("azure", 128_000), ("mistral", 128_000), ("ollama", 128_000),
    ("litellm", 128_000), ("huggingface", 32_000), ("sagemaker", 128_000),
])
def test_provider_defaults_match_seed_summary(provider: str, default: int) -> None:
    r = resolve_window(provider)
    assert (r.window_tokens, r.method, r.entry is not None) == (default, "provider-default", True)


@pytest.mark.parametrize(("provider", "model", "tokens"), [
    ("anthropic", "claude-3-7-sonnet-20250219", 200_000),
    ("openai", "gpt-4", 8_192),
    ("openai", "gpt-3.5-turbo", 16_385),
    ("openai", "o1-mini", 128_000),
    ("openai", "o3", 200_000),
    ("openai", "gpt-5", 1_047_576),
    ("google-ai", "gemini-1.5-pro", 2_097_152),
    ("google-ai", "gemini-3-pro-preview", 1_048_576),
    ("vertex", "gemini-1.5-pro", 2_097_152),
    ("bedrock", "anthropic.claude-3-5-sonnet-20241022-v2:0", 200_000),
    ("bedrock", "amazon.nova-lite-v1:0", 300_000),
    ("azure", "gpt-4", 8_192),
    ("mistral", "mistral-medium-latest", 32_000),
    ("mistral", "codestral-latest", 256_000),
])
def test_spot_checks_exact(provider: str, model: str, tokens: int) -> None:
    r = resolve_window(provider, model)
    assert (r.window_tokens, r.method) == (tokens, "exact")
    assert r.entry is not None and r.entry.model == model


@pytest.mark.skipif(SEED_000 is None, reason="seed documents not available beside the repository")
def test_table_equals_seed_document() -> None:
    """Parse seed 000's MODEL_CONTEXT_WINDOWS table and compare every row."""
    assert SEED_000 is not None
    text = SEED_000.read_text(encoding="utf-8")
    section = text[text.index("MODEL_CONTEXT_WINDOWS` Complete"):text.index("## Error Detection")]
    rows, provider = [], ""
    for line in section.splitlines():
        m = re.match(r"\|\s*(?:\*\*([\w-]+)\*\*)?\s*\|\s*`([^`]+)`\s*\|\s*([\d,]+)\s*\|", line)
        if m:
            provider = m.group(1) or provider
            rows.append((provider, m.group(2), int(m.group(3).replace(",", ""))))
    ours = [(e.provider, e.model or "_default", e.window_tokens) for e in SEED_000_WINDOWS]
    assert len(rows) == 61
    assert ours == rows


# --- output reserve and available input (seed 000) -------------------------------------------

def test_output_reserve_explicit_max_tokens_wins() -> None:
    assert output_reserve(200_000, 8_192) == 8_192
    assert output_reserve(8_192, 100_000) == 100_000  # not capped when explicit


def test_output_reserve_ratio_branch_and_cap_branch() -> None:
    assert output_reserve(128_000) == 44_800          # 0.35 * 128,000 < 64,000
    assert output_reserve(16_385) == 5_735            # ceil(5,734.75)
    assert output_reserve(8_192) == 2_868             # ceil(2,867.2)
    assert output_reserve(200_000) == 64_000          # 70,000 capped
    assert output_reserve(2_097_152) == 64_000
    assert output_reserve(182_857) == 64_000          # 63,999.95 rounds up to the cap
    assert output_reserve(182_854) == 63_999          # ceil(63,998.9), under the cap


def test_output_reserve_zero_means_unset_as_in_seed() -> None:
    assert output_reserve(128_000, 0) == 44_800


@pytest.mark.parametrize("bad", [-1, 1.5, "100", True])
def test_output_reserve_rejects_bad_max_tokens(bad: object) -> None:
    with pytest.raises(ConfigError, match="max_tokens must be an int >= 0"):
        output_reserve(128_000, bad)  # type: ignore[arg-type]


def test_available_input() -> None:
    assert available_input_tokens("anthropic", "claude-sonnet-4-20250514") == 136_000
    assert available_input_tokens("openai", "gpt-4o") == 83_200
    assert available_input_tokens("openai", "gpt-4") == 8_192 - 2_868
    assert available_input_tokens("openai", "gpt-4o", 4_096) == 123_904
    assert available_input_tokens("acme") == 128_000 - 44_800
    assert DEFAULT_REGISTRY.available_input("google-ai", "gemini-2.5-pro") == 1_048_576 - 64_000
    assert DEFAULT_REGISTRY.output_reserve(128_000) == 44_800


def test_available_input_rejects_max_tokens_filling_the_window() -> None:
    with pytest.raises(ConfigError, match=r"leaves no input room.*8,192-token window"):
        available_input_tokens("openai", "gpt-4", 8_192)


# --- effective limit (seed 002) --------------------------------------------------------------

def test_effective_limit_seed_example() -> None:
    assert effective_limit(128_000, max_output=16_384) == 103_424
    assert DEFAULT_REGISTRY.effective_limit(128_000, max_output=16_384) == 103_424


def test_effective_limit_default_max_output_is_a_quarter() -> None:
    assert effective_limit(128_000) == 128_000 - 8_192 - 32_000
    assert effective_limit(131_072) == 131_072 - 8_192 - 32_768
    assert effective_limit(200_001) == 200_001 - 8_192 - 50_000   # floor(200,001 / 4)


def test_effective_limit_buffer_and_zero_output() -> None:
    assert effective_limit(100_000, max_output=0, buffer=0) == 100_000
    assert effective_limit(100_000, max_output=1_000, buffer=2_000) == 97_000


def test_effective_limit_without_room_raises() -> None:
    with pytest.raises(ConfigError, match=r"= -2,048 leaves no room for input"):
        effective_limit(8_192)
    with pytest.raises(ConfigError, match="buffer must be an int >= 0"):
        effective_limit(128_000, buffer=-1)
    with pytest.raises(ConfigError, match="window must be an int >= 1"):
        effective_limit(0)


# --- resolution order -----------------------------------------------------------------------

def test_exact_beats_prefix() -> None:
    r = resolve_window("openai", "gpt-4o")
    assert (r.method, r.window_tokens, r.is_fallback) == ("exact", 128_000, False)


@pytest.mark.parametrize(("model", "entry", "tokens"), [
    ("gpt-4.1-2025-04-14", "gpt-4.1", 1_047_576),       # not gpt-4 (8,192)
    ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini", 1_047_576),
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", 128_000),  # not gpt-4o
    ("o1-mini-2024-09-12", "o1-mini", 128_000),          # not o1 (200,000)
    ("gpt-4-0613", "gpt-4", 8_192),
    ("gpt-5-mini", "gpt-5", 1_047_576),
])
def test_prefix_picks_longest(model: str, entry: str, tokens: int) -> None:
    r = resolve_window("openai", model)
    assert r.method == "prefix" and r.entry is not None
    assert (r.entry.model, r.window_tokens) == (entry, tokens)


def test_first_prefix_rule_reproduces_seed_order() -> None:
    seed = WindowRegistry(entries=SEED_000_WINDOWS, prefix_rule="first")
    assert seed.lookup("openai", "gpt-4.1-2025-04-14") == 8_192       # gpt-4 comes first
    assert seed.lookup("openai", "o1-mini-2024-09-12") == 200_000     # o1 comes first
    assert seed.lookup("openai", "gpt-4.1") == 1_047_576              # exact still first


def test_provider_default_for_unknown_model() -> None:
    r = resolve_window("anthropic", "claude-opus-4-6")
    assert (r.window_tokens, r.method, r.is_fallback) == (200_000, "provider-default", True)
    assert "claude-opus-4-6" in r.reason and "anthropic/_default" in r.reason
    assert context_window("huggingface", "meta-llama/Llama-3-8B") == 32_000
    assert resolve_window("vertex", "gemini-3-pro-preview").method == "provider-default"


def test_global_default_for_unknown_provider_even_if_model_known() -> None:
    r = resolve_window("acme", "gpt-4")
    assert (r.window_tokens, r.method, r.entry, r.is_fallback) == (
        128_000, "global-default", None, True)
    assert "'acme' is not in the registry" in r.reason
    assert resolve_window().method == "global-default"


def test_strict_raises_and_lists_providers() -> None:
    with pytest.raises(ConfigError, match=r"provider 'acme'.*Known providers: anthropic, openai"):
        context_window("acme", "x", strict=True)
    assert context_window("openai", "x", strict=True) == 128_000  # provider default is fine


def test_registry_default_window_is_configurable() -> None:
    ai_agent = dataclasses.replace(DEFAULT_REGISTRY,
                                   default_window=w.AI_AGENT_DEFAULT_CONTEXT_WINDOW)
    assert ai_agent.lookup("acme") == 131_072
    assert ai_agent.lookup("openai", "gpt-4") == 8_192
    assert DEFAULT_REGISTRY.lookup("acme") == 128_000


def test_names_ignore_case_and_spaces() -> None:
    assert context_window(" OpenAI ", "GPT-4") == 8_192
    assert resolve_window("openai", "").method == "provider-default"


# --- bare model names -------------------------------------------------------------------------

def test_bare_model_exact_and_prefix_search_all_providers() -> None:
    r = resolve_window(model="gemini-1.5-pro")
    assert (r.window_tokens, r.method, r.provider) == (2_097_152, "exact", "google-ai")  # first
    r = resolve_window(model="amazon.nova-pro-v1:0")
    assert (r.window_tokens, r.provider) == (300_000, "bedrock")
    r = resolve_window(model="gpt-4.1-nano-2025-04-14")
    assert (r.window_tokens, r.method, r.provider) == (1_047_576, "prefix", "openai")


def test_bare_model_family_gives_provider_default() -> None:
    r = resolve_window(model="claude-opus-4-6")
    assert (r.window_tokens, r.method, r.provider) == (200_000, "provider-default", "anthropic")
    assert "family 'claude'" in r.reason
    assert context_window(model="gemini-exp-1206") == 1_048_576
    assert context_window(model="codestral-2501") == 128_000  # mistral's default


def test_bare_model_unknown_family_is_global_default() -> None:
    r = resolve_window(model="sonnet")
    assert (r.window_tokens, r.method, r.provider) == (128_000, "global-default", None)
    assert "no provider lists family 'sonnet'" in r.reason


def test_vendor_slash_model() -> None:
    r = resolve_window(model="openai/gpt-4")
    assert (r.provider, r.window_tokens, r.method) == ("openai", 8_192, "exact")
    r = resolve_window(model="google/gemini-3-pro-preview")  # 'google' is not a provider here
    assert (r.provider, r.window_tokens, r.model) == ("google-ai", 1_048_576,
                                                      "gemini-3-pro-preview")


def test_vendor_prefix_is_dropped_when_a_provider_is_given_too() -> None:
    """The guard and the budget pass provider and model together: the window is the
    model's either way (it was the provider's default, 128k for gpt-4.1's 1M)."""
    for provider in (None, "openai"):
        assert resolve_window(provider, "openai/gpt-4.1").window_tokens == 1_047_576
    for provider in (None, "google-ai"):
        r = resolve_window(provider, "models/gemini-1.5-pro")
        assert (r.window_tokens, r.model) == (2_097_152, "gemini-1.5-pro")


def test_bedrock_inference_profile_region_prefix() -> None:
    bare = resolve_window(model="anthropic.claude-3-5-sonnet-20241022-v2:0")
    for name in ("us.anthropic.claude-3-5-sonnet-20241022-v2:0",
                 "eu.anthropic.claude-3-5-sonnet-20241022-v2:0"):
        r = resolve_window(model=name)
        assert (r.window_tokens, r.provider) == (bare.window_tokens, bare.provider)
    assert bare.window_tokens == 200_000


# --- overrides --------------------------------------------------------------------------------

def test_overrides_return_new_registry_and_leave_original_alone() -> None:
    before = windows_df()
    reg = DEFAULT_REGISTRY.with_overrides({"anthropic/claude-x": 300_000, "openai": 64_000})
    assert reg is not DEFAULT_REGISTRY and reg != DEFAULT_REGISTRY
    assert reg.lookup("anthropic", "claude-x") == 300_000
    assert reg.lookup("openai", "unknown-model") == 64_000
    assert DEFAULT_REGISTRY.lookup("anthropic", "claude-x") == 200_000
    assert DEFAULT_REGISTRY.lookup("openai", "unknown-model") == 128_000
    assert DEFAULT_REGISTRY.overrides == ()
    pd.testing.assert_frame_equal(windows_df(), before)


def test_override_replaces_builtin_with_same_key() -> None:
    reg = DEFAULT_REGISTRY.with_overrides({"openai/gpt-4": 32_768, "anthropic/_default": 1_000_000})
    r = reg.resolve("openai", "gpt-4-0613")
    assert (r.window_tokens, r.method) == (32_768, "override")
    assert r.entry is not None and r.entry.source == "override"
    assert reg.resolve("anthropic", "claude-opus-4-6").method == "override"
    assert reg.lookup("anthropic", "claude-opus-4-6") == 1_000_000
    assert len(reg.rows()) == 61  # replaced, not added


def test_more_specific_builtin_beats_provider_override() -> None:
    reg = DEFAULT_REGISTRY.with_overrides({"openai": 64_000})
    assert reg.lookup("openai", "gpt-4o") == 128_000
    assert reg.resolve("openai", "gpt-4o").method == "exact"


def test_override_adds_provider_and_later_call_replaces() -> None:
    reg = DEFAULT_REGISTRY.with_overrides({"lmstudio": 32_000})
    assert reg.resolve("lmstudio", "qwen").method == "override"
    reg2 = reg.with_overrides({"LMStudio": 16_000})
    assert (reg.lookup("lmstudio"), reg2.lookup("lmstudio")) == (32_000, 16_000)
    assert len(reg2.overrides) == 1


@pytest.mark.parametrize(("overrides", "message"), [
    ({"openai": -5}, r"override 'openai' must be an int >= 1"),
    ({"openai": 0}, r"override 'openai' must be an int >= 1"),
    ({"openai": 128_000.0}, r"must be an int >= 1 \(tokens\), got float"),
    ({"openai": "128000"}, r"got str '128000'"),
    ({"openai": True}, r"got bool"),
    ({"": 1_000}, r"override key '' is not valid: write 'provider/model'"),
    ({"  ": 1_000}, r"is not valid"),
    ({"openai/": 1_000}, r"override key 'openai/' is not valid"),
    ({"/gpt-4": 1_000}, r"override key '/gpt-4' is not valid"),
    ({7: 1_000}, r"override key 7 is not valid"),
    ({"OpenAI/GPT-4": 1, "openai/gpt-4": 2}, r"'openai/gpt-4' is given twice"),
])
def test_bad_overrides_raise(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        DEFAULT_REGISTRY.with_overrides(overrides)


def test_overrides_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="overrides must be a mapping"):
        DEFAULT_REGISTRY.with_overrides([("openai", 1)])  # type: ignore[arg-type]


# --- dataclasses and registry construction ----------------------------------------------------

def test_context_window_normalises_and_validates() -> None:
    e = ContextWindow(provider=" Anthropic", model="_default", window_tokens=1)
    assert (e.provider, e.model, e.key) == ("anthropic", None, "anthropic/_default")
    with pytest.raises(ConfigError, match="non-empty name without '/'"):
        ContextWindow(provider="a/b", window_tokens=1)
    with pytest.raises(ConfigError, match="non-empty name"):
        ContextWindow(provider="", window_tokens=1)
    with pytest.raises(ConfigError, match="window of x/y must be an int >= 1"):
        ContextWindow(provider="x", model="y", window_tokens=-1)
    with pytest.raises(ConfigError, match="max output of x/_default"):
        ContextWindow(provider="x", window_tokens=10, max_output_tokens=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.window_tokens = 5  # type: ignore[misc]


def test_registry_rejects_duplicates_and_bad_options() -> None:
    row = ContextWindow(provider="x", model="m", window_tokens=10)
    with pytest.raises(ConfigError, match="'x/m' is listed twice"):
        WindowRegistry(entries=(row, dataclasses.replace(row, window_tokens=20)))
    with pytest.raises(ConfigError, match="prefix_rule must be 'longest' or 'first'"):
        WindowRegistry(prefix_rule="shortest")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="default_window must be an int >= 1"):
        WindowRegistry(default_window=0)
    with pytest.raises(ConfigError, match="rows must be ContextWindow"):
        WindowRegistry(entries=(("x", 1),))  # type: ignore[arg-type]


def test_registry_is_frozen_hashable_and_empty_registry_falls_back() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_REGISTRY.default_window = 1  # type: ignore[misc]
    assert hash(DEFAULT_REGISTRY) == hash(WindowRegistry(entries=SEED_000_WINDOWS))
    empty = WindowRegistry()
    assert empty.providers() == () and empty.lookup("openai", "gpt-4") == 128_000


def test_convenience_functions_take_a_registry() -> None:
    reg = WindowRegistry(entries=(ContextWindow(provider="p", window_tokens=10_000),))
    assert context_window("p", registry=reg) == 10_000
    assert resolve_window("p", "m", registry=reg).method == "provider-default"
    assert available_input_tokens("p", registry=reg) == 10_000 - 3_500
    assert len(windows_df(reg)) == 1


# --- display ----------------------------------------------------------------------------------

def test_windows_df_columns_dtypes_and_rows() -> None:
    df = windows_df()
    assert list(df.columns) == ["provider", "model", "window_tokens", "max_output_tokens",
                                "source", "kind"]
    assert df["window_tokens"].dtype == "int64" and df["max_output_tokens"].dtype == "Int64"
    assert len(df) == 61 and set(df["kind"]) == {"builtin"}
    assert df["max_output_tokens"].isna().all()
    row = df[(df.provider == "openai") & (df.model == "gpt-3.5-turbo")]
    assert row["window_tokens"].item() == 16_385
    assert (df["model"] == "_default").sum() == 11


def test_windows_df_shows_overrides_and_reference_rows() -> None:
    reg = DEFAULT_REGISTRY.with_overrides({"openai/gpt-4": 32_768, "lmstudio": 8_000})
    df = windows_df(reg, include_reference=True)
    assert len(df) == 61 + 1 + len(SEED_REFERENCE_WINDOWS)
    gpt4 = df[(df.provider == "openai") & (df.model == "gpt-4")]
    assert gpt4[["window_tokens", "kind"]].values.tolist() == [
        [32_768, "override"], [128_000, "reference"]]
    ref = df[df.kind == "reference"]
    assert set(ref["source"].str.slice(0, 8)) == {"seed 002", "seed 003"}
    assert ref["max_output_tokens"].tolist()[:2] == [16_384, 16_384]


def test_reference_windows_are_not_used_for_lookup() -> None:
    assert context_window("vertex") == 1_048_576          # not seed 003's 1,048,575
    assert context_window("openai", "gpt-4") == 8_192     # not seed 002's 128,000
