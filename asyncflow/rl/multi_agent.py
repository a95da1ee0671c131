"""How a run maps a multi-agent env's agents to policies (RLlib's ``multi_agent()``).

``MultiAgent(policies={"shared": PolicySpec()}, policy_mapping=lambda agent_id, episode: "shared")``
on any algorithm's config trains one learner per policy: one policy for every agent (shared
parameters), one per agent, or any grouping. ``policy_mapping(agent_id)`` or
``policy_mapping(agent_id, episode_id)`` is asked again at each episode's start, so that a
policy may play either side of a game from one episode to the next (self-play).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from ..errors import ConfigError

__all__ = ["League", "MultiAgent", "PolicySpec", "main_side", "own_policy", "shared_policy"]

SAMPLING = ("uniform", "pfsp")


@dataclass(frozen=True)
class PolicySpec:
    """One policy of a multi-agent run."""

    config: Mapping[str, Any] = field(default_factory=dict)
    """This policy's own config fields over the run's: ``{"lr": 1e-3, "model.hidden": (32,)}``
    (the names ``replace`` takes: shorthands, dotted paths)."""
    observation_space: gym.Space[Any] | None = None
    """Its spaces, where no agent maps to it at the first episodes (else its agents')."""
    action_space: gym.Space[Any] | None = None
    algorithm: str | None = None
    """Another algorithm trains this policy (its name: ``"dqn"``), with that algorithm's config:
    the run's env, rollouts, evaluation, ``gamma`` and ``seed``, and ``config`` over it (None:
    the run's algorithm and config)."""


@dataclass(frozen=True)
class League:
    """Self-play against a league of the learning policy's frozen past selves.

    The learning policy (``"main"``) plays one side of each game, a snapshot of itself (as the
    ``"opponent"`` policy) the other. A snapshot of ``main`` joins the league every
    ``snapshot_every`` iterations, or once ``main`` wins ``win_rate_threshold`` of its latest
    ``window`` games against the current opponent; after each snapshot the next opponent is
    drawn: uniformly, or by prioritized fictitious self-play (``"pfsp"``: in proportion to
    ``(1 - main's win rate against it) ** 2``, Vinyals et al. 2019, so that the snapshots it
    beats least come most often). A game's outcome is the sign of ``main``'s return in it.

    ``players`` are fixed opponents beside the snapshots: functions ``(observation, rng) ->
    action`` of one observation (with its action mask) that return a legal action, such as
    ``rl.envs.two_player.connect_four_lookahead``. They stay in the league for good, are drawn
    and rated as the snapshots are, and give ``main`` the opponents its own past selves may
    never be (a player that always takes a win and blocks one)."""

    snapshot_every: int | None = 10
    """Iterations between two snapshots (None: only on the win rate)."""
    win_rate_threshold: float | None = 0.8
    """``main``'s win rate over ``window`` games against the current opponent that adds a
    snapshot (None: only on the schedule)."""
    window: int = 100
    """Games the win rate covers."""
    sampling: str = "pfsp"
    """How the next opponent is drawn: ``"uniform"`` or ``"pfsp"``."""
    max_snapshots: int = 50
    """The league's size: the oldest snapshot but the first leaves when one more joins."""
    players: tuple[Callable[[Any, Any], int], ...] = ()
    """Fixed opponents (above); in a config file ``"module:function"`` names, code to import."""
    player_share: float | None = None
    """The chance that the next opponent is drawn among the fixed players (the rest: among the
    snapshots), each drawn as ``sampling`` says. None: players and snapshots are one pool."""

    def __post_init__(self) -> None:
        if self.snapshot_every is None and self.win_rate_threshold is None:
            raise ConfigError("league: give snapshot_every, win_rate_threshold or both")
        if self.snapshot_every is not None and self.snapshot_every < 1:
            raise ConfigError(f"league.snapshot_every: must be >= 1, got {self.snapshot_every}")
        if self.win_rate_threshold is not None and not 0 < self.win_rate_threshold <= 1:
            raise ConfigError(f"league.win_rate_threshold: must be in (0, 1], got {self.win_rate_threshold}")
        if self.window < 1 or self.max_snapshots < 2:
            raise ConfigError(f"league: window must be >= 1 and max_snapshots >= 2, got {self.window}, "
                              f"{self.max_snapshots}")  # fmt: skip
        if self.sampling not in SAMPLING:
            raise ConfigError(f"league.sampling: must be 'uniform' or 'pfsp', got {self.sampling!r}")
        if isinstance(self.players, str | Callable) or not all(callable(p) for p in self.players):
            raise ConfigError(f"league.players: expected a sequence of functions (observation, rng) -> action, "
                              f"got {self.players!r}")  # fmt: skip
        object.__setattr__(self, "players", tuple(self.players))
        if self.player_share is not None and (not self.players or not 0 <= self.player_share <= 1):
            raise ConfigError(f"league.player_share: a chance in [0, 1] with fixed players, got {self.player_share} "
                              f"with {len(self.players)} players")  # fmt: skip


def shared_policy(agent: str) -> str:
    """Every agent acts with one policy, ``"shared"`` (``MultiAgent.shared``)."""
    return "shared"


def own_policy(agent: str) -> str:
    """Each agent acts with a policy of its own, named as the agent (``MultiAgent.per_agent``)."""
    return agent


def main_side(agent: str, episode: int, agents: tuple[str, ...] = ("player_0", "player_1")) -> str:
    """Self-play's mapping: ``main`` plays ``agents[episode % len(agents)]``, a snapshot the rest."""
    return "main" if agent == agents[episode % len(agents)] else "opponent"


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
    league: League | None = None
    """Self-play (``MultiAgent.self_play``): ``main`` learns against snapshots of itself."""

    @classmethod
    def shared(cls, **config: Any) -> MultiAgent:
        """One policy, ``"shared"``, for every agent (``config``: its own fields)."""
        return cls({"shared": PolicySpec(config=config)}, shared_policy)

    @classmethod
    def per_agent(cls, agents: Sequence[str], **config: Any) -> MultiAgent:
        """A policy of its own for each agent, named as the agent."""
        return cls({agent: PolicySpec(config=config) for agent in agents}, own_policy)

    @classmethod
    def self_play(cls, agents: Sequence[str], league: League | None = None, **config: Any) -> MultiAgent:
        """``main`` learns, taking each side of the game (``agents``, in turn order) in turn
        from one episode to the next; ``opponent`` plays the others with a snapshot from the
        league; ``config`` is ``main``'s own fields (``PolicySpec.config``)."""
        if len(agents) < 2:
            raise ConfigError(f"self_play: a game of two or more agents, got {list(agents)}")
        mapping = functools.partial(main_side, agents=tuple(agents))
        return cls({"main": PolicySpec(config=config), "opponent": PolicySpec(config=config)}, mapping, ("main",),
                   league or League())  # fmt: skip

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
        if self.league is not None:
            if not isinstance(self.league, League):
                raise ConfigError(f"multi_agent.league: expected a League, got {type(self.league).__name__}")
            if set(self.policies) != {"main", "opponent"} or self.trained != ("main",):
                raise ConfigError("multi_agent.league: self-play trains policy 'main' against 'opponent' "
                                  "(MultiAgent.self_play builds both)")  # fmt: skip
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
        unknown = sorted(set(value) - {"policies", "policy_mapping", "policies_to_train", "league"})
        if unknown or "policies" not in value or "policy_mapping" not in value:
            raise ConfigError(f"multi_agent: expected the fields policies, policy_mapping and (optional) "
                              f"policies_to_train, got {sorted(value)}")  # fmt: skip
        policies = value["policies"]
        if not isinstance(policies, Mapping):
            raise ConfigError(f"multi_agent.policies: expected a mapping of policy ids, got {policies!r}")
        specs = {}
        for pid, spec in policies.items():
            if isinstance(spec, Mapping):
                extra = sorted(set(spec) - {"config", "observation_space", "action_space", "algorithm"})
                if extra:
                    raise ConfigError(f"multi_agent.policies[{pid!r}]: unknown fields {extra}")
                spec = PolicySpec(**spec)
            specs[pid] = spec
        mapping = value["policy_mapping"]
        if isinstance(mapping, str):
            from .envs.make import import_attribute

            mapping = import_attribute(mapping, "multi_agent.policy_mapping")
        trained = value.get("policies_to_train")
        league = value.get("league")
        if isinstance(league, Mapping):
            from .envs.make import import_attribute

            players = tuple(import_attribute(p, "multi_agent.league.players") if isinstance(p, str) else p
                            for p in league.get("players", ()))  # fmt: skip
            league = League(**{**league, "players": players})
        return cls(specs, mapping, None if trained is None else tuple(trained), league)

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain mappings (``from_dict`` takes them back)."""
        return {
            "policies": {pid: {"config": dict(spec.config), "observation_space": spec.observation_space,
                               "action_space": spec.action_space, "algorithm": spec.algorithm}
                         for pid, spec in self.policies.items()},
            "policy_mapping": self.policy_mapping,
            "policies_to_train": self.policies_to_train,
            "league": None if self.league is None else dataclasses.asdict(self.league),
        }  # fmt: skip

    @property
    def trained(self) -> tuple[str, ...]:
        """The ids of the policies that learn, in ``policies``' order."""
        keep = set(self.policies if self.policies_to_train is None else self.policies_to_train)
        return tuple(pid for pid in self.policies if pid in keep)
