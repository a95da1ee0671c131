"""What asyncflow's fork server preloads, told to the actor layer (which names no module of
its own accord: ``asyncflow.actors.add_preload``). ``import asyncflow.rl`` calls
``register()`` (so a runtime opened by hand for RL workers starts them warm), and so
``import asyncflow.algorithms`` has before it starts the fork server early.

- for every actor: torch, gymnasium, the algorithms, and the worker-side modules that the
  algorithms load lazily (the policies of DQN, Ape-X, SAC and TD3, the replay shards);
- for actors that never load torch (``prefer_torch_free_fork_server``): gymnasium, the
  rollout, async and evaluation workers, and the numpy policy.
"""

from __future__ import annotations

from .actors import add_preload

__all__ = ["register"]

_RL = "asyncflow.rl"

PRELOAD = ["torch", "gymnasium", "asyncflow.algorithms", f"{_RL}.policies.epsilon_greedy",
           f"{_RL}.policies.continuous", f"{_RL}.data.replay_actor"]  # fmt: skip
TORCH_FREE_PRELOAD = ["gymnasium", f"{_RL}.sampling.rollout_worker", f"{_RL}.sampling.async_worker",
                      f"{_RL}.sampling.evaluation_worker", f"{_RL}.policies.numpy_policy"]  # fmt: skip


def register() -> None:
    """Tell the actor layer what asyncflow's actors need preloaded (again: no change)."""
    add_preload(PRELOAD)
    add_preload(TORCH_FREE_PRELOAD, torch_free=True)
