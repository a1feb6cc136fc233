"""What compaction loses: artifact retention per event and needed-fact recall per call.

Agents lean on a few kinds of *artifacts*: file paths, shell commands, error lines,
code identifiers, numbers, dates and the user's instructions. `artifacts` extracts
them from a column of texts with regular expressions (one ``str.extractall`` pass
per family over the whole column). Artifacts are compared by normalised value: an
artifact is "in context" when a visible part yields the same (kind, value).

`retention_df`: for each compaction event, how many distinct artifacts the parts it
hid held, and how many of them the request right after the event still shows (in the
summary, a placeholder or any other visible part). `needed_recall_df`: for each call,
the artifacts its output refers to that were stated earlier in the log (*needed*), and
those of them no part of the call's input showed (*missing*). Both use visibility
intervals (`ctxlab.visibility`): each part is extracted once, never per call.

Extraction rules (precision limits in brackets):

* ``path``: absolute (``/a/b``, ``~/a``, ``./a``, two segments or an extension),
  relative with a slash and an extension (``src/app/config.py``), or a bare file name
  with a common extension (``README.md``). Trailing punctuation is not part of it.
  [``src/x.py`` and ``/repo/src/x.py`` are different values; URLs yield no path.]
* ``command``: the ``command``/``cmd`` argument of a shell tool call (``Bash``,
  ``shell``, ``run_shell_command``...; a list form is joined and a ``bash -lc`` prefix
  dropped), and lines starting with ``$ `` (after an optional bullet or backtick).
  [Commands in fenced code blocks are not seen.]
* ``error``: a line containing ``Error:``, ``Exception``, ``Traceback``, ``FAILED``,
  ``error[``, ``fatal:``, ``panic:``, ``ERROR`` or starting with ``error``; code lines
  (``except``, ``class``, ``raise``...) are skipped; pytest's ``E`` prefix and
  ``[ 40%]`` suffix are removed. [A summary that merges or rewords lines loses them.]
* ``identifier``: snake_case (``parse_invoices``, ``CTX_TOKEN_924E``), camelCase,
  PascalCase with two humps (``RateLimiter``), dotted names of segments of two or more
  characters (``os.environ``, ``pg-staging-821.internal``) and ticket-like ids
  (``MARLIN-15``). Single words, ``e.g.``, ``3.11`` and tool-call argument keys are
  not. [Product names such as ``GitHub`` count; ``HTTPServer`` does not.]
* ``number``: three or more integer digits (``8387``, ``429``, ``178,587`` →
  ``178587``), or any number with a unit (``87 requests``, ``30 s``, ``15%``), a
  currency sign (``€178587``), after ``port`` or ``#`` (``#42``). Parts of dotted
  chains (versions ``3.11.2``, addresses ``127.0.0.1``), of words (``v2``,
  ``924E``), of dashed runs (``2026-01-12``, ``pg-staging-821``) and pytest's
  ``[ 40%]`` are not numbers; ``3.11`` alone has one integer digit and no unit, so it
  is not one either.
* ``date``: ``2026-03-23``, ``23 March 2026``, ``March 23, 2026`` → ISO ``2026-03-23``.
* ``instruction``: a sentence of a real user message (or of a compaction summary,
  which restates them) with must, never, always, please, use, don't, do not, should,
  make sure, avoid, keep or prefer. [Compared verbatim: a paraphrase is a loss.]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.layers import INJECTED_CONTEXT
from ctxlab.schema import Transcript

ArtifactKind = Literal["path", "command", "error", "identifier", "number", "date",
                       "instruction"]
ARTIFACT_KINDS: tuple[str, ...] = get_args(ArtifactKind)
HISTORY_EDITS = frozenset({"rewind", "system_prompt"})
"""Event origins that edit the recorded history itself: never counted as compaction."""

_EXT = ("py|pyi|ipynb|md|rst|txt|json|jsonl|toml|ya?ml|ini|cfg|conf|env|lock|tsx?|jsx?|mjs|"
        "cjs|s?css|html?|vue|svelte|rs|go|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|sh|bash|zsh|"
        "sql|csv|tsv|xml|log|pdf|png|jpe?g|gif|svg|lua|tf|proto|gradle|b64|patch|diff")
_MONTH = ("Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
          "Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?")
_UNIT = (r"%(?!\])|ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|"
         r"years?|k|[kmgt]i?b|bytes?|tokens?|chars?|characters?|lines?|rows?|requests?|reqs?|"
         r"rps|qps|calls?|items?|records?|retries|attempts?|workers?|threads?|connections?|"
         r"files?|tests?|users?|messages?|entries|steps?|pages?|px|usd|eur|dollars?|euros?")
_SEG = r"[A-Za-z_][\w-]*\w"
_TOKENS = (
    r"(?<!\w)(?:"
    # paths: absolute (2+ segments or an extension), relative with an extension, bare file
    r"(?<![\w./\\+:@-])(?P<path>(?:~|\.\.?)?/(?:[\w.@+-]+/)+[\w.@+-]*[\w@+-]"
    r"|(?:~|\.\.?)?/[\w@+-]+\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/@+-]|\.\w)"
    r"|(?:[\w.@+-]+/)+[\w.@+-]*\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/@+-]|\.\w)"
    rf"|[\w@+-]+(?:\.[\w@+-]+)*\.(?:{_EXT})(?![\w/@+-]|\.\w))"
    # dates
    rf"|(?<![\w.-])(?:(?P<iso>\d{{4}}-[01]\d-[0-3]\d)(?![\w-])"
    rf"|(?P<d1>[0-3]?\d)\s+(?P<m1>{_MONTH})\.?,?\s+(?P<y1>\d{{4}})(?!\w)"
    rf"|(?P<m2>{_MONTH})\.?\s+(?P<d2>[0-3]?\d)(?:st|nd|rd|th)?,?\s+(?P<y2>\d{{4}})(?!\w))"
    # identifiers: dotted, ticket-like, snake_case, camelCase, PascalCase
    rf"|(?<![\w./\\+-])(?P<ident>{_SEG}(?:\.{_SEG})+|[A-Z][A-Z0-9]+-\d+"
    r"|_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+"
    r"|[A-Z]+[a-z0-9]+(?:[A-Z][a-z0-9]*)+)(?![\w-]|\.\w)(?!\"?\s*:\s)"
    # numbers: qualified by digits, unit, currency, port or #
    r"|(?:(?P<mark>\b[Pp]ort[ =:]|#)|(?<![\w.,-]))(?P<cur>[$€£¥])?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![.,]\d|-\d)"
    rf"(?:\s?(?P<unit>(?i:{_UNIT}))(?!\w))?(?![\w→\t]))")
_ERROR = (r"(?m)^[^\S\n]*(?P<error>(?:[^\n]*?(?=[EFTefp])(?:Error:|Exception\b|\bTraceback\b|\bFAILED\b|"
          r"\berror\[|\bfatal:|\bpanic:|\bERROR\b)|error\b)[^\n]*)")
_CODE_LINE = r"(?:except|class|def|raise|import|from|catch|throw|if|elif|return|assert)\b"
_DOLLAR = r"(?m)^[^\S\n]*(?:[-*][^\S\n]+)?`?\$ (?P<cmd>[^`\n]+)"
_SHELL = (r"(?s)^(?i:bash|shell|sh|terminal|run_shell_command|shell_command|exec_command|"
          r"execute_bash|execute_command|run_command|run_terminal_cmd|local_shell|exec)\(\{.*?"
          r"\"(?:command|cmd)\"\s*:\s*(?:\"(?P<s>(?:[^\"\\]|\\.)*)\"|\[(?P<a>[^\]]*)\])")
_KEYWORD = (r"\b(?:must|mustn['’]t|never|always|please|use|don['’]t|do not|should|"
            r"shouldn['’]t|make sure|avoid|keep|prefer)\b")
_BODY = r"(?:[^.!?\n]|[.!?](?!\s|$))"
_INSTRUCTION = rf"(?im)(?:^|(?<=[.!?])[^\S\n]+)(?P<ins>{_BODY}*?{_KEYWORD}{_BODY}*[.!?]?)"
_TOOL_CALL = r"^[\w.-]+\(\{"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "n": "\n", "r": " ", "t": " "}
_MONTHS = {m: f"{i:02d}" for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug",
                                       "sep", "oct", "nov", "dec"), start=1)}
_COLUMNS = ("row", "kind", "value")


def _unescape(s: pd.Series) -> pd.Series:
    return s.str.replace(r'\\(["\\/nrt])', lambda m: _ESCAPES[m.group(1)], regex=True)


def _frame(row: Any, kind: str, value: pd.Series) -> pd.DataFrame:
    return pd.DataFrame({"row": row, "kind": kind, "value": value.astype(object)})


def artifacts(texts: pd.Series, *, user: pd.Series | None = None) -> pd.DataFrame:
    """Artifacts of every text of a column (rules in the module docstring).

    Args:
        texts: one text per row (NA is empty).
        user: per row, whether instructions may be extracted from it (the real user
            messages); None: every row.

    Returns:
        ``row`` (index label in ``texts``), ``kind``, ``value`` (normalised); each
        (row, kind, value) once, ordered by row, kind, value.

    Example:
        >>> s = pd.Series(["Please use port 8387 and edit src/app/config.py, not 3.11.",
        ...                'Bash({"command": "pytest -q"})'])
        >>> [tuple(r) for r in artifacts(s).itertuples(index=False)]  # doctest: +NORMALIZE_WHITESPACE
        [(0, 'path', 'src/app/config.py'), (0, 'number', '8387'),
         (0, 'instruction', 'Please use port 8387 and edit src/app/config.py, not 3.11'),
         (1, 'command', 'pytest -q')]
    """
    raw = texts.astype("string").fillna("")
    tool = raw.str.contains(_TOOL_CALL, regex=True)
    text = raw.copy()
    if tool.any():  # JSON-escaped arguments: unescape, drop the tool name and keys
        body = _unescape(raw[tool].str.replace(r'(?<=[{,])\s*"[\w-]+"\s*:', " :", regex=True))
        text[tool] = body.str.replace(r"^[\w.-]+\(", "(", regex=True)
    frames = [_tokens(text), _errors(text), _commands(raw[tool], text),
              _instructions(text if user is None else text[user.to_numpy(dtype=bool)])]
    out = pd.concat([f for f in frames if len(f)] or [_frame([], "path", pd.Series([]))],
                    ignore_index=True)
    out = out[out["value"].str.len() > 0].drop_duplicates(["row", "kind", "value"])
    order = out["kind"].map({k: i for i, k in enumerate(ARTIFACT_KINDS)})
    out = out.assign(_o=order).sort_values(["row", "_o", "value"], kind="stable")
    return out.drop(columns="_o").reset_index(drop=True)[list(_COLUMNS)]


def _tokens(text: pd.Series) -> pd.DataFrame:
    m = text.str.extractall(_TOKENS)
    if m.empty:
        return _frame([], "path", pd.Series([]))
    row = m.index.get_level_values(0)
    out = [_frame(row, "path", m["path"]), _frame(row, "identifier", m["ident"])]
    iso = m["iso"].fillna("")
    for d, mo, y in (("d1", "m1", "y1"), ("d2", "m2", "y2")):
        month = m[mo].str[:3].str.lower().map(_MONTHS)
        alt = m[y] + "-" + month + "-" + m[d].str.zfill(2)
        iso = iso.where(m[mo].isna(), alt)
    out.append(_frame(row, "date", iso.where(iso != "")))
    num = m["num"].str.replace(",", "", regex=False)
    unit = m["unit"].str.lower()
    digits = num.str.split(".", n=1).str[0].str.len()
    keep = ((digits >= 3).fillna(False) | unit.notna() | m["cur"].notna()
            | m["mark"].notna()) & num.notna()
    value = m["cur"].fillna("") + num
    value = value.where(m["mark"].ne("#").fillna(True), "#" + value)
    sep = pd.Series(" ", index=unit.index, dtype="string").where(unit != "%", "")
    value = value.where(unit.isna(), value + sep + unit)
    out.append(_frame(row, "number", value.where(keep)))
    return pd.concat([o.dropna(subset=["value"]) for o in out], ignore_index=True)


def _errors(text: pd.Series) -> pd.DataFrame:
    m = text.str.extractall(_ERROR)
    if m.empty:
        return _frame([], "error", pd.Series([]))
    line = m["error"].str.strip().str.replace(r"^E\s+", "", regex=True)
    line = line.str.replace(r"\s*\[\s*\d+%\]$", "", regex=True)
    line = line.str.replace(r"\s+", " ", regex=True).str[:300]
    line = line.where(~line.str.match(_CODE_LINE))
    return _frame(m.index.get_level_values(0), "error", line).dropna(subset=["value"])


def _commands(tool_raw: pd.Series, text: pd.Series) -> pd.DataFrame:
    frames = []
    if len(tool_raw):
        m = tool_raw.str.extract(_SHELL).dropna(how="all")
        single = _unescape(m["s"].dropna())
        parts = m["a"].dropna().str.extractall(r'"((?:[^"\\]|\\.)*)"')[0]
        joined = _unescape(parts).groupby(level=0).agg(" ".join)
        joined = joined.str.replace(r"^(?:ba|z)?sh -l?c ", "", regex=True)
        for s in (single, joined):
            frames.append(_frame(s.index, "command", s.str.strip()))
    d = text.str.extractall(_DOLLAR)
    if len(d):
        frames.append(_frame(d.index.get_level_values(0), "command", d["cmd"].str.strip()))
    return pd.concat(frames, ignore_index=True) if frames else \
        _frame([], "command", pd.Series([]))


def _instructions(text: pd.Series) -> pd.DataFrame:
    m = text.str.extractall(_INSTRUCTION) if len(text) else pd.DataFrame()
    if m.empty:
        return _frame([], "instruction", pd.Series([]))
    s = m["ins"].str.replace(r"^[\s\-*>\"'“”‘’`•]+|[\s\"'“”‘’`.…]+$", "", regex=True)
    s = s.str.replace(r"\s+", " ", regex=True).str[:300]
    return _frame(m.index.get_level_values(0), "instruction", s)


def _instruction_rows(f: pd.DataFrame) -> pd.Series:
    """Real user messages (the first message of each turn) and compaction summaries."""
    turn = f["turn"].fillna(0)
    first = f.groupby(["session", "turn"], sort=False)["msg"].transform("min")
    real = (turn > 0) & (f["msg"] == first) & (f["role"] == "user") & (f["kind"] == "text")
    injected = f["content"].fillna("").str.match(INJECTED_CONTEXT)
    return ((real & ~injected) | (f["kind"] == "summary")).fillna(False).astype(bool)


def part_artifacts(t: Transcript) -> pd.DataFrame:
    """`artifacts` of every part of a transcript: ``row`` is the row position in ``t.frame``.

    Adds ``session`` and ``aid`` (one integer per distinct session, kind and value).
    """
    f = t.frame
    texts = f["content"].reset_index(drop=True)
    occ = artifacts(texts, user=_instruction_rows(f).reset_index(drop=True))
    occ["session"] = f["session"].to_numpy(dtype=object)[occ["row"].to_numpy(dtype=np.int64)]
    occ["aid"] = occ.groupby(["session", "kind", "value"], sort=True).ngroup()
    return occ


def _spans(f: pd.DataFrame, ev: pd.DataFrame,
           kept: Iterable[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per part, ``(lo, hi]`` of input ends that see it; only ``kept`` events count
    (None: all): parts inserted by other events never show, parts they hid stay shown."""
    pos_of = dict(zip(ev["event"].astype("int64"), ev["pos"].astype("float64")))
    keep = set(pos_of) if kept is None else set(kept)
    missing = {int(e) for e in pd.concat([f["event"], f["hidden_by"]]).dropna()} - set(pos_of)
    if missing:
        raise ValueError(f"parts refer to events {sorted(missing)[:5]} that the events "
                         f"table lacks")

    def at(ids: pd.Series, absent: float) -> np.ndarray:
        kept_pos = {e: p for e, p in pos_of.items() if e in keep}
        where = ids.astype("Float64").map(kept_pos).astype("float64").fillna(np.inf)
        return np.where(ids.isna().to_numpy(), absent, where.to_numpy(dtype=float))

    return np.maximum(f["pos"].to_numpy(dtype=float), at(f["event"], -np.inf)), \
        at(f["hidden_by"], np.inf)


