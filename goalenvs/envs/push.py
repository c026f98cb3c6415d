"""Push: a disc pusher shoves a disc block onto a target spot of a walled table (a 2D
Fetch Push: the goal is the block's position, which random episodes rarely move)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from goalenvs.core import (
    GoalEnv,
    GoalVectorEnv,
    check_choice,
    check_positive,
    goal_dict_space,
    goal_obs,
    twin_metadata,
)
from goalenvs.core.backend import clear_points
from goalenvs.core.types import ArrayT, DeviceLike
from goalenvs.envs.canvas import Canvas
from goalenvs.envs.planar import (
    AGENT,
    GOAL,
    GOAL_RING,
    TEXT,
    PlanarReach,
    PlanarRendering,
    accelerate,
    arena_canvas,
    goal_distance,
)
from goalenvs.envs.single import SingleEnv

REWARD_TYPES = ("sparse", "dense")


@dataclass(frozen=True)
class PushParams:
    """The checked constants of Push, shared by the single env and its twin."""

    reward_type: str = "sparse"
    action_scale: float = 10.0
    dt: float = 0.05
    max_speed: float = 1.0
    friction: float = 10.0
    pusher_radius: float = 0.05
    block_radius: float = 0.08
    distance_threshold: float = 0.05
    bound: float = 1.0
    block_range: float = 0.2
    goal_range: float = 0.3
    pusher_range: float = 0.3

    def __post_init__(self) -> None:
        check_choice("reward_type", self.reward_type, REWARD_TYPES)
        for constant in fields(self)[1:]:  # every field after reward_type
            check_positive(constant.name, getattr(self, constant.name))
        # A pusher that moved further than the two radii in one step could pass through
        # the block without touching it.
        if self.max_speed * self.dt >= self.pusher_radius + self.block_radius:
            raise ValueError(
                f"max_speed * dt = {self.max_speed * self.dt} must be < pusher_radius + "
                f"block_radius = {self.pusher_radius + self.block_radius} (no tunnelling)"
            )
        if self.pusher_range > self.bound:
            raise ValueError(
                f"pusher_range={self.pusher_range} must be <= bound={self.bound}: the pusher "
                "starts on the table"
            )
        for name in ("block_range", "goal_range"):
            if getattr(self, name) > self.bound - self.block_radius:
                raise ValueError(
                    f"{name}={getattr(self, name)} must be <= bound - block_radius = "
                    f"{self.bound - self.block_radius}: the block must fit on the table"
                )

    @property
    def block_limit(self) -> float:
        """How far from the centre the block's centre may go (it touches the table's edge)."""
        return self.bound - self.block_radius

    def spaces(self) -> tuple[spaces.Dict, spaces.Box]:
        """The single env's (observation space, action space)."""
        b, v, lim = self.bound, self.max_speed, self.block_limit
        # Speeds: the block can be shoved at most at the pusher's speed and only slows.
        low = np.array([-b, -b, -v, -v, -lim, -lim, -v, -v, -2 * b, -2 * b], np.float32)
        observation = spaces.Box(low, -low, dtype=np.float32)
        goal = spaces.Box(-lim, lim, (2,), np.float32)
        action = spaces.Box(-1.0, 1.0, (2,), np.float32)
        return goal_dict_space(observation, goal), action


# --------------------------------------------------------------------------- kernel


