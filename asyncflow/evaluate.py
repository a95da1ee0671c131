"""Evaluating a checkpoint: the greedy policy on fresh episodes, optionally recorded.

    asyncflow evaluate runs/ppo_CartPole-v1_.../checkpoints/checkpoint_000010.ckpt --episodes 10 --video run.gif

The policy is the one the workers run, with the learner's saved weights, acting
deterministically (argmax for discrete actions, the mean for continuous ones).
No worker process is started.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from .algorithms import Algorithm
from .algorithms._recipe import MultiAgentWorkers
from .errors import ConfigError
from .rl.envs.async_env import run_coroutine
from .rl.envs.atari import AtariEnv
from .rl.envs.checks import EnvChecker
from .rl.envs.make import make_async_env, make_env
from .rl.offline.minari_format import check_space, env_spec_json, require
from .rl.offline.writer import Output
from .rl.policy import WorkerPolicy
from .rl.sampling.episodes import play_episodes
from .rl.sampling.normalization import NormalizerState

__all__ = ["Evaluation", "evaluate", "load_policy", "saved_normalizer"]

MAX_VIDEO_FRAMES = 1_000
"""The default cap on recorded frames (``video_frames``)."""


@dataclass(frozen=True)
class Evaluation:
    """What ``evaluate`` played: each episode's return and length, and the video it wrote (if any)."""

    returns: list[float]
    lengths: list[int]
    video: Path | None
    policy_returns: dict[str, list[float]] | None = None
    """A multi-agent checkpoint's: each agent's own episode returns, by the policy it acted with."""

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


def is_multi_agent(algo: Algorithm) -> bool:
    """Whether ``algo`` trains on a multi-agent env (its spaces are by policy)."""
    return isinstance(algo.spaces, dict)


def evaluate_multi_agent(algo: Algorithm, episodes: int, seed: int, explore: bool = False) -> Evaluation:
    """``episodes`` episodes of a multi-agent checkpoint's env, every agent acting with its policy
    (greedy, or sampled with ``explore``): each episode's return summed over the agents, and each
    agent's own return by its policy (``Evaluation.policy_returns``)."""
    from .rl.envs.multi_agent import make_multi_agent_env
    from .rl.sampling.episodes import play_multi_agent_episodes
    from .rl.sampling.multi_agent_worker import EpisodeMapping

    policies = {pid: algo.policy_from_checkpoint(pid) for pid in algo.spaces}
    workers = algo.recipe.workers(algo.config, algo.spaces)
    assert isinstance(workers, MultiAgentWorkers)
    env = make_multi_agent_env(algo.config.env)
    try:
        returns, lengths, by_policy = play_multi_agent_episodes(env, policies, EpisodeMapping(workers.mapping),
                                                                episodes, seed=seed, explore=explore)  # fmt: skip
    finally:
        env.close()
    return Evaluation(returns, lengths, None, by_policy)


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


def evaluate(
    checkpoint: str | os.PathLike[str],
    episodes: int = 10,
    *,
    seed: int = 10_000,
    video: str | os.PathLike[str] | None = None,
    fps: int = 30,
    video_frames: int = MAX_VIDEO_FRAMES,
    trust_code: bool = False,
    output: str | os.PathLike[str] | None = None,
    explore: bool = False,
) -> Evaluation:
    """Run ``episodes`` greedy episodes (sampled actions with ``explore``); with ``video``, record
    the first one (up to ``video_frames`` frames); with ``output``, write them as a Minari dataset
    in that folder (``asyncflow.rl.offline``: the behaviour policy's data). An Atari checkpoint
    plays whole games with real rewards, recorded as the real RGB screen. ``trust_code``: see
    ``Algorithm.restore``."""
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, not {episodes}")
    if video_frames < 1:
        raise ConfigError(f"--video-frames must be >= 1, not {video_frames}")
    algo = Algorithm.restore(checkpoint, trust_code=trust_code, learner_device="cpu", worker_device="cpu")
    if is_multi_agent(algo):
        if video is not None or output is not None:
            raise ConfigError("evaluate: --video and --output take single-agent checkpoints")
        return evaluate_multi_agent(algo, episodes, seed, explore)
    policy = algo.policy_from_checkpoint()
    normalizer = saved_normalizer(algo)
    if video is not None:
        _imageio()  # checked before the episodes are run, not after
        with open(video, "wb"):  # and that the file can be written at all (read-only folder: an OSError now)
            pass
    if algo.async_env and video is not None:
        raise ConfigError("--video needs an env given as a gymnasium id, not an AsyncEnv")
    spec = algo.config.worker_env(training=False)
    frames: list[np.ndarray] = []
    writer = None
    if output is not None:
        require("--output")
        check_space(algo.observation_space, "--output: the observation space")
        check_space(algo.action_space, "--output: the action space")
        if Path(output).is_file():
            raise ConfigError(f"--output: {output} is a file; give a folder (made if missing)")
        name = f"asyncflow {algo.recipe.name} (evaluate{', explore' if explore else ', greedy'})"
        writer = Output(str(output), name, env_spec_json(algo.config.env)).writer(
            "evaluate", 0, algo.observation_space, algo.action_space, 1
        )

    async def play() -> tuple[list[float], list[int]]:
        # Made in the loop that steps it (an AsyncEnv may bind itself to the running loop).
        env: Any = make_async_env(spec) if algo.async_env else _render_env(spec) if video else make_env(spec)

        def record(episode: int) -> None:  # the first episode's frames, up to video_frames
            if episode == 0 and len(frames) < video_frames:
                try:
                    frames.append(np.asarray(env.render()))
                except gym.error.DependencyNotInstalled as exc:
                    raise ConfigError(f"--video: {exc}") from exc

        check = EnvChecker(spec, env.observation_space, 0)
        try:
            return await play_episodes(env, policy, episodes, seed=seed, normalizer=normalizer, check=check,
                                       before_step=record if video is not None else None, explore=explore,
                                       writer=writer)  # fmt: skip
        finally:
            closed = env.close()
            if inspect.isawaitable(closed):
                await closed

    try:
        returns, lengths = run_coroutine(play())
    finally:
        if writer is not None:
            writer.close()
    path = None
    if video is not None:
        path = Path(video)
        _write_video(path, frames, fps)
    return Evaluation(returns, lengths, path)
