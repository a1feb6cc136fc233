"""Artifacts agents rely on — paths, commands, errors, identifiers, numbers, dates,
instructions — extracted from a column of texts, vectorised (`artifacts`).

Rules, with their precision limits in brackets. A text that is a JSON document (a tool
result some clients, e.g. Gemini CLI, store as JSON) is read as its values, one per line
(`json_text`), so the lines of an output start lines again.

* ``path``: absolute (``/a/b``, ``~/a/b``, ``./a.py``: two segments or an extension),
  relative with a slash and an extension (``src/app/config.py``), or a file name with
  a common extension (``README.md``, ``mix.exs``, ``go.mod``); no trailing punctuation.
  [``src/x.py`` and ``/repo/src/x.py`` differ here; `ctxlab.metrics` takes them for one
  file within a session. URLs yield no path; a space ends a path.]
* ``command``: the ``command``/``cmd`` argument of a shell tool call (``Bash``,
  ``shell``, ``run_shell_command``...; a list is joined, ``bash -lc`` dropped), lines
  starting with ``$ `` (after a bullet or backtick), and the first line of a fenced block
  (plain, or ``bash``/``sh``/``shell``/``console``) that ends a text other than a user's
  message: how mini-swe-agent and SWE-agent write the command they run. [Other fenced
  blocks are unseen.]
* ``error``: a line with ``Error:``, ``Exception``, ``Traceback``, ``FAILED``,
  ``error[``, ``fatal:``, ``panic:``, ``ERROR``, a compiler's or type checker's
  diagnostic (``main.c:3:5: error:``, ``x.py:3: error:``, ``app.ts(3,5): error TS2304``)
  or starting with ``error``; code
  lines (``except``, ``class``, ``raise``, ``with``..., also as a diff's ``+``/``-``
  line) are not; pytest's ``E`` prefix and
  ``[ 40%]`` suffix and a file read's line-number gutter (``126→``) are dropped. [A summary
  that merges or rewords lines loses them.]
* ``identifier``: snake_case (``parse_invoices``, ``CTX_TOKEN_924E``), camelCase,
  PascalCase with two humps (``RateLimiter``), dotted names whose segments have two
  or more characters (``os.environ``, ``pg-staging-821.internal``) and ticket-like ids
  (``MARLIN-15``); not single words, ``e.g.``, ``3.11``, tool-call argument keys or
  encodings and algorithms (``UTF-8``, ``SHA-256``).
  [Product names such as ``GitHub`` count; ``HTTPServer`` does not.]
* ``number``: three or more integer digits (``8387``, ``429``; ``178,587`` →
  ``178587``), or any number with a unit (``87 requests``, ``30 s``, ``15%``), a
  currency sign (``€178587``), after ``port`` or ``#`` (``#42``); ``k``/``K`` and ``M``
  right after a number multiply it (``1.5k tokens`` → ``1500 tokens``); a unit has one
  spelling (``30 seconds``, ``30 sec`` → ``30 s``; ``87 reqs`` → ``87 requests``). Only a
  tool call's string arguments count (``"timeout": 120000`` sets the tool). Not numbers: parts
  of dotted chains (versions ``3.11.2``, ``127.0.0.1``), words (``v2``, ``924E``),
  dashed runs (``2026-01-12``, ``pg-staging-821``), subscripts (``test_bulk[798]``),
  line-number gutters (``120→``, ``1475:`` opening a line, grep's ``x.py:1143:``), CSS
  sizes (``12px``), pytest's ``[ 40%]`` or ``[100%]`` and what follows a
  clock's seconds (``10:15:42,123`` in a log line); ``3.11`` alone
  has one integer digit and no unit. [The same number in unrelated places is one artifact.]
* ``date``: ``2026-03-23``, ``23 March 2026``, ``March 23, 2026`` → ``2026-03-23``.
  [Timestamps such as ``2026-03-23T10:00:00Z``, everywhere in logs, are not dates.]
* ``instruction``: a sentence with must, never, always, please, use, don't, do not,
  should, make sure, avoid, keep or prefer, in a real user message (the first message
  of a turn) or a compaction summary (which restates them). [Compared verbatim.]
"""


from __future__ import annotations

import ast
import hashlib
import json
import re
import sys
import threading
from collections import deque
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.layers import INJECTED_CONTEXT

ArtifactKind = Literal["path", "command", "error", "identifier", "number", "date",
                       "instruction"]
ARTIFACT_KINDS: tuple[str, ...] = get_args(ArtifactKind)
_EXT = ("py|pyi|ipynb|md|rst|txt|json|jsonl|toml|ya?ml|ini|cfg|conf|env|lock|tsx?|jsx?|mjs|"
        "cjs|s?css|html?|vue|svelte|rs|go|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|sh|bash|zsh|"
        "sql|csv|tsv|xml|log|pdf|png|jpe?g|gif|svg|lua|tf|proto|gradle|b64|patch|diff|"
        "ex|exs|h?eex|erl|hrl|mod|sum|dart|scala|kts|hs|ml|jl|nix|zig")
