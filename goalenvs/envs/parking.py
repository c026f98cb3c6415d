"""Parking: a kinematic car parks into a goal spot of a walled lot, maybe between parked cars."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
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
    check_positive,
    goal_batch,
    goal_dict_space,
    goal_obs,
    info_values,
    twin_metadata,
)
from goalenvs.core.backend import cast, info_tensor, is_tensor
from goalenvs.core.types import ArrayT, DeviceLike
from goalenvs.envs.canvas import Canvas, CanvasRendering, arrow_keys
from goalenvs.envs.parking_lot import (
    GOAL_SIZE,
    N_SPOTS,
    POSITION_SCALE,
    SPOT_CENTER_Y,
    SPOT_CENTERS,
    SPOT_DEPTH,
    SPOT_GOALS,
    SPOT_WIDTH,
    SPOTS_PER_ROW,
    START_HALF_X,
    START_HALF_Y,
    VELOCITY_SCALE,
    WALL_X,
    WALL_Y,
    LotPainter,
    check_car_option,
    spot_at,
)
from goalenvs.envs.single import SingleEnv

# The most a substep may turn the car by half (radians): each substep drives one arc,
# and short arcs keep the per-substep speed limit close to a continuous one. The default
# constants turn at most 0.06 rad per half substep.
MAX_HALF_TURN = 0.1
REWARD_TYPES = ("sparse", "dense")


@dataclass(frozen=True)
class ParkingParams:
    """The checked constants of a Parking env, shared by the single env and its twin.

    Lengths in metres, times in seconds, speeds in m/s (see :class:`ParkingEnv`).
    """

    reward_type: str = "sparse"
    n_parked: int = 0
    length: float = 5.0
    width: float = 2.0
    max_acceleration: float = 5.0
    max_steering_deg: float = 45.0
    max_speed: float = 10.0
    step_time: float = 0.2
    substeps: int = 3
    success_threshold: float = 0.12
    collision_penalty: float = 50.0
    reward_weights: Any = (1.0, 0.3, 0.0, 0.0, 0.02, 0.02)

    def __post_init__(self) -> None:
        check_choice("reward_type", self.reward_type, REWARD_TYPES)
        n_parked = check_positive("n_parked", self.n_parked, integer=True, minimum=-1)
        if n_parked > N_SPOTS - 1:
            raise ValueError(
                f"n_parked={n_parked} is not valid: the lot has {N_SPOTS} spots and one is the "
                f"goal, so expected 0 <= n_parked <= {N_SPOTS - 1}"
            )
        floats = ("length", "width", "max_acceleration", "max_steering_deg", "max_speed",
                  "step_time", "success_threshold")  # fmt: skip
        for name in floats:
            check_positive(name, getattr(self, name))
        check_positive("substeps", self.substeps, integer=True)
        if self.max_steering_deg >= 90:
            raise ValueError(f"max_steering_deg must be < 90, got {self.max_steering_deg!r}")
        if self.width >= SPOT_WIDTH or self.length >= SPOT_DEPTH or self.width > self.length:
            raise ValueError(
                f"a car of length={self.length} and width={self.width} must fit a spot "
                f"({SPOT_WIDTH} m x {SPOT_DEPTH} m) with width <= length"
            )
        penalty = self.collision_penalty
        if isinstance(penalty, bool) or not isinstance(
            penalty, (int, float, np.integer, np.floating)
        ):
            raise TypeError(f"collision_penalty must be a number, got {penalty!r}")
        if not np.isfinite(penalty) or penalty < 0:
            raise ValueError(f"collision_penalty must be >= 0, got {penalty!r}")
        weights = np.asarray(self.reward_weights, dtype=np.float64)
        if (
            weights.shape != (GOAL_SIZE,)
            or not np.all(np.isfinite(weights))
            or (weights < 0).any()
            or not weights.any()
        ):
            raise ValueError(
                f"reward_weights={self.reward_weights!r} must be {GOAL_SIZE} finite values "
                ">= 0, not all 0"
            )
        for name in (*floats, "collision_penalty"):
            object.__setattr__(self, name, float(getattr(self, name)))
        object.__setattr__(self, "n_parked", int(n_parked))
        object.__setattr__(self, "substeps", int(self.substeps))
        object.__setattr__(self, "reward_weights", tuple(float(w) for w in weights))
        max_sin_beta = math.sin(math.atan(0.5 * math.tan(self.max_steering)))
        half_turn = self.max_speed * max_sin_beta / self.half_length * self.substep_time / 2
        if half_turn > MAX_HALF_TURN:
            raise ValueError(
                f"substeps={self.substeps} is too few: at max_speed={self.max_speed} the car "
                f"turns {2 * half_turn:.3f} rad per substep, more than {2 * MAX_HALF_TURN}; "
                "raise substeps"
            )

    @property
    def dense(self) -> bool:
        """Whether the reward is dense (minus the weighted distance)."""
        return self.reward_type == "dense"

    @property
    def half_length(self) -> float:
        """Half the car's length, m."""
        return 0.5 * self.length

    @property
    def half_width(self) -> float:
        """Half the car's width, m."""
        return 0.5 * self.width

    @property
    def max_steering(self) -> float:
        """The front-wheel angle at full lock, radians."""
        return math.radians(self.max_steering_deg)

    @property
    def substep_time(self) -> float:
        """Seconds per integration substep."""
        return self.step_time / self.substeps

    def spaces(self) -> tuple[spaces.Dict, spaces.Box]:
        """The single env's (observation space, action space)."""
        # The car's centre stays inside the walls until the step it crashes, when it can
        # overshoot by less than a car length.
        px = (WALL_X + self.length) / POSITION_SCALE
        py = (WALL_Y + self.length) / POSITION_SCALE
        pv = self.max_speed / VELOCITY_SCALE
        high = np.array([px, py, pv, pv, 1.0, 1.0], dtype=np.float32)
        box = spaces.Box(-high, high, dtype=np.float32)
        action = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
        return goal_dict_space(box, spaces.Box(-high, high, dtype=np.float32)), action


