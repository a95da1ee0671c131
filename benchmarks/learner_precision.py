"""The learner's SGD on Atari frames in float32 and in bfloat16 mixed precision.

One PPO training batch as ``examples/atari/ppo.yaml`` makes it (1,024 steps of 84x84x4 uint8
frames, 4 epochs of minibatches of 256: 16 SGD steps with the Nature CNN) and one DQN step
(``examples/atari/dqn.yaml``'s batch of 32), timed with the real learners
(``ActorCriticPolicy.learn_on_batch`` with ``ppo_loss``, ``DQNLearner.learn_on_batch``) for each
``learner_precision``, in one process, on the CPU. The batch is random frames with the columns
the losses read: the arithmetic does not depend on the pixels.

    python benchmarks/learner_precision.py [--repeats 5] [--threads 2]

Prints the median time per PPO batch and per DQN step, and the ratio to float32. Whether this
CPU computes bfloat16 natively (AMX, AVX512-BF16) is printed first: without it, bfloat16 is
emulated and slower.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table

from asyncflow.algorithms import DQN, PPO, DQNConfig, PPOConfig
from asyncflow.config_file import load_config_file
from asyncflow.rl.data.sample_batch import SampleBatch
from asyncflow.rl.learners.precision import native_bfloat16

ROOT = Path(__file__).resolve().parent.parent
ENV = "ALE/Breakout-v5"


def _config(cls: Any, name: str, precision: str) -> Any:
    settings = {k: v for k, v in load_config_file(ROOT / "examples" / "atari" / name).items() if k != "env"}
    return cls(**{**settings, "env": ENV, "learner_precision": precision, "num_workers": 0})


def _frames(rng: np.random.Generator, n: int, space: Any) -> np.ndarray:
    return rng.integers(0, 256, (n, *space.shape), dtype=np.uint8)


def ppo_seconds(precision: str, repeats: int) -> list[float]:
    config = _config(PPOConfig, "ppo.yaml", precision)
    algo = PPO(config)  # probes the env for its spaces; starts no process
    learner = algo.recipe.learner(algo.config, algo.spaces)
    rng = np.random.default_rng(0)
    n = config.train_batch_size
    batch = SampleBatch({
        "obs": _frames(rng, n, algo.observation_space),
        "actions": rng.integers(0, algo.action_space.n, n),
        "action_logp": np.full(n, -np.log(algo.action_space.n), np.float32),
        "advantages": rng.standard_normal(n).astype(np.float32),
        "value_targets": rng.standard_normal(n).astype(np.float32),
        "vf_preds": np.zeros(n, np.float32),
    })  # fmt: skip
    times = []
    for i in range(repeats + 1):  # the first warms oneDNN's kernel caches
        start = time.perf_counter()
        learner.learn_on_batch(batch, config.num_epochs, config.minibatch_size, seed=i)
        times.append(time.perf_counter() - start)
    return times[1:]


def dqn_seconds(precision: str, repeats: int) -> list[float]:
    config = _config(DQNConfig, "dqn.yaml", precision)
    algo = DQN(config)
    learner = algo.recipe.learner(algo.config, algo.spaces)
    rng = np.random.default_rng(0)
    n = config.train_batch_size
    batch = SampleBatch({
        "obs": _frames(rng, n, algo.observation_space),
        "actions": rng.integers(0, algo.action_space.n, n),
        "rewards": rng.standard_normal(n).astype(np.float32),
        "next_obs": _frames(rng, n, algo.observation_space),
        "discounts": np.full(n, 0.99, np.float32),
    })  # fmt: skip
    steps = 50
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        for _ in range(steps):
            learner.learn_on_batch(batch)
        times.append((time.perf_counter() - start) / steps)
    return times[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    native = native_bfloat16(torch.device("cpu"))
    print(f"# learner SGD on {ENV} frames ({machine_line()}, {args.threads} torch threads, "
          f"bfloat16 native on this CPU: {native})")  # fmt: skip
    rows = []
    for label, measure, unit in (("PPO batch (16 x 256)", ppo_seconds, "s"), ("DQN step (32)", dqn_seconds, "ms")):
        base = None
        for precision in ("float32", "bfloat16"):
            median = statistics.median(measure(precision, args.repeats))
            base = base or median
            shown = median if unit == "s" else 1000 * median
            rows.append([label, precision, f"{shown:.3f} {unit}", f"{base / median:.2f}x"])
    print_table("median time of the learner's update", ["what", "learner_precision", "time", "speed vs float32"], rows)


if __name__ == "__main__":
    main()
