"""Our Adam and RMSprop against torch.optim's, step by step."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from asyncflow.rl.learners.optim import Adam, RMSprop, UpdateGuard


def _nets() -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    return model, copy.deepcopy(model)


def _step_each(pairs: Any, x: torch.Tensor) -> None:
    """One step of each (network, optimizer) pair on the loss ``mean(net(x) ** 2)``."""
    for net, opt in pairs:
        opt.zero_grad()
        net(x).pow(2).mean().backward()
        opt.step()


def _assert_same_weights(ours: Any, theirs: Any) -> None:
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_adam_matches_torch() -> None:
    model, twin = _nets()
    ours = Adam(model.parameters(), lr=3e-3, eps=1e-5)
    theirs = torch.optim.Adam(twin.parameters(), lr=3e-3, eps=1e-5)
    x = torch.randn(64, 4)
    start = model[0].weight.detach().clone()
    for _ in range(25):
        _step_each(((model, ours), (twin, theirs)), x)
    _assert_same_weights(model.parameters(), twin.parameters())
    assert (model[0].weight - start).abs().max() > 1e-3  # the weights really moved


@pytest.mark.parametrize("flat", [True, False], ids=["flat buffer", "per tensor"])
def test_rmsprop_matches_torch(flat: bool) -> None:
    model, twin = _nets()
    ours = RMSprop(model.parameters(), lr=7e-4)
    theirs = torch.optim.RMSprop(twin.parameters(), lr=7e-4, alpha=0.99, eps=1e-5)
    x = torch.randn(64, 4)
    start = model[0].weight.detach().clone()
    if not flat:  # parameters moved out of the optimizer's buffer: the per-tensor path
        vector = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
        torch.nn.utils.vector_to_parameters(vector.clone(), model.parameters())
    for _ in range(25):
        _step_each(((model, ours), (twin, theirs)), x)
        assert (ours.flat_grad() is not None) == flat or ours.params[0].grad is None
    _assert_same_weights(model.parameters(), twin.parameters())
    assert (model[0].weight - start).abs().max() > 1e-3
    assert all(torch.all(m == 0) for m in ours.exp_avg)  # its one moment is exp_avg_sq


def test_adam_steps_one_flat_buffer_that_the_module_sees() -> None:
    model, _ = _nets()
    before = [p.detach().clone() for p in model.parameters()]
    ours = Adam(model.parameters(), lr=1e-2)
    for p, b in zip(model.parameters(), before, strict=True):  # moved, not changed
        assert torch.equal(p, b)
    model(torch.randn(8, 4)).sum().backward()
    flat = ours.flat_grad()
    assert flat is not None and flat.shape == (sum(p.numel() for p in model.parameters()),)
    ours.step(flat)
    assert all((p - b).abs().max() > 0 for p, b in zip(model.parameters(), before, strict=True))


def test_adam_with_guard_clipping_matches_torch_clip_and_adam() -> None:
    """The flat path's norm and clipping are clip_grad_norm_'s: same returned norm, same weights."""
    model, twin = _nets()
    ours, guard = Adam(model.parameters(), lr=3e-3, eps=1e-5), UpdateGuard()
    theirs = torch.optim.Adam(twin.parameters(), lr=3e-3, eps=1e-5)
    x = torch.randn(64, 4) * 10
    clipped = 0
    for _ in range(25):
        ours.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        norm = guard.step(ours, loss, list(model.parameters()), max_norm=0.5)
        theirs.zero_grad()
        twin(x).pow(2).mean().backward()
        their_norm = float(torch.nn.utils.clip_grad_norm_(twin.parameters(), 0.5))
        theirs.step()
        assert norm == pytest.approx(their_norm, rel=1e-4)
        clipped += their_norm > 0.5
    assert clipped >= 10  # clipping was at work
    _assert_same_weights(model.parameters(), twin.parameters())


def test_adam_keeps_stepping_parameters_whose_data_was_replaced() -> None:
    """``vector_to_parameters`` (code of a user's, on the learner's model) points the parameters at
    new memory: the optimizer steps them there, with the moments it had."""
    model, twin = _nets()
    ours = Adam(model.parameters(), lr=3e-3)
    theirs = torch.optim.Adam(twin.parameters(), lr=3e-3)
    x = torch.randn(64, 4)
    for step in range(20):
        if step == 10:
            vector = torch.nn.utils.parameters_to_vector(twin.parameters()).detach() * 0.5
            torch.nn.utils.vector_to_parameters(vector.clone(), model.parameters())
            torch.nn.utils.vector_to_parameters(vector.clone(), twin.parameters())
            assert ours.flat_grad() is None  # the per-tensor path from here
        _step_each(((model, ours), (twin, theirs)), x)
    _assert_same_weights(model.parameters(), twin.parameters())


def test_two_adams_sharing_parameters_both_step_them() -> None:
    """An encoder shared by two optimizers (an actor's and a critic's): the second cannot
    move it into its own buffer, and takes the per-tensor path."""
    torch.manual_seed(0)
    encoder, head_a, head_b = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1), torch.nn.Linear(8, 1)
    twins = copy.deepcopy((encoder, head_a, head_b))
    ours = [Adam([*encoder.parameters(), *head.parameters()], lr=1e-2) for head in (head_a, head_b)]
    theirs = [torch.optim.Adam([*twins[0].parameters(), *head.parameters()], lr=1e-2) for head in twins[1:]]
    assert ours[1].flat_grad() is None  # the per-tensor path (its parameters' gradients are not there yet either)
    head_a(torch.tanh(encoder(torch.randn(2, 4)))).sum().backward()
    assert ours[0].flat_grad() is not None  # the first still holds its buffer
    x = torch.randn(32, 4)
    for _ in range(10):
        for enc, heads, opts in ((encoder, (head_a, head_b), ours), (twins[0], twins[1:], theirs)):
            for head, opt in zip(heads, opts, strict=True):
                opt.zero_grad()
                head(torch.tanh(enc(x))).pow(2).mean().backward()
                opt.step()
    _assert_same_weights([p for m in (encoder, head_a, head_b) for p in m.parameters()],
                         [p for m in twins for p in m.parameters()])  # fmt: skip


def test_adam_state_round_trip_continues_the_same_steps() -> None:
    model, twin = _nets()
    ours = Adam(model.parameters(), lr=3e-3)
    x = torch.randn(64, 4)

    def train(net: torch.nn.Module, opt: Adam, steps: int) -> None:
        for _ in range(steps):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()

    train(model, ours, 5)
    twin.load_state_dict(model.state_dict())
    restored = Adam(twin.parameters(), lr=1.0)
    restored.load_state_dict(copy.deepcopy(ours.state_dict()))
    train(model, ours, 5)
    train(twin, restored, 5)
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_loading_flat_weights_copies_into_the_parameters_the_optimizer_holds() -> None:
    """A learner's ``set_weights`` copies in place: the parameters stay in Adam's buffer (its
    one-vector path goes on) and never alias the array they were loaded from."""
    import gymnasium as gym

    from asyncflow.rl.policies.actor_critic import ActorCriticPolicy
    from asyncflow.rl.policy import FlatWeights

    env = gym.make("CartPole-v1")
    policy = ActorCriticPolicy(env.observation_space, env.action_space)
    optimizer = policy.optimizer
    vector = policy.get_weights().vector * 0.5
    policy.set_weights(FlatWeights(vector, 3))
    assert (policy.get_weights().vector == vector).all()
    vector[:] = 7.0  # the received array, reused
    assert (policy.get_weights().vector != 7.0).all()
    logits, values = policy.model(torch.zeros(2, 4))
    (logits.sum() + values.sum()).backward()
    assert optimizer.flat_grad() is not None
    with pytest.raises(ValueError, match="weights of 9154 values for a network of 9155"):
        policy.set_weights(FlatWeights(vector[:-1], 4))
