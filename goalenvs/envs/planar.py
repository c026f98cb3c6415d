"""What the planar goal envs (point reach, point maze, push) share: 2-D goals reached
within a Euclidean distance (sparse 0 / -1, or dense minus the distance), the arena's
canvas, the arrow keys, and the point-mass envs' drawing."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import numpy as np

from goalenvs.core import InfoLike, goal_batch, goal_obs
from goalenvs.core.backend import cast
from goalenvs.core.types import ArrayT
from goalenvs.envs.canvas import Canvas, CanvasRendering, arrow_keys, import_pygame


def goal_distance(achieved: ArrayT, desired: ArrayT, xp: ModuleType) -> ArrayT:
    """Euclidean distance between 2-D goal positions (of ``xp``, numpy or torch; the goals'
    leading shape and dtype), written out elementwise: the same bits at any batch size."""
    d = achieved - desired
    return xp.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1])


def accelerate(
    velocity: ArrayT, action: ArrayT, action_scale: float, dt: float, max_speed: float,
    xp: ModuleType,
) -> ArrayT:  # fmt: skip
    """The ``(batch, 2)`` velocities after a step of semi-implicit Euler: ``v += action *
    action_scale * dt``, then rescaled to norm ``max_speed`` where faster (PointReach's,
    PointMaze's and Push's pusher's)."""
    v = velocity + action * (action_scale * dt)
    speed = xp.sqrt(v[:, 0] * v[:, 0] + v[:, 1] * v[:, 1])[:, None]
    # divide, not /: torch's scalar / tensor multiplies by a reciprocal, numpy divides.
    scale = xp.divide(max_speed, xp.clip(speed, max_speed, None))
    # Clipping after the rescale only absorbs float32 rounding (the Box bound).
    return xp.clip(v * scale, -max_speed, max_speed)


def reach_reward(
    distance: ArrayT, distance_threshold: float, reward_type: str, xp: ModuleType
) -> ArrayT:
    """Sparse: 0 within ``distance_threshold``, else -1. Dense: minus the distance.

    Same float dtype as ``distance`` (float32 in both faces).
    """
    if reward_type == "dense":
        return -distance
    zero = xp.zeros_like(distance)
    return xp.where(distance < distance_threshold, zero, zero - 1.0)


# --------------------------------------------------------------------------- drawing


class PlanarRendering(CanvasRendering):
    """:class:`CanvasRendering` of a single planar env, whose frame maps the plane and
    whose 2-D force is driven by the arrow keys."""

    def world_to_pixel(self, xy: Any) -> tuple[int, int]:
        """The frame pixel ``(column, row)`` that shows the world point ``xy``."""
        return self._get_canvas().to_pixel(xy)

    def get_keys_to_action(self) -> dict[tuple[int, ...], np.ndarray]:
        """Arrow keys accelerate (two at once go diagonally), for ``gymnasium.utils.play``.

        Actions are float32; the no-op is ``np.zeros(2, np.float32)``.
        """
        return arrow_keys()


FLOOR = (246, 246, 240)
GOAL, GOAL_RING = (120, 210, 140), (30, 130, 60)
AGENT, ARROW, TRAIL = (40, 90, 200), (230, 120, 20), (120, 150, 220)
TEXT = (30, 30, 30)
FRAME = (400, 440)  # pixels: the arena and a band above it for the heads-up text
TRAIL_LENGTH = 40  # positions kept for the fading trail


def arena_canvas(bound: float, title: str) -> Canvas:
    """The :data:`FRAME` canvas of the square arena ``[-bound, bound]^2``: a tenth of the
    arena spare around it, and a band above it for the heads-up text."""
    import_pygame()
    margin = 0.1 * bound
    return Canvas(
        FRAME,
        (-bound - margin, bound + margin, -bound - margin, bound + 3.2 * margin),
        background=(255, 255, 255),
        title=title,
    )


class PlanarReach(CanvasRendering):
    """The goal functions and twin hooks of a planar env reached within
    ``distance_threshold`` (point reach, maze, push), reading ``self.params`` (its
    ``distance_threshold`` and ``reward_type``, which are also the env's): numpy goals
    give numpy results, torch tensors give tensors on their device. A step measures
    ``_distance`` from ``_reached()`` (the achieved goal's points) to ``_goal``, which
    gives the success, :func:`reach_reward`'s reward and the heads-up text."""

    params: Any
    _goal: Any

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Sparse 0 / -1 or dense minus the distance (float32, the goals' leading shape)."""
        _, achieved, desired, xp = goal_batch(achieved_goal, desired_goal, 2)
        p = self.params
        distance = goal_distance(achieved, desired, xp)  # float64 for float64 goals
        reward = reach_reward(distance, p.distance_threshold, p.reward_type, xp)
        return cast(reward, "float32")

    def compute_terminated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """True within ``distance_threshold`` of the goal (bool, the goals' leading shape)."""
        _, achieved, desired, xp = goal_batch(achieved_goal, desired_goal, 2)
        return goal_distance(achieved, desired, xp) < self.params.distance_threshold

    def _allocate(self, n: int) -> None:
        self.reward_type = self.params.reward_type
        self.distance_threshold = float(self.params.distance_threshold)
        self._distance = self.zeros(n, np.float32) + 1

    def _reached(self) -> Any:
        raise NotImplementedError

    def _step_info(self) -> dict[str, Any]:
        self._distance = goal_distance(self._reached(), self._goal, self.xp)
        return {"is_success": self._distance < self.params.distance_threshold}

    def _goal_outcomes(self, obs: dict[str, Any], info: dict[str, Any]) -> tuple[Any, Any, None]:
        p = self.params
        self._rewards = reach_reward(self._distance, p.distance_threshold, p.reward_type, self.xp)
        return self.fresh(self._rewards), self.fresh(info["is_success"]), None

    def _frame_hud(self) -> str:
        return self._sub_env_hud(bool(self._distance[0] < self.params.distance_threshold))


class PointMassTwin(PlanarReach):
    """The ``(n, 2)`` float32 state of a point-mass env (reach, maze; a single env is a
    batch of one): ``_position``, ``_velocity`` and ``_goal``, its observation, and row
    0's trail of positions that its frame draws (kept while rendering)."""

    def _allocate(self, n: int) -> None:
        super()._allocate(n)
        zeros = self.zeros
        self._position, self._velocity, self._goal = (zeros((n, 2), np.float32) for _ in "pvg")
        self._trail: deque[np.ndarray] = deque(maxlen=TRAIL_LENGTH)

    def _reached(self) -> Any:
        return self._position

    def _trail_step(self) -> None:
        if self.render_mode is not None:
            self._trail.append(self.to_numpy(self._position[0]))

    def _episodes_started(self, index: Any) -> None:
        if self.render_mode is not None and 0 in index:
            self._trail.clear()
            self._trail_step()
            self._rewards = None

    def _observation(self) -> dict[str, Any]:
        fresh = self.fresh
        observation = self.xp.concatenate((self._position, self._velocity), axis=1)
        return goal_obs(observation, fresh(self._position), fresh(self._goal))


def draw_point_mass(
    canvas: Canvas,
    trail: Iterable[np.ndarray],
    goal: np.ndarray,
    distance_threshold: float,
    position: np.ndarray,
    arrow_tip: np.ndarray,
    radius: float,
    hud: str,
) -> None:
    """Draws, over the floor already drawn: the trail fading into the floor, the goal
    disc of radius ``distance_threshold``, the velocity arrow to ``arrow_tip``, the point
    (``radius``) and the heads-up text."""
    trail = list(trail)
    for age, point in enumerate(reversed(trail)):
        fade = (age + 1) / (len(trail) + 1)
        color = tuple(int(c + (a - c) * fade) for c, a in zip(TRAIL, FLOOR, strict=True))
        canvas.pygame.draw.circle(canvas.surface, color, canvas.to_pixel(point), 2)
    canvas.circle(goal, distance_threshold, GOAL)
    canvas.circle(goal, distance_threshold, GOAL_RING, 2)
    canvas.arrow(position, arrow_tip, ARROW, 3)
    canvas.circle(position, radius, AGENT)
    canvas.text(hud, (8, 8), TEXT, 20)
