"""Where an inserted part goes when the gap next to its anchor is used up.

Parts are ordered by a float position, and an inserted part takes the middle of the gap
between its anchor and the anchor's neighbour. When compaction inserts again and again
next to the same anchor (a new summary after the system prompt at every compaction of
a long session, or a truncation marker before the last one), that gap halves every
time and runs out after ~50 inserts. The neighbours are hidden by then, and where a
part sits among hidden parts changes no request, so `widest_gap` offers the widest gap
between the visible parts around the anchor instead.
"""

from __future__ import annotations

import numpy as np

TIGHT = 2.0 ** -30
"""A gap narrower than this share of its position (and of 1) counts as used up."""


def tight(lo: float, hi: float) -> bool:
    """Is the gap ``(lo, hi)`` used up (see `TIGHT`)?

    Example:
        >>> tight(31.0, 31.5), tight(31.0, 31.0 + 1e-12)
        (False, True)
    """
    return not hi - lo > TIGHT * max(1.0, abs(lo), abs(hi))


def widest_gap(pos: np.ndarray, hidden: np.ndarray, anchor: float, side: str,
               limit: float) -> tuple[float, float]:
    """The widest gap between consecutive parts among the hidden parts around ``anchor``.

    A part placed there keeps its place among the visible parts: after every visible
    part up to the anchor (the anchor itself when visible and ``side`` is ``"after"``)
    and before every later visible part.

    Args:
        pos: every part's position, sorted ascending.
        hidden: whether each part (aligned with ``pos``) is hidden.
        anchor: the anchor's position.
        side: ``"after"`` or ``"before"`` the anchor.
        limit: no position at or above this (the current call's input end).

    Example:
        >>> pos = np.array([1.0, 1.5, 1.75, 1.875, 3.0])
        >>> hid = np.array([False, True, True, True, False])
        >>> widest_gap(pos, hid, 1.0, "after", 10.0)   # 1.875 .. 3.0 is the widest
        (1.875, 3.0)
        >>> widest_gap(pos, hid, 1.875, "before", 2.0)
        (1.0, 1.5)
    """
    shown = pos[~hidden]
    k = int(np.searchsorted(shown, anchor, side="right" if side == "after" else "left"))
    lo = float(shown[k - 1]) if k else -np.inf
    hi = min(float(shown[k]) if k < len(shown) else np.inf, limit)
    inner = pos[(pos > lo) & (pos < hi)]
    if not np.isfinite(lo):
        lo = (float(inner[0]) if len(inner) else hi) - 1.0
    if not np.isfinite(hi):
        hi = (float(inner[-1]) if len(inner) else lo) + 1.0
    points = np.concatenate([[lo], inner, [hi]])
    i = int(np.argmax(np.diff(points)))
    return float(points[i]), float(points[i + 1])
