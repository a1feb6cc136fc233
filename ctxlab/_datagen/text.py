"""Text pools and producers for `ctxlab.datasets`: code, logs, prose, CJK, blobs.

Everything here is a pure function of a `random.Random`, so the synthetic sessions are
reproducible byte for byte. The pools are small; variety comes from combining them.
"""

from __future__ import annotations

import base64
import random
from typing import Mapping, Sequence

NOUNS = ("invoice", "ledger", "account", "payment", "customer", "transfer", "report", "export",
         "webhook", "schedule", "refund", "statement", "tenant", "receipt", "payout")
VERBS = ("load", "parse", "validate", "build", "sync", "fetch", "render", "flush", "merge",
         "resolve", "apply", "normalize", "collect", "reconcile", "dispatch")
STATES = ("pending", "stale", "partial", "cached", "archived", "active", "failed", "queued")
PROJECTS = (("ledgerline", "ledgerline"), ("tidewater-sync", "tidewater"),
            ("quillstack", "quillstack"), ("harbor-billing", "harbor"))
NPM = ("react", "react-dom", "scheduler", "@babel/runtime", "lodash-es", "date-fns", "zod",
       "axios", "@tanstack/react-query", "clsx", "recharts", "d3-shape", "immer", "i18next",
       "react-router", "@radix-ui/react-dialog", "tslib", "decimal.js", "nanoid", "dayjs")

PY_STMTS: tuple[tuple[str, str], ...] = (
    ('if not {a}:\n    raise ValueError("{a} must not be empty")', "{a}"),
    ('logger.debug("{v} %d {n} rows", len({a}))', "{a}"),
    ('{n}s = [item for item in {a} if item.status != "{s}"]', "{n}s"),
    ("total = sum(item.amount_cents for item in {a})", "total"),
    ('for index, item in enumerate({a}):\n    if index and index % {k} == 0:\n'
     '        logger.info("{v}ed %d/%d", index, len({a}))\n    seen.add(item.id)', "seen"),
    ("with _LOCK:\n    cached = _CACHE.get(({a}, {b}))\n    if cached is not None:\n"
     "        return cached", "{a}"),
    ('try:\n    payload = json.loads({b})\nexcept json.JSONDecodeError as exc:\n'
     '    raise {N}Error(f"bad {n} payload: {{exc}}") from exc', "payload"),
    ("deadline = time.monotonic() + {k}.0\nwhile time.monotonic() < deadline:\n"
     "    if _ready({a}):\n        break\n    time.sleep(0.{k})", "{a}"),
    ('rows = [\n    {{"id": r.id, "{n}_id": r.{n}_id, "status": r.status}}\n    for r in {a}\n]',
     "rows"),
    ("if len({a}) > MAX_{U}S:\n"
     '    logger.warning("truncating %d {n}s to %d", len({a}), MAX_{U}S)\n'
     "    {a} = {a}[:MAX_{U}S]", "{a}"),
    ("options = {{**DEFAULTS, **({b} or {{}})}}\ntimeout = float(options.get(\"timeout\", {k}))",
     "options"),
    ("by_status: dict[str, list[{N}]] = defaultdict(list)\nfor item in {a}:\n"
     "    by_status[item.status].append(item)", "by_status"),
)

TS_STMTS: tuple[str, ...] = (
    'if (!{a}.length) {{\n  return [];\n}}',
    'const byId = new Map({a}.map((row) => [row.id, row] as const));',
    'const total = {a}.reduce((sum, row) => sum + row.amountCents, 0);',
    'const res = await client.get<{N}[]>(`/api/{n}s?status=${{params.status ?? "{s}"}}`);',
    'console.debug("[{n}] {v}", {{ count: {a}.length }});',
    'const sorted = [...{a}].sort((x, y) => x.createdAt.localeCompare(y.createdAt));',
    'if (params.limit && params.limit > {k}0) {{\n  throw new RangeError("limit too large");\n}}',
)

