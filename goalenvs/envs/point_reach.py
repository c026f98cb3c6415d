"""PointReach: a 2D point mass accelerates to a goal position.

Three parts, in this order: the batched numpy kernel, :class:`PointReachEnv` (one env),
:class:`PointReachVectorEnv` (N envs in one numpy call, the ids' ``vector_entry_point``).
Both faces draw their episodes with :func:`draw_episodes` and step with :func:`integrate`.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from goalenvs.core import (
    GoalEnv,
    GoalVectorEnv,
    InfoLike,
    check_action,
    check_choice,
    check_goal_option,
    check_positive,
    goal_arrays,
    goal_dict_space,
)
from goalenvs.envs.canvas import Canvas, hud_line, import_pygame
from goalenvs.envs.random_streams import TakeUniforms, UniformStreams, generator_taker

REWARD_TYPES = ("sparse", "dense")

# --------------------------------------------------------------------------- kernel


def draw_episodes(
    take: TakeUniforms,
    batch: int,
    bound: float,
    distance_threshold: float,
    goal: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draws ``batch`` episodes: ``(position, velocity, goal)``, float32, each (batch, 2).

    ``take(rows, count)`` returns ``count`` uniforms for each episode in ``rows`` (None:
    all of them); each episode reads only its own stream. Position and goal are uniform in
    ``[-bound, bound]^2`` (the goal may be given instead, one or one per episode) and the
    velocity is zero. A start already within ``distance_threshold`` of its goal is
    redrawn: the goal when it was drawn, the position when it was given.
    """
    pinned = goal is not None
    if pinned:
        target = np.array(np.broadcast_to(goal, (batch, 2)), dtype=np.float32)
        position = _uniform_points(take(None, 2), bound)
    else:
        points = _uniform_points(take(None, 4), bound)
        position, target = points[:, :2].copy(), points[:, 2:].copy()
    too_close = goal_distance(position, target) < distance_threshold
    redraw = too_close.nonzero()[0]
    while redraw.size:
        fresh = _uniform_points(take(redraw, 2), bound)
        if pinned:
            position[redraw] = fresh
        else:
            target[redraw] = fresh
        redraw = redraw[goal_distance(position[redraw], target[redraw]) < distance_threshold]
    return position, np.zeros((batch, 2), np.float32), target


def _uniform_points(u: np.ndarray, bound: float) -> np.ndarray:
    return (u * (2.0 * bound) - bound).astype(np.float32)


def integrate(
    position: np.ndarray,
    velocity: np.ndarray,
    action: np.ndarray,
    action_scale: float,
    dt: float,
    max_speed: float,
    bound: float,
) -> None:
    """Advances (batch, 2) float32 positions and velocities by one step, in place.

    Semi-implicit Euler: the acceleration ``action * action_scale`` changes the velocity,
    whose norm is then capped at ``max_speed``, and the new velocity moves the point. The
    arena's walls are inelastic: a point that would leave ``[-bound, bound]^2`` stops at
    the wall and loses the velocity component into it (it can still slide along it).
    """
    velocity += action * np.float32(action_scale * dt)
    # Capping the norm rescales the vector; clipping the components afterwards only
    # absorbs float32 rounding so the observation stays inside its Box. Each column is
    # scaled on its own: numpy loops row by row over a (batch, 1) * (batch, 2) broadcast.
    scale = np.float32(max_speed) / np.maximum(_norm(velocity), np.float32(max_speed))
    velocity[:, 0] *= scale
    velocity[:, 1] *= scale
    _clip(velocity, max_speed)
    position += velocity * np.float32(dt)
    inside = np.abs(position) <= bound
    _clip(position, bound)
    velocity *= inside  # zero where the point hit a wall


def _clip(x: np.ndarray, limit: float) -> None:
    # Two ufuncs in place: np.clip's Python wrapper costs more than the work on small arrays.
    np.maximum(x, -limit, out=x)
    np.minimum(x, limit, out=x)


def _norm(xy: np.ndarray) -> np.ndarray:
    # Written out rather than a reduction or hypot: elementwise IEEE operations give the
    # same bits for any batch size, which the single env == vector env guarantee needs.
    x, y = xy[..., 0], xy[..., 1]
    return np.sqrt(x * x + y * y)


def goal_distance(achieved_goal: np.ndarray, desired_goal: np.ndarray) -> np.ndarray:
    """Euclidean distance between goal positions, over the goals' leading shape."""
    return _norm(achieved_goal - desired_goal)