_MONTH = ("Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
          "Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?")
_UNIT = (r"%(?!\])|ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|"
         r"years?|k|[kmgt]i?b|bytes?|tokens?|chars?|characters?|lines?|rows?|requests?|reqs?|"
         r"rps|qps|calls?|items?|records?|retries|attempts?|workers?|threads?|connections?|"
         r"files?|tests?|users?|messages?|entries|steps?|pages?|usd|eur|dollars?|euros?")
_SEG = r"[A-Za-z_][\w-]*\w"
_NOT_TICKET = "(?:UTF|UCS|SHA|MD|ISO|CP|HTTP|TLS|SSL|AES|RSA|CRC|BASE|IEC|LATIN)"
"""Names followed by a dash and digits that are encodings, algorithms or protocols
(``UTF-8``, ``SHA-256``, ``ISO-8859``), not ticket ids."""
_PLAIN = r"(?:[a-z]++|[A-Z][a-z]++)(?=[\s,;:!?)\"'\]]|$)"  # a prose word: no token starts here
_UNIT_FIRST = "%abcdefghiklmpqrstuwy"
"""The first letters of `_UNIT`'s spellings (and ``%``)."""
# Each lookahead marked "(only a shortcut)" is implied by what follows it: it changes no
# match, it only lets most positions (prose words, numbers without a unit) fail early
_TOKENS = (
    r"(?m)(?<!\w)(?=[\w~./$€£¥#])"
    # (only a shortcut) a prose word starts no token but ``port 80`` or a date
    rf"(?=[Pp]ort[ =:]|{_MONTH}|(?!{_PLAIN}))(?:"
    # dates that start with the day; numbers, qualified by digits, unit, currency, port or #
    rf"(?<![\w.-])(?P<d1>[0-3]?\d)\s+(?P<m1>{_MONTH})\.?,?\s+(?P<y1>\d{{4}})(?!\w)"
    # (only a shortcut) a number starts with its mark, currency sign or digit
    r"|(?=[Pp#$€£¥]|\d)(?:(?P<mark>\b[Pp]ort[ =:]|#)|(?<![\w.,-])(?<!\w\[)"
    # not a line-number gutter: ``1475:`` opening a line (``404: Not Found`` is no gutter),
    # ``x.py:1143:`` after a file name (grep -n; ``localhost:5432:`` is a port)
    r"(?!^\d+[:-](?!\d)(?! \S)|(?:(?<=\.\w:)|(?<=\.\w\w:)|(?<=\.\w\w\w:)|(?<=\.\w{4}:)"
    r"|(?<=\.\w{5}:))\d+:(?:\d+:)?(?!\d)))(?P<cur>[$€£¥])?"
    r"(?P<num>(?<!\d:)\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![.,]\d|-\d|\.[A-Za-z]|%\])"
    r"(?:(?P<mult>[kK]|M)(?![A-Za-z]))?"
    # (only a shortcut) the first letter of a unit, before trying every spelling
    rf"(?:\s?(?=(?i:[{_UNIT_FIRST}]))(?P<unit>(?i:{_UNIT}))(?!\w))?"
    r"(?![\w→\t]|/(?:[\w.@+-]+/){0,64}[\w.@+-]*\.[A-Za-z])"
    rf"|(?P<m2>{_MONTH})\.?\s+(?P<d2>[0-3]?\d)(?:st|nd|rd|th)?,?\s+(?P<y2>\d{{4}})(?!\w)"
    rf"|(?!{_PLAIN})(?:"
    # paths: absolute (2+ segments or an extension), relative with an extension, bare file
    r"(?<![\w./\\+:@-])(?P<path>(?:~|\.\.?)?/(?:[\w.@+-]+/)+[\w.@+-]*[\w@+-]"
    r"|(?:~|\.\.?)?/[\w@+-]+\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/@+-]|\.\w)"
    r"|(?:[\w.@+-]+/)+[\w.@+-]*\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/@+-]|\.\w)"
    rf"|[\w@+-]+(?:\.[\w@+-]+)*\.(?:{_EXT})(?![\w/@+-]|\.\w))"
    r"|(?<![\w.-])(?P<iso>\d{4}-[01]\d-[0-3]\d)(?![\w-])"
    # identifiers: dotted, ticket-like, snake_case, camelCase, PascalCase
    rf"|(?<![\w./\\+-])(?P<ident>{_SEG}(?:\.{_SEG})+|(?!{_NOT_TICKET}-)[A-Z][A-Z0-9]+-\d+"
    r"|_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+"
    r"|[A-Z]+[a-z0-9]+(?:[A-Z][a-z0-9]*)+)(?![\w-]|\.\w)))")
