"""The two scenarios of `ctxlab.datasets`: a coding-agent session and a projects-mode chat.

Each user turn is a small script of LLM calls over a virtual repository (`_Script`).
Facts are planted in early prompts, in a file the agent reads, or in the project context,
and asked for later; the summary of the recorded compaction keeps some and drops others.
"""

from __future__ import annotations

import difflib
import json
import re

from ctxlab._datagen import text as T
from ctxlab._datagen.script import BUILD, EXPLORE, FEATURE, FIX, REVIEW, _Script
from ctxlab.datasets import Block, Session

CONFIG = '''"""Runtime settings, read once from the environment at start-up."""

from __future__ import annotations

import os

DEFAULTS = {{
    "timeout": {timeout},
    "batch_size": {batch},
    "retries": {retries},
    "base_url": os.environ.get("{env}_BASE_URL", "https://api.example.test/v2"),
}}
RATE_LIMIT_PER_MIN = 60  # TODO: confirm with upstream
'''


class _Coding(_Script):
    """A coding session: the virtual repository and the values planted as facts."""

    def __init__(self, seed: int) -> None:
        super().__init__("coding", seed)
        self.project = self.pkg = self.hot = self.tsx = self.branch = self.pending = ""
        self.modules: list[str] = []
        self.limit = self.batch = 0
        self.batch_old = 250


def _repo(sc: _Coding) -> None:
    rng = sc.rng
    sc.project, sc.pkg = rng.choice(T.PROJECTS)
    pkg = sc.pkg
    sc.root = f"/home/dev/projects/{sc.project}"
    f = sc.files
    limits = (f"\n## Upstream limits\n\n{T.prose(rng, 2)} The upstream billing API allows at "
              f"most {sc.limit} requests per minute per key; above that it answers 429 for a "
              f"full minute. {T.prose(rng, 1)}\n")
    f["README.md"] = T.markdown_doc(rng, sc.project, 3) + limits
    f["pyproject.toml"] = (f'[project]\nname = "{sc.project}"\nversion = "0.4.2"\n'
                           'requires-python = ">=3.12"\ndependencies = ["httpx>=0.27", '
                           '"fastapi>=0.115", "sqlalchemy>=2.0"]\n\n[tool.pytest.ini_options]\n'
                           'addopts = "-ra"\n')
    f[f"src/{pkg}/__init__.py"] = (f'"""{sc.project}: {T.prose(rng, 1)}"""\n\n'
                                   '__version__ = "0.4.2"\n')
    f[f"src/{pkg}/config.py"] = CONFIG.format(timeout=rng.randint(5, 30), batch=sc.batch_old,
                                              retries=rng.randint(2, 6), env=pkg.upper())
    sc.modules = ["api", "models", "storage", "worker", "client", "cli"]
    sc.hot = rng.choice(("api", "storage", "worker"))  # the module the session keeps reading
    for mod in sc.modules:
        f[f"src/{pkg}/{mod}.py"] = T.python_module(rng, pkg, mod, rng.randint(90, 240))
    f[f"src/{pkg}/tokenizer_utils.py"] = T.tokenizer_module(rng, pkg)
    for mod in ("api", "storage", "worker"):
        f[f"tests/test_{mod}.py"] = T.python_tests(rng, pkg, mod, rng.randint(6, 14))
    f["tests/fixtures/avatar.png.b64"] = T.base64_blob(rng, 2400)
    deps = {p: f"^{rng.randint(1, 19)}.{rng.randint(0, 9)}.0" for p in T.NPM[:8]}
    f["web/package.json"] = json.dumps({"name": "web", "version": "0.4.2", "private": True,
                                        "scripts": {"build": "webpack --mode production"},
                                        "dependencies": deps}, indent=2) + "\n"
    f["web/src/api/client.ts"] = T.ts_module(rng, "client", 70, jsx=False)
    sc.tsx = f"web/src/components/{rng.choice(T.NOUNS).title()}Table.tsx"
    f[sc.tsx] = T.ts_module(rng, "table", 110, jsx=True)
    f["locales/zh-CN.json"] = T.locale_json(rng, T.ZH, 40)
    f["locales/ja.json"] = T.locale_json(rng, T.JA, 30)
    f["docs/architecture.md"] = T.markdown_doc(rng, "Architecture", 6)