def reach_reward(distance: np.ndarray, distance_threshold: float, reward_type: str) -> np.ndarray:
    """Sparse: 0 within ``distance_threshold``, else -1. Dense: minus the distance. float32."""
    if reward_type == "dense":
        return (-distance).astype(np.float32)
    return (distance < distance_threshold).astype(np.float32) - np.float32(1.0)


# --------------------------------------------------------------------------- rendering

_ARENA, _WALL = (246, 246, 240), (60, 60, 60)
_GOAL, _GOAL_RING = (120, 210, 140), (30, 130, 60)
_AGENT, _ARROW, _TRAIL = (40, 90, 200), (230, 120, 20), (120, 150, 220)
_TEXT = (30, 30, 30)
_FRAME = (400, 440)
_TRAIL_LENGTH = 40


def _make_canvas(bound: float) -> Canvas:
    import_pygame()
    # A tenth of the arena spare around it, and a band above it for the heads-up text.
    margin = 0.1 * bound
    return Canvas(
        _FRAME,
        (-bound - margin, bound + margin, -bound - margin, bound + 3.2 * margin),
        background=(255, 255, 255),
        title="goalenvs PointReach",
    )


def _draw_reach(
    canvas: Canvas,
    bound: float,
    distance_threshold: float,
    position: np.ndarray,
    velocity: np.ndarray,
    goal: np.ndarray,
    trail: deque[np.ndarray],
    hud: str,
) -> None:
    pg = canvas.pygame
    canvas.clear()
    canvas.rect(-bound, -bound, bound, bound, _ARENA)
    canvas.rect(-bound, -bound, bound, bound, _WALL, 2)
    for age, point in enumerate(reversed(trail)):
        fade = (age + 1) / (len(trail) + 1)
        color = tuple(int(c + (a - c) * fade) for c, a in zip(_TRAIL, _ARENA, strict=True))
        pg.draw.circle(canvas.surface, color, canvas.to_pixel(point), 2)
    canvas.circle(goal, distance_threshold, _GOAL)
    canvas.circle(goal, distance_threshold, _GOAL_RING, 2)
    canvas.arrow(position, position + 0.25 * velocity, _ARROW, 3)
    canvas.circle(position, 0.035 * bound, _AGENT)
    canvas.text(hud, (8, 8), _TEXT, 20)


# --------------------------------------------------------------------------- single env


class _Constants:
    """The checked constructor constants shared by the single env and the vector twin."""

    def __init__(
        self,
        reward_type: str,
        action_scale: float,
        dt: float,
        max_speed: float,
        distance_threshold: float,
        bound: float,
    ) -> None:
        self.reward_type = check_choice("reward_type", reward_type, REWARD_TYPES)
        self.action_scale = float(check_positive("action_scale", action_scale))
        self.dt = float(check_positive("dt", dt))
        self.max_speed = float(check_positive("max_speed", max_speed))
        self.distance_threshold = float(check_positive("distance_threshold", distance_threshold))
        self.bound = float(check_positive("bound", bound))

    def spaces(self) -> tuple[spaces.Dict, spaces.Box]:
        b, v = self.bound, self.max_speed
        observation = spaces.Box(
            np.array([-b, -b, -v, -v], np.float32), np.array([b, b, v, v], np.float32)
        )
        goal = spaces.Box(-b, b, (2,), np.float32)
        return goal_dict_space(observation, goal), spaces.Box(-1.0, 1.0, (2,), np.float32)