PROSE: tuple[str, ...] = (
    "The {n} service {v}s incoming records before they reach the {n2} store.",
    "Every {n} carries a status; {s} rows are retried by the worker on the next tick.",
    "We keep the {n2} table append-only so that audits can replay any {n} from scratch.",
    "When the upstream API times out, the client backs off and re-queues the {n}.",
    "Most of the latency comes from the {v} step, which touches every {n2} in the batch.",
    "The {N} view groups rows by status and shows the {s} ones first.",
    "Configuration is read once at start-up; changing it requires a restart of the worker.",
    "Each {n} is considered settled when its {n2} balance reaches zero.",
    "The nightly job exports {n}s to the warehouse and archives anything older than 90 days.",
    "Tests use an in-memory store, so they never touch the real {n2} database.",
    "I would rather {v} the {n}s in one pass than loop over the {n2} twice.",
    "This keeps the {n} path simple, at the cost of an extra query per {n2}.",
    "Errors are logged with the {n} id so that support can trace a single request.",
    "The frontend polls the {n} endpoint every few seconds while an export is running.",
    "Nothing here is clever: it is a queue, a worker and a table of {n}s.",
    "Open question: should {s} {n}s expire automatically, or wait for an operator?",
    "The migration adds an index on ({n}_id, status) to speed up the {v} query.",
    "Reviewers asked for smaller functions, so {v}_{n}s was split in two.",
)
ZH = ("导出发票时请确认账户余额。", "同步任务失败，请稍后重试。", "此操作将永久删除所选记录。",
      "未找到匹配的付款记录。", "报告已生成，可以下载。", "租户配置已更新。",
      "请输入有效的电子邮件地址。", "批处理正在进行中，请勿关闭页面。")
JA = ("請求書のエクスポートが完了しました。", "同期に失敗しました。もう一度お試しください。",
      "選択したレコードは完全に削除されます。", "支払い記録が見つかりません。",
      "レポートの準備ができました。", "処理中です。ページを閉じないでください。")
THINK: tuple[str, ...] = (
    "The failure mentions {n}; the {v} step in {f} is the likely culprit.",
    "I should check how {f} handles {s} rows before changing anything.",
    "Reading the tests first will tell me what behaviour is expected of {v}_{n}s.",
    "Two files are involved here, so I can read them in parallel.",
    "The stack trace ends in the retry loop; the timeout is probably too short.",
    "Before editing, let me make sure nothing else calls {v}_{n}s with a None argument.",
    "The user wants a minimal change. I'll keep the public signature as it is.",
    "That build error is a type mismatch: the API returns cents, the component expects a float.",
)
SAY: tuple[str, ...] = (
    "Let me read `{f}` first.", "I'll read the tests to see what is expected.",
    "Let me look at how {v}_{n}s is used across the code base.",
    "Running the test suite to reproduce the failure.", "Now I'll make the change.",
    "Let me re-read the file to double-check the edit.", "Let me cat the config and compare.",
    "Checking the build output.", "I'll read the docs and the module side by side.",
)


def fill(rng: random.Random, template: str, **extra: str) -> str:
    """Fill a template's ``{n} {n2} {N} {v} {s} {k}`` slots with random words."""
    n, n2 = rng.sample(NOUNS, 2)
    words = {"n": n, "n2": n2, "N": n.title(), "v": rng.choice(VERBS), "s": rng.choice(STATES),
             "k": str(rng.randint(2, 9)), "U": n.upper()}
    words.update(extra)
    return template.format(**words)


def prose(rng: random.Random, sentences: int) -> str:
    """A paragraph of plausible engineering prose."""
    return " ".join(fill(rng, rng.choice(PROSE)) for _ in range(sentences))


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line else line for line in text.split("\n"))


def python_function(rng: random.Random, name: str, noun: str, spaces: int = 0) -> str:
    """One typed, documented Python function built from statement templates."""
    a, b = f"{noun}s", rng.choice(("options", "raw", "context", "overrides"))
    words = {"a": a, "b": b, "n": noun, "N": noun.title(), "U": noun.upper()}
    body, ret = [], a
    for stmt, defines in rng.sample(PY_STMTS, rng.randint(2, 5)):
        body.append(fill(rng, stmt, **words))
        ret = defines.format(**words)
    body.append(f"return {ret}")
    doc = (f'"""{name.replace("_", " ").capitalize()} for a list of {noun}s.\n\n'
           f"Args:\n    {a}: the {noun}s to process, oldest first.\n"
           f'    {b}: optional settings; missing keys fall back to DEFAULTS.\n"""')
    head = f"def {name}({a}: list[{noun.title()}], {b}: dict[str, Any] | None = None) -> Any:"
    return _indent(head + "\n" + _indent(doc + "\n" + "\n".join(body), 4), spaces)


