"""goalenvs.her.sb3.HerReplayBuffer under stable-baselines3's off-policy algorithms."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from goalenvs.core import GoalEnv

pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")

from stable_baselines3 import DQN, SAC  # noqa: E402
from stable_baselines3 import HerReplayBuffer as SB3HerReplayBuffer  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import VecNormalize  # noqa: E402

from goalenvs.her.sb3 import HerReplayBuffer  # noqa: E402

torch.set_num_threads(1)


class PointGoalEnv(GoalEnv):
    """A 2D point that moves by 0.1 * action toward a goal in [-1, 1]^2.

    Small and fast for the adapter's plumbing tests (the learning test uses PointReach);
    reward -1 until within 0.1, then 0.
    ``crash_penalty`` adds an info-borne penalty (left half-plane), to exercise info_keys.
    """

    def __init__(self, crash_penalty: float = 0.0, discrete: bool = False) -> None:
        box = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Dict(
            observation=box, achieved_goal=box, desired_goal=spaces.Box(-1.0, 1.0, (2,), np.float32)
        )
        self.discrete = discrete
        self.action_space = spaces.Discrete(4) if discrete else spaces.Box(-1, 1, (2,), np.float32)
        self.crash_penalty = crash_penalty

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "observation": self.pos.copy(),
            "achieved_goal": self.pos.copy(),
            "desired_goal": self.goal.copy(),
        }

    def _info(self) -> dict[str, object]:
        return {
            "is_success": bool(np.linalg.norm(self.pos - self.goal) < 0.1),
            "crashed": bool(self.pos[0] < 0),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self._obs(), self._info()

    def step(self, action: np.ndarray) -> tuple:
        if self.discrete:
            action = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]][int(action)], np.float32)
        move = 0.1 * np.clip(np.asarray(action, np.float32), -1, 1)
        self.pos = np.clip(self.pos + move, -1, 1).astype(np.float32)
        info = self._info()
        obs = self._obs()
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
        return obs, reward, False, False, info

    def compute_reward(self, achieved_goal, desired_goal, info):
        far = np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1) >= 0.1
        reward = -far.astype(np.float32)
        if self.crash_penalty:
            from goalenvs.core import info_values

            crashed = info_values(info, "crashed", reward.shape, False, bool)
            reward = reward - self.crash_penalty * crashed
        return reward

    def compute_terminated(self, achieved_goal, desired_goal, info):
        return np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1) < 0.1


def make_env(n_envs: int = 1, seed: int = 0, **kwargs: object):
    return make_vec_env(
        lambda: gym.wrappers.TimeLimit(PointGoalEnv(**kwargs), 50), n_envs=n_envs, seed=seed
    )


def collect(venv, buffers: list, steps: int, seed: int = 0) -> None:
    """Steps a random policy and adds every step to all buffers, as SB3 would."""
    rng = np.random.default_rng(seed)
    obs = venv.reset()
    for _ in range(steps):
        if isinstance(venv.action_space, spaces.Discrete):
            action = rng.integers(0, venv.action_space.n, venv.num_envs)
        else:
            action = rng.uniform(-1, 1, (venv.num_envs, 2)).astype(np.float32)
        new_obs, reward, done, infos = venv.step(action)
        next_obs = {k: v.copy() for k, v in new_obs.items()}
        for i, d in enumerate(done):
            if d:
                for key in next_obs:
                    next_obs[key][i] = infos[i]["terminal_observation"][key]
        for buffer in buffers:
            buffer.add(obs, next_obs, action, reward, done, infos)
        obs = new_obs


@pytest.mark.parametrize("discrete", [False, True])
def test_adapter_batches_have_sb3_shapes_and_relabeled_rewards(discrete: bool) -> None:
    venv = make_env(2, discrete=discrete)
    args = (1000, venv.observation_space, venv.action_space, venv)
    ours = HerReplayBuffer(*args, n_envs=2, seed=0)
    theirs = SB3HerReplayBuffer(*args, n_envs=2)
    collect(venv, [ours, theirs], 130)  # two complete episodes per env, a third begun
    assert ours.size() == 200
    a, b = ours.sample(64), theirs.sample(64)
    for key in a.observations:
        assert a.observations[key].shape == b.observations[key].shape
        assert a.observations[key].dtype == b.observations[key].dtype
    for name in ("actions", "rewards", "dones"):
        assert getattr(a, name).shape == getattr(b, name).shape, name
        assert getattr(a, name).dtype == getattr(b, name).dtype, name
    expected = venv.envs[0].unwrapped.compute_reward(
        a.next_observations["achieved_goal"].numpy(), a.observations["desired_goal"].numpy(), {}
    )
    np.testing.assert_array_equal(a.rewards.numpy()[:, 0], expected)
    assert not a.dones.any()  # time-limit truncations bootstrap


def test_adapter_sb3_strategy_enum_info_keys_and_vecnormalize() -> None:
    from stable_baselines3.her.goal_selection_strategy import GoalSelectionStrategy

    venv = VecNormalize(make_env(1, crash_penalty=5.0), norm_reward=False)
    buffer = HerReplayBuffer(
        500,
        venv.observation_space,
        venv.action_space,
        venv,
        goal_selection_strategy=GoalSelectionStrategy.FINAL,
        copy_info_dict=True,
        seed=1,
    )
    assert buffer.core.goal_selection_strategy.value == "final"
    collect(venv.venv, [buffer], 250)
    assert buffer.core.info_keys == ("is_success", "crashed")  # inferred numeric keys
    raw = buffer.sample(400)
    next_achieved = raw.next_observations["achieved_goal"].numpy()
    far = np.linalg.norm(next_achieved - raw.observations["desired_goal"].numpy(), axis=1) >= 0.1
    crashed = next_achieved[:, 0] < 0  # the stored info of the step
    assert crashed.any() and not crashed.all()
    np.testing.assert_array_equal(raw.rewards.numpy()[:, 0], -1.0 * far - 5.0 * crashed)
    venv.obs_rms["observation"].mean[:] = 0.5
    normalized = buffer.sample(200, env=venv)
    assert normalized.observations["observation"].abs().max() <= venv.clip_obs


def test_adapter_under_sb3_dqn_and_pickled_buffer_round_trip(tmp_path: Path) -> None:
    venv = make_env(1, discrete=True)
    model = DQN(
        "MultiInputPolicy",
        venv,
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 2, "goal_selection_strategy": "episode"},
        learning_starts=60,
        policy_kwargs={"net_arch": [16]},
        seed=0,
    )
    model.learn(160)
    assert isinstance(model.replay_buffer, HerReplayBuffer)
    assert model.replay_buffer.size() >= 100
    model.save_replay_buffer(tmp_path / "buffer.pkl")
    with pytest.warns(UserWarning, match="will be truncated"):
        model.load_replay_buffer(tmp_path / "buffer.pkl")  # SB3 pickles it; set_env + truncate
    assert model.replay_buffer.size() == 160  # the cut episode is now sampleable
    model.learn(60, reset_num_timesteps=False)


def success_rate(model, episodes: int = 50) -> float:
    env = gym.make("goalenvs/PointReach-v0")
    successes = 0
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + episode)
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        successes += info["is_success"]
    return successes / episodes


@pytest.mark.slow
@pytest.mark.parametrize(
    "buffer_class", [HerReplayBuffer, SB3HerReplayBuffer], ids=["goalenvs", "sb3"]
)
def test_sac_learns_point_reach_with_the_adapter_as_with_sb3s_buffer(buffer_class: type) -> None:
    # The same budget for both buffers: 5000 steps, one gradient step each (both reach
    # 0.94 on this seed; about 40 s each on an idle core).
    import goalenvs  # noqa: F401  (registers goalenvs/PointReach-v0)

    venv = make_vec_env("goalenvs/PointReach-v0", n_envs=1, seed=1)
    model = SAC(
        "MultiInputPolicy",
        venv,
        replay_buffer_class=buffer_class,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        learning_starts=300,
        batch_size=128,
        gamma=0.95,
        learning_rate=1e-3,
        policy_kwargs={"net_arch": [64, 64]},
        seed=1,
    )
    model.learn(5000)
    assert success_rate(model) >= 0.9
