"""Action masks: an env that puts ``"action_mask"`` in its observation dict.

The convention PettingZoo and Sample Factory use: the observation is a
``Dict`` space with an ``"action_mask"`` entry (``MultiBinary(n)``, or a
``Box`` of 0/1 with ``n`` entries) for a ``Discrete(n)`` action space; 1 marks
an action that may be taken now. The built-in encoders see the mask like any
other entry; these helpers keep the invalid actions out:

- actor-critic policies replace an invalid action's logit with ``MASKED_LOGIT``
  before the distribution is built, so it is never sampled, its probability is
  0 in the loss (and its entropy term 0, where ``-inf`` would give NaN), and
  greedy evaluation never picks it;
- Q-learning takes its argmax, its exploration and its bootstrap target's max
  over the valid actions only.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ...errors import ConfigError

__all__ = ["MASKED_LOGIT", "MASK_KEY", "has_action_mask", "masked", "random_valid_actions"]

MASK_KEY = "action_mask"
MASKED_LOGIT = -1e8
"""What an invalid action's logit (or Q value) becomes: finite, so that ``p * log p`` is 0, not NaN."""


def has_action_mask(observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> bool:
    """Whether observations carry an action mask; ConfigError if one does not fit the actions."""
    if not isinstance(observation_space, gym.spaces.Dict) or MASK_KEY not in observation_space.spaces:
        return False
    mask = observation_space.spaces[MASK_KEY]
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError(f"env: an {MASK_KEY!r} needs a Discrete action space, not {action_space}")
    n = int(action_space.n)
    if not isinstance(mask, gym.spaces.MultiBinary | gym.spaces.Box) or int(np.prod(mask.shape)) != n:
        raise ConfigError(f"env: observation[{MASK_KEY!r}] must be MultiBinary({n}) (or a Box of {n} 0/1 entries) "
                          f"for Discrete({n}) actions, not {mask}")  # fmt: skip
    return True


def masked(values: torch.Tensor, obs: Any) -> torch.Tensor:
    """``values`` (``(B, n)`` logits or Q values) with the invalid actions' set to ``MASKED_LOGIT``."""
    mask = obs[MASK_KEY].reshape(values.shape)
    return values.masked_fill(mask == 0, MASKED_LOGIT)


def random_valid_actions(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random valid action per row of ``mask`` (``(B, n)``, 1 = valid)."""
    mask = np.asarray(mask)
    valid = mask.reshape(mask.shape[0], int(np.prod(mask.shape[1:]))) > 0
    scores = np.where(valid, rng.random(valid.shape), -1.0)
    return scores.argmax(-1)  # type: ignore[no-any-return]
