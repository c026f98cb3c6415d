"""Checks of ``info["is_success"]``: present, a bool, and agreeing with the reward."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from goalenvs.checker.context import Context, EnvCallError, SkipCheckError
from goalenvs.checker.probe import (
    ATOL,
    StepRecord,
    call_goal,
    copy_info,
    fmt,
    goal_sampler,
    is_bool_like,
    rollout,
    success_flag,
)
from goalenvs.checker.registry import Outcome, register
from goalenvs.checker.seek import goal_distance

GOAL_PAIR = ("achieved_goal", "desired_goal")

_SUCCESS_LIKE = re.compile(r"succe|reached|solved|goal_achieved", re.IGNORECASE)


def _infos(ctx: Context) -> list[tuple[str, dict, StepRecord | None]]:
    ro = rollout(ctx)
    items: list[tuple[str, dict, StepRecord | None]] = []
    for i, e in enumerate(ro.episodes):
        items.append((f"reset of episode {i}", e.reset_info, None))
        items.extend((f"step {s.t}", s.info, s) for s in e.steps)
    if not items:
        raise SkipCheckError(f"no reset succeeded ({ro.stopped})")
    return items


def no_success_text(info: dict, who: str = "") -> str:
    """The one wording of an info without ``is_success`` (``who``: a batch's sub-envs),
    naming a key that looks like one."""
    others = [k for k in info if _SUCCESS_LIKE.search(str(k))]
    hint = (
        f"; the env reports {others} instead: rename it 'is_success', the key HER evaluation "
        "and SB3 read"
        if others
        else ""
    )
    return (
        f"info has no 'is_success'{who} (keys {sorted(map(str, info))}){hint}: HER evaluation "
        "and goalenvs train read it at every episode end"
    )


@register("success.present", "error", "info['is_success'] is set on every step")
def check_success_present(ctx: Context, out: Outcome) -> None:
    # Only steps: HER buffers and evaluation read the step infos, and the reference envs
    # (gymnasium-robotics' Fetch) return an empty info from reset.
    for where, info, s in _infos(ctx):
        if s is not None and "is_success" not in info:
            out.fail(no_success_text(info), where)
            return


@register("success.bool", "error", "info['is_success'] is a bool")
def check_success_bool(ctx: Context, out: Outcome) -> None:
    for where, info, _ in _infos(ctx):
        if "is_success" in info and not is_bool_like(info["is_success"]):
            value = info["is_success"]
            out.fail(
                f"info['is_success'] = {fmt(value)} of type {type(value).__name__}, "
                "expected a bool (one per env, as goalenvs train and SB3 read it)",
                where,
            )
            return


def _success_steps(ctx: Context) -> list[tuple[StepRecord, bool]]:
    steps = [s for _, _, s in _infos(ctx) if s is not None and "is_success" in s.info]
    flags = [success_flag(s.info) for s in steps]
    if None in flags:
        raise SkipCheckError("is_success is not bool-like (see success.bool)")
    flagged = [(s, bool(ok)) for s, ok in zip(steps, flags, strict=True)]
    if not flagged:
        raise SkipCheckError("no step reports info['is_success'] (see success.present)")
    return flagged


def _reward_at_goal(ctx: Context, fn: Callable, s: StepRecord) -> float:
    ag = s.obs["achieved_goal"]
    value = call_goal(ctx, "compute_reward(g, g)", fn, ag, ag, s.info)
    return float(np.asarray(value, float).reshape(-1)[0])


def _reward_far_from_goal(ctx: Context, fn: Callable, s: StepRecord) -> float:
    """The median reward of this step's achieved goal against goals drawn from the goal
    space: what a step that missed its goal is typically paid (same info)."""
    sp = goal_sampler(ctx)
    ag = s.obs["achieved_goal"]
    values = []
    for _ in range(5):
        value = call_goal(ctx, "compute_reward(g, random goal)", fn, ag, sp.sample(), s.info)
        values.append(float(np.asarray(value, float).reshape(-1)[0]))
    return float(np.median(values))


# A successful step whose achieved_goal lies this many times farther from its desired_goal
# than an unsuccessful step's: is_success does not follow achieved_goal.
_FARTHER = 2.0


@dataclass(frozen=True)
class Judged:
    """A step with its is_success and whether compute_reward pays it the goal reward."""

    step: StepRecord
    ok: bool  # info["is_success"]
    paid: bool  # the step's reward is what compute_reward(g, g) pays at the goal
    # whether the goals the step started from are paid the goal reward (None: no such goals)
    paid_before: bool | None
    gap: float  # the step's reward minus the goal reward


def judge(ctx: Context, fn: Callable, flagged: Sequence[tuple[StepRecord, bool]]) -> list[Judged]:
    """Every step of ``flagged`` judged against ``compute_reward`` (one call to the env's
    thread for all of them: the goal probe gives over a thousand)."""

    def at_goal(ag: object, info: object) -> float:
        ag = np.array(ag, copy=True)
        value = fn(ag, np.array(ag, copy=True), copy_info(info))
        return float(np.asarray(value, float).reshape(-1)[0])

    def paid(goals: object, info: object) -> bool | None:
        if not isinstance(goals, Mapping) or not all(k in goals for k in GOAL_PAIR):
            return None
        ag, dg = goals["achieved_goal"], goals["desired_goal"]
        value = fn(np.array(ag, copy=True), np.array(dg, copy=True), copy_info(info))
        return abs(float(np.asarray(value, float).reshape(-1)[0]) - at_goal(ag, info)) <= ATOL

    def run() -> list[Judged]:
        judged = []
        before: dict[int, bool | None] = {}  # the probe's candidates share where they start
        for s, ok in flagged:
            gap = s.reward - at_goal(s.obs["achieved_goal"], s.info)
            key = id(s.before)
            if key not in before:
                before[key] = paid(s.before, s.info)
            judged.append(Judged(s, ok, abs(gap) <= ATOL, before[key], gap))
        return judged

    return ctx.call("compute_reward(g, g) of every step with is_success", run)


def success_disagreement(
    judged: Sequence[Judged], label: Callable[[StepRecord], str]
) -> tuple[str, StepRecord] | None:
    """What is wrong when ``is_success`` and the sparse reward disagree, with the step
    that shows it, or None: is_success one step late, judged on another measure than
    ``achieved_goal`` (:func:`success_off_achieved_goal`), or another threshold."""
    wrong = [j for j in judged if j.ok != j.paid]
    if not wrong:
        return None
    late = _one_step_late(judged, wrong, label)
    if late is not None:
        return late
    both_ways = {(j.ok, j.paid) for j in judged} >= {(True, False), (False, True)}
    first = min(wrong, key=lambda j: goal_distance(j.step.obs))
    says = "is" if first.paid else "is not"
    seen = (
        f"is_success={first.ok} but the reward {fmt(first.step.reward)} {says} what "
        f"compute_reward pays at the goal, for achieved_goal="
        f"{fmt(first.step.obs['achieved_goal'])}, desired_goal="
        f"{fmt(first.step.obs['desired_goal'])}"
    )
    cause = success_off_achieved_goal([(j.step, j.ok) for j in judged], label, both_ways)
    if cause is not None:
        return f"{cause}. Here {seen}", first.step
    return (
        f"{seen}; is_success is True {_line(judged, lambda j: j.ok)}, compute_reward pays "
        f"the goal reward {_line(judged, lambda j: j.paid)}: success and reward draw the "
        "line at different distances",
        first.step,
    )


def _line(judged: Sequence[Judged], inside: Callable[[Judged], bool]) -> str:
    """Where a threshold on the goal distance sits: the farthest step inside, the nearest out."""
    near = [goal_distance(j.step.obs) for j in judged if inside(j)]
    far = [goal_distance(j.step.obs) for j in judged if not inside(j)]
    if not near:
        return "on no step"
    text = f"up to goal distance {max(near):.4g}"
    return text + (f" (not from {min(far):.4g})" if far else " (on every step)")


def _one_step_late(
    judged: Sequence[Judged], wrong: Sequence[Judged], label: Callable[[StepRecord], str]
) -> tuple[str, StepRecord] | None:
    """The finding when is_success answers for the state before the step, else None."""
    before = [j for j in judged if j.paid_before is not None]
    missed = sum(1 for j in before if j.ok != j.paid_before)
    entered = [j for j in wrong if j.paid]  # the step reached the goal, is_success says no
    left = [j for j in wrong if j.ok]  # the step left it, is_success still says yes
    # Both ways: a step one threshold refuses never shows the other (two radii disagree
    # one way, and an is_success that is rarely True agrees with almost anything).
    if len(before) < len(judged) or not (entered and left) or missed * 10 > len(wrong):
        return None
    shown = [
        f"{label(j.step)} {'reached' if j.paid else 'left'} the goal (achieved_goal "
        f"{goal_distance(j.step.obs):.4g} from desired_goal, reward {fmt(j.step.reward)}) "
        f"and reports is_success={j.ok}"
        for j in (entered[:1] + left[:1])
    ]
    return (
        "is_success is one step late: it says whether the goals the step started from were "
        f"at the goal, not the goals it returned (on {len(before) - missed} of "
        f"{len(before)} steps); {' and '.join(shown)}. Judge is_success on the "
        "achieved_goal the step returns",
        (entered or left)[0].step,
    )


def success_off_achieved_goal(
    flagged: Sequence[tuple[StepRecord, bool]],
    label: Callable[[StepRecord], str],
    both_ways: bool,
) -> str | None:
    """Why ``is_success`` seems not to measure ``achieved_goal``, or None: no threshold on
    the goal distance separates the successful steps from the others, and the reward
    disagrees with is_success both ways (``both_ways``) or a successful step lies
    :data:`_FARTHER` times as far from its goal as an unsuccessful one."""
    measured = [(d, s, ok) for s, ok in flagged if np.isfinite(d := goal_distance(s.obs))]
    wins = sorted(((d, s) for d, s, ok in measured if ok), key=lambda p: p[0])
    losses = sorted(((d, s) for d, s, ok in measured if not ok), key=lambda p: p[0])
    if not wins or not losses:
        return None
    (far_win, win), (near_loss, loss) = wins[-1], losses[0]
    if far_win <= near_loss or wins[0][0] >= losses[-1][0]:
        return None  # one threshold on the distance separates them
    if not both_ways and near_loss * _FARTHER > far_win:
        return None
    return (
        "achieved_goal may not be what is_success measures (is it built from the wrong slice "
        f"of the state, or before the step?): is_success=True at {label(win)} with "
        f"achieved_goal {far_win:.4g} from desired_goal, but False at {label(loss)} with "
        f"achieved_goal only {near_loss:.4g} from it; no threshold on the distance between "
        "the two goals draws that line"
    )


def _step_label(s: StepRecord) -> str:
    return f"step {s.t}"


def _late_in_rollout(
    ctx: Context, fn: Callable, flagged: Sequence[tuple[StepRecord, bool]]
) -> str | None:
    try:
        judged = judge(ctx, fn, flagged)
    except (EnvCallError, TypeError, ValueError, IndexError, KeyError):
        return None  # a broken compute_reward is the reward checks' finding
    wrong = [j for j in judged if j.ok != j.paid]
    late = _one_step_late(judged, wrong, _step_label) if wrong else None
    return None if late is None else late[0]


@register("success.consistent", "error", "is_success agrees with the reward compute_reward pays")
def check_success_consistent(ctx: Context, out: Outcome) -> None:
    flagged = _success_steps(ctx)
    wins = [s for s, ok in flagged if ok]
    losses = [s for s, ok in flagged if not ok]
    compared = False
    fn = ctx.goal_method("compute_reward")
    goals_ok = isinstance(flagged[0][0].obs, Mapping)
    found: list[tuple[str, str | None]] = []  # (message, where), reported after the cause
    paid_loss = unpaid_win = False  # the reward disagreed with is_success each way
    try:
        if losses and fn is not None and goals_ok:
            # Even without a success in the rollout: an unsuccessful step must not be
            # paid what compute_reward pays at the goal.
            compared = True
            for s in losses[:50]:
                at_goal = _reward_at_goal(ctx, fn, s)
                if s.reward >= at_goal - ATOL:
                    paid_loss = True
                    message = (
                        f"is_success=False but the reward {fmt(s.reward)} is what "
                        f"compute_reward pays at the goal (compute_reward(g, g) = "
                        f"{fmt(at_goal)}) for achieved_goal={fmt(s.obs['achieved_goal'])}, "
                        f"desired_goal={fmt(s.obs['desired_goal'])}"
                    )
                    found.append((message, f"step {s.t}"))
                    break
        if wins and fn is not None and goals_ok:
            # A successful step is paid more than a miss: less than the success reward
            # and no more than a goal drawn at random pays is a failure's reward.
            compared = True
            for s in wins[:20]:
                at_goal = _reward_at_goal(ctx, fn, s)
                far = _reward_far_from_goal(ctx, fn, s)
                if at_goal > far + ATOL and s.reward < at_goal - ATOL and s.reward <= far + ATOL:
                    unpaid_win = True
                    every = " (every step of the rollout says so)" if not losses else ""
                    message = (
                        f"is_success=True{every} but the reward {fmt(s.reward)} is what "
                        f"compute_reward pays away from the goal (median {fmt(far)} for "
                        f"goals drawn from the goal space; {fmt(at_goal)} at the goal) for "
                        f"achieved_goal={fmt(s.obs['achieved_goal'])}, "
                        f"desired_goal={fmt(s.obs['desired_goal'])}: evaluation and "
                        "--stop-success read is_success"
                    )
                    found.append((message, f"step {s.t}"))
                    break
    except (EnvCallError, TypeError, ValueError, KeyError):
        # a broken compute_reward is the reward checks' finding
        if not found:
            compared = False
    if wins and losses:
        compared = True
        worst_win = min(wins, key=lambda s: s.reward)
        best_loss = max(losses, key=lambda s: s.reward)
        if worst_win.reward < best_loss.reward - ATOL:
            message = (
                f"step {worst_win.t} has is_success=True with reward "
                f"{fmt(worst_win.reward)} but step {best_loss.t} has is_success=False "
                f"with the higher reward {fmt(best_loss.reward)}: success and reward disagree"
            )
            found.append((message, None))
    if found and goals_ok and fn is not None:
        # the likely cause first: is_success a step late, or not measuring achieved_goal
        cause = _late_in_rollout(ctx, fn, flagged) or success_off_achieved_goal(
            flagged, _step_label, both_ways=paid_loss and unpaid_win
        )
        if cause is not None:
            out.fail(cause)
    for message, where in found:
        out.fail(message, where)
    if not compared:
        raise SkipCheckError(
            f"the rollout has {len(wins)} successful and {len(losses)} unsuccessful steps "
            "and no working compute_reward to compare with"
        )


@register("success.terminates", "warning", "success ends the episode always or never")
def check_success_terminates(ctx: Context, out: Outcome) -> None:
    wins = [s for s, ok in _success_steps(ctx) if ok]
    ended = [s for s in wins if s.terminated]
    if ended and len(ended) < len(wins):
        going = next(s for s in wins if not s.terminated)
        out.fail(
            f"success terminated the episode at step {ended[0].t} but not at step {going.t} "
            "(is_success=True, terminated=False)"
        )
