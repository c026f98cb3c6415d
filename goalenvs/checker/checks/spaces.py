"""Checks of the observation space: a goal Dict whose two goal spaces agree."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from goalenvs.checker.context import Context, SkipCheckError
from goalenvs.checker.probe import fmt, goal_space
from goalenvs.checker.registry import Outcome, register
from goalenvs.core import GOAL_KEYS


@register("space.dict", "error", "observation space is a Dict with the three goal keys")
def check_space_dict(ctx: Context, out: Outcome) -> None:
    space = ctx.env.observation_space
    if not isinstance(space, spaces.Dict):
        out.fail(
            f"observation_space is {space!r}, expected Dict(observation=..., achieved_goal=..., "
            "desired_goal=...)"
        )
        return
    missing = [k for k in GOAL_KEYS if k not in space.spaces]
    if missing:
        out.fail(f"observation_space lacks {missing}; it has keys {list(space.spaces)}")


@register("space.goal_match", "error", "achieved_goal and desired_goal spaces are identical")
def check_goal_match(ctx: Context, out: Outcome) -> None:
    space = goal_space(ctx)
    ag, dg = space["achieved_goal"], space["desired_goal"]
    if type(ag) is not type(dg):
        out.fail(f"achieved_goal space is {ag!r} but desired_goal space is {dg!r}")
        return
    if ag.shape != dg.shape or ag.dtype != dg.dtype:
        out.fail(
            f"achieved_goal space has shape {ag.shape} dtype {ag.dtype}, desired_goal space "
            f"has shape {dg.shape} dtype {dg.dtype}: a relabeled desired goal would not fit"
        )
    if isinstance(ag, spaces.Box) and len(ag.shape) != 1:
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
