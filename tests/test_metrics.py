"""Artifact extraction, retention per compaction event and needed-fact recall per call."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

import ctxlab
from ctxlab import metrics
from ctxlab.engine import request_parts
from ctxlab.errors import ConfigError
from ctxlab.history import apply_edit, rewind
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.metrics import (ARTIFACT_KINDS, artifacts, needed_facts_df, needed_recall_df,
                            part_artifacts, recall_summary, retention_df, retention_summary,
                            summarize_recall, summarize_retention)
from ctxlab.pipeline import Pipeline, compact, compact_all, stages_from
from ctxlab.stages.base import Edit, NewPart
from tests.conftest import DATASETS, realdata_path


def _values(text: str, kind: str, **kw: object) -> list[str]:
    a = artifacts(pd.Series([text]), **kw)
    return a.loc[a["kind"] == kind, "value"].tolist()


# ---- extraction ------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("edit src/app/config.py, then /home/dev/x.md.", ["/home/dev/x.md", "src/app/config.py"]),
    ("see README.md and ~/notes/todo.txt", ["README.md", "~/notes/todo.txt"]),
    ("cd /home/dev/projects/quillstack && ls", ["/home/dev/projects/quillstack"]),
    ("tests/test_api.py::test_bulk PASSED", ["tests/test_api.py"]),
    ("the backup config.py.bak and the archive x.tar.gz/", []),
    ("and/or, 3/4, https://example.com/a/b and os.environ", []),
])
def test_paths(text, expected):
    assert _values(text, "path") == sorted(expected)


@pytest.mark.parametrize("text, expected", [
    ('Bash({"command": "uvicorn app:app --port 8387", "description": "Start"})',
     ["uvicorn app:app --port 8387"]),
    ('Bash({"command":"echo \\"hi\\" && ls"})', ['echo "hi" && ls']),
    ('shell({"command":["bash","-lc","sed -n \'1,20p\' go.mod"]})', ["sed -n '1,20p' go.mod"]),
    ("Run it:\n$ git status\n- `$ python -m pytest -q` (ok)",
     ["git status", "python -m pytest -q"]),
    ('Read({"file_path": "/x/y.py", "command": "not a shell"})', []),
    ("The cost is $ 5 and a `cmd`", []),
    # a ']' inside one of the list's strings does not end the list
    ('shell({"command":["bash","-lc","python -c \\"print([1, 2])\\""]})',
     ['python -c "print([1, 2])"']),
    ('shell({"command":["bash","-lc","[ -f go.mod ] && echo yes"], "timeout": 5})',
     ["[ -f go.mod ] && echo yes"]),
])
def test_commands(text, expected):
    assert _values(text, "command") == sorted(expected)


def test_a_tool_result_stored_as_json_yields_what_its_text_does():
    out = ("collected 3 items\nsrc/app/config.py:12: in load\nparse_invoices failed\n"
           "ValueError: bad port\n$ git status")
    plain = artifacts(pd.Series([out]))
    for doc in (json.dumps({"output": out}), json.dumps([{"result": {"output": out}}])):
        got = artifacts(pd.Series([doc]))
        assert got[["kind", "value"]].equals(plain[["kind", "value"]]), doc
    # keys and other values are lines of their own; text that is not JSON stays as it is
    assert _values('{"file_path": "src/x.py", "port": 8387, "ok": true}', "path") == \
        ["src/x.py"]
    assert _values("[1/2] building src/app/main.py", "path") == ["src/app/main.py"]
    # every value of a repeated key, numbers as written, keys never (no 'error:' lines)
    doc = '{"output": "ValueError: bad port in src/a.py", "output": "ok", "error": null}'
    assert _values(doc, "path") == ["src/a.py"]
    assert _values(doc, "error") == ["ValueError: bad port in src/a.py"]
    assert _values('{"t": 1700000000.123456789}', "number") == ["1700000000.123456789"]
    # nested past the JSON parser's depth: read as text, not an error
    assert _values("[" * 1000 + " see src/app/main.py", "path") == ["src/app/main.py"]


def test_a_long_sentence_before_its_keyword_is_still_an_instruction():
    lead = "So, about the reporting service that we discussed yesterday with the team " * 5
    text = lead + "please keep the public API of the module exactly as it is."
    assert 300 < text.index("please") < 2000
    got = _values(text, "instruction")
    assert len(got) == 1 and got[0] == text[:300]


def test_errors_keep_failure_lines_and_skip_code():
    text = ("Traceback (most recent call last):\n  File \"x.py\", line 3, in f\n"
            "E   ValueError: bad id\ntests/t.py::test_a FAILED   [ 40%]\n"
            "fatal: not a git repository\nerror[E0382]: borrow of moved value\n"
            "    except Exception:\nclass RateError(Exception):\nall good here\n")
    assert _values(text, "error") == sorted([
        "Traceback (most recent call last):", "ValueError: bad id", "tests/t.py::test_a FAILED",
        "fatal: not a git repository", "error[E0382]: borrow of moved value"])


@pytest.mark.parametrize("text, kind, expected", [
    # written without spaces, as CJK text is: the path and the number were missed, or the
    # path took the words around it
    ("请修改src/app/config.py文件", "path", ["src/app/config.py"]),
    ("最後幫我把刪除TODO.md", "path", ["TODO.md"]),
    ("上限是8387个请求", "number", ["8387"]),
    ("CLAUDE.mdファイルを最新の状態にアップデートしました", "identifier", []),
    # a CJK file name is a file name
    ("read /home/wei/repo/版本需求說明-繁體中文.md", "path",
     ["/home/wei/repo/版本需求說明-繁體中文.md"]),
])
def test_artifacts_next_to_cjk_text(text, kind, expected):
    assert _values(text, kind) == sorted(expected)


@pytest.mark.parametrize("text, expected", [
    ("call parse_invoices on RateLimiter via parseInvoices",
     ["RateLimiter", "parseInvoices", "parse_invoices"]),
    ("read os.environ, quillstack.api and CTX_TOKEN_924E",
     ["CTX_TOKEN_924E", "os.environ", "quillstack.api"]),
    ("host pg-staging-821.internal; codename MARLIN-15", ["MARLIN-15", "pg-staging-821.internal"]),
    ("Hello world. The Quick brown fox, e.g. a U.S. dog, i.e. well-known. README says OK.", []),
    ("Python 3.11 and v2.1.39 with APIs", []),
    ("decode as UTF-8, check the SHA-256 and ISO-8859-1; see JIRA-7", ["JIRA-7"]),
    ('Edit({"file_path": "/a/b.py", "old_string": "x", "replace_all": false})', []),
])
def test_identifiers(text, expected):
    assert _values(text, "identifier") == sorted(expected)


@pytest.mark.parametrize("text, expected", [
    ("use port 8387; it answers 429 above 87 requests per minute", ["429", "8387", "87 requests"]),
    ("cap €178,587; took 250ms or 1.5 s; 15% of 60 days; see #42",
     ["#42", "1.5 s", "15%", "250 ms", "60 days", "€178587"]),
    ("port 80 and http://127.0.0.1:5432/db", ["5432", "80"]),
    ("Python 3.11, version 1.2.3, at 127.0.0.1, 2 files? no: 7 apples, 0.25", ["2 files"]),
    ("CTX_TOKEN_924E v2 pg-staging-821 2026-01-12T09:00:00Z test_bulk[798] [ 40%]", []),
    ("     120→    return x\n   1234\tdef f():", []),
    ("tests/test_api.py ........ [100%]\nCPU at 100% of 250 requests", ["100%", "250 requests"]),
    ("used 1.5k tokens of 128K, then 2M rows; 2.25k", ["128000", "1500 tokens", "2000000 rows",
                                                       "2250"]),
    # a log line's clock: its seconds and milliseconds are no thousands
    ("2026-03-23 10:15:42,123 - app - INFO - took 1,500 ms", ["1500 ms"]),
])
def test_numbers(text, expected):
    assert _values(text, "number") == sorted(expected)


def test_compiler_and_type_checker_diagnostics_are_errors():
    """gcc/clang, mypy and tsc name the file and line before ``error``; a word that only
    ends in ``:3:`` or a prose ``error`` mid-line is not one."""
    text = ("main.c:3:5: error: expected ';' before '}' token\n"
            "main.c:1:10: fatal error: foo.h: No such file or directory\n"
            "src/app.py:12: error: Incompatible types in assignment\n"
            "src/app.ts(3,5): error TS2304: Cannot find name 'x'.\n"
            "main.c:7:1: warning: unused variable\n"
            "ratio 3:4: no error here\n")
    assert _values(text, "error") == sorted([
        "main.c:3:5: error: expected ';' before '}' token",
        "main.c:1:10: fatal error: foo.h: No such file or directory",
        "src/app.py:12: error: Incompatible types in assignment",
        "src/app.ts(3,5): error TS2304: Cannot find name 'x'."])


def test_a_file_reads_line_gutter_is_not_part_of_an_error_line():
    """Claude Code numbers the lines of a file it read (``126→``): a code line stays code,
    and the same error line at two line numbers is one error."""
    text = ("    42→        except ValueError:\n   133→    raise RuntimeError(\"x\")\n"
            "     7→Error: config missing\n    19→Error: config missing\n")
    assert _values(text, "error") == ["Error: config missing"]


def test_dates_are_normalised_to_iso():
    text = "renews on 23 March 2026, or March 5, 2026, or 2026-04-01; not 2026-01-12T09:00"
    assert _values(text, "date") == ["2026-03-05", "2026-03-23", "2026-04-01"]
    assert _values("no date in May or 12 Foo 2026", "date") == []


def test_instructions_only_from_user_rows():
    text = ("Start by reading the repo. Please use port 8387 for the dev server. "
            "Never print the key, e.g. in logs! We don't deploy on Fridays")
    got = _values(text, "instruction")
    assert got == sorted(["Please use port 8387 for the dev server",
                          "Never print the key, e.g. in logs", "We don't deploy on Fridays"])
    assert _values(text, "instruction", user=pd.Series([False])) == []


def test_artifacts_frame_shape_order_and_empty_input():
    s = pd.Series(["x", None, "see a/b.py and a/b.py"], index=[10, 11, 12], dtype="string")
    a = artifacts(s)
    assert list(a.columns) == ["row", "kind", "value"]
    assert a.to_dict("list") == {"row": [12], "kind": ["path"], "value": ["a/b.py"]}
    empty = artifacts(pd.Series([], dtype="string"))
    assert list(empty.columns) == ["row", "kind", "value"] and empty.empty
    assert set(ARTIFACT_KINDS) == {"path", "command", "error", "identifier", "number", "date",
                                   "instruction"}


def test_artifacts_are_deterministic_and_row_independent():
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    texts = t.frame["content"].reset_index(drop=True)
    a, b = artifacts(texts), artifacts(texts)
    pd.testing.assert_frame_equal(a, b)
    rev = artifacts(texts[::-1]).sort_values(["row", "kind", "value"], ignore_index=True)
    pd.testing.assert_frame_equal(a.sort_values(["row", "kind", "value"], ignore_index=True),
                                  rev)


# ---- facts.json: every planted fact's key is an artifact ---------------------------------
def _facts() -> list[tuple[str, dict]]:
    sidecar = json.loads((DATASETS / "facts.json").read_text(encoding="utf-8"))
    return [(file, fact) for file, spec in sidecar["files"].items()
            for s in spec["sessions"] for fact in s["facts"]]


@pytest.mark.parametrize("file, fact", _facts(), ids=lambda v: v if isinstance(v, str)
                         else v["name"])
def test_every_planted_fact_key_is_recognised(file, fact):
    a = artifacts(pd.Series([fact["key"]]))
    assert len(a) >= 1, f"{file}: {fact['key']!r} yields no artifact"
    stated = artifacts(pd.Series([fact["statement"]]))
    assert set(a["value"]) <= set(stated["value"])


# ---- a small session, by hand ------------------------------------------------------------
def _session():
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s1", log)
    b.message("system")
    b.part("text", "You are a coding agent.")
    b.message("user", real_user=True)
    b.part("text", "Please use port 8387 for the dev server. Edit src/app/main.py.")  # part 1
    b.call(call_id="c0")
    b.message("assistant")
    b.part("text", "Noted: port 8387.", call=0)  # part 2
    b.message("user", real_user=True)
    b.part("text", "Now start the server.")  # part 3
    b.call(call_id="c1")
    b.message("assistant")
    b.part("tool_call", 'Bash({"command": "uvicorn app:app --port 8387"})', tool_name="Bash",
           tool_call_id="t1", call=1)  # part 4
    b.message("tool")
    b.part("tool_result", "started", tool_name="Bash", tool_call_id="t1")
    log.used("line", line=1, parts=6)
    return assemble([b], log, {"format": "test"})


def _hide_first_turn(t, summary: str):
    end = float(t.calls.loc[t.calls["call"] == 1, "input_end_pos"].iloc[0])
    edit = Edit(stage="summarize", reason="test", hide=(1, 2),
                insert=(NewPart(content=summary, kind="summary", role="user", anchor=2),))
    return apply_edit(t, edit, session="s1", end_pos=end)[0]


def test_recall_and_retention_on_a_small_session():
    t = _session()
    base = needed_recall_df(t)
    assert base[["call", "needed", "missing"]].to_dict("list") == \
        {"call": [0, 1], "needed": [1, 1], "missing": [0, 0]}
    assert base["recall"].tolist() == [1.0, 1.0]
    lossy = _hide_first_turn(t, "The user asked for a dev server.")
    r = needed_recall_df(lossy)
    assert r.loc[1, ["needed", "missing"]].tolist() == [1, 1]
    assert r.loc[1, "recall"] == 0.0 and r.loc[1, "missing_values"] == ("8387",)
    assert r.loc[0, "missing"] == 0  # call 0 came before the event
    kept = _hide_first_turn(t, "Please use port 8387 for the dev server. Edited nothing.")
    assert needed_recall_df(kept).loc[1, "missing"] == 0
    ret = retention_df(lossy).set_index("kind")
    assert ret.loc["all", "hidden_artifacts"] == 3  # path, number, instruction
    assert ret.loc["all", "retained"] == 0 and ret.loc["all", "retention"] == 0.0
    assert math.isnan(ret.loc["command", "retention"])
    ret = retention_df(kept).set_index("kind")
    assert ret.loc["number", "retained"] == 1 and ret.loc["instruction", "retained"] == 1
    assert ret.loc["path", "retained"] == 0
    assert list(ret.index) == [*ARTIFACT_KINDS, "all"]
    assert set(ret["stage"]) == {"summarize"}


def test_nothing_needed_gives_nan_recall_and_empty_results():
    t = _session()
    none = needed_recall_df(t, kinds=["error"])
    assert none["needed"].tolist() == [0, 0] and none["recall"].isna().all()
    assert none["missing_values"].tolist() == [(), ()]
    assert needed_facts_df(t, kinds=["error"]).empty
    assert retention_df(t).empty  # no compaction event
    s = summarize_retention(retention_df(t))
    assert s["events"] == 0 and math.isnan(s["retention"])
    with pytest.raises(ConfigError, match="unknown artifact kinds"):
        needed_recall_df(t, kinds=["paths"])
    with pytest.raises(ConfigError, match="user has 2 values for 1 texts"):
        artifacts(pd.Series(["x"]), user=pd.Series([True, False]))
    empty = dataclasses.replace(t, frame=t.frame.iloc[:0], calls=t.calls.iloc[:0])
    assert needed_recall_df(empty).empty and retention_df(empty).empty
    assert recall_summary(empty)["calls"] == 0 and math.isnan(recall_summary(empty)["recall"])


def test_a_statement_in_a_rewound_branch_is_not_needed():
    """A part hidden by a history edit (the user rewound the chat) never stated anything."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s1", log)
    b.message("user", real_user=True)
    b.part("text", "Use port 8387 for the dev server.")
    ev = b.event(origin="rewind", trigger="rewind", pre_tokens=None, reason="user rewound")
    b.hide([0], ev)
    b.message("user", real_user=True)
    b.part("text", "Start the dev server.")
    b.call(call_id="c0")
    b.message("assistant")
    b.part("tool_call", 'Bash({"command": "uvicorn app:app --port 8387"})', tool_name="Bash",
           tool_call_id="t1", call=0)
    log.used("line", line=1, parts=3)
    t = assemble([b], log, {"format": "test"})
    r = needed_recall_df(t)
    assert r["needed"].tolist() == [0] and r["recall"].isna().all()
    assert retention_df(t, include_recorded=True).empty  # a history edit is no compaction


