"""Our Adam against torch.optim.Adam, step by step."""

from __future__ import annotations

import copy

import torch

from asyncflow.rl.optim import Adam


def test_adam_matches_torch() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    twin = copy.deepcopy(model)
    ours = Adam(model.parameters(), lr=3e-3, eps=1e-5)
    theirs = torch.optim.Adam(twin.parameters(), lr=3e-3, eps=1e-5)
    x = torch.randn(64, 4)
    start = model[0].weight.detach().clone()
    for _ in range(25):
        for net, opt in ((model, ours), (twin, theirs)):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert (model[0].weight - start).abs().max() > 1e-3  # the weights really moved