def _crashed(info: InfoLike, shape: tuple[int, ...], like: ArrayT, xp: ModuleType) -> ArrayT:
    """``info["crashed"]`` (missing: False) over the goal batch, in ``like``'s array module."""
    if is_tensor(like):
        return info_tensor(info, "crashed", like, shape, False)
    return info_values(info, "crashed", shape, False, bool)


# --------------------------------------------------------------------------- kernel
# State: the tuple (x, y, cos heading, sin heading, speed) of float64 arrays of the batch
# shape, in metres and m/s. Every function returns new arrays. The batch shape may be
# empty: the single env passes numpy float64 scalars, which cost a tenth of a call on
# 1-element arrays and round alike (the same ufunc loops, IEEE arithmetic).


def _clip(array: ArrayT, low: float, high: float, xp: ModuleType) -> ArrayT:
    """``xp.clip``; on the single env's numpy scalars the builtins, a tenth of the cost."""
    if isinstance(array, np.floating):
        return min(max(array, low), high)
    return xp.clip(array, low, high)


def advance(
    state: tuple[ArrayT, ...], action: ArrayT, params: ParkingParams, xp: ModuleType
) -> tuple[ArrayT, ...]:
    """Integrates the kinematic bicycle model over one policy step of ``(*batch, 2)`` actions.

    The slip angle ``beta = arctan(tan(steering) / 2)`` makes the centre follow a circle of
    radius ``half_length / sin(beta)``; each of the ``substeps`` arcs is driven exactly
    (speed linear within it, limited at its end) along its chord, and the heading is
    renormalised once per step.
    """
    x, y, c, s, v = state
    p = params
    h = p.substep_time
    acceleration = action[..., 0] * p.max_acceleration
    beta = xp.arctan(0.5 * xp.tan(action[..., 1] * p.max_steering))
    turn_per_metre = xp.sin(beta) / p.half_length
    speed, turned, along, across = v, 0.0, 0.0, 0.0  # along and across the first heading
    for k in range(1, p.substeps + 1):
        # |v| <= max_speed and a constant acceleration: clipping v + a t at each substep's
        # end equals clipping after every substep.
        end = _clip(v + acceleration * (k * h), -p.max_speed, p.max_speed, xp)
        distance = (speed + end) * (0.5 * h)
        turn = distance * turn_per_metre
        half = 0.5 * turn
        turned = turned + turn
        # The chord is distance * sin(half) / half, 0 / 0 where the car drives straight:
        # adding `straight` (0 or 1) makes that sin(0) / 1 + 1 and leaves the rest exact.
        straight = half == 0
        chord = distance * (xp.sin(half) / (half + straight) + straight)
        angle = turned - half + beta  # the chord's direction, from the first heading
        along = along + chord * xp.cos(angle)
        across = across + chord * xp.sin(angle)
        speed = end
    ct, st = xp.cos(turned), xp.sin(turned)
    c_end = c * ct - s * st
    s_end = s * ct + c * st
    norm = xp.sqrt(c_end * c_end + s_end * s_end)
    x_end = x + c * along - s * across
    y_end = y + s * along + c * across
    return x_end, y_end, c_end / norm, s_end / norm, speed


