"""Actor classes the tests spawn."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any


class Counter:
    def __init__(self, start: int = 0) -> None:
        self.n = start
        self.running = 0
        self.max_running = 0
        self.cancelled = 0
        self.log: list[int] = []

    def add(self, k: int) -> int:
        self.n += k
        self.log.append(k)
        return self.n

    def get_log(self) -> list[int]:
        return self.log

    async def slow_add(self, k: int, delay: float = 0.05) -> int:
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        return self.add(k)

    async def add_together(self, k: int, together: int, limit_s: float = 20.0) -> int:
        """Add ``k`` once ``together`` calls of this method are running at once (within
        ``limit_s``, else ``TimeoutError``): proof of overlap that a busy machine cannot break,
        as it can a fixed sleep's."""
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            async with asyncio.timeout(limit_s):
                while self.max_running < together:
                    await asyncio.sleep(0.005)
        finally:
            self.running -= 1
        return self.add(k)

    def stats(self) -> dict[str, int]:
        return {"n": self.n, "running": self.running, "max_running": self.max_running, "cancelled": self.cancelled}

    def hold(self, started: str, release: str) -> None:
        """Block this actor (no message is read meanwhile) until the file ``release`` exists;
        ``started`` appears once it blocks. A test's handle on the consumer's pace."""
        import time

        open(started, "w").close()
        while not os.path.exists(release):
            time.sleep(0.005)

    def echo(self, x: Any) -> Any:
        return x

    def write_into(self, tree: dict[str, Any]) -> float:
        tree["w"][0] = 1.0
        return float(tree["w"][0])

    def getpid(self) -> int:
        return os.getpid()

    def niceness(self) -> int:
        return os.nice(0)

    def fail(self, message: str) -> None:
        raise ValueError(message)

    def fail_custom(self) -> None:
        raise Unpicklable("custom", 1)

    def return_lock(self) -> Any:
        return threading.Lock()

    def exit_now(self, code: int) -> None:
        os._exit(code)

    async def hang(self) -> None:
        await asyncio.sleep(3600)


class Unpicklable(Exception):
    """An exception whose constructor signature breaks unpickling."""

    def __init__(self, text: str, code: int) -> None:
        super().__init__(f"{text}:{code}")


class Broken:
    def __init__(self) -> None:
        raise RuntimeError("constructor failed on purpose")


class FailsOnRestart(Counter):
    """Builds normally until ``marker`` exists; then its constructor raises."""

    def __init__(self, marker: str) -> None:
        if os.path.exists(marker):
            raise RuntimeError("cannot start again")
        super().__init__()


class SlowToRestart(Counter):
    """Starts at once the first time (and leaves ``marker``); takes 2 s to start again, so a
    test that killed it acts while its restart is surely under way."""

    def __init__(self, marker: str) -> None:
        if os.path.exists(marker):
            time.sleep(2.0)
        else:
            open(marker, "w").close()
        super().__init__()


class Jitter:
    """Answers after a random sub-millisecond delay, so replies land at any moment."""

    def __init__(self, seed: int) -> None:
        import random

        self.rng = random.Random(seed)

    async def later(self, x: int) -> int:
        await asyncio.sleep(self.rng.random() * 0.001)
        return x
