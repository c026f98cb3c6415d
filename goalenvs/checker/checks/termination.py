"""Checks of ``compute_terminated`` and ``compute_truncated``: batched, and agreeing with step."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from goalenvs.checker.checks.reward import compare_batches, step_match
from goalenvs.checker.context import Context
from goalenvs.checker.probe import (
    BATCH_SIZES,
    LEADING_SHAPE,
    evaluate_batches,
    fmt,
    goal_steps,
    is_bool_like,
)
from goalenvs.checker.registry import Outcome, register

# --------------------------------------------------------------------------- terminated / truncated


@register("terminated.batch", "error", "batched compute_terminated equals per-element calls")
def check_terminated_batch(ctx: Context, out: Outcome) -> None:
    _bool_batch(ctx, out, "compute_terminated")


@register("terminated.step_match", "error", "every step's terminated equals compute_terminated")
def check_terminated_step(ctx: Context, out: Outcome) -> None:
    step_match(ctx, out, "compute_terminated", "terminated")


@register(
    "terminated.present",
    "warning",
    "compute_terminated is defined, so relabeled goals get their own terminations",
)
def check_terminated_present(ctx: Context, out: Outcome) -> None:
    if ctx.goal_method("compute_terminated") is not None:
        return
    ended = None
    for s in goal_steps(ctx):
        success = s.info.get("is_success") if isinstance(s.info, Mapping) else None
        if s.terminated and is_bool_like(success) and bool(success):
            ended = s
            break
    if ended is not None:
        out.fail(
            "the episode terminated with is_success=True but the env defines no "
            "compute_terminated: termination depends on the goal, and a HER buffer keeps "
            "the flag computed for the original goal, so a relabeled transition that "
            "reached the original goal stays terminal for a goal it did not reach. "
            "Define compute_terminated(achieved_goal, desired_goal, info)",
            f"step {ended.t}",
        )
    else:
        out.fail(
            "the env defines no compute_terminated: HER works (goalenvs' and SB3's buffers "
            "keep the stored terminated flag), but terminations of relabeled goals are not "
            "recomputed (no step of the rollout terminated with is_success=True; if success "
            "ends episodes, a relabeled transition stays terminal for a goal it did not "
            "reach). Define compute_terminated(achieved_goal, desired_goal, info)"
        )


@register("truncated.batch", "error", "batched compute_truncated equals per-element calls")
def check_truncated_batch(ctx: Context, out: Outcome) -> None:
    _bool_batch(ctx, out, "compute_truncated")


@register("truncated.step_match", "error", "a step truncates whenever compute_truncated says so")
def check_truncated_step(ctx: Context, out: Outcome) -> None:
    step_match(ctx, out, "compute_truncated", "truncated")


def _bool_batch(ctx: Context, out: Outcome, name: str) -> None:
    shapes = [(n,) for n in BATCH_SIZES] + [LEADING_SHAPE]
    compare_batches(ctx, out, name, shapes, "bool")
    for ev in evaluate_batches(ctx, name):
        if ev.error is not None or np.ndim(ev.result) == 0 or np.size(ev.result) != len(ev.pairs):
            continue  # reported above (a scalar is judged there)
        r = ev.result
        shape = np.shape(r)
        if shape != ev.shape:
            out.fail(
                f"{name} returned shape {shape}, expected {ev.shape}", f"batch of shape {ev.shape}"
            )
        elif not isinstance(r, np.ndarray) or not (
            r.dtype == bool or (r.dtype.kind in "iu" and np.isin(r, (0, 1)).all())
        ):
            out.fail(
                f"{name} returned {type(r).__name__} {fmt(r)}, expected a bool array",
                f"batch of shape {ev.shape}",
            )
