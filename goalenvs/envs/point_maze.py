"""PointMaze: a point mass with PointReach's dynamics finds its way to a goal in a maze of
unit cells (D4RL's umaze, medium and large layouts, or any ``maze_map``), with exact walls."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.spaces import Space
from gymnasium.vector import AutoresetMode

from goalenvs.core import (
    GoalEnv,
    GoalVectorEnv,
    InfoLike,
    check_choice,
    check_goal_option,
    check_positive,
    goal_batch,
    goal_dict_space,
    twin_metadata,
)
from goalenvs.core.backend import cast, constant_like
from goalenvs.core.types import ArrayT, DeviceLike
from goalenvs.envs.canvas import Canvas, import_pygame
from goalenvs.envs.planar import (
    FLOOR,
    FRAME,
    PlanarRendering,
    PointMassTwin,
    accelerate,
    draw_point_mass,
    goal_distance,
)
from goalenvs.envs.single import SingleEnv

REWARD_TYPES = ("sparse", "dense")

# D4RL's layouts (1 = wall), as gymnasium-robotics' PointMaze ships them.
U_MAZE = ("#####", "#...#", "###.#", "#...#", "#####")
MEDIUM_MAZE = (
    "########",
    "#..##..#",
    "#..#...#",
    "##...###",
    "#..#...#",
    "#.#..#.#",
    "#...#..#",
    "########",
)
LARGE_MAZE = (
    "############",
    "#....#.....#",
    "#.##.#.#.#.#",
    "#......#...#",
    "#.####.###.#",
    "#..#.#.....#",
    "##.#.#.#.###",
    "#..#...#...#",
    "############",
)
MAZES = {"umaze": U_MAZE, "medium": MEDIUM_MAZE, "large": LARGE_MAZE}
_WALL_CHARS, _FREE_CHARS = "#1", ".0 "

# A stopped point rests this far inside its cell, so that its cell is never ambiguous.
_SKIN = 1e-3


def parse_maze_map(maze_map: object) -> np.ndarray:
    """The maze as a bool array ``(rows, cols)``, True for walls, row 0 at the top.

    ``maze_map`` is a sequence of rows, each a string of ``"#"`` / ``"1"`` (wall) and
    ``"."`` / ``"0"`` / ``" "`` (free), or a sequence of 0 / 1 (1 a wall); or the name
    of a registered layout (``"umaze"``, ``"medium"``, ``"large"``).
    """
    if isinstance(maze_map, str):
        if maze_map not in MAZES:
            raise ValueError(
                f"maze_map={maze_map!r} is not a layout name; expected one of {list(MAZES)} "
                "or a list of rows"
            )
        maze_map = MAZES[maze_map]
    if isinstance(maze_map, np.ndarray):
        maze_map = maze_map.tolist()
    if not isinstance(maze_map, (list, tuple)) or not maze_map:
        raise ValueError(
            f"maze_map={maze_map!r} must be a non-empty list of rows (strings of '#'/'.' or "
            "lists of 0/1)"
        )
    rows = []
    for r, row in enumerate(maze_map):
        if isinstance(row, str):
            bad = sorted(set(row) - set(_WALL_CHARS + _FREE_CHARS))
            if bad:
                raise ValueError(
                    f"maze_map row {r} {row!r} holds unknown cell characters {bad}; expected "
                    f"'#' or '1' (wall) and '.', '0' or ' ' (free)"
                )
            rows.append([c in _WALL_CHARS for c in row])
        elif isinstance(row, (list, tuple, np.ndarray)):
            values = list(row)
            bad = [v for v in values if isinstance(v, bool) or v not in (0, 1)]
            if bad:
                raise ValueError(
                    f"maze_map row {r} {values!r} holds unknown cells {bad[:4]}; expected 0 "
                    "(free) or 1 (wall)"
                )
            rows.append([v == 1 for v in values])
        else:
            raise ValueError(
                f"maze_map row {r} {row!r} must be a string or a list of 0/1, "
                f"got {type(row).__name__}"
            )
    widths = {len(row) for row in rows}
    if len(widths) != 1 or 0 in widths:
        raise ValueError(
            f"maze_map rows have lengths {[len(row) for row in rows]}; expected rows of one "
            "non-zero length (a rectangular grid)"
        )
    walls = np.array(rows, dtype=bool)
    if walls.all():
        raise ValueError(f"maze_map={list(maze_map)!r} has no free cell; expected at least one")
    return walls


def _shortest_paths(free_up: np.ndarray) -> np.ndarray:
    """All-pairs shortest path lengths, in cells, between the cells of a y-up grid.

    Breadth-first search over 4-connected free cells; ``table[a, b]`` for flat cell
    indices ``a``, ``b`` (``iy * cols + ix``). Walls and unreachable pairs get
    ``rows * cols``, longer than any path.
    """
    h, w = free_up.shape
    n = h * w
    table = np.full((n, n), n, dtype=np.float32)
    for start in np.flatnonzero(free_up.reshape(-1)):
        table[start, start] = 0
        frontier, steps = [start], 0
        while frontier:
            steps += 1
            nxt = []
            for cell in frontier:
                iy, ix = divmod(int(cell), w)
                for dy, dx in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                    y, x = iy + dy, ix + dx
                    if 0 <= y < h and 0 <= x < w and free_up[y, x]:
                        other = y * w + x
                        if table[start, other] == n:
                            table[start, other] = steps
                            nxt.append(other)
            frontier = nxt
    return table


@dataclass(frozen=True)
class PointMazeParams:
    """The checked constants of a PointMaze, shared by the single env and its twin.

    World coordinates: x from 0 (left edge of the map) to ``cols``, y from 0 (bottom
    edge) to ``rows``; cell ``(row r, col c)`` of the map covers
    ``[c, c + 1] x [rows - 1 - r, rows - r]``.
    """

    maze_map: object = "umaze"
    reward_type: str = "sparse"
    action_scale: float = 30.0
    dt: float = 0.05
    max_speed: float = 3.0
    distance_threshold: float = 0.3
    position_noise: float = 0.25
    walls: np.ndarray = field(init=False, repr=False, compare=False)
    walls_up: np.ndarray = field(init=False, repr=False, compare=False)
    free_cells: np.ndarray = field(init=False, repr=False, compare=False)
    path_lengths: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        walls = parse_maze_map(self.maze_map)
        check_choice("reward_type", self.reward_type, REWARD_TYPES)
        for name in ("action_scale", "dt", "max_speed", "distance_threshold"):
            check_positive(name, getattr(self, name))
        noise = self.position_noise
        if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not noise >= 0:
            raise ValueError(f"position_noise={noise!r} must be a number >= 0 (and < 0.5)")
        if self.max_speed * self.dt >= 1.0 - 2 * _SKIN:
            raise ValueError(
                f"max_speed * dt = {self.max_speed * self.dt} must be < 1 cell per step "
                "(collisions check one cell ahead)"
            )
        if self.position_noise >= 0.5 - _SKIN:
            raise ValueError(
                f"position_noise={self.position_noise} must be < 0.5: starts and goals stay "
                "inside their cell"
            )
        # The kernel's grid: y-up (row 0 at the bottom) with a border of walls, so that a
        # point at the map's edge looks up a wall rather than an index out of range.
        padded = np.pad(walls, 1, constant_values=True)
        walls_up = np.ascontiguousarray(padded[::-1])
        rows = walls.shape[0]
        free_rc = np.argwhere(~walls)  # (row, col) in reading order
        # Free cells as (x, y) of their lower-left corner, in reading order of the map.
        free = np.stack([free_rc[:, 1], rows - 1 - free_rc[:, 0]], axis=1).astype(np.float32)
        object.__setattr__(self, "walls", walls)
        object.__setattr__(self, "walls_up", walls_up)
        object.__setattr__(self, "free_cells", free)
        object.__setattr__(self, "path_lengths", _shortest_paths(~walls_up))

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols) of the map."""
        return int(self.walls.shape[0]), int(self.walls.shape[1])

    def spaces(self) -> tuple[spaces.Dict, spaces.Box]:
        """The single env's (observation space, action space)."""
        rows, cols = self.shape
        v = self.max_speed
        low = np.array([0, 0, -v, -v], np.float32)
        high = np.array([cols, rows, v, v], np.float32)
        goal = spaces.Box(np.zeros(2, np.float32), np.array([cols, rows], np.float32))
        observation = spaces.Box(low, high, dtype=np.float32)
        action = spaces.Box(-1.0, 1.0, (2,), np.float32)
        return goal_dict_space(observation, goal), action

    def check_goal(self, goal: object, space: Space, batch: int | None = None) -> np.ndarray:
        """A pinned ``options["goal"]``, checked to lie in the maze and in a free cell."""
        arr = check_goal_option(goal, space, batch)
        inside_wall = self.walls_up[_cell(arr[..., 1]), _cell(arr[..., 0])]
        if np.any(inside_wall):
            raise ValueError(
                f"options['goal']={arr.tolist()} lies inside a wall; expected a point in a free "
                f"cell of the maze (free cells' lower-left corners: {self.free_cells.tolist()})"
            )
        return arr


