"""Content classes: estimators err differently on prose, code, JSON, logs, CJK and base64.

`classify` labels every text with one class, vectorised over the column (regular
expressions through pandas' string methods, no per-row Python). The first rule
that matches wins:

==============  ===================================================================
class           rule
==============  ===================================================================
``empty``       no characters
``base64``      at least half of the characters are in runs of 64+ base64 characters
``non_latin``   at least 20% of the characters are outside Latin scripts (CJK,
                Cyrillic, Arabic, emoji...)
``json``        a tool call or tool schema (name + JSON arguments), or text that
                starts like a JSON object/array and ends with ``}`` or ``]``
``code``        at least 25% of lines look like code (keywords, braces, assignments,
                ``cat -n`` style numbered source lines)
``logs``        a tool result, or text where 25% of lines look like log/terminal
                output (timestamps, paths, levels, tracebacks, diffs)
``prose``       everything else
==============  ===================================================================
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxlab.tokens.base import text_series

CLASSES: tuple[str, ...] = ("prose", "code", "json", "logs", "non_latin", "base64", "empty")

_BASE64_RUN = r"[A-Za-z0-9+/]{64,}={0,2}"
_NON_LATIN = r"[^\x00-\u024f\u1e00-\u1eff\u2000-\u206f\u2190-\u21ff\u2500-\u257f]"
_CODE_LINE = (r"(?m)^(?:\s*\d+[→\t|:])?\s*(?:def |class |import |from \S+ import |return\b|"
              r"function\b|const |let |var |if\s*\(|for\s*\(|while\s*\(|#include|public |"
              r"private |fn |pub |impl |async |await |[}{)\]];?\s*$|@\w+|"
              r"[\w.\[\]]+\s*[+\-*/]?=\s*\S.*[;,)\]]?\s*$|\s{4,}\S)")
_LOG_LINE = (r"(?m)^(?:\s*(?:\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|\[?(?:INFO|DEBUG|WARN|WARNING|"
             r"ERROR|FATAL|TRACE)\b|Traceback|\s+File \"|[-+@]{1,3} |\$ |> |[drwx-]{10} |"
             r"(?:/|\./|~/)[\w.-]+/|\w+Error:|PASSED|FAILED|ok\b|npm |warning:|error:))")


def classify(texts: pd.Series, kinds: pd.Series | None = None) -> pd.Series:
    """One content class per text (a categorical Series aligned with ``texts``).

    Args:
        texts: the texts.
        kinds: the part kinds, when known: tool calls and schemas are JSON, tool results
            that match no earlier rule are logs.

    Example:
        >>> classify(pd.Series(["Hello there, how are you?", "def f(x):\\n    return x",
        ...                     '{"a": 1}', "日本語のテキストです", "A" * 200, ""])).tolist()
        ['prose', 'code', 'json', 'non_latin', 'base64', 'empty']
    """
    s = text_series(texts)
    n = s.str.len().to_numpy(dtype=np.float64, na_value=0)
    safe_n = np.maximum(n, 1)
    lines = s.str.count("\n").to_numpy(dtype=np.float64, na_value=0) + 1
    stripped = s.str.strip()
    b64_chars = n - s.str.replace(_BASE64_RUN, "", regex=True).str.len().to_numpy(
        dtype=np.float64, na_value=0)
    non_latin = s.str.count(_NON_LATIN).to_numpy(dtype=np.float64, na_value=0)
    json_like = (stripped.str.match(r"[\[{]\s*[\"\[{\d\]}tfn-]")
                 & stripped.str.contains(r"[\]}]$", regex=True)
                 ).to_numpy(dtype=bool, na_value=False)
    kind = (np.full(len(s), "", dtype=object) if kinds is None
            else kinds.to_numpy(dtype=object, na_value=""))
    structured = (kind == "tool_call") | (kind == "tool_schema")
    code_lines = s.str.count(_CODE_LINE).to_numpy(dtype=np.float64, na_value=0)
    log_lines = s.str.count(_LOG_LINE).to_numpy(dtype=np.float64, na_value=0)
    tool = kind == "tool_result"
    conditions = [n == 0, b64_chars / safe_n >= 0.5, non_latin / safe_n >= 0.2,
                  json_like | structured,
                  code_lines / lines >= 0.25, tool | (log_lines / lines >= 0.25)]
    labels = ["empty", "base64", "non_latin", "json", "code", "logs"]
    out = np.select(conditions, labels, default="prose")
    return pd.Series(pd.Categorical(out, categories=list(CLASSES)), index=s.index,
                     name="content_class")