def achieved_goals(state: tuple[ArrayT, ...], xp: ModuleType) -> ArrayT:
    """The scaled ``(*batch, 6)`` float32 achieved goals (the observation too)."""
    x, y, c, s, v = state
    columns = (x / POSITION_SCALE, y / POSITION_SCALE, v * c / VELOCITY_SCALE,
               v * s / VELOCITY_SCALE, c, s)  # fmt: skip
    return cast(xp.stack(columns, axis=-1), "float32")


def weighted_distance(difference: ArrayT, weights: tuple[float, ...], xp: ModuleType) -> ArrayT:
    """``sqrt(sum_i w_i |d_i|)`` over the last axis: highway-env's weighted p-norm, p = 0.5.

    Summed term by term, left to right, so that any batch shape rounds alike (the step's
    reward equals ``compute_reward`` to the bit); terms of weight 0 add exactly 0 and are
    skipped.
    """
    size = abs(difference)
    total: ArrayT | float = 0.0
    for i, weight in enumerate(weights):
        if weight:
            total = total + weight * size[..., i]
    return xp.sqrt(total)


def goal_reward(distance: Any, crashed: Any, params: ParkingParams) -> tuple[Any, Any]:
    """``(reward, success)`` for weighted goal distances; a crash subtracts the penalty."""
    success = distance <= params.success_threshold
    base = -distance if params.dense else success * 1.0 - 1.0
    return base - params.collision_penalty * crashed, success


def crashes(
    state: tuple[ArrayT, ...],
    parked: ArrayT,
    spot_centers: ArrayT,
    params: ParkingParams,
    xp: ModuleType,
) -> ArrayT:
    """Whether each car overlaps a wall or a parked car: bool of the batch shape.

    Walls: the rotated car's bounding box against the wall faces (exact for half-planes).
    Parked cars (axis-aligned, nose in; ``parked`` ``(*batch, N_SPOTS)``): separating axes
    x, y and the car's two (touching is no overlap), against its own row's 14 spots only.
    """
    x, y, c, s, _ = state
    hl, hw = params.half_length, params.half_width
    ac, as_ = abs(c), abs(s)
    extent_x, extent_y = hl * ac + hw * as_, hl * as_ + hw * ac
    crashed = (abs(x) + extent_x > WALL_X) | (abs(y) + extent_y > WALL_Y)
    if not params.n_parked:
        return crashed
    # Spots along a first axis, the batch after it: numpy's loops then run along the batch.
    upper = y > 0
    parked = xp.moveaxis(parked, -1, 0)
    row = xp.where(upper, parked[SPOTS_PER_ROW:], parked[:SPOTS_PER_ROW])
    dy = y - xp.where(upper, SPOT_CENTER_Y, -SPOT_CENTER_Y)
    dx = x - spot_centers[:SPOTS_PER_ROW, 0].reshape((SPOTS_PER_ROW,) + (1,) * dy.ndim)
    overlap = (
        (abs(dx) < extent_x + hw)
        & (abs(dx * c + dy * s) < hl + hw * ac + hl * as_)
        & (abs(dy * c - dx * s) < hw + hw * as_ + hl * ac)
    )
    return crashed | ((abs(dy) < extent_y + hl) & (overlap & row).any(axis=0))