def test_several_sessions_without_compaction():
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    r = needed_recall_df(t)
    assert list(r["session"]) == list(t.calls["session"]) and list(r["call"]) == list(
        t.calls["call"])
    assert set(r["session"]) == set(t.sessions) and len(t.sessions) == 4
    assert (r["missing"] == 0).all() and r.loc[r["needed"] > 0, "recall"].eq(1.0).all()


# ---- the bundled coding session -----------------------------------------------------------
@pytest.fixture(scope="module")
def loaded():
    return ctxlab.load(DATASETS / "coding_session.jsonl")


@pytest.fixture(scope="module")
def neurolink(loaded):
    """neurolink's triggered stages over every call at a 60k window: 20 events (prune,
    dedup, summarize...), without its tool-output limit: with it, the summaries at this
    window lose every planted fact, and the tests below need some lost and some kept."""
    t, _ = compact_all(loaded.rewind_recorded(), ctxlab.preset("neurolink", always=()),
                       window=60_000)
    return t


def _coding_facts():
    sidecar = json.loads((DATASETS / "facts.json").read_text(encoding="utf-8"))
    (spec,) = sidecar["files"]["coding_session.jsonl"]["sessions"]
    return spec


def _planted(t):
    """(fact, artifact value, needed call, value visible in the call's input?) by brute force."""
    spec = _coding_facts()
    out = []
    for fact in spec["facts"]:
        key = artifacts(pd.Series([fact["key"]]))
        value = key["value"].iloc[0]
        for need in fact["needed"]:
            end = float(t.calls.loc[t.calls["call"] == need["call"], "input_end_pos"].iloc[0])
            seen = request_parts(t, spec["session"], end)["content"].str.contains(
                value, regex=False).any()
            out.append((fact, value, need["call"], bool(seen)))
    return out


