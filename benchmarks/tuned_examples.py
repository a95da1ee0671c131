"""The tuned examples (``examples/tuned/<algo>-<env>.yaml``) against rl-baselines3-zoo's published scores.

Each row trains asyncflow with one tuned example at the zoo's budget (``n_timesteps``), from a fresh
process, saves a checkpoint at the end and evaluates its greedy policy (``asyncflow evaluate``,
``--episodes`` episodes from seed 10,000). Beside it: the zoo's published score (its benchmark.md at
commit 0088472: the mean and std of the trained agent's deterministic return), and with ``--sb3``
Stable-Baselines3's own run of the zoo's settings (the same hyperparameters, VecNormalize where the
zoo normalizes, gSDE and Ornstein-Uhlenbeck noise where it uses them), trained and evaluated the same
way, stopped after ``--sb3-limit`` seconds. Wall times include each process's start.

    python benchmarks/tuned_examples.py [--only dqn-CartPole-v1 sac-Pendulum-v1] [--sb3] [--seed 0]

The zoo's table was measured with one run per row (its own note says so); so is each row here.
Uses at most 2 worker processes (this machine has 2 cores); off-policy rows sample in the driver.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table

ROOT = Path(__file__).resolve().parents[1]
TUNED = ROOT / "examples" / "tuned"


@dataclass(frozen=True)
class Row:
    algo: str
    env: str
    budget: int
    zoo: tuple[float, float]  # the zoo's published mean and std
    sb3: str  # the SB3 constructor's keyword arguments, as Python
    n_envs: int = 1
    normalize: bool = False

    @property
    def name(self) -> str:
        return f"{self.algo}-{self.env}"


_LIN = "lambda p: p * {}"
_DQN_ACROBOT_LANDER = (  # the zoo's Acrobot-v1 and LunarLander-v2 entries are the same
    "learning_rate=6.3e-4, batch_size=128, buffer_size=50_000, learning_starts=0, gamma=0.99, "
    "target_update_interval=250, train_freq=4, gradient_steps=-1, exploration_fraction=0.12, "
    "exploration_final_eps=0.1, policy_kwargs=dict(net_arch=[256, 256])"
)
ROWS = [
    Row("dqn", "CartPole-v1", 50_000, (500.0, 0.0),
        "learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99, "
        "target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16, "
        "exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256])"),
    Row("dqn", "Acrobot-v1", 100_000, (-76.639, 11.752), _DQN_ACROBOT_LANDER),
    Row("dqn", "LunarLander-v3", 100_000, (154.382, 79.241), _DQN_ACROBOT_LANDER),
    Row("dqn", "MountainCar-v0", 120_000, (-100.849, 9.925),
        "learning_rate=4e-3, batch_size=128, buffer_size=10_000, learning_starts=1000, gamma=0.98, "
        "target_update_interval=600, train_freq=16, gradient_steps=8, exploration_fraction=0.2, "
        "exploration_final_eps=0.07, policy_kwargs=dict(net_arch=[256, 256])"),
    Row("ppo", "CartPole-v1", 100_000, (500.0, 0.0),
        "n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0, "
        f"learning_rate={_LIN.format(1e-3)}, clip_range={_LIN.format(0.2)}", n_envs=8),
    Row("ppo", "Pendulum-v1", 100_000, (-172.225, 104.159),
        "n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0, learning_rate=1e-3, "
        "clip_range=0.2, use_sde=True, sde_sample_freq=4", n_envs=4),
    Row("ppo", "Acrobot-v1", 1_000_000, (-73.506, 18.201),
        "n_steps=256, gae_lambda=0.94, gamma=0.99, n_epochs=4, ent_coef=0.0", n_envs=16, normalize=True),
    Row("ppo", "MountainCar-v0", 1_000_000, (-110.423, 19.473),
        "n_steps=16, gae_lambda=0.98, gamma=0.99, n_epochs=4, ent_coef=0.0", n_envs=16, normalize=True),
    Row("ppo", "LunarLander-v3", 1_000_000, (242.119, 31.823),
        "n_steps=1024, batch_size=64, gae_lambda=0.98, gamma=0.999, n_epochs=4, ent_coef=0.01", n_envs=16),
    Row("ppo", "MountainCarContinuous-v0", 20_000, (88.343, 2.572),
        "batch_size=256, n_steps=8, gamma=0.9999, learning_rate=7.77e-5, ent_coef=0.00429, clip_range=0.1, "
        "n_epochs=10, gae_lambda=0.9, max_grad_norm=5, vf_coef=0.19, use_sde=True, "
        "policy_kwargs=dict(log_std_init=-3.29, ortho_init=False)", normalize=True),
    Row("a2c", "CartPole-v1", 500_000, (500.0, 0.0), "ent_coef=0.0", n_envs=8),
    Row("a2c", "Acrobot-v1", 500_000, (-83.353, 17.213), "ent_coef=0.0", n_envs=16, normalize=True),
    Row("a2c", "MountainCar-v0", 1_000_000, (-111.263, 24.087), "ent_coef=0.0", n_envs=16, normalize=True),
    Row("a2c", "LunarLander-v3", 200_000, (155.751, 80.419),
        f"gamma=0.995, n_steps=5, learning_rate={_LIN.format(0.00083)}, ent_coef=0.00001", n_envs=8),
    Row("a2c", "Pendulum-v1", 1_000_000, (-162.965, 103.210),
        f"ent_coef=0.0, max_grad_norm=0.5, n_steps=8, gae_lambda=0.9, vf_coef=0.4, gamma=0.9, use_rms_prop=True, "
        f"normalize_advantage=False, learning_rate={_LIN.format(7e-4)}, use_sde=True, "
        "policy_kwargs=dict(log_std_init=-2, ortho_init=False)", n_envs=8, normalize=True),
    Row("a2c", "MountainCarContinuous-v0", 100_000, (91.166, 0.255),
        "n_steps=100, ent_coef=0.0, use_sde=True, sde_sample_freq=16, "
        "policy_kwargs=dict(log_std_init=0.0, ortho_init=False)", n_envs=4, normalize=True),
    Row("sac", "Pendulum-v1", 20_000, (-156.995, 88.714), "learning_rate=1e-3"),
    Row("sac", "MountainCarContinuous-v0", 50_000, (94.679, 1.134),
        "learning_rate=3e-4, buffer_size=50_000, batch_size=512, ent_coef=0.1, train_freq=32, gradient_steps=32, "
        "gamma=0.9999, tau=0.01, learning_starts=0, use_sde=True, policy_kwargs=dict(log_std_init=-3.67, "
        "net_arch=[64, 64])"),
    Row("td3", "Pendulum-v1", 20_000, (-151.855, 90.227),
        "gamma=0.98, buffer_size=200_000, learning_starts=10_000, action_noise=normal(0.1), gradient_steps=-1, "
        "train_freq=(1, 'episode'), learning_rate=1e-3, policy_kwargs=dict(net_arch=[400, 300])"),
    Row("td3", "MountainCarContinuous-v0", 300_000, (93.483, 0.075), "action_noise=ou(0.5)"),
    Row("ddpg", "Pendulum-v1", 20_000, (-152.099, 94.282),
        "gamma=0.98, buffer_size=200_000, learning_starts=10_000, action_noise=normal(0.1), gradient_steps=-1, "
        "train_freq=(1, 'episode'), learning_rate=1e-3, policy_kwargs=dict(net_arch=[400, 300])"),
    Row("ddpg", "MountainCarContinuous-v0", 300_000, (93.512, 0.048), "action_noise=ou(0.5)"),
]  # fmt: skip


def run_asyncflow(row: Row, seed: int, episodes: int, logdir: Path) -> tuple[float, float, float]:
    """Train with the tuned example and evaluate its last checkpoint: (return mean, std, wall seconds)."""
    started = time.monotonic()
    train = [sys.executable, "-m", "asyncflow.cli", "train", row.algo, "--config", str(TUNED / f"{row.name}.yaml"),
             "--stop-timesteps", str(row.budget), "--seed", str(seed), "--checkpoint-every", "1000000000",
             "--logdir", str(logdir)]  # fmt: skip
    subprocess.run(train, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    [checkpoint] = logdir.glob("*/checkpoints/*.ckpt")
    out = subprocess.run([sys.executable, "-m", "asyncflow.cli", "evaluate", str(checkpoint), "--episodes",
                          str(episodes)], check=True, cwd=ROOT, capture_output=True, text=True).stdout  # fmt: skip
    result = json.loads(out.splitlines()[0])
    return result["return_mean"], result["return_std"], seconds


_SB3_SCRIPT = """
import sys, time, numpy as np
from stable_baselines3 import {cls}
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise
from stable_baselines3.common.vec_env import VecNormalize
import gymnasium as gym

