"""Checks of what the policy can see, of steps at and near the goal (read from the
goal-seeking probe, :mod:`goalenvs.checker.seek`), and of whole episodes."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from goalenvs.checker.checks.success import Judged, judge, success_disagreement
from goalenvs.checker.context import Context, EnvCallError, SkipCheckError
from goalenvs.checker.probe import (
    ATOL,
    StepRecord,
    call_goal,
    fmt,
    goal_space,
    goal_steps,
    method,
    mismatch,
    rollout,
    success_flag,
)
from goalenvs.checker.registry import Outcome, register
from goalenvs.checker.seek import GoalProbe, goal_distance, goal_probe
from goalenvs.core import episode_length

# A reward with at most this many distinct values (relative to the at-goal reward) over
# the probe's samples is sparse: it draws a line that is_success must draw too.
_SPARSE_VALUES = 4
# Episodes this long without a truncation, and no time limit declared: they never end
# (a correct env's own limit may be longer than a short rollout: only this many count).
_ENDLESS_STEPS = 200
_EXTRA_RESETS = 3
_MIN_AWAY_STEPS = 5


def _flat(value: object) -> np.ndarray:
    return np.asarray(value, np.float64).reshape(-1)


def _slices_equal(
    observations: np.ndarray, goals: np.ndarray, atol: float = 1e-8, rtol: float = 1e-5
) -> list[int]:
    """Offsets j where ``observations[:, j:j+k]`` equals the (T, k) ``goals`` on every row."""
    k = goals.shape[1]
    return [
        j
        for j in range(observations.shape[1] - k + 1)
        if np.allclose(observations[:, j : j + k], goals, atol=atol, rtol=rtol)
    ]


@register("obs.goal_visible", "error", "the desired goal is not copied into obs['observation']")
def check_goal_visible(ctx: Context, out: Outcome) -> None:
    try:
        # At the goal, an observation that holds the achieved goal holds the desired one
        # too: only steps away from it tell a copied goal apart.
        steps = [
            s
            for s in goal_steps(ctx)
            if not np.allclose(_flat(s.obs["achieved_goal"]), _flat(s.obs["desired_goal"]))
        ]
        if len(steps) < _MIN_AWAY_STEPS:
            raise SkipCheckError(
                f"{len(steps)} rollout steps away from the goal; {_MIN_AWAY_STEPS} needed"
            )
        observations = np.stack([_flat(s.obs["observation"]) for s in steps])
        goals = np.stack([_flat(s.obs["desired_goal"]) for s in steps])
    except (KeyError, TypeError, ValueError) as error:
        raise SkipCheckError(f"observation or desired_goal is not a flat array ({error})") from None
    if np.allclose(goals, goals[0]):
        raise SkipCheckError("the desired goal never changed in the rollout (see seed.goal_varies)")
    for j in _slices_equal(observations, goals, atol=1e-6, rtol=0.0)[:1]:
        out.fail(
            f"obs['observation'][{j}:{j + goals.shape[1]}] equals desired_goal on all "
            f"{len(steps)} rollout steps away from the goal (step {steps[0].t}: "
            f"{fmt(goals[0])}): the policy reads the real goal there, so a relabeled "
            "desired_goal teaches it nothing"
        )


def _near_goal_samples(ctx: Context) -> tuple[GoalProbe, list[StepRecord]]:
    probe = goal_probe(ctx)
    samples = probe.goal_samples()
    if not samples:
        raise SkipCheckError(f"the goal-seeking probe took no step ({probe.stopped or 'no env'})")
    return probe, samples


def _where(s: StepRecord) -> str:
    return f"{_label(s)}, goal distance {goal_distance(s.obs):.4g}"


def near_goal_judged(ctx: Context) -> tuple[GoalProbe, list[Judged]]:
    """Every goal-probe step with a bool is_success, judged against compute_reward."""

    def build(ctx: Context) -> tuple[GoalProbe, list[Judged]]:
        fn = method(ctx, "compute_reward")
        probe, samples = _near_goal_samples(ctx)
        flagged = [(s, ok) for s in samples if (ok := success_flag(s.info)) is not None]
        if not flagged:
            raise SkipCheckError(
                "no probe step reports a bool info['is_success'] (see success.bool)"
            )
        try:
            return probe, judge(ctx, fn, flagged)
        except (EnvCallError, TypeError, ValueError, IndexError, KeyError):
            raise SkipCheckError(
                "compute_reward(g, g) cannot be read (see the reward checks)"
            ) from None

    return ctx.cached("near_goal_judged", build)


def probe_missed(probe: GoalProbe, judged: list[Judged]) -> str | None:
    """Why the near-goal comparison has nothing to compare, or None when it has."""
    if any(j.ok or j.paid for j in judged):
        return None
    return (
        "no goal-probe step reported is_success=True or was paid what compute_reward "
        f"pays at the goal (closest goal distance {probe.closest:.4g})"
    )


@register("success.near_goal", "error", "near the goal, is_success and a sparse reward agree")
def check_success_near_goal(ctx: Context, out: Outcome) -> None:
    probe, judged = near_goal_judged(ctx)
    if len({round(j.gap, 6) for j in judged}) > _SPARSE_VALUES:
        raise SkipCheckError("the reward is dense: it draws no line for is_success to match")
    missed = probe_missed(probe, judged)
    if missed is not None:
        raise SkipCheckError(missed)
    found = success_disagreement(judged, _label)
    if found is not None:
        out.fail(found[0], _where(found[1]))


def _label(s: StepRecord) -> str:
    return f"goal-probe step {s.t}"


@register("probe.reached", "info", "the goal-seeking probe reached the goal")
def check_probe_reached(ctx: Context, out: Outcome) -> None:
    probe, judged = near_goal_judged(ctx)
    if probe_missed(probe, judged) is None:
        return
    cause = (
        " (goal.achieved_current: achieved_goal answers each action a step late, so no "
        "candidate action looked better than another)"
        if probe.lags()
        else ""
    )
    out.fail(
        f"the goal-seeking probe came no closer to desired_goal than {probe.closest:.4g} "
        f"({probe.start_distance:.4g} at reset) in {len(probe.samples)} steps, and no step "
        "reported is_success=True or was paid what compute_reward pays at the goal"
        f"{cause}: success.near_goal could not run, and terminated.at_goal and "
        "reward.step_match saw no step at the goal. Where no single action moves the "
        "achieved goal (a block before contact) that is expected",
        "goal probe",
    )


@register(
    "terminated.at_goal", "error", "at and near the goal, terminated equals compute_terminated"
)
def check_terminated_at_goal(ctx: Context, out: Outcome) -> None:
    fn = method(ctx, "compute_terminated")
    _, samples = _near_goal_samples(ctx)
    for s in samples[:300]:
        ag, dg = s.obs["achieved_goal"], s.obs["desired_goal"]
        value = call_goal(ctx, "compute_terminated(one pair)", fn, ag, dg, s.info)
        try:
            computed = bool(np.asarray(value).reshape(-1)[0])
        except (TypeError, ValueError, IndexError):
            raise SkipCheckError(
                "compute_terminated returns no bool (see terminated.batch)"
            ) from None
        if computed != s.terminated:
            text = mismatch("terminated", s.terminated, "compute_terminated", (ag, dg), computed)
            out.fail(
                f"{text} (is_success={success_flag(s.info)}): relabeled goals get the wrong "
                "terminations",
                _where(s),
            )
            return


@register("episode.ends", "error", "episodes end: a truncation or max_episode_steps")
def check_episode_ends(ctx: Context, out: Outcome) -> None:
    if episode_length(ctx.env) is not None:
        return
    ro = rollout(ctx)
    if any(s.truncated for s in ro.steps):
        return
    longest = max((len(e.steps) for e in ro.episodes), default=0)
    if longest >= _ENDLESS_STEPS:
        ended = sum(1 for s in ro.steps if s.terminated)
        out.fail(
            f"an episode ran {longest} steps without truncation ({ended} terminated in the "
            "whole rollout) and the env declares no max_episode_steps: a HER buffer relabels "
            "only finished episodes, and goalenvs train cannot tell how long one is"
        )


def truncation_lengths(ctx: Context) -> list[int]:
    """The lengths of the rollout's episodes that the env truncated itself."""
    return [len(e.steps) for e in rollout(ctx).episodes if e.steps and e.steps[-1].truncated]