def test_no_compaction_means_full_recall(loaded):
    t = loaded.rewind_recorded()
    r = needed_recall_df(t)
    assert len(r) == 151 and (r["missing"] == 0).all()
    assert (r.loc[r["needed"] > 0, "recall"] == 1.0).all()
    s = recall_summary(t)
    assert s["recall"] == 1.0 and s["calls_with_missing"] == 0 and s["needed"] > 100
    facts = needed_facts_df(t)
    for fact, value, call, _ in _planted(t):  # every planted fact is needed where planned
        assert ((facts["call"] == call) & (facts["value"] == value)).any(), (fact["name"], call)


def test_recorded_compaction_loses_the_facts_its_summary_dropped(loaded):
    spec = _coding_facts()
    before = spec["compactions"][0]["before_call"]
    facts = needed_facts_df(loaded).set_index(["call", "value"])["missing"]
    for fact, value, call, seen in _planted(loaded):
        expected = call >= before and not fact["in_summary"]
        assert bool(facts.loc[(call, value)]) is expected, (fact["name"], call)
        assert seen is not expected


def test_planted_facts_after_neurolink_match_the_ground_truth(neurolink):
    facts = needed_facts_df(neurolink).set_index(["call", "value"])["missing"]
    results = []
    for fact, value, call, seen in _planted(neurolink):
        assert bool(facts.loc[(call, value)]) is (not seen), (fact["name"], call)
        results.append(seen)
    assert not all(results) and any(results)  # some planted facts lost, some kept
    r = needed_recall_df(neurolink).set_index("call")
    assert "8387" in r.loc[95, "missing_values"] and r.loc[95, "recall"] < 1.0


