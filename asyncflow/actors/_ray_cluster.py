"""Which Ray instance the ``ray`` backend uses, and who shuts it down.

``address=None`` starts a local Ray for the runtimes of this process (no
dashboard), unless Ray is already initialized here, in which case the runtime
joins it. An ``address`` attaches to a running cluster (``"auto"``, or
``HOST:PORT`` of its head). A Ray that a runtime started is shut down when the
last runtime using it closes; one it attached to is left running.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ._ray import import_ray

__all__ = ["attach", "check_feasible", "detach", "share"]

PROBE_TIMEOUT_S = 3.0

_users = 0  # open runtimes of this process on Ray
_started_here = False  # one of them started the instance


def attach(address: str | None, init_options: Mapping[str, Any] | None) -> None:
    """Make sure Ray is initialized for one more runtime."""
    global _users, _started_here
    ray = import_ray()
    if not ray.is_initialized():
        if address is None:
            options = {"include_dashboard": False, **(init_options or {})}
            ray.init(address="local", **options)
            _started_here = True
        else:
            _probe(address)
            try:
                ray.init(address=address, **(init_options or {}))
            except ConnectionError as exc:
                raise ConfigError(f"no Ray cluster at address={address!r}: {exc}") from exc
            _started_here = False
    _users += 1


def detach() -> None:
    """One runtime fewer; the last one shuts down a Ray that a runtime started."""
    global _users, _started_here
    _users = max(_users - 1, 0)
    if _users == 0 and _started_here:
        _started_here = False
        import_ray().shutdown()


def share(value: Any) -> Any:
    """Put ``value`` in Ray's object store once; the reference goes to every actor."""
    return import_ray().put(value)


def check_feasible(name: str, num_cpus: float, num_gpus: float) -> None:
    """An actor that no node of the cluster can hold is a ``ConfigError``, not a wait forever."""
    if not num_cpus and not num_gpus:
        return
    nodes = [n["Resources"] for n in import_ray().nodes() if n.get("Alive")]
    if any(r.get("CPU", 0) >= num_cpus and r.get("GPU", 0) >= num_gpus for r in nodes):
        return
    largest: dict[str, float] = max(nodes, key=lambda r: (r.get("GPU", 0), r.get("CPU", 0)), default={})
    raise ConfigError(
        f"actor {name!r} asks Ray for num_cpus={num_cpus:g}, num_gpus={num_gpus:g}, which no node of "
        f"the cluster has (the largest: {largest.get('CPU', 0):g} CPUs, {largest.get('GPU', 0):g} GPUs)"
    )


def _probe(address: str) -> None:
    """A head that does not answer is an error within seconds (``ray.init`` retries for a minute)."""
    target = address.removeprefix("ray://")
    if target == "auto":
        target = os.environ.get("RAY_ADDRESS", "auto").removeprefix("ray://")
        if target == "auto":
            return  # Ray finds the local head itself, and says so at once when there is none
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"address must be 'auto' or HOST:PORT of a Ray head, not {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ConfigError(
            f"no Ray cluster answers at address={address!r} within {PROBE_TIMEOUT_S:g} s ({exc}); "
            "start one with 'ray start --head', or leave address unset to start a local Ray"
        ) from exc
