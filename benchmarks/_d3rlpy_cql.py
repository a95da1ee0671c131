"""d3rlpy's CQL on a dataset saved by ``offline.py`` (run by it, in d3rlpy's own virtual
environment): prints ``{"return": ..., "seconds": ...}`` as its last line.

    python _d3rlpy_cql.py DATASET.npz UPDATES
"""

from __future__ import annotations

import json
import sys
import time

import d3rlpy
import gymnasium as gym
import numpy as np


def main() -> None:
    path, updates = sys.argv[1], int(sys.argv[2])
    data = np.load(path)
    dataset = d3rlpy.dataset.MDPDataset(data["observations"], data["actions"], data["rewards"], data["terminals"],
                                        data["timeouts"])  # fmt: skip
    d3rlpy.seed(0)
    encoder = d3rlpy.models.VectorEncoderFactory([64, 64])
    cql = d3rlpy.algos.CQLConfig(
        actor_learning_rate=3e-4,
        critic_learning_rate=3e-4,
        temp_learning_rate=3e-4,
        alpha_learning_rate=0.0,
        initial_alpha=1.0,
        initial_temperature=1.0,
        conservative_weight=5.0,
        n_action_samples=4,
        batch_size=128,
        tau=0.005,
        gamma=0.99,
        actor_encoder_factory=encoder,
        critic_encoder_factory=encoder,
    ).create(device="cpu:0")
    start = time.perf_counter()
    cql.fit(dataset, n_steps=updates, n_steps_per_epoch=updates, show_progress=False,
            logger_adapter=d3rlpy.logging.NoopAdapterFactory(), save_interval=10**9)  # fmt: skip
    seconds = time.perf_counter() - start
    env, returns = gym.make("Pendulum-v1"), []
    for episode in range(20):
        obs, _ = env.reset(seed=10_000 + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(cql.predict(obs[None].astype(np.float32))[0])
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    print(json.dumps({"return": float(np.mean(returns)), "seconds": seconds}))


if __name__ == "__main__":
    main()
