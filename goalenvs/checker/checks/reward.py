"""Checks of ``compute_reward``: batched over any leading shape, equal to what step
pays, deterministic, and paying success at the goal."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from goalenvs.checker.context import Context, EnvCallError, SkipCheckError
from goalenvs.checker.probe import (
    ATOL,
    BATCH_SIZES,
    LEADING_SHAPE,
    RTOL,
    BatchEval,
    call_goal,
    copy_info,
    disagree,
    evaluate_batches,
    fmt,
    goal_pairs,
    goal_sampler,
    goal_steps,
    info_array,
    method,
    mismatch,
    pair_text,
    perturbed,
    same,
    same_value,
    stack_infos,
    stack_pairs,
    values_close,
)
from goalenvs.checker.registry import Outcome, register
from goalenvs.checker.seek import goal_probe


@register("reward.present", "error", "compute_reward is defined and reachable through wrappers")
def check_reward_present(ctx: Context, out: Outcome) -> None:
    if ctx.goal_method("compute_reward") is None:
        where = type(ctx.env.unwrapped).__name__
        out.fail(f"{where} has no callable compute_reward(achieved_goal, desired_goal, info)")


@register("reward.signature", "error", "compute_reward takes (achieved_goal, desired_goal, info)")
def check_reward_signature(ctx: Context, out: Outcome) -> None:
    fn = ctx.goal_method("compute_reward")
    if fn is None:
        raise SkipCheckError("the env has no compute_reward (see reward.present)")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise SkipCheckError("compute_reward's signature cannot be inspected") from None
    try:
        sig.bind(np.zeros(1), np.zeros(1), {})
    except TypeError:
        out.fail(
            f"compute_reward{sig} cannot be called as compute_reward(achieved_goal, "
            "desired_goal, info), the call every HER buffer makes"
        )


def compare_batches(
    ctx: Context, out: Outcome, name: str, shapes: Sequence[tuple[int, ...]], kind: str
) -> None:
    """Fails where a batched call of goal method ``name`` differs from its single calls."""
    noun = {"reward": "reward", "bool": name.removeprefix("compute_")}[kind]
    unvectorized_reported = False
    for ev in evaluate_batches(ctx, name):
        if ev.shape not in shapes:
            continue
        where = f"batch of shape {ev.shape}"
        if ev.error is not None:
            out.fail(f"{ev.error} (info as {ev.info_form})", where)
            continue
        result = np.asarray(ev.result)
        n = len(ev.pairs)
        over = "leading dimensions" if len(ev.shape) > 1 else "a batch"
        if kind == "bool" and result.ndim == 0:
            # One bool for the whole batch (Fetch's constant False) broadcasts: fine when
            # every per-element call agrees with it.
            constant = bool(result)
            singles = [bool(np.asarray(x).reshape(-1)[0]) for x in ev.singles]
            if all(x == constant for x in singles) or unvectorized_reported:
                continue
            unvectorized_reported = True
            i = next(i for i, x in enumerate(singles) if x != constant)
            out.fail(
                f"{name} returned one value ({constant}) for {n} goal pairs, but the call for "
                f"element {i} alone returns {singles[i]} for {pair_text(ev.pairs[i])}: it is "
                f"not vectorized over {over}",
                where,
            )
            continue
        if result.size != n:
            if unvectorized_reported:
                continue  # the same defect again, in a bigger batch
            unvectorized_reported = True
            out.fail(
                f"{name} returned {result.size} value(s) (shape {result.shape}) for {n} goal "
                f"pairs: it is not vectorized over {over}"
                f" (first values {fmt(result.reshape(-1)[:4])})",
                where,
            )
            continue
        flat = result.reshape(-1)
        wide = next((i for i, x in enumerate(ev.singles) if np.size(x) != 1), n)
        values = [np.asarray(x).reshape(-1)[0] for x in ev.singles[:wide]]
        bad = np.flatnonzero(disagree(kind, flat[:wide], values))
        if bad.size:
            i = int(bad[0])
            index = ", ".join(map(str, np.unravel_index(i, ev.shape)))
            out.fail(
                f"batch {noun}[{index}] = {fmt(flat[i])}, single {noun} = {fmt(values[i])} for "
                f"{pair_text(ev.pairs[i])}",
                where,
            )
        elif wide < n:
            out.fail(f"{name} of one pair returned shape {np.shape(ev.singles[wide])}", where)


@register("reward.batch", "error", "batched compute_reward equals per-element calls")
def check_reward_batch(ctx: Context, out: Outcome) -> None:
    compare_batches(ctx, out, "compute_reward", [(n,) for n in BATCH_SIZES], "reward")


@register("reward.leading_dims", "error", "compute_reward handles extra leading dimensions")
def check_reward_leading(ctx: Context, out: Outcome) -> None:
    compare_batches(ctx, out, "compute_reward", [LEADING_SHAPE], "reward")


def _working_batches(ctx: Context, name: str) -> list[BatchEval]:
    evals = [ev for ev in evaluate_batches(ctx, name) if ev.error is None]
    if not evals:
        raise SkipCheckError(f"no batched {name} call succeeded (see the batch check)")
    return evals


def _first_wrong_result(ctx: Context, out: Outcome, problem: Callable[[Any], str | None]) -> None:
    """A finding for the first working batch of compute_reward whose result ``problem``
    describes (it returns None for a good one)."""
    for ev in _working_batches(ctx, "compute_reward"):
        message = problem(ev.result)
        if message is not None:
            out.fail(message, f"batch of shape {ev.shape}")
            return


@register("reward.type", "error", "compute_reward returns a numpy array for a batch")
def check_reward_type(ctx: Context, out: Outcome) -> None:
    def problem(r: object) -> str | None:
        if isinstance(r, np.ndarray) and r.dtype.kind in "fiu":
            return None
        kind = type(r).__name__ + (f" of dtype {r.dtype}" if isinstance(r, np.ndarray) else "")
        return (
            f"compute_reward returned a {kind} ({fmt(r)}), expected a real numpy array: "
            "buffers index and cast the result"
        )

    _first_wrong_result(ctx, out, problem)


@register("reward.shape", "error", "compute_reward's result has the goals' leading shape")
def check_reward_shape(ctx: Context, out: Outcome) -> None:
    wrong = [
        ev for ev in _working_batches(ctx, "compute_reward") if np.shape(ev.result) != ev.shape
    ]
    if wrong:
        others = [ev.shape for ev in wrong[1:]]
        out.fail(
            f"compute_reward returned shape {np.shape(wrong[0].result)} for a batch of shape "
            f"{wrong[0].shape}, expected {wrong[0].shape} (a (B, 1) reward broadcasts against "
            "(B,) targets into a (B, B) loss)" + (f"; also wrong for {others}" if others else ""),
            f"batch of shape {wrong[0].shape}",
        )
    s, fn = goal_steps(ctx)[0], method(ctx, "compute_reward")
    ag, dg = s.obs["achieved_goal"], s.obs["desired_goal"]
    shape = np.shape(call_goal(ctx, "compute_reward(one pair)", fn, ag, dg, s.info))
    if shape != ():
        out.fail(f"compute_reward of one pair returned shape {shape}, expected ()", f"step {s.t}")


@register("reward.dtype", "warning", "compute_reward returns float32 (the goal-env convention)")
def check_reward_dtype(ctx: Context, out: Outcome) -> None:
    def problem(r: object) -> str | None:
        dtype = np.asarray(r).dtype
        if dtype == np.float32:
            return None
        return (
            f"compute_reward returned dtype {dtype}; buffers store float32 rewards, so "
            "every sample pays a cast (and float64 rewards upcast float32 losses)"
        )

    _first_wrong_result(ctx, out, problem)


@register("reward.finite", "error", "compute_reward is finite for goals from the goal space")
def check_reward_finite(ctx: Context, out: Outcome) -> None:
    for ev in evaluate_batches(ctx, "compute_reward"):
        for p, single in zip(ev.pairs, ev.singles, strict=True):
            value = np.asarray(single, dtype=float)
            if not np.all(np.isfinite(value)):
                out.fail(f"compute_reward = {fmt(value)} for {pair_text(p)}")
                return


@register(
    "reward.info_forms",
    "error",
    "compute_reward accepts every info form HER buffers pass (lists, arrays, dicts, defaults)",
)
def check_reward_info_forms(ctx: Context, out: Outcome) -> None:
    fn = method(ctx, "compute_reward")
    pairs = goal_pairs(ctx, 16)
    singles = [
        call_goal(ctx, "compute_reward(one pair)", fn, p.achieved, p.desired, p.info) for p in pairs
    ]
    ag, dg = stack_pairs(pairs, (16,))
    infos = [p.info for p in pairs]
    # (form, info, whether the result must equal the singles, i.e. the infos are all there)
    forms = [
        ("a list of the step info dicts (SB3, copy_info_dict=True)", infos, True),
        ("an object array of the step info dicts", info_array(pairs, (16,)), True),
        ("a dict of per-key arrays (goalenvs, info_keys=...)", stack_infos(infos, "fiub"), True),
        ("[{}] * B (SB3's default)", [{}] * 16, False),
        ("{} (goalenvs' default, no info_keys)", {}, False),
        ("None", None, False),
    ]
    working, failing, problems = [], [], []
    for form, info, exact in forms:
        try:
            result = call_goal(ctx, "compute_reward(batch)", fn, ag, dg, info)
        except EnvCallError as error:
            failing.append(form)
            problems.append(f"with info as {form}: {type(error.error).__name__}: {error.error}")
            continue
        working.append(form)
        if not exact:
            continue  # results without the infos may differ; reward.info_keys reports that
        flat = np.asarray(result).reshape(-1)
        if flat.size != len(pairs):
            continue  # reward.batch reports the shape
        for i, (p, single) in enumerate(zip(pairs, singles, strict=True)):
            if not values_close(flat[i], np.asarray(single, float).reshape(-1)[0]):
                problems.append(
                    f"with info as {form}: batch reward[{i}] = {fmt(flat[i])}, single reward = "
                    f"{fmt(single)} with info {fmt(p.info)} for {pair_text(p)}"
                )
                break
    if problems and working:
        # The summary first: which forms work, and the buffer setting that follows.
        needs = ""
        if all(f in failing for f, _, exact in forms if not exact):
            keys = tuple(needed_keys_or_none(ctx))
            needs = (
                ". It needs the step infos: stable-baselines3 HerReplayBuffer(copy_info_dict="
                f"True), goalenvs HerReplayBuffer(info_keys={keys!r})"
            )
        out.fail(f"works with info as: {'; '.join(working)}{needs}")
    for problem in problems:
        out.fail(problem)


def needed_info_keys(ctx: Context) -> tuple[list[str], tuple | None]:
    """The info keys compute_reward reads, and one example (change, with, without, pair)."""
    return ctx.cached("needed_info_keys", _find_needed_info_keys)


def _find_needed_info_keys(ctx: Context) -> tuple[list[str], tuple | None]:
    fn = method(ctx, "compute_reward")
    pairs = [p for p in goal_pairs(ctx, 32) if p.info]
    keys = sorted({k for p in pairs for k in p.info})
    needed = []
    example: tuple | None = None
    for key in keys:
        for p in pairs:
            if key not in p.info:
                continue
            full = call_goal(ctx, "compute_reward(one pair)", fn, p.achieved, p.desired, p.info)
            again = call_goal(ctx, "compute_reward(one pair)", fn, p.achieved, p.desired, p.info)
            if not same_value(full, again):
                return [], None  # a random reward changes with anything (reward.deterministic)
            # Dropping the key can give the same reward when its value equals the default
            # (no collision this step), so a changed value is tried too.
            variants = [{k: v for k, v in p.info.items() if k != key}]
            changed = perturbed(p.info[key])
            if changed is not None:
                variants.append({**p.info, key: changed})
            for variant in variants:
                try:
                    other = call_goal(
                        ctx, "compute_reward(one pair)", fn, p.achieved, p.desired, variant
                    )
                except EnvCallError as error:
                    other = f"{type(error.error).__name__}: {error.error}"
                if not same_value(full, other):
                    break
            else:
                continue
            needed.append(key)
            if example is None:
                change = (
                    f"with info[{key!r}] = {fmt(variant[key])}"
                    if key in variant
                    else f"without info[{key!r}]"
                )
                example = (change, full, other, p)
            break
    return needed, example


@register(
    "reward.info_keys",
    "info",
    "which info keys compute_reward reads (the HER buffer must then store them)",
)
def check_reward_info_keys(ctx: Context, out: Outcome) -> None:
    needed, example = needed_info_keys(ctx)
    if needed and example is not None:
        change, full, other, p = example
        out.fail(
            f"compute_reward reads info keys {needed}: {change} it gives {fmt(other)} instead "
            f"of {fmt(full)} for {pair_text(p)}. HER needs these stored: stable-baselines3 "
            "HerReplayBuffer(copy_info_dict=True); goalenvs "
            f"HerReplayBuffer(info_keys={tuple(needed)!r})"
        )


@register("reward.step_match", "error", "every step's reward equals compute_reward of its goals")
def check_rewardstep_match(ctx: Context, out: Outcome) -> None:
    step_match(ctx, out, "compute_reward", "reward")
    if not out.failed:
        _probe_reward_match(ctx, out)


def _probe_reward_match(ctx: Context, out: Outcome) -> None:
    """The same comparison on the goal-seeking probe's steps, which reach the goal where
    a random rollout does not (a reward that disagrees only there)."""
    fn = method(ctx, "compute_reward")
    samples = goal_probe(ctx).goal_samples()

    def computed() -> list[float]:
        values = []
        for s in samples:
            ag, dg = s.obs["achieved_goal"], s.obs["desired_goal"]
            value = fn(np.array(ag, copy=True), np.array(dg, copy=True), copy_info(s.info))
            values.append(float(np.asarray(value, np.float64).reshape(-1)[0]))
        return values

    try:
        values = ctx.call("compute_reward of every goal-probe step", computed)
    except (EnvCallError, TypeError, ValueError, IndexError):
        return  # a compute_reward that cannot be read is the other reward checks' finding
    bad = disagree("reward", [s.reward for s in samples], values)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        s, value = samples[k], values[k]
        lag = (
            "; achieved_goal answers each action a step late (goal.achieved_current), while "
            "the reward answers it in its own step"
            if goal_probe(ctx).lags()
            else ""
        )
        ag, dg = s.obs["achieved_goal"], s.obs["desired_goal"]
        out.fail(
            f"{mismatch('reward', s.reward, 'compute_reward', (ag, dg, s.info), value)} "
            f"({int(bad.sum())} of {len(samples)} goal-probe steps disagree; the rollout's "
            f"steps agree, so the two part near the goal){lag}",
            f"goal-probe step {s.t}",
        )


def step_match(ctx: Context, out: Outcome, name: str, attr: str) -> None:
    """Fails where goal method ``name`` disagrees with what step returned as ``attr``."""
    fn = method(ctx, name)
    steps = goal_steps(ctx)
    computed = []
    for s in steps:
        ag, dg = s.obs["achieved_goal"], s.obs["desired_goal"]
        value = call_goal(ctx, f"step {s.t}: {name}(step goals, step info)", fn, ag, dg, s.info)
        arr = np.asarray(value).reshape(-1)
        if arr.size != 1:
            out.fail(f"{name} of one pair returned shape {np.shape(value)}", f"step {s.t}")
            return
        computed.append(arr[0])
    bad = disagree(attr, [getattr(s, attr) for s in steps], computed)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        s = steps[k]
        ag, dg = s.obs["achieved_goal"], s.obs["desired_goal"]
        out.fail(
            f"{mismatch(attr, getattr(s, attr), name, (ag, dg, s.info), computed[k])} "
            f"({int(bad.sum())} of {len(steps)} steps disagree)",
            f"step {s.t}",
        )


@register("reward.deterministic", "error", "compute_reward is a pure function of its inputs")
def check_reward_deterministic(ctx: Context, out: Outcome) -> None:
    fn = method(ctx, "compute_reward")
    pairs = goal_pairs(ctx, 8)

    def values() -> list:
        return [
            call_goal(ctx, "compute_reward(one pair)", fn, p.achieved, p.desired, p.info)
            for p in pairs
        ]

    first, second = values(), values()
    later = [("called again", second)]
    try:
        ctx.call("reset(seed)", ctx.env.reset, seed=ctx.seed + 1)
        ctx.call("step", ctx.env.step, ctx.env.action_space.sample())
        later.append(("after a reset and a step", values()))
    except EnvCallError:
        pass  # a broken reset or step is api.reset's and api.step's finding
    for i, p in enumerate(pairs):
        for label, other in ((label, results[i]) for label, results in later):
            if not same_value(first[i], other):
                out.fail(
                    f"compute_reward = {fmt(first[i])}, then {fmt(other)} when {label}, for "
                    f"{pair_text(p)}: it is random or reads env state, so relabeled rewards "
                    "are not the rewards of the relabeled goals"
                )
                return


@register("reward.no_mutation", "error", "compute_reward leaves its inputs unchanged")
def check_reward_no_mutation(ctx: Context, out: Outcome) -> None:
    fn = method(ctx, "compute_reward")
    pairs = goal_pairs(ctx, 8)
    ag, dg = stack_pairs(pairs, (8,))
    infos = [copy_info(p.info) for p in pairs]
    calls = [
        ("one pair", pairs[0].achieved.copy(), pairs[0].desired.copy(), infos[0]),
        ("batch of 8", ag.copy(), dg.copy(), infos),
        ("batch of 8, info None", ag.copy(), dg.copy(), None),
    ]
    for label, a, d, info in calls:
        before = (a.copy(), d.copy(), copy_info(info))
        try:
            ctx.call(f"compute_reward({label})", fn, a, d, info)
        except EnvCallError:
            continue  # an info form it cannot take is reward.info_forms' finding
        for name, now, then in (("achieved_goal", a, before[0]), ("desired_goal", d, before[1])):
            if not same(now, then):
                out.fail(
                    f"compute_reward changed its {name} argument from {fmt(then)} to "
                    f"{fmt(now)}: buffers pass views of stored goals",
                    label,
                )
        if not same(info, before[2]):
            out.fail(
                f"compute_reward changed its info argument from {fmt(before[2])} to {fmt(info)}",
                label,
            )


def _success_reward_goals(ctx: Context) -> list[tuple[Any, str]]:
    steps = goal_steps(ctx)
    sp = goal_sampler(ctx)
    goals = [(np.asarray(sp.sample()), "drawn from the goal space") for _ in range(4)]
    picks = ctx.rng.choice(len(steps), size=min(6, len(steps)), replace=False)
    for j in picks:
        s = steps[int(j)]
        goals.append((s.obs["achieved_goal"], f"achieved goal of step {s.t}"))
    # The current episode's desired goal: an env reading its own goal instead of the
    # argument pays the success reward for this goal only.
    last = steps[-1]
    goals.append((last.obs["desired_goal"], f"desired goal of step {last.t}"))
    return goals


@register(
    "reward.success_at_goal",
    "error",
    "compute_reward(g, g) pays the best reward, the same for every goal g",
)
def check_reward_success(ctx: Context, out: Outcome) -> None:
    fn = method(ctx, "compute_reward")
    best_step = max(goal_steps(ctx), key=lambda s: s.reward)
    # Every g gets the best step's info, so that info-dependent terms (a collision
    # penalty) are the same for all goals and for the step they are compared with.
    at_goal = []
    for g, origin in _success_reward_goals(ctx):
        value = call_goal(ctx, "compute_reward(g, g)", fn, g, g, best_step.info)
        at_goal.append((float(np.asarray(value, float).reshape(-1)[0]), g, origin))
    low = min(at_goal, key=lambda x: x[0])
    high = max(at_goal, key=lambda x: x[0])
    if low[0] < best_step.reward - ATOL - RTOL * abs(best_step.reward):
        out.fail(
            f"compute_reward(g, g) = {fmt(low[0])} for g={fmt(low[1])} ({low[2]}), less than the "
            f"reward {fmt(best_step.reward)} paid at step {best_step.t} for achieved_goal="
            f"{fmt(best_step.obs['achieved_goal'])}, desired_goal="
            f"{fmt(best_step.obs['desired_goal'])} (same info): reaching the goal must pay the "
            "best reward"
        )
    if not values_close(low[0], high[0]):
        out.fail(
            f"compute_reward(g, g) = {fmt(low[0])} for g={fmt(low[1])} ({low[2]}) but "
            f"{fmt(high[0])} for g={fmt(high[1])} ({high[2]}): the success reward depends on "
            "which goal, so compute_reward likely reads a goal other than its argument"
        )


@register("reward.goal_dependent", "error", "compute_reward depends on the goals")
def check_reward_goal_dependent(ctx: Context, out: Outcome) -> None:
    values: list[float] = []
    for ev in evaluate_batches(ctx, "compute_reward"):
        values.extend(float(np.asarray(v, float).reshape(-1)[0]) for v in ev.singles)
    if values and np.ptp(values) == 0:
        out.fail(
            f"compute_reward = {fmt(values[0])} for all {len(values)} goal pairs tried, goal == "
            "goal included: relabeling cannot teach anything"
        )


def needed_keys_or_none(ctx: Context) -> list[str]:
    """The info keys compute_reward reads, or [] when it cannot be called."""
    try:
        return needed_info_keys(ctx)[0]
    except (EnvCallError, SkipCheckError):
        return []  # a compute_reward that fails is the reward checks' finding, not the buffer's