def test_needed_facts_equal_a_per_call_brute_force(neurolink):
    t = neurolink
    occ = part_artifacts(t)
    f = t.frame
    got = needed_facts_df(t)
    for call in range(0, 151, 6):
        end = float(t.calls.loc[t.calls["call"] == call, "input_end_pos"].iloc[0])
        visible = set(t.frame.index.get_indexer(request_parts(t, t.sessions[0], end).index))
        original = np.flatnonzero((f["event"].isna() & (f["pos"] < end)).to_numpy())
        produced = np.flatnonzero(((f["call"] == call) & (f["role"] == "assistant"))
                                  .fillna(False).to_numpy())
        said = occ[occ["row"].isin(produced)]
        stated = occ[occ["row"].isin(original)]
        shown = occ[occ["row"].isin(visible)]
        need = said[said["aid"].isin(stated["aid"])].drop_duplicates("aid")
        expected = sorted(zip(need["value"], ~need["aid"].isin(shown["aid"])))
        mine = got[got["call"] == call]
        assert sorted(zip(mine["value"], mine["missing"])) == expected, call


def test_retention_equals_a_rewind_brute_force(neurolink):
    t, session = neurolink, neurolink.sessions[0]
    got = retention_df(t).set_index(["event", "kind"])
    occ = part_artifacts(t)
    ends = np.sort(t.calls["input_end_pos"].to_numpy(dtype=float))
    last = int(t.events["event"].max())
    # a file is written one way within the session (`one_spelling`), as the metrics see it
    from ctxlab.artifacts import artifact_ids, artifact_values
    from ctxlab.metrics import one_spelling
    _, ids = artifact_ids(t.frame["content"].reset_index(drop=True))
    spelled = dict(zip(artifact_values(ids), artifact_values(
        one_spelling(ids, np.zeros(len(ids), np.int64)))))
    for event in t.events["event"].astype(int):
        after = rewind(t, event + 1, session=session) if event < last else t
        pos = float(t.events.loc[t.events["event"] == event, "pos"].iloc[0])
        end = ends[np.searchsorted(ends, pos, side="right")]
        view = request_parts(after, session, end)
        shown = artifacts(view["content"].reset_index(drop=True))
        keys = {(k, spelled.get(v, v) if k == "path" else v)
                for k, v in zip(shown["kind"], shown["value"])}
        rows = np.flatnonzero((t.frame["hidden_by"] == event).fillna(False).to_numpy())
        lost = occ[occ["row"].isin(rows)].drop_duplicates(["kind", "value"])
        kept = sum((k, v) in keys for k, v in zip(lost["kind"], lost["value"]))
        assert got.loc[(event, "all"), "hidden_artifacts"] == len(lost), event
        assert got.loc[(event, "all"), "retained"] == kept, event


