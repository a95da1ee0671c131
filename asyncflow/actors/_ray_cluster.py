"""Which Ray instance the ``ray`` backend uses, and who shuts it down.

``address=None`` starts a local Ray for the runtimes of this process (no
dashboard), unless Ray is already initialized here, in which case the runtime
joins it. An ``address`` attaches to a running cluster (``"auto"``, or
``HOST:PORT`` of its head). When the last runtime using it closes, a Ray
that a runtime started is shut down, and from a cluster that a runtime
attached to this process disconnects (the cluster runs on). A Ray that was
initialized here before is left as it was.

A local Ray listens on every interface (Ray 2.60's gRPC servers bind ``::`` whatever
node address is asked for); Ray's token authentication, on by default for local
instances since Ray 2.59, is what keeps other machines out.
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
_initialized_here = False  # one of them called ray.init (and so calls ray.shutdown)


def attach(address: str | None, init_options: Mapping[str, Any] | None) -> None:
    """Make sure Ray is initialized for one more runtime."""
    global _users, _initialized_here
    ray = import_ray()
    if not ray.is_initialized():
        if address is None:
            options = {"include_dashboard": False, **(init_options or {})}
            ray.init(address="local", **options)
        else:
            _probe(address)
            try:
                ray.init(address=address, **(init_options or {}))
            except ConnectionError as exc:
                raise ConfigError(f"no Ray cluster at address={address!r}: {exc}") from exc
        _initialized_here = True
    _users += 1


def detach() -> None:
    """One runtime fewer; the last one undoes the ``ray.init`` a runtime made."""
    global _users, _initialized_here
    _users = max(_users - 1, 0)
    if _users == 0 and _initialized_here:
        _initialized_here = False
        import_ray().shutdown()


def share(value: Any) -> Any:
    """Put ``value`` in Ray's object store once; the reference goes to every actor."""
    return import_ray().put(value)


def check_feasible(name: str, num_cpus: float, num_gpus: float, count: int = 1) -> None:
    """Actors that the cluster can never hold are a ``ConfigError``, not a wait forever:
    one that no node fits, or ``count`` of them beyond the cluster's total."""
    if not num_cpus and not num_gpus:
        return
    nodes = [n["Resources"] for n in import_ray().nodes() if n.get("Alive")]
    total_cpus = sum(r.get("CPU", 0) for r in nodes)
    total_gpus = sum(r.get("GPU", 0) for r in nodes)
    fits_a_node = any(r.get("CPU", 0) >= num_cpus and r.get("GPU", 0) >= num_gpus for r in nodes)
    if fits_a_node and count * num_cpus <= total_cpus + 1e-9 and count * num_gpus <= total_gpus + 1e-9:
        return
    what = f"{count} actors" if count > 1 else f"actor {name!r}"
    raise ConfigError(
        f"{what} asking Ray for num_cpus={num_cpus:g}, num_gpus={num_gpus:g} each would never all start: "
        f"the cluster has {total_cpus:g} CPUs and {total_gpus:g} GPUs in {len(nodes)} node(s) "
        "(lower num_cpus_per_worker or num_gpus_per_worker, or add nodes)"
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
