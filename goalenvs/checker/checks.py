"""Every check of ``goalenvs check``, in the order they run and are reported.

Each check is a function ``(ctx, out)`` registered with a stable id, a severity and a
title; ``docs/checks.md`` explains each id. Most checks read one shared random-action
rollout (:func:`goalenvs.checker.probe.rollout`), recorded once with copies of
everything the env returned.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs.checker.probe import (
    ATOL,
    BATCH_SIZES,
    GOAL_KEYS,
    LEADING_SHAPE,
    RTOL,
    BatchEval,
    Pair,
    Rollout,
    StepRecord,
    call_goal,
    copy_info,
    copy_obs,
    evaluate_batches,
    fmt,
    goal_pairs,
    goal_sampler,
    goal_space,
    goal_steps,
    info_array,
    is_bool_like,
    method,
    pair_text,
    perturbed,
    rollout,
    same,
    same_value,
    stack_pairs,
    values_close,
)
from goalenvs.checker.runner import (
    Context,
    EnvCallError,
    Outcome,
    SkipCheckError,
    register,
)

# --------------------------------------------------------------------------- spaces


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


# --------------------------------------------------------------------------- API


@register("api.reset", "error", "reset(seed=, options=) returns (obs, info)")
def check_reset(ctx: Context, out: Outcome) -> None:
    try:
        params = inspect.signature(ctx.env.unwrapped.reset).parameters
    except (TypeError, ValueError):
        params = {}
    has_var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
    for name in ("seed", "options"):
        if params and name not in params and not has_var_kw:
            out.fail(f"reset has no '{name}' keyword argument: signature {list(params)}")
    _report_problems(out, rollout(ctx).reset_problems, "resets")


@register("api.step", "error", "step returns (obs, float reward, bool, bool, dict) without raising")
def check_step(ctx: Context, out: Outcome) -> None:
    ro = rollout(ctx)
    if not ro.episodes:
        raise SkipCheckError(f"no successful reset ({ro.stopped})")
    _report_problems(out, ro.step_problems, "steps")


def _report_problems(out: Outcome, problems: list[tuple[str, str]], unit: str) -> None:
    """One finding per kind of problem (its first words), with how often it recurred."""
    first: dict[str, tuple[str, str]] = {}
    counts: dict[str, int] = {}
    for where, message in problems:
        kind = " ".join(message.split(" ")[:2])
        first.setdefault(kind, (where, message))
        counts[kind] = counts.get(kind, 0) + 1
    for kind, (where, message) in first.items():
        again = counts[kind] - 1
        out.fail(message + (f" (and {again} more {unit} like it)" if again else ""), where)


def _observations(ro: Rollout) -> list[tuple[str, Any, Any]]:
    """(where, copy, returned object) of every observation of the rollout."""
    items = []
    for i, episode in enumerate(ro.episodes):
        items.append((f"reset of episode {i}", episode.reset_obs, episode.reset_obs_ref))
        items.extend((f"step {s.t}", s.obs, s.obs_ref) for s in episode.steps)
    return items


@register("api.obs_in_space", "error", "every observation (goals included) lies in its space")
def check_obs_in_space(ctx: Context, out: Outcome) -> None:
    space = goal_space(ctx)
    reported: set[str] = set()
    for where, obs, _ in _observations(rollout(ctx)):
        if not isinstance(obs, Mapping):
            out.fail(f"observation is a {type(obs).__name__}, expected a dict", where)
            continue
        missing = [k for k in space.spaces if k not in obs]
        if missing:
            out.fail(f"observation lacks keys {missing}", where)
        for key, sub in space.spaces.items():
            if key not in obs or key in reported:
                continue
            value = np.asarray(obs[key])
            try:
                inside = value.shape == sub.shape and sub.contains(value.astype(sub.dtype))
            except (TypeError, ValueError):
                inside = False
            if not inside:
                reported.add(key)
                bounds = (
                    f" bounds [{fmt(sub.low)}, {fmt(sub.high)}]"
                    if isinstance(sub, spaces.Box)
                    else ""
                )
                out.fail(
                    f"obs[{key!r}] = {fmt(value)} (shape {value.shape}) is outside {sub}{bounds}",
                    where,
                )


@register("api.obs_dtype", "error", "every observation array has its space's dtype")
def check_obs_dtype(ctx: Context, out: Outcome) -> None:
    space = goal_space(ctx)
    reported: set[str] = set()
    for where, obs, _ in _observations(rollout(ctx)):
        if not isinstance(obs, Mapping):
            continue
        for key, sub in space.spaces.items():
            if key in obs and key not in reported and sub.dtype is not None:
                dtype = np.asarray(obs[key]).dtype
                if dtype != sub.dtype:
                    reported.add(key)
                    out.fail(
                        f"obs[{key!r}] has dtype {dtype} but its space has dtype {sub.dtype} "
                        "(buffers and networks cast, or reject it)",
                        where,
                    )


@register(
    "api.obs_fresh",
    "error",
    "returned observations are fresh arrays, not views of env state changed by later steps",
)
def check_obs_fresh(ctx: Context, out: Outcome) -> None:
    goal_space(ctx)
    ro = rollout(ctx)
    reported: set[str] = set()
    for where, obs, ref in _observations(ro):
        if not isinstance(ref, Mapping):
            continue
        for key, value in ref.items():
            if key in reported or key not in obs:
                continue
            now = np.asarray(value)
            if not same(now, obs[key]):
                reported.add(key)
                out.fail(
                    f"obs[{key!r}] returned as {fmt(obs[key])} later read {fmt(now)}: the env "
                    "returned a view of its state and changed it in place (a buffer storing "
                    "the reference stores the wrong value); return a copy",
                    where,
                )


# --------------------------------------------------------------------------- compute_reward


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


def _compare_batches(
    ctx: Context, out: Outcome, name: str, shapes: list[tuple[int, ...]], kind: str
) -> None:
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
        for i, (p, single) in enumerate(zip(ev.pairs, ev.singles, strict=True)):
            single_value = np.asarray(single).reshape(-1)
            if single_value.size != 1:
                out.fail(f"{name} of one pair returned shape {np.shape(single)}", where)
                break
            if kind == "reward":
                agree = values_close(flat[i], single_value[0])
            else:
                agree = bool(flat[i]) == bool(single_value[0])
            if not agree:
                index = np.unravel_index(i, ev.shape)
                out.fail(
                    f"batch {noun}[{', '.join(map(str, index))}] = {fmt(flat[i])}, single {noun} = "
                    f"{fmt(single_value[0])} for {pair_text(p)}",
                    where,
                )
                break


@register("reward.batch", "error", "batched compute_reward equals per-element calls")
def check_reward_batch(ctx: Context, out: Outcome) -> None:
    _compare_batches(ctx, out, "compute_reward", [(n,) for n in BATCH_SIZES], "reward")


@register("reward.leading_dims", "error", "compute_reward handles extra leading dimensions")
def check_reward_leading(ctx: Context, out: Outcome) -> None:
    _compare_batches(ctx, out, "compute_reward", [LEADING_SHAPE], "reward")


def _working_batches(ctx: Context, name: str) -> list[BatchEval]:
    evals = [ev for ev in evaluate_batches(ctx, name) if ev.error is None]
    if not evals:
        raise SkipCheckError(f"no batched {name} call succeeded (see the batch check)")
    return evals


@register("reward.type", "error", "compute_reward returns a numpy array for a batch")
def check_reward_type(ctx: Context, out: Outcome) -> None:
    for ev in _working_batches(ctx, "compute_reward"):
        r = ev.result
        if not isinstance(r, np.ndarray) or r.dtype.kind not in "fiu":
            kind = type(r).__name__ + (f" of dtype {r.dtype}" if isinstance(r, np.ndarray) else "")
            out.fail(
                f"compute_reward returned a {kind} ({fmt(r)}), expected a real numpy array: "
                "buffers index and cast the result",
                f"batch of shape {ev.shape}",
            )
            return


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
    steps = goal_steps(ctx)
    fn = method(ctx, "compute_reward")
    s = steps[0]
    one = call_goal(
        ctx, "compute_reward(one pair)", fn, s.obs["achieved_goal"], s.obs["desired_goal"], s.info
    )
    if np.shape(one) != ():
        out.fail(
            f"compute_reward of one pair returned shape {np.shape(one)}, expected ()", f"step {s.t}"
        )


@register("reward.dtype", "warning", "compute_reward returns float32 (the goal-env convention)")
def check_reward_dtype(ctx: Context, out: Outcome) -> None:
    for ev in _working_batches(ctx, "compute_reward"):
        dtype = np.asarray(ev.result).dtype
        if dtype != np.float32:
            out.fail(
                f"compute_reward returned dtype {dtype}; buffers store float32 rewards, so "
                "every sample pays a cast (and float64 rewards upcast float32 losses)",
                f"batch of shape {ev.shape}",
            )
            return


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
    # (form, info, whether the result must equal the singles, i.e. the infos are all there)
    forms = [
        ("a list of the step info dicts (SB3, copy_info_dict=True)", [p.info for p in pairs], True),
        ("an object array of the step info dicts", info_array(pairs, (16,)), True),
        ("a dict of per-key arrays (goalenvs, info_keys=...)", _stacked_infos(pairs), True),
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
            keys = tuple(_needed_keys_or_none(ctx))
            needs = (
                ". It needs the step infos: stable-baselines3 HerReplayBuffer(copy_info_dict="
                f"True), goalenvs HerReplayBuffer(info_keys={keys!r})"
            )
        out.fail(f"works with info as: {'; '.join(working)}{needs}")
    for problem in problems:
        out.fail(problem)


def _stacked_infos(pairs: list[Pair]) -> dict[str, np.ndarray]:
    """The step infos as one dict of per-key arrays, as goalenvs' buffer stores them.

    Only keys every info holds, with numeric or bool values of one shape, can be stacked.
    """
    keys = set.intersection(*(set(p.info) for p in pairs)) if pairs else set()
    stacked = {}
    for key in sorted(keys, key=str):
        try:
            values = np.stack([np.asarray(p.info[key]) for p in pairs])
        except (ValueError, TypeError):
            continue
        if values.dtype.kind in "fiub":
            stacked[key] = values
    return stacked


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
    if needed:
        change, full, other, p = example
        out.fail(
            f"compute_reward reads info keys {needed}: {change} it gives {fmt(other)} instead "
            f"of {fmt(full)} for {pair_text(p)}. HER needs these stored: stable-baselines3 "
            "HerReplayBuffer(copy_info_dict=True); goalenvs "
            f"HerReplayBuffer(info_keys={tuple(needed)!r})"
        )


@register("reward.step_match", "error", "every step's reward equals compute_reward of its goals")
def check_reward_step_match(ctx: Context, out: Outcome) -> None:
    _step_match(ctx, out, "compute_reward", "reward")


def _step_match(ctx: Context, out: Outcome, name: str, attr: str) -> None:
    fn = method(ctx, name)
    mismatches = 0
    first = None
    for s in goal_steps(ctx):
        value = call_goal(
            ctx,
            f"step {s.t}: {name}(step goals, step info)",
            fn,
            s.obs["achieved_goal"],
            s.obs["desired_goal"],
            s.info,
        )
        got = getattr(s, attr)
        arr = np.asarray(value).reshape(-1)
        if arr.size != 1:
            out.fail(f"{name} of one pair returned shape {np.shape(value)}", f"step {s.t}")
            return
        if attr == "reward":
            agree = values_close(got, float(arr[0]))
        elif attr == "terminated":
            agree = got == bool(arr[0])
        else:  # goal-dependent truncation must end the episode; a time limit may add more
            agree = got or not bool(arr[0])
        if not agree:
            mismatches += 1
            first = first or (s, got, arr[0])
    if first:
        s, got, computed = first
        out.fail(
            f"step returned {attr} = {fmt(got)} but {name}(achieved_goal="
            f"{fmt(s.obs['achieved_goal'])}, desired_goal={fmt(s.obs['desired_goal'])}, "
            f"info={fmt(s.info)}) = {fmt(computed)}"
            f" ({mismatches} of {len(goal_steps(ctx))} steps disagree)",
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
    values = []
    for ev in evaluate_batches(ctx, "compute_reward"):
        values.extend(float(np.asarray(v, float).reshape(-1)[0]) for v in ev.singles)
    if values and np.ptp(values) == 0:
        out.fail(
            f"compute_reward = {fmt(values[0])} for all {len(values)} goal pairs tried, goal == "
            "goal included: relabeling cannot teach anything"
        )


# --------------------------------------------------------------------------- terminated / truncated


@register("terminated.batch", "error", "batched compute_terminated equals per-element calls")
def check_terminated_batch(ctx: Context, out: Outcome) -> None:
    _bool_batch(ctx, out, "compute_terminated")


@register("terminated.step_match", "error", "every step's terminated equals compute_terminated")
def check_terminated_step(ctx: Context, out: Outcome) -> None:
    _step_match(ctx, out, "compute_terminated", "terminated")


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
    _step_match(ctx, out, "compute_truncated", "truncated")


def _bool_batch(ctx: Context, out: Outcome, name: str) -> None:
    shapes = [(n,) for n in BATCH_SIZES] + [LEADING_SHAPE]
    _compare_batches(ctx, out, name, shapes, "bool")
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


# --------------------------------------------------------------------------- is_success

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


@register("success.present", "warning", "info['is_success'] is set on every step")
def check_success_present(ctx: Context, out: Outcome) -> None:
    # Only steps: HER buffers and evaluation read the step infos, and the reference envs
    # (gymnasium-robotics' Fetch) return an empty info from reset.
    for where, info, s in _infos(ctx):
        if s is not None and "is_success" not in info:
            others = [k for k in info if _SUCCESS_LIKE.search(str(k))]
            hint = (
                f"; the env reports {others} instead: rename it 'is_success', the key HER "
                "evaluation and SB3 read"
                if others
                else ""
            )
            out.fail(f"info has no 'is_success' (keys {sorted(map(str, info))}){hint}", where)
            return


@register("success.bool", "warning", "info['is_success'] is a bool")
def check_success_bool(ctx: Context, out: Outcome) -> None:
    for where, info, _ in _infos(ctx):
        if "is_success" in info and not is_bool_like(info["is_success"]):
            value = info["is_success"]
            out.fail(
                f"info['is_success'] = {fmt(value)} of type {type(value).__name__}, "
                "expected a bool",
                where,
            )
            return


def _success_steps(ctx: Context) -> list[tuple[StepRecord, bool]]:
    steps = [s for _, _, s in _infos(ctx) if s is not None and "is_success" in s.info]
    if not all(is_bool_like(s.info["is_success"]) for s in steps):
        raise SkipCheckError("is_success is not bool-like (see success.bool)")
    try:
        flagged = [(s, bool(np.asarray(s.info["is_success"]).reshape(-1)[0])) for s in steps]
    except (TypeError, ValueError, IndexError):
        raise SkipCheckError("is_success is not bool-like (see success.bool)") from None
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


@register(
    "success.consistent",
    "error",
    "is_success agrees with the reward compute_reward pays",
)
def check_success_consistent(ctx: Context, out: Outcome) -> None:
    flagged = _success_steps(ctx)
    wins = [s for s, ok in flagged if ok]
    losses = [s for s, ok in flagged if not ok]
    compared = False
    fn = ctx.goal_method("compute_reward")
    goals_ok = isinstance(flagged[0][0].obs, Mapping)
    try:
        if losses and fn is not None and goals_ok:
            # Even without a success in the rollout: an unsuccessful step must not be
            # paid what compute_reward pays at the goal.
            compared = True
            for s in losses[:50]:
                at_goal = _reward_at_goal(ctx, fn, s)
                if s.reward >= at_goal - ATOL:
                    out.fail(
                        f"is_success=False but the reward {fmt(s.reward)} is what "
                        f"compute_reward pays at the goal (compute_reward(g, g) = "
                        f"{fmt(at_goal)}) for achieved_goal={fmt(s.obs['achieved_goal'])}, "
                        f"desired_goal={fmt(s.obs['desired_goal'])}",
                        f"step {s.t}",
                    )
                    break
        if wins and fn is not None and goals_ok:
            # A successful step is paid more than a miss: less than the success reward
            # and no more than a goal drawn at random pays is a failure's reward.
            compared = True
            for s in wins[:20]:
                at_goal = _reward_at_goal(ctx, fn, s)
                far = _reward_far_from_goal(ctx, fn, s)
                if at_goal > far + ATOL and s.reward < at_goal - ATOL and s.reward <= far + ATOL:
                    every = " (every step of the rollout says so)" if not losses else ""
                    out.fail(
                        f"is_success=True{every} but the reward {fmt(s.reward)} is what "
                        f"compute_reward pays away from the goal (median {fmt(far)} for goals "
                        f"drawn from the goal space; {fmt(at_goal)} at the goal) for "
                        f"achieved_goal={fmt(s.obs['achieved_goal'])}, "
                        f"desired_goal={fmt(s.obs['desired_goal'])}: evaluation and "
                        "--stop-success read is_success",
                        f"step {s.t}",
                    )
                    break
    except (EnvCallError, TypeError, ValueError, KeyError):
        # a broken compute_reward is the reward checks' finding
        if not out.failed:
            compared = False
    if wins and losses:
        compared = True
        worst_win = min(wins, key=lambda s: s.reward)
        best_loss = max(losses, key=lambda s: s.reward)
        if worst_win.reward < best_loss.reward - ATOL:
            out.fail(
                f"step {worst_win.t} has is_success=True with reward {fmt(worst_win.reward)} "
                f"but step {best_loss.t} has is_success=False with the higher reward "
                f"{fmt(best_loss.reward)}: success and reward disagree"
            )
    if not compared:
        raise SkipCheckError(
            f"the rollout has {len(wins)} successful and {len(losses)} unsuccessful steps "
            "and no working compute_reward to compare with"
        )


@register(
    "success.terminates",
    "warning",
    "success ends the episode always or never",
)
def check_success_terminates(ctx: Context, out: Outcome) -> None:
    wins = [s for s, ok in _success_steps(ctx) if ok]
    ended = [s for s in wins if s.terminated]
    if ended and len(ended) < len(wins):
        going = next(s for s in wins if not s.terminated)
        out.fail(
            f"success terminated the episode at step {ended[0].t} but not at step {going.t} "
            "(is_success=True, terminated=False)"
        )


# --------------------------------------------------------------------------- episodes and seeding


@register("goal.fixed", "warning", "the desired goal stays fixed within an episode")
def check_goal_fixed(ctx: Context, out: Outcome) -> None:
    goal_space(ctx)
    for i, e in enumerate(rollout(ctx).episodes):
        if not isinstance(e.reset_obs, Mapping) or "desired_goal" not in e.reset_obs:
            continue
        first = e.reset_obs["desired_goal"]
        for s in e.steps:
            if isinstance(s.obs, Mapping) and not same(s.obs.get("desired_goal"), first):
                out.fail(
                    f"desired_goal was {fmt(first)} at the reset of episode {i} and "
                    f"{fmt(s.obs.get('desired_goal'))} at step {s.t}: HER assumes one goal per "
                    "episode",
                    f"step {s.t}",
                )
                return


@register(
    "goal.achieved_current",
    "warning",
    "achieved_goal is the state after the step, not the one before it",
)
def check_achieved_current(ctx: Context, out: Outcome) -> None:
    space = goal_space(ctx)
    if not isinstance(space["observation"], (spaces.Box, spaces.MultiBinary)):
        raise SkipCheckError("needs a Box or MultiBinary 'observation' to compare with")
    prev, cur, achieved, where = [], [], [], []
    for e in rollout(ctx).episodes:
        before = e.reset_obs
        for s in e.steps:
            try:
                prev.append(np.asarray(before["observation"], float).reshape(-1))
                cur.append(np.asarray(s.obs["observation"], float).reshape(-1))
                achieved.append(np.asarray(s.obs["achieved_goal"], float).reshape(-1))
            except (KeyError, TypeError, ValueError):
                raise SkipCheckError("observations are not numeric goal dicts") from None
            where.append(s.t)
            before = s.obs
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
    ret = ctx.call(f"reset(seed={ctx.seed})", ctx.env.reset, seed=ctx.seed)
    if not isinstance(ret, tuple) or len(ret) != 2:
        raise SkipCheckError("reset does not return (obs, info) (see api.reset)")
    if not same(copy_obs(ret[0]), ro.episodes[0].reset_obs):
        out.fail(
            f"reset(seed={ctx.seed}) returned {fmt(ret[0])}, the first time "
            f"{fmt(ro.episodes[0].reset_obs)}",
            "reset",
        )
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
                out.fail(
                    f"replaying the same seed and actions gives {name} = {fmt(now)}, the first "
                    f"rollout had {fmt(then)} (action {fmt(s.action)})",
                    f"step {s.t}",
                )
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


# --------------------------------------------------------------------------- rendering

_RENDER_FORMS = {
    "rgb_array": "a uint8 array of shape (H, W, 3)",
    "rgb_array_list": "a list of uint8 arrays of shape (H, W, 3)",
    "depth_array": "a 2-D array",
    "ansi": "a str",
}


def _render_problem(mode: str, frame: Any) -> str | None:
    def rgb(x: Any) -> bool:
        return (
            isinstance(x, np.ndarray)
            and x.dtype == np.uint8
            and x.ndim == 3
            and x.shape[-1] == 3
            and x.size > 0
        )

    ok = {
        "rgb_array": lambda: rgb(frame),
        "rgb_array_list": lambda: (
            isinstance(frame, list) and len(frame) > 0 and all(rgb(x) for x in frame)
        ),
        "depth_array": lambda: isinstance(frame, np.ndarray) and frame.ndim == 2,
        "ansi": lambda: isinstance(frame, str),
    }[mode]()
    if ok:
        return None
    desc = (
        f"{type(frame).__name__} dtype {frame.dtype} shape {frame.shape}"
        if isinstance(frame, np.ndarray)
        else type(frame).__name__
    )
    return f"render_mode={mode!r} rendered {desc}, expected {_RENDER_FORMS[mode]}"


# What renderers say when the process has no OpenGL context (a headless machine):
# mujoco's FatalError, GLFW and EGL / OSMesa failures, pyglet / pybullet display errors.
_NO_GL = re.compile(
    r"OpenGL platform library has not been loaded|mjr_makeContext|GLFW|\bEGL\b|eglInitialize"
    r"|OSMesa|gladLoadGL|No OpenGL context|could not (open|connect to) display|"
    r"cannot connect to X server",
    re.IGNORECASE,
)


def _no_gl(error: BaseException) -> bool:
    return bool(_NO_GL.search(f"{type(error).__name__}: {error}"))


# Renderer family -> the error its context creation raised in this process. mujoco fails
# its context once and then blocks forever (holding the GIL) or aborts on the next
# attempt in the same process, so a family that failed is not tried again.
_GL_FAILED: dict[str, EnvCallError] = {}


def _renderer_family(env: Any) -> str:
    unwrapped = getattr(env, "unwrapped", env)
    if hasattr(unwrapped, "mujoco_renderer"):  # gymnasium's and gymnasium-robotics' envs
        return "mujoco"
    cls = type(unwrapped)
    return f"{cls.__module__}.{cls.__qualname__}"


@register("render.modes", "error", "each declared render mode returns what gymnasium specifies")
def check_render_modes(ctx: Context, out: Outcome) -> None:
    modes = list(ctx.env.metadata.get("render_modes", []) or [])
    checkable = [m for m in modes if m in _RENDER_FORMS]
    if not checkable:
        raise SkipCheckError(f"declares no render mode that can be checked headless ({modes})")
    own = getattr(ctx.env, "render_mode", None)
    notes, no_gl = [], []
    family = _renderer_family(ctx.env)
    earlier = _GL_FAILED.get(family)
    for mode in checkable:
        if (no_gl or earlier) and mode != "ansi":
            # Another GL mode after a failed context creation can abort the process or
            # block it (mujoco: recursive static initialization in libc++): not tried.
            no_gl.append((mode, no_gl[0][1] if no_gl else earlier))
            continue
        if mode == own:
            env, built = ctx.env, False
        elif ctx.factory is not None:
            try:
                env = ctx.call(f"make(render_mode={mode!r})", ctx.factory, render_mode=mode)
            except EnvCallError as error:
                if _no_gl(error.error):
                    no_gl.append((mode, error))
                    _GL_FAILED[family] = error
                else:
                    out.fail(f"building the env with render_mode={mode!r} failed: {error.error}")
                continue
            built = True
        else:
            notes.append(mode)
            continue
        try:
            ctx.call("reset", env.reset, seed=ctx.seed)
            if mode == "rgb_array_list":
                ctx.call("step", env.step, env.action_space.sample())
            frame = ctx.call(f"render() with render_mode={mode!r}", env.render)
        except EnvCallError as error:
            if not _no_gl(error.error):
                raise
            no_gl.append((mode, error))
            _GL_FAILED[family] = error
            continue
        finally:
            if built:
                try:
                    ctx.call("close", env.close)
                except EnvCallError as error:
                    if not _no_gl(error.error):
                        raise
        problem = _render_problem(mode, frame)
        if problem:
            out.fail(problem)
    fps = ctx.env.metadata.get("render_fps")
    # gymnasium accepts an int or a float (panda-gym declares 25.0); video recorders too.
    bad_fps = (
        isinstance(fps, bool)
        or not isinstance(fps, (int, float, np.integer, np.floating))
        or not np.isfinite(fps)
        or fps <= 0
    )
    if ("rgb_array" in modes or "human" in modes) and bad_fps:
        out.fail(
            f"metadata['render_fps'] = {fps!r}, expected a positive number "
            "(video recorders and play loops read it)"
        )
    if out.failed:
        return
    if no_gl:
        error = no_gl[0][1]
        modes_gl = [m for m, _ in no_gl]
        again = " (failed earlier in this process; not retried)" if earlier else ""
        raise SkipCheckError(
            f"render modes {modes_gl} need an OpenGL context this process does not have{again} "
            f"({type(error.error).__name__}: {str(error.error).splitlines()[0][:90]}...): a setup "
            "fact, not an env defect; on a headless machine set MUJOCO_GL=egl (GPU) or "
            "MUJOCO_GL=osmesa (CPU, with libosmesa) and PYOPENGL_PLATFORM to match"
        )
    if notes and len(notes) == len(checkable):
        raise SkipCheckError(f"modes {notes} need a way to build the env (a spec, not an object)")


# --------------------------------------------------------------------------- compatibility


def _transitions(ctx: Context) -> list[tuple[Any, StepRecord]]:
    """(previous obs, step) for every rollout step, the last step marked as an episode end."""
    goal_space(ctx)
    out = []
    for e in rollout(ctx).episodes:
        prev = e.reset_obs
        for s in e.steps:
            out.append((prev, s))
            prev = s.obs
    if len(out) < 2:
        raise SkipCheckError("the rollout has fewer than two steps")
    return out


def _needed_keys_or_none(ctx: Context) -> list[str]:
    try:
        return needed_info_keys(ctx)[0]
    except (EnvCallError, SkipCheckError):
        return []  # a compute_reward that fails is the reward checks' finding, not the buffer's


def _batched(obs: Mapping) -> dict[str, np.ndarray]:
    return {k: np.asarray(v)[None] for k, v in obs.items()}


@register("compat.goalenvs_her", "error", "goalenvs' HerReplayBuffer fills and samples")
def check_compat_goalenvs(ctx: Context, out: Outcome) -> None:
    try:
        from goalenvs.her.buffer import HerReplayBuffer
    except ImportError as error:
        raise SkipCheckError(f"goalenvs.her.buffer is not importable ({error})") from None
    transitions = _transitions(ctx)
    space = goal_space(ctx)
    info_keys = tuple(_needed_keys_or_none(ctx))

    def fill_and_sample() -> Any:
        buffer = HerReplayBuffer(
            len(transitions) + 8,
            space,
            ctx.env.action_space,
            compute_reward=ctx.env,
            info_keys=info_keys,
            seed=ctx.seed,
        )
        for i, (prev, s) in enumerate(transitions):
            last = i == len(transitions) - 1
            buffer.add(
                _batched(prev),
                _batched(s.obs),
                np.asarray(s.action)[None],
                np.asarray([s.reward], np.float32),
                np.asarray([s.terminated]),
                np.asarray([s.truncated or last]),
                [s.info],
            )
        return buffer.sample(32)

    batch = ctx.call_with_limit(
        ctx.timeout * 10, "goalenvs HerReplayBuffer fill and sample", fill_and_sample
    )
    rewards = np.asarray(batch.rewards)
    if rewards.shape != (32,) or not np.all(np.isfinite(rewards)):
        out.fail(f"sampled rewards have shape {rewards.shape}, values {fmt(rewards)}")


@register("compat.sb3_her", "warning", "stable-baselines3's HerReplayBuffer fills and samples")
def check_compat_sb3(ctx: Context, out: Outcome) -> None:
    try:
        from stable_baselines3 import HerReplayBuffer
        from stable_baselines3.common.vec_env import DummyVecEnv
    except ImportError:
        raise SkipCheckError("stable-baselines3 is not installed") from None
    transitions = _transitions(ctx)
    space = goal_space(ctx)
    copy_info_dict = bool(_needed_keys_or_none(ctx))

    def fill_and_sample() -> Any:
        vec_env = DummyVecEnv([lambda: ctx.env])
        buffer = HerReplayBuffer(
            len(transitions) + 8,
            space,
            ctx.env.action_space,
            env=vec_env,
            device="cpu",
            copy_info_dict=copy_info_dict,
        )
        for i, (prev, s) in enumerate(transitions):
            last = i == len(transitions) - 1
            done = s.terminated or s.truncated or last
            info = dict(s.info)
            info["TimeLimit.truncated"] = (s.truncated or last) and not s.terminated
            buffer.add(
                _batched(prev),
                _batched(s.obs),
                np.asarray(s.action)[None],
                np.asarray([s.reward], np.float32),
                np.asarray([done]),
                [info],
            )
        return buffer.sample(32)

    batch = ctx.call_with_limit(
        ctx.timeout * 10, "SB3 HerReplayBuffer fill and sample", fill_and_sample
    )
    rewards = batch.rewards.numpy().reshape(-1)
    if rewards.shape != (32,) or not np.all(np.isfinite(rewards)):
        out.fail(f"sampled rewards have shape {rewards.shape}, values {fmt(rewards)}")


# --------------------------------------------------------------------------- gymnasium


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@register("gym.check_env", "error", "gymnasium's check_env passes")
def check_gym_env(ctx: Context, out: Outcome) -> None:
    import warnings

    from gymnasium.utils.env_checker import check_env

    def run() -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # gymnasium recommends checking the unwrapped env; our checks cover the
            # wrapped one. Render is checked by render.modes without opening windows.
            check_env(ctx.env.unwrapped, skip_render_check=True, skip_close_check=True)
        return [_ANSI.sub("", str(w.message)) for w in caught]

    for message in ctx.call_with_limit(ctx.timeout * 10, "gymnasium check_env", run):
        ctx.gym_warnings.append(("gymnasium check_env", message))


# gymnasium warnings that describe a normal goal env rather than a defect: every Fetch and
# panda-gym env declares its observation Box unbounded (positions and velocities have no
# natural bound). Reported as notes, not warnings.
_BENIGN_GYM = re.compile(
    r"Box observation space (minimum|maximum) value is (-)?infinity", re.IGNORECASE
)


def _gym_messages(ctx: Context, benign: bool) -> list[tuple[str, str]]:
    seen, kept = set(), []
    for source, message in ctx.gym_warnings:
        text = _ANSI.sub("", message).strip()
        if text not in seen and bool(_BENIGN_GYM.search(text)) == benign:
            seen.add(text)
            kept.append((source, text))
    return kept


@register("gym.warnings", "warning", "gymnasium raises no warning about the env")
def check_gym_warnings(ctx: Context, out: Outcome) -> None:
    for source, text in _gym_messages(ctx, benign=False):
        out.fail(text, source)


@register("gym.notes", "info", "gymnasium's remarks that are normal for goal envs")
def check_gym_notes(ctx: Context, out: Outcome) -> None:
    for source, text in _gym_messages(ctx, benign=True):
        out.fail(
            f"{text} (normal for goal envs: Fetch and panda-gym observations are unbounded; "
            "normalize observations with running statistics, as HER trainers do)",
            source,
        )


@register("api.timeout", "error", "every env call returns within the timeout")
def check_timeout(ctx: Context, out: Outcome) -> None:
    for message in ctx.timeouts:
        out.fail(message + ": the env was abandoned and the checks that need it were skipped")