def test_summary_keeps_more_paths_than_truncation_on_the_same_request(loaded):
    base = loaded.rewind_recorded()
    out = {}
    for name in ("summarize", "truncate"):
        r = compact(base, Pipeline(name=name, stages=stages_from([name])), window=200_000,
                    call=80, force=True)
        assert r.stages_used == (name,)
        out[name] = retention_df(r.transcript).set_index("kind")
    s, tr = out["summarize"], out["truncate"]
    assert s.loc["path", "hidden_artifacts"] == tr.loc["path", "hidden_artifacts"] > 20
    assert s.loc["path", "retention"] > 0.6 and tr.loc["path", "retention"] < 0.5
    assert s.loc["path", "retained"] >= 1.5 * tr.loc["path", "retained"]
    assert s.loc["instruction", "retention"] == 1.0 > tr.loc["instruction", "retention"]


def test_summaries_are_plain_numbers(neurolink):
    rs = recall_summary(neurolink)
    assert set(rs) == {"calls", "calls_needing", "needed", "missing", "recall",
                       "mean_call_recall", "calls_with_missing"}
    assert rs["calls"] == 151 and 0 < rs["missing"] < rs["needed"]
    assert rs["recall"] == pytest.approx(1 - rs["missing"] / rs["needed"])
    ret = retention_summary(neurolink)
    assert ret["events"] == len(neurolink.events)
    assert 0 < ret["retention"] < 1 and set(ret["retention_by_kind"]) == set(ARTIFACT_KINDS)
    assert all(isinstance(v, (int, float)) for v in rs.values())
    assert summarize_recall(needed_recall_df(neurolink)) == rs


