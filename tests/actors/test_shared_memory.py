"""Shared memory that runs out is an error at spawn that says what to do, never a
SIGBUS minutes later; a dead actor's segments go when its death is noticed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import asyncflow

from ..conftest import our_segments
from .helpers import Counter

SMALL_SHM = textwrap.dedent(
    """
    import asyncio, os, sys
    import asyncflow
    from asyncflow import SharedMemoryError
    from asyncflow.algorithms import PPO, PPOConfig

    async def main():
        # 8 MiB rings: one actor fits in 24 MiB, two do not.
        try:
            async with PPO(PPOConfig(num_workers=2)) as algo:
                async for _ in algo.train():
                    pass
        except SharedMemoryError as exc:
            print("ERROR", exc)
        print("LEFT", len([n for n in os.listdir("/dev/shm") if n.startswith("asyncflow_")]))

    asyncio.run(main())
    """
)


def _can_mount_private_tmpfs() -> str | None:
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return "needs Linux and unshare"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
                           capture_output=True, timeout=30)  # fmt: skip
    return None if probe.returncode == 0 else f"cannot mount a private tmpfs here: {probe.stderr.decode().strip()}"


@pytest.mark.timeout(120)
@pytest.mark.skipif(_can_mount_private_tmpfs() is not None, reason=str(_can_mount_private_tmpfs()))
def test_a_small_dev_shm_is_an_error_at_spawn_that_says_how_much_is_needed() -> None:
    script = f"mount -t tmpfs -o size=24m tmpfs /dev/shm && exec {sys.executable} -c {shlex_quote(SMALL_SHM)}"
    out = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=100)
    assert out.returncode == 0, out.stderr  # no SIGBUS (-7), no traceback
    assert "ERROR /dev/shm has no room for a 8.0 MiB ring" in out.stdout, out.stdout + out.stderr
    assert "of 24 MiB; each actor needs two rings" in out.stdout and "--shm-size" in out.stdout
    assert "LEFT 0" in out.stdout  # the half-made actor's segment is gone too


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


async def test_a_dead_actors_segments_are_unlinked_when_its_death_is_noticed() -> None:
    async with asyncflow.open_runtime() as rt:
        before = set(our_segments(os.getpid()))
        actor = await rt.spawn(Counter, 0, name="doomed")
        assert len(set(our_segments(os.getpid())) - before) == 2  # its two rings
        await actor.kill()
        assert set(our_segments(os.getpid())) == before  # gone now, with the runtime still open
        assert not actor.alive


async def test_segments_of_drivers_killed_with_9_are_swept_when_a_runtime_opens() -> None:
    with open("/proc/sys/kernel/pid_max") as f:
        dead = int(f.read()) + 1  # no process can have this pid
    stale = f"/dev/shm/asyncflow_{dead}_0123456789ab"
    with open(stale, "wb") as f:
        f.write(b"left by a killed driver")
    mine = f"/dev/shm/asyncflow_{os.getpid()}_0123456789ab"
    with open(mine, "wb") as f:
        f.write(b"a live driver's: kept")
    try:
        async with asyncflow.open_runtime():
            assert not os.path.exists(stale)
            assert os.path.exists(mine)
    finally:
        os.unlink(mine)


_HOLDS_A_CLAIM = textwrap.dedent(
    """
    import fcntl, os, sys, time
    claim, segment = sys.argv[1], sys.argv[2]
    fd = os.open(claim, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    with open(segment, "wb") as f:
        f.write(b"a live driver's ring")
    print("holding", flush=True)
    time.sleep(60)
    """
)


@pytest.mark.timeout(60)
@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")
async def test_a_live_driver_in_another_pid_namespace_keeps_its_segments() -> None:
    """A driver whose pid this process cannot see (another PID namespace that shares /dev/shm)
    lost its live segments to the sweep, which judged by the pid in their names. Its claim (a
    locked file) decides now, wherever it runs; once it is gone, its segments go."""
    from asyncflow.actors._ring import sweep_stale_segments

    with open("/proc/sys/kernel/pid_max") as f:
        unseen = int(f.read()) + 7  # no pid here: as a pid of another namespace looks from this one
    claim = f"/dev/shm/asyncflow-owner_{unseen}_feedbeef"
    segment = f"/dev/shm/asyncflow_{unseen}_feedbeef_0123456789ab"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDS_A_CLAIM, claim, segment], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        assert sweep_stale_segments() == []
        async with asyncflow.open_runtime() as runtime:  # opening a runtime sweeps too
            await runtime.spawn(Counter)
            assert os.path.exists(segment) and os.path.exists(claim)
        holder.kill()
        holder.wait(timeout=10)
        assert sweep_stale_segments() == [os.path.basename(segment)]
        assert not os.path.exists(claim)
    finally:
        holder.kill()
        holder.communicate()
        for path in (claim, segment):
            if os.path.exists(path):
                os.unlink(path)
