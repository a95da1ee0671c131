"""Small environments the tests build themselves, for spaces that CartPole lacks.

- ``Catch``: a ball falls down an 8x8 grid; move the paddle under it. Pixels:
  ``uint8`` frames of 16x16x3 (channels last), each cell 2x2 pixels, the ball
  in channel 0 and the paddle in channel 1. +1 for a catch, -1 for a miss, at
  the end of each 7-step episode. A random policy scores about -0.7; the best
  policy scores 1.
- ``GoalGrid``: walk to a goal on an 8x8 grid with ``MultiDiscrete([3, 3])``
  actions (a step of -1, 0 or +1 on each axis). The observation is a ``Dict``:
  ``"image"``, a 1x16x16 ``uint8`` frame (channels first) that shows only the
  goal, and ``"position"``, the agent's own coordinates scaled to [0, 1]; no
  part alone is enough. +1 on reaching the goal, -0.02 per step, at most 16
  steps. The best policy scores 0.86-0.98; a random one about -0.15.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

GRID = 8
CELL = 2


def _paint(frame: np.ndarray, channel: int, x: int, y: int, channels_last: bool) -> None:
    ys, xs = slice(y * CELL, (y + 1) * CELL), slice(x * CELL, (x + 1) * CELL)
    if channels_last:
        frame[ys, xs, channel] = 255
    else:
        frame[channel, ys, xs] = 255


class Catch(gym.Env[np.ndarray, int]):
    """A falling ball and a paddle, seen as 16x16x3 ``uint8`` frames."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (GRID * CELL, GRID * CELL, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(3)  # left, stay, right
        self.ball = (0, 0)
        self.paddle = 0

    def _frame(self) -> np.ndarray:
        frame = np.zeros(self.observation_space.shape, np.uint8)
        _paint(frame, 0, self.ball[0], self.ball[1], True)
        _paint(frame, 1, self.paddle, GRID - 1, True)
        return frame

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:  # type: ignore[type-arg]
        super().reset(seed=seed)
        self.ball = (int(self.np_random.integers(GRID)), 0)
        self.paddle = int(self.np_random.integers(GRID))
        return self._frame(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:  # type: ignore[type-arg]
        self.paddle = int(np.clip(self.paddle + int(action) - 1, 0, GRID - 1))
        self.ball = (self.ball[0], self.ball[1] + 1)
        done = self.ball[1] == GRID - 1
        reward = (1.0 if self.ball[0] == self.paddle else -1.0) if done else 0.0
        return self._frame(), reward, done, False, {}


class GoalGrid(gym.Env[dict, np.ndarray]):  # type: ignore[type-arg]
    """Reach the goal seen in the image, knowing your position from the vector."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict(
            {
                "image": gym.spaces.Box(0, 255, (1, GRID * CELL, GRID * CELL), np.uint8),
                "position": gym.spaces.Box(0.0, 1.0, (2,), np.float32),
            }
        )
        self.action_space = gym.spaces.MultiDiscrete([3, 3])
        self.goal = np.zeros(2, np.int64)
        self.agent = np.zeros(2, np.int64)
        self.steps = 0

    def _obs(self) -> dict[str, np.ndarray]:
        image = np.zeros(self.observation_space["image"].shape, np.uint8)
        _paint(image, 0, int(self.goal[0]), int(self.goal[1]), False)
        return {"image": image, "position": (self.agent / (GRID - 1)).astype(np.float32)}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:  # type: ignore[type-arg]
        super().reset(seed=seed)
        self.goal = self.np_random.integers(GRID, size=2)
        self.agent = self.np_random.integers(GRID, size=2)
        while np.array_equal(self.agent, self.goal):
            self.agent = self.np_random.integers(GRID, size=2)
        self.steps = 0
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:  # type: ignore[type-arg]
        assert action.shape == (2,), action
        self.agent = np.clip(self.agent + np.asarray(action) - 1, 0, GRID - 1)
        self.steps += 1
        reached = bool(np.array_equal(self.agent, self.goal))
        reward = 1.0 if reached else -0.02
        return self._obs(), reward, reached, self.steps >= 16 and not reached, {}


def frozen_lake() -> gym.Env[Any, Any]:
    """FrozenLake-v1 without slipping: a ``Discrete(16)`` observation."""
    return gym.make("FrozenLake-v1", is_slippery=False)


class Frames(gym.Env[np.ndarray, int]):
    """Atari-sized observations (84x84x4, ``dtype`` uint8 by default) that cost almost nothing
    to make: for measuring what a frame costs to move, not to learn from."""

    def __init__(self, dtype: Any = np.uint8, episode_length: int = 50) -> None:
        high = 255 if np.dtype(dtype) == np.uint8 else 1.0
        self.observation_space = gym.spaces.Box(0, high, (84, 84, 4), dtype)
        self.action_space = gym.spaces.Discrete(4)
        self.episode_length = episode_length
        self.t = 0
        self._frames = [np.full((84, 84, 4), i, dtype) for i in range(episode_length + 1)]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:  # type: ignore[type-arg]
        super().reset(seed=seed)
        self.t = 0
        return self._frames[0], {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:  # type: ignore[type-arg]
        self.t += 1
        return self._frames[self.t], float(action == 1), False, self.t >= self.episode_length, {}


def float_frames() -> Frames:
    """``Frames`` with float32 observations (4x the bytes)."""
    return Frames(np.float32)


_async_envs_made = 0


def async_env(env_id: str = "CartPole-v1", delay_s: float | tuple[float, float] = 0.0) -> Any:
    """``env_id`` behind the async adapter, each step delayed by ``delay_s`` (a range: drawn
    per step, from a generator seeded by how many envs this process built)."""
    from asyncflow.rl import AsyncEnvAdapter

    global _async_envs_made
    _async_envs_made += 1
    return AsyncEnvAdapter(gym.make(env_id), delay_s=delay_s, seed=_async_envs_made)


class MaskedPick(gym.Env[dict, int]):  # type: ignore[type-arg]
    """Pick the target among 4 actions, some of them invalid this step.

    The observation is a ``Dict``: ``"target"``, a one-hot of the action that pays
    +1, and ``"action_mask"`` (``MultiBinary(4)``): the target and each other
    action with probability 1/2 are valid. A valid non-target action pays 0; an
    invalid one -10, and ends the episode. 20 steps. The best policy scores 20, a
    uniformly random valid one about 9, and an unmasked random one ends most
    episodes within a few steps with a negative return.
    """

    observation_space = gym.spaces.Dict(
        {"target": gym.spaces.Box(0.0, 1.0, (4,), np.float32), "action_mask": gym.spaces.MultiBinary(4)}
    )
    action_space = gym.spaces.Discrete(4)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:  # type: ignore[type-arg]
        super().reset(seed=seed)
        self.t = 0
        return self._draw(), {}

    def _draw(self) -> dict[str, np.ndarray]:
        self.target = int(self.np_random.integers(4))
        mask = (self.np_random.random(4) < 0.5).astype(np.int8)
        mask[self.target] = 1
        self.mask = mask
        target = np.zeros(4, np.float32)
        target[self.target] = 1.0
        return {"target": target, "action_mask": mask.copy()}

    def step(self, action: int) -> tuple[dict, float, bool, bool, dict]:  # type: ignore[type-arg]
        self.t += 1
        if not self.mask[int(action)]:
            return self._draw(), -10.0, True, False, {"invalid": True}
        reward = 1.0 if int(action) == self.target else 0.0
        return self._draw(), reward, False, self.t >= 20, {}


class FarPoint(gym.Env[np.ndarray, np.ndarray]):
    """Steer a point to 0, seen through badly conditioned units.

    The point ``x`` starts uniformly in [-1, 1]; an action ``a`` in [-1, 1] moves it by
    ``0.25 a``; each of the 20 steps costs ``1000 x**2``. The observation is
    ``3000 + 1000 x`` (a large offset, a large scale): raw, a network sees nearly the
    same large number everywhere. Standing still scores about -6,700; the best policy,
    about -500.
    """

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:  # type: ignore[type-arg]
        super().reset(seed=seed)
        self.t, self.x = 0, float(self.np_random.uniform(-1, 1))
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.array([3000.0 + 1000.0 * self.x], np.float32)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:  # type: ignore[type-arg]
        self.t += 1
        self.x = float(np.clip(self.x + 0.25 * float(np.clip(action[0], -1, 1)), -1, 1))
        return self._obs(), -1000.0 * self.x**2, False, self.t >= 20, {}


class CueRecall(gym.Env[np.ndarray, int]):
    """Remember a cue: it shows on the first step only, and the last step asks for it.

    The observation is ``(cue is 0, cue is 1, asking)``: the cue's one-hot on step 0,
    zeros for ``delay`` steps, then ``(0, 0, 1)``. The action on that last step pays +1
    if it names the cue, -1 if not; every other step pays 0. A memoryless policy sees
    the same observation whatever the cue, so it scores 0 at best, on average; one that
    remembers scores 1.
    """

    observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, delay: int = 4) -> None:
        self.delay = delay

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:  # type: ignore[type-arg]
        super().reset(seed=seed)
        self.t, self.cue = 0, int(self.np_random.integers(2))
        obs = np.zeros(3, np.float32)
        obs[self.cue] = 1.0
        return obs, {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:  # type: ignore[type-arg]
        self.t += 1
        if self.t > self.delay:  # the answer
            return np.zeros(3, np.float32), 1.0 if int(action) == self.cue else -1.0, True, False, {}
        obs = np.zeros(3, np.float32)
        obs[2] = float(self.t == self.delay)
        return obs, 0.0, False, False, {}


class _Lives:
    def __init__(self) -> None:
        self.left = 0

    def lives(self) -> int:
        return self.left


class ScriptedGame(gym.Env[np.ndarray, int]):
    """An Atari-like game with a scripted score: 3 lives, one lost every 10 steps, 5 points a step.

    A whole game is 30 steps and scores 150; ``ale.lives()`` answers like ALE's.
    """

    LIFE_STEPS, LIVES, POINTS = 10, 3, 5.0

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (8, 8), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.ale = _Lives()
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:  # type: ignore[type-arg]
        super().reset(seed=seed)
        self.t, self.ale.left = 0, self.LIVES
        return self._frame(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:  # type: ignore[type-arg]
        self.t += 1
        if self.t % self.LIFE_STEPS == 0:
            self.ale.left -= 1
        return self._frame(), self.POINTS, self.ale.left == 0, False, {}

    def _frame(self) -> np.ndarray:
        return np.full((8, 8), self.t % 256, np.uint8)


def scripted_atari() -> gym.Env[Any, Any]:
    """``ScriptedGame`` behind the Atari wrappers a training env gets: game scores, lives, clipping."""
    from asyncflow.rl.envs.atari import ClipReward, EpisodicLife, GameScore

    return gym.wrappers.FrameStackObservation(ClipReward(EpisodicLife(GameScore(ScriptedGame()))), 4)


class NoiseFrames(gym.Env[np.ndarray, int]):
    """Random 12x12 ``uint8`` frames; episodes of 3 to 12 steps, some cut by truncation."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (12, 12), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.left = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:  # type: ignore[type-arg]
        super().reset(seed=seed)
        self.left = int(self.np_random.integers(3, 13))
        return self._frame(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:  # type: ignore[type-arg]
        self.left -= 1
        end = self.left == 0
        cut = end and bool(self.np_random.random() < 0.3)
        return self._frame(), float(action), end and not cut, cut, {}

    def _frame(self) -> np.ndarray:
        return self.np_random.integers(0, 256, (12, 12), dtype=np.uint8)


def stacked_noise() -> gym.Env[Any, Any]:
    return gym.wrappers.FrameStackObservation(NoiseFrames(), 4)


class Ledger(gym.Env[np.ndarray, int]):
    """Each observation says where it is: ``[episode's seed mark, t]``. An episode ends at a
    length drawn from 2-14 steps, terminated, or truncated at 10; the reward is
    ``action + t / 100`` of the step's ``t``. A written episode can so be checked row by row."""

    observation_space = gym.spaces.Box(-1e9, 1e9, (2,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)
        self.mark, self.t, self.length = 0.0, 0, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.mark, self.t, self.length = float(self.rng.integers(1_000_000)), 0, int(self.rng.integers(2, 15))
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.array([self.mark, self.t], np.float32)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        reward = int(action) + self.t / 100
        self.t += 1
        return self._obs(), reward, self.t == self.length, self.t == 10 and self.length > 10, {}


class DictFrames(gym.Env[dict, np.ndarray]):  # type: ignore[type-arg]
    """A ``Dict`` observation of a ``uint8`` frame filled with the step count and a float
    vector; ``Box`` actions in ``[-2, 2]``; episodes of 7 steps."""

    observation_space = gym.spaces.Dict({"frame": gym.spaces.Box(0, 255, (6, 6, 3), np.uint8),
                                         "pos": gym.spaces.Box(-1, 1, (2,), np.float32)})  # fmt: skip
    action_space = gym.spaces.Box(-2, 2, (2,), np.float32)

    def __init__(self) -> None:
        self.t = 0

    def _obs(self) -> dict[str, np.ndarray]:
        return {"frame": np.full((6, 6, 3), self.t, np.uint8), "pos": np.full(2, self.t / 10, np.float32)}

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        self.t = 0
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self._obs(), float(np.sum(action)), self.t == 7, False, {}


def async_ledger() -> Any:
    """``Ledger`` behind the async adapter, the envs of a process 0, 1 and 2 ms slow per step in
    turn: a fast env completes sequences while a slow one is still on its first, so a worker's
    batch holds two of one env's and none of another's."""
    from asyncflow.rl import AsyncEnvAdapter

    global _async_envs_made
    _async_envs_made += 1
    return AsyncEnvAdapter(Ledger(), delay_s=0.001 * (_async_envs_made % 3), seed=_async_envs_made)


class _BreaksAfter(gym.Wrapper[Any, Any, Any, Any]):
    """An env whose ``step`` raises once it has stepped ``steps`` times in all (a bug that shows late)."""

    def __init__(self, env: gym.Env[Any, Any], steps: int) -> None:
        super().__init__(env)
        self.left = steps

    def step(self, action: Any) -> Any:
        self.left -= 1
        if self.left < 0:
            raise RuntimeError("broken on purpose")
        return self.env.step(action)


def breaks_after_200() -> gym.Env[Any, Any]:
    """CartPole-v1 whose 201st step raises: it passes every check before a run starts."""
    return _BreaksAfter(gym.make("CartPole-v1"), 200)