def python_module(rng: random.Random, pkg: str, mod: str, lines: int) -> str:
    """A Python module of roughly ``lines`` lines: imports, constants, a dataclass, functions."""
    noun = rng.choice(NOUNS)
    out = [f'"""{mod.replace("_", " ").capitalize()}: {prose(rng, 1)}"""', "",
           "from __future__ import annotations", "", "import json", "import logging",
           "import threading", "import time", "from collections import defaultdict",
           "from dataclasses import dataclass, field", "from typing import Any", "",
           f"from {pkg}.config import DEFAULTS", "", "logger = logging.getLogger(__name__)",
           "_LOCK = threading.Lock()", "_CACHE: dict[tuple[Any, Any], Any] = {}",
           f"MAX_{noun.upper()}S = {rng.choice((500, 1000, 2500))}", "", "",
           f"class {noun.title()}Error(RuntimeError):",
           f'    """Raised when a {noun} cannot be processed."""', "", "",
           "@dataclass(slots=True)", f"class {noun.title()}:", f'    """One {noun} row."""', "",
           "    id: str", f"    {noun}_id: str", "    amount_cents: int",
           f'    status: str = "{rng.choice(STATES)}"',
           "    tags: list[str] = field(default_factory=list)", ""]
    used: set[str] = set()
    count = len(out)
    while count < lines:
        name = f"{rng.choice(VERBS)}_{noun}s"
        if name in used:
            name = f"{name}_{rng.choice(STATES)}"
        if name in used:
            continue
        used.add(name)
        out += ["", python_function(rng, name, noun), ""]
        count += 3 + out[-2].count("\n")
    return "\n".join(out) + "\n"


def python_tests(rng: random.Random, pkg: str, mod: str, cases: int) -> str:
    """A pytest module with fixtures, plain tests and a parametrised one."""
    noun = rng.choice(NOUNS)
    out = ['"""Tests for ' + f'{pkg}.{mod}."""', "", "import pytest", "",
           f"from {pkg} import {mod}", "", "", "@pytest.fixture", f"def {noun}s():",
           f'    return [{mod}.{noun.title()}(id=f"{noun[:3]}_{{i}}", {noun}_id="acc_1", '
           f"amount_cents=100 * i) for i in range(5)]", ""]
    for _ in range(cases):
        v, s = rng.choice(VERBS), rng.choice(STATES)
        out += ["", f"def test_{v}_{noun}s_{s}({noun}s):",
                f"    result = {mod}.{v}_{noun}s({noun}s)",
                "    assert result is not None",
                f'    assert all(r.status != "{s}" for r in {noun}s if r.amount_cents == 0)', ""]
    out += ["", f'@pytest.mark.parametrize("count", [0, 1, 7, {rng.randint(50, 900)}])',
            f"def test_bulk_{noun}s(count):",
            f'    rows = [{mod}.{noun.title()}(id=str(i), {noun}_id="acc_1", amount_cents=i) '
            "for i in range(count)]",
            "    assert len(rows) == count", ""]
    return "\n".join(out)


def ts_module(rng: random.Random, name: str, lines: int, jsx: bool) -> str:
    """A TypeScript (or TSX) module: an interface, async API helpers, maybe a component."""
    noun = rng.choice(NOUNS)
    n_cap = noun.title()
    out = ['import { ApiClient } from "../api/client";', "", f"export interface {n_cap} {{",
           "  id: string;", f"  {noun}Id: string;", "  amountCents: number;",
           f'  status: "{rng.choice(STATES)}" | "{rng.choice(STATES)}";', "  createdAt: string;",
           "}", "", f"export interface {n_cap}Query {{", "  status?: string;", "  limit?: number;",
           "}", ""]
    while sum(x.count("\n") + 1 for x in out) < lines:
        v = rng.choice(VERBS)
        body = "\n".join(fill(rng, t, a="rows", N=n_cap, n=noun)
                         for t in rng.sample(TS_STMTS, rng.randint(2, 4)))
        out += [f"export async function {v}{n_cap}s(client: ApiClient, rows: {n_cap}[], "
                f"params: {n_cap}Query = {{}}): Promise<{n_cap}[]> {{", _indent(body, 2),
                "  return rows;", "}", ""]
    if jsx:
        out += [f"export function {n_cap}Table({{ rows }}: {{ rows: {n_cap}[] }}) {{",
                "  return (", "    <table className=\"data-table\">", "      <tbody>",
                "        {rows.map((row) => (", "          <tr key={row.id}>",
                "            <td>{row.id}</td>", "            <td>{row.status}</td>",
                "            <td>{(row.amountCents / 100).toFixed(2)}</td>", "          </tr>",
                "        ))}", "      </tbody>", "    </table>", "  );", "}", ""]
    return "\n".join(out)


