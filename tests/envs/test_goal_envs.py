"""The goal-env contract, held for every registered id and its vector twin; `goalenvs list`."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import itertools
import re
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import load_env_creator
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode
from hypothesis import given, settings
from hypothesis import strategies as st

import goalenvs  # registers the ids
from goalenvs.cli import main
from goalenvs.core import GoalEnv, GoalVectorEnv
from goalenvs.registration import ENTRIES
from tests.envs.twin_runs import run_singles_and_vector

# Every registered goalenvs id: adding an env (its file + one registry entry) adds it here.
ALL_IDS = sorted(env_id for env_id in gym.registry if env_id.startswith("goalenvs/"))
# Parking's goals are not reached by random walks, which several checks below rely on
# tests/envs/test_parking.py holds those of its checks.
IDS = [env_id for env_id in ALL_IDS if not env_id.startswith("goalenvs/Parking")]
COMPUTE = ("compute_reward", "compute_terminated", "compute_truncated")


def _is_bits(space: gym.spaces.Box) -> bool:
    return bool(space.low.min() == 0.0 and space.high.max() == 1.0)


def _random_goals(space: gym.spaces.Box, shape: tuple[int, ...], rng: np.random.Generator):
    if _is_bits(space):
        return (rng.random((*shape, *space.shape)) < 0.5).astype(np.float32)
    return rng.uniform(space.low, space.high, (*shape, *space.shape)).astype(np.float32)


def _goals_near(achieved: np.ndarray, space: gym.spaces.Box, rng: np.random.Generator):
    """Desired goals of which a good share is reached from ``achieved``, the rest not."""
    if _is_bits(space):
        desired = achieved.copy()
        change = rng.random(achieved.shape[:-1]) < 0.5
        desired[change] = _random_goals(space, achieved.shape[:-1], rng)[change]
        return desired
    # A jitter of 0.05 lands about 40% of goals within the 0.05 success radius.
    noise = rng.normal(0.0, 0.05, achieved.shape).astype(np.float32)
    return np.clip(achieved + noise, space.low, space.high)


# --------------------------------------------------------------------------- checkers


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_gymnasium_check_env_passes_through_make_and_unwrapped(env_id):
    for render_mode in (None, "rgb_array"):
        env = gym.make(env_id, render_mode=render_mode)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env)
            check_env(env.unwrapped)
        # gymnasium always says a wrapped env differs from its unwrapped one; nothing else.
        messages = [str(w.message) for w in caught]
        assert [m for m in messages if "different from the unwrapped" not in m] == []
        env.close()


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_sb3_check_env_passes_on_unwrapped(env_id):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(env_id).unwrapped
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sb3_check_env(env, warn=True)
    assert [str(w.message) for w in caught] == []


# --------------------------------------------------------------------------- batched goals


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("vector", [False, True])
@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple),
    seed=st.integers(0, 2**31 - 1),
    info_form=st.sampled_from(["none", "dict", "list"]),
)
def test_compute_functions_batch_equals_per_element(env_id, vector, shape, seed, info_form):
    env = gym.make_vec(env_id, num_envs=2) if vector else gym.make(env_id)

    def attr(env, name):
        return getattr(env, name) if vector else env.get_wrapper_attr(name)

    space = attr(env, "single_observation_space" if vector else "observation_space")["desired_goal"]
    rng = np.random.default_rng(seed)
    achieved = _random_goals(space, shape, rng)
    desired = _goals_near(achieved, space, rng)
    n = int(np.prod(shape)) if shape else 1
    info = {"none": None, "dict": {}, "list": [{} for _ in range(n)]}[info_form]
    if info_form == "list" and not shape:
        info = {}
    for name, dtype in zip(COMPUTE, (np.float32, np.bool_, np.bool_), strict=True):
        compute = attr(env, name)
        batch = np.asarray(compute(achieved, desired, info))
        assert batch.shape == shape and batch.dtype == dtype
        flat_a = achieved.reshape(-1, achieved.shape[-1])
        flat_d = desired.reshape(-1, desired.shape[-1])
        each = [np.asarray(compute(a, d, {})) for a, d in zip(flat_a, flat_d, strict=True)]
        assert all(e.shape == () for e in each)
        np.testing.assert_array_equal(batch.reshape(-1), np.array(each, dtype=dtype))
    env.close()


@pytest.mark.parametrize("env_id", IDS)
def test_step_reward_and_terminated_equal_compute_functions_on_long_rollouts(env_id):
    # A wide success radius lets a random walk reach the goals now and then.
    wide = {"PointReach": 0.4, "PointMaze": 3.0, "Push": 0.3}
    family = next((name for name in wide if env_id.startswith(f"goalenvs/{name}")), None)
    env = gym.make(env_id, **({"distance_threshold": wide[family]} if family else {}))
    compute_reward = env.get_wrapper_attr("compute_reward")
    compute_terminated = env.get_wrapper_attr("compute_terminated")
    env.action_space.seed(0)
    obs, info = env.reset(seed=0)
    rewards, successes = set(), 0
    for _ in range(2000):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert reward == compute_reward(obs["achieved_goal"], obs["desired_goal"], info)
        assert terminated == compute_terminated(obs["achieved_goal"], obs["desired_goal"], info)
        assert terminated == info["is_success"]
        rewards.add(reward)
        successes += info["is_success"]
        if terminated or truncated:
            obs, info = env.reset()
    assert len(rewards) > 1
    assert successes > 0


@pytest.mark.parametrize("env_id", IDS)
def test_vector_step_reward_equals_compute_reward(env_id):
    envs = gym.make_vec(env_id, num_envs=64)
    envs.action_space.seed(0)
    obs, info = envs.reset(seed=0)
    ended = np.zeros(64, bool)
    for _ in range(200):
        obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
        goals = obs["achieved_goal"], obs["desired_goal"]
        expected = envs.compute_reward(*goals, info)
        expected[ended] = 0.0  # next-step autoreset: the reset step pays 0
        np.testing.assert_array_equal(reward, expected)
        stepped_terminated = envs.compute_terminated(*goals, info)
        np.testing.assert_array_equal(terminated, stepped_terminated & ~ended)
        np.testing.assert_array_equal(info["is_success"], stepped_terminated)
        ended = terminated | truncated


# --------------------------------------------------------------------------- single == vector


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_vector_twin_follows_single_envs_across_autoresets(env_id):
    # Shorter episodes, so that the mazes' and lots' long ones also cross several autoresets.
    long = env_id.startswith(("goalenvs/PointMaze", "goalenvs/Parking"))
    short = {"max_episode_steps": 25} if long else {}
    episodes_ended = run_singles_and_vector(env_id, seed=3, steps=150, **short)
    assert episodes_ended >= 8  # several autoresets were crossed


def test_vector_twin_follows_single_envs_in_same_step_mode_and_with_other_constants():
    # Each run crosses several autoresets.
    same_step = {"autoreset_mode": AutoresetMode.SAME_STEP}
    ended = [
        run_singles_and_vector("goalenvs/BitFlipping-v0", 11, 120, **same_step),
        run_singles_and_vector("goalenvs/PointReach-v0", 11, 120, **same_step),
        run_singles_and_vector("goalenvs/BitFlipping-v0", 5, 60, n_bits=3, fixed_goal=True),
        # Two bits: a quarter of the random goals equal their start and are redrawn.
        run_singles_and_vector("goalenvs/BitFlipping-v0", 5, 60, n_bits=2),
        # Past 64 bits a pattern spans two random words.
        run_singles_and_vector("goalenvs/BitFlipping-v0", 5, 30, n_bits=70, max_episode_steps=4),
        run_singles_and_vector("goalenvs/PointReach-v0", 5, 60, distance_threshold=0.3, dt=0.1),
        # Crowded and dense at once, which no id registers.
        run_singles_and_vector(
            "goalenvs/ParkingCrowded-v0", 5, 60, reward_type="dense", max_episode_steps=20
        ),
    ]
    assert min(ended[:2]) >= 8 and min(ended) >= 5, ended


# --------------------------------------------------------------------------- reset, seeding


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_seeded_reset_reproduces_start_and_goal_and_seeds_differ(env_id):
    env = gym.make(env_id)
    first, _ = env.reset(seed=42)
    env.step(env.action_space.sample())
    again, _ = env.reset(seed=42)
    fresh, _ = gym.make(env_id).reset(seed=42)  # another instance, the same seed
    np.testing.assert_equal(again, first)
    np.testing.assert_equal(fresh, first)
    # Every other seed gives another start or goal than seed 42 did.
    others = [env.reset(seed=s)[0] for s in range(43, 48)]
    assert all(
        not np.array_equal(o["observation"], first["observation"])
        or not np.array_equal(o["desired_goal"], first["desired_goal"])
        for o in others
    )
    goals = {tuple(env.reset(seed=s)[0]["desired_goal"]) for s in range(20)}
    assert len(goals) > 10


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_vector_reseed_after_steps_reproduces_the_first_reset_and_its_episodes(env_id):
    # Sub-envs draw from their own generators only when they reset: after a reseed the
    # vector env starts over exactly, whatever it drew in between (two autoresets here).
    envs = gym.make_vec(env_id, num_envs=8, max_episode_steps=12)
    envs.action_space.seed(0)
    actions = [envs.action_space.sample() for _ in range(30)]
    runs = [[envs.reset(seed=5)[0]] + [envs.step(a)[0] for a in actions] for _ in range(2)]
    np.testing.assert_equal(runs[1], runs[0])
    assert not np.array_equal(runs[0][0]["desired_goal"], envs.reset(seed=6)[0]["desired_goal"])


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_masked_reset_draws_from_the_reset_sub_envs_generators_and_pins_their_goals(env_id):
    envs = gym.make_vec(env_id, num_envs=4, autoreset_mode="disabled").unwrapped
    mask = np.array([False, True, False, True])
    envs.reset(seed=2)
    before = [rng.bit_generator.state for rng in envs.np_randoms]
    obs, _ = envs.reset(options={"reset_mask": mask})
    after = [rng.bit_generator.state for rng in envs.np_randoms]
    assert [b != a for b, a in zip(before, after, strict=True)] == mask.tolist()
    # ... and sub-env 1 drew what a single env seeded 3 draws for its second episode.
    single = gym.make(env_id)
    single.reset(seed=3)
    np.testing.assert_equal({k: v[1] for k, v in obs.items()}, single.reset()[0])
    # Each reset sub-env is pinned to its own row of the goals given.
    drawn = [envs.reset(seed=s)[0]["desired_goal"].copy() for s in (1, 2)]
    per_env = np.stack([drawn[0][0], drawn[1][0], drawn[0][1], drawn[1][1]])
    obs, _ = envs.reset(seed=0)
    pinned, _ = envs.reset(options={"reset_mask": mask, "goal": per_env})
    np.testing.assert_array_equal(pinned["desired_goal"][mask], per_env[mask])
    np.testing.assert_array_equal(pinned["desired_goal"][~mask], obs["desired_goal"][~mask])
    # A mask naming no sub-env draws nothing and changes nothing.
    before = [rng.bit_generator.state for rng in envs.np_randoms]
    same, _ = envs.reset(options={"reset_mask": np.zeros(4, bool)})
    assert [rng.bit_generator.state for rng in envs.np_randoms] == before
    np.testing.assert_equal(same, pinned)


def test_goalenvs_list_prints_one_line_per_registered_id(capsys):
    assert sorted(goalenvs.ENV_IDS) == ALL_IDS  # the ids these tests hold to the contract
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(goalenvs.ENV_IDS)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_infos_carry_a_bool_is_success_fps_is_an_int_and_step_needs_a_reset(env_id):
    env = gym.make(env_id)
    assert isinstance(env.unwrapped, GoalEnv)
    with pytest.raises(RuntimeError, match="reset"):
        env.unwrapped.step(env.action_space.sample())
    obs, info = env.reset(seed=0)
    assert set(obs) == {"observation", "achieved_goal", "desired_goal"}
    assert type(info["is_success"]) is bool and info["is_success"] is False
    for _ in range(5):
        *_, info = env.step(env.action_space.sample())
        assert type(info["is_success"]) is bool
    assert type(env.metadata["render_fps"]) is int
    envs = gym.make_vec(env_id, num_envs=3)  # the native twin declares its autoreset mode
    assert isinstance(envs.unwrapped, GoalVectorEnv)
    assert envs.reset(seed=0)[0]["desired_goal"].shape[0] == 3
    assert isinstance(envs.metadata["autoreset_mode"], gym.vector.AutoresetMode)
    assert type(envs.metadata["render_fps"]) is int


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_returned_arrays_are_fresh_copies(env_id):
    env = gym.make(env_id)
    obs, _ = env.reset(seed=0)
    keep = {k: v.copy() for k, v in obs.items()}
    for v in obs.values():
        v[...] = 0.75  # a caller scribbling on its observation must not reach the env
    obs2, *_ = env.step(env.action_space.sample())
    assert not any(np.shares_memory(obs2[a], obs2[b]) for a in obs2 for b in obs2 if a < b)
    np.testing.assert_array_equal(obs2["desired_goal"], keep["desired_goal"])
    obs3, *_ = env.step(env.action_space.sample())
    assert not any(np.shares_memory(obs2[k], obs3[k]) for k in obs2)

    envs = gym.make_vec(env_id, num_envs=3, render_mode="rgb_array")
    vobs, _ = envs.reset(seed=0)
    vobs2, reward, *_ = envs.step(envs.action_space.sample())
    assert not any(np.shares_memory(vobs[k], vobs2[k]) for k in vobs)
    # The step's reward is the caller's too: writing to it leaves sub-env 0's frame alone.
    frame = envs.render()
    reward[...] = 123.0
    np.testing.assert_array_equal(envs.render(), frame)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_reset_goal_option_pins_the_goal_and_rejects_goals_outside_the_space(env_id):
    env = gym.make(env_id)
    space = env.observation_space["desired_goal"]
    # Goals the env itself draws are valid for it (a maze's free cells, the table, bits).
    goal, other = (env.reset(seed=s)[0]["desired_goal"].copy() for s in (1, 2))
    obs, _ = env.reset(seed=0, options={"goal": goal})
    np.testing.assert_array_equal(obs["desired_goal"], goal)
    assert not np.array_equal(obs["achieved_goal"], goal)
    outside = goal.copy()
    outside[0] = space.high[0] + 1.0
    value = re.escape(str(outside.astype(np.float64).tolist()))
    with pytest.raises(ValueError, match=rf"options\['goal'\]={value} is outside the goal space"):
        env.reset(options={"goal": outside})
    with pytest.raises(ValueError, match="shape"):
        env.reset(options={"goal": np.zeros(7)})

    envs = gym.make_vec(env_id, num_envs=3)
    per_env = np.stack([goal, other, goal])
    vobs, _ = envs.reset(seed=0, options={"goal": per_env})
    np.testing.assert_array_equal(vobs["desired_goal"], per_env)
    with pytest.raises(ValueError, match="outside the goal space"):
        envs.reset(options={"goal": outside})


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_bad_actions_fail_with_clear_errors(env_id):
    env = gym.make(env_id).unwrapped
    env.reset(seed=0)
    space = env.action_space
    if isinstance(space, gym.spaces.Discrete):
        bad = [(10, ValueError, r"outside Discrete\(10\)"), (-1, ValueError, "outside")]
        bad += [(1.5, TypeError, "integer"), (np.array([1, 2]), TypeError, "integer")]
    else:
        bad = [(np.full(space.shape, v, "f4"), ValueError, "finite") for v in (np.nan, np.inf)]
        bad += [(np.zeros(space.shape[0] + 1, np.float32), ValueError, "shape")]
        bad += [(np.array(["a"] * space.shape[0]), TypeError, "dtype")]
    for action, error, match in bad:
        with pytest.raises(error, match=match):
            env.step(action)

    envs = gym.make_vec(env_id, num_envs=3)
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        envs.step(np.stack([space.sample()] * 2))
    if isinstance(space, gym.spaces.Box):
        bad = np.zeros((3, *space.shape), np.float32)
        bad[1, 0] = np.nan
        with pytest.raises(ValueError, match=r"sub-envs \[1\]"):
            envs.step(bad)


BAD_CONSTANTS = [
    ("PointReach", {"reward_type": "shaped"}, ValueError,
     r"'shaped' is not valid; expected one of \['sparse', 'dense'\]"),
    ("PointReach", {"dt": 0.0}, ValueError, "dt must be > 0"),
    ("PointReach", {"max_speed": -1.0}, ValueError, "max_speed must be > 0"),
    ("PointReach", {"distance_threshold": float("nan")}, ValueError, "distance_threshold"),
    ("PointReach", {"action_scale": "10"}, TypeError, "action_scale must be a number"),
    ("PointReach", {"distance_threshold": 1.5}, ValueError,
     "distance_threshold=1.5 must be < bound"),
    ("PointReach", {"render_mode": "video"}, ValueError, "render_mode='video'"),
    ("BitFlipping", {"n_bits": 0}, ValueError, r"n_bits must be > 0(.0)?, got 0"),
    ("BitFlipping", {"n_bits": -3}, ValueError, r"n_bits must be > 0(.0)?, got -3"),
    ("BitFlipping", {"n_bits": 2.5}, TypeError, "n_bits must be an integer"),
    ("BitFlipping", {"render_mode": "video"}, ValueError, "render_mode='video'"),
    ("Parking", {"reward_type": "shaped"}, ValueError,
     r"reward_type='shaped'.*\['sparse', 'dense'\]"),
    ("Parking", {"n_parked": 28}, ValueError, r"n_parked=28.*<= 27"),
    ("Parking", {"max_speed": 40.0, "substeps": 1}, ValueError, "substeps=1 is too few"),
    ("Parking", {"max_speed": -1.0}, ValueError, "max_speed must be > 0"),
    ("PointMaze", {"max_speed": 20.0}, ValueError, r"max_speed \* dt = 1.0 must be < 1 cell"),
    ("PointMaze", {"reward_type": "shaped"}, ValueError, "reward_type='shaped'"),
    ("PointMaze", {"position_noise": -0.1}, ValueError,
     "position_noise=-0.1 must be a number >= 0"),
    ("PointMaze", {"position_noise": 0.5}, ValueError, r"position_noise=0.5 must be < 0.5"),
    ("Push", {"max_speed": 4.0}, ValueError, "tunnelling"),
    ("Push", {"goal_range": 0.95}, ValueError, "goal_range=0.95 must be <= bound - block_radius"),
    ("Push", {"friction": -1.0}, ValueError, "friction must be > 0"),
]  # fmt: skip


@pytest.mark.parametrize("module", sorted({entry.module for entry in ENTRIES}))
def test_the_params_and_both_faces_declare_the_same_constants_in_order(module):
    # Each constant is written three times (the params, the single env, the twin) so that
    # users and the type checker read every signature; this holds the three alike.
    faces = {"num_envs", "max_episode_steps", "autoreset_mode", "render_mode", "device"}
    env_module = importlib.import_module(module)
    entry = next(entry for entry in ENTRIES if entry.module == module)
    params = next(v for k, v in vars(env_module).items() if k.endswith("Params"))
    declared = [(f.name, f.default) for f in dataclasses.fields(params) if f.init]
    for face in (entry.single, entry.vector):
        signature = inspect.signature(getattr(env_module, face)).parameters.values()
        taken = [(p.name, p.default) for p in signature if p.name not in faces]
        assert taken == declared, face


@pytest.mark.parametrize(("family", "kwargs", "error", "match"), BAD_CONSTANTS)
def test_bad_constants_are_rejected_by_both_faces_naming_the_value(family, kwargs, error, match):
    spec = gym.spec(f"goalenvs/{family}-v0")
    for entry_point, extra in ((spec.entry_point, {}), (spec.vector_entry_point, {"num_envs": 2})):
        with pytest.raises(error, match=match):
            load_env_creator(entry_point)(**extra, **kwargs)


# --------------------------------------------------------------------------- rendering


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_rgb_array_frames_are_uint8_not_blank_change_with_steps_and_the_twin_draws_alike(env_id):
    env = gym.make(env_id, render_mode="rgb_array")
    env.reset(seed=1)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 5
    env.action_space.seed(1)
    for _ in range(3):
        env.step(env.action_space.sample())
        next_frame = env.render()
        assert next_frame.shape == frame.shape
        assert not np.array_equal(next_frame, frame)
        frame = next_frame
    env.close()
    # The vector twin draws its first sub-env as the single env draws itself.
    envs = gym.make_vec(env_id, num_envs=3, render_mode="rgb_array")
    single = gym.make(env_id, render_mode="rgb_array")
    envs.reset(seed=7)
    single.reset(seed=7)
    single.action_space.seed(0)
    for _ in range(3):
        action = single.action_space.sample()
        envs.step(np.stack([action] * 3))
        single.step(action)
    np.testing.assert_array_equal(envs.render(), single.render())
    envs.close()


# The action of the up and the left arrow; down and right are their opposites.
ARROWS = {"PointReach": ((0, 1), (-1, 0)), "PointMaze": ((0, 1), (-1, 0)),
          "Push": ((0, 1), (-1, 0)), "Parking": ((1, 0), (0, 1))}  # fmt: skip


@pytest.mark.parametrize("family", ARROWS)
def test_arrow_keys_give_float32_actions_and_two_keys_their_sum(family):
    import pygame as pg

    up, left = (np.array(a, np.float32) for a in ARROWS[family])
    one = {pg.K_UP: up, pg.K_DOWN: -up, pg.K_LEFT: left, pg.K_RIGHT: -left}
    expected = {(k,): a for k, a in one.items()}
    for vertical, horizontal in itertools.product((pg.K_UP, pg.K_DOWN), (pg.K_LEFT, pg.K_RIGHT)):
        expected[tuple(sorted((vertical, horizontal)))] = one[vertical] + one[horizontal]
    keys = gym.make(f"goalenvs/{family}-v0").get_wrapper_attr("get_keys_to_action")()
    assert keys.keys() == expected.keys()
    for combo, action in keys.items():
        assert action.dtype == np.float32
        np.testing.assert_array_equal(action, expected[combo])


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_keys_to_action_works_with_gymnasium_play(env_id):
    from gymnasium.utils.play import PlayableGame

    env = gym.make(env_id, render_mode="rgb_array")
    mapping = env.get_wrapper_attr("get_keys_to_action")()
    assert mapping
    env.reset(seed=0)
    for keys, action in mapping.items():
        assert isinstance(keys, tuple) and all(isinstance(k, int) for k in keys)
        assert env.action_space.contains(action)
    game = PlayableGame(env)  # reads get_keys_to_action as gymnasium.utils.play.play does
    assert game.relevant_keys == {k for keys in mapping for k in keys}
    env.close()
