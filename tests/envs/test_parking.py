"""Parking: bicycle-model physics, collisions, reward consistency, single == vector, rendering."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import goalenvs  # noqa: F401  (registers the ids)
from goalenvs.envs.parking import ParkingEnv, ParkingParams, advance, evaluate
from goalenvs.envs.parking_lot import (
    N_SPOTS,
    POSITION_SCALE,
    SPOT_CENTERS,
    SPOT_GOALS,
    SPOT_X,
    VELOCITY_SCALE,
    WALL_X,
)

COAST = np.zeros(2, dtype=np.float32)


def drive(env: ParkingEnv, action, steps: int):
    """Steps ``steps`` times with one action; returns the per-step results."""
    action = np.asarray(action, dtype=np.float32)
    return [env.step(action) for _ in range(steps)]


def pose(env: ParkingEnv) -> tuple[float, float, float, float, float]:
    """The exact float64 state (x, y, cos h, sin h, speed)."""
    return tuple(float(value) for value in env._state)


# --------------------------------------------------------------------------- physics


def test_coasting_straight_covers_speed_times_time():
    env = ParkingEnv()
    env.reset(seed=0, options={"car": (-10.0, 0.0, 0.0, 5.0)})
    obs = drive(env, COAST, 10)[-1][0]
    x, y, _, _, v = pose(env)
    assert x == pytest.approx(-10.0 + 5.0 * 0.2 * 10, abs=1e-9)
    assert y == pytest.approx(0.0, abs=1e-12)
    assert v == 5.0
    assert obs["observation"][0] * POSITION_SCALE == pytest.approx(0.0, abs=1e-4)
    assert obs["observation"][2] * VELOCITY_SCALE == pytest.approx(5.0)


def test_full_throttle_accelerates_at_five_and_stops_at_the_speed_limit():
    env = ParkingEnv()
    env.reset(seed=0, options={"car": (-20.0, 0.0, 0.0, 0.0)})
    drive(env, (1.0, 0.0), 5)  # 1 s at 5 m/s^2
    x, _, _, _, v = pose(env)
    assert v == pytest.approx(5.0)
    assert x == pytest.approx(-20.0 + 0.5 * 5.0 * 1.0**2, abs=1e-9)
    drive(env, (1.0, 0.0), 10)
    assert pose(env)[4] == 10.0


def test_reverse_drives_backwards_and_turns_the_other_way():
    env = ParkingEnv()
    env.reset(seed=0, options={"car": (0.0, 0.0, 0.0, 0.0)})
    drive(env, (-1.0, 0.0), 5)
    x, y, _, _, v = pose(env)
    assert v == pytest.approx(-5.0)
    assert x == pytest.approx(-2.5, abs=1e-9) and y == pytest.approx(0.0, abs=1e-12)
    # Steering left while reversing swings the heading clockwise.
    drive(env, (0.0, 1.0), 3)
    _, _, c, s, _ = pose(env)
    assert math.atan2(s, c) < -0.1


def test_full_lock_follows_the_bicycle_model_circle():
    env = ParkingEnv()
    speed = 4.0
    env.reset(seed=0, options={"car": (0.0, 0.0, 0.0, speed)})
    beta = math.atan(0.5 * math.tan(math.radians(45.0)))
    radius = 2.5 / math.sin(beta)  # (length / 2) / sin(beta) = 5.59 m
    # Turning left, the centre of the circle lies a radius to the left of the velocity.
    centre = np.array([-radius * math.sin(beta), radius * math.cos(beta)])
    distances = []
    for _ in range(25):
        env.step(np.array([0.0, 1.0], dtype=np.float32))
        x, y, *_ = pose(env)
        distances.append(math.hypot(x - centre[0], y - centre[1]))
    np.testing.assert_allclose(distances, radius, rtol=1e-9)
    # Heading rate v sin(beta) / (L/2): after 25 steps (5 s) the heading turned 5 v / R.
    _, _, c, s, _ = pose(env)
    turned = 5.0 * speed / radius
    assert math.atan2(s, c) == pytest.approx(math.atan2(math.sin(turned), math.cos(turned)))


def test_heading_stays_normalised_over_long_random_driving():
    env = ParkingEnv()
    env.reset(seed=1, options={"car": (0.0, 0.0, 0.3, 0.0)})
    rng = np.random.default_rng(0)
    for _ in range(400):
        action = rng.uniform(-1, 1, 2).astype(np.float32)
        action[0] *= 0.2  # stay slow so that the car stays inside the walls
        obs, *_ = env.step(action)
        _, _, c, s, _ = pose(env)
        assert abs(c * c + s * s - 1.0) < 1e-14
    assert obs["observation"][4] ** 2 + obs["observation"][5] ** 2 == pytest.approx(1.0, abs=1e-6)


# --------------------------------------------------------------------------- collisions


def test_wall_crash_is_detected_on_the_step_the_car_reaches_the_wall():
    env = ParkingEnv()
    # Front bumper at x = 27.5 + 2.5 = 30, 5 m from the wall, closing at 1 m per step:
    # it touches the wall after step 5 and crosses it on step 6.
    env.reset(seed=0, options={"car": (WALL_X - 7.5, 0.0, 0.0, 5.0)})
    for step in range(1, 7):
        obs, reward, terminated, _, info = env.step(COAST)
        assert terminated == (step == 6) and info["crashed"] == (step == 6)
    assert reward == -1.0 - 50.0
    assert env.compute_reward(obs["achieved_goal"], obs["desired_goal"], info) == reward
    assert env.compute_terminated(obs["achieved_goal"], obs["desired_goal"], info)


def full_lot(**kwargs) -> tuple[ParkingEnv, int]:
    """An env with every spot but the goal (spot 0) occupied."""
    env = ParkingEnv(n_parked=N_SPOTS - 1, **kwargs)
    env.reset(seed=0, options={"goal": SPOT_GOALS[0]})
    return env, 0


def test_parked_car_crash_is_detected_on_the_right_step():
    env, _ = full_lot()
    assert env._parked.sum() == N_SPOTS - 1 and not env._parked[0]
    # Drive straight up into upper spot 3 (parked car spans y in [11.5, 16.5]); the front
    # starts at y = 7.5 and closes 1 m per step, touching after step 4, overlapping on 5.
    column_x = float(SPOT_X[3])
    env.reset(seed=0, options={"goal": SPOT_GOALS[0], "car": (column_x, 5.0, math.pi / 2, 5.0)})
    results = drive(env, COAST, 5)
    assert [r[2] for r in results] == [False, False, False, False, True]
    assert results[-1][4]["crashed"] and results[-1][1] == -51.0


def test_driving_beside_parked_cars_is_not_a_crash():
    env, _ = full_lot()
    # Along the lane, 1 m from the parked cars' bumpers (lower row bumpers at y = -11.5).
    env.reset(seed=0, options={"goal": SPOT_GOALS[0], "car": (-25.0, -9.5, 0.0, 5.0)})
    results = drive(env, COAST, 10)
    assert not any(r[2] for r in results)


@pytest.mark.parametrize("spot", [0, 20])
def test_car_parked_exactly_in_its_spot_is_a_success_not_a_crash(spot):
    env = ParkingEnv(n_parked=N_SPOTS - 1)
    heading = math.pi / 2 if SPOT_CENTERS[spot, 1] > 0 else -math.pi / 2
    x, y = SPOT_CENTERS[spot]
    _, info = env.reset(seed=0, options={"goal": SPOT_GOALS[spot], "car": (x, y, heading, 0.0)})
    assert env._parked.sum() == N_SPOTS - 1 and not env._parked[spot]
    assert info == {"is_success": True, "crashed": False}
    obs, reward, terminated, _, info = env.step(COAST)
    assert reward == 0.0 and not terminated
    assert info == {"is_success": True, "crashed": False}
    np.testing.assert_allclose(obs["achieved_goal"], obs["desired_goal"], atol=1e-6)


def test_success_threshold_in_metres_and_degrees():
    # The documented tolerances: 0.72 m sideways, 2.4 m deep, or 34 degrees alone.
    env = ParkingEnv()
    goal = SPOT_GOALS[20].copy()

    def success(dx=0.0, dy=0.0, dh_deg=0.0):
        heading = math.pi / 2 + math.radians(dh_deg)
        achieved = goal.copy()
        achieved[0] += dx / POSITION_SCALE
        achieved[1] += dy / POSITION_SCALE
        achieved[4:] = math.cos(heading), math.sin(heading)
        return env.compute_reward(achieved, goal, None) == 0.0

    assert success(dx=0.71) and not success(dx=0.73)
    assert success(dy=2.39) and not success(dy=2.41)
    assert success(dh_deg=33.0) and not success(dh_deg=35.0)
    assert success(dx=0.3, dy=1.0, dh_deg=6.0) and not success(dx=0.3, dy=1.0, dh_deg=8.0)


# --------------------------------------------------------------------------- consistency


def random_rollout(env, steps: int, seed: int):
    """Yields (obs, reward, terminated, info) of random driving, resetting when done."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(rng.uniform(-1, 1, 2).astype("f4"))
        yield obs, reward, terminated, info
        if terminated or truncated:
            env.reset()