def markdown_doc(rng: random.Random, title: str, sections: int, extra: str = "") -> str:
    """A Markdown document with headings, paragraphs, bullets and a small table."""
    out = [f"# {title}", "", prose(rng, 3), ""]
    if extra:
        out += [extra, ""]
    for _ in range(sections):
        n = rng.choice(NOUNS)
        out += [f"## {n.title()} {rng.choice(('flow', 'notes', 'storage', 'limits', 'FAQ'))}", "",
                prose(rng, rng.randint(2, 5)), ""]
        out += [f"- {fill(rng, rng.choice(PROSE))}" for _ in range(rng.randint(2, 4))] + [""]
        if rng.random() < 0.4:
            out += ["| field | type | notes |", "|---|---|---|"]
            out += [f"| {v}_{n} | {rng.choice(('int', 'str', 'bool', 'datetime'))} | "
                    f"{rng.choice(STATES)} rows only |" for v in rng.sample(VERBS, 3)] + [""]
    return "\n".join(out)


def locale_json(rng: random.Random, pool: Sequence[str], keys: int) -> str:
    """A locale file mapping UI keys to (CJK) strings."""
    items = [f'  "{rng.choice(NOUNS)}.{rng.choice(VERBS)}_{i}": "{rng.choice(pool)}"'
             for i in range(keys)]
    return "{\n" + ",\n".join(items) + "\n}\n"


def base64_blob(rng: random.Random, n_bytes: int, width: int = 76) -> str:
    """A PNG-looking binary as wrapped base64 (a test fixture)."""
    raw = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + rng.randbytes(n_bytes)
    text = base64.b64encode(raw).decode("ascii")
    return "\n".join(text[i:i + width] for i in range(0, len(text), width)) + "\n"


def tokenizer_module(rng: random.Random, pkg: str) -> str:
    """A module that names special tokens, including a literal end-of-text marker."""
    return "\n".join([
        '"""Special tokens used when we build LLM prompts from ledger text."""', "",
        "SPECIAL_TOKENS = {", '    "eot": "<|endoftext|>",', '    "sep": "<|sep|>",',
        '    "pad": "<|pad|>",', "}", "", "",
        "def strip_special(text: str) -> str:",
        '    """Remove special tokens before the text is shown to a user."""',
        "    for token in SPECIAL_TOKENS.values():", '        text = text.replace(token, "")',
        "    return text", "", "",
        f'SAMPLE = "{prose(rng, 1)}<|endoftext|>"', ""])


def pytest_log(rng: random.Random, root: str, tests: Sequence[str], failed: Sequence[str],
               trace: str) -> str:
    """``pytest -v`` output: one line per test, then failures with a traceback."""
    out = ["=" * 29 + " test session starts " + "=" * 30,
           "platform linux -- Python 3.12.3, pytest-8.3.4, pluggy-1.5.0 -- "
           f"{root}/.venv/bin/python",
           "cachedir: .pytest_cache", f"rootdir: {root}", "configfile: pyproject.toml",
           "plugins: anyio-4.6.2, cov-6.0.0", f"collecting ... collected {len(tests)} items", ""]
    n = len(tests)
    for i, t in enumerate(tests):
        status = "FAILED" if t in failed else rng.choices(("PASSED", "SKIPPED"), (40, 1))[0]
        out.append(f"{t} {status}".ljust(74) + f"[{100 * (i + 1) // n:3d}%]")
    if failed:
        out += ["", "=" * 35 + " FAILURES " + "=" * 35]
        for t in failed:
            out += ["_" * 20 + f" {t.split('::')[-1]} " + "_" * 20, "", trace, ""]
        out += ["=" * 27 + " short test summary info " + "=" * 28]
        out += [f"FAILED {t} - AssertionError" for t in failed]
    secs = rng.uniform(1.5, 40.0)
    summary = f"{len(failed)} failed, {n - len(failed)} passed" if failed else f"{n} passed"
    out.append(f"{'=' * 18} {summary}, {rng.randint(0, 5)} warnings in {secs:.2f}s {'=' * 18}")
    return "\n".join(out)