_ERROR = (r"(?m)^[^\S\n]*(?P<error>(?:[^\n]*?(?=[EFTefp:(])(?:Error:|Exception\b|\bTraceback\b|"
          r"\bFAILED\b|\berror\[|\bfatal:|\bpanic:|\bERROR\b"
          # a compiler's or checker's diagnostic: ``main.c:3:5: error:``, ``x.py:3: error:``,
          # ``app.ts(3,5): error TS2304``, ``x.c:1:10: fatal error:`` (the lookahead above
          # lets the lazy scan skip every other character cheaply)
          r"|(?<=\w):\d+(?::\d+)?:[^\S\n]*(?:fatal[^\S\n]+)?error\b"
          r"|(?<=\w)\(\d+,\d+\):[^\S\n]*error\b)|error\b)[^\n]*)")
_CODE_LINE = (r"(?:except|class|def|raise|import|from|catch|throw|if|elif|return|assert|with|"
              r"rescue)\b")
_DOLLAR = r"(?m)^[^\S\n]*(?:[-*][^\S\n]+)?`?\$ (?P<cmd>[^`\n]+)"
# the fenced block that ends a text (mini-swe-agent's ```bash, SWE-agent's ```): its first
# line is the command the agent runs
_FENCED = (r"(?m)^```(?:bash|sh|shell|console|zsh)?[^\S\n]*\n(?:\$ )?(?P<cmd>[^\n`][^\n]*)\n"
           r"(?:[^`]|`(?!``))*?```\s*\Z")
_SHELL = (r"(?s)^(?i:bash|shell|sh|terminal|run_shell_command|shell_command|exec_command|"
          r"execute_bash|execute_command|run_command|run_terminal_cmd|local_shell|exec)\(\{.*?"
          r"\"(?:command|cmd)\"\s*:\s*(?:\"(?P<s>(?:[^\"\\]|\\.)*)\""
          r"|\[(?P<a>\s*\"(?:[^\"\\]|\\.)*\"(?:\s*,\s*\"(?:[^\"\\]|\\.)*\")*\s*)\])")
_KEYWORD = (r"\b(?:must|mustn['’]t|never|always|please|use|don['’]t|do not|should|"
            r"shouldn['’]t|make sure|avoid|keep|prefer)\b")
_BODY = r"(?:\b(?:e\.g|i\.e|etc|vs|cf)\.|[^.!?\n]|[.!?](?!\s|$))"  # not ended by e.g.
# a sentence starts where one ends (an abbreviation such as e.g. ends none, so starts none):
# the scans from two starts never overlap, and extraction stays linear
_INSTRUCTION = (r"(?im)(?:^|(?<=[.!?])(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\betc\.)(?<!\bvs\.)"
                r"(?<!\bcf\.)[^\S\n]+)"
                rf"(?P<ins>{_BODY}*?{_KEYWORD}{_BODY}*[.!?]?)")
