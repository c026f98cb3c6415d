"""PointReach: dynamics, walls, rewards, constants and drawing."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import goalenvs  # noqa: F401  (registers the ids)
from goalenvs.envs.point_reach import (
    PointReachEnv,
    PointReachParams,
    PointReachVectorEnv,
    draw_episodes,
)


def _env_at(position, goal, **kwargs) -> PointReachEnv:
    """An env reset with ``goal``, its point moved to ``position`` at rest."""
    env = PointReachEnv(**kwargs)
    env.reset(seed=0, options={"goal": goal})
    env._position[0] = position
    env._velocity[0] = 0.0
    return env


def test_one_step_from_rest_follows_semi_implicit_euler():
    env = _env_at([0.0, 0.0], [0.9, 0.9])
    obs, *_ = env.step(np.array([1.0, -0.5], np.float32))
    # v = a * action_scale * dt = (0.5, -0.25); p = v * dt
    np.testing.assert_allclose(obs["observation"], [0.025, -0.0125, 0.5, -0.25], rtol=1e-6)
    np.testing.assert_array_equal(obs["achieved_goal"], obs["observation"][:2])


def test_speed_is_capped_at_max_speed():
    env = _env_at([-0.9, -0.9], [0.9, 0.9], max_speed=0.7)
    for _ in range(8):
        obs, *_ = env.step(np.array([1.0, 1.0], np.float32))
        assert np.hypot(*obs["observation"][2:]) <= 0.7 + 1e-6
    np.testing.assert_allclose(np.hypot(*obs["observation"][2:]), 0.7, rtol=1e-5)


def test_wall_stops_the_point_and_kills_the_velocity_into_it():
    env = _env_at([0.99, 0.0], [-0.5, 0.5])
    env._velocity[0] = [1.0, 0.0]
    obs, *_ = env.step(np.array([1.0, 1.0], np.float32))
    x, y, vx, vy = obs["observation"]
    assert x == 1.0 and vx == 0.0
    assert vy > 0 and y > 0  # it slides along the wall
    obs, *_ = env.step(np.array([-1.0, 0.0], np.float32))
    assert obs["observation"][0] < 1.0  # and leaves it when pushed away


def test_sparse_and_dense_rewards_and_success_radius():
    sparse = PointReachEnv()
    dense = PointReachEnv(reward_type="dense")
    achieved = np.array([[0.0, 0.0], [0.0, 0.0], [0.3, 0.4]], np.float32)
    desired = np.array([[0.0, 0.04], [0.0, 0.06], [0.0, 0.0]], np.float32)
    np.testing.assert_array_equal(sparse.compute_reward(achieved, desired, None), [0, -1, -1])
    np.testing.assert_allclose(dense.compute_reward(achieved, desired, None), [-0.04, -0.06, -0.5])
    np.testing.assert_array_equal(dense.compute_terminated(achieved, desired, {}), [1, 0, 0])
    for env in (sparse, dense):  # float32 whatever the goals' float type
        assert env.compute_reward(achieved.astype(np.float64), desired, None).dtype == np.float32
        assert env.compute_reward(achieved[0], desired[0], None).dtype == np.float32


def test_registered_ids_truncate_after_fifty_steps():
    env = gym.make("goalenvs/PointReach-v0")
    env.reset(seed=0, options={"goal": [0.9, 0.9]})
    env.unwrapped._position[0] = [-0.9, -0.9]
    for step in range(1, 51):
        *_, terminated, truncated, _ = env.step(np.zeros(2, np.float32))
        assert not terminated and truncated == (step == 50)
    assert gym.make_vec("goalenvs/PointReach-v0", num_envs=2).max_episode_steps == 50


def test_every_constant_is_an_argument_of_both_faces():
    kwargs = dict(action_scale=4.0, dt=0.1, max_speed=2.0, distance_threshold=0.2, bound=3.0)
    env = PointReachEnv(**kwargs)
    envs = PointReachVectorEnv(num_envs=2, **kwargs)
    for space in (env.observation_space, envs.single_observation_space):
        np.testing.assert_array_equal(space["observation"].high, [3.0, 3.0, 2.0, 2.0])
        np.testing.assert_array_equal(space["desired_goal"].high, [3.0, 3.0])
    env.reset(seed=0, options={"goal": [2.5, 2.5]})
    env._position[0] = 0.0
    obs, *_ = env.step(np.array([1.0, 0.0], np.float32))
    np.testing.assert_allclose(obs["observation"], [0.04, 0.0, 0.4, 0.0], rtol=1e-6)
    goals = [env.reset(seed=s)[0]["desired_goal"] for s in range(200)]
    assert np.abs(goals).max() > 2.0  # goals fill the larger arena


def test_draw_episodes_read_four_uniforms_then_two_per_redraw_batched_or_alone():
    params = PointReachParams(distance_threshold=0.8)  # many starts fall inside the goal's radius
    batched = draw_episodes([np.random.default_rng(s) for s in range(40)], params)
    redraws = 0
    for seed in range(40):
        alone = draw_episodes([np.random.default_rng(seed)], params)
        np.testing.assert_array_equal(
            np.stack([batched[0][seed], batched[1][seed]]), np.stack(alone)[:, 0]
        )
        points = (np.random.default_rng(seed).random(4) * 2.0 - 1.0).astype(np.float32)
        np.testing.assert_array_equal(alone[0][0], points[:2])
        if np.hypot(*(points[:2] - points[2:])) >= 0.8:
            np.testing.assert_array_equal(alone[1][0], points[2:])
        else:
            redraws += 1
    assert (np.hypot(*(batched[0] - batched[1]).T) >= 0.8).all()
    assert redraws >= 5
    # A pinned goal keeps its value; the starts are redrawn instead.
    start, goal = draw_episodes([np.random.default_rng(s) for s in range(40)], params, [0.5, 0.5])
    np.testing.assert_array_equal(goal, np.full((40, 2), 0.5, np.float32))
    assert (np.hypot(*(start - goal).T) >= 0.8).all()


# --------------------------------------------------------------------------- rendering


def test_frame_shows_goal_and_point_at_their_pixels_and_a_trail():
    env = PointReachEnv(render_mode="rgb_array")
    env.reset(seed=0, options={"goal": [0.5, -0.5]})
    env._position[0] = [-0.5, 0.3]
    for _ in range(6):
        env.step(np.array([1.0, 0.0], np.float32))
    frame = env.render()
    assert frame.shape == (440, 400, 3)
    position = env._position[0]
    column, row = env.world_to_pixel(env._goal[0])
    assert tuple(frame[row, column]) == (120, 210, 140)  # goal disc
    column, row = env.world_to_pixel(position)
    assert tuple(frame[row, column]) == (40, 90, 200)  # the point
    # the velocity arrow points right, ahead of the point
    ahead = env.world_to_pixel(position + np.array([0.12, 0.0]))
    assert tuple(frame[ahead[1], ahead[0]]) == (230, 120, 20)
    # the trail: a dot where the point was three steps ago, paler than the point
    column, row = env.world_to_pixel(env._trail[-4])
    trail = frame[row, column].astype(int)
    assert tuple(trail) not in {(40, 90, 200), (246, 246, 240)}
    assert trail[2] > trail[0]  # bluish
