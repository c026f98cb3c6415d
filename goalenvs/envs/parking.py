"""Parking: a kinematic car parks into a goal spot of a walled lot, optionally between parked cars.

The file holds, in order:

1. the kernel: the lot layout, the bicycle-model integrator, the collision tests and the
   goal reward, written once with plain arithmetic so that the same functions run on
   Python floats (the single env, where numpy's per-call cost would dominate) and on numpy
   arrays over a leading batch dimension (the vector env), with bit-identical results;
2. :class:`ParkingEnv`, one env built on the kernel;
3. :class:`ParkingVectorEnv`, N envs stepped in one numpy call on the same kernel.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from gymnasium import spaces

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
    info_values,
)

# --------------------------------------------------------------------------- lot layout
# Two rows of spots face each other across a lane; walls enclose the lot (highway-env's
# parking-v0 layout). Spot k of a row has its centre at x = SPOT_X[k]; the lower row's
# spots are 0..13, the upper row's 14..27.

SPOTS_PER_ROW = 14
N_SPOTS = 2 * SPOTS_PER_ROW
SPOT_WIDTH = 4.0  # m, along x
SPOT_DEPTH = 8.0  # m, along y
LANE_HALF_WIDTH = 10.0  # m: the spots begin at |y| = 10
WALL_X = 35.0  # m: inner faces of the walls at x = +-35 and y = +-21
WALL_Y = 21.0
WALL_THICKNESS = 1.0  # m, drawn only: the walls are the half-planes beyond the faces
SPOT_X = (np.arange(SPOTS_PER_ROW) - (SPOTS_PER_ROW - 1) / 2) * SPOT_WIDTH
SPOT_CENTER_Y = LANE_HALF_WIDTH + SPOT_DEPTH / 2
# Every spot's centre (x, y), and the sine of the heading that faces into it (away from
# the lane: down for the lower row, up for the upper; the cosine is 0).
SPOT_CENTERS = np.stack(
    [
        np.concatenate([SPOT_X, SPOT_X]),
        np.repeat([-SPOT_CENTER_Y, SPOT_CENTER_Y], SPOTS_PER_ROW),
    ],
    axis=1,
)
SPOT_HEADING_SIN = np.repeat([-1.0, 1.0], SPOTS_PER_ROW)

POSITION_SCALE = 50.0  # m per observation unit: the lot spans about [-0.7, 0.7] x [-0.42, 0.42]
VELOCITY_SCALE = 10.0  # m/s per observation unit: the default speed limit maps to 1
GOAL_SIZE = 6
# The goal of every spot: its centre, at rest, heading into it (cos 0, sin +-1).
SPOT_GOALS = np.zeros((N_SPOTS, GOAL_SIZE), dtype=np.float32)
SPOT_GOALS[:, :2] = SPOT_CENTERS / POSITION_SCALE
SPOT_GOALS[:, 5] = SPOT_HEADING_SIN
START_HALF_X = 4.0  # m: the car starts within +-4 m of the lot centre along the lane
START_HALF_Y = 1.0  # m: and within +-1 m across it

# Substep rotations use a Taylor polynomial (see _half_turn); this bound on the half-angle
# keeps its error below 3e-13. The default constants turn at most 0.06 rad per half substep.
MAX_HALF_TURN = 0.1


class _Floats:
    """The kernel's few non-operator functions for Python floats (the single env)."""

    sqrt = staticmethod(math.sqrt)

    @staticmethod
    def clip(value: float, low: float, high: float) -> float:
        return min(max(value, low), high)

    @staticmethod
    def arcs(speeds: list[float], half_h: float, turn: float) -> list[tuple[float, ...]]:
        return [_arc(v0, v1, half_h, turn) for v0, v1 in itertools.pairwise(speeds)]


class _Arrays:
    """The same functions for numpy arrays (the vector env); IEEE results match _Floats."""

    sqrt = staticmethod(np.sqrt)

    @staticmethod
    def clip(value: np.ndarray, low: float, high: float) -> np.ndarray:
        return np.minimum(np.maximum(value, low), high)

    @staticmethod
    def arcs(speeds: list[np.ndarray], half_h: float, turn: np.ndarray) -> list[tuple]:
        # Every substep's arc in one pass over a (substeps, batch) stack: the same
        # element-wise operations as _Floats.arcs, a third of the numpy calls.
        stacked = np.stack(speeds)
        return list(zip(*_arc(stacked[:-1], stacked[1:], half_h, turn), strict=True))


def _half_turn(angle: Any) -> tuple[Any, Any, Any]:
    """cos, sin and sin(a)/a of a small angle ``a`` by Taylor polynomials (|a| <= 0.1).

    Plain arithmetic rather than ``math.sin`` / ``np.sin`` because those two may differ
    in the last bit (numpy vectorizes with its own routines), and the single env and the
    vector env must produce identical trajectories.
    """
    a2 = angle * angle
    cos = 1.0 + a2 * (-1 / 2 + a2 * (1 / 24 + a2 * (-1 / 720)))
    sinc = 1.0 + a2 * (-1 / 6 + a2 * (1 / 120 + a2 * (-1 / 5040)))
    return cos, angle * sinc, sinc


def _arc(v0: Any, v1: Any, half_h: float, turn: Any) -> tuple[Any, Any, Any, Any]:
    """One substep's arc: (distance, cos, sin of half the turn, chord per distance).

    ``v0``, ``v1``: speeds at the substep's ends (linear in between); ``half_h``: half
    the substep's duration; ``turn``: half the heading change per metre driven.
    """
    distance = (v0 + v1) * half_h
    ch, sh, sinc = _half_turn(distance * turn)
    return distance, ch, sh, sinc


def slip_terms(tan_steering: Any, xp: Any) -> tuple[Any, Any]:
    """cos and sin of the slip angle beta = arctan(tan(steering) / 2), without trigonometry."""
    t = 0.5 * tan_steering
    q = 1.0 / xp.sqrt(1.0 + t * t)
    return q, t * q


