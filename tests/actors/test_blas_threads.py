"""An actor's numpy runs one BLAS thread (the runtime's ``torch_threads``), although the
fork server imported numpy before the actor could set ``OPENBLAS_NUM_THREADS``."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow
from asyncflow.actors._blas import limit_blas_threads, loaded_openblas

_GETTERS = ("openblas_get_num_threads", "openblas_get_num_threads64_", "scipy_openblas_get_num_threads64_",
            "scipy_openblas_get_num_threads")  # fmt: skip


def openblas_threads() -> list[int]:
    """The thread count of each OpenBLAS loaded in this process, asked of the library itself."""
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy's BLAS is loaded with numpy; this makes sure it ran
    return [int(next(getattr(lib, name) for name in _GETTERS if hasattr(lib, name))()) for lib in loaded_openblas()]


class BlasReporter:
    def threads(self) -> list[int]:
        return openblas_threads()


@pytest.fixture
def driver_threads() -> list[int]:
    counts = openblas_threads()
    if not counts:
        pytest.skip("numpy here is not built on OpenBLAS")
    return counts


async def test_actors_run_numpy_on_the_runtimes_thread_count(driver_threads: list[int]) -> None:
    """1 (the default) and 2: whatever count the fork server's OpenBLAS started with (one per
    core, or what the environment said when it started), one of the two changed it."""
    for threads in (1, 2):
        async with asyncflow.open_runtime(torch_threads=threads) as rt:
            actor = await rt.spawn(BlasReporter)
            assert await actor.threads() == [threads] * len(driver_threads)


def test_limit_blas_threads_sets_every_loaded_openblas(driver_threads: list[int]) -> None:
    try:
        assert limit_blas_threads(1) == len(driver_threads)
        assert openblas_threads() == [1] * len(driver_threads)
    finally:
        limit_blas_threads(driver_threads[0])
    assert openblas_threads() == driver_threads
