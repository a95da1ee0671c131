"""Recurrent actor-critic policies (``use_lstm``): an LSTM core behind the observation encoder.

In a worker, the policy carries each env's hidden state from step to step, and resets it
when the env starts a new episode (``episodes_ended``). Every row of a sample records the
state the policy acted from (``state_h``, ``state_c``) and whether its episode had just
begun (``seq_start``).

In the learner, a batch is cut into sequences of ``max_seq_len`` rows: a worker's batch
holds each env's steps contiguously, and ``rollout_fragment_length`` is a multiple of
``max_seq_len``, so no sequence mixes two envs and none is cut. Minibatches are whole
sequences, shuffled as sequences. Each sequence is replayed from the state stored at its
first row, with the state set to zero at every episode start inside it (as Sample Factory
does): an episode boundary never needs padding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ...errors import ConfigError
from ..data.sample_batch import SampleBatch
from ..data.tree import Tree
from ..envs.action_mask import masked
from ..learners.precision import to_float32
from ..models import ActionDistribution, ActionHead
from ..models.config import ModelConfig, custom_model
from ..models.encoders import build_encoder
from ..models.nets import mlp
from .actor_critic import ActorCritic, ActorCriticPolicy

__all__ = [
    "SEQ_START",
    "STATE_C",
    "STATE_H",
    "Recurrent",
    "RecurrentActorCritic",
    "RecurrentActorCriticNet",
    "RecurrentPolicy",
    "recurrent_policy",
]

STATE_H, STATE_C, SEQ_START = "state_h", "state_c", "seq_start"


class RecurrentActorCriticNet(nn.Module):
    """encoder -> MLP torso -> ``LSTMCell`` -> policy and value heads."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        hidden: Sequence[int] = (64,),
        lstm_size: int = 64,
        config: ModelConfig | None = None,
    ) -> None:
        super().__init__()
        config = config or ModelConfig()
        self.encoder = build_encoder(observation_space, kind=config.encoder, cnn_filters=config.cnn_filters)
        sizes = [self.encoder.out_dim, *(config.hidden if config.hidden is not None else hidden)]
        layers = [(nn.Linear(a, b), nn.Tanh()) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
        self.torso = nn.Sequential(*(m for pair in layers for m in pair))
        self.lstm = nn.LSTMCell(sizes[-1], lstm_size)
        head = ActionHead(action_space)
        self.gaussian = isinstance(action_space, gym.spaces.Box)
        out = head.action_dim if self.gaussian else head.num_inputs
        if self.gaussian:
            self.log_std = nn.Parameter(torch.zeros(out))
        self.pi = mlp([lstm_size, out], out_gain=0.01)
        self.vf = mlp([lstm_size, 1], out_gain=1.0)
        self.lstm_size = lstm_size

    def _heads(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.pi(h)
        if self.gaussian:
            out = torch.cat([out, self.log_std.expand_as(out)], -1)
        return out, self.vf(h).squeeze(-1)

    def step(
        self, obs: Any, state: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """One time step for a batch of envs: (distribution inputs, values, next state)."""
        h, c = self.lstm(self.torso(self.encoder(obs)), state)
        inputs, values = self._heads(h)
        return inputs, values, (h, c)

    def sequences(
        self, obs: Any, starts: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Replay ``B`` sequences of ``L`` steps (``starts``: ``(B, L)``; ``obs``: ``B * L`` rows in
        sequence order) from ``state`` (``(B, H)`` each), zeroing it at episode starts:
        (distribution inputs, values, the state after each row), all ``B * L`` rows."""
        batch, length = starts.shape
        x = self.torso(self.encoder(obs)).reshape(batch, length, -1)
        h, c = state
        keep = (~starts).to(x.dtype).unsqueeze(-1)
        hs, cs = [], []
        for t in range(length):
            h, c = self.lstm(x[:, t], (h * keep[:, t], c * keep[:, t]))
            hs.append(h)
            cs.append(c)
        h_all, c_all = (torch.stack(v, 1).reshape(batch * length, -1) for v in (hs, cs))
        inputs, values = self._heads(h_all)
        return inputs, values, (h_all, c_all)


class RecurrentActorCritic(ActorCritic):
    """``ac(obs)`` for the losses, over whole sequences: the policy sets what they start from
    (``sequence``). ``next_values(next_obs)`` then gives V of each row's next observation,
    from the state that row ended in (V-trace's bootstrap)."""

    sequence: tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]] | None = None
    _after: tuple[torch.Tensor, torch.Tensor] | None = None

    def __call__(self, obs: Tree) -> tuple[ActionDistribution, torch.Tensor]:
        if self.sequence is None:
            raise RuntimeError("a recurrent model's loss runs over sequences (RecurrentPolicy sets them)")
        starts, state = self.sequence
        net: RecurrentActorCriticNet = self.model  # type: ignore[assignment]
        inputs, values, self._after = net.sequences(obs, starts, state)
        inputs, values = to_float32((inputs, values))
        if self.masked:
            inputs = masked(inputs, obs)
        return self.head.distribution(inputs), values.reshape(-1)

    def next_values(self, next_obs: Tree) -> torch.Tensor:
        """V(next observation) of every row of the last call: one more step from its state."""
        assert self._after is not None, "next_values() follows a call over the same rows"
        net: RecurrentActorCriticNet = self.model  # type: ignore[assignment]
        return to_float32(net.step(next_obs, self._after)[1]).reshape(-1)  # type: ignore[no-any-return]


class Recurrent:
    """Mixed into an actor-critic policy class (``recurrent_policy``): an LSTM core, the state
    carried per env in a worker, sequences in the learner. See the module docstring."""

    net: RecurrentActorCriticNet
    rac: RecurrentActorCritic
    device: torch.device
    tensors: Any
    _generator: torch.Generator

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        lstm_size: int = 64,
        max_seq_len: int = 16,
        hidden: Sequence[int] = (64,),
        model: ModelConfig | None = None,
        **options: Any,
    ) -> None:
        if custom_model(model) is not None:
            raise ConfigError("use_lstm: the LSTM core is built in; it does not take a model of your own")
        self.lstm_size, self.max_seq_len = lstm_size, max_seq_len
        super().__init__(observation_space, action_space, hidden=hidden, model=model, **options)  # type: ignore[call-arg]
        self.state: tuple[torch.Tensor, torch.Tensor] | None = None  # each env's, in a worker
        self.starts: np.ndarray | None = None  # envs whose episode begins at their next step
        self.recorded: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # per step: h, c, starts

    def __reduce__(self) -> tuple[Any, ...]:
        # The class is made at run time (``recurrent_policy``): pickled as its base and the state.
        return _rebuild, (type(self).__bases__[1], self.__dict__)

    def build_network(
        self, model: Any, observation_space: gym.Space[Any], action_space: gym.Space[Any], hidden: Sequence[int]
    ) -> nn.Module:
        self.net = RecurrentActorCriticNet(observation_space, action_space, hidden, self.lstm_size, model)
        return self.net

    def actor_critic(self, model: nn.Module) -> ActorCritic:
        ac = RecurrentActorCritic(model, self.action_space, self.masked)  # type: ignore[attr-defined]
        if model is self.net:
            self.rac = ac
        return ac

    # -- acting, in a worker ---------------------------------------------

    def _rows(self, tensors: Any) -> int:
        return len(next(iter(tensors.values()))) if isinstance(tensors, dict) else len(tensors)

    def _state_for(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.state is None or len(self.state[0]) != n:
            zeros = torch.zeros(n, self.lstm_size, device=self.device)
            self.state, self.starts = (zeros, zeros.clone()), np.ones(n, bool)
        return self.state

    def _inputs(self, inputs: torch.Tensor, tensors: Any) -> torch.Tensor:
        return masked(inputs, tensors) if self.rac.masked else inputs

    @torch.no_grad()
    def compute_actions(self, obs: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tensors = self.tensors(obs)
        state = self._state_for(self._rows(tensors))
        assert self.starts is not None
        self.recorded.append((state[0].cpu().numpy(), state[1].cpu().numpy(), self.starts))
        inputs, values, self.state = self.net.step(tensors, state)
        self.starts = np.zeros(len(self.starts), bool)
        dist = self.rac.head.distribution(self._inputs(inputs, tensors))
        actions = dist.sample(self._generator)
        return actions.cpu().numpy(), dist.log_prob(actions).cpu().numpy(), values.cpu().numpy()

    def episodes_ended(self, lanes: Sequence[int]) -> None:
        """These envs were reset: their next step starts from a zero state."""
        if self.state is not None and len(lanes):
            index = torch.as_tensor(list(lanes), device=self.device)
            self.state[0][index] = 0.0
            self.state[1][index] = 0.0
            assert self.starts is not None
            self.starts[list(lanes)] = True

    def take_columns(self) -> dict[str, np.ndarray]:
        """The recorded states and starts of the steps since the last call, ``(T, envs, ...)``."""
        h, c, starts = (np.stack(column) for column in zip(*self.recorded, strict=True))
        self.recorded = []
        return {STATE_H: h, STATE_C: c, SEQ_START: starts}

    @torch.no_grad()
    def values(self, obs: Tree) -> np.ndarray:
        """V from each env's current state (the bootstrap after a sample); other batches
        (a time limit's final observation) start from a zero state."""
        tensors = self.tensors(obs)
        n = self._rows(tensors)
        state = self.state if self.state is not None and len(self.state[0]) == n else None
        if state is None:
            zeros = torch.zeros(n, self.lstm_size, device=self.device)
            state = (zeros, zeros)
        return self.net.step(tensors, state)[1].cpu().numpy()  # type: ignore[no-any-return]

    @torch.no_grad()
    def greedy_actions(self, obs: Tree) -> np.ndarray:
        """The mode, from the carried state (evaluation calls ``reset_state`` at each episode)."""
        tensors = self.tensors(obs)
        inputs, _, self.state = self.net.step(tensors, self._state_for(self._rows(tensors)))
        return self.rac.head.distribution(self._inputs(inputs, tensors)).mode().cpu().numpy()  # type: ignore[no-any-return]

    def reset_state(self) -> None:
        """Forget every env's state (a new evaluation episode)."""
        self.state = None

    # -- learning --------------------------------------------------------

    def sequences_of(self, tensors: Mapping[str, Any]) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """What the rows' sequences start from: ``(starts (B, L), (h0, c0))``."""
        length = self.max_seq_len
        return tensors[SEQ_START].reshape(-1, length), (tensors[STATE_H][::length], tensors[STATE_C][::length])

    def _loss(self, tensors: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        self.rac.sequence = self.sequences_of(tensors)
        try:
            return super()._loss(tensors)  # type: ignore[misc, no-any-return]
        finally:
            self.rac.sequence = None

    def learn_on_batch(self, batch: SampleBatch, num_epochs: int = 1, minibatch_size: int | None = None,
                       seed: int = 0, shuffle: bool = True) -> dict[str, float]:  # fmt: skip
        """Minibatch SGD over whole sequences (``minibatch_size`` rounded to whole sequences)."""
        length = self.max_seq_len
        if len(batch) % length:
            raise ValueError(f"a recurrent batch holds whole sequences of {length} rows, not {len(batch)} rows")
        size = max(length, (minibatch_size or len(batch)) // length * length)
        target = getattr(self, "target", None)  # APPO's target policy replays the same sequences
        if isinstance(target, RecurrentActorCritic):
            target.sequence = self.sequences_of(self.tensors({k: batch[k] for k in (SEQ_START, STATE_H, STATE_C)}))
        try:
            return super().learn_on_batch(batch, num_epochs, size, seed, shuffle)  # type: ignore[misc, no-any-return]
        finally:
            if isinstance(target, RecurrentActorCritic):
                target.sequence = None

    def order(self, rng: np.random.Generator, n: int, shuffle: bool) -> np.ndarray:
        """Rows by whole sequences, the sequences shuffled."""
        length = self.max_seq_len
        sequences = rng.permutation(n // length) if shuffle else np.arange(n // length)
        return (sequences[:, None] * length + np.arange(length)).reshape(-1)


_classes: dict[type[ActorCriticPolicy], type[ActorCriticPolicy]] = {}


def recurrent_policy(base: type[ActorCriticPolicy]) -> type[ActorCriticPolicy]:
    """``base`` (an actor-critic policy class) with an LSTM core: the class ``use_lstm`` uses."""
    cls = _classes.get(base)
    if cls is None:
        name = f"Recurrent{base.__name__}"
        cls = _classes[base] = type(name, (Recurrent, base), {"__module__": __name__, "__qualname__": name})
    return cls


def _rebuild(base: type[ActorCriticPolicy], state: dict[str, Any]) -> Any:
    cls = recurrent_policy(base)
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj


RecurrentPolicy = recurrent_policy(ActorCriticPolicy)
