"""How counts are said in ctxlab's messages: ``1 call``, ``2 calls``, ``1,234 calls``.

One rule for the command line, the report, the widgets and the stages' reasons, so that
no message says "1 events" or "1 parts".
"""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """``n`` and a noun, plural but for one.

    Example:
        >>> counted(1, "event"), counted(0, "call"), counted(1200, "call")
        ('1 event', '0 calls', '1,200 calls')
    """
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def usage_text(share: float, whose: str = "a call's") -> str:
    """A request's share of its limit as a percentage; a share of a 0-token limit (a
    window that leaves no room once output is kept, e.g. claude-code on gpt-4's 8,192
    tokens) said as such, not as "inf%".

    Example:
        >>> usage_text(0.799), usage_text(float("inf"), "the")
        ('79.9%', '– (the limit is 0 tokens: its window leaves no room once output is kept)')
    """
    if share == float("inf"):
        return f"– ({whose} limit is 0 tokens: its window leaves no room once output is kept)"
    return f"{share:.1%}"


__all__ = ["counted", "usage_text"]