def _stabbed(q_key: np.ndarray, q: np.ndarray, key: np.ndarray, lo: np.ndarray,
             hi: np.ndarray) -> np.ndarray:
    """For each query ``(key, q)``: does an interval of that key have ``lo < q <= hi``?

    One sort and one ``merge_asof``: the largest ``hi`` among intervals with ``lo < q``.

    Example:
        >>> _stabbed(np.array([0, 0, 1]), np.array([1.5, 3.0, 1.5]), np.array([0, 1]),
        ...          np.array([1.0, 0.0]), np.array([2.0, 1.0])).tolist()
        [True, False, False]
    """
    out = np.zeros(len(q), dtype=bool)
    ok = lo < hi
    if not len(q) or not ok.any():
        return out
    right = pd.DataFrame({"key": key[ok].astype(np.int64), "lo": lo[ok].astype(float),
                          "hi": hi[ok].astype(float)}).sort_values("lo", kind="stable")
    right["hi"] = right.groupby("key")["hi"].cummax()
    left = pd.DataFrame({"key": q_key.astype(np.int64), "q": q.astype(float),
                         "i": np.arange(len(q))}).sort_values("q", kind="stable")
    m = pd.merge_asof(left, right, left_on="q", right_on="lo", by="key",
                      allow_exact_matches=False, direction="backward")
    out[m["i"].to_numpy()] = (m["hi"] >= m["q"]).to_numpy(dtype=bool, na_value=False)
    return out


