"""Checks over whole episodes and of seeding: goals that stay, move and vary."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs.checker.context import Context, EnvCallError, SkipCheckError
from goalenvs.checker.probe import (
    copy_info,
    copy_obs,
    fmt,
    goal_moved,
    goal_space,
    replay_text,
    rollout,
    same,
    same_value,
)
from goalenvs.checker.registry import Outcome, register
from goalenvs.checker.seek import goal_probe


@register("goal.fixed", "warning", "the desired goal stays fixed within an episode")
def check_goal_fixed(ctx: Context, out: Outcome) -> None:
    goal_space(ctx)
    for i, e in enumerate(rollout(ctx).episodes):
        if not isinstance(e.reset_obs, Mapping) or "desired_goal" not in e.reset_obs:
            continue
        first = e.reset_obs["desired_goal"]
        for s in e.steps:
            if isinstance(s.obs, Mapping) and not same(s.obs.get("desired_goal"), first):
                now = s.obs.get("desired_goal")
                out.fail(goal_moved(f"episode {i}'s", first, now, s.t), f"step {s.t}")
                return


@register(
    "goal.achieved_current",
    "warning",
    "achieved_goal is the state after the step, not the one before it",
)
def check_achieved_current(ctx: Context, out: Outcome) -> None:
    skipped = None
    try:
        _copies_observation_before(ctx, out)
    except SkipCheckError as reason:
        skipped = reason
    if out.failed:
        return
    probe = goal_probe(ctx)
    if probe.lags():
        out.fail(
            f"no candidate action of the goal probe moved achieved_goal in the step that "
            f"took it ({probe.unmoved} copied steps), while one more step with a common "
            f"action moved them apart on {probe.answered_late}: achieved_goal (and the "
            "observation built with it) is read before the state update, so it answers "
            "each action a step late. The policy sees where it was, not where it is, and "
            "every relabeled reward is paid for the step before",
            "goal probe",
        )
    elif skipped is not None:
        raise skipped


def _copies_observation_before(ctx: Context, out: Outcome) -> None:
    """Fails when achieved_goal equals a slice of the previous step's observation."""
    space = goal_space(ctx)
    if not isinstance(space["observation"], (spaces.Box, spaces.MultiBinary)):
        raise SkipCheckError("needs a Box or MultiBinary 'observation' to compare with")
    prev, cur, achieved, where = [], [], [], []
    for s in rollout(ctx).steps:
        try:
            prev.append(np.asarray(s.before["observation"], float).reshape(-1))
            cur.append(np.asarray(s.obs["observation"], float).reshape(-1))
            achieved.append(np.asarray(s.obs["achieved_goal"], float).reshape(-1))
        except (KeyError, TypeError, ValueError):
            raise SkipCheckError("observations are not numeric goal dicts") from None
        where.append(s.t)
    if len(cur) < 10:
        raise SkipCheckError(f"needs 10 steps, the rollout has {len(cur)}")
    O_prev, O_cur, A = np.stack(prev), np.stack(cur), np.stack(achieved)
    tol = 1e-6
    moved = np.abs(O_prev - O_cur) > tol  # only steps where an entry changed tell apart
    counts = moved.sum(axis=0)
    for k in range(A.shape[1]):
        now = ((np.abs(A[:, k : k + 1] - O_cur) <= tol) & moved).sum(axis=0)
        lagged = ((np.abs(A[:, k : k + 1] - O_prev) <= tol) & moved).sum(axis=0)
        share_now = now / np.maximum(counts, 1)
        share_lagged = lagged / np.maximum(counts, 1)
        bad = np.flatnonzero((counts >= 10) & (share_lagged >= 0.9) & (share_now <= 0.1))
        if bad.size:
            j = int(bad[0])
            i = int(np.flatnonzero(moved[:, j])[0])
            out.fail(
                f"achieved_goal[{k}] equals observation[{j}] of the step before at "
                f"{share_lagged[j]:.0%} of {counts[j]} steps and of its own step at "
                f"{share_now[j]:.0%}: at step {where[i]} achieved_goal[{k}] = {fmt(A[i, k])}, "
                f"observation[{j}] = {fmt(O_cur[i, j])} (previous {fmt(O_prev[i, j])}). The goal "
                "is read before the state is updated, so every relabeled reward is one step late",
                f"step {where[i]}",
            )