def _test_ids(sc: _Coding, n: int) -> list[str]:
    """Ids of ``n`` tests: the test functions, then parametrised cases."""
    ids = [f"tests/test_{mod}.py::{name}" for mod in ("api", "storage", "worker")
           for name in re.findall(r"^def (test_\w+)", sc.files[f"tests/test_{mod}.py"], re.M)]
    return (ids + [f"tests/test_api.py::test_bulk[{i}]" for i in range(n)])[:n]


def _t_explore(sc: _Coding) -> None:
    rng = sc.rng
    others = [m for m in sc.modules if m != sc.hot]
    mods = [f"src/{sc.pkg}/{m}.py" for m in [sc.hot, *rng.sample(others, 2)]]
    rng.shuffle(mods)
    sc.prompt(T.fill(rng, rng.choice(EXPLORE), m=mods[0]))
    pattern = rng.choice(T.VERBS) + "_"
    sc.respond(sc.think(mods[0]), sc.say(mods[0]),
               [sc.glob("src/**/*.py"), sc.grep(pattern, content=rng.random() < .5)])
    sc.respond(sc.think(mods[1]), None, [sc.read(p) for p in mods])
    if rng.random() < 0.6:
        sc.respond(None, sc.say("docs/architecture.md"), [sc.read("docs/architecture.md")])
    sc.answer()


def _t_fix(sc: _Coding, big: bool = False) -> None:
    rng = sc.rng
    mod = sc.hot if rng.random() < 0.5 else rng.choice(("api", "storage", "worker"))
    src, test = f"src/{sc.pkg}/{mod}.py", f"tests/test_{mod}.py"
    func = rng.choice(re.findall(r"^def (\w+)", sc.files[src], re.M))
    failing = rng.choice(_test_ids(sc, 40)[:20])
    sc.prompt(T.fill(rng, rng.choice(FIX), t=failing))
    trace = T.traceback_text(rng, sc.root, sc.pkg, mod, func)
    tests = _test_ids(sc, rng.randint(2050, 2200) if big else rng.randint(40, 240))
    log = T.pytest_log(rng, sc.root, tests, [failing], trace)
    sc.errors.append(f"`{failing}` failed ({trace.rsplit(chr(10), 1)[-1]}); fixed in {src}")
    sc.respond(sc.think(src), "Running the failing test module to reproduce.",
               [sc.bash(f"python -m pytest {test} -v", "Run the failing tests", log, code=1)])
    sc.respond(sc.think(src), sc.say(src), [sc.read(src), sc.read(test)])
    sc.respond(sc.think(src), "Now I'll make the change.", [sc.edit(src)])
    passed = (f"{'.' * rng.randint(8, 30)}{' ' * 10}[100%]\n"
              f"{rng.randint(8, 30)} passed in 0.{rng.randint(10, 99)}s")
    sc.respond(None, None, [sc.bash(f"python -m pytest {test} -q", "Re-run the tests", passed)])
    if rng.random() < 0.7:
        sc.respond(None, "Let me re-read the file to double-check the edit.", [sc.read(src)])
    sc.answer()


