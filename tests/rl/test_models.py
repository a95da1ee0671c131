"""The model seam: encoders picked from the space, action distributions, the
built-in models, and the protocol check that turns a bad user model into a
ConfigError before any process starts."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from asyncflow import ConfigError
from asyncflow.rl.data.sample_batch import SampleBatch
from asyncflow.rl.learners.device import resolve_device, to_tensors
from asyncflow.rl.models import (
    ActionHead,
    ActorCriticNet,
    ContinuousNet,
    ModelConfig,
    QNet,
    build_encoder,
    build_model,
    check_model,
    model_spec,
    sample_observations,
)
from asyncflow.rl.models.encoders import CHANNELS_LAST_ROWS, NATURE_FILTERS, CNNEncoder, channels_last_rows
from asyncflow.rl.models.nets import mlp
from asyncflow.rl.policies.actor_critic import ActorCriticPolicy, _rows

IMAGE_CHW = gym.spaces.Box(0, 255, (3, 16, 16), np.uint8)
IMAGE_HWC = gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)
VECTOR = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)


def _features(space: gym.Space[Any], **kwargs: Any) -> torch.Tensor:
    encoder = build_encoder(space, **kwargs)
    out = encoder(to_tensors(sample_observations(space, 4), torch.device("cpu")))
    assert out.dtype == torch.float32 and tuple(out.shape) == (4, encoder.out_dim)
    return out


@pytest.mark.parametrize(
    ("space", "out_dim"),
    [
        (VECTOR, 5),
        (gym.spaces.Box(0, 1, (2, 3), np.float64), 6),  # a matrix that is not an image: flattened
        (gym.spaces.Discrete(7, start=3), 7),
        (gym.spaces.MultiDiscrete([3, 4]), 7),
        (gym.spaces.MultiBinary(6), 6),
        (gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": VECTOR}), 7),
        (gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Tuple((VECTOR, gym.spaces.MultiBinary(3))))), 10),
    ],
)
def test_non_image_encoders_give_the_expected_width(space: gym.Space[Any], out_dim: int) -> None:
    assert build_encoder(space).out_dim == out_dim
    _features(space)


def test_one_hot_of_a_discrete_with_a_start() -> None:
    encoder = build_encoder(gym.spaces.Discrete(3, start=5))
    out = encoder(torch.tensor([5, 7, 6]))
    assert torch.equal(out, torch.eye(3)[[0, 2, 1]])


def test_images_get_a_cnn_channels_first_or_last_and_uint8_is_scaled_inside() -> None:
    first, last = build_encoder(IMAGE_CHW), build_encoder(IMAGE_HWC)
    assert isinstance(first, CNNEncoder) and isinstance(last, CNNEncoder)
    assert not first.channels_last and last.channels_last
    assert first.out_dim == last.out_dim == 32 * 6 * 6
    # The same picture in both layouts gives the same features once the weights match.
    last.load_state_dict(first.state_dict())
    chw = torch.randint(0, 256, (2, 3, 16, 16), dtype=torch.uint8)
    assert torch.allclose(first(chw), last(chw.permute(0, 2, 3, 1)))
    # uint8 input is scaled to [0, 1]: equal to feeding the floats / 255 to a float-image encoder.
    floats = build_encoder(gym.spaces.Box(0.0, 1.0, (3, 16, 16), np.float32))
    floats.load_state_dict(first.state_dict())
    assert torch.allclose(first(chw), floats(chw.float() / 255), atol=1e-6)


def test_a_training_batch_of_frames_goes_channels_last_once_and_keeps_its_values() -> None:
    chw, hwc = build_encoder(IMAGE_CHW), build_encoder(IMAGE_HWC)
    frames = torch.randint(0, 256, (CHANNELS_LAST_ROWS, 3, 16, 16), dtype=torch.uint8)
    laid = chw.training_layout(frames)
    assert torch.equal(laid, frames) and not laid.is_contiguous()
    assert laid.is_contiguous(memory_format=torch.channels_last)
    few = frames[:2]  # fewer rows than a training batch: as they are
    assert chw.training_layout(few) is few
    rows = frames.permute(0, 2, 3, 1)  # already channels-last: left as it is
    assert hwc.training_layout(rows) is rows
    # Dict and Tuple observations: each image leaf laid out, the other leaves untouched.
    vector = torch.zeros(CHANNELS_LAST_ROWS, 5)
    both = build_encoder(gym.spaces.Dict({"pixels": IMAGE_CHW, "v": VECTOR}))
    out = both.training_layout({"pixels": frames, "v": vector})
    assert out["v"] is vector and out["pixels"].is_contiguous(memory_format=torch.channels_last)
    pair = build_encoder(gym.spaces.Tuple((VECTOR, IMAGE_CHW))).training_layout((vector, frames))
    assert isinstance(pair, tuple) and pair[0] is vector and torch.equal(pair[1], frames)
    # The built-in model passes its batch to its encoder; the features are the same either way.
    net = ActorCriticNet(IMAGE_CHW, gym.spaces.Discrete(3))
    assert net.training_layout(frames).is_contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        assert torch.allclose(net(net.training_layout(frames))[1], net(frames)[1], atol=1e-5)


def test_minibatch_rows_are_the_indexed_rows_in_the_column_layout() -> None:
    index = torch.tensor([5, 0, 7, 7, 2])
    frames = torch.randint(0, 256, (8, 4, 6, 6), dtype=torch.uint8)
    laid = channels_last_rows(frames)
    for column in (frames, laid, torch.randn(8), torch.arange(16).reshape(8, 2)):
        rows = _rows(index, column)
        assert torch.equal(rows, column[index])
    assert _rows(index, laid).is_contiguous(memory_format=torch.channels_last)
    words = np.array(list("abcdefgh"), dtype=object)
    assert list(_rows(index, words)) == list("fahhc")


def test_atari_frames_get_the_nature_cnn() -> None:
    encoder = build_encoder(gym.spaces.Box(0, 255, (84, 84, 4), np.uint8))
    convs = [m for m in encoder.modules() if isinstance(m, nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size[0], c.stride[0]) for c in convs] == list(NATURE_FILTERS)
    assert encoder.out_dim == 64 * 7 * 7


def test_encoder_choices_and_their_errors() -> None:
    assert not isinstance(build_encoder(IMAGE_CHW, kind="mlp"), CNNEncoder)
    assert build_encoder(IMAGE_CHW, kind="mlp").out_dim == 3 * 16 * 16
    with pytest.raises(ConfigError, match="encoder='cnn' needs an image"):
        build_encoder(VECTOR, kind="cnn")
    with pytest.raises(ConfigError, match="do not fit 16x16 frames"):
        build_encoder(IMAGE_CHW, cnn_filters=NATURE_FILTERS)
    mixed = gym.spaces.Dict({"image": IMAGE_CHW, "vector": VECTOR})
    assert _features(mixed).shape[1] == 32 * 6 * 6 + 5


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Discrete(4, start=1),
        gym.spaces.MultiDiscrete([2, 3, 4]),
        gym.spaces.MultiBinary((2, 3)),
        gym.spaces.Box(-2.0, 2.0, (2, 2), np.float32),
    ],
    ids=["discrete", "multi_discrete", "multi_binary", "box_2x2"],
)
def test_action_distributions_sample_score_and_reach_the_env(space: gym.Space[Any]) -> None:
    head = ActionHead(space)
    inputs = torch.randn(64, head.num_inputs)
    dist = head.distribution(inputs)
    actions = dist.sample(torch.Generator().manual_seed(0))
    env_actions = head.to_env(actions.numpy())
    assert all(space.contains(a) for a in env_actions), env_actions[:3]
    assert dist.log_prob(actions).shape == (64,) and dist.entropy().shape == (64,)
    assert all(space.contains(a) for a in head.to_env(dist.mode().numpy()))
    # Log-probabilities and entropies agree with torch.distributions.
    if isinstance(space, gym.spaces.Discrete):
        ref = torch.distributions.Categorical(logits=inputs)
        ref_logp, ref_entropy = ref.log_prob(actions), ref.entropy()
    elif isinstance(space, gym.spaces.MultiDiscrete):
        parts = [torch.distributions.Categorical(logits=x) for x in torch.split(inputs, [2, 3, 4], -1)]
        ref_logp = sum(p.log_prob(actions[:, i]) for i, p in enumerate(parts))
        ref_entropy = sum(p.entropy() for p in parts)
    elif isinstance(space, gym.spaces.MultiBinary):
        bern = torch.distributions.Bernoulli(logits=inputs)
        ref_logp = bern.log_prob(actions.reshape(64, -1).float()).sum(-1)
        ref_entropy = bern.entropy().sum(-1)
    else:
        mean, log_std = inputs.chunk(2, -1)
        normal = torch.distributions.Independent(torch.distributions.Normal(mean, log_std.exp()), 1)
        ref_logp, ref_entropy = normal.log_prob(actions.reshape(64, -1)), normal.entropy()
    assert torch.allclose(dist.log_prob(actions), ref_logp, atol=1e-5)  # type: ignore[arg-type]
    assert torch.allclose(dist.entropy(), ref_entropy, atol=1e-5)  # type: ignore[arg-type]


def test_box_actions_are_clipped_and_shaped_for_the_env() -> None:
    head = ActionHead(gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32))
    out = head.to_env(np.full((3, 2, 2), 5.0, np.float32))
    assert out.shape == (3, 2, 2) and np.all(out == 1.0)


def test_the_built_in_vector_model_is_the_wave_one_mlp() -> None:
    """Same layers, same initialization for a seed: wave-one results do not change."""
    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    torch.manual_seed(3)
    net = ActorCriticNet(space, gym.spaces.Discrete(2), hidden=(64, 64))
    torch.manual_seed(3)
    pi, vf = mlp([4, 64, 64, 2], nn.Tanh, 0.01), mlp([4, 64, 64, 1], nn.Tanh, 1.0)
    expected = [*pi.parameters(), *vf.parameters()]
    assert [tuple(p.shape) for p in net.parameters()] == [tuple(p.shape) for p in expected]
    assert all(torch.equal(a, b) for a, b in zip(net.parameters(), expected, strict=True))


def test_images_share_a_relu_torso_and_vectors_keep_two_mlps() -> None:
    image_net = ActorCriticNet(IMAGE_HWC, gym.spaces.Discrete(3))
    assert image_net.shared and isinstance(image_net.torso[1], nn.ReLU)  # type: ignore[index]
    assert image_net.pi[0].in_features == 512  # type: ignore[index]
    vector_net = ActorCriticNet(VECTOR, gym.spaces.Discrete(3), ModelConfig(hidden=(32,)))
    assert not vector_net.shared


@pytest.mark.parametrize("action_space", [gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)])
def test_built_in_models_honour_their_protocols(action_space: gym.Space[Any]) -> None:
    obs_space = gym.spaces.Dict({"image": IMAGE_CHW, "vector": VECTOR})
    model = build_model(None, obs_space, action_space, "actor_critic")
    check_model(model, "actor_critic", obs_space, action_space, algorithm="PPO", name="built-in")
    if isinstance(action_space, gym.spaces.Discrete):
        q = build_model(None, obs_space, action_space, "q")
        assert isinstance(q, QNet)
        check_model(q, "q", obs_space, action_space, algorithm="DQN", name="built-in")
    else:
        for gaussian, num_q in ((True, 2), (False, 1)):
            net = build_model(None, obs_space, action_space, "continuous", gaussian=gaussian, num_q=num_q)
            assert isinstance(net, ContinuousNet)
            check_model(net, "continuous", obs_space, action_space, algorithm="SAC", name="built-in",
                        gaussian=gaussian, num_q=num_q)  # fmt: skip


class WrongWidth(nn.Module):
    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
        super().__init__()
        self.net = nn.Linear(4, 3)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.net(obs), obs.sum(-1)


class Raises(nn.Module):
    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
        super().__init__()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        raise ValueError("my model is broken")


class NoCritic(nn.Module):
    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
        super().__init__()
        self.actor = nn.Linear(3, 2)


CARTPOLE = (gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
PENDULUM = (gym.spaces.Box(-1.0, 1.0, (3,), np.float32), gym.spaces.Box(-2.0, 2.0, (1,), np.float32))


@pytest.mark.parametrize(
    ("factory", "family", "spaces", "message"),
    [
        (WrongWidth, "actor_critic", CARTPOLE, r"distribution inputs of shape \(2, 3\); ALGO needs \(B, 2\)"),
        (lambda o, a: nn.Linear(4, 5), "q", CARTPOLE, r"returned \(2, 5\); ALGO needs Q values of shape \(B, 2\)"),
        (lambda o, a: nn.Linear(4, 2), "actor_critic", CARTPOLE, "must return \\(distribution inputs, values\\)"),
        (Raises, "actor_critic", CARTPOLE, "Raises.forward raised ValueError on a sample observation: my model"),
        (NoCritic, "continuous", PENDULUM, "NoCritic has no 'critic' submodule"),
        (lambda o, a: "not a module", "q", CARTPOLE, "built a str, not a torch.nn.Module"),
        (lambda o: nn.Linear(4, 2), "q", CARTPOLE, r"\(observation_space, action_space\) raised TypeError"),
    ],
    ids=["width", "q_width", "no_values", "raises", "no_critic", "not_a_module", "bad_signature"],
)
def test_a_model_that_breaks_its_protocol_is_a_config_error(
    factory: Any, family: Any, spaces: tuple[gym.Space[Any], gym.Space[Any]], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        from asyncflow.rl.models import model_name

        model = build_model(factory, *spaces, family)
        check_model(model, family, *spaces, algorithm="ALGO", name=model_name(factory))


def test_model_field_takes_configs_mappings_classes_and_import_paths() -> None:
    assert model_spec(None) is None
    assert model_spec({"encoder": "cnn", "hidden": [256]}) == ModelConfig(encoder="cnn", hidden=(256,))
    assert model_spec(WrongWidth) is WrongWidth
    assert model_spec("torch.nn:Linear") is nn.Linear
    with pytest.raises(ConfigError, match="unknown ModelConfig field"):
        model_spec({"hiden": [64]})
    with pytest.raises(ConfigError, match="no module 'no_such_module' on the Python path"):
        model_spec("no_such_module:Net")
    with pytest.raises(ConfigError, match=r"model\.activation"):
        ModelConfig(activation="gelu")
    with pytest.raises(ConfigError, match=r"model\.hidden"):
        ModelConfig(hidden=(0,))


def test_devices_resolve_or_fail_clearly() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available() and getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        expected = "mps"  # pragma: no cover - Apple machines
    assert resolve_device("auto").type == expected
    with pytest.raises(ConfigError, match="not a device"):
        resolve_device("gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            resolve_device("cuda:0")


def test_one_torch_thread_and_back() -> None:
    from asyncflow.rl.models.nets import one_torch_thread, orthogonal_

    before = torch.get_num_threads()
    with one_torch_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(KeyError), one_torch_thread():
        raise KeyError("put back on the way out too")
    assert torch.get_num_threads() == before
    weight = torch.empty(64, 16)
    torch.manual_seed(0)
    ours = weight.clone()
    orthogonal_(ours, 2.0)
    torch.manual_seed(0)
    torch.nn.init.orthogonal_(weight, 2.0)
    torch.testing.assert_close(ours, weight)  # torch's init, on one thread


class _LaidOutNet(nn.Module):
    """A user's model with a ``training_layout``: it records the batches it was given."""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
        super().__init__()
        self.body = nn.Linear(4, 2)
        self.value = nn.Linear(4, 1)
        self.laid_out: list[int] = []

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.body(obs), self.value(obs).squeeze(-1)

    def training_layout(self, obs: torch.Tensor) -> torch.Tensor:
        self.laid_out.append(len(obs))
        return obs


def test_the_learner_lays_out_each_batch_once_through_the_models_hook() -> None:
    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    seen: list[int] = []

    def loss(ac: Any, batch: Any, config: Any) -> tuple[torch.Tensor, dict[str, float]]:
        seen.append(len(batch["obs"]))
        _, values = ac(batch["obs"])
        return (values**2).mean(), {}

    policy = ActorCriticPolicy(space, gym.spaces.Discrete(2), model=_LaidOutNet, loss=loss)
    batch = SampleBatch({"obs": np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)})
    policy.learn_on_batch(batch, num_epochs=2, minibatch_size=4)
    assert policy.model.laid_out == [8] and seen == [4, 4, 4, 4]
