"""The agents' update steps against targets computed by hand with numpy."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from goalenvs.agents.ddpg import DDPG, DDPGConfig
from goalenvs.agents.dqn import DQN, DQNConfig
from goalenvs.core import goal_dict_space, goal_obs
from goalenvs.train.envs import validate_training_env
from goalenvs.train.trainer import Trainer, train

OBS_SPACE = goal_dict_space(spaces.Box(-10, 10, (1,)), spaces.Box(-10, 10, (1,)))


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
        observations=as_dict(obs), next_observations=as_dict(next_obs),
        actions=torch.tensor(actions), rewards=torch.tensor(rewards, dtype=torch.float32),
        dones=torch.tensor(dones, dtype=torch.float32),
    )  # fmt: skip


def net_inputs(obs, goal):
    """What the normalizer feeds the networks before any statistics: clip(x, -5, 5)."""
    obs = np.asarray(obs, dtype=np.float64).reshape(-1, 1)
    goal = np.asarray(goal, dtype=np.float64).reshape(-1, 1)
    return np.clip(np.concatenate([obs, obs, goal], axis=1), -5, 5)


def make_ddpg(**kwargs) -> DDPG:
    torch.manual_seed(3)
    config = DDPGConfig(hidden_sizes=(4,), precision="fp32", **kwargs)
    action_space = spaces.Box(-2.0, 2.0, (1,))
    agent = DDPG(OBS_SPACE, action_space, config, gamma=0.5, seed=0)
    # what a run's plan gives rewards in [-1, 0] at gamma 0.5 (an agent alone clips nothing)
    agent.set_return_range(-2.0, 0.0)
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
    pairs = zip(agent.actor.parameters(), old_actor, strict=True)
    moved = torch.cat([(p - o).abs().reshape(-1) for p, o in pairs])
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
    config = DQNConfig(hidden_sizes=(5,), huber_delta=1.0, precision="fp32")
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


# --------------------------------------------------------------------------- envs the trainer meets


class Reach1D:
    """A 1-D goal env with only compute_reward (no compute_terminated), as most in the wild.

    ``action_dtype`` sets the Box's dtype (its ``step`` rejects any other), ``reward`` is
    "sparse" (-1/0), "dense" (-3 x distance, below -1) or "declared" (dense, with a
    declared ``reward_range``)."""

    def __new__(cls, action_dtype="float32", reward="sparse"):
        import gymnasium as gym

        class _Reach1D(gym.Env):
            metadata = {"render_modes": []}

            def __init__(self):
                box = spaces.Box(-1.0, 1.0, (1,), np.float64)
                self.observation_space = goal_dict_space(box, box)
                self.action_space = spaces.Box(-1.0, 1.0, (1,), np.dtype(action_dtype))
                if reward == "declared":
                    self.reward_range = (-6.0, 0.0)

            def _obs(self):
                return goal_obs(self.pos.copy(), self.pos.copy(), self.goal.copy())

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                self.pos = self.np_random.uniform(-1, 1, 1)
                self.goal = self.np_random.uniform(-1, 1, 1)
                return self._obs(), {"is_success": False}

            def compute_reward(self, achieved_goal, desired_goal, info):
                distance = np.abs(np.asarray(achieved_goal) - desired_goal)[..., 0]
                if reward == "sparse":
                    return -(distance > 0.1).astype(np.float64)
                return -3.0 * distance

            def step(self, action):
                if action.dtype != self.action_space.dtype:
                    raise TypeError(
                        f"action dtype {action.dtype}, expected {self.action_space.dtype}"
                    )
                self.pos = np.clip(self.pos + 0.2 * action, -1.0, 1.0)
                success = bool(abs(self.pos - self.goal)[0] <= 0.1)
                r = float(self.compute_reward(self.pos, self.goal, {}))
                return self._obs(), r, False, False, {"is_success": success}

        return _Reach1D()


@pytest.fixture
def reach1d():
    gym.register("test_trainer/Reach1D-v0", entry_point=Reach1D, max_episode_steps=10)
    yield "test_trainer/Reach1D-v0"
    gym.registry.pop("test_trainer/Reach1D-v0")


def tiny(env_id, tmp_path, **kwargs):
    settings = dict(
        env_id=env_id, epochs=1, n_cycles=2, n_batches=2, batch_size=8, hidden_sizes=(8,),
        n_eval_episodes=2, out=str(tmp_path / "run"), verbose=False,
    )  # fmt: skip
    return DDPGConfig(**{**settings, **kwargs})


def test_float64_box_actions_and_no_compute_terminated_train_as_they_should(
    reach1d, tmp_path, capsys
):
    # The env raises on a float32 action; the critic on float64. Without compute_terminated
    # the buffer keeps the stored flag, and train says so once.
    trainer = Trainer(tiny(reach1d, tmp_path, env_kwargs={"action_dtype": "float64"}, verbose=True))
    assert trainer.buffer.compute_terminated is None
    assert any("has no compute_terminated" in note for note in trainer.notes)
    assert capsys.readouterr().err.count("has no compute_terminated") == 1
    row = trainer.run().history[0]
    assert row["env_steps"] == 2 * 2 * 10
    assert all(np.isfinite(row[k]) for k in ("critic_loss", "actor_loss", "q_mean"))


@pytest.mark.parametrize(
    ("env_id", "kwargs", "clip", "note"),
    [
        ("reach1d", {"reward": "sparse"}, (-10.0, 0.0), None),  # [-1/(1-gamma), 0], gamma 0.9
        ("reach1d", {"reward": "declared"}, (-60.0, 0.0), None),  # reward_range (-6, 0) / 0.1
        ("reach1d", {"reward": "dense"}, (-np.inf, np.inf), ""),  # -3 x distance: not in [-1, 0]
        ("goalenvs/PointReach-v0", {}, (-50.0, 0.0), None),  # gamma 1 - 1/50
        ("goalenvs/PointReachDense-v0", {}, (-np.inf, np.inf), "outside baselines'"),
        # The probe sets info["crashed"] both ways and finds the -51 crash reward: no clip
        # without an explicit clip_range.
        ("goalenvs/Parking-v0", {}, (-np.inf, np.inf), "-51"),
    ],
)
def test_clip_return_follows_the_env_rewards(reach1d, tmp_path, env_id, kwargs, clip, note):
    env_id = reach1d if env_id == "reach1d" else env_id
    settings = {"gamma": 0.95} if "Parking" in env_id else {}
    trainer = Trainer(tiny(env_id, tmp_path, env_kwargs=kwargs, **settings))
    try:
        assert (trainer.agent.clip_low, trainer.agent.clip_high) == pytest.approx(clip)
        off = [n for n in trainer.notes if "clip_return is off" in n]
        assert len(off) == (note is not None) and all(note in n for n in off)
        # A terminal crash's -51 and a dense -5 - gamma 22 stay as they are unless clipped.
        r, d, q = np.array([[-51.0, -5.0], [1.0, 0.0], [0.0, -22.0]], np.float32)
        target = trainer.agent.targets(*map(torch.from_numpy, (r, d, q)))
        want = np.clip(r + trainer.plan.gamma * (1 - d) * q, *clip)
        assert target.tolist() == pytest.approx(want.tolist())
    finally:
        trainer.close()


def test_a_module_env_id_of_a_missing_package_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"needs the package 'nopkg_xyz', which is not installed"):
        validate_training_env("nopkg_xyz:Foo-v0", {}, None)


def test_fetch_reach_in_module_form_trains(tmp_path):
    pytest.importorskip("gymnasium_robotics", reason="gymnasium-robotics is not installed")
    # Fetch's compute_terminated returns one scalar False for a batch: broadcast.
    result = train(tiny("gymnasium_robotics:FetchReach-v4", tmp_path, rollout_steps=50))
    row = result.history[0]
    assert row["env_steps"] == 2 * 2 * 50 and np.isfinite(row["critic_loss"])


@pytest.mark.slow
def test_highway_parking_without_compute_terminated_trains(tmp_path):
    pytest.importorskip("highway_env", reason="highway-env is not installed")
    config = tiny("highway_env:parking-v0", tmp_path, rollout_steps=20, gamma=0.95, n_cycles=3)
    trainer = Trainer(config)
    assert trainer.buffer.compute_terminated is None
    assert any("has no compute_terminated" in note for note in trainer.notes)
    result = trainer.run()
    assert result.history[0]["env_steps"] == 3 * 2 * 20
    assert np.isfinite(result.history[0]["critic_loss"])