def _t_feature(sc: _Coding) -> None:
    rng = sc.rng
    mod = rng.choice(sc.modules)
    src = f"src/{sc.pkg}/{mod}.py"
    new_mod = f"{rng.choice(T.NOUNS)}_{rng.choice(('csv', 'audit', 'rollup', 'digest'))}"
    new = f"src/{sc.pkg}/{new_mod}.py"
    if new in sc.files:
        return _t_explore(sc)
    sc.prompt(T.fill(rng, rng.choice(FEATURE), new=new_mod, m=src) + sc.pending)
    sc.pending = ""
    sc.respond(sc.think(src), sc.say(src), [sc.read(src), sc.read("docs/architecture.md")])
    sc.respond(None, "I'll add the new module.", [sc.write(new, T.python_module(
        rng, sc.pkg, new_mod, rng.randint(50, 120)))])
    imports = "import json\nimport logging\n"
    sc.respond(None, None, [sc.edit(src, imports,
                                    f"{imports}\nfrom {sc.pkg} import {new_mod}\n")])
    test = f"tests/test_{new_mod}.py"
    sc.respond(None, "Adding tests.", [sc.write(test, T.python_tests(rng, sc.pkg, new_mod, 4))])
    ids = [f"{test}::{n}" for n in re.findall(r"^def (test_\w+)", sc.files[test], re.M)]
    if rng.random() < 0.5:
        trace = T.traceback_text(rng, sc.root, sc.pkg, new_mod, "collect")
        sc.respond(None, None, [sc.bash(f"python -m pytest {test} -v", "Run the new tests",
                                        T.pytest_log(rng, sc.root, ids, ids[:1], trace), code=1)])
        sc.respond(sc.think(new), None, [sc.edit(new)])
    sc.respond(None, None, [sc.bash(f"python -m pytest {test} -v", "Run the new tests",
                                    T.pytest_log(rng, sc.root, ids, [], ""))])
    sc.respond(None, sc.say(src), [sc.read(src)])
    sc.answer()