_TOOL_CALL = r"^[\w.-]+\(\{"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "n": "\n", "r": " ", "t": " "}
_MONTHS = {m: f"{i:02d}" for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_COLUMNS = ("row", "kind", "value")
_TOKENS_RE, _ERROR_RE = re.compile(_TOKENS), re.compile(_ERROR)
_DOLLAR_RE, _INSTRUCTION_RE = re.compile(_DOLLAR), re.compile(_INSTRUCTION)
_FENCED_RE = re.compile(_FENCED)
_ERROR_WORDS = ("Error:", "Exception", "Traceback", "FAILED", "error", "fatal:", "panic:",
                "ERROR")
"""Every line `_ERROR` matches holds one of these."""


def _string_arguments(call: str) -> str:
    """A tool call's text without the arguments that set the tool: flags, nulls and the
    numbers of setting keys (`SETTING_KEYS`: ``"timeout": 120000``, ``"offset": 280``)
    state no fact (43% of the needed numbers of the real Claude Code logs were such
    settings); other numbers stay (``"issue_number": 4821``).

    Example:
        >>> _string_arguments('Bash({"command": "sleep 5", "timeout": 120000, "bg": true})')
        'Bash({"command": "sleep 5"})'
        >>> _string_arguments('get_issue({"issue_number": 4821, "limit": 5})')
        'get_issue({"issue_number": 4821})'
    """
    name, _, rest = call.partition("(")
    if not rest.endswith(")"):
        return call
    try:
        args = json.loads(rest[:-1])
    except (ValueError, RecursionError):
        return call

    def strings(v: Any, setting: bool = False) -> Any:
        if isinstance(v, dict):
            kept = {k: strings(x, SETTING_KEYS.match(str(k)) is not None) for k, x in v.items()}
            return {k: x for k, x in kept.items() if x is not _DROP}
        if isinstance(v, list):
            return [x for x in (strings(y, setting) for y in v) if x is not _DROP]
        if v is None or isinstance(v, bool) or setting and not isinstance(v, str):
            return _DROP
        return v

    if not isinstance(args, (dict, list)):
        return call
    try:
        return f"{name}({json.dumps(strings(args), ensure_ascii=False)})"
    except RecursionError:
        return call


_DROP = object()
SETTING_KEYS = re.compile(
    r"(?i)(?:-\w|\w*timeout\w*|offset|limit|\w+_limit|max\w*|min\w*|head\w*|tail\w*|"
    r"lines?|line_(?:number|count)|start_line|end_line|insert_line|view_range|context|"
    r"depth|page|per_page|page_size|count|n|k|top_k|temperature|width|height|start|end)\Z")
"""Tool-argument keys whose numbers set the tool (a timeout, a window of lines, a page)."""


def unescape(s: pd.Series) -> pd.Series:
    return s.str.replace(r'\\(["\\/nrt])', lambda m: _ESCAPES[m.group(1)], regex=True)


def json_text(s: str) -> str:
    r"""A JSON document as the text it holds: its values on lines of their own, in
    document order (strings unescaped, so a tool result's lines start lines again;
    numbers as written; keys left out, as a tool call's argument keys are); ``s`` itself
    when it is not JSON.

    Example:
        >>> print(json_text('{"output": "collected 3 items\\nValueError: bad", "code": 1.50}'))
        collected 3 items
        ValueError: bad
        1.50
        >>> json_text("[1/2] building")
        '[1/2] building'
    """
    try:
        value = json.loads(s, object_pairs_hook=_Pairs, parse_float=str, parse_int=str,
                           parse_constant=str)
    except (ValueError, RecursionError):     # not JSON, or nested past the parser's depth
        return s
    lines: list[str] = []
    stack = [value]         # depth-first, in document order, without recursion
    while stack:
        v = stack.pop()
        if isinstance(v, _Pairs):           # an object: its values (duplicate keys too)
            stack.extend(item for _, item in reversed(v))
        elif isinstance(v, list):
            stack.extend(reversed(v))
        elif isinstance(v, str):
            lines.append(v)
    return "\n".join(lines)


class _Pairs(list):
    """An object's (key, value) pairs, as `json.loads` gives them to its hook."""


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
        >>> for row in artifacts(s).itertuples(index=False):
        ...     print(*row)
        0 path src/app/config.py
        0 number 8387
        0 instruction Please use port 8387 and edit src/app/config.py, not 3.11
        1 command pytest -q
    """
    if user is not None and len(user) != len(texts):
        raise ConfigError(f"user has {len(user)} values for {len(texts)} texts")
    try:
        raw = texts.astype("string").fillna("")
    except UnicodeEncodeError:      # a lone surrogate (half an emoji): replaced, as loaders do
        raw = texts.map(lambda x: x.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
                        if isinstance(x, str) else x).astype("string").fillna("")
    tool = raw.str.contains(_TOOL_CALL, regex=True)
    text = raw.copy()
    if tool.any():  # JSON-escaped arguments: unescape, drop the tool name and keys
        args = pd.Series([_string_arguments(x) for x in raw[tool].tolist()],
                         index=raw[tool].index, dtype="string")
        body = unescape(args.str.replace(r'(?<=[{,])\s*"[\w-]+"\s*:', " :", regex=True))
        text[tool] = body.str.replace(r"^[\w.-]+\(", "(", regex=True)
    doc = raw.str.match(r"\s*[\[{]") & ~tool
    if doc.any():   # a JSON document (a tool result as JSON): its values as lines
        text[doc] = [json_text(x) for x in raw[doc].tolist()]
    mine = text if user is None else text[~user.to_numpy(dtype=bool)]
    frames = [_tokens(_spaced_cjk(text)), _errors(text), _commands(raw[tool], text, mine),
              _instructions(text if user is None else text[user.to_numpy(dtype=bool)])]
    out = pd.concat([f for f in frames if len(f)] or [_frame([], "path", pd.Series([]))],
                    ignore_index=True)
    out = out[out["value"].str.len() > 0].drop_duplicates(["row", "kind", "value"])
    order = out["kind"].map({k: i for i, k in enumerate(ARTIFACT_KINDS)})
    out = out.assign(_o=order).sort_values(["row", "_o", "value"], kind="stable")
    return out.drop(columns="_o").reset_index(drop=True)[list(_COLUMNS)]


_CJK = "\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
"""Chinese, Japanese and Korean characters and their full-width punctuation."""
_CJK_EDGE = re.compile(f"(?<=[{_CJK}])(?=[A-Za-z0-9])|(?<=[A-Za-z0-9])(?=[{_CJK}])")


def _spaced_cjk(text: pd.Series) -> pd.Series:
    """Texts with a space wherever a CJK character meets a Latin letter or a digit, for
    the token scan: a CJK character counts as a word character (``\\w``), so, written
    without spaces as CJK text is, ``修改src/app.py文件`` hid its path and ``共3个`` its
    number. A CJK file name keeps its place in a path (``docs/说明-中文.md``: the CJK
    characters meet ``/``, ``-`` and ``.``, not a letter).

    Example:
        >>> _spaced_cjk(pd.Series(["修改src/app.py文件", "docs/说明-中文.md", "no"])).tolist()
        ['修改 src/app.py 文件', 'docs/说明-中文.md', 'no']
    """
    has = text.str.contains(f"[{_CJK}]", regex=True).fillna(False).to_numpy(dtype=bool)
    if not has.any():
        return text
    out = text.copy()
    out[has] = out[has].str.replace(_CJK_EDGE, " ", regex=True)
    return out


def artifacts_cached(texts: pd.Series, *, user: pd.Series | None = None) -> pd.DataFrame:
    """`artifacts`, remembering each text's artifacts for the life of the process.

    The same texts come back at every replay of a session (a sweep replays it once
    per configuration, a report measures recall and retention): only texts not seen
    before are extracted. Same result as `artifacts` (``row`` is the position in
    ``texts``). At most `ARTIFACT_CACHE_TEXTS` texts are kept (oldest dropped first).

    Example:
        >>> s = pd.Series(["see src/app.py", "see src/app.py"])
        >>> from pandas.testing import assert_frame_equal
        >>> assert_frame_equal(artifacts_cached(s), artifacts(s), check_dtype=False)
    """
    rows, ids = artifact_ids(texts, user=user)
    return pd.DataFrame({"row": pd.Series(rows.tolist(), dtype=object),
                         "kind": pd.Series(artifact_kinds(ids), dtype="str"),
                         "value": pd.Series(artifact_values(ids), dtype=object)})


def artifact_ids(texts: pd.Series, *, user: pd.Series | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """`artifacts_cached` as two arrays: the row (position in ``texts``) of every
    artifact and its id, one integer per distinct (kind, value) in this process
    (`artifact_kinds`, `artifact_values`)."""
    if user is not None and len(user) != len(texts):
        raise ConfigError(f"user has {len(user)} values for {len(texts)} texts")
    values = texts.astype(object).where(texts.notna(), "").tolist()
    flags = [True] * len(values) if user is None else user.to_numpy(dtype=bool).tolist()
    keys = list(zip(values, flags))
    with _LOCK:        # ids stay valid for the whole call (a Dask worker runs threads)
        if len(_KIND_OF) > ARTIFACT_IDS_MAX:
            _GENERATION[0] += 1
            _CACHE.clear()
            _ID_OF.clear()
            _KIND_OF.clear()
            _VALUE_OF.clear()
            _ARRAYS.clear()
        new = list(dict.fromkeys(k for k in keys if k not in _CACHE))
        if new and _OFFERS:     # stored artifacts (a corpus dataset's facts): taken first
            while _OFFERS:
                try:
                    got = _OFFERS.popleft()()
                except Exception:   # unusable stored artifacts: extracted here instead
                    got = None
                if got is not None:
                    _seed(*got)
            new = [k for k in new if k not in _CACHE]
        if new:
            found = artifacts(pd.Series([k[0] for k in new], dtype=object),
                              user=pd.Series([k[1] for k in new], dtype=bool))
            rows = found["row"].to_numpy(dtype=np.int64)
            ids = _ids(found["kind"].tolist(), found["value"].tolist())
            cut = np.searchsorted(rows, np.arange(len(new) + 1))
            for i, key in enumerate(new):
                _CACHE[key] = ids[cut[i]:cut[i + 1]]
            while len(_CACHE) > ARTIFACT_CACHE_TEXTS:
                del _CACHE[next(iter(_CACHE))]
        per = [_CACHE[key] if key in _CACHE else _uncached(key) for key in keys]
    lengths = np.fromiter((len(a) for a in per), dtype=np.int64, count=len(per))
    rows = np.repeat(np.arange(len(per), dtype=np.int64), lengths)
    ids = np.concatenate(per) if per else np.zeros(0, dtype=np.int64)
    return rows, ids


def extraction_fingerprint() -> str | None:
    """What the artifacts of a text depend on besides the text and its instruction flag:
    this module's code (a hash of its syntax tree without docstrings: its rules and code,
    not their wording) and the versions of Python (its ``re``) and pandas. Facts stored
    with another fingerprint (`ctxlab.facts`) are stale: extracted again, never used.
    None when the source cannot be read (nothing stored is then trusted)."""
    if not _FINGERPRINT:
        try:
            code = code_fingerprint(Path(__file__).read_bytes())
        except (OSError, SyntaxError, ValueError):
            _FINGERPRINT.append(None)
        else:
            pandas = ".".join(pd.__version__.split(".")[:2])
            _FINGERPRINT.append(f"{code}-py{sys.version_info[0]}.{sys.version_info[1]}"
                                f"-pandas{pandas}")
    return _FINGERPRINT[0]


def code_fingerprint(source: str | bytes) -> str:
    r"""A hash of Python source as code: comments, layout and docstrings left out.

    Example:
        >>> code_fingerprint('def f():\n    "Doc."\n    return 1  # one') == \
        ...     code_fingerprint("def f():\n    return 1")
        True
        >>> code_fingerprint("def f():\n    return 1") == code_fingerprint("def f():\n    return 2")
        False
    """
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]        # the docstring
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:32]


_FINGERPRINT: list[str | None] = []


def offer_artifacts(source: Callable[[], tuple[Any, ...] | None]) -> None:
    """Offer artifacts extracted elsewhere (a corpus dataset's stored facts,
    `ctxlab.facts.SessionFacts.artifacts`): the next time `artifact_ids` meets a text it
    does not know, it calls ``source`` and, unless it gives None (stale facts), takes what
    it gives as `seed_artifacts` does, before extracting what is still unknown. Only the
    last `OFFERS_KEPT` offers wait."""
    _OFFERS.append(source)


OFFERS_KEPT = 4
_OFFERS: deque[Callable[[], tuple[Any, ...] | None]] = deque(maxlen=OFFERS_KEPT)


def seed_artifacts(keys: list[tuple[str, bool]], offsets: np.ndarray, kinds: list[str],
                   values: list[str], codes: np.ndarray | None = None) -> int:
    """Remember the artifacts of texts extracted elsewhere (a corpus dataset's stored
    facts, `ctxlab.facts`), as `artifact_ids` would have: ``keys`` are (text, instruction
    flag) pairs; the artifacts of ``keys[i]`` are ``kinds[offsets[i]:offsets[i + 1]]`` and
    the same ``values``, in the order `artifacts` gives them (with ``codes``: those at
    ``codes[offsets[i]:offsets[i + 1]]`` in ``kinds`` and ``values``, which then list
    each artifact once). The caller vouches that they are what `artifacts` gives
    (`extraction_fingerprint`). Texts already known are left as they are. Returns how
    many texts were added.

    Example:
        >>> seed_artifacts([("see it", True)], np.array([0, 1]), ["path"], ["src/x.py"])
        1
        >>> artifact_values(artifact_ids(pd.Series(["see it"]))[1]).tolist()
        ['src/x.py']
        >>> clear_artifact_cache()
    """
    with _LOCK:
        return _seed(keys, offsets, kinds, values, codes)


def _seed(keys: list[tuple[str, bool]], offsets: np.ndarray, kinds: list[str],
          values: list[str], codes: np.ndarray | None = None) -> int:
    """`seed_artifacts`, with `_LOCK` held."""
    if not any(k not in _CACHE for k in keys):
        return 0
    ids = _ids(kinds, values)
    if codes is not None:
        ids = ids[np.asarray(codes, dtype=np.int64)]
    added = 0
    for i, key in enumerate(keys):
        if key not in _CACHE:
            _CACHE[key] = ids[offsets[i]:offsets[i + 1]]
            added += 1
    while len(_CACHE) > ARTIFACT_CACHE_TEXTS:
        del _CACHE[next(iter(_CACHE))]
    return added


def clear_artifact_cache() -> None:
    """Forget every text's artifacts and the offers not taken yet (`artifact_ids`
    extracts them again; ids stay)."""
    with _LOCK:
        _CACHE.clear()
        _OFFERS.clear()


def artifact_kinds(ids: np.ndarray) -> np.ndarray:
    """The kind of every artifact id (`artifact_ids`)."""
    return _lookup(_KIND_OF, ids)


def artifact_values(ids: np.ndarray) -> np.ndarray:
    """The value of every artifact id (`artifact_ids`)."""
    return _lookup(_VALUE_OF, ids)


def _lookup(table: list[str], ids: np.ndarray) -> np.ndarray:
    with _LOCK:
        arr = _ARRAYS.get(id(table))
        if arr is None or len(arr) != len(table):   # the table only grows (or restarts)
            arr = _ARRAYS[id(table)] = np.asarray(table, dtype=object)
    return arr[np.asarray(ids, dtype=np.int64)]


def ids_generation() -> int:
    """How many times the ids started again (`ARTIFACT_IDS_MAX`): ids from an earlier
    generation mean nothing now."""
    return _GENERATION[0]


def path_ids(values: list[str]) -> np.ndarray:
    """The artifact ids of some paths (new ones are numbered)."""
    with _LOCK:
        return _ids(["path"] * len(values), values)


def _ids(kinds: list[str], values: list[str]) -> np.ndarray:
    out = np.empty(len(kinds), dtype=np.int64)
    for i, kv in enumerate(zip(kinds, values)):
        got = _ID_OF.get(kv)
        if got is None:
            got = _ID_OF[kv] = len(_KIND_OF)
            _KIND_OF.append(kv[0])
            _VALUE_OF.append(kv[1])
        out[i] = got
    return out


def _uncached(key: tuple[str, bool]) -> np.ndarray:
    """Artifacts of one text the bounded cache already let go (a batch over the bound)."""
    found = artifacts(pd.Series([key[0]], dtype=object), user=pd.Series([key[1]]))
    return _ids(found["kind"].tolist(), found["value"].tolist())


ARTIFACT_CACHE_TEXTS = 200_000
ARTIFACT_IDS_MAX = 5_000_000
"""Distinct artifacts remembered; past it, the cache starts again."""
_CACHE: dict[tuple[str, bool], np.ndarray] = {}
_ID_OF: dict[tuple[str, str], int] = {}
_KIND_OF: list[str] = []
_VALUE_OF: list[str] = []
_LOCK = threading.Lock()
_ARRAYS: dict[int, np.ndarray] = {}     # _KIND_OF / _VALUE_OF as arrays, by id
_GENERATION = [0]                       # `ids_generation`


def _findall(text: pd.Series, pattern: re.Pattern[str],
             words: tuple[str, ...] = ()) -> tuple[list[Any], list[tuple[str, ...]]]:
    """The index label of each match's text and the match's groups (``""`` for a group
    that took no part), in order; with ``words``, only the texts holding one of them are
    searched (every match of ``pattern`` must hold one)."""
    rows: list[Any] = []
    found: list[Any] = []
    single = pattern.groups == 1
    for label, t in zip(text.index.tolist(), text.tolist()):
        if words and not any(w in t for w in words):
            continue
        hits = pattern.findall(t)
        if hits:
            rows.extend([label] * len(hits))
            if single:
                found.extend((h,) for h in hits)
            else:
                found.extend(hits)
    return rows, found


def _extractall(text: pd.Series, pattern: re.Pattern[str],
                words: tuple[str, ...] = ()) -> tuple[np.ndarray, pd.DataFrame]:
    """``text.str.extractall(pattern)`` as the index label of each match's text and one
    column per group (NA where a group took no part), without building a MultiIndex
    (`_findall`). Every group of ``pattern`` matches at least one character, so an empty
    group is one that took no part."""
    rows, found = _findall(text, pattern, words)
    names = sorted(pattern.groupindex, key=pattern.groupindex.__getitem__)
    cols = zip(*found) if found else [()] * len(names)
    m = pd.DataFrame({n: pd.array([v or None for v in c], dtype=text.dtype)
                      for n, c in zip(names, cols)})
    return np.asarray(rows, dtype=text.index.dtype), m


_G = {name: i - 1 for name, i in _TOKENS_RE.groupindex.items()}   # group -> tuple position


_UNITS = {"s": ("sec", "secs", "second", "seconds"), "min": ("mins", "minute", "minutes"),
          "h": ("hr", "hrs", "hour", "hours"), "days": ("day",), "weeks": ("week",),
          "months": ("month",), "years": ("year",), "bytes": ("byte",),
          "tokens": ("token",), "chars": ("char", "character", "characters"),
          "lines": ("line",), "rows": ("row",), "requests": ("request", "req", "reqs"),
          "calls": ("call",), "items": ("item",), "records": ("record",),
          "attempts": ("attempt",), "workers": ("worker",), "threads": ("thread",),
          "connections": ("connection",), "files": ("file",), "tests": ("test",),
          "users": ("user",), "messages": ("message",), "steps": ("step",),
          "pages": ("page",), "usd": ("dollar", "dollars"), "eur": ("euro", "euros")}
_UNIT_OF = {alias: unit for unit, aliases in _UNITS.items() for alias in aliases}


def _unit(text: str) -> str:
    """One spelling per unit: ``30 seconds``, ``30 sec`` and ``30 s`` are one fact.

    Example:
        >>> _unit("Seconds"), _unit("req"), _unit("ms"), _unit("%")
        ('s', 'requests', 'ms', '%')
    """
    unit = text.lower()
    return _UNIT_OF.get(unit, unit)


def _tokens(text: pd.Series) -> pd.DataFrame:
    """Paths, identifiers, dates and numbers (kind by kind, each in match order)."""
    rows, found = _findall(text, _TOKENS_RE)
    if not found:
        return _frame([], "path", pd.Series([]))
    g = _G
    by_kind: dict[str, tuple[list[Any], list[str]]] = {
        k: ([], []) for k in ("path", "identifier", "date", "number")}

    def add(kind: str, row: Any, value: str) -> None:
        by_kind[kind][0].append(row)
        by_kind[kind][1].append(value)

    for row, h in zip(rows, found):
        if h[g["path"]]:
            add("path", row, h[g["path"]])
        if h[g["ident"]]:
            add("identifier", row, h[g["ident"]])
        iso = h[g["iso"]]
        for d, mo, y in (("d1", "m1", "y1"), ("d2", "m2", "y2")):
            if h[g[mo]]:
                iso = f"{h[g[y]]}-{_MONTHS[h[g[mo]][:3].lower()]}-{h[g[d]].zfill(2)}"
        if iso:
            add("date", row, iso)
        num = h[g["num"]].replace(",", "")
        if not num:
            continue
        if h[g["mult"]]:                # 1.5k -> 1500, 2M -> 2000000
            scaled = Decimal(num) * (1000 if h[g["mult"]] in "kK" else 1_000_000)
            num = format(scaled.normalize(), "f")
        unit, cur, mark = _unit(h[g["unit"]]), h[g["cur"]], h[g["mark"]]
        if len(num.split(".", 1)[0]) >= 3 or unit or cur or mark:
            value = ("#" if mark == "#" else "") + cur + num
            add("number", row, value + ("" if unit in ("", "%") else " ") + unit)
    return pd.concat([_frame(pd.Series(r, dtype=text.index.dtype), k,
                             pd.Series(v, dtype=object)) for k, (r, v) in by_kind.items()],
                     ignore_index=True)


def _errors(text: pd.Series) -> pd.DataFrame:
    row, m = _extractall(text, _ERROR_RE, _ERROR_WORDS)
    if m.empty:
        return _frame([], "error", pd.Series([]))
    # a file read's line-number gutter (``126→``) is not part of the line: without it a
    # code line (``except ValueError:``) is known as code, and one line is one error
    line = m["error"].str.replace(r"^\s*\d+(?:→|\t)", "", regex=True)
    line = line.str.strip().str.replace(r"^E\s+", "", regex=True)
    line = line.str.replace(r"\s*\[\s*\d+%\]$", "", regex=True)
    line = line.str.replace(r"\s+", " ", regex=True).str[:300]
    code = line.str.replace(r"^[+\->]\s*", "", regex=True).str.match(_CODE_LINE)
    line = line.where(~code)      # a line of code, also in a diff (``+    except X:``)
    return _frame(row, "error", line).dropna(subset=["value"])


def _commands(tool_raw: pd.Series, text: pd.Series, replies: pd.Series) -> pd.DataFrame:
    """Commands of shell tool calls, of ``$ `` lines, and of the fenced block that ends a
    text of ``replies`` (not a user's message: a traceback pasted in a fence is none)."""
    frames = []
    if len(tool_raw):
        m = tool_raw.str.extract(_SHELL).dropna(how="all")
        single = unescape(m["s"].dropna())
        parts = m["a"].dropna().str.extractall(r'"((?:[^"\\]|\\.)*)"')[0]
        joined = unescape(parts).groupby(level=0).agg(" ".join)
        joined = joined.str.replace(r"^(?:ba|z)?sh -l?c ", "", regex=True)
        for s in (single, joined):
            frames.append(_frame(s.index, "command", s.str.strip()))
    row, d = _extractall(text, _DOLLAR_RE, ("$ ",))
    if len(d):
        frames.append(_frame(row, "command", d["cmd"].str.strip()))
    row, d = _extractall(replies, _FENCED_RE, ("```",))
    if len(d):
        frames.append(_frame(row, "command", d["cmd"].str.strip()))
    return pd.concat(frames, ignore_index=True) if frames else \
        _frame([], "command", pd.Series([]))


def _instructions(text: pd.Series) -> pd.DataFrame:
    row, m = _extractall(text, _INSTRUCTION_RE)
    if m.empty:
        return _frame([], "instruction", pd.Series([]))
    s = m["ins"].str.replace(r"^[\s\-*>\"'“”‘’`•]+|[\s\"'“”‘’`.!?…]+$", "", regex=True)
    s = s.str.replace(r"\s+", " ", regex=True).str[:300]
    return _frame(row, "instruction", s)


def instruction_rows(f: pd.DataFrame) -> pd.Series:
    """Real user messages (the first message of each turn) and compaction summaries."""
    turn = f["turn"].fillna(0)
    first = f.groupby(["session", "turn"], sort=False)["msg"].transform("min")
    real = (turn > 0) & (f["msg"] == first) & (f["role"] == "user") & (f["kind"] == "text")
    injected = f["content"].fillna("").str.match(INJECTED_CONTEXT)
    return ((real & ~injected) | (f["kind"] == "summary")).fillna(False).astype(bool)