def _cell(coordinate: np.ndarray) -> np.ndarray:
    """The index of a coordinate's cell in the bordered ``walls_up`` grid."""
    return np.clip(np.floor(coordinate).astype(np.int64) + 1, 0, None)


# --------------------------------------------------------------------------- kernel


def maze_distance(
    achieved: ArrayT, desired: ArrayT, walls_up: ArrayT, path_lengths: ArrayT, xp: ModuleType
) -> ArrayT:
    """Shortest-path distance in cells between goal cells; straight distance in one cell."""
    cols = walls_up.shape[1]
    top_y, top_x = walls_up.shape[0] - 1, cols - 1

    def flat_cell(g: Any) -> Any:
        ix = xp.clip(cast(xp.floor(g[..., 0]), "int64") + 1, 0, top_x)
        iy = xp.clip(cast(xp.floor(g[..., 1]), "int64") + 1, 0, top_y)
        return iy * cols + ix

    if xp is np:
        a, d = np.broadcast_arrays(flat_cell(achieved), flat_cell(desired))
    else:
        a, d = xp.broadcast_tensors(flat_cell(achieved), flat_cell(desired))
    straight = goal_distance(achieved, desired, xp)
    distance = xp.where(a == d, straight, path_lengths[a, d])
    return cast(distance, "float32")


