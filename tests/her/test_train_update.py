"""The agents' update steps against targets computed by hand with numpy."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gymnasium import spaces

from goalenvs.her.config import DDPGConfig, DQNConfig
from goalenvs.her.ddpg import DDPG
from goalenvs.her.dqn import DQN

torch.set_num_threads(1)

OBS_SPACE = spaces.Dict(
    {
        "observation": spaces.Box(-10, 10, (1,)),
        "achieved_goal": spaces.Box(-10, 10, (1,)),
        "desired_goal": spaces.Box(-10, 10, (1,)),
    }
)


def numpy_mlp(module: torch.nn.Sequential, x: np.ndarray) -> np.ndarray:
    """The MLP evaluated by hand: ReLU hidden layers, linear output."""
    linears = [m for m in module if isinstance(m, torch.nn.Linear)]
    for i, layer in enumerate(linears):
        x = x @ layer.weight.detach().numpy().T.astype(np.float64) + layer.bias.detach().numpy()
        if i < len(linears) - 1:
            x = np.maximum(x, 0.0)
    return x


def batch(obs, goal, actions, rewards, dones, next_obs):
    def as_dict(o):
        o = torch.tensor(o, dtype=torch.float32).reshape(-1, 1)
        return {"observation": o, "achieved_goal": o.clone(), "desired_goal": torch.tensor(goal)}

    return SimpleNamespace(
        observations=as_dict(obs),
        next_observations=as_dict(next_obs),
        actions=torch.tensor(actions),
        rewards=torch.tensor(rewards, dtype=torch.float32),
        dones=torch.tensor(dones, dtype=torch.float32),
    )


def net_inputs(obs, goal):
    """What the normalizer feeds the networks before any statistics: clip(x, -5, 5)."""
    obs = np.asarray(obs, dtype=np.float64).reshape(-1, 1)
    goal = np.asarray(goal, dtype=np.float64).reshape(-1, 1)
    return np.clip(np.concatenate([obs, obs, goal], axis=1), -5, 5)


def make_ddpg(**kwargs) -> DDPG:
    torch.manual_seed(3)
    config = DDPGConfig(hidden_sizes=(4,), **kwargs)
    action_space = spaces.Box(-2.0, 2.0, (1,))
    agent = DDPG(OBS_SPACE, action_space, config, gamma=0.5, seed=0)
    with torch.no_grad():
        # Distinct targets, so the Polyak step and the target values are not trivial.
        for p in [*agent.actor_target.parameters(), *agent.critic_target.parameters()]:
            p.mul_(-0.5).add_(0.1)
    return agent


def test_ddpg_update_matches_hand_computed_losses_and_clipped_targets():
    agent = make_ddpg(action_l2=0.7)
    obs, next_obs = [0.5, -1.0, 7.0], [0.2, 3.0, -6.0]  # 7 and -6 exercise the +-5 clip
    goal = [[1.0], [0.0], [-2.0]]
    actions = [[1.0], [-2.0], [0.4]]  # env units; the networks see them divided by 2
    rewards = [-30.0, 9.0, -1.0]  # with gamma 0.5 targets clip to [-2, 0]: -2 and 0
    dones = [0.0, 0.0, 1.0]
    x, x2 = net_inputs(obs, goal), net_inputs(next_obs, goal)
    scaled = np.asarray(actions) / 2.0

    next_pi = np.tanh(numpy_mlp(agent.actor_target.net, x2))
    next_q = numpy_mlp(agent.critic_target.net, np.concatenate([x2, next_pi], 1))[:, 0]
    target = np.clip(np.asarray(rewards) + 0.5 * (1 - np.asarray(dones)) * next_q, -2.0, 0.0)
    q = numpy_mlp(agent.critic.net, np.concatenate([x, scaled], 1))[:, 0]
    pi = np.tanh(numpy_mlp(agent.actor.net, x))
    q_pi = numpy_mlp(agent.critic.net, np.concatenate([x, pi], 1))[:, 0]
    expected_critic = np.mean((q - target) ** 2)
    expected_actor = -q_pi.mean() + 0.7 * np.mean(pi**2)
    assert target[0] == -2.0 and target[1] == 0.0  # both clipping bounds were hit

    old_actor = [p.detach().clone() for p in agent.actor.parameters()]
    losses = agent.update(batch(obs, goal, actions, rewards, dones, next_obs))
    assert float(losses["critic_loss"]) == pytest.approx(expected_critic, rel=1e-5)
    assert float(losses["actor_loss"]) == pytest.approx(expected_actor, rel=1e-5)
    assert float(losses["q_mean"]) == pytest.approx(q_pi.mean(), rel=1e-5)
    # Adam's first step moves every parameter with a non-zero gradient by about lr.
    moved = torch.cat(
        [
            (p - o).abs().reshape(-1)
            for p, o in zip(agent.actor.parameters(), old_actor, strict=True)
        ]
    )
    assert torch.all(moved < 1.0001e-3) and moved.max() > 0.99e-3


def test_action_l2_is_the_only_actor_loss_difference():
    losses = []
    for l2 in (0.0, 1.0):
        agent = make_ddpg(action_l2=l2)
        pi = np.tanh(numpy_mlp(agent.actor.net, net_inputs([0.5, 1.0], [[0.0], [1.0]])))
        b = batch([0.5, 1.0], [[0.0], [1.0]], [[0.0], [1.0]], [-1.0, 0.0], [0.0, 0.0], [0.6, 1.1])
        losses.append(float(agent.update(b)["actor_loss"]))
    assert losses[1] - losses[0] == pytest.approx(np.mean(pi**2), rel=1e-5)


def test_polyak_update_moves_targets_five_percent_towards_online():
    agent = make_ddpg()
    online = [p.detach().clone() for p in agent.critic.parameters()]
    target = [p.detach().clone() for p in agent.critic_target.parameters()]
    agent.update_targets()
    for new, t, o in zip(agent.critic_target.parameters(), target, online, strict=True):
        torch.testing.assert_close(new, 0.95 * t + 0.05 * o)
    assert not any(p.requires_grad for p in agent.critic_target.parameters())


def test_ddpg_exploration_stays_in_bounds_and_deterministic_act_is_scaled_tanh():
    agent = make_ddpg(random_eps=0.5, noise_eps=5.0)
    obs = {k: np.full((64, 1), 0.3, np.float32) for k in OBS_SPACE.spaces}
    explored = agent.act(obs, explore=True)
    assert explored.shape == (64, 1) and explored.min() >= -2.0 and explored.max() <= 2.0
    assert len(np.unique(explored)) > 32
    greedy = agent.act(obs, explore=False)
    expected = 2.0 * np.tanh(numpy_mlp(agent.actor.net, np.full((1, 3), 0.3)))
    np.testing.assert_allclose(greedy, np.repeat(expected, 64, 0), rtol=1e-5)


def test_double_dqn_target_uses_online_argmax_and_target_values():
    torch.manual_seed(5)
    config = DQNConfig(hidden_sizes=(5,), huber_delta=1.0)
    agent = DQN(OBS_SPACE, spaces.Discrete(3, start=1), config, gamma=0.9, seed=0)
    with torch.no_grad():
        for p in agent.q_target.parameters():
            p.mul_(2.0).add_(-0.3)
    obs, next_obs, goal = [0.5, -2.0, 1.0], [0.1, 4.0, 2.0], [[1.0], [0.0], [2.0]]
    actions = [1, 3, 2]  # Discrete(3, start=1): indices 0, 2, 1
    rewards, dones = [-1.0, -1.0, 0.0], [0.0, 0.0, 1.0]
    x, x2 = net_inputs(obs, goal), net_inputs(next_obs, goal)
    next_action = numpy_mlp(agent.q, x2).argmax(1)
    next_value = numpy_mlp(agent.q_target, x2)[np.arange(3), next_action]
    target = np.clip(np.asarray(rewards) + 0.9 * (1 - np.asarray(dones)) * next_value, -10, 0)
    q = numpy_mlp(agent.q, x)[np.arange(3), np.asarray(actions) - 1]
    error = np.abs(q - target)
    huber = np.where(error < 1.0, 0.5 * error**2, error - 0.5).mean()
    losses = agent.update(batch(obs, goal, actions, rewards, dones, next_obs))
    assert float(losses["q_loss"]) == pytest.approx(huber, rel=1e-5)


def test_dqn_greedy_and_epsilon_greedy_actions():
    config = DQNConfig(hidden_sizes=(8,), random_eps=1.0)
    agent = DQN(OBS_SPACE, spaces.Discrete(4, start=2), config, gamma=0.9, seed=1)
    obs = {k: np.zeros((400, 1), np.float32) for k in OBS_SPACE.spaces}
    greedy = agent.act(obs, explore=False)
    assert np.all(greedy == numpy_mlp(agent.q, np.zeros((1, 3))).argmax() + 2)
    random = agent.act(obs, explore=True)
    assert set(np.unique(random)) == {2, 3, 4, 5}
