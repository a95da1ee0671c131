"""Shared fixtures: backends, and a leak check after every test module."""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import asyncflow
from asyncflow.actors._ring import SEGMENT_PREFIX


def pytest_configure(config: pytest.Config) -> None:
    """Tests send Ctrl-C (SIGINT) to the drivers they start, and a child inherits an
    ignored SIGINT through exec. A shell without job control starts a background
    command (``pytest ... &`` in a script, ``nohup``) with SIGINT ignored: every
    driver those tests started then trained on through its Ctrl-C. A handler,
    unlike an ignored signal, is reset to the default in an exec'd child."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def our_segments(pid: int | None = None) -> list[str]:
    """Shared-memory segments in /dev/shm created by asyncflow (optionally by one driver pid)."""
    prefix = SEGMENT_PREFIX if pid is None else f"{SEGMENT_PREFIX}{pid}_"
    try:
        return sorted(n for n in os.listdir("/dev/shm") if n.startswith(prefix))
    except FileNotFoundError:  # pragma: no cover - non-Linux
        return []


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (not gone, not a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def actor_children() -> list[multiprocessing.process.BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.name.startswith("asyncflow:")]


@pytest.fixture(autouse=True, scope="module")
def no_leaks_after_module() -> Iterator[None]:
    """Every test module must leave no actor process and no segment of ours behind."""
    yield
    assert actor_children() == [], "actor processes left behind"
    assert our_segments(os.getpid()) == [], "shared-memory segments left behind"


def ray_actors_alive() -> list[str]:
    """Ray actors of this driver that Ray does not report dead."""
    import ray

    return [a["ActorClassName"] for a in ray._private.state.actors().values() if a["State"] != "DEAD"]


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    """One local Ray per test module that uses it (2 CPUs, no dashboard); runtimes attach to it.
    It must hold no live actor of ours when the module ends."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
        assert ray_actors_alive() == [], "Ray actors left behind"
    finally:
        ray.shutdown()


@pytest.fixture(params=["process", "local", "ray"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "ray":
        request.getfixturevalue("ray_instance")
    return str(request.param)


@pytest.fixture
async def runtime(backend: str) -> AsyncIterator[asyncflow.Runtime]:
    async with asyncflow.open_runtime(backend) as rt:  # type: ignore[arg-type]
        yield rt


@pytest.fixture(params=["process", "ray"])
def remote_backend(request: pytest.FixtureRequest) -> str:
    """A backend whose actors live in other processes: ours, or Ray's."""
    if request.param == "ray":
        request.getfixturevalue("ray_instance")
    return str(request.param)


@pytest.fixture(params=["process", "ray"])
async def remote_runtime(request: pytest.FixtureRequest) -> AsyncIterator[asyncflow.Runtime]:
    """A runtime whose actors live in other processes: its own, or Ray's."""
    if request.param == "ray":
        request.getfixturevalue("ray_instance")
    async with asyncflow.open_runtime(request.param) as rt:
        yield rt


@pytest.fixture
async def process_runtime() -> AsyncIterator[asyncflow.Runtime]:
    async with asyncflow.open_runtime("process") as rt:
        yield rt
