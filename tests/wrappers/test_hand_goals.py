"""HandGoalDistance: gymnasium-robotics' hand manipulation goals compared over any batch."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import numpy as np
import pytest

if importlib.util.find_spec("gymnasium_robotics") is None:
    pytest.skip("gymnasium-robotics is not installed", allow_module_level=True)

import gymnasium_robotics

from goalenvs.checker import check_goal_env
from goalenvs.checker.loader import load
from goalenvs.wrappers.hand_goals import HandGoalDistance, quat_mul

gym.register_envs(gymnasium_robotics)
HAND_IDS = [
    "HandManipulatePenRotate-v1",
    "HandManipulateEggFull-v1",
    "HandManipulateBlockRotateZ-v1",
]


def _rollout(env: gym.Env, steps: int = 40, seed: int = 0):
    """Achieved goals, desired goals, step rewards and is_success of random actions."""
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    rows = []
    for _ in range(steps):
        obs, reward, _, _, info = env.step(env.action_space.sample())
        rows.append((obs["achieved_goal"], obs["desired_goal"], reward, info["is_success"]))
    ag, dg, rewards, success = map(np.array, zip(*rows, strict=True))
    return ag, dg, rewards, success


def _relabelled(ag: np.ndarray, dg: np.ndarray) -> np.ndarray:
    """Half the batch's goals are its own achieved goals nudged (successes), half the
    env's desired goals (misses), as a HER batch mixes them."""
    half = len(ag) // 2
    return np.concatenate([dg[:half], ag[half:] + 1e-4])


@pytest.mark.parametrize("hand_id", HAND_IDS)
def test_batched_reward_equals_the_env_own_reward_goal_by_goal(hand_id):
    raw = gym.make(hand_id).unwrapped
    env = gym.make(hand_id.replace("-v1", "Batched-v1"))
    compute_reward = env.get_wrapper_attr("compute_reward")
    ag, dg, rewards, success = _rollout(env)
    goals = _relabelled(ag, dg)
    batch = compute_reward(ag, goals, None)
    one_by_one = np.array([raw.compute_reward(a, g, None) for a, g in zip(ag, goals, strict=True)])
    assert batch.dtype == np.float32 and batch.shape == (len(ag),)
    np.testing.assert_array_equal(batch, one_by_one)
    assert 0 < (batch == 0).sum() < len(batch)  # both outcomes are in the batch
    # the step pays what compute_reward pays, and is_success is its success
    np.testing.assert_array_equal(compute_reward(ag, dg, None), rewards.astype(np.float32))
    np.testing.assert_array_equal(success, rewards == 0)
    # a step's own comparison, in plain floats, is the batch's goal by goal
    d_pos, d_rot = env.get_wrapper_attr("goal_distance")(ag, goals)
    one = [env.get_wrapper_attr("one_distance")(a, g) for a, g in zip(ag, goals, strict=True)]
    np.testing.assert_allclose(one, np.stack([d_pos, d_rot], axis=-1), rtol=0, atol=1e-9)
    # any leading shape, and one pair gives a float
    assert compute_reward(ag.reshape(4, 10, 7), goals.reshape(4, 10, 7), None).shape == (4, 10)
    assert isinstance(compute_reward(ag[0], goals[0], None), float)
    if hand_id == "HandManipulatePenRotate-v1":
        # the defect the wrapper mends: with ignore_z_target_rotation the env writes
        # euler_a[2] = euler_b[2], the third goal of a batch, not each goal's z angle
        assert not np.array_equal(raw.compute_reward(ag, goals, None), one_by_one)
    env.close()


def test_an_orientation_and_its_negated_quaternion_are_one_goal():
    env = gym.make("HandManipulateEggFullBatched-v1")
    compute_reward = env.get_wrapper_attr("compute_reward")
    obs, _ = env.reset(seed=3)
    goal = obs["achieved_goal"].copy()
    flipped = goal.copy()
    flipped[3:] *= -1.0
    assert compute_reward(goal, flipped, None) == 0.0
    assert compute_reward(goal * 2.0, goal * 2.0, None) == 0.0  # any goal, unit or not
    rotated = goal.copy()
    rotated[3:] = quat_mul(goal[3:], np.array([np.cos(0.2), np.sin(0.2), 0.0, 0.0]))
    assert compute_reward(goal, rotated, None) == -1.0  # 0.4 rad: past the 0.1 rad threshold
    env.close()


def test_wrapping_another_env_names_what_it_lacks():
    with pytest.raises(TypeError, match=r"lacks .*target_rotation.*HandManipulate"):
        HandGoalDistance(gym.make("goalenvs/PointReach-v0"))


@pytest.mark.slow
def test_the_batched_pen_passes_the_checker_where_the_env_fails_it():
    env, factory, _ = load("gymnasium_robotics:HandManipulatePenRotate-v1")
    raw = check_goal_env(env, factory=factory)
    assert {"reward.batch", "reward.leading_dims"} <= raw.failed_ids("error"), str(raw)
    env, factory, _ = load("goalenvs.wrappers.hand_goals:HandManipulatePenRotateBatched-v1")
    report = check_goal_env(env, factory=factory)
    assert report.errors == [] and report.warnings == [], str(report)
