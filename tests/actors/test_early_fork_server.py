"""``import asyncflow.algorithms`` starts the fork server before it imports torch, so
that the two imports overlap; the server is one process, used by the first runtime,
and leaves with its driver."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

# Prints, from /proc, the driver's fork servers (children running forkserver's main)
# right after the import, the same after a runtime ran, and the server's pid. The
# workers run torch unless PROBE_INFERENCE says otherwise.
_PROBE = textwrap.dedent(
    """
    import asyncio, os
    import multiprocessing.forkserver as fs

    def servers():
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
                found.append(int(pid))
        return found

    started_before_torch = fs._forkserver._forkserver_pid is not None
    import asyncflow.algorithms
    after_import = servers()
    from asyncflow.algorithms import PG, PGConfig

    async def main():
        async with PG(PGConfig(env="CartPole-v1", num_workers=1, train_batch_size=64,
                               rollout_fragment_length=64, num_envs_per_worker=1,
                               worker_inference=os.environ.get("PROBE_INFERENCE", "torch"))) as algo:
            async for result in algo.train():
                return result["num_env_steps_sampled"]

    steps = asyncio.run(main())
    print("BEFORE", started_before_torch, "AFTER_IMPORT", after_import, "AFTER_RUN", servers(),
          "STEPS", steps)
    """
)


def _probe(**env: str) -> str:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env})  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_the_import_starts_one_fork_server_that_the_first_runtime_uses() -> None:
    out = _probe()
    before, rest = out.split("AFTER_IMPORT ")
    after_import, rest = rest.split(" AFTER_RUN ")
    after_run = rest.split(" STEPS ")[0]
    assert "BEFORE False" in before
    assert len(eval(after_import)) == 1  # one server: its own import of the algorithms started none
    assert eval(after_run) == eval(after_import)  # the runtime forked its worker from that server
    assert "STEPS 64" in out


def test_workers_without_torch_get_one_fork_server_restarted_without_torch() -> None:
    """PG's numpy workers: the config replaces the early server (which imports torch) by one
    that does not; still one server, the one the workers were forked from."""
    out = _probe(PROBE_INFERENCE="auto")
    after_import = out.split("AFTER_IMPORT ")[1].split(" AFTER_RUN ")[0]
    after_run = out.split(" AFTER_RUN ")[1].split(" STEPS ")[0]
    assert len(eval(after_import)) == 1
    assert len(eval(after_run)) == 1 and eval(after_run) != eval(after_import)
    assert "STEPS 64" in out


def test_the_early_start_can_be_turned_off() -> None:
    out = _probe(ASYNCFLOW_EARLY_FORK_SERVER="0")
    after_import = out.split("AFTER_IMPORT ")[1].split(" AFTER_RUN ")[0]
    after_run = out.split(" AFTER_RUN ")[1].split(" STEPS ")[0]
    assert eval(after_import) == []  # nothing until the first runtime
    assert len(eval(after_run)) == 1
