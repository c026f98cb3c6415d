"""bf16 updates: where "auto" picks them, what stays float32, and how close they come to the
float32 update."""

from __future__ import annotations

import pytest
import torch
from gymnasium import spaces

from goalenvs.agents import DDPGConfig, DQNConfig, SACConfig, TD3Config, precision
from goalenvs.agents.ddpg import DDPG
from goalenvs.agents.dqn import DQN
from goalenvs.agents.networks import mlp
from goalenvs.agents.sac import SAC
from goalenvs.agents.td3 import TD3
from goalenvs.core import goal_dict_space

torch.set_num_threads(1)

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
OBS_SPACE = goal_dict_space(spaces.Box(-10, 10, (5,)), spaces.Box(-10, 10, (2,)))


@pytest.fixture
def bf16_cpu(monkeypatch):
    """Pretends this CPU has (True) or lacks (False) bfloat16 instructions."""

    def pretend(has: bool) -> None:
        monkeypatch.setattr(precision, "cpu_has_bf16", lambda: has)

    return pretend


def test_auto_is_bf16_on_a_cpu_with_bf16_instructions_only(bf16_cpu, monkeypatch):
    bf16_cpu(True)
    assert precision.uses_bf16("auto", CPU)
    assert not precision.uses_bf16("auto", CUDA)  # a GPU keeps float32 unless told
    assert not precision.uses_bf16("fp32", CPU)
    assert precision.uses_bf16("bf16", CUDA)
    bf16_cpu(False)
    assert not precision.uses_bf16("auto", CPU)
    assert precision.uses_bf16("bf16", CPU)  # asked for: emulated, but as asked
    bf16_cpu(True)
    monkeypatch.setattr(precision, "AUTO_BF16_ON_CPU", False)  # the default's one switch
    assert not precision.uses_bf16("auto", CPU)


def test_the_update_autocast_is_bf16_or_nothing(bf16_cpu):
    bf16_cpu(True)
    with precision.update_autocast("auto", CPU):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    with precision.update_autocast("fp32", CPU):
        assert not torch.is_autocast_enabled("cpu")


def test_under_autocast_the_hidden_layers_are_bf16_and_the_output_layer_float32():
    torch.manual_seed(0)
    net = mlp(7, (16, 16), 3)
    x = torch.randn(5, 7)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = net(x)
        hidden = torch.nn.Sequential(*list(net)[:-1])(x)
    assert hidden.dtype == torch.bfloat16 and out.dtype == torch.float32
    torch.testing.assert_close(out, net[-1](hidden.float()), rtol=0, atol=0)
    assert net(x).dtype == torch.float32
    assert list(net.state_dict()) == [f"{i}.{p}" for i in (0, 2, 4) for p in ("weight", "bias")]


def random_batch(size: int, discrete: bool, seed: int = 0):
    from types import SimpleNamespace

    generator = torch.Generator().manual_seed(seed)

    def observation():
        return {k: torch.randn(size, *s.shape, generator=generator) for k, s in OBS_SPACE.items()}

    if discrete:
        actions = torch.randint(0, 3, (size,), generator=generator)
    else:
        actions = torch.rand(size, 2, generator=generator) * 2 - 1
    return SimpleNamespace(
        observations=observation(),
        next_observations=observation(),
        actions=actions,
        rewards=-(torch.rand(size, generator=generator) < 0.7).float(),
        dones=torch.zeros(size),
        weights=torch.ones(size),
    )


@pytest.mark.parametrize(
    ("cls", "config_cls"),
    [(DDPG, DDPGConfig), (TD3, TD3Config), (SAC, SACConfig), (DQN, DQNConfig)],
)
def test_bf16_updates_keep_float32_state_and_come_close_to_float32(cls, config_cls):
    discrete = cls is DQN
    action_space = spaces.Discrete(3) if discrete else spaces.Box(-1.0, 1.0, (2,))
    agents = {}
    for name in ("fp32", "bf16"):
        torch.manual_seed(0)
        config = config_cls(hidden_sizes=(64, 64), precision=name)
        agents[name] = cls(OBS_SPACE, action_space, config, 0.98, seed=0)
    losses = {}
    for name, agent in agents.items():
        torch.manual_seed(1)
        losses[name] = [agent.update(random_batch(128, discrete, seed)) for seed in range(4)]
    low = agents["bf16"]
    for tensor in [*low.state_dict().values()]:
        assert tensor.dtype in (torch.float32, torch.float64, torch.int64)
    for optimizer_name in low.optimizer_names:
        for state in getattr(low, optimizer_name).state.values():
            assert state["exp_avg"].dtype == state["exp_avg_sq"].dtype == torch.float32
    for want, got in zip(losses["fp32"], losses["bf16"], strict=True):
        for name in cls.loss_names:
            assert got[name].dtype == torch.float32
            # bf16 keeps 8 bits of mantissa: the losses agree to a few parts in a hundred.
            torch.testing.assert_close(got[name], want[name], rtol=0.05, atol=0.02)
        assert not torch.equal(got[cls.loss_names[0]], want[cls.loss_names[0]])
    # Adam moves a weight by about lr = 1e-3 a step whatever its gradient's size, so where
    # a near-zero gradient's sign differs, 4 steps part the two by up to 8e-3.
    for (key, high), low_value in zip(
        agents["fp32"].state_dict().items(), low.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(low_value, high, rtol=0, atol=8e-3, msg=key)
