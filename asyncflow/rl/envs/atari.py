"""Atari: the standard preprocessing for any ``ALE/...`` id, and scores as published.

An ``ALE/<Game>-v5`` id gets, by default, the preprocessing of Mnih et al. (2015) as
the peers apply it (SB3's ``make_atari_env``, CleanRL's ``make_env``, EnvPool's
defaults): up to 30 no-op actions at reset, a frame skip of 4 with the max over the
last two frames, 84x84 grayscale, and a stack of the last 4 frames, channels first
(``uint8``, shape ``(4, 84, 84)``). Training envs also end an episode at each lost
life (the game itself goes on) and clip rewards to their sign. Each part is
switchable in the config (``atari_*`` fields). The resizing, max-pooling and no-ops
are gymnasium's own ``AtariPreprocessing``; the stack is ``FrameStackObservation``.
``v5``'s sticky actions (``repeat_action_probability=0.25``) stay as the env defines
them.

Scores: the worker's episodes are then lives with clipped rewards, which is not
what papers report. ``GameScore`` sits under the life and clipping wrappers and
records each whole game's unclipped score; the rollout worker reports those as
``episode_return_mean`` and its own per-life clipped returns as
``training_return_mean`` (``games_played``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from ...errors import ConfigError

__all__ = [
    "AtariEnv",
    "AtariOptions",
    "ClipReward",
    "EpisodicLife",
    "GameScore",
    "is_atari_id",
    "take_games",
]


def is_atari_id(spec: object) -> bool:
    """An ALE id as gymnasium registers them (``ALE/Pong-v5``)."""
    return isinstance(spec, str) and spec.startswith("ALE/")


@dataclasses.dataclass(frozen=True)
class AtariOptions:
    """Which parts of the standard preprocessing an Atari env gets (all on: the DQN paper's)."""

    noop_max: int = 30
    frame_skip: int = 4
    screen_size: int = 84
    grayscale: bool = True
    frame_stack: int = 4
    episodic_life: bool = True
    """Training only: a lost life ends the training episode (the game goes on)."""
    clip_rewards: bool = True
    """Training only: rewards become their sign (-1, 0, 1)."""


@dataclasses.dataclass(frozen=True)
class AtariEnv:
    """A picklable env factory: ``AtariEnv("ALE/Pong-v5", options)()`` builds the preprocessed env.

    ``training=False`` (evaluation, videos) plays whole games with their real rewards.
    """

    env_id: str
    options: AtariOptions = AtariOptions()
    training: bool = True
    render_mode: str | None = None

    @property
    def __name__(self) -> str:  # what params.json and run folders call it
        return self.env_id

    def __call__(self) -> gym.Env[Any, Any]:
        _register_ale()
        o = self.options
        try:
            env = gym.make(self.env_id, frameskip=1, render_mode=self.render_mode)
        except gym.error.Error as exc:
            raise ConfigError(f"env: unknown environment {self.env_id!r} ({exc})") from exc
        env = gym.wrappers.AtariPreprocessing(
            env,
            noop_max=o.noop_max,
            frame_skip=o.frame_skip,
            screen_size=o.screen_size,
            grayscale_obs=o.grayscale,
            terminal_on_life_loss=False,  # its version resets the whole game: EpisodicLife below does not
        )
        env = GameScore(env)
        if self.training and o.episodic_life:
            env = EpisodicLife(env)
        if self.training and o.clip_rewards:
            env = ClipReward(env)
        if o.frame_stack > 1:
            env = gym.wrappers.FrameStackObservation(env, o.frame_stack)
            if not o.grayscale:  # (stack, H, W, 3) -> (stack * 3, H, W): one image, channels first
                env = _StackedColour(env)
        return env

    def evaluation(self) -> AtariEnv:
        """The same game and preprocessing, whole games with real rewards."""
        return dataclasses.replace(self, training=False)

    def rendering(self) -> AtariEnv:
        """The evaluation env whose ``render()`` gives the real RGB screen."""
        return dataclasses.replace(self, training=False, render_mode="rgb_array")


def _register_ale() -> None:
    try:
        import ale_py
    except ImportError as exc:
        raise ConfigError("env: ALE ids need ale-py: pip install 'asyncflow[atari]'") from exc
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)  # not its banner once per env made
    gym.register_envs(ale_py)


def _lives(env: gym.Env[Any, Any]) -> int:
    return int(env.unwrapped.ale.lives())  # type: ignore[attr-defined]


class GameScore(gym.Wrapper[Any, Any, Any, Any]):
    """Records each whole game's unclipped score and length (agent steps); ``take_games`` collects them."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.score = 0.0
        self.length = 0
        self.games: list[tuple[float, int]] = []

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.score, self.length = 0.0, 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.score += float(reward)
        self.length += 1
        if terminated or truncated:
            self.games.append((self.score, self.length))
            self.score, self.length = 0.0, 0
        return obs, reward, terminated, truncated, info

    def take_games(self) -> list[tuple[float, int]]:
        games, self.games = self.games, []
        return games


class EpisodicLife(gym.Wrapper[Any, Any, Any, Any]):
    """A lost life ends the episode; the next ``reset`` only takes a no-op step unless the game is over."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = _lives(self.env)
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the no-op ended the game
                obs, info = self.env.reset(**kwargs)
        self.game_over = False
        self.lives = _lives(self.env)
        return obs, info


class ClipReward(gym.RewardWrapper[Any, Any]):
    """Rewards become their sign."""

    def reward(self, reward: SupportsFloat) -> float:
        return float(np.sign(float(reward)))


class _StackedColour(gym.ObservationWrapper[Any, Any, Any]):
    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        k, h, w, c = env.observation_space.shape  # type: ignore[misc]
        self.observation_space = gym.spaces.Box(0, 255, (k * c, h, w), np.uint8)

    def observation(self, observation: Any) -> Any:
        k, h, w, c = observation.shape
        return np.ascontiguousarray(np.moveaxis(observation, -1, 1).reshape(k * c, h, w))


def take_games(env: gym.Env[Any, Any]) -> list[tuple[float, int]] | None:
    """The whole games ``env`` finished since the last call (score, length), or None when it
    does not keep game scores (no ``GameScore`` inside)."""
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, GameScore):
            return current.take_games()
        current = current.env
    return None
