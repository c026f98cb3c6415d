"""The native twins on torch: the same env as the numpy twin, on any device.

Every test runs on the CPU build of torch; its CUDA variant skips where no GPU is present.
"""

from __future__ import annotations

import json
import pickle
import re

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import goalenvs  # noqa: F401  (registers the ids)
from goalenvs.checker import check_goal_env
from goalenvs.cli import main
from goalenvs.core import check_tensor_actions
from goalenvs.core.backend import clear_points, info_tensor
from goalenvs.envs.parking_lot import SPOT_GOALS, START_HALF_X, START_HALF_Y
from goalenvs.wrappers.torch_envs import sub_env_view

torch = pytest.importorskip("torch")

NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
DEVICES = ["cpu", pytest.param("cuda", marks=NO_CUDA)]
COMPUTE = {"compute_reward": torch.float32, "compute_terminated": torch.bool}
COMPUTE["compute_truncated"] = torch.bool

# Each family's state, as attributes (what "the same state" copies across backends), and
# where its success lies (setting the goal there makes the next step succeed). Parking's
# state is the tuple (x, y, cos, sin, speed) and its cached evaluation.
FAMILIES = {
    "BitFlipping": (("_state", "_goal"), "_state"),
    "PointReach": (("_position", "_velocity", "_goal"), "_position"),
    "PointMaze": (("_position", "_velocity", "_goal"), "_position"),
    "Push": (("_pusher", "_pusher_velocity", "_block", "_block_velocity", "_goal"), "_block"),
    "Parking": (("_state", "_goal", "_parked", "_achieved", "_crashed"), "_achieved"),
}
VARIANTS = """BitFlipping BitFlippingContinuous PointReach PointReachDense PointMaze
    PointMazeDense Push PushDense Parking ParkingCrowded ParkingDense"""
IDS = [f"goalenvs/{name}-v0" for name in VARIANTS.split()]


def _family(env_id: str) -> tuple[tuple[str, ...], str]:
    return next(value for family, value in FAMILIES.items() if family in env_id)


def _copy_state(env_id: str, src, dst, index) -> None:
    """Copies sub-envs ``index`` of the numpy twin ``src`` into the torch twin ``dst``."""
    rows = torch.as_tensor(index, dtype=torch.int64, device=dst.device)
    for name in _family(env_id)[0]:
        source, target = getattr(src, name), getattr(dst, name)
        if not isinstance(source, tuple):  # a tuple of state arrays, or one array
            source, target = (source,), (target,)
        for a, b in zip(source, target, strict=True):
            b[rows] = torch.as_tensor(a[index], device=dst.device)
    dst.elapsed_steps[rows] = torch.as_tensor(src.elapsed_steps[index], device=dst.device)


def _actions(space, n, rng):
    """``n`` random actions of ``space``; Box actions reach 1.5x the bounds (clipped)."""
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, n)
    return rng.uniform(1.5 * space.low, 1.5 * space.high, (n, *space.shape)).astype(np.float32)


def _numpy(value):
    return value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("env_id", IDS)
def test_device_twin_returns_tensors_on_its_device(env_id, device):
    env = gym.make_vec(env_id, num_envs=3, device=device)
    obs, info = env.reset(seed=0)
    assert set(obs) == {"observation", "achieved_goal", "desired_goal"}
    actions = _actions(env.single_action_space, 3, np.random.default_rng(0))
    obs, reward, terminated, truncated, info = env.step(actions)
    expected = {"reward": (reward, torch.float32)}
    for name, value in [("terminated", terminated), ("truncated", truncated), *info.items()]:
        expected[name] = (value, torch.bool)
    for key, space in env.single_observation_space.spaces.items():
        expected[key] = (obs[key], torch.float32)
        assert tuple(obs[key].shape) == (3, *space.shape)
    for name, (value, dtype) in expected.items():
        assert isinstance(value, torch.Tensor), name
        assert value.device.type == device and value.dtype == dtype, name
    assert tuple(reward.shape) == (3,)
    # Fresh tensors: writing into what step returned leaves the twin's state alone.
    before = _numpy(env.unwrapped._goal).copy()
    obs["desired_goal"] += 1.0
    np.testing.assert_array_equal(_numpy(env.unwrapped._goal), before)


