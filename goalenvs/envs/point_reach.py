"""PointReach: a 2D point mass accelerates to a goal position."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from goalenvs.core import (
    GoalEnv,
    GoalVectorEnv,
    check_choice,
    check_positive,
    goal_dict_space,
    twin_metadata,
)
from goalenvs.core.backend import clear_points
from goalenvs.core.types import ArrayT, DeviceLike
from goalenvs.envs.canvas import Canvas
from goalenvs.envs.planar import (
    FLOOR,
    PlanarRendering,
    PointMassTwin,
    accelerate,
    arena_canvas,
    draw_point_mass,
    goal_distance,
)
from goalenvs.envs.single import SingleEnv

if TYPE_CHECKING:
    import torch

REWARD_TYPES = ("sparse", "dense")


@dataclass(frozen=True)
class PointReachParams:
    """The checked constants of a PointReach, shared by the single env and its twin."""

    reward_type: str = "sparse"
    action_scale: float = 10.0
    dt: float = 0.05
    max_speed: float = 1.0
    distance_threshold: float = 0.05
    bound: float = 1.0

    def __post_init__(self) -> None:
        check_choice("reward_type", self.reward_type, REWARD_TYPES)
        for name in ("action_scale", "dt", "max_speed", "distance_threshold", "bound"):
            object.__setattr__(self, name, float(check_positive(name, getattr(self, name))))
        if self.distance_threshold >= self.bound * np.sqrt(2.0):
            # The farthest point from the arena's centre is sqrt(2) * bound away: a start
            # there could never be redrawn out of the goal's radius.
            raise ValueError(
                f"distance_threshold={self.distance_threshold} must be < bound * sqrt(2) = "
                f"{self.bound * np.sqrt(2.0):.4g}: starts are drawn at least that far from "
                "the goal"
            )

    def spaces(self) -> tuple[spaces.Dict, spaces.Box]:
        """The single env's (observation space, action space)."""
        b, v = self.bound, self.max_speed
        observation = spaces.Box(
            np.array([-b, -b, -v, -v], np.float32), np.array([b, b, v, v], np.float32)
        )
        goal = spaces.Box(-b, b, (2,), np.float32)
        return goal_dict_space(observation, goal), spaces.Box(-1.0, 1.0, (2,), np.float32)


# --------------------------------------------------------------------------- kernel


def reach_step(
    position: ArrayT,
    velocity: ArrayT,
    action: ArrayT,
    params: PointReachParams,
    xp: ModuleType,
) -> tuple[ArrayT, ArrayT]:
    """One step of ``(batch, 2)`` float32 positions and velocities (new arrays), as the
    env's docstring's Dynamics say."""
    p = params
    v = accelerate(velocity, action, p.action_scale, p.dt, p.max_speed, xp)
    moved = position + v * p.dt
    inside = xp.abs(moved) <= p.bound
    return xp.clip(moved, -p.bound, p.bound), xp.where(inside, v, 0.0)