def test_results_are_deterministic(neurolink):
    pd.testing.assert_frame_equal(needed_recall_df(neurolink), needed_recall_df(neurolink))
    pd.testing.assert_frame_equal(retention_df(neurolink), retention_df(neurolink))


def test_recall_extracts_each_text_once_then_reuses_it(neurolink, monkeypatch):
    import ctxlab.artifacts as art

    calls: list[int] = []
    real = art.artifacts

    def counting(texts, **kw):
        calls.append(len(texts))
        return real(texts, **kw)

    monkeypatch.setattr(art, "artifacts", counting)
    monkeypatch.setattr(art, "_CACHE", {})
    monkeypatch.setattr(metrics, "_LAST", [])
    f = neurolink.frame
    distinct = len(set(zip(f["content"].fillna("").tolist(),
                           art.instruction_rows(f).tolist())))
    r = needed_recall_df(neurolink)
    assert len(r) == 151 and calls == [distinct] and distinct < len(f)
    calls.clear()
    expected = retention_df(neurolink)       # the same texts: nothing extracted again
    assert calls == []
    monkeypatch.setattr(art, "_CACHE", {})   # and the caches change no result
    monkeypatch.setattr(metrics, "_LAST", [])
    pd.testing.assert_frame_equal(retention_df(neurolink), expected)
    pd.testing.assert_frame_equal(needed_recall_df(neurolink), r)
    assert calls == [distinct]


