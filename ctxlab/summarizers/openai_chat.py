"""``openai``: any OpenAI-compatible chat-completions endpoint, through the official SDK.

OpenAI itself, Ollama (``base_url="http://localhost:11434/v1"``), vLLM, a llama.cpp
server (`ctxlab.summarizers.local`)... The key comes from ``OPENAI_API_KEY`` unless
``api_key`` or ``api_key_env`` says otherwise (local servers accept any key). The
default model is ``gpt-4o-mini``. See `ctxlab.summarizers.chat` for every option.

Example:
    >>> from ctxlab.summarizers import summarizer
    >>> s = summarizer("openai", base_url="http://127.0.0.1:8080/v1", model="smollm2")
    >>> s.name
    'openai[base_url=http://127.0.0.1:8080/v1,model=smollm2]'
    >>> summarizer("openai", base_url="http://127.0.0.1:8080/v1", model="smollm2") is s
    True
"""

from __future__ import annotations

from typing import Any

from ctxlab.summarizers import register
from ctxlab.summarizers.base import SummarizerError
from ctxlab.summarizers.chat import ChatSummarizer


class OpenAIChat(ChatSummarizer):
    """Summaries from an OpenAI-compatible ``/chat/completions`` endpoint."""

    backend = "openai"
    default_model = "gpt-4o-mini"
    default_key_env = "OPENAI_API_KEY"
    package = "openai"
    client_class = "OpenAI"
    base_error = "OpenAIError"

    def request(self, system: str, user: str, max_tokens: int) -> dict[str, Any]:
        req: dict[str, Any] = {"model": self.model, "max_tokens": int(max_tokens),
                               "temperature": float(self.temperature),
                               "messages": [{"role": "system", "content": system},
                                            {"role": "user", "content": user}]}
        if self.seed is not None:
            req["seed"] = int(self.seed)
        return req

    def call(self, request: dict[str, Any]) -> Any:
        return self.client().chat.completions.create(**request)

    def parse(self, response: Any) -> tuple[str, int | None, int | None]:
        if not getattr(response, "choices", None):
            raise SummarizerError(f"{self.label}: the answer has no choices", kind="empty")
        usage = getattr(response, "usage", None)
        return (response.choices[0].message.content or "",
                getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None))


OPENAI = register(OpenAIChat())
