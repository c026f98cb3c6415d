"""What the planar goal envs (point reach, point maze, push) share: positions are 2-D
points and a goal is reached within a Euclidean distance of it."""

from __future__ import annotations

from typing import Any


def goal_distance(achieved: Any, desired: Any, xp: Any) -> Any:
    """Euclidean distance between 2-D goal positions, over the goals' leading shape.

    Written out rather than a reduction or hypot: elementwise IEEE operations give the
    same bits for any batch size, which the single env == vector env guarantee needs.
    ``xp`` is the array module (numpy, or torch); the result keeps the goals' dtype.
    """
    d = achieved - desired
    return xp.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1])