@pytest.mark.realdata
def test_real_claude_code_compaction_loses_some_needed_facts():
    t = ctxlab.load(realdata_path("claude_code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"))
    real = recall_summary(t)
    assert 0.5 < real["recall"] < 1.0 and real["calls_with_missing"] > 0
    assert recall_summary(t.rewind_recorded())["recall"] == 1.0
    ret = retention_df(t, include_recorded=True)
    assert set(ret["stage"]) == {"recorded"} and retention_df(t).empty
    assert 0 < ret.loc[ret["kind"] == "path", "retention"].iloc[0] < 1


def _same_totals(t):
    got = metrics.loss_totals(t)
    rec = metrics.summarize_recall(needed_recall_df(t))
    ret = metrics.summarize_retention(retention_df(t))
    want = {k: rec[k] for k in ("needed", "missing", "recall")} | {
        k: ret[k] for k in ("hidden_artifacts", "retained", "retention")}
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == v or (math.isnan(got[k]) and math.isnan(v)), k
    return got


@pytest.mark.parametrize("preset", ["neurolink", "neuron", "observation-masking",
                                    "copilot-fixed"])
def test_loss_totals_equal_the_summaries_of_the_full_frames(preset):
    """A sweep records `loss_totals`; they are what the per-call and per-event frames sum to."""
    t = ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()
    got = _same_totals(ctxlab.replay(t, preset).transcript)
    assert got["needed"] > 0


@pytest.mark.realdata
def test_loss_totals_on_a_real_compacted_log():
    t = ctxlab.load(realdata_path("claude_code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"))
    got = _same_totals(t)                     # the log's own compaction is not measured
    assert got["missing"] > 0 and math.isnan(got["retention"])
    assert _same_totals(ctxlab.replay(t, "claude-code").transcript)["hidden_artifacts"] > 0


@pytest.mark.parametrize("text, kind, value, found", [
    ('Bash({"command": "sleep 5", "timeout": 120000})', "number", "120000", False),
    ('Read({"file_path": "/r/a.py", "offset": 280, "limit": 50})', "number", "280", False),
    ('Bash({"command": "curl localhost:8387/health"})', "number", "8387", True),
    ("1475:    def foo(x):\n1476:        return 9000", "number", "1475", False),
    ("1475:    def foo(x):\n1476:        return 9000", "number", "9000", True),
    ("src/x.py:1143:    y = 1", "number", "1143", False),
    ("Error 404: not found", "number", "404", True),
    ("404: Not Found", "number", "404", True),
    ("dial tcp localhost:5432: connect: connection refused", "number", "5432", True),
    ("lib/a.ex:105:9: warning: unused", "number", "105", False),
    ("1:import os", "number", "1", False),
    ("width: 120px;", "number", "120 px", False),
    ("waited 30 seconds", "number", "30 s", True),
    ("sent 87 reqs", "number", "87 requests", True),
    ("+    except ImportError:", "error", "+ except ImportError:", False),
    ("with contextlib.suppress(Exception):", "error", "with contextlib.suppress(Exception):",
     False),
    ("see lib/spotter/waiting_summary.ex and mix.exs", "path", "mix.exs", True),
])
def test_artifact_rules_from_the_review_of_real_logs(text, kind, value, found):
    """Numbers that set a tool (43% of the real Claude Code logs' needed numbers), line
    gutters, CSS sizes and unit spellings; diff lines of code as errors; Elixir files."""
    got = artifacts(pd.Series([text]))
    assert ((got["kind"] == kind) & (got["value"] == value)).any() == found, got