class _PointReachGoals:
    """The goal functions of both faces, defined once (they read the reward constants)."""

    distance_threshold: float
    reward_type: str

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Sparse 0 / -1 or dense minus the distance (float32, the goals' leading shape)."""
        _, achieved, desired = goal_arrays(achieved_goal, desired_goal, 2)
        distance = goal_distance(achieved, desired)
        return reach_reward(distance, self.distance_threshold, self.reward_type)

    def compute_terminated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """True within ``distance_threshold`` of the goal (bool, the goals' leading shape)."""
        _, achieved, desired = goal_arrays(achieved_goal, desired_goal, 2)
        return goal_distance(achieved, desired) < self.distance_threshold


class PointReachEnv(_PointReachGoals, GoalEnv):
    """A point mass in a square arena accelerates to a goal position.

    ## Description

    A point of unit mass moves in the plane inside the walled square ``[-bound, bound]^2``
    (``bound`` = 1 by default). The action accelerates it; its speed is capped. The task
    is to bring it within ``distance_threshold`` of a goal position: the smallest
    continuous-control goal task, with physics simple enough to read in ten lines and a
    success that a DDPG+HER agent reaches in a few thousand steps.

    ## Action Space

    ``Box(-1, 1, (2,), float32)``: the acceleration along x and y, in units of
    ``action_scale`` (10 by default). Finite actions outside [-1, 1] are clipped to it;
    NaN or inf, or a wrong shape or dtype, raise an error naming the action and the space.

    ## Observation Space

    ``Dict(observation, achieved_goal, desired_goal)``, float32 Boxes:

    | Key           | Index | Meaning     | Min        | Max       |
    |---------------|-------|-------------|------------|-----------|
    | observation   | 0     | x           | -bound     | bound     |
    | observation   | 1     | y           | -bound     | bound     |
    | observation   | 2     | vx          | -max_speed | max_speed |
    | observation   | 3     | vy          | -max_speed | max_speed |
    | achieved_goal | 0, 1  | x, y        | -bound     | bound     |
    | desired_goal  | 0, 1  | goal x, y   | -bound     | bound     |

    ## Goal

    A position drawn uniformly in the arena, at least ``distance_threshold`` from the
    start, or the one passed as ``reset(options={"goal": (x, y)})`` (it must lie inside
    the arena).

    ## Success

    ``info["is_success"]`` is True when the distance from ``achieved_goal`` to
    ``desired_goal`` is below ``distance_threshold`` (0.05).

    ## Rewards

    From :meth:`compute_reward`: sparse (``goalenvs/PointReach-v0``) 0 on success, else
    -1; dense (``goalenvs/PointReachDense-v0``) minus the distance to the goal.

    ## Dynamics

    Each step of ``dt`` (0.05) seconds: ``v += action * action_scale * dt``, then ``v`` is
    rescaled to norm ``max_speed`` (1) if it is faster, then ``p += v * dt``. The walls are
    inelastic: a point that would cross one stops on it and loses the velocity component
    into it, and may slide along it.

    ## Starting State

    A uniform position in the arena, at rest.

    ## Episode End

    - Termination: success.
    - Truncation: after 50 steps, by the ``TimeLimit`` the ids are registered with
      (``gym.make(id, max_episode_steps=...)`` changes it).

    ## Arguments

    - ``reward_type`` ("sparse" or "dense", "sparse")
    - ``action_scale`` (float, 10.0): acceleration of a unit action.
    - ``dt`` (float, 0.05): seconds per step.
    - ``max_speed`` (float, 1.0): speed cap (norm of the velocity).
    - ``distance_threshold`` (float, 0.05): success radius.
    - ``bound`` (float, 1.0): the arena and the goals span ``[-bound, bound]^2``.
    - ``render_mode`` (None, "human", "rgb_array"): the arena, the point with its velocity
      arrow and fading trail, the goal with its success radius, and the step, reward and
      success.

    ## Version History

    - v0: initial version.
    """

    metadata: dict[str, Any] = {"render_modes": ["human", "rgb_array"], "render_fps": 20}

    def __init__(
        self,
        reward_type: str = "sparse",
        action_scale: float = 10.0,
        dt: float = 0.05,
        max_speed: float = 1.0,
        distance_threshold: float = 0.05,
        bound: float = 1.0,
        render_mode: str | None = None,
    ) -> None:
        self.constants = _Constants(
            reward_type, action_scale, dt, max_speed, distance_threshold, bound
        )
        self.reward_type = self.constants.reward_type
        self.distance_threshold = self.constants.distance_threshold
        if render_mode is not None:
            check_choice("render_mode", render_mode, self.metadata["render_modes"])
        self.render_mode = render_mode
        self.observation_space, self.action_space = self.constants.spaces()
        # Separate contiguous arrays: numpy runs in-place ufuncs on column slices of a
        # shared (n, 4) array several times slower.
        self._position = np.zeros((1, 2), np.float32)
        self._velocity = np.zeros((1, 2), np.float32)
        self._goal = np.zeros((1, 2), np.float32)
        self._elapsed = 0
        self._success = False
        self._last_reward: float | None = None
        self._has_reset = False
        self._trail: deque[np.ndarray] = deque(maxlen=_TRAIL_LENGTH)
        self._canvas: Canvas | None = None

    # ---- gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Draws a new start and goal; ``options={"goal": (x, y)}`` pins the goal."""
        super().reset(seed=seed)
        goal = None
        if options is not None and options.get("goal") is not None:
            goal = check_goal_option(options["goal"], self.observation_space["desired_goal"])
        c = self.constants
        self._position, self._velocity, self._goal = draw_episodes(
            generator_taker(self.np_random), 1, c.bound, c.distance_threshold, goal
        )
        self._elapsed = 0
        self._success = False
        self._last_reward = None
        self._has_reset = True
        self._trail.clear()
        if self.render_mode is not None:
            self._trail.append(self._position[0].copy())
        if self.render_mode == "human":
            self.render()
        return self._obs(), {"is_success": False}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Accelerates the point; see the class docstring for rewards and episode ends."""
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        action = check_action(action, self.action_space)
        c = self.constants
        integrate(
            self._position, self._velocity, action[None], c.action_scale, c.dt, c.max_speed, c.bound
        )
        self._elapsed += 1
        distance = goal_distance(self._position, self._goal)
        self._success = bool(distance[0] < c.distance_threshold)
        reward = float(reach_reward(distance, c.distance_threshold, c.reward_type)[0])
        self._last_reward = reward
        if self.render_mode is not None:
            self._trail.append(self._position[0].copy())
        if self.render_mode == "human":
            self.render()
        return self._obs(), reward, self._success, False, {"is_success": self._success}

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "observation": np.concatenate((self._position[0], self._velocity[0])),
            "achieved_goal": self._position[0].copy(),
            "desired_goal": self._goal[0].copy(),
        }

    # ---- rendering and play
    def render(self) -> np.ndarray | None:
        """Draws the arena; returns the frame in ``rgb_array`` mode."""
        if self.render_mode is None:
            return None
        if self._canvas is None:
            self._canvas = _make_canvas(self.constants.bound)
        _draw_reach(
            self._canvas,
            self.constants.bound,
            self.distance_threshold,
            self._position[0],
            self._velocity[0],
            self._goal[0],
            self._trail,
            hud_line(self._elapsed, self._last_reward, self._success),
        )
        if self.render_mode == "human":
            self._canvas.show(self.metadata["render_fps"])
            return None
        return self._canvas.rgb_array()

    def close(self) -> None:
        """Closes the human window, if one is open."""
        if self._canvas is not None:
            self._canvas.close()
            self._canvas = None

    def world_to_pixel(self, xy: Any) -> tuple[int, int]:
        """The frame pixel ``(column, row)`` that shows the world point ``xy``."""
        if self._canvas is None:
            self._canvas = _make_canvas(self.constants.bound)
        return self._canvas.to_pixel(xy)

    def get_keys_to_action(self) -> dict[tuple[int, ...], np.ndarray]:
        """Arrow keys accelerate (two at once go diagonally), for ``gymnasium.utils.play``.

        Actions are float32; the no-op is ``np.zeros(2, np.float32)``.
        """
        return _arrow_keys()


def _arrow_keys() -> dict[tuple[int, ...], np.ndarray]:
    pg = import_pygame()
    directions = {pg.K_LEFT: (-1.0, 0.0), pg.K_RIGHT: (1.0, 0.0), pg.K_UP: (0.0, 1.0)}
    directions[pg.K_DOWN] = (0.0, -1.0)
    mapping: dict[tuple[int, ...], np.ndarray] = {}
    for key, direction in directions.items():
        mapping[(key,)] = np.array(direction, np.float32)
    for vertical in (pg.K_UP, pg.K_DOWN):
        for horizontal in (pg.K_LEFT, pg.K_RIGHT):
            combined = np.add(directions[vertical], directions[horizontal]).astype(np.float32)
            mapping[tuple(sorted((vertical, horizontal)))] = combined
    return mapping


# --------------------------------------------------------------------------- vector env


class PointReachVectorEnv(_PointReachGoals, GoalVectorEnv):
    """``num_envs`` point-reach envs stepped in one numpy call.

    Sub-env ``i`` follows :class:`PointReachEnv` exactly (same kernel, same draws): a
    vector env reset with ``seed=s`` and given actions reproduces the single envs reset
    with ``s + i`` and given the same actions. Same arguments as :class:`PointReachEnv`,
    plus ``num_envs``, ``max_episode_steps`` (``gym.make_vec`` passes the registered 50)
    and gymnasium's ``autoreset_mode`` (``next_step`` by default, ``same_step`` or
    ``disabled``). ``render_mode="rgb_array"`` draws sub-env 0.
    """

    metadata: dict[str, Any] = {
        "render_modes": ["rgb_array"],
        "render_fps": PointReachEnv.metadata["render_fps"],
        "autoreset_mode": None,
    }

    def __init__(
        self,
        num_envs: int = 1,
        reward_type: str = "sparse",
        action_scale: float = 10.0,
        dt: float = 0.05,
        max_speed: float = 1.0,
        distance_threshold: float = 0.05,
        bound: float = 1.0,
        max_episode_steps: int | None = 50,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
    ) -> None:
        self.constants = _Constants(
            reward_type, action_scale, dt, max_speed, distance_threshold, bound
        )
        self.reward_type = self.constants.reward_type
        self.distance_threshold = self.constants.distance_threshold
        observation_space, action_space = self.constants.spaces()
        super().__init__(
            num_envs,
            observation_space,
            action_space,
            max_episode_steps,
            autoreset_mode,
            render_mode,
        )
        self._position = np.zeros((self.num_envs, 2), np.float32)
        self._velocity = np.zeros((self.num_envs, 2), np.float32)
        self._goal = np.zeros((self.num_envs, 2), np.float32)
        self._distance = np.ones(self.num_envs, np.float32)
        self._streams = UniformStreams(self.num_envs)
        self._trail: deque[np.ndarray] = deque(maxlen=_TRAIL_LENGTH)
        self._canvas: Canvas | None = None
        # This step's rewards (the array step returns), for the heads-up text.
        self._rewards: np.ndarray | None = None

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Resets every sub-env (or ``options["reset_mask"]``); see :meth:`GoalVectorEnv.reset`.

        ``options["goal"]`` pins the goal: one (x, y) for all, or one per sub-env.
        """
        if seed is not None:
            self._streams.generators_changed()
        return super().reset(seed=seed, options=options)

    def _reset_envs(self, index: np.ndarray, options: dict[str, Any] | None) -> None:
        goal = None
        if options is not None and options.get("goal") is not None:
            space = self.single_observation_space["desired_goal"]
            goal = check_goal_option(options["goal"], space, self.num_envs)
            if goal.ndim == 2:
                goal = goal[index]
        c = self.constants
        take = self._streams.taker(self.np_randoms, index)
        position, velocity, target = draw_episodes(
            take, len(index), c.bound, c.distance_threshold, goal
        )
        self._position[index] = position
        self._velocity[index] = velocity
        self._goal[index] = target
        if self.render_mode is not None and 0 in index:
            self._trail.clear()
            self._trail.append(self._position[0].copy())
            self._rewards = None

    def _step_envs(self, actions: np.ndarray) -> None:
        c = self.constants
        integrate(
            self._position, self._velocity, actions, c.action_scale, c.dt, c.max_speed, c.bound
        )
        if self.render_mode is not None:
            self._trail.append(self._position[0].copy())

    def _observation(self) -> dict[str, np.ndarray]:
        return {
            "observation": np.concatenate((self._position, self._velocity), axis=1),
            "achieved_goal": self._position.copy(),
            "desired_goal": self._goal.copy(),
        }

    def _step_info(self) -> dict[str, np.ndarray]:
        # Called after this step's resets (GoalVectorEnv.step), so it measures the state
        # that the observation shows.
        self._distance = goal_distance(self._position, self._goal)
        return {"is_success": self._distance < self.distance_threshold}

    def _goal_outcomes(
        self, obs: dict[str, np.ndarray], info: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, None]:
        # The kernel's distances of this step are what compute_reward / compute_terminated
        # recompute from obs; reusing them skips their validation and a second distance.
        c = self.constants
        self._rewards = reach_reward(self._distance, c.distance_threshold, c.reward_type)
        return self._rewards, info["is_success"].copy(), None

    def render(self) -> np.ndarray | None:
        """Sub-env 0's frame (``rgb_array``), as :meth:`PointReachEnv.render` draws it."""
        if self.render_mode is None:
            return None
        if self._canvas is None:
            self._canvas = _make_canvas(self.constants.bound)
        success = bool(self._distance[0] < self.distance_threshold)
        _draw_reach(
            self._canvas,
            self.constants.bound,
            self.distance_threshold,
            self._position[0],
            self._velocity[0],
            self._goal[0],
            self._trail,
            hud_line(
                int(self.elapsed_steps[0]),
                None if self._rewards is None else float(self._rewards[0]),
                success,
            ),
        )
        return self._canvas.rgb_array()

    def close_extras(self, **kwargs: Any) -> None:
        """Releases the drawing surface."""
        self._canvas = None