def traceback_text(rng: random.Random, root: str, pkg: str, mod: str, func: str) -> str:
    """A Python traceback ending in an assertion or a timeout."""
    noun = rng.choice(NOUNS)
    frames = [(f"{root}/tests/test_{mod}.py", rng.randint(20, 90), f"test_{func}",
               f"result = {mod}.{func}({noun}s)"),
              (f"{root}/src/{pkg}/{mod}.py", rng.randint(40, 200), func,
               "payload = client.post(url, json=rows, timeout=timeout)"),
              (f"{root}/.venv/lib/python3.12/site-packages/httpx/_client.py", 1144, "post",
               "return self.request("),
              (f"{root}/.venv/lib/python3.12/site-packages/httpx/_transports/default.py", 232,
               "handle_request", "raise mapped_exc(message) from exc")]
    out = ["Traceback (most recent call last):"]
    for path, line, fn, code in frames[: rng.randint(2, 4)]:
        out += [f'  File "{path}", line {line}, in {fn}', f"    {code}"]
    out.append(rng.choice((f"httpx.ReadTimeout: timed out after {rng.randint(2, 9)}.0s",
                           f"AssertionError: assert '{rng.choice(STATES)}' == 'settled'",
                           f"KeyError: '{noun}_id'")))
    return "\n".join(out)


def build_log(rng: random.Random, web: str, modules: int, errors: Sequence[str]) -> str:
    """``npm run build`` output of a webpack build with verbose module stats."""
    out = ["", "> web@0.4.2 build", "> webpack --mode production --stats verbose", "",
           f"asset main.{rng.getrandbits(40):010x}.js {rng.uniform(0.8, 2.4):.2f} MiB [emitted] "
           "[minimized] (name: main)", "orphan modules 1.21 MiB [orphan] 512 modules",
           "runtime modules 2.64 KiB 12 modules", "cacheable modules 3.1 MiB"]
    for _ in range(modules):
        pkg = rng.choice(NPM)
        path = "/".join(rng.choice(("dist", "cjs", "esm", "lib", "src", "utils", "core"))
                        for _ in range(rng.randint(1, 3)))
        out.append(f"  ./node_modules/{pkg}/{path}/{rng.choice(VERBS)}{rng.choice(NOUNS).title()}"
                   f".js {rng.uniform(0.2, 90):.2f} KiB [built]")
    for e in errors:
        out += ["", f"ERROR in {web}/{e}", f"TS2339: Property 'totalCents' does not exist on "
                f"type '{rng.choice(NOUNS).title()}'.", "    40 |   return (",
                "  > 41 |     <td>{row.totalCents}</td>", "       |               ^^^^^^^^^^"]
    outcome = f"with {len(errors)} errors" if errors else "successfully"
    status = f"webpack 5.97.1 compiled {outcome} in {rng.randint(4000, 30000)} ms"
    return "\n".join(out + ["", status])


B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _schema(required: Sequence[str], **props: Mapping[str, object]) -> dict[str, object]:
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": False}


_S, _I, _B = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
TOOL_SCHEMAS: tuple[dict[str, object], ...] = (
    {"name": "Read", "description": "Read a file; lines are numbered.",
     "parameters": _schema(["file_path"], file_path=_S, offset=_I, limit=_I)},
    {"name": "Edit", "description": "Replace one exact string in a file.",
     "parameters": _schema(["file_path", "old_string", "new_string"], file_path=_S,
                           old_string=_S, new_string=_S, replace_all=_B)},
    {"name": "Write", "description": "Create or overwrite a file.",
     "parameters": _schema(["file_path", "content"], file_path=_S, content=_S)},
    {"name": "Bash", "description": "Run a shell command in the project directory.",
     "parameters": _schema(["command"], command=_S, description=_S, timeout=_I)},
    {"name": "Grep", "description": "Search file contents with a regular expression.",
     "parameters": _schema(["pattern"], pattern=_S, path=_S, glob=_S,
                           output_mode={"type": "string",
                                        "enum": ["content", "files_with_matches", "count"]})},
    {"name": "Glob", "description": "List files matching a glob pattern.",
     "parameters": _schema(["pattern"], pattern=_S, path=_S)},
)