def _undeclared_lengths(ctx: Context) -> list[int] | None:
    """The truncation lengths seen, in order, when the env declares no episode length."""
    return None if episode_length(ctx.env) is not None else sorted(set(truncation_lengths(ctx)))


@register("episode.length", "error", "the env declares an episode length, or truncates at one")
def check_episode_length(ctx: Context, out: Outcome) -> None:
    lengths = _undeclared_lengths(ctx)
    if lengths is None or len(lengths) == 1:
        return  # declared, or measured: episode.length_declared says the rest
    seen = (
        f"truncated its episodes after {lengths} steps"
        if lengths
        else "truncated no episode in the rollout"
    )
    out.fail(
        f"the env declares no max_episode_steps and {seen}: goalenvs train sets its "
        "discount (1 - 1/T) and rollouts from one episode length, and cannot tell it"
    )


@register("episode.length_declared", "warning", "the episode length is declared, not only measured")
def check_episode_length_declared(ctx: Context, out: Outcome) -> None:
    lengths = _undeclared_lengths(ctx)
    if lengths is None:
        return
    if len(lengths) != 1:
        raise SkipCheckError("no single truncation length was seen (see episode.length)")
    ctx.facts["episode_length"] = lengths[0]
    out.fail(
        f"the env truncates its episodes after {lengths[0]} steps itself and declares no "
        "max_episode_steps: goalenvs train takes that length with a note; other tools see "
        "no episode length"
    )


