"""``import asyncflow.algorithms`` starts the fork server before it imports torch, so
that the two imports overlap, and a spare server without torch beside it; the first
runtime uses one of them (the spare when its workers need no torch), the other is gone
by then, and the one left leaves with its driver."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from asyncflow.actors._runtime import SHARED_CORE_MAX_CPUS

# The probes' own fork servers, from /proc: the children running forkserver's main, as
# pids or as their command lines (which list what each preloads).
_SERVERS = textwrap.dedent(
    """
    import os

    def servers(cmdlines=False):
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if ppid == os.getpid() and b"multiprocessing.forkserver" in cmdline:
                found.append(cmdline.decode(errors="replace") if cmdlines else int(pid))
        return found
    """
)

# Prints the driver's fork servers right after the import, the same after a runtime ran,
# and the torch server's pid. The workers run torch unless PROBE_INFERENCE says otherwise.
_PROBE = _SERVERS + textwrap.dedent(
    """
    import asyncio
    import multiprocessing.forkserver as fs

    started_before_torch = fs._forkserver._forkserver_pid is not None
    from asyncflow import _preload
    from asyncflow.actors import start_fork_server_early

    _preload.register()  # what importing the algorithms does first; they are importing now
    start_fork_server_early()
    server_cpus = sorted({cpu for pid in servers() for cpu in os.sched_getaffinity(pid)})
    import asyncflow.algorithms
    after_import = servers()
    torch_server = fs._forkserver._forkserver_pid
    from asyncflow.algorithms import PG, PGConfig

    async def main():
        async with PG(PGConfig(env="CartPole-v1", num_workers=1, train_batch_size=64,
                               rollout_fragment_length=64, num_envs_per_worker=1,
                               worker_inference=os.environ.get("PROBE_INFERENCE", "torch"))) as algo:
            worker_cpus = sorted(os.sched_getaffinity(algo.workers.workers[0].pid))
            async for result in algo.train():
                return result["num_env_steps_sampled"], worker_cpus

    steps, worker_cpus = asyncio.run(main())
    after_run = servers()
    cpus_after = sorted({cpu for pid in after_run for cpu in os.sched_getaffinity(pid)})
    print("BEFORE", started_before_torch, "AFTER_IMPORT", after_import, "AFTER_RUN", after_run,
          "STEPS", steps, "TORCH_SERVER", torch_server, "SERVER_CPUS", server_cpus, "WORKER_CPUS", worker_cpus,
          "SERVER_CPUS_AFTER", cpus_after)
    """
)


def _probe(**env: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env})  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    words = out.stdout.split()
    keys = [
        "BEFORE",
        "AFTER_IMPORT",
        "AFTER_RUN",
        "STEPS",
        "TORCH_SERVER",
        "SERVER_CPUS",
        "WORKER_CPUS",
        "SERVER_CPUS_AFTER",
    ]
    marks = [words.index(key) for key in keys] + [len(words)]
    return {key: eval(" ".join(words[a + 1 : b])) for key, a, b in zip(keys, marks, marks[1:], strict=False)}


def test_the_import_starts_a_torch_server_that_torch_workers_use_and_a_spare() -> None:
    out = _probe()
    assert out["BEFORE"] is False  # its own import of the algorithms started none
    assert len(out["AFTER_IMPORT"]) == 2 and out["TORCH_SERVER"] in out["AFTER_IMPORT"]  # type: ignore[arg-type, operator]
    assert out["AFTER_RUN"] == [out["TORCH_SERVER"]]  # the worker forked from it; the spare is gone
    assert out["STEPS"] == 64


def test_workers_without_torch_are_forked_from_the_spare_and_the_torch_server_is_gone() -> None:
    """PG's numpy workers: the config drops the early server (which imports torch) for the
    spare, which does not; one server left, the one the workers were forked from."""
    out = _probe(PROBE_INFERENCE="auto")
    assert len(out["AFTER_IMPORT"]) == 2  # type: ignore[arg-type]
    (spare,) = set(out["AFTER_IMPORT"]) - {out["TORCH_SERVER"]}  # type: ignore[call-overload]
    assert out["AFTER_RUN"] == [spare]
    assert out["STEPS"] == 64


def test_the_early_start_can_be_turned_off() -> None:
    out = _probe(ASYNCFLOW_EARLY_FORK_SERVER="0")
    assert out["AFTER_IMPORT"] == []  # nothing until the first runtime
    assert len(out["AFTER_RUN"]) == 1  # type: ignore[arg-type]


def test_on_few_cpus_the_servers_import_on_one_and_the_workers_take_the_drivers_back() -> None:
    """Where CPUs are few the early servers import on the last one, leaving the driver a
    core for its own import of torch; each actor runs on the driver's CPUs, and the
    server left has them back once warm (what it forks later is not held to one)."""
    driver = sorted(os.sched_getaffinity(0))
    for inference in ("torch", "auto"):  # forked from the torch server, and from the spare
        out = _probe(PROBE_INFERENCE=inference)
        if len(driver) <= SHARED_CORE_MAX_CPUS:
            assert out["SERVER_CPUS"] == [driver[-1]]  # read as they start: torch takes them a second
        else:
            assert out["SERVER_CPUS"] == driver
        assert out["WORKER_CPUS"] == driver
        assert out["SERVER_CPUS_AFTER"] == driver


_BY_HAND = _SERVERS + textwrap.dedent(
    """
    import asyncio
    import asyncflow
    from asyncflow.rl import RolloutWorker  # the RL layer only: no asyncflow.algorithms, no early server

    async def main():
        async with asyncflow.open_runtime() as rt:
            worker = await rt.spawn(RolloutWorker, "CartPole-v1", num_envs=1, rollout_fragment_length=8)
            assert len(await worker.call(RolloutWorker.sample)) == 8
            print("SERVERS", servers(cmdlines=True))

    asyncio.run(main())
    """
)


def test_a_runtime_opened_by_hand_for_rl_workers_preloads_what_they_import() -> None:
    """``import asyncflow.rl`` tells the actor layer what RL actors need: a runtime opened by
    hand (as the sampling benchmark does) forks its workers from a server that has torch,
    gymnasium and the algorithms' modules imported, not bare ones that import them each
    (which took 3-4 s per spawn instead of 1.6 s)."""
    out = subprocess.run([sys.executable, "-c", _BY_HAND], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("SERVERS")]
    (server,) = eval(line.removeprefix("SERVERS"))
    for module in ("torch", "gymnasium", "asyncflow.algorithms"):
        assert f"'{module}'" in server, server
