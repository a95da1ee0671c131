"""The README's "Your own model" example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_block_after(heading: str) -> str:
    text = README.read_text()
    section = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python block after {heading!r}"
    return match.group(1)


@pytest.mark.timeout(180)
def test_the_own_model_example_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "own_model.py"
    script.write_text(_python_block_after("## Your own model"))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=150, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert re.search(r"solved in \d+ steps", out.stdout), out.stdout