def _t_build(sc: _Coding, big: bool) -> None:
    rng = sc.rng
    sc.prompt(rng.choice(BUILD))
    n = rng.randint(2050, 2300) if big else rng.randint(120, 380)
    log = T.build_log(rng, sc.root + "/web", n, [sc.tsx.removeprefix("web/") + ":41:15"])
    sc.errors.append(f"web build failed with TS2339 in {sc.tsx}")
    sc.respond(sc.think(sc.tsx), "Checking the build output.",
               [sc.bash("cd web && npm run build", "Build the frontend", log, code=1)])
    sc.respond(sc.think(sc.tsx), None, [sc.read(sc.tsx), sc.read("web/src/api/client.ts")])
    sc.respond(None, "Now I'll make the change.", [sc.edit(sc.tsx)])
    sc.respond(None, None, [sc.bash("cd web && npm run build", "Rebuild the frontend",
                                    T.build_log(rng, sc.root + "/web", n // 6, []))])
    sc.answer()


def _t_review(sc: _Coding) -> None:
    sc.prompt(sc.rng.choice(REVIEW))
    diff = "\n".join(line.rstrip("\n") for p in sorted(sc.orig) for line in difflib.unified_diff(
        sc.orig[p].splitlines(), sc.files[p].splitlines(), f"a/{p}", f"b/{p}", lineterm=""))
    status = "On branch " + sc.branch + "\nChanges not staged for commit:\n" + "\n".join(
        f"\tmodified:   {p}" for p in sorted(sc.orig))
    sc.respond(None, None, [sc.bash("git status", "Show status", status),
                            sc.bash("git diff", "Show the diff", diff or "")])
    sc.answer()


def _t_misc(sc: _Coding) -> None:
    rng = sc.rng
    zh = rng.choice(T.ZH)
    sc.prompt(f"A user in Shanghai sees garbled text in the export dialog: “{zh}”. Can you check "
              "the zh-CN locale and the tokenizer helpers? Also make sure the avatar fixture "
              "is still valid base64.")
    tok = f"src/{sc.pkg}/tokenizer_utils.py"
    sc.respond(sc.think("locales/zh-CN.json"), "I'll read the three files in parallel.",
               [sc.read(tok), sc.read("locales/zh-CN.json"),
                sc.read("tests/fixtures/avatar.png.b64")])
    sc.respond(None, None, [sc.read("locales/ja.json"), sc.bash(
        "base64 -d tests/fixtures/avatar.png.b64 | file -", "Check the fixture decodes",
        "/dev/stdin: PNG image data, 1869 x 2410, 8-bit/color RGBA, non-interlaced")])
    sc.answer(f"The locale string itself is fine (“{zh}”); the garbling comes from "
              "`strip_special`, which removes `<|endoftext|>` after the text was already "
              "truncated to a byte length, cutting a multi-byte character in half.")


def _t_need(sc: _Coding, name: str) -> None:
    """A turn whose first answer needs the planted fact ``name``."""
    rng, f = sc.rng, sc.facts[name]
    key = f["key"]
    if name == "api_key_env":
        sc.prompt("Run the integration tests against staging now. Export the API key variable "
                  "first, the way I told you at the start.")
        out = (f"{'.' * rng.randint(20, 60)}{' ' * 8}[100%]\n"
               f"{rng.randint(20, 60)} passed in {rng.randint(4, 40)}.31s")
        sc.respond(None, f"Exporting `{key}` and running the integration suite.",
                   [sc.bash(f'export {key}="$(pass show {sc.project}/staging-api-key)" && '
                            "python -m pytest tests/integration -q", "Integration tests", out)],
                   uses=(name,))
    elif name == "dev_port":
        sc.prompt("Start the API locally on the port I asked you to use and hit the health "
                  "endpoint.")
        sc.respond(None, f"Starting the server on {key}.", [sc.bash(
            f"uvicorn {sc.pkg}.api:app --{key} > /tmp/api.log 2>&1 & sleep 2; "
            f"curl -s http://127.0.0.1:{key.split()[-1]}/healthz", "Start the API and check health",
            '{"status":"ok","version":"0.4.2"}')], uses=(name,))
    elif name == "batch_decision":
        sc.prompt("What upsert batch size did we agree on this morning? Make the default use it.")
        cfg = f"src/{sc.pkg}/config.py"
        new = f'"batch_size": {sc.batch},  # {key}, agreed with the DBA'
        sc.respond(None, f"We agreed to keep it at {key}. Updating the default.",
                   [sc.edit(cfg, f'"batch_size": {sc.batch_old},', new)], uses=(name,))
    elif name == "rate_limit":
        sc.prompt("Configure the worker's throttle to match the upstream rate limit from the docs.")
        cfg = f"src/{sc.pkg}/config.py"
        sc.respond(sc.think(cfg), f"The README says the upstream allows at most {key} per key, "
                   "so I'll set the throttle to exactly that.", [sc.edit(
                       cfg, "RATE_LIMIT_PER_MIN = 60  # TODO: confirm with upstream",
                       f"RATE_LIMIT_PER_MIN = {sc.limit}  # README: {key} per key")], uses=(name,))
    else:
        sc.prompt("Run the migrations against the staging database in dry-run mode.")
        plan = "\n".join(f"[dry-run] would apply {20260101 + i:08d}_{v}_{n}s.sql"
                         for i, (v, n) in enumerate(zip(T.VERBS[:6], T.NOUNS[:6])))
        sc.respond(None, None, [sc.bash(f"DATABASE_URL=postgresql://app@{key}:5432/ledger "
                                        f"python -m {sc.pkg}.cli migrate --dry-run",
                                        "Dry-run migrations on staging", plan)], uses=(name,))
    sc.answer()


def coding(seed: int, *, calls: int, compact_at: int | None, big_outputs: int) -> Session:
    """A coding-agent session of at least ``calls`` LLM calls (see `generate_session`)."""
    sc = _Coding(seed)
    rng = sc.rng
    sc.limit, sc.batch, sc.batch_old = rng.randint(31, 97), rng.randint(130, 990), 250
    token, port = f"CTX_TOKEN_{rng.getrandbits(16):04X}", rng.randint(8100, 8999)
    host = f"pg-staging-{rng.getrandbits(12):03x}.internal"
    sc.pending = ""
    sc.compact_at = compact_at
    _repo(sc)
    sc.branch = f"fix/{rng.choice(T.NOUNS)}-sync"
    noun = rng.choice(T.NOUNS)
    i = sc.prompt(f"I'm working on {sc.project}, our billing sync service. Today I want to clean "
                  f"up the {noun} sync path and get the flaky tests green. Two things you'll need "
                  f"later: the staging API key lives in the env var {token} (never print its "
                  f"value), and please use port {port} for the dev server because 8000 is taken "
                  "on my machine. Start by getting familiar with the repo.", pause=(0, 1))
    sc.fact("api_key_env", token, f"the staging API key lives in the env var {token}", i)
    sc.fact("dev_port", f"port {port}", f"use port {port} for the dev server", i)
    sc.respond(sc.think("README.md"), "I'll start with an overview of the repository.",
               [sc.glob("**/*"), sc.grep("def ", "*.py")])
    sc.respond(None, None, [sc.read("README.md"), sc.read(f"src/{sc.pkg}/config.py"),
                            sc.read("pyproject.toml")])
    sc.fact("rate_limit", f"{sc.limit} requests per minute",
            f"the upstream billing API allows at most {sc.limit} requests per minute per key",
            len(sc.msgs) - 1)
    sc.answer()
    sc.pending = (f" Decision from this morning's sync with the DBA: we keep the upsert batch size "
                  f"at {sc.batch} rows per upsert, nothing bigger. The staging database is {host}, "
                  "in case you need it.")
    _t_feature(sc)
    stated = next(j for j in range(len(sc.msgs) - 1, -1, -1) if sc.msgs[j].kind == "prompt"
                  and host in sc.msgs[j].text)
    sc.fact("batch_decision", f"{sc.batch} rows per upsert",
            f"keep the upsert batch size at {sc.batch} rows per upsert", stated)
    sc.fact("staging_db", host, f"the staging database is {host}", stated)
    _t_misc(sc)
    before, after = ["api_key_env"], ["dev_port", "batch_decision", "rate_limit", "staging_db",
                                      "api_key_env"]
    big, gap = big_outputs, 0
    while sc.calls < calls or after:
        late = (sc.compactions > 0 or sc.calls >= calls
                or compact_at is None and sc.calls >= 0.6 * calls)
        gap -= 1
        if before and sc.calls >= 0.3 * calls:
            _t_need(sc, before.pop(0))
        elif after and late and gap <= 0:
            _t_need(sc, after.pop(0))
            gap = 1 if sc.calls >= calls else 2
        elif big and sc.turn >= 4:
            _t_build(sc, big=True) if (big_outputs - big + seed) % 2 == 0 else _t_fix(sc, big=True)
            big -= 1
        else:
            kind = rng.choices(("fix", "feature", "explore", "build", "review"),
                               (4, 2, 2, 1, 1))[0]
            if kind == "build":
                _t_build(sc, big=False)
            else:
                {"fix": _t_fix, "feature": _t_feature, "explore": _t_explore,
                 "review": _t_review}[kind](sc)
    return sc.finish("coding", "claude-opus-4-6", sc.branch,
                     f"You are a coding agent working in {sc.root}. Use the tools to read, edit "
                     "and run code. Keep answers short and cite file paths.")


def projects(seed: int, *, context_tokens: int) -> Session:
    """A projects-mode chat: the first message carries the whole project as context."""
    sc = _Script("projects", seed)
    rng = sc.rng
    name = rng.choice(("Atlas Migration", "Q3 Pricing Review", "Harbor Launch", "Nimbus Rollout"))
    sc.root = "/home/dev/vault/" + name.replace(" ", "-")
    code = f"{rng.choice(('HERON', 'KESTREL', 'MARLIN', 'OSPREY', 'LYNX'))}-{rng.randint(11, 98)}"
    renew = f"renews on {rng.randint(2, 28)} {rng.choice(('March', 'June', 'October'))} 2026"
    budget = f"€{rng.randint(120, 480)},{rng.randint(100, 999)}"
    planted = [(0.12, "Notes/Launch/Naming.md", f"The internal codename for the launch is {code}; "
                "never use it in customer-facing text."),
               (0.5, "Notes/Vendors/Contract.md", f"The hosting contract with the vendor {renew} "
                "and needs 60 days' notice to cancel."),
               (0.86, "Notes/Finance/Budget.md", f"The hard budget cap for 2026 is {budget}, "
                "including contractors.")]
    target, size = int(context_tokens * 3.6), 0
    pieces: list[str] = []
    while size < target or planted:
        if planted and size >= planted[0][0] * target:
            _, p, sentence = planted.pop(0)
            body = T.markdown_doc(rng, p.rsplit("/", 1)[-1][:-3], 2, extra=sentence)
        else:
            kind = rng.choices(("note", "web", "video", "code", "cjk"), (6, 2, 1, 1, 1))[0]
            topic = rng.choice(T.NOUNS).title() + " " + rng.choice(("plan", "review", "spec"))
            folder = rng.choice(("Planning", "Research", "Meetings", "Ops"))
            p = f"Notes/{folder}/{topic} {len(pieces)}.md"
            body = {"note": lambda: T.markdown_doc(rng, topic, rng.randint(2, 6)),
                    "web": lambda: "\n\n".join(T.prose(rng, 5) for _ in range(rng.randint(3, 8))),
                    "video": lambda: "\n".join(f"[{m // 60:02d}:{m % 60:02d}] {T.prose(rng, 1)}"
                                               for m in range(0, rng.randint(600, 2400), 17)),
                    "code": lambda: T.python_module(rng, "vault", "sync", rng.randint(60, 160)),
                    "cjk": lambda: "\n".join(rng.choice(T.ZH + T.JA) for _ in range(30))}[kind]()
            if kind == "web":
                p = f"https://blog.example.org/{topic.lower().replace(' ', '-')}"
            elif kind == "video":
                video_id = "".join(rng.choice(T.B58) for _ in range(11))
                p = f"https://www.youtube.com/watch?v={video_id}"
        sc.files[p] = body
        tag, attr = (("web_content", "url") if p.startswith("https://blog") else
                     ("youtube_transcript", "url") if p.startswith("https://www") else
                     ("file", "path"))
        pieces.append(f'<{tag} {attr}="{p}">\n{body}\n</{tag}>')
        size += len(pieces[-1])
    sc.files["Notes/Roadmap.md"] = T.markdown_doc(rng, "Roadmap", 4)
    pieces.append(f'<file path="Notes/Roadmap.md">\n{sc.files["Notes/Roadmap.md"]}\n</file>')
    context = (f"<project_context>\n<project_name>{name}</project_name>\n<project_instructions>"
               "Answer from these notes; cite the note path.</project_instructions>\n"
               + "\n".join(pieces) + "\n</project_context>")
    sys_i = sc.add("system", [Block(type="text", text=context)])
    for fact, key in (("codename", code), ("contract_renewal", renew), ("budget_cap", budget)):
        sc.fact(fact, key, next(line for line in context.split("\n") if key in line), sys_i)
    sc.prompt("I've loaded the whole project. Summarize the open risks across the notes, "
              "grouped by area.", pause=(0, 1))
    sc.respond("The user wants risks grouped by area; the planning, ops and vendor notes "
               "carry most of them.", "\n\n".join(
        f"**{n.title()}**: {T.prose(rng, 3)}" for n in rng.sample(T.NOUNS, 5)))
    meeting = T.markdown_doc(rng, "Sync", 2)
    sc.prompt(f'<note_context path="Meetings/2026-01-12 sync.md">\n{meeting}\n</note_context>\n\n'
              "Compare this meeting note with the roadmap. What changed since last month?")
    sc.respond(None, "Let me find the roadmap note.", [sc.grep("# Roadmap", "*.md")])
    sc.respond(None, None, [sc.read("Notes/Roadmap.md")])
    sc.answer()
    sc.prompt("What's the internal codename of the launch again? I want it in the release notes.")
    sc.respond(None, f"The launch codename is {code} (Notes/Launch/Naming.md). It is meant to "
               "stay internal, so I would leave it out of customer-facing release notes.",
               uses=("codename",))
    sc.prompt("Draft a short email to finance about the vendor contract.")
    sc.respond(None, f"Subject: Hosting contract renewal\n\nHi all,\n\nThe hosting contract "
               f"{renew}; cancelling needs 60 days' notice. {T.prose(rng, 2)}\n\nBest,\nDev",
               uses=("contract_renewal",))
    sc.prompt("Are we still under the budget cap after the new hires? Check the finance notes.")
    sc.respond(None, "Let me look at the finance notes.", [sc.grep("budget cap")])
    sc.respond(None, f"The cap for 2026 is {budget} including contractors. {T.prose(rng, 2)}",
               uses=("budget_cap",))
    sc.prompt("能不能用中文总结一下最新的进展？")
    sc.respond(None, "最新进展：" + "".join(rng.sample(T.ZH, 4)))
    return sc.finish("projects", "claude-sonnet-4-5-20250929", "main",
                     f"You are a helpful assistant for the {name} project. Answer from the "
                     "project context and cite note paths.")