def draw_episodes(
    rngs: Sequence[np.random.Generator], params: PointReachParams, goal: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """One episode per generator (only its own): float32 ``(len(rngs), 2)`` ``(start,
    goal)`` uniform in ``[-bound, bound]^2``, the goal (the start when it is given)
    redrawn two uniforms at a time while within ``distance_threshold`` of the other."""
    b = params.bound

    def points(generators: Sequence[np.random.Generator], count: int) -> np.ndarray:
        uniforms = np.array([rng.random(count) for rng in generators])
        return (uniforms * (2.0 * b) - b).astype(np.float32)

    if goal is None:
        drawn = points(rngs, 4)
        start, target = drawn[:, :2].copy(), drawn[:, 2:].copy()
    else:
        start = points(rngs, 2)
        target = np.array(np.broadcast_to(goal, start.shape), np.float32)
    redrawn = target if goal is None else start
    near = np.flatnonzero(goal_distance(start, target, np) < params.distance_threshold)
    while near.size:
        redrawn[near] = points([rngs[i] for i in near.tolist()], 2)
        near = near[goal_distance(start[near], target[near], np) < params.distance_threshold]
    return start, target


def draw_episodes_on_device(
    generator: torch.Generator, params: PointReachParams, count: int, goal: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`draw_episodes`' distribution for ``count`` sub-envs in one batch from one
    ``torch.Generator`` (its redraws by :func:`goalenvs.core.backend.clear_points`): float32
    ``(count, 2)`` starts and goals on its device, where a pinned ``goal`` lies."""
    import torch

    b, threshold = params.bound, params.distance_threshold
    if goal is None:
        start = torch.rand((count, 2), generator=generator, device=generator.device)
        start = (start - 0.5) * (2 * b)
        return start, clear_points(generator, start, b, threshold)
    target = goal.float().expand(count, 2).clone()
    return clear_points(generator, target, b, threshold), target


# --------------------------------------------------------------------------- rendering

_WALL = (60, 60, 60)


class _PointReachFaces(PointMassTwin):
    """What both faces share: the planar goal functions, the twin's hooks (a single env
    runs them on a batch of one) and the frame (the twin's shows sub-env 0)."""

    params: PointReachParams
    episode_state = ("_position", "_goal")
    zeroed_on_reset = ("_velocity",)

    def _draw_episodes(
        self, rngs: list[np.random.Generator], **pinned: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        return draw_episodes(rngs, self.params, **pinned)

    def _step_envs(self, actions: np.ndarray) -> None:
        self._position, self._velocity = reach_step(
            self._position, self._velocity, actions, self.params, self.xp
        )
        self._trail_step()

    def _new_canvas(self) -> Canvas:
        return arena_canvas(self.params.bound, "goalenvs PointReach")

    def _draw_frame(self, canvas: Canvas) -> None:
        p, bound = self.params, self.params.bound
        position, velocity, goal = self._rows(self._position, self._velocity, self._goal)
        canvas.clear()
        canvas.rect(-bound, -bound, bound, bound, FLOOR)
        canvas.rect(-bound, -bound, bound, bound, _WALL, 2)
        tip, radius, hud = position + 0.25 * velocity, 0.035 * bound, self._frame_hud()
        draw_point_mass(canvas, self._trail, goal, p.distance_threshold, position, tip, radius, hud)


# --------------------------------------------------------------------------- single env


class PointReachEnv(_PointReachFaces, PlanarRendering, SingleEnv, GoalEnv):
    """A point mass in a square arena accelerates to a goal position.

    ## Description

    A point of unit mass in the walled square ``[-bound, bound]^2`` (``bound`` = 1),
    accelerated by the action with its speed capped, must come within
    ``distance_threshold`` of a goal position: the smallest continuous-control goal task.

    ## Action Space

    ``Box(-1, 1, (2,), float32)``: the acceleration along x and y, in units of
    ``action_scale`` (10 by default).

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

    ## Success and rewards

    Success (``info["is_success"]``, which terminates) is a distance from ``achieved_goal``
    to ``desired_goal`` below ``distance_threshold`` (0.05). Rewards, from
    :meth:`compute_reward`: sparse (``goalenvs/PointReach-v0``) 0 on success, else
    -1; dense (``goalenvs/PointReachDense-v0``) minus the distance to the goal.

    ## Dynamics

    Each step of ``dt`` (0.05) seconds: ``v += action * action_scale * dt``, then ``v`` is
    rescaled to norm ``max_speed`` (1) if it is faster, then ``p += v * dt``. The walls are
    inelastic: a point that would cross one stops on it and loses the velocity component
    into it, and may slide along it.

    ## Start and end

    A uniform position in the arena, at rest. Truncation: after 50 steps, by the
    ``TimeLimit`` the ids are registered with (``gym.make(id, max_episode_steps=...)``).

    ## Arguments

    The constants above, and ``render_mode`` (None, "human", "rgb_array"): the arena, the
    point with its velocity arrow and fading trail, the goal with its success radius, and
    the step, reward and success.
    """

    metadata: dict[str, object] = {"render_modes": ["human", "rgb_array"], "render_fps": 20}

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
        params = PointReachParams(
            reward_type, action_scale, dt, max_speed, distance_threshold, bound
        )
        self._setup(params, render_mode)


# --------------------------------------------------------------------------- vector env


class PointReachVectorEnv(_PointReachFaces, GoalVectorEnv):  # type: ignore[misc]
    """The vector twin of :class:`PointReachEnv` (:class:`GoalVectorEnv`)."""

    metadata: dict[str, object] = twin_metadata(PointReachEnv)

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
        device: DeviceLike = None,
    ) -> None:
        params = PointReachParams(
            reward_type, action_scale, dt, max_speed, distance_threshold, bound
        )
        self._start(params, num_envs, max_episode_steps, autoreset_mode, render_mode, device)

    def _draw_episodes_on_device(self, count: int, goal: Any = None) -> tuple[Any, Any]:
        return draw_episodes_on_device(self.torch_generator, self.params, count, goal)
