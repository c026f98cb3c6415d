"""PointMaze: layouts, exact walls, BFS dense reward, single env == twin, rendering, bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import goalenvs  # noqa: F401  (registers the ids)
from goalenvs.envs.point_maze import PointMazeEnv, PointMazeParams, draw_episode, parse_maze_map
from tests.envs.twin_runs import colour_at


def _free(params: PointMazeParams, xy: np.ndarray) -> np.ndarray:
    """Whether each world point lies in a free cell of the map."""
    rows, cols = params.shape
    ix, iy = np.floor(xy[..., 0]).astype(int), np.floor(xy[..., 1]).astype(int)
    inside = (ix >= 0) & (ix < cols) & (iy >= 0) & (iy < rows)
    r = np.clip(rows - 1 - iy, 0, rows - 1)
    c = np.clip(ix, 0, cols - 1)
    return inside & ~params.walls[r, c]


def test_registered_layouts_are_d4rls():
    shapes = {"umaze": (5, 5, 7), "medium": (8, 8, 26), "large": (9, 12, 46)}
    for name, (rows, cols, free) in shapes.items():
        walls = parse_maze_map(name)
        assert walls.shape == (rows, cols)
        assert int((~walls).sum()) == free
        assert walls[0].all() and walls[-1].all() and walls[:, 0].all() and walls[:, -1].all()


def test_layouts_equal_gymnasium_robotics_maps():
    maps = pytest.importorskip("gymnasium_robotics.envs.maze.maps")
    for name, theirs in (("umaze", maps.U_MAZE), ("medium", maps.MEDIUM_MAZE)):
        np.testing.assert_array_equal(parse_maze_map(name), np.array(theirs) == 1)
    np.testing.assert_array_equal(parse_maze_map("large"), np.array(maps.LARGE_MAZE) == 1)


def test_maze_map_accepts_strings_and_zero_one_rows():
    strings = PointMazeEnv(maze_map=["###", "#.#", "#.#", "###"])
    numbers = PointMazeEnv(maze_map=[[1, 1, 1], [1, 0, 1], [1, 0, 1], [1, 1, 1]])
    np.testing.assert_array_equal(strings.params.walls, numbers.params.walls)
    assert strings.observation_space["achieved_goal"].high.tolist() == [3.0, 4.0]
    obs, _ = strings.reset(seed=3)
    # Two free cells, one column: start and goal in different ones, each in a free cell.
    cells = np.floor([obs["achieved_goal"], obs["desired_goal"]])
    assert cells[:, 0].tolist() == [1.0, 1.0] and sorted(cells[:, 1].tolist()) == [1.0, 2.0]


# --------------------------------------------------------------------------- walls


def test_full_speed_into_a_wall_stops_on_its_face():
    env = PointMazeEnv(maze_map=["#####", "#...#", "#####"])
    env.reset(seed=0, options={"goal": (1.5, 1.5)})
    env.unwrapped._position = np.array([[3.5, 1.5]], np.float32)
    for _ in range(20):
        obs, *_ = env.step(np.array([1.0, 0.0], np.float32))
    # The wall cell starts at x = 4: the point rests 0.001 short of it, stopped in x.
    assert obs["observation"][0] == pytest.approx(4.0 - 1e-3, abs=1e-6)
    assert obs["observation"][2] == 0.0


def test_diagonal_into_a_corner_never_cuts_it():
    # Free cells (1, 1) and (2, 2) touch only at a corner; (2, 1) and (1, 2) are walls,
    # so a diagonal dash from (1, 1) must stop in its own cell's corner.
    env = PointMazeEnv(maze_map=["####", "##.#", "#.##", "####"])
    env.reset(seed=0)
    env.unwrapped._position = np.array([[1.5, 1.5]], np.float32)
    env.unwrapped._velocity = np.zeros((1, 2), np.float32)
    for _ in range(30):
        obs, *_ = env.step(np.array([1.0, 1.0], np.float32))
    x, y = obs["observation"][:2]
    assert x == pytest.approx(2.0 - 1e-3, abs=1e-6)
    assert y == pytest.approx(2.0 - 1e-3, abs=1e-6)


@st.composite
def _maze_and_actions(draw):
    rows = draw(st.integers(2, 6))
    cols = draw(st.integers(2, 6))
    cells = draw(st.lists(st.booleans(), min_size=rows * cols, max_size=rows * cols))
    walls = np.array(cells).reshape(rows, cols)
    walls[draw(st.integers(0, rows - 1)), draw(st.integers(0, cols - 1))] = False
    corners = st.sampled_from([(1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0), (1.0, 0.0)])
    actions = draw(st.lists(corners, min_size=5, max_size=40))
    seed = draw(st.integers(0, 2**16))
    return walls, np.array(actions, np.float32), seed


@settings(max_examples=60, deadline=None)
@given(_maze_and_actions())
def test_no_tunnelling_at_full_speed(case):
    """Every step ends in a free cell, moves at most one cell per axis, and its L-shaped
    path (x first, then y) only visits free cells: no wall is ever crossed."""
    walls, actions, seed = case
    # Maximal speed per step: 0.95 of a cell.
    env = PointMazeEnv(maze_map=walls.astype(int).tolist(), max_speed=19.0, action_scale=400.0)
    obs, _ = env.reset(seed=seed)
    p = env.params
    position = obs["achieved_goal"]
    for action in actions:
        obs, *_ = env.step(action)
        new = obs["achieved_goal"]
        corner = np.array([new[0], position[1]], np.float32)
        assert _free(p, new) and _free(p, corner), (position, new)
        assert np.all(np.abs(np.floor(new) - np.floor(position)) <= 1)
        position = new


# --------------------------------------------------------------------------- goals


def test_dense_reward_is_the_bfs_path_not_the_straight_line():
    env = gym.make("goalenvs/PointMazeDense-v0")
    reward = env.unwrapped.compute_reward
    # U-maze: (1, 1) to (1, 3) is 2 apart in a straight line, 6 cells round the U.
    assert reward(np.array([1.5, 1.5]), np.array([1.5, 3.5]), None) == pytest.approx(-6.0)
    # Same cell: the straight distance.
    assert reward(np.array([1.2, 1.5]), np.array([1.5, 1.9]), None) == pytest.approx(-0.5)
    # Neighbouring cells: one step.
    assert reward(np.array([1.5, 1.5]), np.array([2.5, 1.5]), None) == pytest.approx(-1.0)


def test_pinned_goal_is_kept_and_the_start_is_elsewhere():
    env = gym.make("goalenvs/PointMaze-v0")
    for seed in range(20):
        obs, _ = env.reset(seed=seed, options={"goal": (1.4, 3.6)})
        assert obs["desired_goal"].tolist() == pytest.approx([1.4, 3.6])
        assert np.floor(obs["achieved_goal"]).tolist() != [1.0, 3.0]


def test_goals_and_starts_cover_the_free_cells():
    env = PointMazeEnv("umaze")
    seen_goals, seen_starts = set(), set()
    for seed in range(200):
        obs, _ = env.reset(seed=seed)
        seen_goals.add(tuple(np.floor(obs["desired_goal"]).tolist()))
        seen_starts.add(tuple(np.floor(obs["achieved_goal"]).tolist()))
    free = {tuple(c) for c in env.params.free_cells.tolist()}
    assert seen_goals == free and seen_starts == free


# --------------------------------------------------------------------------- play, render


def test_rgb_array_shows_walls_goal_and_point_where_they_are():
    env = gym.make("goalenvs/PointMaze-v0", render_mode="rgb_array")
    env.reset(seed=0, options={"goal": (1.5, 3.5)})
    env.unwrapped._position = np.array([[3.5, 1.5]], np.float32)
    frame = env.render()
    assert frame.shape == (440, 400, 3) and frame.dtype == np.uint8
    assert colour_at(env, frame, (0.5, 0.5)) == [70, 70, 80]  # bottom-left corner cell: wall
    assert colour_at(env, frame, (1.5, 2.5)) == [70, 70, 80]  # the U's middle bar
    assert colour_at(env, frame, (2.5, 1.5)) == [246, 246, 240]  # open floor
    assert colour_at(env, frame, (1.5, 3.5)) == [120, 210, 140]  # goal
    assert colour_at(env, frame, (3.5, 1.5)) == [40, 90, 200]  # the point


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("maze_map", "words"),
    [
        (["###", "###"], ["no free cell", "expected at least one"]),
        (["#.#", "#..#"], ["lengths [3, 4]", "rectangular"]),
        (["#x#", "#.#"], ["['x']", "expected '#'"]),
        ([[1, 2], [0, 1]], ["[2]", "0 (free) or 1 (wall)"]),
        ("spiral", ["'spiral'", "umaze"]),
        ([], ["non-empty list of rows"]),
    ],
)
def test_bad_maze_map_names_value_and_what_is_allowed(maze_map, words):
    with pytest.raises(ValueError, match="maze_map") as error:
        PointMazeEnv(maze_map=maze_map)
    for word in words:
        assert word in str(error.value)


def test_bad_goal_and_constants_fail_clearly():
    env = gym.make("goalenvs/PointMaze-v0")
    with pytest.raises(ValueError, match=r"options\['goal'\]=\[0.5, 0.5\] lies inside a wall"):
        env.reset(options={"goal": (0.5, 0.5)})
    vec = gym.make_vec("goalenvs/PointMaze-v0", num_envs=2)
    with pytest.raises(ValueError, match="inside a wall"):
        vec.reset(options={"goal": [(1.5, 1.5), (2.5, 2.5)]})


@pytest.mark.parametrize("maze", ["umaze", "large"])
def test_draw_episode_equals_the_float32_array_formula_bit_for_bit(maze):
    # The draw adds in Python floats for speed; it must round exactly as the numpy
    # formula (corner float32 + 0.5 + float64 noise, cast to float32) on the same stream.
    params = PointMazeParams(maze_map=maze)
    free, n = params.free_cells, len(params.free_cells)
    for seed in range(300):
        pinned = None if seed % 3 else free[seed % n] + np.float32(0.3)
        start, goal = draw_episode(np.random.default_rng(seed), params, pinned)
        rng = np.random.default_rng(seed)
        goal_cell = int(rng.integers(n)) if pinned is None else seed % n
        start_cell = int(rng.integers(n - 1))
        start_cell += start_cell >= goal_cell
        noise = rng.uniform(-params.position_noise, params.position_noise, (2, 2))
        expected = (free[[start_cell, goal_cell]] + 0.5 + noise).astype(np.float32)
        assert start.dtype == goal.dtype == np.float32
        np.testing.assert_array_equal(start, expected[0])
        np.testing.assert_array_equal(goal, expected[1] if pinned is None else pinned)
