"""An environment behind a network call: CartPole served over TCP, trained with PPO
through an async client env.

    python examples/remote_env.py [--delay-ms 2] [--envs-per-worker 32] [--stop-reward 475]

``serve_cartpole`` is the simulator: ``asyncio.start_server`` on localhost, one
CartPole per connection, each step answered after a delay (the network and the
simulator's own time). ``RemoteCartPole`` is the client, an ``AsyncEnv``: its
``reset``, ``step`` and ``close`` are coroutines, so each worker keeps all its
envs' requests in flight at once and acts for those that have answered.

The wire format is one JSON object per line each way::

    -> {"op": "reset", "seed": 3}          <- {"obs": [...]}
    -> {"op": "step", "action": 1}         <- {"obs": [...], "reward": 1.0, "terminated": false, "truncated": false}
                                           <- {"error": "..."}   (the simulator failed this step)

The tests import this module: ``faults`` makes the server hang or fail chosen
steps, and ``open_connections`` tells whether every client closed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from asyncflow.algorithms import PPO, PPOConfig


@dataclass
class Simulator:
    """The server's knobs and counters."""

    delay_s: tuple[float, float] = (0.0, 0.0)
    """Each step is answered after a delay drawn uniformly from this range."""
    hang_at: set[int] = field(default_factory=set)
    """Steps (counted over all connections, from 1) that are never answered."""
    fail_at: set[int] = field(default_factory=set)
    """Steps answered with an error."""
    steps: int = 0
    open_connections: int = 0
    connections: int = 0
    handlers: set[asyncio.Task[Any]] = field(default_factory=set)

    async def wait_all_closed(self) -> None:
        """Wait until every connection's handler has finished (the clients closed)."""
        while self.handlers:
            await asyncio.wait(set(self.handlers))

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One client: its own CartPole, until it closes the connection."""
        self.open_connections += 1
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        env = gym.make("CartPole-v1")
        try:
            while line := await reader.readline():
                request = json.loads(line)
                if request["op"] == "reset":
                    obs, _ = env.reset(seed=request.get("seed"))
                    reply: dict[str, Any] = {"obs": obs.tolist()}
                else:
                    self.steps += 1
                    step = self.steps
                    low, high = self.delay_s
                    if high > 0:
                        await asyncio.sleep(random.uniform(low, high))
                    if step in self.hang_at:
                        await reader.read()  # never answers; waits for the client to go
                        break
                    if step in self.fail_at:
                        reply = {"error": f"the simulator failed at step {step}"}
                    else:
                        obs, reward, terminated, truncated, _ = env.step(int(request["action"]))
                        reply = {"obs": obs.tolist(), "reward": float(reward), "terminated": terminated,
                                 "truncated": truncated}  # fmt: skip
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            # Counted out first: a handler cancelled in ``wait_closed`` (the server is
            # shutting down) must still leave the set, or ``wait_all_closed`` spins on it.
            env.close()
            self.open_connections -= 1
            self.handlers.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


@contextlib.asynccontextmanager
async def serve_cartpole(simulator: Simulator | None = None, port: int = 0) -> AsyncIterator[tuple[Simulator, int]]:
    """Serve CartPole on localhost (``port=0``: any free port) while the block runs:
    ``(simulator, port)``."""
    simulator = simulator or Simulator()
    server = await asyncio.start_server(simulator.handle, "127.0.0.1", port)
    try:
        async with server:
            yield simulator, server.sockets[0].getsockname()[1]
    finally:
        for task in simulator.handlers:  # clients still connected: their handlers end here
            task.cancel()
        await simulator.wait_all_closed()


class RemoteSimulatorError(RuntimeError):
    """The simulator answered a step with an error."""


class RemoteCartPole:
    """The client: an ``AsyncEnv`` that plays CartPole on a ``serve_cartpole`` server.

    It connects on its first ``reset`` (the driver builds one env only to read
    its spaces, and closes it without a reset).
    """

    observation_space = gym.make("CartPole-v1").observation_space
    action_space = gym.spaces.Discrete(2)

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.address = (host, port)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(*self.address)
        assert self.reader is not None
        self.writer.write(json.dumps(request).encode() + b"\n")
        line = await self.reader.readline()
        if not line:
            raise ConnectionError(f"the simulator at {self.address} closed the connection")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise RemoteSimulatorError(reply["error"])
        return reply

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        reply = await self._ask({"op": "reset", "seed": seed})
        return np.array(reply["obs"], np.float32), {}

    async def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        reply = await self._ask({"op": "step", "action": int(action)})
        return np.array(reply["obs"], np.float32), reply["reward"], reply["terminated"], reply["truncated"], {}

    async def close(self) -> None:
        writer, self.writer, self.reader = self.writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay-ms", type=float, default=2.0, help="each step's delay: uniform in [0, this]")
    parser.add_argument("--envs-per-worker", type=int, default=32)
    parser.add_argument("--stop-reward", type=float, default=475.0)
    parser.add_argument("--stop-timesteps", type=int, default=300_000)
    args = parser.parse_args()
    async with serve_cartpole(Simulator(delay_s=(0.0, args.delay_ms / 1000))) as (simulator, port):
        config = PPOConfig(env=lambda: RemoteCartPole(port), num_workers=2, num_envs_per_worker=args.envs_per_worker,
                           rollout_fragment_length=2048 // (2 * args.envs_per_worker), seed=0)  # fmt: skip
        async with PPO(config) as algo:
            async for result in algo.train():
                print(f"iter {result['training_iteration']:3d}  steps {result['num_env_steps_sampled']:7d}  "
                      f"return {result['episode_return_mean']:6.1f}  "
                      f"steps/s {result['num_env_steps_sampled_throughput_per_sec']:7.0f}")  # fmt: skip
                if result["episode_return_mean"] >= args.stop_reward:
                    break
                if result["num_env_steps_sampled"] >= args.stop_timesteps:
                    break
        print(
            f"simulator: {simulator.steps} steps over {simulator.connections} connections, "
            f"{simulator.open_connections} left open"
        )


if __name__ == "__main__":
    asyncio.run(main())
