"""The README's quickstart and tour run as written (on the bundled datasets)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
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
    # run as a script, as a user would save it: the process pool of the tour's sweep
    # spawns workers that import the script again (without the guard they ran it all)
    script = tmp_path / "tour.py"
    script.write_text(code + "\nif __name__ == '__main__':\n    print('RESULT', "
                      "r.stages_used, r.tokens_before, r.tokens_after, len(res))\n",
                      encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(README.parent)}
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "report.html").stat().st_size > 100_000
    assert (tmp_path / "cal.json").is_file()
    result = run.stdout.strip().splitlines()[-1]
    assert result == "RESULT ('truncate_tool_output', 'prune') 283638 81229 28", result
