"""Checks of ``compute_terminated`` and ``compute_truncated``: batched, and agreeing with step."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from goalenvs.checker.checks.reward import compare_batches, step_match
from goalenvs.checker.context import Context
from goalenvs.checker.probe import BATCH_SHAPES, evaluate_batches, fmt, goal_steps, success_flag
from goalenvs.checker.registry import Outcome, register


def _flag_checks(flag: str, step_title: str) -> tuple[Callable, Callable]:
    name = f"compute_{flag}"

    @register(f"{flag}.batch", "error", f"batched {name} equals per-element calls")
    def check_batch(ctx: Context, out: Outcome) -> None:
        _bool_batch(ctx, out, name)

    @register(f"{flag}.step_match", "error", step_title)
    def check_step(ctx: Context, out: Outcome) -> None:
        step_match(ctx, out, name, flag)

    return check_batch, check_step


check_terminated_batch, check_terminated_step = _flag_checks(
    "terminated", "every step's terminated equals compute_terminated"
)


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
        if s.terminated and success_flag(s.info):
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


check_truncated_batch, check_truncated_step = _flag_checks(
    "truncated", "a step truncates whenever compute_truncated says so"
)


def _bool_batch(ctx: Context, out: Outcome, name: str) -> None:
    compare_batches(ctx, out, name, BATCH_SHAPES, "bool")
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