def advance(
    state: tuple[Any, Any, Any, Any, Any],
    acceleration: Any,
    tan_steering: Any,
    dt: float,
    substeps: int,
    half_length: float,
    max_speed: float,
    xp: Any,
) -> tuple[Any, Any, Any, Any, Any]:
    """Integrates the kinematic bicycle model over one policy step.

    ``state`` is ``(x, y, cos heading, sin heading, speed)``, floats or arrays. With the
    slip angle beta fixed by the steering, the heading turns at
    ``speed * sin(beta) / half_length`` and the centre moves along ``heading + beta``, so it
    follows a circle of radius ``half_length / sin(beta)``. Each substep moves it along that
    arc exactly (the chord of the swept angle), with the speed changing linearly; only the
    speed limit is applied per substep. The heading is renormalised once per step.
    """
    x, y, c, s, v = state
    cb, sb = slip_terms(tan_steering, xp)
    h = dt / substeps
    speed_change = acceleration * h
    speeds = [v]
    for _ in range(substeps):
        speeds.append(xp.clip(speeds[-1] + speed_change, -max_speed, max_speed))
    # Half the angle turned per metre driven: the chord of an arc points along its middle.
    half_turn_per_metre = sb * (0.5 / half_length)
    for distance, ch, sh, sinc in xp.arcs(speeds, 0.5 * h, half_turn_per_metre):
        cm = c * ch - s * sh
        sm = s * ch + c * sh
        chord = distance * sinc
        x = x + chord * (cm * cb - sm * sb)
        y = y + chord * (sm * cb + cm * sb)
        c = cm * ch - sm * sh
        s = sm * ch + cm * sh
    norm = xp.sqrt(c * c + s * s)
    return x, y, c / norm, s / norm, speeds[-1]


def extents(c: Any, s: Any, half_length: float, half_width: float) -> tuple[Any, Any]:
    """Half-extents along x and y of the axis-aligned box around a rotated car."""
    ac, as_ = abs(c), abs(s)
    return half_length * ac + half_width * as_, half_length * as_ + half_width * ac


def hits_wall(x: Any, y: Any, extent_x: Any, extent_y: Any) -> Any:
    """Whether the car crosses a wall face (exact for a rectangle against a half-plane)."""
    return (abs(x) + extent_x > WALL_X) | (abs(y) + extent_y > WALL_Y)


def overlaps_parked(
    x: Any,
    y: Any,
    c: Any,
    s: Any,
    extent_x: Any,
    extent_y: Any,
    parked_x: Any,
    parked_y: Any,
    half_length: float,
    half_width: float,
) -> Any:
    """Separating-axis test of the car against parked cars (axis-aligned, nose into the spot).

    The two boxes overlap when no axis among x, y and the car's own two axes separates
    them; touching is not an overlap. Broadcasts over any shapes of car and parked arrays.
    """
    dx = x - parked_x
    dy = y - parked_y
    ac, as_ = abs(c), abs(s)
    # Parked cars are axis-aligned: half_width along x, half_length along y.
    return (
        (abs(dx) < extent_x + half_width)
        & (abs(dy) < extent_y + half_length)
        & (abs(dx * c + dy * s) < half_length + half_width * ac + half_length * as_)
        & (abs(dy * c - dx * s) < half_width + half_width * as_ + half_length * ac)
    )


def near_rows(y: Any, extent_y: Any) -> tuple[Any, Any]:
    """Whether the car reaches into the lower / upper row of spots (a parked car needs it)."""
    return y - extent_y < -LANE_HALF_WIDTH, y + extent_y > LANE_HALF_WIDTH


def weighted_distance(differences: Any, weights: tuple[float, ...], xp: Any) -> Any:
    """``sqrt(sum_i w_i |d_i|)``: highway-env's weighted p-norm with p = 0.5.

    Summed term by term, left to right, so floats and arrays round identically; terms
    with weight 0 are skipped (they add exactly 0 for finite goals).
    """
    total = 0.0
    for weight, difference in zip(weights, differences, strict=True):
        if weight:
            total = total + weight * abs(difference)
    return xp.sqrt(total)


def goal_reward(
    distance: Any, crashed: Any, threshold: float, penalty: float, dense: bool
) -> tuple[Any, Any]:
    """``(reward, success)`` for weighted goal distances; a crash subtracts ``penalty``."""
    success = distance <= threshold
    base = -distance if dense else success * 1.0 - 1.0
    return base - penalty * crashed, success


def draw_episode(
    rng: np.random.Generator, n_parked: int
) -> tuple[float, float, float, float, int, np.ndarray]:
    """One episode's random start: ``(x, y, cos h, sin h, goal_spot, parked_spots)``.

    The single env and every sub-env of the vector env draw with this function from their
    own generator, which is what makes them follow identical trajectories.
    """
    u0, u1, u2, u3 = rng.random(4).tolist()
    heading = 2.0 * math.pi * u0
    goal_spot = min(int(u3 * N_SPOTS), N_SPOTS - 1)
    if n_parked:
        parked = np.zeros(N_SPOTS, dtype=bool)
        others = rng.permutation(N_SPOTS - 1)[:n_parked]
        parked[others + (others >= goal_spot)] = True
    else:
        parked = _EMPTY_LOT
    return (
        START_HALF_X * (2.0 * u1 - 1.0),
        START_HALF_Y * (2.0 * u2 - 1.0),
        math.cos(heading),
        math.sin(heading),
        goal_spot,
        parked,
    )


_EMPTY_LOT = np.zeros(N_SPOTS, dtype=bool)
_EMPTY_LOT.flags.writeable = False


def spot_goal(spot: int) -> np.ndarray:
    """The scaled goal of a spot: its centre, at rest, heading into it."""
    return SPOT_GOALS[spot].copy()


