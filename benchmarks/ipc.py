"""IPC benchmark: asyncflow's actor layer against the standard ways to talk
to another process, side by side in one run on this machine.

    python benchmarks/ipc.py [--quick] [--repeat N]

1. One-way streaming, messages/s for numpy payloads of 64 B .. 4 MiB:
   asyncflow (driver notifies an actor, awaiting drain() for backpressure),
   multiprocessing.Queue, multiprocessing.Pipe, faster-fifo (if installed),
   and an in-process memcpy of the same size as the physical limit.
2. Round trips, calls/s: a small method one at a time and 64 in flight, and a
   4 MiB array echoed back, against run_in_executor(ProcessPoolExecutor), a
   blocking multiprocessing.Pipe ping-pong, and aiomultiprocess (if installed).
3. Start-up: opening the runtime, the fork server's preload, and spawn -> first
   answer for an actor that imports torch (fork server vs plain spawn).

Every figure uses one producer and one consumer process: at most 2 processes
are busy, which is what a 2-core machine can run in parallel. Every streaming
and round-trip figure, ours and the others', is the median of ``--repeat``
runs (default 3), taken in turn: on a shared VM one run can be off by 2x.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import functools
import multiprocessing as mp
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine_line, print_table, ratio

import asyncflow

SIZES = [64, 4 << 10, 256 << 10, 4 << 20]


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10 else f"{n} B"


def _count_for(size: int, quick: bool) -> int:
    n = {64: 60_000, 4 << 10: 40_000, 256 << 10: 5_000, 4 << 20: 500}[size]
    return max(n // 5, 50) if quick else n


# -- one-way streaming ------------------------------------------------------


class Sink:
    def __init__(self) -> None:
        self.n = 0

    def take(self, x: Any) -> None:
        self.n += 1

    def count(self) -> int:
        return self.n


async def _asyncflow_stream(size: int, n: int) -> float:
    payload = np.ones(size, np.uint8)
    async with asyncflow.open_runtime() as rt:
        sink = await rt.spawn(Sink)
        await sink.count()
        start = time.perf_counter()
        for _ in range(n):
            sink.take.notify(payload)
            await sink.drain()
        assert await sink.count() == n
        return n / (time.perf_counter() - start)


def _producer_queue(q: Any, size: int, n: int) -> None:
    payload = np.ones(size, np.uint8)
    for _ in range(n):
        q.put(payload)


def _producer_pipe(conn: Any, size: int, n: int) -> None:
    payload = np.ones(size, np.uint8)
    for _ in range(n):
        conn.send(payload)


def _stream_baseline(kind: str, size: int, n: int) -> float | None:
    ctx = mp.get_context("spawn")
    target: Callable[[Any, int, int], None]
    if kind == "queue":
        q: Any = ctx.Queue(maxsize=64)
        target, arg, get = _producer_queue, q, q.get
    elif kind == "pipe":
        recv_end, send_end = ctx.Pipe(duplex=False)
        target, arg, get = _producer_pipe, send_end, recv_end.recv
    else:
        try:
            from faster_fifo import Queue as FastQueue
        except ImportError:
            return None
        q = FastQueue(max_size_bytes=max(64 << 20, 4 * size))
        target, arg = _producer_queue, q

        def get() -> Any:
            return q.get(timeout=30)

    proc = ctx.Process(target=target, args=(arg, size, n))
    proc.start()
    get()  # the first message includes the child's start-up; not timed
    start = time.perf_counter()
    for _ in range(n - 1):
        get()
    rate = (n - 1) / (time.perf_counter() - start)
    proc.join()
    return rate


def _memcpy(size: int, n: int) -> float:
    src, dst = np.ones(size, np.uint8), np.empty(size, np.uint8)
    start = time.perf_counter()
    for _ in range(n):
        np.copyto(dst, src)
    return n / (time.perf_counter() - start)


def _median(runs: list[Any]) -> Any:
    """The median of each figure over runs (a figure of None stays None)."""
    if runs[0] is None:
        return None
    if isinstance(runs[0], tuple):
        return tuple(_median(list(column)) for column in zip(*runs, strict=True))
    return statistics.median(runs)


def _run(coroutine_function: Callable[..., Any], *args: Any) -> Any:
    return asyncio.run(coroutine_function(*args))


def _repeated(repeat: int, *measures: Callable[[], Any]) -> list[Any]:
    """Run the measures in turn, ``repeat`` rounds; the median of each."""
    runs: list[list[Any]] = [[] for _ in measures]
    for _ in range(repeat):
        for results, measure in zip(runs, measures, strict=True):
            results.append(measure())
    return [_median(results) for results in runs]


def streaming(quick: bool, repeat: int) -> None:
    rows = []
    for size in SIZES:
        n = _count_for(size, quick)
        ours, queue, pipe, fast, memcpy = _repeated(
            repeat,
            functools.partial(_run, _asyncflow_stream, size, n),
            functools.partial(_stream_baseline, "queue", size, n),
            functools.partial(_stream_baseline, "pipe", size, n),
            functools.partial(_stream_baseline, "faster_fifo", size, n),
            functools.partial(_memcpy, size, n),
        )
        mib = ours * size / 2**20
        rows.append(
            [
                _size(size),
                ours,
                f"{mib:,.0f}",
                queue,
                ratio(ours, queue),
                pipe,
                ratio(ours, pipe),
                fast,
                ratio(ours, fast),
                memcpy,
                f"{ours / memcpy:.2f}",
            ]
        )
    print_table(
        "one-way streaming, messages/s (ratio = asyncflow / other; last column = fraction of memcpy)",
        [
            "payload",
            "asyncflow",
            "MiB/s",
            "mp.Queue",
            "ratio",
            "mp.Pipe",
            "ratio",
            "faster-fifo",
            "ratio",
            "memcpy",
            "of memcpy",
        ],
        rows,
    )


# -- round trips ------------------------------------------------------------


class Echo:
    def add(self, x: int) -> int:
        return x + 1

    def echo(self, x: Any) -> Any:
        return x


def _add(x: int) -> int:
    return x + 1


def _echo(x: Any) -> Any:
    return x


async def _aio_add(x: int) -> int:
    return x + 1


async def _aio_echo(x: Any) -> Any:
    return x


async def _rate(call: Callable[[], Any], n: int, window: int) -> float:
    for _ in range(min(n, 50)):
        await call()
    start = time.perf_counter()
    done = 0
    while done < n:
        k = min(window, n - done)
        if k == 1:
            await call()
        else:
            await asyncio.gather(*(call() for _ in range(k)))
        done += k
    return n / (time.perf_counter() - start)


async def _asyncflow_calls(n: int, n_big: int, big: np.ndarray) -> tuple[float, float, float]:
    async with asyncflow.open_runtime() as rt:
        actor = await rt.spawn(Echo)
        one = await _rate(lambda: actor.add(1), n, 1)
        many = await _rate(lambda: actor.add(1), n * 4, 64)
        echo = await _rate(lambda: actor.echo(big), n_big, 1)
        return one, many, echo


async def _pool_calls(n: int, n_big: int, big: np.ndarray) -> tuple[float, float, float]:
    loop = asyncio.get_running_loop()
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        one = await _rate(lambda: loop.run_in_executor(pool, _add, 1), n, 1)
        many = await _rate(lambda: loop.run_in_executor(pool, _add, 1), n, 64)
        echo = await _rate(lambda: loop.run_in_executor(pool, _echo, big), n_big, 1)
        return one, many, echo


async def _aiomp_calls(n: int, n_big: int, big: np.ndarray) -> tuple[float, float, float] | None:
    try:
        import aiomultiprocess
    except ImportError:
        return None
    aiomultiprocess.set_start_method("spawn")
    async with aiomultiprocess.Pool(processes=1, childconcurrency=64) as pool:
        one = await _rate(lambda: pool.apply(_aio_add, (1,)), n, 1)
        many = await _rate(lambda: pool.apply(_aio_add, (1,)), n, 64)
        echo = await _rate(lambda: pool.apply(_aio_echo, (big,)), n_big, 1)
        return one, many, echo


def _pipe_server(conn: Any) -> None:
    while True:
        message = conn.recv()
        if message is None:
            return
        conn.send(message[1] + 1 if message[0] == "add" else message[1])


def _pipe_calls(n: int, n_big: int, big: np.ndarray) -> tuple[float, None, float]:
    ours, theirs = mp.get_context("spawn").Pipe()
    proc = mp.get_context("spawn").Process(target=_pipe_server, args=(theirs,))
    proc.start()
    for _ in range(50):
        ours.send(("add", 1))
        ours.recv()
    start = time.perf_counter()
    for _ in range(n):
        ours.send(("add", 1))
        ours.recv()
    one = n / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(n_big):
        ours.send(("echo", big))
        ours.recv()
    echo = n_big / (time.perf_counter() - start)
    ours.send(None)
    proc.join()
    return one, None, echo


def round_trips(quick: bool, repeat: int) -> None:
    n, n_big = (1000, 40) if quick else (4000, 200)
    big = np.ones(4 << 20, np.uint8)
    ours, pool, pipe, aiomp = _repeated(
        repeat,
        functools.partial(_run, _asyncflow_calls, n, n_big, big),
        functools.partial(_run, _pool_calls, n, n_big, big),
        functools.partial(_pipe_calls, n, n_big, big),
        functools.partial(_run, _aiomp_calls, n, n_big, big),
    )
    results: list[tuple[str, Any]] = [
        ("run_in_executor(ProcessPool)", pool),
        ("multiprocessing.Pipe ping-pong", pipe),
        ("aiomultiprocess", aiomp),
    ]
    rows: list[list[object]] = [["asyncflow actor", *ours, "", "", ""]]
    for label, figures in results:
        if figures is None:
            rows.append([label + " (not installed)", None, None, None, "", "", ""])
            continue
        rows.append([label, *figures, *(ratio(a, b) for a, b in zip(ours, figures, strict=True))])
    print_table(
        "round trips, calls/s (ratios = asyncflow / other)",
        ["", "small, 1 at a time", "small, 64 in flight", "4 MiB echo", "ratio 1", "ratio 64", "ratio echo"],
        rows,
    )


# -- start-up ---------------------------------------------------------------


class TorchActor:
    def __init__(self) -> None:
        import torch

        self.t = torch.zeros(4)

    def ping(self) -> float:
        return float(self.t.sum())


async def _startup(start_method: str) -> tuple[float, float, float]:
    start = time.perf_counter()
    async with asyncflow.open_runtime(start_method=start_method) as rt:
        opened = time.perf_counter() - start
        await rt.wait_ready()
        ready = time.perf_counter() - start
        spawn_start = time.perf_counter()
        actor = await rt.spawn(TorchActor)
        await actor.ping()
        first = time.perf_counter() - spawn_start
        second_start = time.perf_counter()
        other = await rt.spawn(TorchActor)
        await other.ping()
        second = time.perf_counter() - second_start
    return opened, ready, min(first, second)


def startup() -> None:
    fork = asyncio.run(_startup("forkserver"))
    plain = asyncio.run(_startup("spawn"))
    rows = [
        ["fork server, torch preloaded", *fork],
        ["plain spawn (imports torch itself)", *plain],
    ]
    print_table(
        "start-up, seconds",
        ["", "open_runtime()", "preload done", "spawn -> first answer (torch actor)"],
        rows,
    )
    print(f"spawn -> first answer: fork server is {plain[2] / fork[2]:.1f}x faster than plain spawn")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer messages (a smoke run)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the table shows the median")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    print(f"# asyncflow IPC benchmark ({machine_line()}); 1 producer + 1 consumer process per figure")
    print(f"# each streaming and round-trip figure: median of {args.repeat} runs, contenders taken in turn")
    startup()  # first: nothing may have warmed the fork server yet
    streaming(args.quick, args.repeat)
    round_trips(args.quick, args.repeat)


if __name__ == "__main__":
    main()