def test_a_lone_surrogate_does_not_stop_the_extraction():
    text = pd.Series(["half an emoji \ud83d in src/b.py"], dtype=object)
    assert artifacts(text)["value"].tolist() == ["src/b.py"]


def test_a_file_written_two_ways_in_a_session_is_one_fact():
    """Claude Code reads absolute paths and its summaries name them relative: on the three
    real compactions, 24 needed paths were "missing" though 20 were in the request,
    written the other way; one spelling per file leaves 10."""
    from tests.conftest import realdata_path

    missing = 0
    for name in ("258c7280-ae70-4798-800f-63464d01a85d", "4d5611e5-241a-462a-8d15-5122611a9569",
                 "8463c716-a2ea-4c14-9efa-87158ebd9f20"):
        f = needed_facts_df(ctxlab.load(realdata_path(f"claude_code/spotter/{name}.jsonl")))
        missing += int(f.loc[f["kind"] == "path", "missing"].sum())
    assert missing == 10


@pytest.mark.parametrize("text, command", [
    ("THOUGHT: run it.\n\n```bash\npython reproduce_issue.py\n```", "python reproduce_issue.py"),
    ("Let's open it.\n\n```\nopen tests/missing_colon.py\n```", "open tests/missing_colon.py"),
    ("```\nedit 4:4\ndef division(a, b):\nend_of_edit\n```", "edit 4:4"),
    ("Here is code:\n```python\nprint(1)\n```\nand more after", None),
    ("```python\nprint(1)\n```", None),
])
def test_the_command_in_the_fenced_block_that_ends_a_reply(text, command):
    """mini-swe-agent and SWE-agent write the command they run as the fenced block that
    ends their reply: no command was ever extracted from their logs."""
    got = artifacts(pd.Series([text]))
    assert got.loc[got["kind"] == "command", "value"].tolist() == ([command] if command else [])


def test_commands_of_real_agent_loops_are_needed_facts():
    from tests.conftest import realdata_path

    f = needed_facts_df(ctxlab.load(realdata_path(
        "mini_swe_agent/psf__requests-1142.traj.json")))
    assert (f["kind"] == "command").sum() >= 10


def test_two_checkouts_of_one_file_and_a_plain_a_folder_stay_apart():
    """A main checkout and a git worktree hold two copies of app.js (spotter 8463c716):
    hiding one while the other shows is not retention. ``a/b/c.py`` is a diff's name only
    when ``b/b/c.py`` is written too."""
    from ctxlab.artifacts import artifact_ids, artifact_values
    from ctxlab.metrics import one_spelling

    texts = pd.Series(["/home/u/spotter/assets/js/app.js", "/home/u/wt/spotter/assets/js/app.js",
                       "assets/js/app.js", "a/b/c.py", "b/c.py",
                       "--- a/src/x.py", "+++ b/src/x.py", "src/x.py"])
    _, ids = artifact_ids(texts)
    got = artifact_values(one_spelling(ids, np.zeros(len(ids), np.int64))).tolist()
    assert got == ["/home/u/spotter/assets/js/app.js", "/home/u/wt/spotter/assets/js/app.js",
                   "assets/js/app.js", "a/b/c.py", "b/c.py", "src/x.py", "src/x.py", "src/x.py"]


def test_a_fence_in_a_users_message_is_no_command_and_tool_numbers_may_be_facts():
    text = pd.Series(["My run failed:\n```\nTraceback (most recent call last):\n```",
                      "```bash\npython x.py\n```",
                      'get_issue({"issue_number": 4821, "limit": 5, "draft": false})'])
    got = artifacts(text, user=pd.Series([True, False, False]))
    assert got.loc[got["kind"] == "command", "value"].tolist() == ["python x.py"]
    assert got.loc[got["kind"] == "number", "value"].tolist() == ["4821"]