def spot_at(x: float, y: float) -> int:
    """The spot containing the point (x, y) in metres, or -1."""
    row_y = abs(y) - LANE_HALF_WIDTH
    column = math.floor((x - SPOT_X[0]) / SPOT_WIDTH + 0.5)
    if 0.0 <= row_y <= SPOT_DEPTH and 0 <= column < SPOTS_PER_ROW:
        return column + (SPOTS_PER_ROW if y > 0 else 0)
    return -1


def parked_rows(parked: np.ndarray) -> tuple[list[tuple[float, float]], ...]:
    """Centres of the parked cars of the lower and of the upper row."""
    spots = np.flatnonzero(parked).tolist()
    return tuple(
        [
            (float(SPOT_CENTERS[i, 0]), float(SPOT_CENTERS[i, 1]))
            for i in spots
            if upper == (i >= SPOTS_PER_ROW)
        ]
        for upper in (False, True)
    )


def evaluate_car(
    state: tuple[float, float, float, float, float],
    goal: list[float],
    rows: tuple[list[tuple[float, float]], ...],
    weights: tuple[float, ...],
    half_length: float,
    half_width: float,
) -> tuple[np.ndarray, float, bool]:
    """One car, in Python floats: (float32 achieved goal, weighted goal distance, crashed).

    The single env evaluates every reset and step with it; the vector env computes the
    same quantities from the same kernel functions on arrays.
    """
    x, y, c, s, v = state
    achieved = np.array(
        [
            x / POSITION_SCALE,
            y / POSITION_SCALE,
            v * c / VELOCITY_SCALE,
            v * s / VELOCITY_SCALE,
            c,
            s,
        ],
        dtype=np.float32,
    )
    a = achieved.tolist()
    distance = weighted_distance([a[i] - goal[i] for i in range(GOAL_SIZE)], weights, _Floats)
    ex, ey = extents(c, s, half_length, half_width)
    crashed = hits_wall(x, y, ex, ey)
    if not crashed:
        for near, row in zip(near_rows(y, ey), rows, strict=True):
            if near and any(
                overlaps_parked(x, y, c, s, ex, ey, px, py, half_length, half_width)
                for px, py in row
            ):
                crashed = True
    return achieved, distance, crashed


# --------------------------------------------------------------------------- shared setup


class _ParkingParams:
    """Validated constructor constants shared by the single and the vector env."""

    def __init__(
        self,
        reward_type: str,
        n_parked: int,
        length: float,
        width: float,
        max_acceleration: float,
        max_steering_deg: float,
        max_speed: float,
        step_time: float,
        substeps: int,
        success_threshold: float,
        collision_penalty: float,
        reward_weights: Any,
    ) -> None:
        check_choice("reward_type", reward_type, ("sparse", "dense"))
        if isinstance(n_parked, bool) or not isinstance(n_parked, (int, np.integer)):
            raise TypeError(f"n_parked must be an integer, got {n_parked!r}")
        if not 0 <= n_parked <= N_SPOTS - 1:
            raise ValueError(
                f"n_parked={n_parked} is not valid: the lot has {N_SPOTS} spots and one is the "
                f"goal, so expected 0 <= n_parked <= {N_SPOTS - 1}"
            )
        for name, value in (
            ("length", length),
            ("width", width),
            ("max_acceleration", max_acceleration),
            ("max_speed", max_speed),
            ("step_time", step_time),
            ("success_threshold", success_threshold),
        ):
            check_positive(name, value)
        check_positive("substeps", substeps, integer=True)
        check_positive("max_steering_deg", max_steering_deg)
        if max_steering_deg >= 90:
            raise ValueError(f"max_steering_deg must be < 90, got {max_steering_deg!r}")
        if width >= SPOT_WIDTH or length >= SPOT_DEPTH or width > length:
            raise ValueError(
                f"a car of length={length} and width={width} must fit a spot "
                f"({SPOT_WIDTH} m x {SPOT_DEPTH} m) with width <= length"
            )
        if isinstance(collision_penalty, bool) or not isinstance(
            collision_penalty, (int, float, np.integer, np.floating)
        ):
            raise TypeError(f"collision_penalty must be a number, got {collision_penalty!r}")
        if not np.isfinite(collision_penalty) or collision_penalty < 0:
            raise ValueError(f"collision_penalty must be >= 0, got {collision_penalty!r}")
        weights = np.asarray(reward_weights, dtype=np.float64)
        if (
            weights.shape != (GOAL_SIZE,)
            or not np.all(np.isfinite(weights))
            or (weights < 0).any()
            or not weights.any()
        ):
            raise ValueError(
                f"reward_weights={reward_weights!r} must be {GOAL_SIZE} finite values >= 0, "
                "not all 0"
            )
        self.reward_type = reward_type
        self.dense = reward_type == "dense"
        self.n_parked = int(n_parked)
        self.length, self.width = float(length), float(width)
        self.half_length, self.half_width = 0.5 * self.length, 0.5 * self.width
        self.max_acceleration = float(max_acceleration)
        self.max_steering = math.radians(max_steering_deg)
        self.max_speed = float(max_speed)
        self.step_time = float(step_time)
        self.substeps = int(substeps)
        self.success_threshold = float(success_threshold)
        self.collision_penalty = float(collision_penalty)
        self.reward_weights = tuple(float(w) for w in weights)
        max_sin_beta = math.sin(math.atan(0.5 * math.tan(self.max_steering)))
        half_turn = (
            self.max_speed * max_sin_beta / self.half_length * self.step_time / self.substeps / 2
        )
        if half_turn > MAX_HALF_TURN:
            raise ValueError(
                f"substeps={substeps} is too few: at max_speed={max_speed} the car turns "
                f"{2 * half_turn:.3f} rad per substep, more than {2 * MAX_HALF_TURN}; "
                "raise substeps"
            )

    def spaces(self) -> tuple[spaces.Dict, spaces.Box]:
        """The goal Dict observation space and the action space."""
        # The car's centre stays inside the walls until the step it crashes, when it can
        # overshoot by less than a car length.
        px = (WALL_X + self.length) / POSITION_SCALE
        py = (WALL_Y + self.length) / POSITION_SCALE
        pv = self.max_speed / VELOCITY_SCALE
        high = np.array([px, py, pv, pv, 1.0, 1.0], dtype=np.float32)
        box = spaces.Box(-high, high, dtype=np.float32)
        action = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
        return goal_dict_space(box, spaces.Box(-high, high, dtype=np.float32)), action

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        shape, achieved, desired = goal_arrays(achieved_goal, desired_goal, GOAL_SIZE)
        crashed = info_values(info, "crashed", shape, False, bool)
        diff = achieved.astype(np.float64) - desired.astype(np.float64)
        distance = weighted_distance(
            [diff[..., i] for i in range(GOAL_SIZE)], self.reward_weights, _Arrays
        )
        reward, _ = goal_reward(
            distance, crashed, self.success_threshold, self.collision_penalty, self.dense
        )
        return np.asarray(reward, dtype=np.float32).reshape(shape)

    def compute_terminated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        shape, _, _ = goal_arrays(achieved_goal, desired_goal, GOAL_SIZE)
        return info_values(info, "crashed", shape, False, bool)