def _per_session(t: Transcript) -> Iterable[tuple[str, np.ndarray, pd.DataFrame, pd.DataFrame]]:
    """(session, row positions in t.frame, its events, its calls) for every session."""
    ev_idx = t.events.groupby("session", sort=False).indices
    call_idx = t.calls.groupby("session", sort=False).indices
    for s, idx in t.frame.groupby("session", sort=False).indices.items():
        yield (s, idx, t.events.iloc[ev_idx.get(s, [])],
               t.calls.iloc[call_idx.get(s, [])])


def _kinds(kinds: Iterable[str] | None) -> tuple[str, ...]:
    chosen = ARTIFACT_KINDS if kinds is None else tuple(kinds)
    bad = sorted(set(chosen) - set(ARTIFACT_KINDS))
    if bad or not chosen:
        raise ConfigError(f"unknown artifact kinds {bad or chosen!r}; kinds: "
                          f"{', '.join(ARTIFACT_KINDS)}")
    return chosen


def needed_facts_df(t: Transcript, *, kinds: Iterable[str] | None = None) -> pd.DataFrame:
    """Every needed artifact of every call, and whether the call's input missed it.

    An artifact is *needed* at call k when a part call k produced mentions it and a
    part of the log before k's input end mentioned it too (an original part, visible
    then when compaction is ignored: parts that compaction events inserted are not
    statements). It is *missing* when no part of k's input (summaries and placeholders
    included) mentions it.

    Args:
        t: an annotated transcript (compaction events and the parts they hid/inserted).
        kinds: artifact kinds to count (default: all of `ARTIFACT_KINDS`).

    Returns:
        ``session``, ``call``, ``kind``, ``value``, ``missing``.
    """
    chosen = _kinds(kinds)
    cols = {"session": "string", "call": "int64", "kind": "string", "value": "object",
            "missing": "bool"}
    f = t.frame
    occ = part_artifacts(t)
    occ = occ[occ["kind"].isin(chosen)]
    n = len(f)
    lo, hi = np.full(n, np.inf), np.full(n, np.inf)
    base_lo, base_hi = np.full(n, np.inf), np.full(n, np.inf)
    for _, idx, ev, _calls in _per_session(t):
        fs = f.iloc[idx]
        lo[idx], hi[idx] = _spans(fs, ev)
        kept = ev.loc[ev["origin"].isin(list(HISTORY_EDITS)), "event"].astype("int64")
        base_lo[idx], base_hi[idx] = _spans(fs, ev, kept=kept.tolist())
    rows = occ["row"].to_numpy(dtype=np.int64)
    produced = ((f["role"].to_numpy(dtype=object)[rows] == "assistant")
                & f["call"].notna().to_numpy()[rows] & f["event"].isna().to_numpy()[rows])
    out = occ.loc[produced, ["session", "kind", "value", "aid"]].copy()
    out["call"] = f["call"].to_numpy(dtype=object)[rows[produced]]
    out = out.drop_duplicates(["session", "call", "aid"])
    ends = t.calls[["session", "call", "input_end_pos"]].astype(
        {"session": object, "call": "int64"})
    out = out.astype({"session": object, "call": "int64"}).merge(ends, on=["session", "call"])
    if out.empty:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in cols.items()})
    key, q = out["aid"].to_numpy(), out["input_end_pos"].to_numpy(dtype=float)
    aid = occ["aid"].to_numpy()
    stated = _stabbed(key, q, aid, base_lo[rows], base_hi[rows])
    seen = _stabbed(key, q, aid, lo[rows], hi[rows])
    out = out[stated].assign(missing=~seen[stated])
    order = out["kind"].map({k: i for i, k in enumerate(ARTIFACT_KINDS)})
    out = out.assign(_o=order).sort_values(["session", "call", "_o", "value"], kind="stable")
    return out[list(cols)].astype(cols).reset_index(drop=True)


