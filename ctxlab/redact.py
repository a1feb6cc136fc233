"""Mask API keys and tokens in text before it is shown (reports, exports).

`redact` replaces every secret it recognises with ``[REDACTED:<kind>]``. It knows the
shapes of common provider keys (Anthropic, OpenAI, GitHub, AWS, Slack, Google, Hugging
Face, Stripe), JSON web tokens, PEM private keys, ``Bearer`` and ``Basic`` credentials
(any case), the password of a URL (``postgres://app:pw@db``), passwords (8+ characters
of any kind up to a quote or space, after ``password``, ``passwd``, ``pwd``...), and
long random values assigned to a key, token or secret (``api_key=...``, ``"token":
"..."``). A value after such a name is masked only when it looks random (letters and
digits: 16+ characters for keys, 8+ for passwords), so ``token = get_token()`` and
``password: string`` stay readable.

Matching is by pattern, so it can miss a secret of an unknown shape and it never
proves a text clean; it is meant for sharing reports, not as a security control.

Example:
    >>> redact("export OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t")
    'export OPENAI_API_KEY=[REDACTED:openai-key]'
    >>> redact("curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281716abcdef'")
    "curl -H 'Authorization: Bearer [REDACTED:bearer]'"
    >>> redact("token = get_token()")
    'token = get_token()'
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: (kind, pattern) in the order they are applied: specific shapes before generic ones.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private-key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?"
                               r"(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S)),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("aws-key", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("google-key", re.compile(r"\bAIza[A-Za-z0-9_-]{35}")),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("stripe-key", re.compile(r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{20,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
)

_BEARER = re.compile(r"(\b(?:Bearer|Basic)\s+)([A-Za-z0-9._~+/-]{16,}=*)", re.I)
_PASSWORD = re.compile(    # a password has any characters: up to its quote or a space
    r"""((?:password|passwd|pwd|passphrase)\w*["']?\s*[:=]\s*)"""   # (not a call: f(x))
    r"""("[^"\s]{8,}"|'[^'\s]{8,}'|[^\s"',;()]{8,}(?![(.\w]))""", re.I)
_URL_PASSWORD = re.compile(   # up to the last @ before the host: a password may hold @
    r"(\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)([^\s/]+)(?=@[^\s@/]*(?:[/:?#\s]|$))", re.I)
_ASSIGNED = re.compile(
    r"""((?:api[_-]?key|apikey|access[_-]?key|secret(?:[_-]?key)?|client[_-]?secret"""
    r"""|token|auth|password|passwd|pwd)\w*["']?\s*[:=]\s*["']?)"""
    r"""([A-Za-z0-9+/_-]{16,}=*)""", re.I)


def _random_looking(value: str) -> bool:
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _mask(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _keep_name(kind: str) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        value = m.group(2)
        if kind in ("secret", "password") and not _random_looking(value):
            return m.group(0)
        quote = value[0] if kind == "password" and value[0] in "\"'" else ""
        return m.group(1) + quote + _mask(kind) + quote
    return sub


def redact(text: str) -> str:
    """``text`` with every recognised API key, token and secret masked.

    Args:
        text: any text (a part's content, a tool name, a file path...).

    Returns:
        The text with each secret replaced by ``[REDACTED:<kind>]``; the text itself
        when nothing matched.

    Example:
        >>> redact("key AKIAIOSFODNN7EXAMPLE and ghp_" + "a1" * 18)
        'key [REDACTED:aws-key] and [REDACTED:github-token]'
        >>> redact('{"client_secret": "3q2+7wAbCdEfGh12345=="}')
        '{"client_secret": "[REDACTED:secret]"}'
    """
    if not text:
        return text
    for kind, pattern in PATTERNS:
        text = pattern.sub(_mask(kind), text)
    text = _BEARER.sub(lambda m: m.group(1) + _mask(m.group(1).strip().lower())
                       if _random_looking(m.group(2)) else m.group(0), text)
    text = _URL_PASSWORD.sub(_keep_name("url-password"), text)
    text = _PASSWORD.sub(_keep_name("password"), text)
    return _ASSIGNED.sub(_keep_name("secret"), text)


def has_secret(text: str) -> bool:
    """Whether `redact` would change ``text``.

    Example:
        >>> has_secret("sk-ant-api03-" + "x9" * 20), has_secret("plain words")
        (True, False)
    """
    return redact(text) != text


__all__ = ["PATTERNS", "has_secret", "redact"]