def _car_option(value: Any, max_speed: float, batch: int | None = None) -> np.ndarray:
    """Validates ``options["car"]``: (x, y, heading, speed) in metres, radians, m/s."""
    arr = np.asarray(value, dtype=np.float64)
    shapes = [(4,)] if batch is None else [(4,), (batch, 4)]
    if arr.shape not in shapes or not np.all(np.isfinite(arr)):
        raise ValueError(
            f"options['car']={value!r} must be finite (x, y, heading, speed) with shape in {shapes}"
        )
    inside = (np.abs(arr[..., 0]) < WALL_X) & (np.abs(arr[..., 1]) < WALL_Y)
    if not np.all(inside):
        raise ValueError(
            f"options['car']={arr.tolist()} puts the car's centre outside the walls "
            f"(|x| < {WALL_X}, |y| < {WALL_Y})"
        )
    if np.any(np.abs(arr[..., 3]) > max_speed):
        raise ValueError(
            f"options['car']={arr.tolist()} has a speed beyond max_speed={max_speed} m/s"
        )
    return arr


# --------------------------------------------------------------------------- rendering

_COLORS = {
    "ground": (96, 96, 104),
    "line": (235, 235, 235),
    "wall": (40, 40, 40),
    "parked": (150, 150, 160),
    "goal": (90, 200, 90),
    "car": (40, 110, 230),
    "car_success": (30, 170, 60),
    "crash": (230, 30, 30),
    "mark": (255, 220, 0),
    "hud": (255, 255, 255),
}
_PIXELS_PER_METRE = 8
_WORLD_BOUNDS = (
    -WALL_X - WALL_THICKNESS,
    WALL_X + WALL_THICKNESS,
    -WALL_Y - WALL_THICKNESS,
    WALL_Y + WALL_THICKNESS,
)


class _LotPainter:
    """Draws one lot on a shared :class:`~goalenvs.envs.canvas.Canvas`.

    The lot, the parked cars and the goal do not move within an episode, so they are
    drawn once per episode into a snapshot that each frame starts from.
    """

    def __init__(self, params: _ParkingParams, render_fps: int) -> None:
        from goalenvs.envs.canvas import Canvas

        size = (
            int((_WORLD_BOUNDS[1] - _WORLD_BOUNDS[0]) * _PIXELS_PER_METRE),
            int((_WORLD_BOUNDS[3] - _WORLD_BOUNDS[2]) * _PIXELS_PER_METRE),
        )
        self.canvas = Canvas(size, _WORLD_BOUNDS, _COLORS["ground"], title="goalenvs Parking")
        self.params = params
        self.render_fps = render_fps
        self._background: Any = None
        self._background_key: Any = None

    def _draw_background(self, desired_goal: np.ndarray, parked: np.ndarray) -> None:
        cv, p = self.canvas, self.params
        cv.clear()
        t = WALL_THICKNESS
        for x0, y0, x1, y1 in (
            (-WALL_X - t, -WALL_Y - t, WALL_X + t, -WALL_Y),
            (-WALL_X - t, WALL_Y, WALL_X + t, WALL_Y + t),
            (-WALL_X - t, -WALL_Y - t, -WALL_X, WALL_Y + t),
            (WALL_X, -WALL_Y - t, WALL_X + t, WALL_Y + t),
        ):
            cv.rect(x0, y0, x1, y1, _COLORS["wall"])
        gx, gy = desired_goal[0] * POSITION_SCALE, desired_goal[1] * POSITION_SCALE
        gc, gs = float(desired_goal[4]), float(desired_goal[5])
        goal_spot = spot_at(gx, gy)
        if goal_spot >= 0:
            sx, sy = SPOT_CENTERS[goal_spot]
            cv.rect(
                sx - SPOT_WIDTH / 2,
                sy - SPOT_DEPTH / 2,
                sx + SPOT_WIDTH / 2,
                sy + SPOT_DEPTH / 2,
                _COLORS["goal"],
            )
        edges = np.concatenate([SPOT_X - SPOT_WIDTH / 2, [SPOT_X[-1] + SPOT_WIDTH / 2]])
        for sign in (-1.0, 1.0):
            inner, outer = sign * LANE_HALF_WIDTH, sign * (LANE_HALF_WIDTH + SPOT_DEPTH)
            for ex in edges:
                cv.line((ex, inner), (ex, outer), _COLORS["line"], 2)
            cv.line((edges[0], outer), (edges[-1], outer), _COLORS["line"], 2)
        for spot in np.flatnonzero(parked):
            cx, cy = SPOT_CENTERS[spot]
            cv.box((cx, cy), p.length, p.width, math.pi / 2, _COLORS["parked"])
        # The goal pose: an outline of the car where it should stop, and its heading.
        norm = math.hypot(gc, gs) or 1.0
        angle = math.atan2(gs / norm, gc / norm)
        cv.box((gx, gy), p.length, p.width, angle, _COLORS["line"], border=2)
        tip = (gx + 0.45 * p.length * gc / norm, gy + 0.45 * p.length * gs / norm)
        cv.arrow((gx, gy), tip, _COLORS["line"], 2)
        self._background = cv.snapshot()

    def frame(
        self,
        car: tuple[float, float, float, float],
        desired_goal: np.ndarray,
        parked: np.ndarray,
        crashed: bool,
        success: bool,
        hud: str,
    ) -> None:
        """Draws the frame on the canvas surface."""
        key = (desired_goal.tobytes(), parked.tobytes())
        if key != self._background_key:
            self._draw_background(desired_goal, parked)
            self._background_key = key
        cv, p = self.canvas, self.params
        cv.restore(self._background)
        x, y, c, s = car
        angle = math.atan2(s, c)
        color = (
            _COLORS["crash"] if crashed else _COLORS["car_success"] if success else _COLORS["car"]
        )
        corners = cv.box((x, y), p.length, p.width, angle, color)
        # Heading mark: a bar across the front of the car.
        cv.line(corners[0], corners[1], _COLORS["mark"], 3)
        if crashed:
            cv.circle((x, y), 0.75 * p.length, _COLORS["crash"], width=3)
            hud = "CRASH  " + hud
        cv.text(hud, (8, 6), _COLORS["crash"] if crashed else _COLORS["hud"], size=20)

    def render(self, mode: str) -> np.ndarray | None:
        if mode == "rgb_array":
            return self.canvas.rgb_array()
        self.canvas.show(self.render_fps)
        return None

    def close(self) -> None:
        self.canvas.close()


