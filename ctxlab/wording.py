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


__all__ = ["counted"]