def _solved_at_reset(ctx: Context, fn: Any, obs: Any, info: object) -> bool:
    if (solved := success_flag(info)) is not None:
        return solved
    ag, dg = obs["achieved_goal"], obs["desired_goal"]
    paid = float(_flat(call_goal(ctx, "compute_reward(reset goals)", fn, ag, dg, info))[0])
    at_goal = float(_flat(call_goal(ctx, "compute_reward(g, g)", fn, ag, ag, info))[0])
    return abs(paid - at_goal) <= ATOL


@register("episode.start_solved", "warning", "resets do not start with the goal already reached")
def check_start_solved(ctx: Context, out: Outcome) -> None:
    goal_space(ctx)
    fn = method(ctx, "compute_reward")
    resets = [
        (f"reset of episode {i}", e.reset_obs, e.reset_info)
        for i, e in enumerate(rollout(ctx).episodes)
    ]
    for i in range(_EXTRA_RESETS):
        seed = ctx.seed + 1000 + i
        ret = ctx.call(f"reset(seed={seed})", ctx.env.reset, seed=seed)
        if isinstance(ret, tuple) and len(ret) == 2:
            resets.append((f"reset(seed={seed})", ret[0], ret[1]))
    resets = [r for r in resets if isinstance(r[1], Mapping) and "achieved_goal" in r[1]]
    if len(resets) < 2:
        raise SkipCheckError("fewer than two resets returned goal observations")
    try:
        solved = [r for r in resets if _solved_at_reset(ctx, fn, r[1], r[2])]
    except (TypeError, ValueError, IndexError):
        raise SkipCheckError("compute_reward cannot be read (see the reward checks)") from None
    if len(solved) == len(resets):
        where, obs, _ = solved[0]
        out.fail(
            f"all {len(resets)} resets start with the goal reached ({where}: achieved_goal="
            f"{fmt(obs['achieved_goal'])}, desired_goal={fmt(obs['desired_goal'])}): every "
            "episode is a success before the first action, and there is nothing to learn"
        )


@register("goal.achieved_moves", "warning", "achieved_goal moves with the state it mirrors")
def check_achieved_moves(ctx: Context, out: Outcome) -> None:
    goal_space(ctx)
    episodes = [
        e
        for e in rollout(ctx).episodes
        if isinstance(e.reset_obs, Mapping)
        and "observation" in e.reset_obs
        and all(isinstance(s.obs, Mapping) for s in e.steps)
    ]
    if not episodes:
        raise SkipCheckError("the rollout has no goal observations")
    try:
        if any(
            not np.allclose(_flat(s.obs["achieved_goal"]), _flat(e.reset_obs["achieved_goal"]))
            for e in episodes
            for s in e.steps
        ):
            return  # achieved_goal moves
        offsets = _slices_equal(
            np.stack([_flat(e.reset_obs["observation"]) for e in episodes]),
            np.stack([_flat(e.reset_obs["achieved_goal"]) for e in episodes]),
        )
    except (KeyError, TypeError, ValueError):
        raise SkipCheckError("observation or achieved_goal is not a flat array") from None
    for j in offsets:
        for e in episodes:
            k = _flat(e.reset_obs["achieved_goal"]).shape[0]
            start = _flat(e.reset_obs["observation"])[j : j + k]
            moved = next(
                (
                    s
                    for s in e.steps
                    if not np.allclose(_flat(s.obs["observation"])[j : j + k], start)
                ),
                None,
            )
            if moved is not None:
                out.fail(
                    f"obs['observation'][{j}:{j + k}] equals achieved_goal at every reset and "
                    f"moved to {fmt(_flat(moved.obs['observation'])[j : j + k])} by step "
                    f"{moved.t}, but achieved_goal stayed {fmt(moved.obs['achieved_goal'])} "
                    "through the whole rollout: every relabeled goal is the start",
                    f"step {moved.t}",
                )
                return


@register("api.info_fresh", "warning", "every step returns a new info dict")
def check_info_fresh(ctx: Context, out: Outcome) -> None:
    steps = [s for s in rollout(ctx).steps if s.info_ref is not None]
    if len(steps) < 2:
        raise SkipCheckError("the rollout has fewer than two steps")
    for prev, s in itertools.pairwise(steps):
        if s.info_ref is prev.info_ref:
            out.fail(
                f"step {prev.t} and step {s.t} returned the same info dict object (its values "
                "changed in place): a wrapper or buffer that keeps an info, as "
                "RecordEpisodeStatistics, SB3's Monitor and HER's copy_info_dict do, sees "
                "every earlier info turn into the latest",
                f"step {s.t}",
            )
            return