def evaluate(
    state: tuple[ArrayT, ...],
    desired_goal: ArrayT,
    parked: ArrayT,
    spot_centers: ArrayT,
    params: ParkingParams,
    xp: ModuleType,
) -> tuple[ArrayT, ArrayT, ArrayT, ArrayT]:
    """``(achieved goals, rewards, successes, crashes)`` of a batch of cars.

    The reward is :meth:`ParkingEnv.compute_reward` of the float32 goals, to the bit.
    """
    achieved = achieved_goals(state, xp)
    difference = cast(achieved, "float64") - cast(desired_goal, "float64")
    distance = weighted_distance(difference, params.reward_weights, xp)
    crashed = crashes(state, parked, spot_centers, params, xp)
    reward, success = goal_reward(distance, crashed, params)
    return achieved, cast(reward, "float32"), success, crashed


def start_episode(
    rng: np.random.Generator,
    params: ParkingParams,
    goal: np.ndarray | None,
    car: np.ndarray | None,
) -> tuple[tuple[float, ...], np.ndarray, np.ndarray]:
    """One episode's ``(state, desired goal, parked)`` from one generator, with an optional
    pinned goal and car; a pinned goal inside an occupied spot swaps that spot with the
    drawn (free) one."""
    u0, u1, u2, u3 = rng.random(4).tolist()
    heading = 2.0 * math.pi * u0
    goal_spot = min(int(u3 * N_SPOTS), N_SPOTS - 1)
    parked = np.zeros(N_SPOTS, dtype=bool)
    if params.n_parked:
        others = rng.permutation(N_SPOTS - 1)[: params.n_parked]
        parked[others + (others >= goal_spot)] = True
    x, y = START_HALF_X * (2.0 * u1 - 1.0), START_HALF_Y * (2.0 * u2 - 1.0)
    c, s, v = math.cos(heading), math.sin(heading), 0.0
    if goal is None:
        goal = SPOT_GOALS[goal_spot]
    else:
        spot = spot_at(float(goal[0]) * POSITION_SCALE, float(goal[1]) * POSITION_SCALE)
        if spot >= 0 and parked[spot]:
            parked[spot], parked[goal_spot] = False, True
    if car is not None:
        x, y, heading, v = (float(a) for a in car)
        c, s = float(np.cos(heading)), float(np.sin(heading))
    return (x, y, c, s, v), np.array(goal, dtype=np.float32), parked


