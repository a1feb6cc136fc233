"""The replay walk's bookkeeping: per-layer sums, the reported-usage anchor, rows, ledger.

`ctxlab.replay` walks the calls of a session; this module holds what it keeps up to date
on the way. `Sums` are the per-layer token sums of the visible parts, changed part by
part as parts enter and leave; `Anchor` is the previous call's reported input for
``trigger_on="reported"``; `call_row` and `after_values` are a call's row of
``Replay.calls``; `ledger_rows` builds the ledger of a session's compactions in one go.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ctxlab.engine import StageRun
from ctxlab.layers import CATEGORY_OF_CLASS, USER_TEXT, layer_categories, layer_classes, user_texts
from ctxlab.pipeline import Pipeline, forced_final, model_window, trigger_scope
from ctxlab.schema import TEXT, Transcript
from ctxlab.stages.table import Table

if TYPE_CHECKING:
    from ctxlab.replay import Replay


class Sums:
    """Per-layer token sums of the visible parts of one session, updated part by part.

    The layers follow `ctxlab.layers.assign_layers`: the current turn is the highest
    turn of a visible part, its prompt the smallest message holding a visible user text
    of that turn (the turn's first one, or the next once an edit hid it).
    """

    def __init__(self, overhead: int) -> None:
        self.overhead = overhead
        self.system = self.tools = self.attach = self.other = 0
        self.attach_turn: dict[int, int] = {}
        self.other_turn: dict[int, int] = {}
        self.msg_tokens: dict[int, int] = {}
        self.msg_refs: dict[int, int] = {}
        self.turn_refs: dict[int, int] = {}          # visible parts per turn
        self.user_msgs: dict[int, dict[int, int]] = {}  # turn -> msg -> visible user texts
        self.max_turn = 0

    def add(self, cat: str, tokens: int, turn: int, msg: int, sign: int,
            user: bool = False) -> None:
        """Count a part in (``sign`` +1) or out (-1); ``user``: it is a user text."""
        t = sign * tokens
        if cat == "other":                  # the categories of `layer_categories`
            self.other += t
            per = self.other_turn
            per[turn] = per.get(turn, 0) + t
            per = self.msg_tokens
            per[msg] = per.get(msg, 0) + t
        elif cat == "attach":
            self.attach += t
            per = self.attach_turn
            per[turn] = per.get(turn, 0) + t
        elif cat == "system":
            self.system += t
        else:
            self.tools += t
        per = self.msg_refs
        n = per.get(msg, 0) + sign
        if n:
            per[msg] = n
        else:
            del per[msg]
        if user:
            self._user_text(turn, msg, sign)
        per = self.turn_refs
        n = per.get(turn, 0) + sign
        if n:
            per[turn] = n
            if turn > self.max_turn:
                self.max_turn = turn
        else:
            del per[turn]
            if turn == self.max_turn:       # the last part of the current turn left
                self.max_turn = max(per, default=0)

    def _user_text(self, turn: int, msg: int, sign: int) -> None:
        """Count a user text of a message in or out of its turn's."""
        per = self.user_msgs.setdefault(turn, {})
        n = per.get(msg, 0) + sign
        if n:
            per[msg] = n
        else:
            del per[msg]

    def add_table(self, t: Table, sign: int) -> None:
        """`add` every part of a table (a stage's hidden or inserted rows): the same sums,
        gathered per category, turn and message with NumPy when there are many."""
        tokens, turns, msgs = t.ints("tokens"), t.ints("turn"), t.ints("msg")
        if t.n <= _ROW_BY_ROW:          # categories from the layer classes, in Python
            for flags, tok, turn, msg in zip(layer_classes(t).tolist(), tokens.tolist(),
                                             turns.tolist(), msgs.tolist()):
                self.add(CATEGORY_OF_CLASS[flags], tok, turn, msg, sign,
                         bool(flags & USER_TEXT))
            return
        cats, users = layer_categories(t), user_texts(t)
        signed = sign * tokens
        other, attach = cats == "other", cats == "attach"
        self.other += int(signed[other].sum())
        self.attach += int(signed[attach].sum())
        self.system += int(signed[cats == "system"].sum())
        self.tools += int(signed[cats == "tools"].sum())
        _bump(self.other_turn, turns[other], signed[other])
        _bump(self.msg_tokens, msgs[other], signed[other])
        _bump(self.attach_turn, turns[attach], signed[attach])
        ones = np.full(t.n, sign, dtype=np.int64)
        _bump(self.msg_refs, msgs, ones, drop_zero=True)
        for turn, msg in zip(turns[users].tolist(), msgs[users].tolist()):
            self._user_text(turn, msg, sign)
        _bump(self.turn_refs, turns, ones, drop_zero=True)
        # as `add` keeps it part by part: the highest turn that still has a part
        self.max_turn = max(self.turn_refs, default=0)

    def layers(self) -> dict[str, int]:
        turn = self.max_turn
        cur_a = self.attach_turn.get(turn, 0) if turn > 0 else 0
        cur_o = self.other_turn.get(turn, 0) if turn > 0 else 0
        users = self.user_msgs.get(turn) if turn > 0 else None
        prompt = self.msg_tokens.get(min(users), 0) if users else 0
        return {"system": self.system + self.overhead, "tools": self.tools,
                "carried": self.attach - cur_a, "current": cur_a + cur_o - prompt,
                "history": self.other - cur_o, "prompt": prompt}

    @property
    def messages(self) -> int:
        return len(self.msg_refs)


def empty_ledger() -> pd.DataFrame:
    return pd.DataFrame(columns=["session", "event", "call", "stage", "action", "part", "role",
                                 "kind", "tool_name", "file_path", "tokens", "reason"])


class Anchor:
    """The previous call's reported input, for ``trigger_on="reported"``.

    Valid while the replayed request is still the logged one: before the log's first
    recorded compaction (``until``) and before the replay's first event.
    """

    def __init__(self, until: float) -> None:
        self.until = until
        self.prev: tuple[int, int] | None = None  # (reported input, estimated total)
        self.replayed = False

    def checked(self, total: int) -> int | None:
        """The trigger's measure at this call, or None when the estimate applies."""
        if self.replayed or self.prev is None:
            return None
        return self.prev[0] + (total - self.prev[1])

    def passed(self, end: float, input_total: Any, total: int) -> None:
        """Remember a call that went out as logged."""
        known = input_total is not None and not pd.isna(input_total)
        self.prev = (int(input_total), int(total)) if known and end < self.until else None

    def resume(self, previous: Replay, base: Transcript, session: str, first: int,
               total_at: Callable[[float], int] | None) -> None:
        """Pick up from the calls a rewound replay kept; ``total_at(end)``: the request
        total at a call counted as the resumed walk counts, when its estimator or overhead
        is not the previous replay's (None: the kept row's count is the walk's)."""
        ev = previous.events
        # as in a walk, only an event made (not a failed attempt) ends the logged request
        self.replayed = bool(len(ev) and ((ev["session"] == session)
                                          & ev["event"].notna()).any())
        c = previous.calls
        kept = c[(c["session"] == session) & (c["call"] < first)]
        if len(kept) and not self.replayed:
            last = kept.iloc[-1]
            bc = base.calls
            end = float(bc.loc[(bc["session"] == session) & (bc["call"] == last["call"]),
                               "input_end_pos"].iloc[0])
            self.passed(end, last["input_total"], int(last["tokens_before"])
                        if total_at is None else total_at(end))


def window_of(model: Any, default: int | None = None) -> int:
    """The context window of a model (registry lookup, cached); ``default``: the window of
    a model the registry does not know (None: the registry's fallback)."""
    key = (model if isinstance(model, str) else None, default)
    if key not in _WINDOWS:
        _WINDOWS[key] = model_window(*key)
    return _WINDOWS[key]


_WINDOWS: dict[tuple[str | None, int | None], int] = {}


def apply_to_sums(sums: Sums, made: list[StageRun]) -> None:
    """Take out of the sums what the runs hid and add what they inserted."""
    for run in made:
        for frame, sign in ((run.removed, -1), (run.added, +1)):
            if frame is not None and not frame.empty:
                sums.add_table(frame, sign)


_ROW_BY_ROW = 16
"""`Sums.add_table` adds a table of at most this many parts row by row."""


def _bump(per: dict[int, int], keys: np.ndarray, values: np.ndarray,
          drop_zero: bool = False) -> None:
    """Add each value to its key's entry (``drop_zero``: an entry that reaches 0 goes).

    Example:
        >>> d = {1: 5, 2: 1}
        >>> _bump(d, np.array([2, 3, 1, 3]), np.array([-1, 4, 2, 1]), drop_zero=True)
        >>> d
        {1: 7, 3: 5}
    """
    if not len(keys):
        return
    u, inv = np.unique(keys, return_inverse=True)
    sums = np.zeros(len(u), dtype=np.int64)
    np.add.at(sums, inv, values)
    for k, v in zip(u.tolist(), sums.tolist()):
        n = per.get(k, 0) + v
        if n or not drop_zero:
            per[k] = n
        else:
            per.pop(k, None)


_LEDGER_TEXT = ("role", "kind", "tool_name", "file_path")


def ledger_rows(session: str, compactions: list[tuple[int, list[StageRun]]]) -> pd.DataFrame:
    """One row per part each compaction hid or inserted: per compaction the hidden parts
    in position order, then the inserted ones (a part inserted and hidden in the same
    compaction is in both)."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in (
        "pos", "part", "tokens", *_LEDGER_TEXT)}
    each: dict[str, list[Any]] = {k: [] for k in (    # one value per frame, repeated
        "order", "action", "event", "call", "stage", "reason")}
    sizes: list[int] = []
    for i, (call, made) in enumerate(compactions):
        for run in made:
            for action, frame in ((0, run.removed), (1, run.added)):
                if frame is None or frame.empty:
                    continue
                sizes.append(len(frame))
                for k, v in (("order", i), ("action", action), ("event", int(run.event)),
                             ("call", call), ("stage", run.stage), ("reason", run.reason)):
                    each[k].append(v)
                cols["pos"].append(np.asarray(frame.col("pos"), dtype=np.float64))
                cols["part"].append(frame.ints("part"))
                cols["tokens"].append(frame.ints("tokens"))
                for c in _LEDGER_TEXT:
                    cols[c].append(frame.col(c))
    if not sizes:
        return empty_ledger()
    flat = {k: np.concatenate(v) for k, v in cols.items()}
    for k, v in each.items():
        flat[k] = np.repeat(np.array(v, dtype=object if k in ("stage", "reason") else None),
                            sizes)
    order = np.lexsort((flat["pos"], flat["action"], flat["order"]))
    out = {k: v[order] for k, v in flat.items()}
    n = len(order)
    text = {k: pd.array(v, dtype=TEXT) for k, v in (
        ("session", [session] * n), ("stage", out["stage"]),
        ("action", np.where(out["action"] == 0, "hidden", "inserted").astype(object)),
        ("role", out["role"]), ("kind", out["kind"]), ("tool_name", out["tool_name"]),
        ("file_path", out["file_path"]), ("reason", out["reason"]))}
    return pd.DataFrame({
        "session": text["session"], "event": out["event"], "call": out["call"],
        "stage": text["stage"], "action": text["action"], "part": out["part"],
        "role": text["role"], "kind": text["kind"], "tool_name": text["tool_name"],
        "file_path": text["file_path"], "tokens": out["tokens"], "reason": text["reason"]})


_BEFORE = tuple(f"{k}_before" for k in ("system", "tools", "carried", "current", "history",
                                          "prompt"))
_AFTER = tuple(f"{k}_after" for k in ("system", "tools", "carried", "current", "history",
                                        "prompt"))


def call_row(session: str, call: int, model: Any, input_total: Any, layers: dict[str, int],
             total: int, limit: int, win: int, p: Pipeline, target_ratio: float,
             one_turn: Callable[[], bool]) -> dict[str, Any]:
    usage = total / limit if limit else np.inf
    row: dict[str, Any] = {"session": session, "call": call, "model": model,
                           "input_total": input_total, "tokens_before": total}
    row.update(zip(_BEFORE, layers.values()))
    row.update({"usage_before": usage, "limit_tokens": limit, "window_tokens": win})
    row.update(zip(_AFTER, layers.values()))
    row.update({"tokens_after": total, "usage_after": usage,
                "target_tokens": int(target_ratio * limit), "triggered": False,
                "compacted": False, "stages_used": "", "within_target": True,
                "over_window": total > win,
                "forced_final": forced_final(p, total, limit, lambda: layers["tools"],
                                             one_turn),
                "note": ""})
    if total > win:
        row["note"] = (f"over the {win:,}-token window, but the trigger did not fire "
                       f"(it measures {trigger_scope(p)})")
    return row


def after_values(layers: dict[str, int], total: int, limit: int) -> dict[str, Any]:
    out: dict[str, Any] = dict(zip(_AFTER, layers.values()))
    out["tokens_after"] = int(total)
    out["usage_after"] = total / limit if limit else np.inf
    return out


def event_row(session: str, call: int, run: Any) -> dict[str, Any]:
    """One row of `Replay.events`: a stage application that made an event, or one whose
    backend failed (``event`` NA, ``failure`` its kind, ``reason`` the error)."""
    return {"session": session, "event": run.event, "call": call, "stage": run.stage,
            "tokens_before": run.tokens_before, "tokens_after": run.tokens_after,
            "tokens_saved": run.tokens_saved, "hidden": run.hidden, "inserted": run.inserted,
            "summarizer_calls": run.summarizer_calls,
            "summarizer_input_tokens": run.summarizer_input_tokens,
            "summarizer_output_tokens": run.summarizer_output_tokens,
            "summarizer_ms": run.summarizer_ms, "grammar_before": run.grammar_before,
            "grammar_after": run.grammar_after, "ms": run.ms, "reason": run.reason,
            "failure": run.failure}


def events_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """`Replay.events` from `event_row` rows: ``event`` as Int64 (NA for failures)."""
    if not rows:
        return pd.DataFrame(columns=["session", "event", "call", "stage", "failure"])
    df = pd.DataFrame(rows)
    df["event"] = df["event"].astype("Int64")
    df["failure"] = df["failure"].astype(TEXT)
    return df


def over_target_note(calls: pd.DataFrame) -> str | None:
    """What the summary's ``compactions`` (calls at which the trigger fired) does not say:
    the triggered calls whose request no stage brought within its target, which were sent
    over it (``calls``: `Replay.calls`; a forced final turn is counted apart, as
    ``forced_final``). None when every triggered request ended within its target.

    Example:
        >>> calls = pd.DataFrame({"session": "s", "call": [3, 4], "triggered": True,
        ...     "within_target": [True, False], "forced_final": False,
        ...     "tokens_after": [90, 130], "target_tokens": 100, "limit_tokens": 100,
        ...     "note": ["", "stages exhausted, still over target (prune: nothing to do)"]})
        >>> print(over_target_note(calls))
        the trigger fired at 2 calls (the summary's compactions), but at 1 of them no \
stage brought the request within its target: sent at up to 130 tokens (130.0% of the \
limit); first at call 4: stages exhausted, still over target (prune: nothing to do)
    """
    if calls.empty:
        return None
    fired = calls["triggered"].astype(bool)
    over = calls[fired & ~calls["within_target"].astype(bool)
                 & ~calls["forced_final"].astype(bool)]
    if over.empty:
        return None
    worst = over.loc[over["tokens_after"].idxmax()]
    limit = int(worst["limit_tokens"])
    whose = "the" if calls["limit_tokens"].nunique() == 1 else "its call's"
    first = over.iloc[0]
    where = f"call {int(first['call'])}" if calls["session"].nunique() == 1 else \
        f"session {first['session']} call {int(first['call'])}"
    n, m = int(fired.sum()), len(over)
    share = f"{int(worst['tokens_after']) / limit:.1%} of {whose} limit" if limit else \
        f"{whose} limit is 0 tokens: a {int(worst['window_tokens']):,}-token window " \
        f"leaves no room once output is kept"
    return (f"the trigger fired at {n:,} call{'' if n == 1 else 's'} (the summary's "
            f"compactions), but at {m:,} of them no stage brought the request within its "
            f"target: sent at up to {int(worst['tokens_after']):,} tokens "
            f"({share}); first at {where}: {first['note']}")