def test_without_device_the_twin_stays_numpy():
    env = gym.make_vec("goalenvs/PointMaze-v0", num_envs=2)
    obs, _ = env.reset(seed=0)
    _, reward, terminated, _, info = env.step(np.zeros((2, 2), np.float32))
    assert env.unwrapped.device is None
    for value in (obs["observation"], reward, terminated, info["is_success"]):
        assert isinstance(value, np.ndarray)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("autoreset_mode", ["next_step", "same_step"])
@pytest.mark.parametrize("env_id", IDS)
def test_same_state_and_actions_give_the_same_trajectory(env_id, autoreset_mode, device):
    n, steps = 16, 40
    kwargs = {"num_envs": n, "autoreset_mode": autoreset_mode, "max_episode_steps": 12}
    ref = gym.make_vec(env_id, **kwargs).unwrapped
    twin = gym.make_vec(env_id, device=device, **kwargs).unwrapped
    ref.reset(seed=3)
    twin.reset(seed=3)
    # A quarter of the sub-envs start on their goal: terminations as well as truncations.
    achieved = _family(env_id)[1]
    ref._goal[: n // 4] = getattr(ref, achieved)[: n // 4]
    _copy_state(env_id, ref, twin, np.arange(n))
    rng = np.random.default_rng(0)
    ended_total = 0
    for _ in range(steps):
        # Box actions up to 1.5x the bounds: the out-of-bounds ones are clipped alike.
        actions = _actions(ref.single_action_space, n, rng)
        was_done = ref._needs_reset.copy()
        r_obs, r_rew, r_term, r_trunc, r_info = ref.step(actions)
        t_obs, t_rew, t_term, t_trunc, t_info = twin.step(torch.as_tensor(actions, device=device))
        np.testing.assert_array_equal(_numpy(t_term), r_term)
        np.testing.assert_array_equal(_numpy(t_trunc), r_trunc)
        np.testing.assert_allclose(_numpy(t_rew), r_rew, atol=1e-5)
        np.testing.assert_array_equal(_numpy(twin.elapsed_steps), ref.elapsed_steps)
        done = r_term | r_trunc
        # Sub-envs that (re)started an episode this step drew it from different
        # generators: compare the others, then copy the new episodes across.
        fresh = was_done if autoreset_mode == "next_step" else done
        same = ~fresh
        for key in r_obs:
            np.testing.assert_allclose(_numpy(t_obs[key])[same], r_obs[key][same], atol=1e-5)
        success = _numpy(t_info["is_success"])
        np.testing.assert_array_equal(success[same], r_info["is_success"][same])
        if autoreset_mode == "next_step":
            assert not _numpy(t_rew)[was_done].any()  # the reset step pays 0
        elif not done.any():
            assert "final_obs" not in t_info and "final_obs" not in r_info
        else:
            np.testing.assert_array_equal(_numpy(t_info["_final_obs"]), done)
            t_final, r_final = t_info["final_info"], r_info["final_info"]
            for i in np.flatnonzero(done):
                for key, value in r_info["final_obs"][i].items():
                    got = _numpy(t_info["final_obs"][i][key])
                    np.testing.assert_allclose(got, value, atol=1e-5)
                assert bool(t_final["is_success"][i]) == bool(r_final["is_success"][i])
            # gymnasium's form: a dict of batched arrays, "_key" masking the ended rows
            np.testing.assert_array_equal(_numpy(t_final["_is_success"]), done)
            np.testing.assert_array_equal(r_final["_is_success"], done)
            assert r_final.keys() == t_final.keys()
        ended_total += int(done.sum())
        _copy_state(env_id, ref, twin, np.flatnonzero(fresh))
    assert r_term.dtype == bool and ended_total >= n  # episodes did end along the way


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("env_id", IDS)
def test_compute_functions_agree_with_numpy_on_the_same_goals(env_id, device):
    env = gym.make_vec(env_id, num_envs=2, device=device).unwrapped
    ref = gym.make_vec(env_id, num_envs=2).unwrapped
    space = env.single_observation_space["desired_goal"]
    rng = np.random.default_rng(1)
    low, high = space.low, space.high
    achieved = rng.uniform(low, high, (4, 5, *space.shape)).astype(np.float32)
    desired = rng.uniform(low, high, (4, 5, *space.shape)).astype(np.float32)
    desired[0] = achieved[0]  # some successes
    # A step's info as each backend returns it (envs whose goal functions ignore info too).
    crashed = np.arange(20).reshape(4, 5) % 3 == 0
    cases = [
        (achieved, desired, None, None),
        (achieved, desired[0, 0], {"crashed": crashed}, {"crashed": torch.as_tensor(crashed)}),
        (achieved[1], desired[2], [{"crashed": bool(c)} for c in crashed[0]], None),
    ]
    for a, d, info, torch_info in cases:
        ta, td = torch.as_tensor(a, device=device), torch.as_tensor(d, device=device)
        if torch_info is not None:
            torch_info = {k: v.to(device) for k, v in torch_info.items()}
        for name, dtype in COMPUTE.items():
            want = getattr(ref, name)(a, d, info)
            for got in (
                getattr(env, name)(ta, td, info),
                getattr(env, name)(ta, td, info if torch_info is None else torch_info),
            ):
                assert isinstance(got, torch.Tensor) and got.dtype == dtype, name
                assert got.device.type == device and tuple(got.shape) == want.shape, name
                np.testing.assert_allclose(_numpy(got), want, atol=1e-6, err_msg=name)
            # numpy goals into the device twin: numpy out, the same values.
            np.testing.assert_allclose(getattr(env, name)(a, d, info), want, atol=1e-6)
    rewards = ref.compute_reward(achieved, desired, None)
    assert len(np.unique(rewards)) > 1 and rewards[0].min() > rewards.min()  # successes


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("env_id", ["goalenvs/PointMaze-v0", "goalenvs/Push-v0"])
def test_same_seed_same_device_type_gives_the_same_episodes(env_id, device):
    def rollout(seed):
        env = gym.make_vec(env_id, num_envs=64, device=device, max_episode_steps=5)
        obs, _ = env.reset(seed=seed)
        goals = [_numpy(obs["desired_goal"])]
        for _ in range(12):  # two autoresets of every sub-env
            obs, *_ = env.step(np.ones((64, 2), np.float32) * 0.5)
            goals.append(_numpy(obs["desired_goal"]))
        return np.stack(goals)

    a, b, c = rollout(7), rollout(7), rollout(8)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    unseeded = [
        _numpy(gym.make_vec(env_id, num_envs=64, device=device).reset()[0]["desired_goal"])
        for _ in range(2)
    ]
    assert not np.allclose(*unseeded)  # without a seed, each twin draws its own episodes
    assert len(np.unique(a[0], axis=0)) > 32  # sub-envs draw different goals


@pytest.mark.parametrize("device", DEVICES)
def test_device_draws_follow_the_single_envs_distribution(device):
    # Push's batched rejection draw: every episode legal, ranges as the single env's.
    env = gym.make_vec("goalenvs/Push-v0", num_envs=4096, device=device).unwrapped
    env.reset(seed=0)
    p = env.params
    pusher, block, goal = (_numpy(getattr(env, k)) for k in ("_pusher", "_block", "_goal"))
    assert np.abs(block).max() <= p.block_range and np.abs(goal).max() <= p.goal_range
    assert np.abs(pusher).max() <= p.pusher_range
    assert np.linalg.norm(block - goal, axis=1).min() >= p.distance_threshold - 1e-6
    clearance = p.pusher_radius + 2 * p.block_radius
    assert np.linalg.norm(pusher - block, axis=1).min() >= clearance - 1e-6
    # Uniform block: mean near 0, spread near range / sqrt(3) (4096 draws: +-0.01).
    assert np.abs(block.mean(axis=0)).max() < 0.01
    np.testing.assert_allclose(block.std(axis=0), p.block_range / np.sqrt(3), atol=0.01)
    maze = gym.make_vec("goalenvs/PointMaze-v0", num_envs=4096, device=device).unwrapped
    maze.reset(seed=0)
    start_cells = np.floor(_numpy(maze._position)).astype(int)
    goal_cells = np.floor(_numpy(maze._goal)).astype(int)
    walls = maze.params.walls_up  # y-up with a border: cell (x, y) is walls[y + 1, x + 1]
    for cells in (start_cells, goal_cells):
        assert not walls[cells[:, 1] + 1, cells[:, 0] + 1].any()
    assert not (start_cells == goal_cells).all(axis=1).any()  # never starts in the goal's cell
    # Each of the 7 free cells of the U-maze is a goal for about 1/7 of the sub-envs.
    counts = np.unique(goal_cells, axis=0, return_counts=True)[1]
    assert len(counts) == 7 and counts.min() > 4096 / 7 * 0.8


@pytest.mark.parametrize("device", DEVICES)
def test_bad_actions_get_the_numpy_twins_errors(device):
    env = gym.make_vec("goalenvs/Push-v0", num_envs=4, device=device)
    env.reset(seed=0)
    bad = torch.zeros((4, 2), device=device)
    bad[2, 1] = float("nan")
    with pytest.raises(ValueError, match=r"actions must be finite; sub-envs \[2\]"):
        env.step(bad)
    with pytest.raises(ValueError, match=r"actions has shape \(4, 3\), expected \(4, 2\)"):
        env.step(np.zeros((4, 3), np.float32))
    with pytest.raises(TypeError, match="real-valued"):
        env.step(torch.zeros((4, 2), dtype=torch.bool, device=device))
    # Finite actions beyond the bounds are clipped, as on numpy.
    twin = gym.make_vec("goalenvs/Push-v0", num_envs=4, device=device)
    twin.reset(seed=0)
    a = env.step(torch.full((4, 2), 7.0, device=device))[0]["observation"]
    b = twin.step(np.ones((4, 2), np.float32))[0]["observation"]
    np.testing.assert_array_equal(_numpy(a), _numpy(b))


def test_device_argument_errors_name_the_value():
    with pytest.raises(ValueError, match="device='tpu0' is not a torch device"):
        gym.make_vec("goalenvs/PointMaze-v0", num_envs=2, device="tpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device='cuda'.*is_available\(\) is False"):
            gym.make_vec("goalenvs/PointMaze-v0", num_envs=2, device="cuda")
    env = gym.make_vec("goalenvs/PointMaze-v0", num_envs=2, device="cpu")
    with pytest.raises(ValueError, match=r"seed=\[1, 2\].*must be an int"):
        env.reset(seed=[1, 2])


@pytest.mark.parametrize("device", DEVICES)
def test_reset_mask_and_pinned_goal_on_the_device(device):
    env = gym.make_vec(
        "goalenvs/PointMaze-v0", num_envs=4, device=device, autoreset_mode="disabled"
    ).unwrapped
    obs, _ = env.reset(seed=0, options={"goal": [3.5, 1.5]})
    np.testing.assert_array_equal(_numpy(obs["desired_goal"]), [[3.5, 1.5]] * 4)
    assert (_numpy(obs["achieved_goal"]) // 1 != [3, 1]).any(axis=1).all()
    before = _numpy(obs["desired_goal"])
    mask = torch.tensor([True, False, False, True], device=device)
    obs, _ = env.reset(options={"reset_mask": mask})
    after = _numpy(obs["desired_goal"])
    np.testing.assert_array_equal(after[1:3], before[1:3])
    assert (after[[0, 3]] != before[[0, 3]]).any()
    with pytest.raises(ValueError, match=r"reset_mask.*bool array of shape \(4,\)"):
        env.reset(options={"reset_mask": torch.ones(3, dtype=torch.bool)})
    # One goal per sub-env; a masked reset pins the goals of the sub-envs it resets.
    goals = np.array([[1.5, 3.5], [3.5, 3.5], [2.5, 1.5], [1.2, 1.7]], np.float32)
    obs, _ = env.reset(options={"goal": goals})
    np.testing.assert_array_equal(_numpy(obs["desired_goal"]), goals)
    starts = _numpy(obs["achieved_goal"]) // 1
    assert (starts != goals // 1).any(axis=1).all()  # never in the goal's cell
    obs, _ = env.reset(options={"goal": goals[::-1].copy(), "reset_mask": mask})
    np.testing.assert_array_equal(_numpy(obs["desired_goal"]), goals[[3, 1, 2, 0]])
    with pytest.raises(ValueError, match="lies inside a wall"):
        env.reset(options={"goal": [0.5, 0.5]})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("env_id", ["goalenvs/PointMazeDense-v0", "goalenvs/ParkingCrowded-v0"])
def test_goal_env_checker_passes_the_device_twin(env_id, device):
    report = check_goal_env(
        sub_env_view(env_id, device=device),
        factory=lambda **kw: sub_env_view(env_id, device=device, **kw),
        steps=100,
    )
    assert report.ok, str(report)
    assert report.errors == [] and report.warnings == []
    assert sum(r.status == "passed" for r in report.results) >= 40


@pytest.mark.parametrize("device", DEVICES)
def test_goalenvs_check_passes_the_device_twin(device, capsys):
    kwargs = json.dumps({"env_id": "goalenvs/Push-v0", "device": device})
    spec = "goalenvs.wrappers.torch_envs:sub_env_view"
    assert main(["check", spec, "--kwargs", kwargs, "--steps", "100", "--strict"]) == 0
    out = capsys.readouterr().out
    # every check passed or was skipped (Push's goal probe cannot reach a goal that needs a push)
    assert re.search(r"(\d+) checks, \d+ passed, 0 error\(s\), 0 warning\(s\)", out), out
    assert " 0 error(s)" in out and "FAIL" not in out, out


def test_tensor_action_check_clips_per_dimension_and_checks_discrete_ranges():
    box = spaces.Box(np.array([-1.0, -2.0], np.float32), np.array([1.0, 2.0], np.float32))
    bounds = (torch.as_tensor(box.low), torch.as_tensor(box.high))
    got = check_tensor_actions([[5.0, 5.0], [-0.5, -3.0]], box, 2, torch.device("cpu"), bounds)
    assert got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), [[1.0, 2.0], [-0.5, -2.0]])
    discrete = spaces.Discrete(4)
    got = check_tensor_actions(np.array([0, 3, 1]), discrete, 3, torch.device("cpu"))
    assert got.dtype == torch.int64 and got.tolist() == [0, 3, 1]
    with pytest.raises(ValueError, match=r"actions\[1\]=4 is outside Discrete\(4\)"):
        check_tensor_actions(torch.tensor([0, 4, -1]), discrete, 3, torch.device("cpu"))
    with pytest.raises(TypeError, match="must be integers"):
        check_tensor_actions(torch.zeros(3), discrete, 3, torch.device("cpu"))


@pytest.mark.parametrize("device", DEVICES)
def test_info_tensor_reads_step_infos_and_lists_of_dicts_alike(device):
    like = torch.zeros(3, 2, device=device)
    step_info = {"crashed": torch.tensor([True, False, True], device=device)}
    listed = [{"crashed": True}, {}, {"crashed": True}]
    for info in (step_info, listed, {"crashed": np.array([True, False, True])}):
        got = info_tensor(info, "crashed", like, (3,), False)
        assert got.dtype == torch.bool and got.device.type == device
        assert got.tolist() == [True, False, True]
    assert info_tensor(None, "crashed", like, (2, 3), False).shape == (2, 3)
    with pytest.raises(ValueError, match=r"info\['crashed'\] has shape \(3,\)"):
        info_tensor(step_info, "crashed", like, (4,), False)


@pytest.mark.parametrize("device", DEVICES)
def test_clear_points_rejects_until_every_row_is_clear(device):
    generator = torch.Generator(device)
    generator.manual_seed(0)
    centres = torch.zeros((20000, 2), device=device)
    centres[::2] = 0.5
    # One candidate a round and about half of them rejected: the leftover loop runs.
    points = _numpy(clear_points(generator, centres, 1.0, 0.9, tries=1))
    distance = np.linalg.norm(points - _numpy(centres), axis=1)
    assert distance.min() >= 0.9 and np.abs(points).max() <= 1.0
    # Uniform over the square minus the disc: the centred rows' mean is near 0 (+-0.02),
    # and the corners beyond the disc fill alike.
    assert np.abs(points[1::2].mean(axis=0)).max() < 0.02
    corners = np.sign(points[1::2]).astype(int)
    counts = np.unique(corners, axis=0, return_counts=True)[1]
    assert len(counts) == 4 and counts.min() > 0.9 * counts.max()


def test_device_twin_pickles_and_the_copy_draws_the_same_episodes():
    # A HER buffer deep-copies / pickles its goal-function source: the twin must survive.
    env = gym.make_vec("goalenvs/Push-v0", num_envs=8, device="cpu", max_episode_steps=3)
    env.reset(seed=0)
    copied = pickle.loads(pickle.dumps(env))
    zeros = np.zeros((8, 2), np.float32)
    for _ in range(7):  # two autoresets: the generator's state was copied too
        goals = env.step(zeros)[0]["desired_goal"]
        copied_goals = copied.step(zeros)[0]["desired_goal"]
    assert torch.equal(goals, copied_goals)


@pytest.mark.parametrize("device", DEVICES)
def test_parking_crashes_match_numpy_from_the_same_state(device):
    # Full throttle out of the lane into the crowded rows and the walls: the crashes, their
    # penalised rewards and terminations agree, and compute_reward of the step's own info
    # reproduces every step's reward on both backends.
    n = 32
    kwargs = {"num_envs": n, "max_episode_steps": 50}
    ref = gym.make_vec("goalenvs/ParkingCrowded-v0", **kwargs).unwrapped
    twin = gym.make_vec("goalenvs/ParkingCrowded-v0", device=device, **kwargs).unwrapped
    headings = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False)
    cars = np.stack([np.zeros(n), np.zeros(n), headings, np.full(n, 8.0)], axis=1)
    ref.reset(seed=5, options={"car": cars})
    twin.reset(seed=5)
    _copy_state("goalenvs/ParkingCrowded-v0", ref, twin, np.arange(n))
    actions = np.tile(np.array([[1.0, 0.2]], np.float32), (n, 1))
    crashed = np.zeros(n, bool)
    for _ in range(8):
        live = ~crashed
        r_obs, r_rew, r_term, _, r_info = ref.step(actions)
        t_obs, t_rew, t_term, _, t_info = twin.step(actions)
        np.testing.assert_array_equal(_numpy(t_info["crashed"])[live], r_info["crashed"][live])
        np.testing.assert_array_equal(_numpy(t_term)[live], r_term[live])
        np.testing.assert_allclose(_numpy(t_rew)[live], r_rew[live], atol=1e-5)
        for env, obs, rew, info in ((ref, r_obs, r_rew, r_info), (twin, t_obs, t_rew, t_info)):
            again = env.compute_reward(obs["achieved_goal"], obs["desired_goal"], info)
            np.testing.assert_array_equal(_numpy(again)[live], _numpy(rew)[live])
        # A crashed sub-env autoresets on its next step from its own backend's draws:
        # only the sub-envs that have not crashed yet are compared.
        crashed |= r_info["crashed"]
    assert 4 <= crashed.sum() < n  # some crash, into parked cars or walls, some not yet
    assert (r_rew[r_info["crashed"]] <= -50.0).all() and r_info["crashed"].any()


