"""CrashPenaltyInReward: a collision penalty paid outside compute_reward, made HER-safe."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from goalenvs.her.buffer import HerReplayBuffer
from goalenvs.wrappers.crash_penalty import CrashPenaltyInReward


class _CrashyGoalEnv(gym.Env):
    """A 1-D goal env paying -|achieved - desired| and, in its step reward only, -5 on a
    crash (highway-env's parking-v0 in miniature): position 3 is a wall."""

    def __init__(self) -> None:
        box = spaces.Box(-10.0, 10.0, (1,), np.float32)
        self.observation_space = spaces.Dict(
            {"observation": box, "achieved_goal": box, "desired_goal": box}
        )
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.config = {"collision_reward": -5.0}

    def _obs(self) -> dict[str, np.ndarray]:
        position = np.array([self.position], np.float32)
        return {"observation": position, "achieved_goal": position, "desired_goal": self.goal}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.goal = 0.0, np.array([-2.0], np.float32)
        return self._obs(), {"crashed": False}

    def step(self, action):
        self.position += float(action[0])
        crashed = self.position >= 3.0
        obs = self._obs()
        reward = float(self.compute_reward(obs["achieved_goal"], self.goal, {}))
        reward += self.config["collision_reward"] * crashed
        return obs, reward, crashed, False, {"crashed": crashed}

    def compute_reward(self, achieved_goal, desired_goal, info):
        return -np.abs(np.asarray(achieved_goal) - np.asarray(desired_goal))[..., 0]


def test_compute_reward_adds_the_penalty_for_every_info_layout():
    env = CrashPenaltyInReward(_CrashyGoalEnv())
    assert env.penalty == -5.0  # read from config["collision_reward"]
    achieved = np.array([[1.0], [3.0], [0.5]])
    desired = np.array([[0.0], [0.0], [0.5]])
    flags = np.array([False, True, False])
    infos = [{"crashed": bool(f)} for f in flags]
    for info in ({"crashed": flags}, infos, np.array(infos, dtype=object)):
        np.testing.assert_allclose(env.compute_reward(achieved, desired, info), [-1, -8, 0])
    for info in (None, [{}] * 3):  # no info, or no "crashed" in it: no crash
        np.testing.assert_allclose(env.compute_reward(achieved, desired, info), [-1, -3, 0])
    assert env.compute_reward(np.array([3.0]), np.array([0.0]), {"crashed": True}) == -8.0


def test_step_reward_equals_compute_reward_with_the_info_of_the_step():
    env = CrashPenaltyInReward(_CrashyGoalEnv())
    env.reset(seed=0)
    rewards = []
    for _ in range(3):
        obs, reward, terminated, _, info = env.step(np.array([1.0], np.float32))
        assert reward == pytest.approx(
            env.compute_reward(obs["achieved_goal"], obs["desired_goal"], info)
        )
        rewards.append(reward)
    assert terminated and info["crashed"]
    assert rewards == pytest.approx([-3.0, -4.0, -10.0])


@pytest.mark.parametrize("wrapped", [False, True])
def test_relabeled_crash_keeps_its_penalty_only_when_wrapped(wrapped):
    """An episode that ends in the wall: with the wrapper every sampled reward of the crash
    transition, relabeled or not, carries -5; without it the relabeled ones lose it."""
    base = _CrashyGoalEnv()
    env = CrashPenaltyInReward(base) if wrapped else base
    buffer = HerReplayBuffer(
        100,
        env.observation_space,
        env.action_space,
        compute_reward=env.compute_reward if wrapped else base.compute_reward,
        n_sampled_goal=4,
        info_keys=("crashed",),
        seed=0,
    )
    obs, _ = env.reset(seed=0)
    for _ in range(3):
        action = np.array([1.0], np.float32)
        next_obs, reward, terminated, truncated, info = env.step(action)
        pair = [{k: v[None] for k, v in o.items()} for o in (obs, next_obs)]
        rest = [np.array([x]) for x in (reward, terminated, truncated, info["crashed"])]
        buffer.add(*pair, action[None], *rest[:3], {"crashed": rest[3]})
        obs = next_obs
    batch = buffer.sample(512)
    crash = batch.next_observations["achieved_goal"][:, 0] == 3.0
    distance = np.abs(3.0 - batch.observations["desired_goal"][:, 0])
    relabeled = batch.observations["desired_goal"][:, 0] != -2.0
    assert crash.sum() > 50 and (crash & relabeled).sum() > 30
    # The crash's goals are the future achieved goal (3.0, distance 0) or the real -2.
    penalty = -5.0 if wrapped else 0.0
    expected = np.where(relabeled, -distance + penalty, -distance - 5.0)
    np.testing.assert_allclose(batch.rewards[crash].ravel(), expected[crash])


def test_highway_parking_crash_id_moves_the_penalty_into_compute_reward():
    pytest.importorskip("highway_env")
    import goalenvs.wrappers.crash_penalty as crash_penalty

    env = gym.make(f"goalenvs.wrappers.crash_penalty:{crash_penalty.PARKING_CRASH_ID}")
    obs, _ = env.reset(seed=0)
    compute = env.get_wrapper_attr("compute_reward")
    achieved, desired = obs["achieved_goal"], obs["desired_goal"]
    plain = float(env.unwrapped.compute_reward(achieved, desired, {}))
    assert plain < 0
    assert compute(achieved, desired, {"crashed": True}) == pytest.approx(plain - 5.0)
    assert compute(achieved, desired, {"crashed": False}) == pytest.approx(plain)
    env.close()


def test_bad_arguments_name_themselves():
    class NoGoal(gym.Env):
        observation_space = spaces.Box(0, 1, (1,))
        action_space = spaces.Box(0, 1, (1,))

    with pytest.raises(TypeError, match="no compute_reward"):
        CrashPenaltyInReward(NoGoal())
    plain = _CrashyGoalEnv()
    del plain.config
    with pytest.raises(ValueError, match=r"penalty=None .*collision_reward"):
        CrashPenaltyInReward(plain)
    with pytest.raises(ValueError, match="penalty must be a finite number, got nan"):
        CrashPenaltyInReward(_CrashyGoalEnv(), penalty=float("nan"))
    env = CrashPenaltyInReward(_CrashyGoalEnv(), penalty=-1.0)
    with pytest.raises(
        TypeError, match="info must be None, a dict or a sequence of dicts, got int"
    ):
        env.compute_reward(np.zeros(1), np.zeros(1), 3)
