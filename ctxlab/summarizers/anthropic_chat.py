"""``anthropic``: Claude models through the official Anthropic SDK (Messages API).

The key comes from ``ANTHROPIC_API_KEY`` unless ``api_key`` or ``api_key_env`` says
otherwise; the default model is ``claude-3-5-haiku-latest``. See
`ctxlab.summarizers.chat` for every option. The Messages API of the 2.x SDK takes no
temperature or seed: those options do not apply here.

Example:
    >>> from ctxlab.summarizers import summarizer
    >>> summarizer("anthropic", model="claude-sonnet-4-5").name
    'anthropic[model=claude-sonnet-4-5]'
"""

from __future__ import annotations

from typing import Any

from ctxlab.summarizers import register
from ctxlab.summarizers.chat import ChatSummarizer


class AnthropicChat(ChatSummarizer):
    """Summaries from Anthropic's Messages API."""

    backend = "anthropic"
    default_model = "claude-3-5-haiku-latest"
    default_key_env = "ANTHROPIC_API_KEY"
    package = "anthropic"
    client_class = "Anthropic"
    base_error = "AnthropicError"

    def request(self, system: str, user: str, max_tokens: int) -> dict[str, Any]:
        return {"model": self.model, "max_tokens": int(max_tokens), "system": system,
                "messages": [{"role": "user", "content": user}]}

    def call(self, request: dict[str, Any]) -> Any:
        return self.client().messages.create(**request)

    def parse(self, response: Any) -> tuple[str, int | None, int | None]:
        text = "".join(getattr(b, "text", "") for b in getattr(response, "content", None) or []
                       if getattr(b, "type", "") == "text")
        usage = getattr(response, "usage", None)
        return text, getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None)

ANTHROPIC = register(AnthropicChat())