def draw_episodes_on_device(
    generator: Any, params: ParkingParams, count: int, goal: Any, car: Any, spot_goals: Any
) -> tuple[tuple[object, ...], Any, Any]:
    """:func:`start_episode`'s distribution for ``count`` sub-envs in one batch from one
    ``torch.Generator``, on its device, where the pinned ``goal`` and ``car`` (one, or one
    row each) and :data:`SPOT_GOALS` (``spot_goals``) lie. The parked spots are the first
    ``n_parked`` of a uniform random order of the other spots (a batched permutation)."""
    import torch

    device = generator.device
    u = torch.rand((count, 4), generator=generator, device=device, dtype=torch.float64)
    heading = 2.0 * math.pi * u[:, 0]
    goal_spot = (u[:, 3] * N_SPOTS).long().clamp(max=N_SPOTS - 1)
    rows = torch.arange(count, device=device)
    parked = torch.zeros((count, N_SPOTS), dtype=torch.bool, device=device)
    if params.n_parked:
        order = torch.rand((count, N_SPOTS - 1), generator=generator, device=device)
        others = order.argsort(dim=1)[:, : params.n_parked]
        parked[rows[:, None], others + (others >= goal_spot[:, None]).long()] = True
    x = START_HALF_X * (2.0 * u[:, 1] - 1.0)
    y = START_HALF_Y * (2.0 * u[:, 2] - 1.0)
    v = torch.zeros(count, dtype=torch.float64, device=device)
    if goal is None:
        desired = spot_goals[goal_spot]
    else:
        desired = goal.float().expand(count, GOAL_SIZE).clone()
        # A pinned goal inside an occupied spot swaps that spot with the drawn (free) one.
        scaled = desired[:, :2].double() * POSITION_SCALE
        spot = spot_at(scaled[:, 0], scaled[:, 1], torch)
        swap = (spot >= 0) & parked[rows, spot.clamp(min=0)]
        spot = spot.clamp(min=0)
        parked[rows, spot] = parked[rows, spot] & ~swap
        parked[rows, goal_spot] = parked[rows, goal_spot] | swap
    if car is not None:
        car = car.double().expand(count, 4)
        x, y, heading, v = car[:, 0], car[:, 1], car[:, 2], car[:, 3]
    return (x, y, torch.cos(heading), torch.sin(heading), v), desired, parked


# --------------------------------------------------------------------------- rendering


