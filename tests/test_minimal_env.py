"""examples/minimal_env.py is a correct goal env: the checker finds nothing, the twin matches."""

import importlib.util
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from goalenvs.checker import check_goal_env

_PATH = Path(__file__).resolve().parents[1] / "examples" / "minimal_env.py"
_SPEC = importlib.util.spec_from_file_location("minimal_env", _PATH)
minimal_env = importlib.util.module_from_spec(_SPEC)
sys.modules["minimal_env"] = minimal_env  # dataclasses look their module up there
_SPEC.loader.exec_module(minimal_env)


def test_checker_finds_no_errors_and_no_warnings():
    report = check_goal_env(
        gym.wrappers.TimeLimit(minimal_env.LineEnv(), minimal_env.MAX_STEPS),
        factory=lambda: gym.wrappers.TimeLimit(minimal_env.LineEnv(), minimal_env.MAX_STEPS),
    )
    print(report)
    assert report.errors == [] and report.warnings == []


def test_twin_sub_env_i_follows_single_env_seeded_s_plus_i():
    twin = minimal_env.LineVectorEnv(3)
    obs, _ = twin.reset(seed=7)
    singles = [minimal_env.LineEnv() for _ in range(3)]
    firsts = [env.reset(seed=7 + i)[0] for i, env in enumerate(singles)]
    actions = np.array([[0.3], [-0.2], [0.1]], np.float32)
    tobs, treward, tterm, _, _ = twin.step(actions)
    for i, env in enumerate(singles):
        np.testing.assert_array_equal(obs["desired_goal"][i], firsts[i]["desired_goal"])
        sobs, sreward, sterm, _, _ = env.step(actions[i])
        np.testing.assert_array_equal(tobs["achieved_goal"][i], sobs["achieved_goal"])
        assert treward[i] == sreward and tterm[i] == sterm
    np.testing.assert_allclose(tobs["achieved_goal"], actions)


def test_kernel_gives_the_same_numbers_on_torch_as_on_numpy():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    position = rng.uniform(-1, 1, (64, 1)).astype(np.float32)
    action = rng.uniform(-1.5, 1.5, (64, 1)).astype(np.float32)
    goal = rng.uniform(-1, 1, (64, 1)).astype(np.float32)
    moved = minimal_env.line_step(position, action, 1.0, np)
    torch_moved = minimal_env.line_step(
        torch.from_numpy(position), torch.from_numpy(action), 1.0, torch
    )
    np.testing.assert_array_equal(torch_moved.numpy(), moved)
    assert np.abs(moved).max() == 1.0  # some points stop at the ends
    success = minimal_env.reached(moved, goal, 0.3, np)
    torch_success = minimal_env.reached(torch_moved, torch.from_numpy(goal), 0.3, torch)
    np.testing.assert_array_equal(torch_success.numpy(), success)
    reward = minimal_env.sparse_reward(success, np)
    assert reward.dtype == np.float32 and set(np.unique(reward)) == {-1.0, 0.0}
    np.testing.assert_array_equal(minimal_env.sparse_reward(torch_success, torch).numpy(), reward)
