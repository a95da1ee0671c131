"""Evaluating a checkpoint: the greedy policy on fresh episodes, optionally recorded.

    asyncflow evaluate runs/ppo_CartPole-v1_.../checkpoints/checkpoint_000010.ckpt --episodes 10 --video run.gif

The policy is the one the workers run, with the learner's saved weights, acting
deterministically (argmax for discrete actions, the mean for continuous ones).
No worker process is started.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from .algorithms import Algorithm
from .errors import ConfigError
from .rl.async_env import run_coroutine
from .rl.atari import AtariEnv
from .rl.env import make_async_env, make_env
from .rl.normalization import NormalizerState
from .rl.policy import StatefulPolicy, WorkerPolicy
from .rl.tree import tree_map

__all__ = ["Evaluation", "evaluate", "load_policy", "saved_normalizer"]

MAX_VIDEO_FRAMES = 1_000
"""The default cap on recorded frames (``video_frames``)."""


@dataclass(frozen=True)
class Evaluation:
    returns: list[float]
    lengths: list[int]
    video: Path | None

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns))

    @property
    def std(self) -> float:
        return float(np.std(self.returns))


def load_policy(
    checkpoint: str | os.PathLike[str], *, torch_model: bool = False, trust_code: bool = False
) -> tuple[Algorithm, WorkerPolicy]:
    """The algorithm (not started) and its worker policy carrying the saved learner weights,
    on the CPU whatever device it trained on. ``torch_model``: a policy holding its torch
    model (what an export traces), even where the workers infer in numpy. ``trust_code``:
    see ``Algorithm.restore`` (a config whose env is a lambda needs it)."""
    inference = {"worker_inference": "torch"} if torch_model else {}
    algo = Algorithm.restore(checkpoint, trust_code=trust_code, learner_device="cpu", worker_device="cpu", **inference)
    if not hasattr(algo, "action_space"):
        raise ConfigError(f"evaluate: {algo.name} is a multi-agent algorithm; evaluate single-agent checkpoints")
    return algo, algo.policy_from_checkpoint()


def saved_normalizer(algo: Algorithm) -> NormalizerState | None:
    """The observation statistics a restored algorithm trained with (None: not normalized)."""
    return algo.normalizer_from_checkpoint()


def _render_env(spec: Any) -> gym.Env[Any, Any]:
    if isinstance(spec, AtariEnv):  # the real RGB screen, not the 84x84 input
        return spec.rendering()()
    if not isinstance(spec, str):
        raise ConfigError("--video needs an env given as a gymnasium id (to ask it for rgb_array frames)")
    # Off-screen rendering: no window, no sound device, no pygame banner.
    for key, value in (("SDL_VIDEODRIVER", "dummy"), ("SDL_AUDIODRIVER", "dummy"), ("PYGAME_HIDE_SUPPORT_PROMPT", "1")):
        os.environ.setdefault(key, value)
    env = gym.make(spec, render_mode="rgb_array")
    if "rgb_array" not in env.metadata.get("render_modes", []):
        raise ConfigError(f"--video: {spec} cannot render rgb_array frames")
    return env


def _imageio() -> Any:
    try:
        import imageio
    except ImportError as exc:
        raise ConfigError("--video needs imageio and pillow (pip install 'asyncflow[video]')") from exc
    return imageio


def _write_video(path: Path, frames: list[np.ndarray], fps: int) -> None:
    imageio = _imageio()

    if path.suffix.lower() == ".gif":
        imageio.v2.mimsave(path, frames, duration=1000 / fps, loop=0)  # type: ignore[arg-type]
        return
    try:
        imageio.v2.mimsave(path, frames, fps=fps)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ConfigError(f"--video {path.name}: no writer for this format ({exc}); "
                          "use a .gif, or pip install imageio-ffmpeg for .mp4") from exc  # fmt: skip


def _greedy(policy: WorkerPolicy, obs: Any, normalizer: NormalizerState | None = None) -> Any:
    """The policy's greedy action for one observation, as the env takes it."""
    if normalizer is not None:
        obs = normalizer.normalize(obs)
    batch = tree_map(lambda x: np.asarray(x)[None], obs)  # one row, in the space's own dtype
    return policy.env_actions(policy.greedy_actions(batch))[0]


async def _async_episodes(spec: Any, policy: WorkerPolicy, episodes: int, seed: int) -> tuple[list[float], list[int]]:
    """``episodes`` greedy episodes of an ``AsyncEnv``, one after another, on one env."""
    env = make_async_env(spec)
    returns: list[float] = []
    lengths: list[int] = []
    try:
        for episode in range(episodes):
            obs, _ = await env.reset(seed=seed + episode)
            total, steps, done = 0.0, 0, False
            while not done:
                obs, reward, terminated, truncated, _ = await env.step(_greedy(policy, obs))
                total, steps, done = total + float(reward), steps + 1, terminated or truncated
            returns.append(total)
            lengths.append(steps)
    finally:
        await env.close()
    return returns, lengths


def evaluate(
    checkpoint: str | os.PathLike[str],
    episodes: int = 10,
    *,
    seed: int = 10_000,
    video: str | os.PathLike[str] | None = None,
    fps: int = 30,
    video_frames: int = MAX_VIDEO_FRAMES,
    trust_code: bool = False,
) -> Evaluation:
    """Run ``episodes`` greedy episodes; with ``video``, record the first one (up to ``video_frames``
    frames). An Atari checkpoint plays whole games with real rewards, recorded as the real RGB
    screen. ``trust_code``: see ``Algorithm.restore``."""
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, not {episodes}")
    if video_frames < 1:
        raise ConfigError(f"--video-frames must be >= 1, not {video_frames}")
    algo, policy = load_policy(checkpoint, trust_code=trust_code)
    normalizer = saved_normalizer(algo)
    if video is not None:
        _imageio()  # checked before the episodes are run, not after
        with open(video, "wb"):  # and that the file can be written at all (read-only folder: an OSError now)
            pass
    if algo.async_env:
        if video is not None:
            raise ConfigError("--video needs an env given as a gymnasium id, not an AsyncEnv")
        played: tuple[list[float], list[int]] = run_coroutine(_async_episodes(algo.config.env, policy, episodes, seed))
        return Evaluation(played[0], played[1], None)
    spec = algo.config.worker_env(training=False)
    env = _render_env(spec) if video is not None else make_env(spec)
    returns: list[float] = []
    lengths: list[int] = []
    frames: list[np.ndarray] = []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            if isinstance(policy, StatefulPolicy):  # a recurrent policy's memory
                policy.reset_state()
            total, steps, done = 0.0, 0, False
            while not done:
                if video is not None and episode == 0 and len(frames) < video_frames:
                    try:
                        frames.append(np.asarray(env.render()))
                    except gym.error.DependencyNotInstalled as exc:
                        raise ConfigError(f"--video: {exc}") from exc
                action = _greedy(policy, obs, normalizer)
                obs, reward, terminated, truncated, _ = env.step(action)
                total, steps, done = total + float(reward), steps + 1, terminated or truncated
            returns.append(total)
            lengths.append(steps)
    finally:
        env.close()
    path = None
    if video is not None:
        path = Path(video)
        _write_video(path, frames, fps)
    return Evaluation(returns, lengths, path)
