"""The parking lot of :mod:`goalenvs.envs.parking`: its layout (the kernel's constants),
the spot under a point, the check of ``options["car"]`` and its drawing."""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np

from goalenvs.core.backend import cast
from goalenvs.envs.canvas import Canvas, hud_line

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


def spot_at(x: Any, y: Any, xp: ModuleType = np) -> Any:
    """The spot containing the point (x, y) in metres, or -1: floats, or arrays of ``xp``."""
    row_y = abs(y) - LANE_HALF_WIDTH
    column = cast(xp.floor((x - SPOT_X[0]) / SPOT_WIDTH + 0.5), "int64")
    inside = (row_y >= 0) & (row_y <= SPOT_DEPTH) & (column >= 0) & (column < SPOTS_PER_ROW)
    return xp.where(inside, column + SPOTS_PER_ROW * (y > 0), -1)


# --------------------------------------------------------------------------- cars in the lot


def check_car_option(value: object, max_speed: float, batch: int | None = None) -> np.ndarray:
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


# --------------------------------------------------------------------------- drawing

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


class LotPainter:
    """Draws the lot, its parked cars and a car of ``car_length`` x ``car_width`` metres on
    its :class:`~goalenvs.envs.canvas.Canvas`; the still scenery is drawn once an episode."""

    def __init__(self, car_length: float, car_width: float) -> None:
        size = (
            int((_WORLD_BOUNDS[1] - _WORLD_BOUNDS[0]) * _PIXELS_PER_METRE),
            int((_WORLD_BOUNDS[3] - _WORLD_BOUNDS[2]) * _PIXELS_PER_METRE),
        )
        self.canvas = Canvas(size, _WORLD_BOUNDS, _COLORS["ground"], title="goalenvs Parking")
        self.car_length = car_length
        self.car_width = car_width
        self._background: object = None
        self._background_key: object = None

    def _draw_background(self, desired_goal: np.ndarray, parked: np.ndarray) -> None:
        cv, length, width = self.canvas, self.car_length, self.car_width
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
            (sx, sy), w, d = SPOT_CENTERS[goal_spot], SPOT_WIDTH / 2, SPOT_DEPTH / 2
            cv.rect(sx - w, sy - d, sx + w, sy + d, _COLORS["goal"])
        edges = np.concatenate([SPOT_X - SPOT_WIDTH / 2, [SPOT_X[-1] + SPOT_WIDTH / 2]])
        for sign in (-1.0, 1.0):
            inner, outer = sign * LANE_HALF_WIDTH, sign * (LANE_HALF_WIDTH + SPOT_DEPTH)
            for ex in edges:
                cv.line((ex, inner), (ex, outer), _COLORS["line"], 2)
            cv.line((edges[0], outer), (edges[-1], outer), _COLORS["line"], 2)
        for spot in np.flatnonzero(parked):
            cx, cy = SPOT_CENTERS[spot]
            cv.box((cx, cy), length, width, math.pi / 2, _COLORS["parked"])
        # The goal pose: an outline of the car where it should stop, and its heading.
        norm = math.hypot(gc, gs) or 1.0
        angle = math.atan2(gs / norm, gc / norm)
        cv.box((gx, gy), length, width, angle, _COLORS["line"], border=2)
        tip = (gx + 0.45 * length * gc / norm, gy + 0.45 * length * gs / norm)
        cv.arrow((gx, gy), tip, _COLORS["line"], 2)
        self._background = cv.snapshot()

    def draw(
        self,
        car: tuple[float, ...],
        desired_goal: np.ndarray,
        parked: np.ndarray,
        crashed: bool,
        success: bool,
        steps: int,
        reward: float | None,
    ) -> None:
        """Draws a frame on :attr:`canvas`."""
        key = (desired_goal.tobytes(), parked.tobytes())
        if key != self._background_key:
            self._draw_background(desired_goal, parked)
            self._background_key = key
        cv, length, width = self.canvas, self.car_length, self.car_width
        cv.restore(self._background)
        x, y, c, s = car[:4]
        angle = math.atan2(s, c)
        color = (
            _COLORS["crash"] if crashed else _COLORS["car_success"] if success else _COLORS["car"]
        )
        corners = cv.box((x, y), length, width, angle, color)
        # Heading mark: a bar across the front of the car.
        cv.line(corners[0], corners[1], _COLORS["mark"], 3)
        hud = hud_line(steps, reward, success)
        if crashed:
            cv.circle((x, y), 0.75 * length, _COLORS["crash"], width=3)
            hud = "CRASH  " + hud
        cv.text(hud, (8, 6), _COLORS["crash"] if crashed else _COLORS["hud"], size=20)
