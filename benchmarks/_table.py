"""Printing benchmark tables: one row per measurement, ratios to asyncflow."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence


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
