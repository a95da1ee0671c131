"""Population-based training (Jaderberg et al. 2017, arXiv 1711.09846): a population of trainers
in one process, each with its own workers, learner and values of the fields being searched.

    asyncflow pbt ppo --env CartPole-v1 --population 4 --interval 4 \\
        --mutate "lr=loguniform(1e-5,1e-2)" --stop-timesteps 200000

Every member trains ``interval`` iterations (the members side by side on one event loop); then
the members are ranked by their metric, and each in the bottom ``quantile`` *exploits* one of the
top ``quantile``, drawn at random: it takes that member's learner state (weights, optimizer
state; not its random generators) and its values; then it *explores*: each value is drawn anew
from its range with probability ``resample_probability``, or else multiplied by one of
``factors`` (kept inside the range). The member goes on training with them
(``Algorithm.change_config``), its own workers, environments and counters. Every change is one
``Exploit`` event. The fields that can change are ``lr`` and those the algorithm lists as live
(``Recipe.live_fields``: the loss coefficients and batch sizes of PG, A2C, PPO and IMPALA, PPO's
epochs).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .algorithms import Algorithm, AlgorithmConfig
from .algorithms._recipe import one_learner
from .errors import ConfigError
from .experiment import CSV_FIELDS, csv_row
from .rl.data.state import get_state, set_state
from .search_space import Dimension, parse_space

__all__ = ["Exploit", "Member", "PopulationBasedTraining"]


@dataclass
class Member:
    """One trainer of the population: its algorithm, its current values of the searched fields
    and its latest result."""

    index: int
    algo: Algorithm
    values: dict[str, Any]
    result: dict[str, Any] | None = None
    exploits: int = 0
    """How many times it took another member's state."""

    def score(self, metric: str) -> float:
        """Its latest value of ``metric`` (minus infinity before it has one: ranked last)."""
        value = csv_row(self.result).get(metric) if self.result is not None else None
        return float(value) if isinstance(value, int | float) and math.isfinite(value) else -math.inf


@dataclass(frozen=True)
class Exploit:
    """A member that took a better member's state and values, and the values it explored from them."""

    round: int
    member: int
    donor: int
    score: float
    donor_score: float
    before: dict[str, Any] = field(default_factory=dict)
    """Its values before (its own)."""
    after: dict[str, Any] = field(default_factory=dict)
    """Its values after: the donor's, explored."""


_RNG_KINDS = ("torch_rng", "numpy_rng")  # a member keeps its own random streams