class _ParkingFaces(CanvasRendering):
    """What both faces share: the goal functions, the twin's hooks (a single env runs them
    on a batch of one) and the frame that a :class:`LotPainter` draws on the canvas it
    makes (the twin's shows sub-env 0)."""

    params: ParkingParams
    _painter: LotPainter
    elapsed_steps: Any
    _row: Any = 0  # the index of the row that the frame shows

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Sparse -1/0 (or dense minus distance) minus the penalty where ``info["crashed"]``.

        float32, the goals' leading shape; a missing ``"crashed"`` key means False.
        """
        shape, achieved, desired, xp = goal_batch(achieved_goal, desired_goal, GOAL_SIZE)
        p = self.params
        difference = cast(achieved, "float64") - cast(desired, "float64")
        distance = weighted_distance(difference, p.reward_weights, xp)
        reward, _ = goal_reward(distance, _crashed(info, shape, achieved, xp), p)
        if xp is np:
            return np.asarray(reward, dtype=np.float32).reshape(shape)
        return cast(reward, "float32").reshape(shape)

    def compute_terminated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """True exactly where ``info["crashed"]`` (missing means False); success does not end."""
        shape, achieved, _, xp = goal_batch(achieved_goal, desired_goal, GOAL_SIZE)
        return _crashed(info, shape, achieved, xp)

    def _allocate(self, n: Any) -> None:
        # (x, y, cos, sin, speed), arrays of shape (n,) (the single env's: scalars, n = ()).
        self._state = tuple(
            self.zeros(n, np.float64) + value for value in (0.0, 0.0, 1.0, 0.0, 0.0)
        )
        rows = (n,) if isinstance(n, int) else n
        self._goal = self.zeros((*rows, GOAL_SIZE), np.float32)
        self._parked = self.zeros((*rows, N_SPOTS), bool)
        self._achieved = self.zeros((*rows, GOAL_SIZE), np.float32)
        self._reward = self.zeros(n, np.float32)
        self._success = self.zeros(n, bool)
        self._crashed = self.zeros(n, bool)
        self._spot_centers = self.constant(SPOT_CENTERS)

    def _reset_options(self, options: dict[str, object] | None) -> dict[str, np.ndarray]:
        pinned = super()._reset_options(options)  # type: ignore[misc]
        if options and options.get("car") is not None:
            batch = getattr(self, "num_envs", None)
            pinned["car"] = check_car_option(options["car"], self.params.max_speed, batch)
        return pinned

    def _draw_episode(
        self,
        rng: np.random.Generator,
        goal: np.ndarray | None = None,
        car: np.ndarray | None = None,
    ) -> tuple[object, ...]:
        return start_episode(rng, self.params, goal, car)

    def _store_episodes(self, index: object, drawn: tuple[Any, ...]) -> None:
        state, self._goal[index], self._parked[index] = drawn
        for column, value in zip(self._state, state, strict=True):
            column[index] = value

    def _step_envs(self, actions: np.ndarray) -> None:
        self._state = advance(self._state, cast(actions, "float64"), self.params, self.xp)

    def _observation(self) -> dict[str, np.ndarray]:
        # Asked for once after each step or reset, when the sub-envs that reset have been
        # drawn: one evaluation of the whole batch serves both.
        self._achieved, self._reward, self._success, self._crashed = evaluate(
            self._state, self._goal, self._parked, self._spot_centers, self.params, self.xp
        )
        return goal_obs(
            self.fresh(self._achieved), self.fresh(self._achieved), self.fresh(self._goal)
        )

    def _step_info(self) -> dict[str, np.ndarray]:
        return {"is_success": self.fresh(self._success), "crashed": self.fresh(self._crashed)}

    def _goal_outcomes(
        self, obs: dict[str, np.ndarray], info: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, None]:
        return self.fresh(self._reward), self.fresh(self._crashed), None

    def _new_canvas(self) -> Canvas:
        self._painter = LotPainter(self.params.length, self.params.width)
        return self._painter.canvas

    def _draw_frame(self, canvas: Canvas) -> None:
        # rgb_array renders are (352, 576, 3) uint8.
        row = self._row
        steps = self._steps()
        car = tuple(float(a[row]) for a in self._state)
        goal, parked = self.to_numpy(self._goal[row]), self.to_numpy(self._parked[row])
        reward = float(self._reward[row]) if steps else None
        outcome = (bool(self._crashed[row]), bool(self._success[row]), steps, reward)
        self._painter.draw(car, goal, parked, *outcome)


# --------------------------------------------------------------------------- single env


class ParkingEnv(_ParkingFaces, SingleEnv, GoalEnv):
    """Park a car in a goal spot of a walled lot, without hitting walls or parked cars.

    ## Description

    A top-down parking lot in the spirit of highway-env's ``parking-v0``: two rows of 14
    spots (4 m wide, 8 m deep) face each other across a 20 m lane, and walls enclose the
    lot at x = +-35 m and y = +-21 m. The car (5 m x 2 m) follows the kinematic bicycle
    model about its centre (slip angle ``beta = arctan(tan(steering) / 2)``,
    ``heading' = v sin(beta) / (length / 2)``, :func:`advance`): a ``step_time`` = 0.2 s
    policy step is ``substeps`` = 3 exact arcs (highway-env's 15 Hz), the speed limited to
    +-``max_speed`` = 10 m/s. ``goalenvs/ParkingCrowded-v0`` parks ``n_parked`` = 20 cars.

    ## Action Space

    ``Box(-1, 1, (2,), float32)``: ``(throttle, steering)``. Throttle maps to an
    acceleration of +-``max_acceleration`` = 5 m/s^2 (negative brakes, then reverses);
    steering maps to a front-wheel angle of +-``max_steering_deg`` = 45 degrees (positive
    turns left, counter-clockwise).

    ## Observation Space

    ``Dict(observation, achieved_goal, desired_goal)``, each ``Box((6,), float32)``; the
    observation and the achieved goal are the car's state, the desired goal the parked
    pose. Positions are divided by ``POSITION_SCALE`` = 50 m and velocities by
    ``VELOCITY_SCALE`` = 10 m/s so that every entry is of order one:

    | Num | Observation                      | Min   | Max  |
    |-----|----------------------------------|-------|------|
    | 0   | x / 50 m                         | -0.8  | 0.8  |
    | 1   | y / 50 m                         | -0.52 | 0.52 |
    | 2   | speed * cos(heading) / 10 m/s    | -1    | 1    |
    | 3   | speed * sin(heading) / 10 m/s    | -1    | 1    |
    | 4   | cos(heading)                     | -1    | 1    |
    | 5   | sin(heading)                     | -1    | 1    |

    (The position bounds include a car length beyond the walls: on the step it crashes
    the car may overlap a wall. Velocity bounds scale with ``max_speed``.)

    ## Goal

    The centre of a random free spot, at rest, with the heading that faces into the spot
    (up for the upper row, down for the lower): ``(x_spot / 50, +-14 / 50, 0, 0, 0, +-1)``.
    ``reset(options={"goal": g})`` pins any goal inside the goal space.

    ## Success

    ``info["is_success"]`` is True when the weighted distance
    ``d = sqrt(sum_i w_i |achieved_i - desired_i|)``, with weights
    ``w = (1, 0.3, 0, 0, 0.02, 0.02)`` (highway-env's weighted p-norm with p = 0.5; speed
    does not count), is at most ``success_threshold`` = 0.12, that is
    ``|dx| / 50 + 0.3 |dy| / 50 + 0.02 (|dcos| + |dsin|) <= 0.0144``. In metres and
    degrees, each error alone may reach 0.72 m sideways (x; the spot leaves 1 m either
    side), 2.4 m in depth (y; the spot leaves 1.5 m) or 33.6 degrees of heading; they
    share that budget (0.2 m sideways and 0.5 m deep leave 18.5 degrees).

    The weights and threshold are highway-env's (its HER agents learn them); the 50 m
    position scale (highway-env's is 100 m) halves its position tolerance.

    ## Rewards

    ``reward_type="sparse"`` (default): 0 on success, else -1. ``"dense"``: ``-d``. A
    crash subtracts ``collision_penalty`` = 50. The penalty is part of
    :meth:`compute_reward`, read from ``info["crashed"]``, so HER relabeling keeps it:
    every step's reward equals ``compute_reward(achieved_goal, desired_goal, info)``, crash
    steps included (50: at any discount up to 0.98 a sparse episode returns at least -50,
    a crash -51 at once). A missing ``"crashed"`` key means False (stable-baselines3's
    buffer needs ``copy_info_dict=True`` to keep it, docs/checks.md).

    ## Starting State

    At rest within +-4 m of the lot centre along the lane and +-1 m across it, with a
    uniformly random heading; the goal spot is uniform over the 28 spots and the parked
    cars fill ``n_parked`` of the other 27, uniformly (every goal 13 m to 34 m away).
    ``reset(options={"car": (x, y, heading_rad, speed)})`` pins the start (metres,
    radians, m/s) and ``reset(options={"goal": g})`` the goal; a pinned goal's spot is
    kept free of parked cars.

    ## Episode End

    Termination: the car overlaps a wall or a parked car (``info["crashed"]``, which
    :meth:`compute_terminated` reads); reaching the goal does not end the episode.
    Truncation: 100 policy steps (20 s), the registered ``max_episode_steps``.

    Collisions are tested on the pose at the end of each policy step (at most 2 m, less
    than any obstacle is deep). ``info`` holds ``is_success`` and ``crashed`` (bools).

    ## Arguments

    The constants above (``n_parked`` 0 to 27; ``length`` and ``width`` are parked cars'
    too), and ``render_mode`` (None, "human", "rgb_array": 576 x 352 pixels, 8 px/m).
    :meth:`get_keys_to_action` maps the arrow keys (up/down throttle, left/right steering).
    """

    metadata: dict[str, Any] = {"render_modes": ["human", "rgb_array"], "render_fps": 5}

    def __init__(
        self,
        reward_type: str = "sparse",
        n_parked: int = 0,
        length: float = 5.0,
        width: float = 2.0,
        max_acceleration: float = 5.0,
        max_steering_deg: float = 45.0,
        max_speed: float = 10.0,
        step_time: float = 0.2,
        substeps: int = 3,
        success_threshold: float = 0.12,
        collision_penalty: float = 50.0,
        reward_weights: object = (1.0, 0.3, 0.0, 0.0, 0.02, 0.02),
        render_mode: str | None = None,
    ) -> None:
        params = ParkingParams(
            reward_type, n_parked, length, width, max_acceleration, max_steering_deg,
            max_speed, step_time, substeps, success_threshold, collision_penalty, reward_weights,
        )  # fmt: skip
        self._setup(params, render_mode)

    # The kernel runs on scalars (a batch of shape ()): 2.5x the steps/s of one-row arrays.
    _batch = _row = _add_row = ()

    def _store_episodes(self, index: object, drawn: tuple[Any, ...]) -> None:
        state, self._goal, self._parked = drawn
        self._state = tuple(np.float64(value) for value in state)

    def step(
        self, action: object
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Drives one policy step: :class:`SingleEnv`'s step written out, for speed."""
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        self._step_envs(check_action(action, self.action_space))
        self._elapsed += 1
        self._observation()  # sets _achieved, _reward, _success and _crashed
        if self.render_mode == "human":
            self.render()
        crashed, achieved = bool(self._crashed), self._achieved
        obs = goal_obs(achieved, achieved.copy(), self._goal.copy())
        info = {"is_success": bool(self._success), "crashed": crashed}
        return obs, float(self._reward), crashed, False, info

    def get_keys_to_action(self) -> dict[tuple[int, ...], np.ndarray]:
        """Arrow keys: up/down throttle, left/right steering (float32 actions)."""
        return arrow_keys(up=(1.0, 0.0), left=(0.0, 1.0))


# --------------------------------------------------------------------------- vector env


class ParkingVectorEnv(_ParkingFaces, GoalVectorEnv):  # type: ignore[misc]
    """The vector twin of :class:`ParkingEnv` (:class:`GoalVectorEnv`); ``options`` ``"car"``
    and ``"goal"`` take one value for all sub-envs or one row each."""

    metadata: dict[str, Any] = twin_metadata(ParkingEnv)

    def __init__(
        self,
        num_envs: int = 1,
        reward_type: str = "sparse",
        n_parked: int = 0,
        length: float = 5.0,
        width: float = 2.0,
        max_acceleration: float = 5.0,
        max_steering_deg: float = 45.0,
        max_speed: float = 10.0,
        step_time: float = 0.2,
        substeps: int = 3,
        success_threshold: float = 0.12,
        collision_penalty: float = 50.0,
        reward_weights: object = (1.0, 0.3, 0.0, 0.0, 0.02, 0.02),
        max_episode_steps: int | None = 100,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        device: DeviceLike = None,
    ) -> None:
        params = ParkingParams(
            reward_type, n_parked, length, width, max_acceleration, max_steering_deg,
            max_speed, step_time, substeps, success_threshold, collision_penalty, reward_weights,
        )  # fmt: skip
        self._start(params, num_envs, max_episode_steps, autoreset_mode, render_mode, device)
        self._spot_goals = self.constant(SPOT_GOALS)

    def _draw_episodes(self, rngs: list[np.random.Generator], **pinned: Any) -> tuple[object, ...]:
        # The car's state is five column arrays (self._state), each episode's car a tuple.
        state, desired, parked = super()._draw_episodes(rngs, **pinned)
        return tuple(state.T), desired, parked

    def _draw_episodes_on_device(self, count: int, goal: object = None, car: object = None) -> Any:
        return draw_episodes_on_device(
            self.torch_generator, self.params, count, goal, car, self._spot_goals
        )
