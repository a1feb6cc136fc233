"""The README's quickstart and tour run as written (on the bundled datasets)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import DATASETS

README = Path(__file__).resolve().parent.parent / "README.md"


def _python_blocks(after: str, count: int) -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index(after)
    return re.findall(r"```python\n(.*?)```", text[start:], flags=re.S)[:count]


def test_the_quickstart_and_the_tour_run_as_written(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)             # report.html, cal.json are written here
    code = "\n".join(_python_blocks("## Quickstart", 2))
    assert "ctxlab.replay(" in code and "ctxlab.sweep(" in code
    code = code.replace('"datasets/"', repr(str(DATASETS) + "/"))
    scope: dict[str, object] = {"__name__": "readme"}
    exec(compile(code, str(README), "exec"), scope)
    assert (tmp_path / "report.html").stat().st_size > 100_000
    assert (tmp_path / "cal.json").is_file()
    r = scope["r"]
    assert (r.stages_used, r.tokens_before, r.tokens_after) == (
        ("truncate_tool_output", "prune"), 283_638, 81_229)
