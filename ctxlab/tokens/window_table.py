"""Seed 000's context windows (tokens) by provider, in the seed's order; ``None`` is the
provider's default. Data only: `ctxlab.tokens.windows` turns it into a registry.
"""

from __future__ import annotations

SEED_000_TABLE: dict[str, tuple[tuple[str | None, int], ...]] = {  # seed 000, in the seed's order
    "anthropic": (
        (None, 200_000), ("claude-opus-4-20250514", 200_000),
        ("claude-sonnet-4-20250514", 200_000), ("claude-3-7-sonnet-20250219", 200_000),
        ("claude-3-5-sonnet-20241022", 200_000), ("claude-3-5-haiku-20241022", 200_000),
        ("claude-3-opus-20240229", 200_000), ("claude-3-sonnet-20240229", 200_000),
        ("claude-3-haiku-20240307", 200_000)),
    "openai": (
        (None, 128_000), ("gpt-4o", 128_000), ("gpt-4o-mini", 128_000), ("gpt-4-turbo", 128_000),
        ("gpt-4", 8_192), ("gpt-3.5-turbo", 16_385), ("o1", 200_000), ("o1-mini", 128_000),
        ("o1-pro", 200_000), ("o3", 200_000), ("o3-mini", 200_000), ("o4-mini", 200_000),
        ("gpt-4.1", 1_047_576), ("gpt-4.1-mini", 1_047_576), ("gpt-4.1-nano", 1_047_576),
        ("gpt-5", 1_047_576)),
    "google-ai": (
        (None, 1_048_576), ("gemini-2.5-pro", 1_048_576), ("gemini-2.5-flash", 1_048_576),
        ("gemini-2.0-flash", 1_048_576), ("gemini-1.5-pro", 2_097_152),
        ("gemini-1.5-flash", 1_048_576), ("gemini-3-flash-preview", 1_048_576),
        ("gemini-3-pro-preview", 1_048_576)),
    "vertex": (
        (None, 1_048_576), ("gemini-2.5-pro", 1_048_576), ("gemini-2.5-flash", 1_048_576),
        ("gemini-2.0-flash", 1_048_576), ("gemini-1.5-pro", 2_097_152),
        ("gemini-1.5-flash", 1_048_576)),
    "bedrock": (
        (None, 200_000), ("anthropic.claude-3-5-sonnet-20241022-v2:0", 200_000),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", 200_000),
        ("anthropic.claude-3-opus-20240229-v1:0", 200_000),
        ("anthropic.claude-3-sonnet-20240229-v1:0", 200_000),
        ("anthropic.claude-3-haiku-20240307-v1:0", 200_000),
        ("amazon.nova-pro-v1:0", 300_000), ("amazon.nova-lite-v1:0", 300_000)),
    "azure": (
        (None, 128_000), ("gpt-4o", 128_000), ("gpt-4o-mini", 128_000), ("gpt-4-turbo", 128_000),
        ("gpt-4", 8_192)),
    "mistral": (
        (None, 128_000), ("mistral-large-latest", 128_000), ("mistral-medium-latest", 32_000),
        ("mistral-small-latest", 128_000), ("codestral-latest", 256_000)),
    "ollama": ((None, 128_000),), "litellm": ((None, 128_000),),
    "huggingface": ((None, 32_000),), "sagemaker": ((None, 128_000),),
}
