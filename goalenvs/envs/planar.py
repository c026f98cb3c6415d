"""What the planar goal envs (point reach, point maze, push) share: positions are 2-D
points and a goal is reached within a Euclidean distance of it; the point-mass envs
(reach, maze) also draw alike."""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType
from typing import Any

import numpy as np

from goalenvs.core.types import ArrayT
from goalenvs.envs.canvas import Canvas, CanvasRendering


def goal_distance(achieved: ArrayT, desired: ArrayT, xp: ModuleType) -> ArrayT:
    """Euclidean distance between 2-D goal positions, over the goals' leading shape.

    Written out rather than a reduction or hypot: elementwise IEEE operations give the
    same bits for any batch size, which the single env == vector env guarantee needs.
    ``xp`` is the array module (numpy, or torch); the result keeps the goals' dtype.
    """
    d = achieved - desired
    return xp.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1])


# --------------------------------------------------------------------------- drawing


class PlanarRendering(CanvasRendering):
    """:class:`CanvasRendering` of a single planar env, whose frame maps the plane."""

    def world_to_pixel(self, xy: Any) -> tuple[int, int]:
        """The frame pixel ``(column, row)`` that shows the world point ``xy``."""
        return self._get_canvas().to_pixel(xy)


FLOOR = (246, 246, 240)
GOAL, GOAL_RING = (120, 210, 140), (30, 130, 60)
AGENT, ARROW, TRAIL = (40, 90, 200), (230, 120, 20), (120, 150, 220)
TEXT = (30, 30, 30)
FRAME = (400, 440)  # pixels: the arena and a band above it for the heads-up text
TRAIL_LENGTH = 40  # positions kept for the fading trail


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