def push_step(
    pusher: ArrayT, pusher_velocity: ArrayT, block: ArrayT, block_velocity: ArrayT, action: ArrayT,
    p: PushParams, xp: ModuleType,
) -> tuple[ArrayT, ArrayT, ArrayT, ArrayT]:  # fmt: skip
    """One step of ``(batch, 2)`` pusher and block positions and velocities: new arrays.

    1. The pusher accelerates, its speed capped, and moves; the table's edge stops it.
    2. The block slides on, and Coulomb friction takes ``friction * dt`` off its speed.
    3. Contact: where the discs overlap, the block is pushed out along the line of
       centres and takes the pusher's speed along that line if it was slower (a heavy
       pusher, an inelastic push). The block stops at the table's edge; whatever
       overlap is left there pushes the pusher back instead.
    """
    # 1. pusher: PointReach's semi-implicit Euler with inelastic table edges.
    v = accelerate(pusher_velocity, action, p.action_scale, p.dt, p.max_speed, xp)
    moved = pusher + v * p.dt
    pusher = xp.clip(moved, -p.bound, p.bound)
    v = xp.where(moved == pusher, v, 0.0 * v)
    # 2. block: slide, then friction.
    bv = block_velocity
    block = block + bv * p.dt
    bspeed = xp.sqrt(bv[:, 0] * bv[:, 0] + bv[:, 1] * bv[:, 1])[:, None]
    slowed = xp.clip(bspeed - p.friction * p.dt, 0.0, None)
    bv = bv * (slowed / xp.clip(bspeed, 1e-12, None))
    # 3. contact along the unit normal n from the pusher's centre to the block's.
    reach = p.pusher_radius + p.block_radius
    d = block - pusher
    dist = xp.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1])[:, None]
    touching = dist < reach
    n = xp.where(dist > 0, d / xp.clip(dist, 1e-12, None), 0.0 * d + 1.0)
    pushed = pusher + n * reach
    approach = v[:, :1] * n[:, :1] + v[:, 1:] * n[:, 1:]  # pusher speed along n
    along = bv[:, :1] * n[:, :1] + bv[:, 1:] * n[:, 1:]  # block speed along n
    kicked = bv + n * xp.clip(approach - along, 0.0, None)
    block = xp.where(touching, pushed, block)
    bv = xp.where(touching, kicked, bv)
    # The table's edge stops the block (inelastic) and, if pushed into it, the pusher.
    lim = p.block_limit
    held = xp.clip(block, -lim, lim)
    bv = xp.where(held == block, bv, 0.0 * bv)
    pusher = xp.clip(pusher + xp.where(touching, held - block, 0.0 * block), -p.bound, p.bound)
    bv = xp.clip(bv, -p.max_speed, p.max_speed)
    return pusher, v, held, bv


