"""How long are the plans? Lines of each algorithm's execution plan and of the
operator library, beside RLlib Flow's own figures.

Counting rule (the same for both sides): non-blank lines that hold code,
without comment-only lines and without docstrings. A plan is its
``execution_plan`` method plus the methods of its own class that it calls
through ``self`` (the two-trainer plan splits into per-policy helpers).

RLlib Flow's figures are the line counts reported for RLlib 1.0's execution
plans and its 1,118-line flow core in the RLlib Flow paper (Liang et al.,
arXiv 2011.12719). Algorithms RLlib builds from another's plan are compared
with that plan.

    python benchmarks/code_size.py
"""

from __future__ import annotations

import ast
import inspect
import io
import sys
import tokenize
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import print_table

from asyncflow.algorithms import ALGORITHMS

RLLIB_FLOW_PLANS = {"a3c": 4, "a2c": 18, "pg": 18, "ppo": 43, "dqn": 63, "apex": 90, "impala": 91}
RLLIB_FLOW_SHARES = {"appo": "impala", "sac": "dqn", "ddpg": "dqn", "td3": "dqn"}
RLLIB_FLOW_CORE = 1_118
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
         tokenize.ENDMARKER}  # fmt: skip


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def code_lines(source: str, first: int = 1, last: int | None = None) -> int:
    """Lines in ``[first, last]`` that hold code (no blank, comment-only or docstring lines)."""
    with_code = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in _SKIP:
            with_code.update(range(tok.start[0], tok.end[0] + 1))
    with_code -= _docstring_lines(ast.parse(source))
    last = last if last is not None else source.count("\n") + 1
    return sum(1 for n in with_code if first <= n <= last)


def plan_lines(cls: type) -> int:
    """Lines of ``cls.execution_plan`` and of the methods of its class that it calls on ``self``."""
    plan = inspect.unwrap(cls.execution_plan)  # type: ignore[attr-defined]
    source = Path(inspect.getsourcefile(plan) or "").read_text()
    tree = ast.parse(source)
    line = plan.__code__.co_firstlineno

    def defines_plan(c: ast.ClassDef) -> bool:
        return any(isinstance(f, ast.FunctionDef) and f.name == "execution_plan"
                   and f.lineno <= line <= (f.end_lineno or 0) for f in c.body)  # fmt: skip

    owner = next(c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and defines_plan(c))
    methods = {f.name: f for f in owner.body if isinstance(f, ast.FunctionDef)}
    todo, seen = ["execution_plan"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(methods[name]):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                    and node.attr in methods):  # fmt: skip
                todo.append(node.attr)
    return sum(code_lines(source, methods[n].lineno, methods[n].end_lineno) for n in seen)


def library_lines() -> int:
    flow = Path(inspect.getsourcefile(ALGORITHMS["ppo"]) or "").parents[1] / "flow"
    return sum(code_lines(p.read_text()) for p in sorted(flow.glob("*.py")))


def main() -> None:
    rows = []
    for name, cls in ALGORITHMS.items():
        ours = plan_lines(cls)
        shared = RLLIB_FLOW_SHARES.get(name)
        theirs = RLLIB_FLOW_PLANS.get(shared or name)
        note = f"(RLlib Flow reuses its {shared} plan)" if shared else ("" if theirs else "(no RLlib Flow figure)")
        ratio = f"{ours / theirs:.2f}" if theirs else "-"
        rows.append([name, ours, theirs, ratio, note])
    print_table("Execution plan lines (code only)", ["plan", "asyncflow", "RLlib Flow", "ours/theirs", ""], rows)
    lib = library_lines()
    print_table(
        "Operator library lines (asyncflow/flow/*.py, code only)",
        ["library", "asyncflow", "RLlib Flow core", "ours/theirs"],
        [["dataflow operators", lib, RLLIB_FLOW_CORE, f"{lib / RLLIB_FLOW_CORE:.2f}"]],
    )
    longer = [r[0] for r in rows if r[2] and r[1] > r[2]]
    print(f"\nplans longer than RLlib Flow's: {', '.join(longer) if longer else 'none'}")


if __name__ == "__main__":
    main()
