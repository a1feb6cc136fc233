"""Where inserted parts and events go: positions in a session's order.

`Placement` gives `ctxlab.history.SessionHistory` its positions. Parts are ordered by a
float position: an inserted part takes the middle of the gap between its anchor and the
anchor's neighbour, and an event sits after every part and event below the input end
of the call it precedes. When compaction inserts again and again
next to the same anchor (a new summary after the system prompt at every compaction of
a long session, or a truncation marker before the last one), that gap halves every
time and runs out after ~50 inserts. The neighbours are hidden by then, and where a
part sits among hidden parts changes no request, so `widest_gap` offers the widest gap
between the visible parts around the anchor instead.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxlab.errors import ConfigError

if TYPE_CHECKING:
    from ctxlab.stages.base import NewPart

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


class SortedFloats:
    """A growing set of floats kept sorted, with nearest-neighbour lookups: a sorted NumPy
    array of most of them and a sorted list of the latest, merged into the array once it
    holds ``merge_at`` values and an eighth of the array's (the arrays merged grow
    geometrically, so merging costs O(log n) per value in all). A sorted list of them all,
    re-sorted on every edit that inserted many parts, cost what every part inserted so far
    did, at every such edit.

    Example:
        >>> s = SortedFloats()
        >>> s.add([3.0, 1.0]); s.add([2.0])
        >>> s.below(2.5), s.above(2.0), s.below(1.0), len(s)
        (2.0, 3.0, -inf, 3)
        >>> s.nearest(np.array([0.5, 2.0]), above=True).tolist()
        [1.0, 3.0]
    """

    MERGE_AT = 256

    __slots__ = ("_big", "_small", "_merge_at")

    def __init__(self, merge_at: int = MERGE_AT) -> None:
        self._big = np.zeros(0, dtype=np.float64)
        self._small: list[float] = []
        self._merge_at = merge_at

    def __len__(self) -> int:
        return len(self._big) + len(self._small)

    def add(self, values: list[float]) -> None:
        small = self._small
        if len(values) > 8:             # many at once: one sort, not an insert each
            small.extend(map(float, values))
            small.sort()
        else:
            for v in values:
                bisect.insort(small, float(v))
        if len(small) >= max(self._merge_at, len(self._big) >> 3):
            self._big = np.sort(np.concatenate([self._big, np.asarray(small)]),
                                kind="stable")
            self._small = []

    def below(self, x: float) -> float:
        """The largest value below ``x`` (-inf when none)."""
        big, small = self._big, self._small
        i = int(big.searchsorted(x, side="left"))
        j = bisect.bisect_left(small, x)
        return max(float(big[i - 1]) if i else -np.inf, small[j - 1] if j else -np.inf)

    def above(self, x: float) -> float:
        """The smallest value above ``x`` (inf when none)."""
        big, small = self._big, self._small
        i = int(big.searchsorted(x, side="right"))
        j = bisect.bisect_right(small, x)
        return min(float(big[i]) if i < len(big) else np.inf,
                   small[j] if j < len(small) else np.inf)

    def nearest(self, x: np.ndarray, *, above: bool) -> np.ndarray:
        """`above` (or `below`) of each of ``x``."""
        out = _nearest_in(self._big, x, above=above)
        if self._small:
            out = (np.minimum if above else np.maximum)(
                out, _nearest_in(np.asarray(self._small), x, above=above))
        return out


def _nearest_in(pos: np.ndarray, x: np.ndarray, *, above: bool) -> np.ndarray:
    """For each of ``x``, the nearest value of the sorted ``pos`` above it (inf when none)
    or below it (-inf)."""
    if not len(pos):
        return np.full(len(x), np.inf if above else -np.inf)
    if above:
        i = np.searchsorted(pos, x, side="right")
        return np.where(i < len(pos), pos[np.minimum(i, len(pos) - 1)], np.inf)
    i = np.searchsorted(pos, x, side="left")
    return np.where(i > 0, pos[np.maximum(i - 1, 0)], -np.inf)


class Placement:
    """Positions of a session history's parts and events (a mixin of
    `ctxlab.history.SessionHistory`, whose position arrays it reads: ``_pos``,
    ``_sorted_pos``, ``_hidden``, ``_msg``, ``_turn``, ``_event_pos``, ``_row_of``,
    ``_new``, ``_new_row_of``, ``_new_pos_sorted``, ``_new_event_pos``)."""

    _pos: np.ndarray
    _sorted_pos: np.ndarray
    _hidden: np.ndarray
    _msg: np.ndarray
    _turn: np.ndarray
    _event_pos: np.ndarray
    _row_of: dict[int, int]
    _new: dict[str, list[Any]]
    _new_row_of: dict[int, int]
    _new_pos_sorted: SortedFloats
    _new_event_pos: list[float]

    def _below(self, x: float) -> float:
        """The largest part position below ``x`` (-inf when none)."""
        pos = self._sorted_pos
        i = int(pos.searchsorted(x, side="left"))
        return max(float(pos[i - 1]) if i else -np.inf, self._new_pos_sorted.below(x))

    def _above(self, x: float) -> float:
        """The smallest part position above ``x`` (inf when none)."""
        pos = self._sorted_pos
        i = int(pos.searchsorted(x, side="right"))
        return min(float(pos[i]) if i < len(pos) else np.inf, self._new_pos_sorted.above(x))

    def _nearest(self, x: np.ndarray, *, above: bool) -> np.ndarray:
        """For each of ``x``, the nearest part position above it (inf when none) or below
        it (-inf): the session's own and the inserted parts'."""
        own = _nearest_in(self._sorted_pos, x, above=above)
        return (np.minimum if above else np.maximum)(
            own, self._new_pos_sorted.nearest(x, above=above))

    def event_position(self, end_pos: float) -> float:
        """Where an event applied just before a call (input ending at ``end_pos``) sits.

        After every part and earlier event below ``end_pos``, before ``end_pos``: the
        call sees the event's result, the calls before it do not. When dozens of events
        came before one call and no room is left, it shares the last one's position
        (events keep their order by id).
        """
        part = self._below(end_pos)
        events = [-np.inf]
        i = int(np.searchsorted(self._event_pos, end_pos, side="left"))
        if i:
            events.append(float(self._event_pos[i - 1]))
        j = bisect.bisect_left(self._new_event_pos, end_pos)     # kept sorted
        if j:
            events.append(self._new_event_pos[j - 1])
        event = max(events)
        lo = max(part, event)
        lo = lo if np.isfinite(lo) else end_pos - 1.0
        if tight(lo, end_pos):
            if event == lo:     # many events before one call: they share a place
                return lo
            raise ConfigError(f"no room for an event between part position {lo!r} and the "
                              f"call's input end {end_pos!r}")
        return lo + (end_pos - lo) / 2.0

    def _anchor(self, part: int) -> tuple[float, int, int]:
        """Position, message and turn of a part of the session (hidden or not)."""
        row = self._row_of.get(part)
        if row is not None:
            return float(self._pos[row]), int(self._msg[row]), int(self._turn[row])
        new = self._new_row_of.get(part)
        if new is None:
            raise ConfigError(f"edit anchors a new part on part {part}, which the session "
                              f"does not have")
        return (float(self._new["pos"][new]), int(self._new["msg"][new]),
                int(self._new["turn"][new]))

    def _insert_positions(self, inserts: tuple[NewPart, ...], hiding: list[int],
                          end_pos: float) -> list[float]:
        """A position for every inserted part, next to its anchor, in the edit's order:
        halfway between the anchor and its neighbour, or after the edit's own parts
        already placed in between; when that gap is used up, in the widest gap among
        the hidden parts around the anchor (`ctxlab.placement`). ``hiding``: parts the
        edit hides."""
        if len(inserts) > 2:
            spread = self._spread_positions(inserts)
            if spread is not None:
                return spread
        taken: list[float] = []
        ordered: list[float] = []             # taken, sorted
        for new in inserts:
            a = self._anchor(new.anchor)[0]
            if new.side == "after":
                hi = self._above(a)
                hi = hi if np.isfinite(hi) else a + 1.0
                floor = a
            else:
                floor = self._below(a)
                floor = floor if np.isfinite(floor) else a - 1.0
                hi = a
            j = bisect.bisect_left(ordered, hi)   # the largest placed part in (floor, hi)
            own = bool(j) and ordered[j - 1] > floor
            lo = ordered[j - 1] if own else floor
            if tight(lo, hi) and not own:
                pos, hidden = self._positions_hidden(hiding)
                lo2, hi2 = widest_gap(pos, hidden, a, new.side, end_pos)
                lo, hi = (lo2, hi2) if hi2 - lo2 > hi - lo else (lo, hi)
            p = lo + (hi - lo) / 2.0
            if not lo < p < hi:
                raise ConfigError(f"no room to place a part next to part {new.anchor} "
                                  f"(positions {lo!r}, {hi!r})")
            taken.append(p)
            bisect.insort(ordered, p)
        return taken

    def _spread_positions(self, inserts: tuple[NewPart, ...]) -> list[float] | None:
        """`_insert_positions` of many inserts at once, when each has a gap to itself (the
        gap next to its anchor, between two neighbouring parts, is no other insert's and
        is not used up): the middle of each gap. None otherwise."""
        a = np.array([self._anchor(n.anchor)[0] for n in inserts], dtype=np.float64)
        after = np.array([n.side == "after" for n in inserts], dtype=bool)
        above = self._nearest(a, above=True)
        hi = np.where(after, np.where(np.isfinite(above), above, a + 1.0), a)
        if after.all():
            lo = a
        else:
            below = self._nearest(a, above=False)
            lo = np.where(after, a, np.where(np.isfinite(below), below, a - 1.0))
        if len(set(zip(lo.tolist(), hi.tolist()))) < len(inserts):
            return None                         # two inserts in one gap: one at a time
        if not (hi - lo > TIGHT * np.maximum(1.0, np.maximum(np.abs(lo), np.abs(hi)))).all():
            return None
        p = lo + (hi - lo) / 2.0
        return p.tolist() if ((lo < p) & (p < hi)).all() else None

    def _positions_hidden(self, hiding: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Every part's position, sorted, and whether it is hidden (or in ``hiding``)."""
        pos = np.concatenate([self._pos, np.asarray(self._new["pos"], dtype=np.float64)])
        hidden = np.concatenate([self._hidden, np.array(
            [h is not None for h in self._new["hidden_by"]], dtype=bool)])
        for part in hiding:
            row = self._row_of.get(part)
            hidden[row if row is not None else len(self._pos) + self._new_row_of[part]] = True
        order = np.argsort(pos, kind="stable")
        return pos[order], hidden[order]
