"""How a run maps a multi-agent env's agents to policies (RLlib's ``multi_agent()``).

``MultiAgent(policies={"shared": PolicySpec()}, policy_mapping=lambda agent_id, episode: "shared")``
on any algorithm's config trains one learner per policy: one policy for every agent (shared
parameters), one per agent, or any grouping. ``policy_mapping(agent_id)`` or
``policy_mapping(agent_id, episode_id)`` is asked again at each episode's start, so that a
policy may play either side of a game from one episode to the next (self-play).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from ..errors import ConfigError

__all__ = ["MultiAgent", "PolicySpec"]


@dataclass(frozen=True)
class PolicySpec:
    """One policy of a multi-agent run."""

    config: Mapping[str, Any] = field(default_factory=dict)
    """This policy's own config fields over the run's: ``{"lr": 1e-3, "model.hidden": (32,)}``
    (the names ``replace`` takes: shorthands, dotted paths)."""
    observation_space: gym.Space[Any] | None = None
    """Its spaces, where no agent maps to it at the first episodes (else its agents')."""
    action_space: gym.Space[Any] | None = None


@dataclass(frozen=True)
class MultiAgent:
    """The policies of a multi-agent run and which agent each acts for."""

    policies: Mapping[str, PolicySpec]
    """Policy id -> its spec."""
    policy_mapping: Callable[..., str]
    """``(agent_id)`` or ``(agent_id, episode_id)`` -> a policy id, asked at each episode's start
    (sent to the workers: a module-level function, where the run is to be checkpointed)."""
    policies_to_train: tuple[str, ...] | None = None
    """The policies that learn (None: all); the others act with the weights they have."""

    def __post_init__(self) -> None:
        if not isinstance(self.policies, Mapping) or not self.policies:
            raise ConfigError("multi_agent.policies: expected a mapping of one or more policy ids to PolicySpecs")
        for pid, spec in self.policies.items():
            if not isinstance(pid, str) or not pid or "/" in pid:
                raise ConfigError(f"multi_agent.policies: a policy id is a non-empty string without '/', got {pid!r}")
            if not isinstance(spec, PolicySpec):
                raise ConfigError(f"multi_agent.policies[{pid!r}]: expected a PolicySpec, got {type(spec).__name__}")
            if (spec.observation_space is None) != (spec.action_space is None):
                raise ConfigError(f"multi_agent.policies[{pid!r}]: give both spaces or neither")
        if not callable(self.policy_mapping):
            raise ConfigError(f"multi_agent.policy_mapping: expected a callable, got {self.policy_mapping!r}")
        if self.policies_to_train is not None:
            unknown = sorted(set(self.policies_to_train) - set(self.policies))
            if unknown or not self.policies_to_train:
                raise ConfigError(f"multi_agent.policies_to_train: expected some of {sorted(self.policies)}, "
                                  f"got {list(self.policies_to_train)}")  # fmt: skip

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> MultiAgent:
        """A ``MultiAgent`` from plain values (a config file's, a checkpoint's): each policy a
        ``PolicySpec`` or the mapping of its fields, the mapping a callable or ``"module:function"``
        (code: the config names it)."""
        unknown = sorted(set(value) - {"policies", "policy_mapping", "policies_to_train"})
        if unknown or "policies" not in value or "policy_mapping" not in value:
            raise ConfigError(f"multi_agent: expected the fields policies, policy_mapping and (optional) "
                              f"policies_to_train, got {sorted(value)}")  # fmt: skip
        policies = value["policies"]
        if not isinstance(policies, Mapping):
            raise ConfigError(f"multi_agent.policies: expected a mapping of policy ids, got {policies!r}")
        specs = {}
        for pid, spec in policies.items():
            if isinstance(spec, Mapping):
                extra = sorted(set(spec) - {"config", "observation_space", "action_space"})
                if extra:
                    raise ConfigError(f"multi_agent.policies[{pid!r}]: unknown fields {extra}")
                spec = PolicySpec(**spec)
            specs[pid] = spec
        mapping = value["policy_mapping"]
        if isinstance(mapping, str):
            from .envs.make import import_attribute

            mapping = import_attribute(mapping, "multi_agent.policy_mapping")
        trained = value.get("policies_to_train")
        return cls(specs, mapping, None if trained is None else tuple(trained))

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain mappings (``from_dict`` takes them back)."""
        return {
            "policies": {pid: {"config": dict(spec.config), "observation_space": spec.observation_space,
                               "action_space": spec.action_space} for pid, spec in self.policies.items()},
            "policy_mapping": self.policy_mapping,
            "policies_to_train": self.policies_to_train,
        }  # fmt: skip

    @property
    def trained(self) -> tuple[str, ...]:
        """The ids of the policies that learn, in ``policies``' order."""
        keep = set(self.policies if self.policies_to_train is None else self.policies_to_train)
        return tuple(pid for pid in self.policies if pid in keep)
