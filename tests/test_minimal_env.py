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


class _BatchedLine(minimal_env.LineVectorEnv):
    """The example's twin with a batched draw: the reset's other path."""

    def _draw_episodes(self, rngs, goal=None):
        goals = np.array([minimal_env.draw_goal(rng, self.params) for rng in rngs])
        goals = goals if goal is None else np.broadcast_to(goal, goals.shape)
        return np.zeros((len(rngs), 1), np.float32), goals


def test_reset_writes_drawn_episodes_to_their_rows_one_by_one_or_batched():
    one_by_one, batched = minimal_env.LineVectorEnv(5), _BatchedLine(5)
    assert one_by_one._draws_one_by_one and not batched._draws_one_by_one
    for twin in (one_by_one, batched):
        twin.reset(seed=3)
        twin.step(np.full((5, 1), 0.25, np.float32))  # every pos at 0.25
    mask = np.array([False, True, False, True, False])
    pinned = np.array([[0.1], [0.2], [0.3], [0.4], [0.5]], np.float32)
    for options in ({"reset_mask": mask}, {"reset_mask": mask, "goal": pinned}):
        states = []
        for twin in (one_by_one, batched):
            before = twin.goal.copy()
            obs, _ = twin.reset(options=options)
            np.testing.assert_array_equal(obs["achieved_goal"][:, 0], np.where(mask, 0, 0.25))
            np.testing.assert_array_equal(obs["desired_goal"][~mask], before[~mask])
            if "goal" in options:  # each reset sub-env gets its own row of the goals
                np.testing.assert_array_equal(obs["desired_goal"][mask], pinned[mask])
            else:
                assert (obs["desired_goal"][mask] != before[mask]).all()
            states.append((twin.pos.copy(), twin.goal.copy()))
        for a, b in zip(*states, strict=True):  # the same draws from the same generators
            np.testing.assert_array_equal(a, b)


def test_default_draw_episodes_stacks_the_one_episode_draw():
    twin = minimal_env.LineVectorEnv(2)
    rngs = [np.random.default_rng(s) for s in (0, 1)]
    pos, goal = twin._draw_episodes(rngs, goal=np.array([[0.5], [-0.5]], np.float32))
    assert pos.shape == goal.shape == (2, 1) and pos.dtype == goal.dtype == np.float32
    np.testing.assert_array_equal(goal[:, 0], [0.5, -0.5])
    _, drawn = twin._draw_episodes([np.random.default_rng(s) for s in (0, 1)])
    expected = [minimal_env.draw_goal(np.random.default_rng(s), twin.params) for s in (0, 1)]
    np.testing.assert_array_equal(drawn, np.array(expected))