def needed_recall_df(t: Transcript, *, kinds: Iterable[str] | None = None) -> pd.DataFrame:
    """Needed-fact recall of every call (see `needed_facts_df` for the definitions).

    Returns:
        One row per call of ``t.calls``: ``session``, ``call``, ``needed``, ``missing``,
        ``recall`` (1 − missing/needed; NaN when nothing was needed) and
        ``missing_values`` (tuple of the missing values, by kind then value).

    Example:
        >>> import ctxlab
        >>> t = ctxlab.load("datasets/coding_session.jsonl")  # with its recorded compaction
        >>> r = needed_recall_df(t, kinds=["number"]).set_index("call")
        >>> r.loc[95, "missing_values"], r.loc[46, "recall"]
        (('8387',), 1.0)
    """
    facts = needed_facts_df(t, kinds=kinds)
    calls = t.calls[["session", "call"]].astype({"session": object, "call": "int64"})
    g = facts.astype({"session": object}).groupby(["session", "call"], sort=False)
    agg = pd.DataFrame({"needed": g.size(), "missing": g["missing"].sum()})
    lost = facts[facts["missing"]].astype({"session": object})
    values = lost.groupby(["session", "call"], sort=False)["value"].agg(tuple)
    out = calls.merge(agg.reset_index(), on=["session", "call"], how="left")
    out = out.merge(values.rename("missing_values").reset_index(), on=["session", "call"],
                    how="left")
    out[["needed", "missing"]] = out[["needed", "missing"]].fillna(0).astype("int64")
    with np.errstate(invalid="ignore", divide="ignore"):
        out["recall"] = np.where(out["needed"] > 0,
                                 1.0 - out["missing"] / out["needed"].where(out["needed"] > 0),
                                 np.nan)
    out["missing_values"] = [v if isinstance(v, tuple) else () for v in out["missing_values"]]
    out["session"] = out["session"].astype("string")
    return out[["session", "call", "needed", "missing", "recall", "missing_values"]]