@pytest.mark.parametrize("env_id", ["goalenvs/ParkingCrowded-v0", "goalenvs/ParkingDense-v0"])
def test_step_reward_equals_compute_reward_on_every_step_crashes_included(env_id):
    env = gym.make(env_id)
    compute_reward = env.get_wrapper_attr("compute_reward")
    compute_terminated = env.get_wrapper_attr("compute_terminated")
    crashes = 0
    for obs, reward, terminated, info in random_rollout(env, 1500, seed=3):
        ag, dg = obs["achieved_goal"], obs["desired_goal"]
        assert compute_reward(ag, dg, info) == reward
        assert compute_terminated(ag, dg, info) == terminated
        assert isinstance(info["is_success"], bool)
        crashes += info["crashed"]
    assert crashes >= 5


def test_vector_step_reward_equals_compute_reward_and_sb3_info_drops_the_crash():
    envs = gym.make_vec("goalenvs/ParkingCrowded-v0", num_envs=64)
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    crashed_total = 0
    live = np.ones(64, dtype=bool)
    for _ in range(60):
        obs, reward, terminated, truncated, info = envs.step(rng.uniform(-1, 1, (64, 2)))
        ag, dg = obs["achieved_goal"], obs["desired_goal"]
        np.testing.assert_array_equal(envs.compute_reward(ag, dg, info)[live], reward[live])
        np.testing.assert_array_equal(envs.compute_terminated(ag, dg, info), terminated)
        if info["crashed"].any():
            crashed_total += info["crashed"].sum()
            # stable-baselines3's HER buffer passes [{}] * B: crashed defaults to False.
            sb3_style = envs.compute_reward(ag, dg, [{}] * 64)
            crash = info["crashed"] & live
            np.testing.assert_array_equal(sb3_style[crash], reward[crash] + 50.0)
        # Sub-envs that ended reset on the next step, which reports reward 0 by convention.
        live = ~(terminated | truncated)
    assert crashed_total > 0