def keys_to_action() -> dict[tuple[int, ...], np.ndarray]:
    """Arrow keys for :func:`gymnasium.utils.play.play`: up/down throttle, left/right steer."""
    from goalenvs.envs.canvas import import_pygame

    pg = import_pygame()
    throttle = {pg.K_UP: 1.0, pg.K_DOWN: -1.0}
    steering = {pg.K_LEFT: 1.0, pg.K_RIGHT: -1.0}
    mapping: dict[tuple[int, ...], np.ndarray] = {}
    for t_key in (None, *throttle):
        for s_key in (None, *steering):
            keys = tuple(sorted(k for k in (t_key, s_key) if k is not None))
            if keys:
                mapping[keys] = np.array(
                    [throttle.get(t_key, 0.0), steering.get(s_key, 0.0)], dtype=np.float32
                )
    return mapping


# --------------------------------------------------------------------------- single env


class ParkingEnv(GoalEnv):
    """Park a car in a goal spot of a walled lot, without hitting walls or parked cars.

    ## Description

    A top-down parking lot in the spirit of highway-env's ``parking-v0``: two rows of 14
    spots (4 m wide, 8 m deep) face each other across a 20 m lane, and walls enclose the
    lot at x = +-35 m and y = +-21 m. The car (5 m x 2 m) follows the kinematic bicycle
    model with its reference point at the centre: slip angle
    ``beta = arctan(tan(steering) / 2)``, ``x' = v cos(heading + beta)``,
    ``y' = v sin(heading + beta)``, ``heading' = v sin(beta) / (length / 2)``,
    ``v' = acceleration``. A policy step lasts ``step_time`` = 0.2 s, integrated in
    ``substeps`` = 3 substeps (highway-env's 15 Hz simulation), each following its arc
    exactly: the speed changes linearly within a substep and is limited to
    +-``max_speed`` = 10 m/s at the end of each.
    ``goalenvs/ParkingCrowded-v0`` fills ``n_parked`` = 20 of the other spots with parked
    cars.

    ## Action Space

    ``Box(-1, 1, (2,), float32)``: ``(throttle, steering)``. Throttle maps to an
    acceleration of +-``max_acceleration`` = 5 m/s^2 (negative brakes, then reverses);
    steering maps to a front-wheel angle of +-``max_steering_deg`` = 45 degrees (positive
    turns left, counter-clockwise). Finite values outside [-1, 1] are clipped; NaN, inf or
    a wrong shape raise an error.

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
    side), 2.4 m in depth (y; the spot leaves 1.5 m) or 33.6 degrees of heading. The
    errors share that one budget: 0.2 m sideways and 0.5 m deep leave 18.5 degrees,
    0.3 m and 1.0 m leave 6.5 degrees.

    Why these numbers: HER has to learn this within minutes. The weights and the
    threshold are highway-env's, whose HER agents learn its parking task; the 50 m
    position scale (highway-env uses 100 m) keeps observations of order one and halves
    highway-env's position tolerance, under which a car 4.8 m deep out of its spot (or
    1.44 m sideways, over the spot's line) counted as parked, while leaving heading
    errors a real share of the budget. Tighter thresholds make the sparse reward rarer
    without making the parking meaningfully better.

    ## Rewards

    ``reward_type="sparse"`` (default): 0 on success, else -1. ``"dense"``: ``-d``. A
    crash subtracts ``collision_penalty`` = 50. The penalty is part of
    :meth:`compute_reward`, read from ``info["crashed"]``, so HER relabeling keeps it:
    every step's reward equals ``compute_reward(achieved_goal, desired_goal, info)``, crash
    steps included. 50 makes crashing never a shortcut out of a hard episode: at any
    discount up to 0.98 a sparse episode returns at least -50, while a crash pays -51
    at once. Where ``info`` holds no ``"crashed"`` key, it defaults to False: the
    stable-baselines3 HER buffer passes ``[{}] * B`` unless ``copy_info_dict=True``, so
    with it the relabeled crash steps lose their penalty (and are not terminal for
    :meth:`compute_terminated`); pass ``copy_info_dict=True`` to keep them.

    ## Starting State

    At rest within +-4 m of the lot centre along the lane and +-1 m across it, with a
    uniformly random heading; the goal spot is uniform over the 28 spots and the parked
    cars fill ``n_parked`` of the other 27, uniformly. Every goal lies 13 m to 34 m from
    the start, a few seconds of driving within the 20 s episode, so random exploration
    reaches spots and HER's relabeled goals resemble the real ones.
    ``reset(options={"car": (x, y, heading_rad, speed)})`` pins the start (metres,
    radians, m/s) and ``reset(options={"goal": g})`` the goal; a pinned goal's spot is
    kept free of parked cars.

    ## Episode End

    1. Termination: the car overlaps a wall or a parked car (``info["crashed"]``;
       :meth:`compute_terminated` reads it). Reaching the goal does not end the episode:
       the car has to stay parked.
    2. Truncation: 100 policy steps (20 s), the registered ``max_episode_steps``.

    Collisions are tested on the pose at the end of each policy step (oriented-rectangle
    separating-axis tests). At the default speed limit the car moves at most 2 m per step,
    less than any obstacle is deep, so it cannot jump through one.

    ``info`` holds ``is_success`` and ``crashed`` (bools) on every reset and step.

    ## Arguments

    ``gym.make("goalenvs/Parking-v0", **kwargs)`` accepts:

    * ``render_mode``: None, ``"human"`` or ``"rgb_array"`` (576 x 352 pixels, 8 px/m;
      works headless with ``SDL_VIDEODRIVER=dummy``).
    * ``reward_type``: ``"sparse"`` (default) or ``"dense"``.
    * ``n_parked``: parked cars, 0 to 27 (default 0; ParkingCrowded-v0 uses 20).
    * ``length``, ``width``: the car, 5.0 m and 2.0 m (parked cars are the same size).
    * ``max_acceleration``: 5.0 m/s^2 at full throttle.
    * ``max_steering_deg``: 45.0 degrees at full lock.
    * ``max_speed``: 10.0 m/s, forwards and in reverse.
    * ``step_time``: 0.2 s per policy step; ``substeps``: 3.
    * ``success_threshold``: 0.12 (see Success); ``reward_weights``: the six weights.
    * ``collision_penalty``: 50.0.

    :meth:`get_keys_to_action` maps the arrow keys (up/down throttle, left/right
    steering) for :func:`gymnasium.utils.play.play`.

    ## Version History

    * v0: initial version (goalenvs 0.1.0).
    """

    metadata: dict[str, Any] = {"render_modes": ["human", "rgb_array"], "render_fps": 5}

    def __init__(
        self,
        render_mode: str | None = None,
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
        reward_weights: Any = (1.0, 0.3, 0.0, 0.0, 0.02, 0.02),
    ) -> None:
        self.params = _ParkingParams(
            reward_type,
            n_parked,
            length,
            width,
            max_acceleration,
            max_steering_deg,
            max_speed,
            step_time,
            substeps,
            success_threshold,
            collision_penalty,
            reward_weights,
        )
        if render_mode is not None:
            check_choice("render_mode", render_mode, self.metadata["render_modes"])
        self.render_mode = render_mode
        self.observation_space, self.action_space = self.params.spaces()
        self._state = (0.0, 0.0, 1.0, 0.0, 0.0)
        self._goal = np.zeros(GOAL_SIZE, dtype=np.float32)
        self._goal_list = self._goal.tolist()
        self._parked = np.zeros(N_SPOTS, dtype=bool)
        self._parked_rows = parked_rows(self._parked)
        self._crashed = False
        self._success = False
        self._steps = 0
        self._last_reward = 0.0
        self._painter: _LotPainter | None = None

    # ---- goal functions
    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Sparse -1/0 (or dense minus distance) minus the penalty where ``info["crashed"]``."""
        return self.params.compute_reward(achieved_goal, desired_goal, info)

    def compute_terminated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """True exactly where ``info["crashed"]`` (missing means False); success does not end."""
        return self.params.compute_terminated(achieved_goal, desired_goal, info)

    # ---- gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Starts an episode; ``options`` may pin ``"goal"`` (scaled) and ``"car"``."""
        super().reset(seed=seed)
        x, y, c, s, goal_spot, parked = draw_episode(self.np_random, self.params.n_parked)
        goal = spot_goal(goal_spot)
        v = 0.0
        if options:
            if options.get("goal") is not None:
                goal = check_goal_option(options["goal"], self.observation_space["desired_goal"])
                parked = _free_goal_spot(parked, goal_spot, goal)
            if options.get("car") is not None:
                x, y, heading, v = (
                    float(a) for a in _car_option(options["car"], self.params.max_speed)
                )
                c, s = float(np.cos(heading)), float(np.sin(heading))
        self._state = (x, y, c, s, v)
        self._goal = goal
        self._goal_list = goal.tolist()
        self._parked = parked
        self._parked_rows = parked_rows(parked)
        self._steps = 0
        self._last_reward = 0.0
        obs, distance, self._crashed = self._evaluate()
        self._success = distance <= self.params.success_threshold
        if self.render_mode == "human":
            self.render()
        return obs, {"is_success": bool(self._success), "crashed": bool(self._crashed)}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Advances one policy step (``step_time`` seconds)."""
        # Fast path for the common case (a float32 array in range); anything else goes
        # through check_action, which converts, clips or raises with a clear message.
        if type(action) is np.ndarray and action.dtype == np.float32 and action.shape == (2,):
            throttle, steering = action.tolist()
            if not (-1.0 <= throttle <= 1.0 and -1.0 <= steering <= 1.0):
                throttle, steering = check_action(action, self.action_space).tolist()
        else:
            throttle, steering = check_action(action, self.action_space).tolist()
        p = self.params
        tan_steering = float(np.tan(np.float64(steering * p.max_steering)))
        self._state = advance(
            self._state,
            throttle * p.max_acceleration,
            tan_steering,
            p.step_time,
            p.substeps,
            p.half_length,
            p.max_speed,
            _Floats,
        )
        self._steps += 1
        obs, distance, crashed = self._evaluate()
        reward, success = goal_reward(
            distance, crashed, p.success_threshold, p.collision_penalty, p.dense
        )
        self._crashed, self._success = crashed, success
        self._last_reward = float(np.float32(reward))
        if self.render_mode == "human":
            self.render()
        return (
            obs,
            self._last_reward,
            crashed,
            False,
            {"is_success": success, "crashed": crashed},
        )

    def _evaluate(self) -> tuple[dict[str, np.ndarray], float, bool]:
        p = self.params
        achieved, distance, crashed = evaluate_car(
            self._state,
            self._goal_list,
            self._parked_rows,
            p.reward_weights,
            p.half_length,
            p.half_width,
        )
        obs = {
            "observation": achieved,
            "achieved_goal": achieved.copy(),
            "desired_goal": self._goal.copy(),
        }
        return obs, distance, crashed

    # ---- rendering
    def render(self) -> np.ndarray | None:
        """Draws the lot; ``rgb_array`` returns an ``(352, 576, 3)`` uint8 frame."""
        if self.render_mode is None:
            return None
        if self._painter is None:
            self._painter = _LotPainter(self.params, self.metadata["render_fps"])
        x, y, c, s, _ = self._state
        hud = (
            f"step {self._steps}  reward {self._last_reward:.2f}  "
            f"success {'yes' if self._success else 'no'}"
        )
        self._painter.frame(
            (x, y, c, s), self._goal, self._parked, self._crashed, self._success, hud
        )
        return self._painter.render(self.render_mode)

    def get_keys_to_action(self) -> dict[tuple[int, ...], np.ndarray]:
        """Arrow keys: up/down throttle, left/right steering (float32 actions)."""
        return keys_to_action()

    def close(self) -> None:
        """Closes the human window, if one is open."""
        if self._painter is not None:
            self._painter.close()
            self._painter = None


def _free_goal_spot(parked: np.ndarray, drawn_spot: int, goal: np.ndarray) -> np.ndarray:
    """A pinned goal inside an occupied spot swaps that spot with the drawn (free) one."""
    spot = spot_at(float(goal[0]) * POSITION_SCALE, float(goal[1]) * POSITION_SCALE)
    if spot >= 0 and parked[spot]:
        parked = parked.copy()
        parked[spot] = False
        parked[drawn_spot] = True
    return parked


# --------------------------------------------------------------------------- vector env


class ParkingVectorEnv(GoalVectorEnv):
    """``num_envs`` parking lots stepped in one numpy call on the :class:`ParkingEnv` kernel.

    Sub-env ``i`` of a vector env reset with seed ``s`` follows the single env seeded
    ``s + i`` exactly, for the same actions. Arguments as :class:`ParkingEnv`, plus
    ``num_envs``, ``max_episode_steps`` (100) and ``autoreset_mode`` (see
    :class:`~goalenvs.core.GoalVectorEnv`). ``render`` draws the first sub-env.
    """

    metadata: dict[str, Any] = {
        "render_modes": ["rgb_array"],
        "render_fps": 5,
        "autoreset_mode": None,
    }

    def __init__(
        self,
        num_envs: int = 1,
        max_episode_steps: int | None = 100,
        autoreset_mode: Any = "NextStep",
        render_mode: str | None = None,
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
        reward_weights: Any = (1.0, 0.3, 0.0, 0.0, 0.02, 0.02),
    ) -> None:
        self.params = _ParkingParams(
            reward_type,
            n_parked,
            length,
            width,
            max_acceleration,
            max_steering_deg,
            max_speed,
            step_time,
            substeps,
            success_threshold,
            collision_penalty,
            reward_weights,
        )
        observation_space, action_space = self.params.spaces()
        super().__init__(
            num_envs,
            observation_space,
            action_space,
            max_episode_steps,
            autoreset_mode,
            render_mode,
        )
        # Spot columns a car can reach: its x-extent spans at most
        # 2 * (half-diagonal + half_width) metres; plus one for the early start.
        p = self.params
        reach = 2.0 * (math.hypot(p.half_length, p.half_width) + p.half_width)
        self._columns = int(reach // SPOT_WIDTH) + 3
        n = self.num_envs
        self._x = np.zeros(n)
        self._y = np.zeros(n)
        self._c = np.ones(n)
        self._s = np.zeros(n)
        self._v = np.zeros(n)
        self._goal = np.zeros((n, GOAL_SIZE), dtype=np.float32)
        self._goal64 = np.zeros((n, GOAL_SIZE))
        self._parked = np.zeros((n, N_SPOTS), dtype=bool)
        self._crashed = np.zeros(n, dtype=bool)
        self._success = np.zeros(n, dtype=bool)
        self._reward = np.zeros(n, dtype=np.float32)
        self._achieved = np.zeros((n, GOAL_SIZE), dtype=np.float32)
        self._last_reward = 0.0
        self._painter: _LotPainter | None = None

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """As :meth:`ParkingEnv.compute_reward`."""
        return self.params.compute_reward(achieved_goal, desired_goal, info)

    def compute_terminated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """As :meth:`ParkingEnv.compute_terminated`."""
        return self.params.compute_terminated(achieved_goal, desired_goal, info)

    def _reset_envs(self, index: np.ndarray, options: dict[str, Any] | None) -> None:
        goals = cars = None
        if options:
            if options.get("goal") is not None:
                goals = check_goal_option(
                    options["goal"], self.single_observation_space["desired_goal"], self.num_envs
                )
            if options.get("car") is not None:
                cars = _car_option(options["car"], self.params.max_speed, self.num_envs)
        if index.size == 0:
            return
        p = self.params
        draws = [draw_episode(self.np_randoms[i], p.n_parked) for i in index.tolist()]
        x, y, c, s, spots, parked = (list(column) for column in zip(*draws, strict=True))
        goal = SPOT_GOALS[spots]
        v = np.zeros(len(draws))
        for j, i in enumerate(index.tolist()):
            if goals is not None:
                goal[j] = goals if goals.ndim == 1 else goals[i]
                parked[j] = _free_goal_spot(parked[j], spots[j], goal[j])
            if cars is not None:
                x[j], y[j], heading, v[j] = (
                    float(a) for a in (cars if cars.ndim == 1 else cars[i])
                )
                c[j], s[j] = float(np.cos(heading)), float(np.sin(heading))
        self._x[index], self._y[index], self._c[index], self._s[index] = x, y, c, s
        self._v[index] = v
        self._goal[index] = goal
        if p.n_parked:
            self._parked[index] = parked
        self._goal64[index] = goal
        self._evaluate(index)

    def _step_envs(self, actions: np.ndarray) -> None:
        p = self.params
        actions = actions.astype(np.float64)
        self._x, self._y, self._c, self._s, self._v = advance(
            (self._x, self._y, self._c, self._s, self._v),
            actions[:, 0] * p.max_acceleration,
            np.tan(actions[:, 1] * p.max_steering),
            p.step_time,
            p.substeps,
            p.half_length,
            p.max_speed,
            _Arrays,
        )
        self._evaluate()

    def _evaluate(self, index: np.ndarray | None = None) -> None:
        """Achieved goals, rewards, success and crashes, batched: every sub-env or ``index``."""
        sel = slice(None) if index is None else index
        x, y, c, s, v = self._x[sel], self._y[sel], self._c[sel], self._s[sel], self._v[sel]
        p = self.params
        achieved = np.empty((len(x), GOAL_SIZE), dtype=np.float32)
        achieved[:, 0] = x / POSITION_SCALE
        achieved[:, 1] = y / POSITION_SCALE
        achieved[:, 2] = v * c / VELOCITY_SCALE
        achieved[:, 3] = v * s / VELOCITY_SCALE
        achieved[:, 4] = c
        achieved[:, 5] = s
        diff = achieved.astype(np.float64) - self._goal64[sel]
        distance = weighted_distance(
            [diff[:, i] for i in range(GOAL_SIZE)], p.reward_weights, _Arrays
        )
        ex, ey = extents(c, s, p.half_length, p.half_width)
        crashed = hits_wall(x, y, ex, ey)
        if p.n_parked:
            crashed |= self._hits_parked(self._parked[sel], x, y, c, s, ex, ey)
        reward, success = goal_reward(
            distance, crashed, p.success_threshold, p.collision_penalty, p.dense
        )
        self._achieved[sel] = achieved
        self._reward[sel] = reward
        self._success[sel] = success
        self._crashed[sel] = crashed

    def _hits_parked(
        self,
        parked: np.ndarray,
        x: np.ndarray,
        y: np.ndarray,
        c: np.ndarray,
        s: np.ndarray,
        ex: np.ndarray,
        ey: np.ndarray,
    ) -> np.ndarray:
        """Which cars overlap a parked car: the SAT test against candidate spots only.

        Overlapping a parked car needs overlapping x-extents, which rules out every spot
        but the few columns under the car in the one row it reaches; skipping the others
        leaves the result unchanged and saves most of the work.
        """
        p = self.params
        hit = np.zeros(len(x), dtype=bool)
        low, high = near_rows(y, ey)
        near = np.flatnonzero(low | high)
        if near.size == 0:
            return hit
        xn, yn, cn, sn, exn, eyn = x[near], y[near], c[near], s[near], ex[near], ey[near]
        # One column early: floor() of a rounded value must never skip the first column.
        left = (xn - exn - p.half_width - SPOT_X[0]) / SPOT_WIDTH
        columns = np.floor(left).astype(np.int64)[:, None] - 1 + np.arange(self._columns)
        valid = (columns >= 0) & (columns < SPOTS_PER_ROW)
        spots = np.clip(columns, 0, SPOTS_PER_ROW - 1) + SPOTS_PER_ROW * high[near, None]
        occupied = np.take_along_axis(parked[near], spots, axis=1) & valid
        overlap = overlaps_parked(
            xn[:, None],
            yn[:, None],
            cn[:, None],
            sn[:, None],
            exn[:, None],
            eyn[:, None],
            SPOT_CENTERS[spots, 0],
            SPOT_CENTERS[spots, 1],
            p.half_length,
            p.half_width,
        )
        hit[near] = (overlap & occupied).any(axis=1)
        return hit

    def _observation(self) -> dict[str, np.ndarray]:
        return {
            "observation": self._achieved.copy(),
            "achieved_goal": self._achieved.copy(),
            "desired_goal": self._goal.copy(),
        }

    def _step_info(self) -> dict[str, np.ndarray]:
        return {"is_success": self._success.copy(), "crashed": self._crashed.copy()}

    def _goal_outcomes(
        self, obs: dict[str, np.ndarray], info: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # The kernel computed the reward from these very goals and crashes while stepping
        # (the same function compute_reward applies); tests hold the two equal.
        return self._reward.copy(), self._crashed.copy(), np.zeros(self.num_envs, dtype=bool)

    def step(
        self, actions: Any
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Steps every sub-env (see :meth:`GoalVectorEnv.step`)."""
        result = super().step(actions)
        self._last_reward = float(result[1][0])
        return result

    def render(self) -> np.ndarray | None:
        """The first sub-env's frame (``rgb_array``), as :meth:`ParkingEnv.render`."""
        if self.render_mode is None:
            return None
        if self._painter is None:
            self._painter = _LotPainter(self.params, self.metadata["render_fps"])
        hud = (
            f"env 0/{self.num_envs}  step {int(self.elapsed_steps[0])}  "
            f"reward {self._last_reward:.2f}  success {'yes' if self._success[0] else 'no'}"
        )
        self._painter.frame(
            (float(self._x[0]), float(self._y[0]), float(self._c[0]), float(self._s[0])),
            self._goal[0],
            self._parked[0],
            bool(self._crashed[0]),
            bool(self._success[0]),
            hud,
        )
        return self._painter.render(self.render_mode)

    def close_extras(self, **kwargs: Any) -> None:
        """Releases the renderer."""
        if self._painter is not None:
            self._painter.close()
            self._painter = None