def recall_summary(t: Transcript, *, kinds: Iterable[str] | None = None) -> dict[str, Any]:
    """Summary numbers of `needed_recall_df` (plain data)."""
    return summarize_recall(needed_recall_df(t, kinds=kinds))


def summarize_recall(df: pd.DataFrame) -> dict[str, Any]:
    """``calls``, ``calls_needing``, ``needed``, ``missing``, ``recall`` (pooled over calls:
    1 − total missing / total needed, NaN when nothing was needed), ``mean_call_recall``
    and ``calls_with_missing`` of a `needed_recall_df` result.

    Example:
        >>> df = pd.DataFrame({"needed": [4, 0, 2], "missing": [1, 0, 0],
        ...                    "recall": [0.75, float("nan"), 1.0]})
        >>> summarize_recall(df)["recall"], summarize_recall(df)["calls_with_missing"]
        (0.8333333333333334, 1)
    """
    needed, missing = int(df["needed"].sum()), int(df["missing"].sum())
    mean = df["recall"].mean()
    return {"calls": len(df), "calls_needing": int((df["needed"] > 0).sum()),
            "needed": needed, "missing": missing,
            "recall": 1.0 - missing / needed if needed else math.nan,
            "mean_call_recall": float(mean) if pd.notna(mean) else math.nan,
            "calls_with_missing": int((df["missing"] > 0).sum())}


