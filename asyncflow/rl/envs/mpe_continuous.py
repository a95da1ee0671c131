"""MPE2's cooperative tasks with continuous actions, named so that a command line, a config
file or a checkpoint can name them (``asyncflow.rl.envs.mpe_continuous:speaker_listener``):
MPE2's own ``parallel_env`` takes ``continuous_actions=True`` as an argument, which a
``"module:function"`` name cannot carry. Each episode is 25 steps, as in the MADDPG paper.
Needs ``mpe2`` (``pip install 'asyncflow[multi_agent]'``)."""

from __future__ import annotations

from typing import Any

__all__ = ["speaker_listener", "spread"]

MAX_CYCLES = 25


def speaker_listener() -> Any:
    """Cooperative communication: a speaker that sees the goal's colour and a listener that
    moves to it (``simple_speaker_listener_v4``)."""
    from mpe2 import simple_speaker_listener_v4

    return simple_speaker_listener_v4.parallel_env(continuous_actions=True, max_cycles=MAX_CYCLES)


def spread() -> Any:
    """Cooperative navigation: three agents cover three landmarks (``simple_spread_v3``)."""
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(continuous_actions=True, max_cycles=MAX_CYCLES)
