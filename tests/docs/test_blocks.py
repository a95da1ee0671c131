"""Every code block of the documentation (the README and ``docs/``) runs as written.

Each page's ``python`` and ``bash`` blocks run in order as one script, in a folder of their
own that holds links to the repository's ``examples/`` and ``tests/`` (the pages are written
for a clone of it); ``docgen/blocks.py`` says how a block is skipped or given a smaller
budget, each with its reason in the page.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from docgen.blocks import ROOT, blocks, pages, script
from tests.conftest import our_segments

RUNNABLE = [page for page in pages() if any(block.runs for block in blocks(page))]


def test_every_block_says_what_it_is_and_why_it_is_skipped() -> None:
    problems = []
    for page in pages():
        for block in blocks(page):
            if not block.lang:
                problems.append(f"{block.where}: a fence without a language")
            if block.skip is not None and len(block.skip.split()) < 3:
                problems.append(f"{block.where}: a skip without its reason")
            if block.lang in ("python", "bash") and block.skip is None:
                block.as_run()  # a replace that matches nothing raises
    assert problems == []
    assert len(RUNNABLE) >= 25


@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", RUNNABLE, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE])
def test_the_blocks_of_a_page_run(page: Path, tmp_path: Path) -> None:
    for shared in ("examples", "tests"):
        (tmp_path / shared).symlink_to(ROOT / shared)
    path = tmp_path / "page.py"
    path.write_text(script(blocks(page)))
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # `asyncflow` and `python`
        "PYTHONPATH": str(ROOT),
        "MPLBACKEND": "Agg",
    }
    proc = subprocess.Popen([sys.executable, "-u", str(path)], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=840)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    ran = out.count(">>> ")
    assert proc.returncode == 0, f"{page.relative_to(ROOT)}: block {ran} of its runnable blocks failed\n{out[-6000:]}"
    assert ran == sum(block.runs for block in blocks(page))
    assert our_segments(proc.pid) == [], "shared-memory segments left behind"