def draw_episode(
    rng: np.random.Generator, params: PushParams, goal: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One episode's float32 (2,) ``(pusher, block, goal)`` from one generator: uniform in
    their ranges, the goal (or, when pinned, the block) redrawn until beyond
    ``distance_threshold`` of the other, the pusher until it clears the block."""
    p = params
    block = rng.uniform(-p.block_range, p.block_range, 2).astype(np.float32)
    target = None if goal is None else np.asarray(goal, np.float32)
    while target is None or goal_distance(block, target, np) < p.distance_threshold:
        if goal is None:
            target = rng.uniform(-p.goal_range, p.goal_range, 2).astype(np.float32)
        else:
            block = rng.uniform(-p.block_range, p.block_range, 2).astype(np.float32)
    clearance = p.pusher_radius + 2 * p.block_radius
    while True:
        pusher = rng.uniform(-p.pusher_range, p.pusher_range, 2).astype(np.float32)
        if goal_distance(pusher, block, np) >= clearance:
            return pusher, block, target


def draw_episodes(
    generator: Any, params: PushParams, count: int, goal: Any
) -> tuple[Any, Any, Any]:
    """:func:`draw_episode`'s distribution for ``count`` sub-envs in one batch from one
    ``torch.Generator`` (its rejections by :func:`goalenvs.core.backend.clear_points`):
    float32 ``(count, 2)`` pushers, blocks and goals on its device, as a pinned ``goal``."""
    import torch

    p = params
    if goal is None:
        block = torch.rand((count, 2), generator=generator, device=generator.device)
        block = (block - 0.5) * (2 * p.block_range)
        target = clear_points(generator, block, p.goal_range, p.distance_threshold)
    else:
        target = goal.float().expand(count, 2).clone()
        block = clear_points(generator, target, p.block_range, p.distance_threshold)
    clearance = p.pusher_radius + 2 * p.block_radius
    return clear_points(generator, block, p.pusher_range, clearance), block, target


# --------------------------------------------------------------------------- rendering

_TABLE, _EDGE, _BLOCK = (232, 222, 200), (90, 70, 50), (200, 60, 50)


class _PushFaces(PlanarReach):
    """What both faces share: the planar goal functions (of the block's position) and the
    frame (the twin's shows sub-env 0)."""

    params: PushParams
    episode_state = ("_pusher", "_block", "_goal")
    zeroed_on_reset = ("_pusher_velocity", "_block_velocity")

    def _allocate(self, n: int) -> None:
        super()._allocate(n)
        self._pusher, self._pusher_velocity, self._block, self._block_velocity, self._goal = (
            self.zeros((n, 2), np.float32) for _ in range(5)
        )

    def _reached(self) -> Any:
        return self._block

    def _draw_episode(
        self, rng: np.random.Generator, goal: np.ndarray | None = None
    ) -> tuple[np.ndarray, ...]:
        return draw_episode(rng, self.params, goal)

    def _step_envs(self, actions: np.ndarray) -> None:
        self._pusher, self._pusher_velocity, self._block, self._block_velocity = push_step(
            self._pusher, self._pusher_velocity, self._block, self._block_velocity, actions,
            self.params, self.xp,
        )  # fmt: skip

    def _observation(self) -> dict[str, object]:
        # (batch, 10): pusher, its velocity, block, its velocity, block - pusher.
        pusher, block = self._pusher, self._block
        parts = (pusher, self._pusher_velocity, block, self._block_velocity, block - pusher)
        obs = self.xp.concatenate(parts, axis=1)
        return goal_obs(obs, self.fresh(block), self.fresh(self._goal))

    def _new_canvas(self) -> Canvas:
        return arena_canvas(self.params.bound, "goalenvs Push")

    def _draw_frame(self, canvas: Canvas) -> None:
        p = self.params
        pusher, block, goal = self._rows(self._pusher, self._block, self._goal)
        canvas.clear()
        canvas.rect(-p.bound, -p.bound, p.bound, p.bound, _TABLE)
        canvas.rect(-p.bound, -p.bound, p.bound, p.bound, _EDGE, 2)
        canvas.circle(goal, max(p.distance_threshold, p.block_radius), GOAL)
        canvas.circle(goal, max(p.distance_threshold, p.block_radius), GOAL_RING, 2)
        canvas.circle(block, p.block_radius, _BLOCK)
        canvas.circle(pusher, p.pusher_radius, AGENT)
        canvas.text(self._frame_hud(), (8, 8), TEXT, 20)


# --------------------------------------------------------------------------- single env


class PushEnv(_PushFaces, PlanarRendering, SingleEnv, GoalEnv):
    """A disc pusher shoves a disc block onto a target spot.

    ## Description

    On a walled square table ``[-bound, bound]^2`` a pusher disc (PointReach's controls)
    must shove a block disc within ``distance_threshold`` of a target spot.

    ## Action Space

    ``Box(-1, 1, (2,), float32)``: the pusher's acceleration along x and y, in units of
    ``action_scale`` (10).

    ## Observation Space

    ``Dict(observation, achieved_goal, desired_goal)``, float32 Boxes (``lim`` =
    ``bound - block_radius``, ``v`` = ``max_speed``):

    | Key           | Index | Meaning              | Min     | Max    |
    |---------------|-------|----------------------|---------|--------|
    | observation   | 0, 1  | pusher x, y          | -bound  | bound  |
    | observation   | 2, 3  | pusher vx, vy        | -v      | v      |
    | observation   | 4, 5  | block x, y           | -lim    | lim    |
    | observation   | 6, 7  | block vx, vy         | -v      | v      |
    | observation   | 8, 9  | block - pusher       | -2bound | 2bound |
    | achieved_goal | 0, 1  | block x, y           | -lim    | lim    |
    | desired_goal  | 0, 1  | target x, y          | -lim    | lim    |

    ## Goal

    A spot uniform in ``[-goal_range, goal_range]^2`` (0.3), beyond
    ``distance_threshold`` of the block, or the one passed as
    ``reset(options={"goal": (x, y)})``, which must lie on the table within ``lim``
    (a ValueError says so otherwise).

    ## Success and rewards

    Success (``info["is_success"]``, which terminates) is the block's centre within
    ``distance_threshold`` (0.05) of the target. Rewards, from :meth:`compute_reward`:
    sparse (``goalenvs/Push-v0``) 0 on success, else -1; dense (``goalenvs/PushDense-v0``)
    minus the block's distance to the target.

    ## Dynamics

    As :func:`push_step` (``dt`` 0.05 s): the pusher moves as PointReach's point; Coulomb
    friction slows the block by ``friction * dt`` per step (one shoved at full speed slides
    on 0.075); ``max_speed * dt`` must be below the sum of the radii (no tunnelling).

    ## Start and end

    Both at rest: the block uniform in ``[-block_range, block_range]^2`` (0.2), the
    pusher uniform in ``[-pusher_range, pusher_range]^2`` (0.3) at least ``block_radius``
    clear of the block (Fetch Push's proportions). Truncation: after 50 steps, by the
    registered ``TimeLimit``.

    ## Arguments

    The constants above (``friction`` 10 per second, ``pusher_radius`` 0.05,
    ``block_radius`` 0.08) and ``render_mode`` (None, "human", "rgb_array"): table, target
    spot, block, pusher, and the step, reward and success.
    """

    metadata: dict[str, object] = {"render_modes": ["human", "rgb_array"], "render_fps": 20}

    def __init__(
        self,
        reward_type: str = "sparse",
        action_scale: float = 10.0,
        dt: float = 0.05,
        max_speed: float = 1.0,
        friction: float = 10.0,
        pusher_radius: float = 0.05,
        block_radius: float = 0.08,
        distance_threshold: float = 0.05,
        bound: float = 1.0,
        block_range: float = 0.2,
        goal_range: float = 0.3,
        pusher_range: float = 0.3,
        render_mode: str | None = None,
    ) -> None:
        params = PushParams(
            reward_type, action_scale, dt, max_speed, friction, pusher_radius, block_radius,
            distance_threshold, bound, block_range, goal_range, pusher_range,
        )  # fmt: skip
        self._setup(params, render_mode)


# --------------------------------------------------------------------------- vector env


class PushVectorEnv(_PushFaces, GoalVectorEnv):  # type: ignore[misc]
    """The vector twin of :class:`PushEnv` (:class:`GoalVectorEnv`)."""

    metadata: dict[str, object] = twin_metadata(PushEnv)

    def __init__(
        self,
        num_envs: int = 1,
        reward_type: str = "sparse",
        action_scale: float = 10.0,
        dt: float = 0.05,
        max_speed: float = 1.0,
        friction: float = 10.0,
        pusher_radius: float = 0.05,
        block_radius: float = 0.08,
        distance_threshold: float = 0.05,
        bound: float = 1.0,
        block_range: float = 0.2,
        goal_range: float = 0.3,
        pusher_range: float = 0.3,
        max_episode_steps: int | None = 50,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        device: DeviceLike = None,
    ) -> None:
        params = PushParams(
            reward_type, action_scale, dt, max_speed, friction, pusher_radius, block_radius,
            distance_threshold, bound, block_range, goal_range, pusher_range,
        )  # fmt: skip
        self._start(params, num_envs, max_episode_steps, autoreset_mode, render_mode, device)

    def _draw_episodes_on_device(self, count: int, goal: object = None) -> tuple[Any, Any, Any]:
        return draw_episodes(self.torch_generator, self.params, count, goal)
