"""The line-counting rule of benchmarks/code_size.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("code_size", BENCHMARKS / "code_size.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


SNIPPET = '''"""Module docstring,
two lines."""

# a comment
def plan(x):
    """Docstring."""
    y = [
        x,  # trailing comment
    ]

    return y
'''


def test_code_lines_skip_blanks_comments_and_docstrings() -> None:
    code_size = _load()
    assert code_size.code_lines(SNIPPET) == 5  # def, the three lines of the list, return
    assert code_size.code_lines(SNIPPET, 5, 6) == 1


def test_plan_lines_follow_the_algorithm_functions_a_plan_calls() -> None:
    from asyncflow.algorithms import DQN, SAC, TwoTrainer

    code_size = _load()
    assert DQN.recipe.plan is SAC.recipe.plan  # one replay plan; DQN's target copy is a config hook
    assert code_size.plan_lines(DQN) == code_size.plan_lines(SAC) > 0
    plan = TwoTrainer.recipe.plan
    plan_only = code_size.code_lines(
        Path(sys.modules[plan.__module__].__file__ or "").read_text(),
        plan.__code__.co_firstlineno,
        plan.__code__.co_firstlineno + 9,
    )
    assert code_size.plan_lines(TwoTrainer) > plan_only  # the per-policy helpers are counted too