@pytest.mark.parametrize("device", DEVICES)
def test_parking_device_draws_park_cars_as_the_single_env_does(device):
    env = gym.make_vec("goalenvs/ParkingCrowded-v0", num_envs=4096, device=device).unwrapped
    env.reset(seed=0)
    parked, goal = _numpy(env._parked), _numpy(env._goal)
    x, y, c, s, v = (_numpy(a) for a in env._state)
    assert (parked.sum(axis=1) == env.params.n_parked).all()
    spot = (np.abs(goal[:, None] - SPOT_GOALS[None]).max(axis=2) == 0).argmax(axis=1)
    np.testing.assert_array_equal(goal, SPOT_GOALS[spot])  # every goal is a spot's goal
    assert not parked[np.arange(4096), spot].any()  # and that spot is free
    # Goal spots and parked spots uniform: each spot about 1/28 and 20/27 of the time.
    counts = np.bincount(spot, minlength=28)
    assert counts.min() > 4096 / 28 * 0.7 and counts.max() < 4096 / 28 * 1.3
    others = parked.sum(axis=0) / (4096 - counts)
    np.testing.assert_allclose(others, 20 / 27, atol=0.05)
    assert np.abs(x).max() <= START_HALF_X and np.abs(y).max() <= START_HALF_Y
    assert (v == 0).all() and np.allclose(c * c + s * s, 1.0)
    assert np.abs(np.arctan2(s, c).mean()) < 0.15  # uniform heading: mean near 0
    # A pinned goal in a parked spot frees that spot and parks the drawn one instead.
    target = SPOT_GOALS[3]
    env.reset(options={"goal": target})
    parked = _numpy(env._parked)
    assert not parked[:, 3].any() and (parked.sum(axis=1) == env.params.n_parked).all()
    np.testing.assert_array_equal(_numpy(env._goal), np.tile(target, (4096, 1)))
