"""One BLAS thread in an actor whose numpy was imported before it could be told.

An actor process comes from the fork server, which imported numpy (and with
it OpenBLAS) long before the actor set ``OPENBLAS_NUM_THREADS``. OpenBLAS reads
that variable once, when it loads, so every actor kept the fork server's
thread count (one per core): a 64x64 float32 matmul then runs on two
threads, and the helper thread spins on the other core between calls. On
the 2-core VM, inside an actor, 20,000 such matmuls took 14.2-15.3 us each
with two threads and 10.3-11.8 us with one (3 runs each, 2026-12-04), and
the spinning thread takes a core from the other worker.

So ``limit_blas_threads`` calls OpenBLAS's own ``set_num_threads`` in every
OpenBLAS this process has loaded (numpy's wheels bundle one under a prefixed
name, ``scipy_openblas_set_num_threads64_``), found through
``/proc/self/maps`` as threadpoolctl finds them. Elsewhere (no ``/proc``, or
another BLAS: macOS's Accelerate, MKL) it does nothing; torch's own pool is
set by ``torch.set_num_threads``.
"""

from __future__ import annotations

import ctypes
import re

__all__ = ["limit_blas_threads", "loaded_openblas"]

_SETTERS = (
    "openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
)
"""The names OpenBLAS builds export it under: plain, 64-bit interface, numpy's prefixed builds."""


def loaded_openblas() -> list[ctypes.CDLL]:
    """Every OpenBLAS this process has loaded (none where there is no ``/proc``)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", maps.read())))
    except OSError:
        return []
    libraries = []
    for path in paths:
        try:
            libraries.append(ctypes.CDLL(path))
        except OSError:
            continue
    return libraries


def limit_blas_threads(threads: int) -> int:
    """Set every loaded OpenBLAS to ``threads`` threads; how many libraries were set."""
    done = 0
    for lib in loaded_openblas():
        for name in _SETTERS:
            setter = getattr(lib, name, None)
            if setter is not None:
                setter(ctypes.c_int(threads))
                done += 1
                break
    return done