goal_batch = hnp.arrays(
    np.float32, st.tuples(st.integers(1, 6), st.just(6)), elements=st.floats(-1, 1, width=32)
)


@settings(max_examples=40, deadline=None)
@given(goals=goal_batch, crashed_seed=st.integers(0, 2**16), dense=st.booleans())
def test_compute_functions_batch_equals_per_element(goals, crashed_seed, dense):
    env = ParkingEnv(reward_type="dense" if dense else "sparse")
    desired = np.roll(goals, 1, axis=0) * 0.5
    crashed = np.random.default_rng(crashed_seed).random(len(goals)) < 0.5
    batch_info = {"crashed": crashed}
    list_info = [{"crashed": bool(c)} for c in crashed]
    rewards = env.compute_reward(goals, desired, batch_info)
    assert rewards.dtype == np.float32 and rewards.shape == (len(goals),)
    np.testing.assert_array_equal(env.compute_reward(goals, desired, list_info), rewards)
    for i in range(len(goals)):
        one = {"crashed": bool(crashed[i])}
        assert env.compute_reward(goals[i], desired[i], one) == rewards[i]
        assert env.compute_terminated(goals[i], desired[i], one) == crashed[i]
    np.testing.assert_array_equal(env.compute_terminated(goals, desired, list_info), crashed)


# --------------------------------------------------------------------------- bad input


def test_bad_input_fails_with_clear_messages():
    env = ParkingEnv()
    env.reset(seed=0)
    np.testing.assert_array_equal(env.step(np.array([5.0, -3.0]))[0]["desired_goal"], env._goal)
    with pytest.raises(ValueError, match="outside the walls"):
        env.reset(options={"car": (40.0, 0.0, 0.0, 0.0)})
    with pytest.raises(ValueError, match=r"beyond max_speed=10\.0"):
        env.reset(options={"car": (0.0, 0.0, 0.0, 12.0)})


