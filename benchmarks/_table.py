"""Printing benchmark tables: one row per measurement, ratios to asyncflow."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

#: Each script run from here writes the tables it prints to ``results/<script>.md`` too, under the command
#: that produced them; the documentation's benchmarks page is built from those files. ``ASYNCFLOW_BENCH_SAVE=0``
#: leaves them alone (a trial run), and a script imported by something else (a test) never writes.
RESULTS = Path(__file__).resolve().parent / "results"
_started: set[Path] = set()


def machine_line() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n## {title}")
    for i, row in enumerate(cells):
        print("  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(row, widths, strict=True))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    _save(title, cells)


def _results_file() -> Path | None:
    script = Path(sys.argv[0]).resolve()
    if os.environ.get("ASYNCFLOW_BENCH_SAVE") == "0" or script.parent != RESULTS.parent:
        return None
    return RESULTS / f"{script.stem}.md"


def _save(title: str, cells: list[list[str]]) -> None:
    path = _results_file()
    if path is None:
        return
    command = shlex.join(["python", f"benchmarks/{path.stem}.py", *sys.argv[1:]])
    marker = f"<!-- saved by benchmarks/_table.py: {command} -->"
    lines = []
    if path not in _started:  # a run's first table replaces what an earlier run of the same command saved
        _started.add(path)
        path.parent.mkdir(exist_ok=True)
        kept = _sections(path.read_text() if path.exists() else "")
        kept.pop(marker, None)
        path.write_text("".join(kept.values()))
        when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        lines += [marker, "", f"`{command}`, {when}, {machine_line()}", ""]
    escape = [[c.replace("|", "\\|") for c in row] for row in cells]
    lines += [f"**{title}**", "", "| " + " | ".join(escape[0]) + " |", "|" + "---|" * len(escape[0])]
    lines += ["| " + " | ".join(row) + " |" for row in escape[1:]]
    with path.open("a") as f:
        f.write("\n".join(lines) + "\n\n")


def _sections(text: str) -> dict[str, str]:
    """A results file's runs, by the marker line each starts with."""
    sections: dict[str, str] = {}
    for chunk in text.split("<!-- saved by ")[1:]:
        marker = "<!-- saved by " + chunk.split("\n", 1)[0]
        sections[marker] = "<!-- saved by " + chunk
    return sections


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}"
    return "-" if value is None else str(value)


def ratio(ours: float | None, theirs: float | None) -> str:
    """How many times ``ours`` beats ``theirs`` for a higher-is-better figure."""
    if not ours or not theirs:
        return "-"
    return f"{ours / theirs:.2f}x"