seed, episodes = int(sys.argv[1]), int(sys.argv[2])
dims = gym.make("{env}").action_space.shape
normal = lambda s: NormalActionNoise(np.zeros(dims), s * np.ones(dims))
ou = lambda s: OrnsteinUhlenbeckActionNoise(np.zeros(dims), s * np.ones(dims))
env = make_vec_env("{env}", n_envs={n_envs}, seed=seed)
if {normalize}:
    env = VecNormalize(env)
model = {cls}("MlpPolicy", env, seed=seed, device="cpu", {kwargs})
model.learn({budget})
eval_env = make_vec_env("{env}", n_envs=1, seed=10_000)
if {normalize}:
    eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
    eval_env.obs_rms = env.obs_rms
mean, std = evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True)
print("RESULT", mean, std)
"""


def run_sb3(row: Row, seed: int, episodes: int, limit: float) -> tuple[float, float, float] | None:
    """SB3 on the zoo's settings, trained and evaluated the same way; None: it ran past ``limit`` seconds."""
    script = _SB3_SCRIPT.format(cls=row.algo.upper(), env=row.env, n_envs=row.n_envs, normalize=row.normalize,
                                kwargs=row.sb3, budget=row.budget)  # fmt: skip
    started = time.monotonic()
    try:
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(script), str(seed), str(episodes)], check=True,
                             capture_output=True, text=True, timeout=limit).stdout  # fmt: skip
    except subprocess.TimeoutExpired:
        return None
    mean, std = (float(x) for x in out.split("RESULT", 1)[1].split())
    return mean, std, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="ALGO-ENV", help="these rows (default: all)")
    parser.add_argument("--sb3", action="store_true", help="also run Stable-Baselines3 on the zoo's settings")
    parser.add_argument("--sb3-only", action="store_true", help="only Stable-Baselines3's runs (no asyncflow)")
    parser.add_argument("--sb3-limit", type=float, default=900.0, help="seconds before an SB3 run is stopped")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=20, help="greedy evaluation episodes")
    args = parser.parse_args()
    rows = [r for r in ROWS if args.only is None or r.name in args.only]
    if args.only and len(rows) != len(args.only):
        parser.error(f"unknown rows; the rows are: {', '.join(r.name for r in ROWS)}")
    print(f"# {machine_line()}; asyncflow with at most 2 worker processes; seed {args.seed}, "
          f"{args.episodes} greedy evaluation episodes", flush=True)  # fmt: skip
    table = []
    for row in rows:
        cells: list[object] = [row.name, f"{row.budget:,}", f"{row.zoo[0]:.1f} +- {row.zoo[1]:.1f}"]
        if not args.sb3_only:
            with TemporaryDirectory() as tmp:
                mean, std, seconds = run_asyncflow(row, args.seed, args.episodes, Path(tmp))
            cells += [f"{mean:.1f} +- {std:.1f}", "yes" if mean >= row.zoo[0] - row.zoo[1] else "no", f"{seconds:.0f}"]
        if args.sb3_only:
            peer = run_sb3(row, args.seed, args.episodes, args.sb3_limit)
            cells += ["-", f"> {args.sb3_limit:.0f}"] if peer is None else [f"{peer[0]:.1f} +- {peer[1]:.1f}",
                                                                          f"{peer[2]:.0f}"]  # fmt: skip
        elif args.sb3:
            peer = run_sb3(row, args.seed, args.episodes, args.sb3_limit)
            cells += (["-", f"> {args.sb3_limit:.0f}", "-"] if peer is None else
                      [f"{peer[0]:.1f} +- {peer[1]:.1f}", f"{peer[2]:.0f}", f"{peer[2] / seconds:.2f}x"])  # fmt: skip
        print(" | ".join(str(c) for c in cells), flush=True)
        table.append(cells)
    header = ["row", "budget (steps)", "zoo published"]
    if args.sb3_only:
        header += ["SB3 (zoo settings)", "SB3 s"]
        print_table("Stable-Baselines3 on the zoo's settings", header, table)
        return
    header += ["asyncflow greedy", "within zoo's std", "asyncflow s"]
    if args.sb3:
        header += ["SB3 (zoo settings)", "SB3 s", "SB3 time / asyncflow"]
    print_table("Tuned examples at the zoo's budget", header, table)


if __name__ == "__main__":
    main()