# --------------------------------------------------------------------------- rendering


def pixel(x: float, y: float) -> tuple[int, int]:
    """(row, column) of a world point in the 576 x 352 frame (8 px/m, walls at +-36, +-22)."""
    return int((22.0 - y) * 8), int((x + 36.0) * 8)


def test_rgb_frame_shows_goal_spot_and_car_at_their_pixels_and_a_crash_in_red():
    env = ParkingEnv(render_mode="rgb_array", n_parked=10)
    spot = 17  # upper row, column 3
    env.reset(seed=0, options={"goal": SPOT_GOALS[spot], "car": (-10.0, 0.0, 0.0, 0.0)})
    frame = env.render()
    assert frame.shape == (352, 576, 3) and frame.dtype == np.uint8
    sx, sy = SPOT_CENTERS[spot]
    goal_green = (90, 200, 90)
    assert tuple(frame[pixel(sx - 1.5, sy - 3.5)]) == goal_green
    assert tuple(frame[pixel(sx + 1.5, sy + 3.5)]) == goal_green
    assert tuple(frame[pixel(-10.0, 0.0)]) == (40, 110, 230)  # the car's body
    assert tuple(frame[pixel(-10.0 + 2.4, 0.0)]) == (255, 220, 0)  # its heading mark, front
    assert tuple(frame[pixel(-10.0 - 2.0, 0.0)]) == (40, 110, 230)  # no mark at the rear
    red = (230, 30, 30)
    assert not np.all(frame == red, axis=-1).any()
    env.reset(seed=0, options={"car": (WALL_X - 3.0, 0.0, 0.0, 5.0)})
    *_, info = env.step(COAST)
    assert info["crashed"]
    frame = env.render()
    assert tuple(frame[pixel(WALL_X - 2.0, 0.0)]) == red
    assert np.all(frame == red, axis=-1).sum() > 500


# --------------------------------------------------------------------------- kernel


def test_kernel_gives_the_same_numbers_on_torch_tensors_as_on_numpy():
    torch = pytest.importorskip("torch")
    params = ParkingParams(n_parked=20, reward_type="dense")
    rng = np.random.default_rng(0)
    n = 512
    heading = rng.uniform(-np.pi, np.pi, n)
    x, y, speed = rng.uniform(-33, 33, n), rng.uniform(-19, 19, n), rng.uniform(-10, 10, n)
    state = (x, y, np.cos(heading), np.sin(heading), speed)
    actions = rng.uniform(-1, 1, (n, 2))
    actions[:8, 1] = 0.0  # straight driving takes the chord's 0 / 0 branch
    goals = SPOT_GOALS[rng.integers(0, N_SPOTS, n)]
    parked = rng.random((n, N_SPOTS)) < 0.7

    def run(xp, convert):
        moved = advance(tuple(convert(a) for a in state), convert(actions), params, xp)
        outcome = evaluate(
            moved, convert(goals), convert(parked), convert(SPOT_CENTERS), params, xp
        )
        return [np.asarray(a) for a in moved], [np.asarray(a) for a in outcome]

    np_state, np_outcome = run(np, np.asarray)
    torch_state, torch_outcome = run(torch, torch.from_numpy)
    for ours, theirs in zip(np_state, torch_state, strict=True):
        np.testing.assert_allclose(theirs, ours, rtol=0, atol=1e-12)
    achieved, reward, success, crashed = np_outcome
    np.testing.assert_allclose(torch_outcome[0], achieved, rtol=0, atol=1e-6)
    assert torch_outcome[0].dtype == achieved.dtype == np.float32
    np.testing.assert_allclose(torch_outcome[1], reward, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(torch_outcome[3], crashed)
    # Success is a threshold on the distance: no car of this draw sits on the boundary.
    np.testing.assert_array_equal(torch_outcome[2], success)
    # The draw exercises both outcomes of the crash test, walls and parked cars.
    assert 0 < crashed.sum() < n
    again = ParkingEnv(reward_type="dense").compute_reward(
        achieved, goals.astype(np.float32), {"crashed": crashed}
    )
    np.testing.assert_array_equal(reward, again)
