"""How long are the plans? Lines of each algorithm's execution plan and of the
operator library, beside RLlib's.

Counting rule (the same for both sides): non-blank lines that hold code,
without comment-only lines and without docstrings. A plan is its recipe's
plan function plus the functions of ``asyncflow.algorithms`` that it calls
(DQN's calls the replay plan it shares with SAC and TD3; the two-trainer's
splits into per-policy helpers). RLlib's plans are static methods that call
no such method: each is its ``execution_plan`` alone.

RLlib's figures were counted with this rule from Ray 1.13.0, the last 1.x
release, whose trainers still define ``execution_plan`` (the wheel on PyPI,
``ray.__commit__`` e4ce38d001dbbe09cd21c497fedd03d692b2be3e; the files are
in ``RLLIB_PLANS``). An algorithm RLlib builds on another's plan (its trainer
class inherits it) is compared with that plan. To count again::

    pip download ray==1.13.0 --no-deps --only-binary=:all: --python-version 3.9 \\
        --platform manylinux2014_x86_64 -d /tmp/ray && cd /tmp/ray && unzip -q ray-*.whl
    python benchmarks/code_size.py --count-rllib /tmp/ray/ray-1.13.0.data/purelib/ray

The operator library is compared with two figures: the 1,118-line core that
the RLlib Flow paper reports (Liang et al., arXiv 2011.12719, on RLlib 1.0),
and Ray 1.13.0's ``rllib/execution`` package counted with this rule (its
operators, replay buffers and learner threads; ``ray.util.iter``, the
iterator layer under them, is counted apart). Ray's code is formatted by
black at 88 columns, ours by ruff at 120: a call that wraps there may fit on
one line here.

    python benchmarks/code_size.py
"""

from __future__ import annotations

import argparse
import ast
import inspect
import io
import sys
import tokenize
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import print_table

from asyncflow.algorithms import ALGORITHMS

RAY_COMMIT = "e4ce38d001dbbe09cd21c497fedd03d692b2be3e"  # Ray 1.13.0
RLLIB_PLANS: dict[str, tuple[str, str, int]] = {  # ours: (file under ray/, trainer class, code lines)
    "pg": ("rllib/agents/trainer.py", "Trainer", 23),  # PGTrainer keeps Trainer's default plan
    "a2c": ("rllib/agents/a3c/a2c.py", "A2CTrainer", 41),
    "a3c": ("rllib/agents/a3c/a3c.py", "A3CTrainer", 9),
    "ppo": ("rllib/agents/ppo/ppo.py", "PPOTrainer", 39),
    "impala": ("rllib/agents/impala/impala.py", "ImpalaTrainer", 38),
    "dqn": ("rllib/agents/dqn/dqn.py", "DQNTrainer", 65),
    "simple_q": ("rllib/agents/dqn/simple_q.py", "SimpleQTrainer", 30),
    "apex": ("rllib/agents/dqn/apex.py", "ApexTrainer", 108),
}
RLLIB_SHARES = {"appo": "impala", "sac": "dqn", "ddpg": "simple_q", "td3": "simple_q"}  # inherited plans
RLLIB_EXECUTION = 1_917  # Ray 1.13.0 rllib/execution/**/*.py, this rule
RLLIB_ITER = 712  # Ray 1.13.0 util/iter.py, this rule
RLLIB_FLOW_CORE = 1_118  # the RLlib Flow paper's figure for its core (RLlib 1.0)
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
    """Lines of ``cls.recipe.plan`` and of the functions of ``asyncflow.algorithms`` it calls."""
    todo, seen, total = [cls.recipe.plan], set(), 0  # type: ignore[attr-defined]
    while todo:
        function = inspect.unwrap(todo.pop())
        if function in seen:
            continue
        seen.add(function)
        source = Path(inspect.getsourcefile(function) or "").read_text()
        node = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                    and n.lineno == function.__code__.co_firstlineno)  # fmt: skip
        total += code_lines(source, node.lineno, node.end_lineno)
        names = vars(sys.modules[function.__module__])
        for name in (n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in names):
            found = names[name]
            if inspect.isfunction(found) and found.__module__.startswith("asyncflow.algorithms"):
                todo.append(found)
    return total


def library_lines() -> int:
    flow = Path(inspect.getsourcefile(ALGORITHMS["ppo"]) or "").parents[1] / "flow"
    return sum(code_lines(p.read_text()) for p in sorted(flow.glob("*.py")))


def rllib_plan_lines(ray_root: Path, path: str, trainer: str) -> int:
    """Lines of ``trainer.execution_plan`` in ``ray_root / path``, by this module's rule."""
    source = (ray_root / path).read_text()
    tree = ast.parse(source)
    owner = next(c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name == trainer)
    plan = next(f for f in owner.body if isinstance(f, ast.FunctionDef) and f.name == "execution_plan")
    return code_lines(source, plan.lineno, plan.end_lineno)


def count_rllib(ray_root: Path) -> None:
    """Count RLlib's plans and execution package again from an unpacked Ray 1.13.0 wheel."""
    rows = [[name, path, trainer, rllib_plan_lines(ray_root, path, trainer), stored]
            for name, (path, trainer, stored) in RLLIB_PLANS.items()]  # fmt: skip
    execution = sum(code_lines(p.read_text()) for p in sorted((ray_root / "rllib/execution").rglob("*.py")))
    rows.append(["(library)", "rllib/execution/**/*.py", "-", execution, RLLIB_EXECUTION])
    rows.append(["(iterators)", "util/iter.py", "-", code_lines((ray_root / "util/iter.py").read_text()), RLLIB_ITER])
    print_table(f"RLlib counted from {ray_root}", ["plan", "file", "class", "counted", "stored here"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count-rllib", type=Path, metavar="RAY_DIR", help="recount RLlib from this ray/ folder")
    args = parser.parse_args()
    if args.count_rllib is not None:
        count_rllib(args.count_rllib)
        return
    rows = []
    for name, cls in ALGORITHMS.items():
        ours = plan_lines(cls)
        shared = RLLIB_SHARES.get(name)
        found = RLLIB_PLANS.get(shared or name)
        theirs = found[2] if found else None
        note = f"(RLlib inherits its {shared} plan)" if shared else ("" if theirs else "(no RLlib plan)")
        ratio = f"{ours / theirs:.2f}" if theirs else "-"
        rows.append([name, ours, theirs, ratio, note])
    print_table(f"Execution plan lines (code only); RLlib 1.13.0 = ray {RAY_COMMIT[:10]}",
                ["plan", "asyncflow", "RLlib 1.13.0", "ours/theirs", ""], rows)  # fmt: skip
    lib = library_lines()
    print_table(
        "Operator library lines (code only)",
        ["library", "lines", "asyncflow/flow / it"],
        [
            ["asyncflow: asyncflow/flow/*.py", lib, "1.00"],
            ["RLlib 1.13.0: rllib/execution/**/*.py (counted)", RLLIB_EXECUTION, f"{lib / RLLIB_EXECUTION:.2f}"],
            ["RLlib 1.13.0: util/iter.py (counted)", RLLIB_ITER, f"{lib / RLLIB_ITER:.2f}"],
            ["RLlib Flow core (the paper's figure, RLlib 1.0)", RLLIB_FLOW_CORE, f"{lib / RLLIB_FLOW_CORE:.2f}"],
        ],
    )
    longer = [r[0] for r in rows if r[2] and r[1] > r[2]]
    print(f"\nplans longer than RLlib's: {', '.join(longer) if longer else 'none'}")


if __name__ == "__main__":
    main()