def _reset_obs(ctx: Context, seed: int, label: str) -> Any:
    ret = ctx.call(f"reset(seed={seed})", ctx.env.reset, seed=seed)
    if not isinstance(ret, tuple) or len(ret) != 2:
        raise SkipCheckError(f"reset does not return (obs, info) (see api.reset) [{label}]")
    return copy_obs(ret[0]), copy_info(ret[1])


@register("seed.reset", "error", "reset(seed=s) reproduces the first observation")
def check_seed_reset(ctx: Context, out: Outcome) -> None:
    seed = ctx.seed + 1000
    obs1, _ = _reset_obs(ctx, seed, "first")
    action = ctx.env.action_space.sample()
    try:
        for _ in range(3):
            ctx.call("step", ctx.env.step, action)
    except EnvCallError:
        pass  # api.step reports a step that raises; the second reset still follows the first
    obs2, _ = _reset_obs(ctx, seed, "second")
    if not same(obs1, obs2):
        keys = [k for k in obs1 if not same(obs1[k], obs2.get(k))] if isinstance(obs1, dict) else []
        key = keys[0] if keys else None
        a, b = (obs1[key], obs2[key]) if key else (obs1, obs2)
        out.fail(
            f"reset(seed={seed}) returned {('obs[' + repr(key) + '] = ') if key else ''}{fmt(a)}"
            f", then {fmt(b)}: draw every random number from self.np_random (seeded by "
            "super().reset(seed=seed))"
        )


@register("seed.rollout", "error", "the same seed and actions reproduce the rollout")
def check_seed_rollout(ctx: Context, out: Outcome) -> None:
    ro = rollout(ctx)
    steps = ro.steps
    if not steps:
        raise SkipCheckError(f"the rollout has no steps ({ro.stopped})")
    replay = steps[: min(len(steps), 100)]
    obs, _ = _reset_obs(ctx, ctx.seed, "replay")
    if not same(obs, ro.episodes[0].reset_obs):
        out.fail(replay_text(ctx.seed, "obs", obs, ro.episodes[0].reset_obs), "reset")
        return
    for s in replay:
        ret = ctx.call(f"step {s.t}", ctx.env.step, s.action)
        if not isinstance(ret, tuple) or len(ret) != 5:
            raise SkipCheckError("step does not return five values (see api.step)")
        obs, reward, terminated, truncated, _ = ret
        fields = [
            ("obs", copy_obs(obs), s.obs),
            ("reward", reward, s.reward),
            ("terminated", terminated, s.terminated),
            ("truncated", truncated, s.truncated),
        ]
        for name, now, then in fields:
            equal = same_value(now, then) if name == "reward" else same(now, then)
            if not equal:
                where = f"step {s.t} (action {fmt(s.action)})"
                out.fail(replay_text(ctx.seed, name, now, then, where), f"step {s.t}")
                return
        if (bool(terminated) or bool(truncated)) and s is not replay[-1]:
            ctx.call(f"reset after step {s.t}", ctx.env.reset)


@register("seed.goal_varies", "warning", "different seeds give different desired goals")
def check_seed_goal_varies(ctx: Context, out: Outcome) -> None:
    goal_space(ctx)
    goals = []
    for k in range(5):
        obs, _ = _reset_obs(ctx, ctx.seed + 2000 + k, "goal")
        if isinstance(obs, Mapping) and "desired_goal" in obs:
            goals.append(obs["desired_goal"])
    if len(goals) == 5 and all(same(g, goals[0]) for g in goals):
        out.fail(
            f"five seeds all gave desired_goal = {fmt(goals[0])}: the goal is not drawn from "
            "self.np_random, or is fixed (HER needs a goal distribution)"
        )