class PopulationBasedTraining:
    """A population of ``algorithm`` trainers on ``config``, searching the fields of ``mutations``
    (``"lr=loguniform(1e-5,1e-2)"`` or ``Dimension`` s).

    Member ``i`` runs with seed ``config.seed + i`` and starts from the values ``initial[i]``
    names, the others drawn from their ranges. Use it as ``async with`` and iterate ``train()``:
    one mapping per round. Everything is checked here, before any process starts: each field is
    one the algorithm can change while training, and takes its whole range.
    """

    def __init__(
        self,
        algorithm: type[Algorithm],
        config: AlgorithmConfig,
        mutations: Sequence[str | Dimension],
        *,
        population: int = 4,
        interval: int = 5,
        quantile: float = 0.25,
        resample_probability: float = 0.25,
        factors: tuple[float, float] = (0.8, 1.2),
        metric: str = "episode_return_mean",
        initial: Sequence[Mapping[str, Any]] | None = None,
        seed: int = 0,
    ) -> None:
        if population < 2:
            raise ConfigError(f"population must be at least 2, not {population}")
        if interval < 1:
            raise ConfigError(f"interval must be >= 1 iteration, not {interval}")
        if not 0 < quantile <= 0.5:
            raise ConfigError(f"quantile must be in (0, 0.5], not {quantile}")
        if not 0 <= resample_probability <= 1:
            raise ConfigError(f"resample_probability must be in [0, 1], not {resample_probability}")
        if len(factors) != 2 or not all(f > 0 for f in factors):
            raise ConfigError(f"factors must be two positive numbers, not {factors}")
        if metric not in CSV_FIELDS:
            raise ConfigError(f"metric: no run reports {metric!r}; use a progress.csv column: " + ", ".join(CSV_FIELDS))
        if initial is not None and len(initial) != population:
            raise ConfigError(f"initial: one mapping per member ({population}), not {len(initial)}")
        self.dimensions = [m if isinstance(m, Dimension) else parse_space([m])[0] for m in mutations]
        if not self.dimensions:
            raise ConfigError("population-based training needs at least one field to search (mutations)")
        if len({d.name for d in self.dimensions}) != len(self.dimensions):
            raise ConfigError("mutations: a field is given twice")
        if algorithm.recipe.learners is not one_learner:
            raise ConfigError(f"{algorithm.name} trains several learners; population-based training copies one")
        if config.environment.normalize_observations:
            raise ConfigError("population-based training copies learners between members, not their observation "
                              "statistics: set normalize_observations=False")  # fmt: skip
        if metric.startswith("evaluation/") and config.evaluation.interval is None:
            raise ConfigError(f"metric {metric} needs evaluation during training (evaluation_interval=N)")
        probe = algorithm(config)  # the env and the model, checked in this process
        for dim in self.dimensions:
            for value in dim.args:
                probe.live_changes(**{dim.name: value})  # a field it can change, in range
        self.rng = np.random.default_rng(seed)
        self.interval, self.quantile, self.metric = interval, quantile, metric
        self.resample_probability, self.factors = resample_probability, factors
        self.members: list[Member] = []
        for i in range(population):
            given = dict(initial[i]) if initial is not None else {}
            if unknown := sorted(set(given) - {d.name for d in self.dimensions}):
                raise ConfigError(f"initial[{i}]: {unknown[0]} is not a field being searched")
            values = {d.name: given[d.name] if d.name in given else d.sample(self.rng) for d in self.dimensions}
            member_config = config.replace(seed=config.seed + i, **values)
            self.members.append(Member(i, algorithm(member_config), values))
        self.round = 0
        self.events: list[Exploit] = []
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> PopulationBasedTraining:
        try:
            for member in self.members:
                await self._stack.enter_async_context(member.algo)
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    async def train(
        self, on_result: Callable[[Member, dict[str, Any]], None] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """One mapping per round, for as long as you iterate: ``round``, each member's
        ``index``, ``score``, ``values`` and ``env_steps``, this round's ``exploits`` and the
        ``best`` member's index. ``on_result`` hears of each member's every iteration."""
        while True:
            self.round += 1
            async with asyncio.TaskGroup() as group:
                for member in self.members:
                    group.create_task(self._advance(member, on_result))
            exploits = await self._exploit_and_explore()
            self.events += exploits
            best = max(self.members, key=lambda m: m.score(self.metric))
            yield {"round": self.round, "members": [self._summary(m) for m in self.members], "exploits": exploits,
                   "best": best.index}  # fmt: skip

    def _summary(self, member: Member) -> dict[str, Any]:
        steps = (member.result or {}).get("num_env_steps_sampled", 0)
        return {"index": member.index, "score": member.score(self.metric), "values": dict(member.values),
                "env_steps": steps}  # fmt: skip

    async def _advance(self, member: Member, on_result: Callable[[Member, dict[str, Any]], None] | None) -> None:
        done = 0
        async for result in member.algo.train():
            result["pbt"] = {"member": member.index, "round": self.round, **member.values}
            member.result = result
            if on_result is not None:
                on_result(member, result)
            done += 1
            if done == self.interval:
                return

    async def _exploit_and_explore(self) -> list[Exploit]:
        ranked = sorted(self.members, key=lambda m: m.score(self.metric))
        n = max(1, math.ceil(self.quantile * len(ranked)))
        bottom, top = ranked[:n], ranked[-n:]
        events = []
        for member in bottom:
            donor = top[int(self.rng.integers(len(top)))]
            if donor is member or donor.score(self.metric) <= member.score(self.metric):
                continue  # a tie at the bottom: nothing better to take
            state = await donor.algo.ctx.learner_thread.run(get_state, donor.algo.learner)
            state = {name: kept for name, kept in state.items() if kept[0] not in _RNG_KINDS}
            await member.algo.ctx.learner_thread.run(set_state, member.algo.learner, state)
            explored = self._explore(donor.values)
            await member.algo.change_config(**explored)  # the optimizers take the explored lr, not the donor's
            events.append(Exploit(self.round, member.index, donor.index, member.score(self.metric),
                                  donor.score(self.metric), dict(member.values), dict(explored)))  # fmt: skip
            member.values = explored
            member.exploits += 1
        return events

    def _explore(self, values: Mapping[str, Any]) -> dict[str, Any]:
        out = {}
        for dim in self.dimensions:
            if self.rng.random() < self.resample_probability:
                out[dim.name] = dim.sample(self.rng)
            elif dim.kind == "choice":
                out[dim.name] = values[dim.name]
            else:
                out[dim.name] = dim.clip(values[dim.name] * self.factors[int(self.rng.integers(2))])
        return out