def _move_axis(
    moving: ArrayT,
    other: ArrayT,
    speed: ArrayT,
    dt: float,
    walls_up: ArrayT,
    along_x: bool,
    xp: ModuleType,
) -> tuple[ArrayT, ArrayT]:
    """Moves one coordinate by ``speed * dt`` (< 1 cell, so into this cell or the next);
    entering a wall cell stops it ``_SKIN`` short of the face, its speed along this axis 0.
    """
    target = moving + speed * dt
    cell = xp.floor(moving)
    other_index = cast(xp.floor(other), "int64") + 1
    target_index = cast(xp.floor(target), "int64") + 1
    hit = walls_up[other_index, target_index] if along_x else walls_up[target_index, other_index]
    face = xp.where(speed > 0, cell + (1 - _SKIN), cell + _SKIN)
    return xp.where(hit, face, target), xp.where(hit, 0.0 * speed, speed)


def maze_step(
    position: ArrayT,
    velocity: ArrayT,
    action: ArrayT,
    walls_up: ArrayT,
    action_scale: float,
    dt: float,
    max_speed: float,
    xp: ModuleType,
) -> tuple[ArrayT, ArrayT]:
    """One step of ``(batch, 2)`` positions and velocities (new arrays): PointReach's
    semi-implicit Euler, moving along x then y so that each axis stops at its wall."""
    v = accelerate(velocity, action, action_scale, dt, max_speed, xp)
    vx, vy = v[:, 0], v[:, 1]
    x, vx = _move_axis(position[:, 0], position[:, 1], vx, dt, walls_up, True, xp)
    y, vy = _move_axis(position[:, 1], x, vy, dt, walls_up, False, xp)
    return xp.stack([x, y], axis=1), xp.stack([vx, vy], axis=1)


