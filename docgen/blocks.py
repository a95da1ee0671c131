"""The code blocks of the documentation, and the script that runs a page's blocks in order.

A page's ``python`` and ``bash`` blocks run, top to bottom, as one script in a folder of its
own (so a block may use what an earlier block of its page defined or wrote); blocks of other
languages (``text``, ``yaml``) are shown, not run. A comment on the line before a block
changes that, and says why::

    <!-- docs-test: skip REASON -->             the block is not run
    <!-- docs-test: replace OLD => NEW -->      the block runs with OLD replaced by NEW (a smaller budget)

A fence without a language is an error: every block says what it is.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ("python", "bash")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
DIRECTIVE = re.compile(r"^\s*<!-- docs-test: (?P<what>skip|replace) (?P<arg>.+?) -->\s*$")


@dataclass
class Block:
    """One fenced block of a page."""

    page: Path
    line: int
    lang: str
    code: str
    skip: str | None = None
    replace: list[tuple[str, str]] = field(default_factory=list)

    @property
    def runs(self) -> bool:
        return self.lang in RUNS and self.skip is None

    def as_run(self) -> str:
        code = self.code
        for old, new in self.replace:
            if old not in code:
                raise ValueError(f"{self.where}: docs-test replace: {old!r} is not in the block")
            code = code.replace(old, new)
        return code

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """The README and every page of the site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, with the directives written before each."""
    lines = page.read_text().split("\n")
    out: list[Block] = []
    pending: list[re.Match[str]] = []
    i = 0
    while i < len(lines):
        directive, fence = DIRECTIVE.match(lines[i]), FENCE.match(lines[i])
        if directive:
            pending.append(directive)
        elif fence:
            indent, lang = fence.group("indent"), fence.group("lang")
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```" and lines[j].startswith(indent))
            block = Block(page, i + 1, lang, textwrap.dedent("\n".join(lines[i + 1 : end])) + "\n")
            for d in pending:
                if d.group("what") == "skip":
                    block.skip = d.group("arg")
                else:
                    old, sep, new = d.group("arg").partition(" => ")
                    if not sep:
                        raise ValueError(f"{block.where}: docs-test replace needs 'OLD => NEW'")
                    block.replace.append((old, new))
            out.append(block)
            pending = []
            i = end
        elif lines[i].strip():
            pending = []
        i += 1
    return out


def script(page_blocks: list[Block]) -> str:
    """One Python script that runs the blocks in order: Python as written, bash through ``bash -e``."""
    parts = ["import subprocess as _docs_subprocess\n"]
    for block in page_blocks:
        if not block.runs:
            continue
        code = block.as_run()
        parts.append(f"print('>>> {block.where}', flush=True)\n")
        if block.lang == "python":
            parts.append(code)
        else:
            parts.append(f"_docs_subprocess.run(['bash', '-euo', 'pipefail', '-c', {code!r}], check=True)\n")
    return "\n".join(parts)
