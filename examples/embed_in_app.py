"""An asyncio application that serves an HTTP status endpoint while PPO
trains in the same event loop.

    python examples/embed_in_app.py --port 8080
    curl http://127.0.0.1:8080/status

The learner trains in a thread and the workers sample in their own
processes, so the loop stays free to answer requests while it trains.
The server is the standard library's ``asyncio.start_server``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import time
from typing import Any

from asyncflow.algorithms import PPO, PPOConfig

status: dict[str, Any] = {"state": "starting", "iteration": 0, "env_steps": 0, "return_mean": None}


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer one HTTP/1.0-style request: /status gives JSON, anything else 404."""
    try:
        request = await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass  # skip the headers
        path = request.split()[1].decode() if len(request.split()) > 1 else "/"
        if path == "/status":
            body, code = json.dumps({**status, "time": time.time()}).encode(), "200 OK"
        else:
            body, code = b'{"error": "not found"}', "404 Not Found"
        writer.write(f"HTTP/1.1 {code}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode() + body)  # fmt: skip
        await writer.drain()
    finally:
        writer.close()
        await writer.wait_closed()


async def train(stop_reward: float, stop_timesteps: int) -> None:
    status["state"] = "training"
    async with PPO(PPOConfig(env="CartPole-v1", num_workers=2, seed=0)) as algo:
        async for result in algo.train():
            ret = result["episode_return_mean"]
            status.update(
                iteration=result["training_iteration"],
                env_steps=result["num_env_steps_sampled"],
                return_mean=None if math.isnan(ret) else round(ret, 1),
            )
            if ret >= stop_reward or result["num_env_steps_sampled"] >= stop_timesteps:
                break
    status["state"] = "done"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--stop-reward", type=float, default=475.0)
    parser.add_argument("--stop-timesteps", type=int, default=300_000)
    parser.add_argument("--linger", type=float, default=0.0, help="keep serving this many seconds after training")
    args = parser.parse_args()
    server = await asyncio.start_server(handle, "127.0.0.1", args.port)
    port = server.sockets[0].getsockname()[1]
    print(f"serving on http://127.0.0.1:{port}/status", flush=True)
    async with server:
        await train(args.stop_reward, args.stop_timesteps)
        print(f"training done: {status}", flush=True)
        await asyncio.sleep(args.linger)


if __name__ == "__main__":
    asyncio.run(main())