def draw_episode(
    rng: np.random.Generator, params: PointMazeParams, goal: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """One episode's float32 (2,) ``(start, goal)`` from one generator: goal and start
    cells uniform over the free cells (the start's over the others, when there are), each
    point at its cell's centre plus a uniform offset up to ``position_noise``."""
    free = params.free_cells
    n = len(free)
    if goal is None:
        goal_cell = int(rng.integers(n))
    else:
        corner = np.floor(goal).astype(np.float32)
        goal_cell = int(np.flatnonzero((free == corner).all(axis=1))[0])
    start_cell = int(rng.integers(max(n - 1, 1)))
    if n > 1 and start_cell >= goal_cell:
        start_cell += 1  # skip the goal's cell
    noise = rng.uniform(-params.position_noise, params.position_noise, (2, 2)).tolist()
    # In Python floats: the corners are small integers, so corner + 0.5 + noise rounds
    # as numpy's float32 + float64 arithmetic would, at a third of the cost of two arrays.
    x, y = free[start_cell].tolist()
    start = np.array((x + 0.5 + noise[0][0], y + 0.5 + noise[0][1]), np.float32)
    if goal is not None:
        return start, np.asarray(goal, np.float32)
    x, y = free[goal_cell].tolist()
    return start, np.array((x + 0.5 + noise[1][0], y + 0.5 + noise[1][1]), np.float32)


def draw_episodes(
    generator: Any, free_cells: Any, position_noise: float, count: int, goal: Any
) -> tuple[Any, Any]:
    """:func:`draw_episode`'s distribution for ``count`` sub-envs in one batch from one
    ``torch.Generator``: float32 ``(count, 2)`` starts and goals on its device, where
    ``free_cells`` and the pinned ``goal`` (None, ``(2,)`` or ``(count, 2)``) lie."""
    import torch

    device = free_cells.device
    n = len(free_cells)
    if goal is None:
        goal_cell = torch.randint(n, (count,), generator=generator, device=device)
    else:
        # The pinned goal's free cell: the row of free_cells equal to its floor.
        corner = torch.floor(goal).reshape(-1, 1, 2)
        match = (free_cells[None] == corner).all(dim=2)
        goal_cell = match.int().argmax(dim=1).expand(count)
    start_cell = torch.randint(max(n - 1, 1), (count,), generator=generator, device=device)
    if n > 1:
        start_cell = start_cell + (start_cell >= goal_cell).long()  # skip the goal's cell
    noise = (2 * torch.rand((count, 2, 2), generator=generator, device=device) - 1) * position_noise
    start = free_cells[start_cell] + 0.5 + noise[:, 0]
    if goal is not None:
        return start, goal.float().expand(count, 2).clone()
    return start, free_cells[goal_cell] + 0.5 + noise[:, 1]


# --------------------------------------------------------------------------- rendering

_WALL_COLOR = (70, 70, 80)


class _PointMazeFaces(PointMassTwin):
    """What both faces share: the goal functions, the twin's hooks (a single env runs them
    on a batch of one) and the frame (the twin's shows sub-env 0)."""

    episode_state = ("_position", "_goal")
    zeroed_on_reset = ("_velocity",)
    params: PointMazeParams

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Sparse 0 / -1, or dense minus the maze distance (float32, the leading shape):
        the BFS path in cells between the goals' cells, straight within one cell."""
        p = self.params
        if p.reward_type != "dense":
            return super().compute_reward(achieved_goal, desired_goal, info)
        _, achieved, desired, xp = goal_batch(achieved_goal, desired_goal, 2)
        # The maze's tables, copied once to each device that asks.
        cache = self.__dict__.setdefault("_tables_on", ({}, {}))
        walls_up = constant_like(p.walls_up, achieved, cache[0])
        path_lengths = constant_like(p.path_lengths, achieved, cache[1])
        return -maze_distance(achieved, desired, walls_up, path_lengths, xp)

    def _allocate(self, n: int) -> None:
        super()._allocate(n)
        self._walls_up = self.constant(self.params.walls_up)
        self._path_lengths = self.constant(self.params.path_lengths)

    def _draw_episode(
        self, rng: np.random.Generator, goal: np.ndarray | None = None
    ) -> tuple[np.ndarray, ...]:
        return draw_episode(rng, self.params, goal)

    def _step_envs(self, actions: np.ndarray) -> None:
        p = self.params
        self._position, self._velocity = maze_step(
            self._position, self._velocity, actions, self._walls_up, p.action_scale, p.dt,
            p.max_speed, self.xp,
        )  # fmt: skip
        self._trail_step()

    def _goal_outcomes(
        self, obs: dict[str, np.ndarray], info: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, None]:
        # The dense reward is the maze distance (the BFS), not the straight one.
        if self.params.reward_type != "dense":
            return super()._goal_outcomes(obs, info)
        self._rewards = -maze_distance(
            self._position, self._goal, self._walls_up, self._path_lengths, self.xp
        )
        return self.fresh(self._rewards), self.fresh(info["is_success"]), None

    def _new_canvas(self) -> Canvas:
        import_pygame()
        rows, cols = self.params.shape
        margin = 0.05 * max(rows, cols)
        bounds = (-margin, cols + margin, -margin, rows + 5 * margin)
        return Canvas(FRAME, bounds, background=(255, 255, 255), title="goalenvs PointMaze")

    def _draw_frame(self, canvas: Canvas) -> None:
        p = self.params
        position, velocity, goal = self._rows(self._position, self._velocity, self._goal)
        rows, cols = p.shape
        canvas.clear()
        canvas.rect(0, 0, cols, rows, FLOOR)
        for r, c in np.argwhere(p.walls):
            y = rows - 1 - r
            canvas.rect(c, y, c + 1, y + 1, _WALL_COLOR)
        tip, hud = position + 0.1 * velocity, self._frame_hud()
        draw_point_mass(canvas, self._trail, goal, p.distance_threshold, position, tip, 0.12, hud)


# --------------------------------------------------------------------------- single env


class PointMazeEnv(_PointMazeFaces, PlanarRendering, SingleEnv, GoalEnv):
    """A point mass finds its way through a maze to a goal.

    ## Description

    PointReach's point mass inside a grid maze of unit cells must come within
    ``distance_threshold`` of a goal in another cell, usually behind walls, which it can
    slide along but never pass through or cut at any speed.

    ## Action Space

    ``Box(-1, 1, (2,), float32)``: the acceleration along x and y, in units of
    ``action_scale`` (30 cells/s^2).

    ## Observation Space

    ``Dict(observation, achieved_goal, desired_goal)``, float32 Boxes (the map has
    ``rows`` x ``cols`` cells; x grows rightwards from the map's left edge, y upwards
    from its bottom edge):

    | Key           | Index | Meaning     | Min        | Max       |
    |---------------|-------|-------------|------------|-----------|
    | observation   | 0     | x           | 0          | cols      |
    | observation   | 1     | y           | 0          | rows      |
    | observation   | 2     | vx          | -max_speed | max_speed |
    | observation   | 3     | vy          | -max_speed | max_speed |
    | achieved_goal | 0, 1  | x, y        | 0          | cols, rows|
    | desired_goal  | 0, 1  | goal x, y   | 0          | cols, rows|

    ## Goal

    The centre of a uniformly drawn free cell plus a uniform offset of at most
    ``position_noise`` per axis, or the point passed as ``reset(options={"goal": (x, y)})``,
    which must lie in a free cell (a ValueError says so otherwise).

    ## Success and rewards

    Success (``info["is_success"]``, which terminates) is a distance below
    ``distance_threshold`` (0.3 cells). Rewards, from :meth:`compute_reward`: sparse
    (``goalenvs/PointMaze-v0`` and the Medium / Large ids) 0 on success, else -1; dense (the
    ``Dense`` ids) minus the maze distance: the BFS shortest path in cells between the cells
    of the two goals, or the straight distance when they share a cell. It is never the
    distance through a wall.

    ## Dynamics

    PointReach's, each ``dt`` (0.05 s; ``max_speed`` 3 cells/s, ``max_speed * dt`` < 1
    cell), moving along x then y: a move into a wall cell stops 0.001 short of its face and
    zeroes that velocity component.

    ## Start and end

    At rest at the centre of a free cell other than the goal's, plus a uniform offset of
    at most ``position_noise`` per axis. Truncation: the registered ``TimeLimit``, 100
    steps (umaze), 200 (medium), 300 (large).

    ## Arguments

    ``maze_map``: a layout name ("umaze", the default; "medium", "large") or rows (strings
    of "#" and ".", or lists of 0/1 with 1 a wall); the constants above (``position_noise``
    0.25); ``render_mode`` (None, "human", "rgb_array"): walls, goal with its success
    radius, the point with its velocity arrow and trail, and the step, reward and success.
    """

    metadata: dict[str, object] = {"render_modes": ["human", "rgb_array"], "render_fps": 20}

    def __init__(
        self,
        maze_map: object = "umaze",
        reward_type: str = "sparse",
        action_scale: float = 30.0,
        dt: float = 0.05,
        max_speed: float = 3.0,
        distance_threshold: float = 0.3,
        position_noise: float = 0.25,
        render_mode: str | None = None,
    ) -> None:
        params = PointMazeParams(
            maze_map, reward_type, action_scale, dt, max_speed, distance_threshold, position_noise
        )
        self._setup(params, render_mode)


# --------------------------------------------------------------------------- vector env


class PointMazeVectorEnv(_PointMazeFaces, GoalVectorEnv):  # type: ignore[misc]
    """The vector twin of :class:`PointMazeEnv` (:class:`GoalVectorEnv`)."""

    metadata: dict[str, object] = twin_metadata(PointMazeEnv)

    def __init__(
        self,
        num_envs: int = 1,
        maze_map: object = "umaze",
        reward_type: str = "sparse",
        action_scale: float = 30.0,
        dt: float = 0.05,
        max_speed: float = 3.0,
        distance_threshold: float = 0.3,
        position_noise: float = 0.25,
        max_episode_steps: int | None = 100,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        device: DeviceLike = None,
    ) -> None:
        params = PointMazeParams(
            maze_map, reward_type, action_scale, dt, max_speed, distance_threshold, position_noise
        )
        self._start(params, num_envs, max_episode_steps, autoreset_mode, render_mode, device)
        self._free_cells = self.constant(self.params.free_cells)

    def _draw_episodes_on_device(self, count: int, goal: object = None) -> tuple[Any, Any]:
        noise = self.params.position_noise
        return draw_episodes(self.torch_generator, self._free_cells, noise, count, goal)
