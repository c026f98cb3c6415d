"""Checks of the observation space: a goal Dict whose two goal spaces agree."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from goalenvs.checker.context import Context, SkipCheckError
from goalenvs.checker.probe import fmt, goal_space
from goalenvs.checker.registry import Outcome, register
from goalenvs.core import GOAL_KEYS


def goal_dict_problem(space: object, name: str = "observation_space") -> str | None:
    """Why ``space`` (the space called ``name``) is not a goal Dict, or None."""
    if not isinstance(space, spaces.Dict):
        expected = "Dict(observation=..., achieved_goal=..., desired_goal=...)"
        return f"{name} is {space!r}, expected {expected}"
    missing = [k for k in GOAL_KEYS if k not in space.spaces]
    return f"{name} lacks {missing}; it has keys {list(space.spaces)}" if missing else None


def goals_apart(space: spaces.Dict, name: str = "") -> str | None:
    """Why a relabeled desired goal would not fit the goal Dict ``space``, or None."""
    ag, dg = space["achieved_goal"], space["desired_goal"]
    if type(ag) is not type(dg):
        return f"{name}achieved_goal space is {ag!r} but desired_goal space is {dg!r}"
    if ag.shape != dg.shape or ag.dtype != dg.dtype:
        return (
            f"{name}achieved_goal space has shape {ag.shape} dtype {ag.dtype}, desired_goal space "
            f"has shape {dg.shape} dtype {dg.dtype}: a relabeled desired goal would not fit"
        )
    return None


@register("space.dict", "error", "observation space is a Dict with the three goal keys")
def check_space_dict(ctx: Context, out: Outcome) -> None:
    if (problem := goal_dict_problem(ctx.env.observation_space)) is not None:
        out.fail(problem)


@register("space.goal_match", "error", "achieved_goal and desired_goal spaces are identical")
def check_goal_match(ctx: Context, out: Outcome) -> None:
    space = goal_space(ctx)
    ag, dg = space["achieved_goal"], space["desired_goal"]
    if (problem := goals_apart(space)) is not None:
        out.fail(problem)
    if type(ag) is type(dg) and isinstance(ag, spaces.Box) and len(ag.shape) != 1:
        out.fail(f"goal spaces have shape {ag.shape}: goals must be 1-D vectors")


@register("space.goal_bounds", "warning", "achieved_goal and desired_goal spaces share bounds")
def check_goal_bounds(ctx: Context, out: Outcome) -> None:
    space = goal_space(ctx)
    ag, dg = space["achieved_goal"], space["desired_goal"]
    if not (isinstance(ag, spaces.Box) and isinstance(dg, spaces.Box)) or ag.shape != dg.shape:
        raise SkipCheckError("applies to two Box goal spaces of one shape")
    if not (np.array_equal(ag.low, dg.low) and np.array_equal(ag.high, dg.high)):
        out.fail(
            f"achieved_goal bounds [{fmt(ag.low)}, {fmt(ag.high)}] differ from desired_goal "
            f"bounds [{fmt(dg.low)}, {fmt(dg.high)}]: relabeled goals fall outside the desired "
            "goal space"
        )