def retention_df(t: Transcript, *, include_recorded: bool = False) -> pd.DataFrame:
    """What each compaction event kept of the artifacts in the parts it hid.

    The request right after an event is the first call whose input ends after the
    event, as it stood once that event (and the ones before it) had applied: an
    artifact of a hidden part is retained when any part visible there (the event's
    summary or placeholders, other parts) has the same kind and value.

    Args:
        t: an annotated transcript.
        include_recorded: also measure recorded compactions (e.g. Claude Code's own).

    Returns:
        One row per compaction event that hid parts and per kind of `ARTIFACT_KINDS`
        plus ``"all"``: ``session``, ``event``, ``stage`` (the event's origin),
        ``kind``, ``hidden_artifacts`` (distinct values in the hidden parts),
        ``retained`` and ``retention`` (retained / hidden, NaN when nothing was hidden).
    """
    f, kinds = t.frame, [*ARTIFACT_KINDS, "all"]
    occ = part_artifacts(t)
    rows = occ["row"].to_numpy(dtype=np.int64)
    lo, hi, ordr = np.zeros(len(f)), np.zeros(len(f)), np.full(len(f), -1.0)
    measured: list[pd.DataFrame] = []
    for s, idx, ev, calls in _per_session(t):
        ev = ev.sort_values(["pos", "event"], kind="stable")
        ids = ev["event"].astype("int64").to_numpy()
        order = {int(e): i for i, e in enumerate(ids)}
        ends = np.sort(calls["input_end_pos"].to_numpy(dtype=float))
        nxt = np.searchsorted(ends, ev["pos"].to_numpy(dtype=float), side="right")
        req = np.append(ends, np.inf)[nxt]  # input end of the request after each event
        fs = f.iloc[idx]
        ins = fs["event"].astype("Float64").map(order).astype("float64").fillna(-1.0)
        hid = fs["hidden_by"].astype("Float64").map(order).astype("float64").fillna(len(ids))
        first = np.searchsorted(req, fs["pos"].to_numpy(dtype=float), side="right")
        lo[idx] = np.maximum(ins.to_numpy(), first) - 0.5  # seen after events lo..hi-1
        hi[idx] = hid.to_numpy() - 0.5
        ordr[idx] = fs["hidden_by"].astype("Float64").map(order).astype("float64") \
            .fillna(-1.0).to_numpy()
        skip = HISTORY_EDITS | (set() if include_recorded else {"recorded"})
        hidden_by = fs["hidden_by"].dropna().astype("int64").unique()
        chosen = ev[~ev["origin"].isin(list(skip)) & ev["event"].isin(hidden_by)]
        measured.append(pd.DataFrame({"session": s, "event": chosen["event"].astype("int64"),
                                      "stage": chosen["origin"].astype(object)}))
    events = pd.concat(measured, ignore_index=True) if measured else \
        pd.DataFrame({"session": [], "event": [], "stage": []})
    hid_ids = f["hidden_by"].to_numpy(dtype=object)[rows]
    lost = occ.assign(event=hid_ids, q=ordr[rows])[pd.notna(hid_ids)]
    lost = lost.astype({"event": "int64", "session": object}).merge(
        events[["session", "event"]].astype({"event": "int64"}), on=["session", "event"])
    lost = lost.drop_duplicates(["session", "event", "aid"])
    lost["retained"] = _stabbed(lost["aid"].to_numpy(), lost["q"].to_numpy(dtype=float),
                                occ["aid"].to_numpy(), lo[rows], hi[rows])
    both = pd.concat([lost, lost.assign(kind="all")], ignore_index=True)
    g = both.groupby(["session", "event", "kind"])["retained"].agg(["size", "sum"])
    grid = events.merge(pd.DataFrame({"kind": kinds}), how="cross")
    out = grid.astype({"event": "int64"}).merge(g.reset_index(), how="left",
                                                on=["session", "event", "kind"])
    out["hidden_artifacts"] = out["size"].fillna(0).astype("int64")
    out["retained"] = out["sum"].fillna(0).astype("int64")
    out["retention"] = out["retained"] / out["hidden_artifacts"].where(
        out["hidden_artifacts"] > 0)
    out = out.astype({"session": "string", "stage": "string", "kind": "string"})
    return out[["session", "event", "stage", "kind", "hidden_artifacts", "retained",
                "retention"]].astype({"retention": "float64"})


def retention_summary(t: Transcript, *, include_recorded: bool = False) -> dict[str, Any]:
    """Summary numbers of `retention_df` (plain data)."""
    return summarize_retention(retention_df(t, include_recorded=include_recorded))


def summarize_retention(df: pd.DataFrame) -> dict[str, Any]:
    """``events``, ``hidden_artifacts``, ``retained``, ``retention`` (pooled over events),
    ``mean_retention`` (mean over events) and ``retention_by_kind`` (kind → mean over
    the events that hid that kind) of a `retention_df` result."""
    all_ = df[df["kind"] == "all"]
    hidden, kept = int(all_["hidden_artifacts"].sum()), int(all_["retained"].sum())
    by_kind = df[df["kind"] != "all"].groupby("kind", sort=False)["retention"].mean()
    mean = all_["retention"].mean()
    return {"events": len(all_), "hidden_artifacts": hidden, "retained": kept,
            "retention": kept / hidden if hidden else math.nan,
            "mean_retention": float(mean) if pd.notna(mean) else math.nan,
            "retention_by_kind": {k: float(by_kind.get(k, math.nan)) for k in ARTIFACT_KINDS}}
