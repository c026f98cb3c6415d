"""Checks of vector envs (docs/checks.md, "Vector envs"): a seeded random rollout
(:func:`goalenvs.checker.vector_probe.vector_rollout`), its replay, and a replay with
only sub-env 0's actions changed."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from goalenvs.checker.checks.spaces import goal_dict_problem, goals_apart
from goalenvs.checker.checks.success import no_success_text
from goalenvs.checker.context import Context, SkipCheckError
from goalenvs.checker.probe import (
    ATOL,
    RTOL,
    disagree,
    fmt,
    goal_moved,
    is_goal_dict,
    mismatch,
    replay_text,
    view_text,
)
from goalenvs.checker.registry import Outcome, register
from goalenvs.checker.vector_probe import (
    SINGLE_ROWS,
    GoalMethods,
    VecRun,
    VecStep,
    declared_limit,
    declared_mode,
    drive,
    goal_methods,
    info_argument,
    listing,
    num_envs,
    other_action,
    replay,
    row_infos,
    single_space,
    stacked,
    vector_rollout,
)
from goalenvs.core import GOAL_KEYS
from goalenvs.core.backend import is_tensor

# --------------------------------------------------------------------------- helpers


def _run(ctx: Context) -> VecRun:
    run = vector_rollout(ctx)
    if not run.steps:
        raise SkipCheckError(f"the rollout has no step ({run.stopped}; see vector.result_batch)")
    return run


def _goals(run: VecRun) -> tuple[np.ndarray, np.ndarray]:
    achieved, desired = stacked(run, "achieved_goal"), stacked(run, "desired_goal")
    if achieved is None or desired is None:
        raise SkipCheckError("the observations do not stack into batches (see vector.obs_batch)")
    return achieved, desired


def rows_equal(a: object, b: object) -> np.ndarray:
    """Per row (first axis): whether two batches hold the same values (NaN equals NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return np.zeros(len(a) if a.ndim else 1, bool)
    same = a == b
    if a.dtype.kind in "fc":
        same |= np.isnan(a) & np.isnan(b)
    return same.reshape(len(a), -1).all(axis=1) if a.ndim > 1 else same


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.isclose(a, b, atol=ATOL, rtol=RTOL, equal_nan=True)


def _mode_name(mode: AutoresetMode) -> str:
    return mode.name.lower().replace("_", "-")  # next-step, same-step, disabled


# --------------------------------------------------------------------------- the batch


@register("vector.num_envs", "warning", "the vector env has two sub-envs or more")
def check_num_envs(ctx: Context, out: Outcome) -> None:
    if num_envs(ctx) == 1:
        out.fail(
            "num_envs=1: defects between sub-envs cannot show with one (one sub-env's actions "
            "or success reaching another, a step counter or goal draw shared by all, a "
            "reduction over the batch axis); check with num_envs=2 or more "
            "(goalenvs check ID --num-envs 4)"
        )


@register(
    "vector.spaces", "error", "the batched spaces are the single spaces batched num_envs times"
)
def check_vector_spaces(ctx: Context, out: Outcome) -> None:
    env = ctx.env
    n = getattr(env, "num_envs", None)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        out.fail(f"num_envs is {n!r}, expected a positive int")
        return
    single_obs = getattr(env, "single_observation_space", None)
    single_act = getattr(env, "single_action_space", None)
    problem = goal_dict_problem(single_obs, "single_observation_space")
    if is_goal_dict(single_obs):
        problem = goals_apart(single_obs, "single_observation_space's ")
    if problem is not None:
        out.fail(problem)
    for name, batched, single in (
        ("observation_space", getattr(env, "observation_space", None), single_obs),
        ("action_space", getattr(env, "action_space", None), single_act),
    ):
        if not isinstance(single, spaces.Space):
            out.fail(f"single_{name} is {single!r}, expected a gymnasium space")
            continue
        expected = batch_space(single, int(n))
        if batched != expected:
            detail = _space_difference(batched, expected)
            out.fail(
                f"{name} is not single_{name} batched {n} times: {detail} "
                f"(gymnasium.vector.utils.batch_space(single_{name}, {n}) builds it)"
            )


def _space_difference(batched: object, expected: spaces.Space) -> str:
    if isinstance(expected, spaces.Dict) and isinstance(batched, spaces.Dict):
        keys = set(expected.spaces) ^ set(batched.spaces)
        if keys:
            return f"its keys are {sorted(batched.spaces)}, expected {sorted(expected.spaces)}"
        for key, space in expected.spaces.items():
            if batched[key] != space:
                return f"[{key!r}] is {_brief(batched[key])}, expected {_brief(space)}"
    return f"it is {_brief(batched)}, expected {_brief(expected)}"


def _brief(space: object) -> str:
    if isinstance(space, spaces.Box):
        return f"Box(shape={space.shape}, dtype={space.dtype})"
    text = repr(space)
    return text if len(text) <= 100 else text[:97] + "..."


@register(
    "vector.result_batch",
    "error",
    "reset and step return gymnasium's vector API with one value per sub-env",
)
def check_result_batch(ctx: Context, out: Outcome) -> None:
    run = vector_rollout(ctx)
    for where, message in run.problems:
        cause = run.cause if "raised" in message else None
        out.fail(message, where, cause=cause)


def _batches(run: VecRun) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = [("reset", run.reset_obs)]
    for t, step in enumerate(run.steps):
        found.append((run.where(t), step.obs))
        if step.mask_reset_obs is not None:
            found.append(
                (f"reset(options={{'reset_mask': ...}}) after step {t}", step.mask_reset_obs)
            )
    return found


@register(
    "vector.obs_batch",
    "error",
    "every observation batch has num_envs rows of the single space's shape and dtype",
)
def check_obs_batch(ctx: Context, out: Outcome) -> None:
    space = single_space(ctx)
    run = vector_rollout(ctx)
    n = run.num_envs
    for where, obs in _batches(run):
        if not isinstance(obs, Mapping):
            message = f"the observation is a {type(obs).__name__}, expected a dict"
            out.fail_once(("", "type"), message, where)
            continue
        drift = "autoreset" in where or "reset_mask" in where
        for key, sub in space.spaces.items():
            value = np.asarray(obs[key]) if key in obs else None
            shape = (n, *(sub.shape or ()))
            if value is None:
                kind, message = "missing", f"the observation has no {key!r} (keys {list(obs)})"
            elif value.shape != shape:
                kind, message = "shape", f"obs[{key!r}] has shape {value.shape}, expected {shape}"
            elif sub.dtype is not None and value.dtype != sub.dtype:
                kind = "dtype"
                message = f"obs[{key!r}] has dtype {value.dtype}, the space {sub.dtype}" + (
                    ": the dtype drifts on autoreset steps (the new episodes' rows are built "
                    "another way)"
                    if drift
                    else ""
                )
            elif (outside := _rows_outside(sub, value)).size:
                i = int(outside[0])
                box = f" [{fmt(sub.low)}, {fmt(sub.high)}]" if isinstance(sub, spaces.Box) else ""
                kind = "bounds"
                message = (
                    f"obs[{key!r}] of sub-env {i} is {fmt(value[i])}, outside {_brief(sub)}{box} "
                    f"({outside.size} of {n} rows)"
                )
            else:
                continue
            out.fail_once((key, kind), message, where)


def _rows_outside(space: spaces.Space, value: np.ndarray) -> np.ndarray:
    if isinstance(space, spaces.Box):
        inside = (value >= space.low) & (value <= space.high)
        return np.flatnonzero(~inside.reshape(len(value), -1).all(axis=1))
    return np.array(
        [i for i in range(min(len(value), 64)) if not space.contains(value[i])], dtype=int
    )


@register(
    "vector.obs_fresh",
    "error",
    "returned batches are fresh arrays, not views of env state changed by later steps",
)
def check_vector_obs_fresh(ctx: Context, out: Outcome) -> None:
    run = _run(ctx)
    for where, name in run.fresh_problems:
        if "final_obs" in name:
            continue  # vector.final_obs's
        out.fail_once(name, view_text(name, where, fix="return a copy (.copy(), .clone())"), where)


# --------------------------------------------------------------------------- autoreset


@register(
    "vector.autoreset_mode",
    "error",
    "the env resets ended sub-envs the way metadata['autoreset_mode'] declares",
)
def check_autoreset_mode(ctx: Context, out: Outcome) -> None:
    mode, problem = declared_mode(ctx.env)
    if problem:
        out.fail(problem)
    single_space(ctx)
    run = _run(ctx)
    for where, message in run.problems:
        if "reset_mask" in where:
            out.fail(
                f"the env declares disabled autoreset, but {message}: with disabled "
                "autoreset the user resets ended sub-envs with reset(options={'reset_mask': m})",
                where,
            )
    events = [(t, int(i)) for t, s in enumerate(run.steps[:-1]) for i in np.flatnonzero(s.done)]
    if not events:
        if not out.failed:
            raise SkipCheckError(
                f"no episode ended in the rollout's {len(run.steps)} steps (--steps)"
            )
        return
    name = _mode_name(mode)
    dg = "desired_goal"
    # Rows whose returned observation at the step that ended them already holds another
    # desired goal than the episode's: the env restarted them in that very step.
    moved = [
        (t, i)
        for t, i in events
        if not np.array_equal(run.steps[t].obs[dg][i], run.start_obs(t)[dg][i])
    ]
    in_place = mode in (AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED)
    if in_place and moved and 2 * len(moved) >= len(events):
        t, i = moved[0]
        s = run.steps[t]
        finals = " (and its info carries final_obs)" if s.final_present else ""
        out.fail(
            f"the env declares {name} autoreset but restarts sub-envs in the step that "
            f"ends their episode (same-step): at step {t} sub-env {i} ended "
            f"(terminated={bool(s.terminated[i])}, truncated={bool(s.truncated[i])}) and "
            f"the row returned already holds desired_goal {fmt(s.obs[dg][i])}, the "
            f"episode's was {fmt(run.start_obs(t)[dg][i])}{finals} ({len(moved)} of "
            f"{len(events)} ended episodes): a consumer pairs that step's terminated "
            "with the next episode's first observation",
            f"step {t}",
        )
    if mode == AutoresetMode.NEXT_STEP:
        after = run.steps[1:]
        not_reset = [(t, i) for t, i in events if after[t].reward[i] != 0 or after[t].done[i]]
        if not_reset:
            t, i = not_reset[0]
            s = run.steps[t + 1]
            out.fail(
                f"sub-env {i} ended at step {t}; the step after it returned reward "
                f"{fmt(s.reward[i])}, terminated={bool(s.terminated[i])}, "
                f"truncated={bool(s.truncated[i])}: a next-step autoreset returns reward 0, "
                f"False, False on the step that resets ({len(not_reset)} of {len(events)})",
                f"step {t + 1}",
            )
    if mode == AutoresetMode.SAME_STEP:
        looks_next = [
            (t, i)
            for t, i in events
            if (t, i) not in moved
            and run.steps[t + 1].reward[i] == 0
            and not run.steps[t + 1].done[i]
            and not np.array_equal(run.steps[t + 1].obs[dg][i], run.steps[t].obs[dg][i])
        ]
        if looks_next and 2 * len(looks_next) >= len(events):
            t, i = looks_next[0]
            out.fail(
                f"the env declares same-step autoreset but resets on the step after an "
                f"episode ends (next-step): sub-env {i} ended at step {t} and its row still "
                f"held the ended episode's desired_goal {fmt(run.steps[t].obs[dg][i])}; step "
                f"{t + 1} returned reward 0 and the new goal "
                f"{fmt(run.steps[t + 1].obs[dg][i])} ({len(looks_next)} of {len(events)})",
                f"step {t + 1}",
            )
    if mode == AutoresetMode.DISABLED:
        _check_masked_resets(run, out)


def _check_masked_resets(run: VecRun, out: Outcome) -> None:
    unchanged_everywhere = True
    seen = 0
    for t, s in enumerate(run.steps):
        if s.mask_reset is None or not isinstance(s.mask_reset_obs, Mapping):
            continue
        seen += 1
        mask = s.mask_reset
        for key, before in s.obs.items():
            after = s.mask_reset_obs.get(key)
            if after is None or np.shape(after) != np.shape(before):
                continue
            same = rows_equal(before, after)
            outside = np.flatnonzero(~mask & ~same)
            if outside.size:
                i = int(outside[0])
                masked = listing(np.flatnonzero(mask))
                out.fail(
                    f"reset(options={{'reset_mask': m}}) after step {t} changed sub-envs "
                    f"outside the mask ({listing(outside)}; m held {masked}): "
                    f"obs[{key!r}] of sub-env {i} went from {fmt(before[i])} to {fmt(after[i])}",
                    f"reset after step {t}",
                )
                return
            if not same[mask].all():
                unchanged_everywhere = False
    if seen and unchanged_everywhere:
        out.fail(
            f"reset(options={{'reset_mask': m}}) returned the masked sub-envs' observations "
            f"unchanged in all {seen} masked resets: the mask is ignored, and the ended "
            "episodes go on"
        )


@register(
    "vector.final_obs",
    "error",
    "same-step autoreset: final_obs and final_info hold each ended episode's last step",
)
def check_final_obs(ctx: Context, out: Outcome) -> None:
    space = single_space(ctx)
    run = _run(ctx)
    if run.mode != AutoresetMode.SAME_STEP:
        raise SkipCheckError(
            f"the env declares {_mode_name(run.mode)} autoreset; final_obs is same-step's"
        )
    ends = [t for t, s in enumerate(run.steps) if s.done.any()]
    if not ends:
        raise SkipCheckError(f"no episode ended in the rollout's {len(run.steps)} steps")
    dg = "desired_goal"
    fail = out.fail_once
    for t in ends:
        s = run.steps[t]
        rows = np.flatnonzero(s.done)
        where = f"step {t}"
        if not s.final_present:
            fail(
                "missing",
                f"step {t} ended sub-envs {listing(rows)} and returned their next episodes' "
                "first observations, but its info has no final_obs: the last observation of "
                "each ended episode is lost (HER relabels with a goal never reached; a "
                "truncation bootstraps from the next episode's start)",
                where,
            )
            continue
        if off := _mask_off("_final_obs", s.final_obs_mask, s):
            fail("mask", off, where)
        start = run.start_obs(t)
        for i in rows.tolist():
            final = s.final_obs.get(i)
            if not isinstance(final, Mapping) or any(k not in final for k in GOAL_KEYS):
                fail(
                    "form",
                    f"info['final_obs'][{i}] is {fmt(final)}, expected sub-env {i}'s last "
                    "observation (a goal dict)",
                    where,
                )
                continue
            for key, sub in space.spaces.items():
                if key in final and np.shape(final[key]) != sub.shape:
                    fail(
                        "shape",
                        f"info['final_obs'][{i}][{key!r}] has shape {np.shape(final[key])}, "
                        f"expected {sub.shape}",
                        where,
                    )
            if not np.array_equal(np.asarray(final[dg]), start[dg][i]):
                same_as_new = all(
                    np.array_equal(np.asarray(final[k]), s.obs[k][i]) for k in GOAL_KEYS
                )
                fail(
                    "value",
                    f"info['final_obs'][{i}]['desired_goal'] is {fmt(final[dg])}, but sub-env "
                    f"{i}'s episode had desired_goal {fmt(start[dg][i])}"
                    + (
                        ": it holds the next episode's first observation (a view of the "
                        "state the reset overwrote; copy it before the reset)"
                        if same_as_new
                        else ": it is not the observation that ended the episode"
                    ),
                    where,
                )
        if not s.final_info_present:
            fail(
                "info",
                f"step {t} ended sub-envs {listing(rows)} but its info has no final_info: "
                "their last info (is_success, the terms compute_reward reads) is lost",
                where,
            )
        elif off := _mask_off("_final_info", s.final_info_mask, s):
            fail("info_mask", off, where)
    for where, name in run.fresh_problems:
        if "final_obs" in name:
            fix = "copy the last observation before the reset"
            fail("fresh", view_text(name, where, fix=fix), where)


def _mask_off(key: str, mask: np.ndarray | None, s: VecStep) -> str | None:
    if mask is None or np.array_equal(np.asarray(mask, bool).reshape(-1), s.done):
        return None
    ended = listing(np.flatnonzero(s.done))
    return f"info[{key!r}] is {fmt(mask)}, but the sub-envs that ended are {ended}"


# --------------------------------------------------------------------------- goal functions


def _methods(ctx: Context, name: str) -> tuple[GoalMethods, Any]:
    methods = goal_methods(ctx)
    fn = methods.named()[name]
    if fn is None:
        if name == "compute_reward" and methods.source == "" and ctx.single_factory is None:
            unwrapped = getattr(ctx.env, "unwrapped", ctx.env)
            if isinstance(unwrapped, gym.vector.AsyncVectorEnv):
                raise SkipCheckError(
                    "AsyncVectorEnv's sub-envs live in other processes and no single env is "
                    "known to read compute_reward from (check with vectorization_mode='sync')"
                )
        raise SkipCheckError(f"no {name} found on the vector env or its sub-env 0")
    return methods, fn


def _transitions(run: VecRun, methods: GoalMethods) -> list[tuple[list, Any, Any, Any, str]]:
    """The batch's transitions as (rows (t, i), achieved goals, desired goals, info in the
    goal functions' form, label): the rows that stepped, read from the returned goals, then
    the rows a same-step autoreset ended, read from their final_obs."""
    achieved, desired = _goals(run)
    n, same_step = run.num_envs, run.mode == AutoresetMode.SAME_STEP
    normal = np.stack([~run.reset_rows(t) for t in range(len(run.steps))])
    if same_step:
        normal &= ~np.stack([s.done for s in run.steps])
    if methods.per_row:
        info: Any = [
            d
            for t, s in enumerate(run.steps)
            for d in row_infos(s.info, n, np.flatnonzero(normal[t]).tolist())
        ]
    else:
        stacks = {k: stacked(run, k, "info") for k in run.steps[0].info if not k.startswith("_")}
        info = {k: run.arrays(v[normal]) for k, v in stacks.items() if v is not None}
    rows = [(int(t), int(i)) for t, i in np.argwhere(normal)]
    groups = [(rows, achieved[normal], desired[normal], info, "")]
    ends = [
        (t, i, final)
        for t, s in enumerate(run.steps)
        for i in (np.flatnonzero(s.done).tolist() if same_step else [])
        if isinstance(final := s.final_obs.get(i), Mapping) and "achieved_goal" in final
    ]
    if ends:
        infos = [
            {**row_infos(run.steps[t].info, n, [i])[0], **run.steps[t].final_info.get(i, {})}
            for t, i, _ in ends
        ]
        ag = np.stack([np.asarray(f["achieved_goal"]) for *_, f in ends])
        dg = np.stack([np.asarray(f["desired_goal"]) for *_, f in ends])
        groups.append(
            (
                [(t, i) for t, i, _ in ends],
                ag,
                dg,
                info_argument(methods, infos, run.arrays),
                " ended",
            )
        )
    return groups


def _spread(name: str, value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A flag function's one value broadcast to ``shape`` (Fetch's ``compute_terminated``
    returns ``False`` for any batch); any other result as it is."""
    if value.size == 1 and name != "compute_reward":
        return np.broadcast_to(value.reshape(()), shape)
    return value


def _match(ctx: Context, out: Outcome, name: str, field: str) -> None:
    """Each step's ``field`` equals ``name`` of the goals it came from: the returned ones
    for the rows that stepped, ``final_obs`` for the rows a same-step autoreset ended."""
    methods, fn = _methods(ctx, name)
    run = _run(ctx)
    returned = np.stack([getattr(s, field) for s in run.steps])
    first: tuple[str, str] | None = None
    total = bad_total = 0
    for rows, ag, dg, info, ended in _transitions(run, methods):
        if not rows:
            continue
        result = run.goal_call(ctx, f"{name} of {len(ag)} rows", fn, ag, dg, info)
        result = _spread(name, result, (len(ag),))
        if result.shape != (len(ag),):  # vector.goal_batch says why
            if not ended:
                out.fail(
                    f"{name} of {len(ag)} goal pairs is not one value per pair (see "
                    "vector.goal_batch)"
                )
                return
            continue
        expected = np.array([returned[t, i] for t, i in rows])
        bad = disagree(field, expected, result)
        total, bad_total = total + len(rows), bad_total + int(bad.sum())
        if bad.any() and (first is None or (ended and field == "reward")):
            k = int(np.flatnonzero(bad)[0])
            t, i = rows[k]
            goals = " of its final_obs" if ended else " of the returned goals"
            text = mismatch(field, expected[k], name, (ag[k], dg[k]), result[k], goals)
            late = f": the {field} was computed after the reset, from the next episode's first"
            late = late + " observation" if ended else ""
            first = (f"step {t}, sub-env {i}{ended}: {text}{late}", f"step {t}")
    if first is not None:
        out.fail(f"{first[0]} ({bad_total} of {total} rows disagree)", first[1])


for _field, _title in {
    "reward": "rewards equal compute_reward of each sub-env's returned goals (final_obs where "
    "it ended)",
    "terminated": "terminations equal compute_terminated of each sub-env's returned goals",
}.items():
    _check = functools.partial(_match, name=f"compute_{_field}", field=_field)
    register(f"vector.{_field}_match", "error", _title)(_check)


@register(
    "vector.goal_batch",
    "error",
    "the goal functions give each sub-env its own value on every leading shape",
)
def check_goal_batch(ctx: Context, out: Outcome) -> None:
    methods = goal_methods(ctx)
    if methods.reward is None:
        _methods(ctx, "compute_reward")  # skips with the reason
    run = _run(ctx)
    achieved, desired = _goals(run)
    n = run.num_envs
    steps = min(3, len(run.steps))
    ag = achieved[:steps].copy()
    dg = desired[:steps].copy()
    dg[:, 0] = ag[:, 0]  # sub-env 0 at its goal: a success that must stay in its own row
    arrays = run.arrays
    infos = [row_infos(run.steps[t].info, n) for t in range(steps)]
    if methods.per_row:
        leading: Any = np.empty((steps, n), dtype=object)
        leading[:] = infos  # a (steps, n) object array of the per-row dicts
        per_step = infos
    else:
        leading = {
            key: arrays(np.stack([np.stack([np.asarray(d[key]) for d in rows]) for rows in infos]))
            for key in (infos[0][0] if infos and infos[0] else {})
        }
        per_step = [info_argument(methods, rows, arrays) for rows in infos]
    picks = sorted({0, 1, n // 2, n - 1} & set(range(n)))

    def call(name: str, fn: Any, what: str, a: np.ndarray, d: np.ndarray, info: Any) -> np.ndarray:
        return run.goal_call(ctx, f"{name} of {what}", fn, a, d, info)

    for name, fn in methods.named().items():
        if fn is None:
            continue
        full = call(name, fn, f"a {(steps, n)} batch", ag, dg, leading)
        rows = [
            _spread(name, call(name, fn, f"step {t}", ag[t], dg[t], per_step[t]), (n,))
            for t in range(steps)
        ]
        singles = {
            i: call(name, fn, f"sub-env {i}", ag[0, i], dg[0, i], infos[0][i]) for i in picks
        }
        wide = [i for i, value in singles.items() if value.size != 1]
        if wide:
            i = wide[0]
            out.fail(f"{name} of one goal pair (sub-env {i}) returned shape {singles[i].shape}")
            return
        for t, value in enumerate(rows):
            if value.shape != (n,):
                out.fail(
                    f"{name} of the ({n}, goal) batch of step {t} returned shape {value.shape}, "
                    f"expected ({n},): one value per sub-env"
                )
                return
            apart = [i for i, one in singles.items() if t == 0 and not _close(value[i], one)]
            if apart:
                i, one = apart[0], singles[apart[0]].reshape(())
                out.fail(
                    f"{name} of the step-0 batch gives sub-env {i} {fmt(value[i])}, the call "
                    f"for its goal pair alone {fmt(one)} (achieved_goal={fmt(ag[0, i])}, "
                    f"desired_goal={fmt(dg[0, i])}; sub-env 0 was set at its goal): the batch "
                    "is reduced across sub-envs",
                    "step 0",
                )
                return
        full = _spread(name, full, (steps, n))
        if full.shape != (steps, n):
            out.fail(
                f"{name} of a ({steps}, {n}, goal) batch (steps x sub-envs, as a HER buffer "
                f"stores them) returned shape {full.shape}, expected ({steps}, {n}): reduce "
                "over the last axis only (axis=-1, never axis=1)"
            )
            return
        bad = np.argwhere(~_close(full, np.stack(rows)))
        if bad.size:
            t, i = map(int, bad[0])
            out.fail(
                f"{name} of a ({steps}, {n}, goal) batch gives [{t}, {i}] = {fmt(full[t, i])}, "
                f"the ({n}, goal) batch of step {t} gives {fmt(rows[t][i])}: the leading "
                "dimensions are not handled (axis=1 instead of axis=-1?)"
            )
            return


@register(
    "vector.success", "error", "info['is_success'] holds one value per sub-env, with its mask"
)
def check_vector_success(ctx: Context, out: Outcome) -> None:
    run = _run(ctx)
    n = run.num_envs
    if not any("is_success" in s.info for s in run.steps):
        raise SkipCheckError("the env sets no info['is_success']")
    fail = out.fail_once
    for t, s in enumerate(run.steps):
        where = f"step {t}"
        # Rows a next-step autoreset restarts carry their reset's info (often without
        # is_success): the rows that stepped must carry it.
        stepped = ~run.reset_rows(t)
        if "is_success" not in s.info:
            if stepped.any():
                who = f" for sub-envs {listing(np.flatnonzero(stepped))}, which stepped"
                fail("missing", no_success_text(s.info, who), where)
            continue
        value = np.asarray(s.info["is_success"])
        if value.shape != (n,):
            fail(
                "shape",
                f"info['is_success'] is {fmt(value)} with shape {value.shape}, expected ({n},): "
                "one value per sub-env (one number for the batch cannot say which sub-env "
                "succeeded)",
                where,
            )
            continue
        if value.dtype != np.bool_ and not np.isin(value, (0, 1)).all():
            fail("values", f"info['is_success'] holds {fmt(value)}, expected bools", where)
        mask = s.info.get("_is_success")
        if mask is None:
            fail(
                "mask",
                "info has no '_is_success' mask (gymnasium's vector info: '_key' says which "
                "sub-envs carry 'key'; consumers read is_success where it is True)",
                where,
            )
        elif np.shape(mask) != (n,) or np.asarray(mask).dtype != np.bool_:
            fail(
                "mask_form",
                f"info['_is_success'] is {fmt(mask)}, expected a ({n},) bool array",
                where,
            )
        elif not np.asarray(mask)[stepped].all():
            off = np.flatnonzero(stepped & ~np.asarray(mask))
            fail(
                "mask_off",
                f"info['_is_success'] is False for sub-envs {listing(off)}, which stepped: "
                "their successes are not reported",
                where,
            )
        if run.mode == AutoresetMode.SAME_STEP and s.final_info_present:
            for i in np.flatnonzero(s.done).tolist():
                if "is_success" not in s.final_info.get(i, {}):
                    fail(
                        "final",
                        f"sub-env {i} ended at step {t} but final_info has no is_success for it "
                        f"(keys {sorted(s.final_info.get(i, {}))}): the ended episode's success "
                        "is lost",
                        where,
                    )
                    break


# --------------------------------------------------------------------------- episodes


@register(
    "vector.goal_fixed", "error", "each sub-env keeps its desired goal until its own episode ends"
)
def check_vector_goal_fixed(ctx: Context, out: Outcome) -> None:
    single_space(ctx)
    run = _run(ctx)
    count, first = 0, None
    for t in range(len(run.steps)):
        start = run.start_obs(t)["desired_goal"]
        end = run.ended_obs(t, "desired_goal")
        moved = ~run.reset_rows(t) & ~rows_equal(start, end)
        if run.mode == AutoresetMode.SAME_STEP:
            # An ended row's last goal is final_obs's, which vector.final_obs checks.
            moved &= ~run.steps[t].done
        if moved.any():
            count += int(moved.sum())
            if first is None:
                i = int(np.flatnonzero(moved)[0])
                ended = np.flatnonzero(run.steps[t].done | run.reset_rows(t))
                context = (
                    f" (sub-envs {listing(ended)} were resetting at that step: the autoreset "
                    "redrew every sub-env's goal)"
                    if ended.size
                    else ""
                )
                first = (goal_moved(f"sub-env {i}'s", start[i], end[i], t, context), f"step {t}")
    if first is not None:
        out.fail(f"{first[0]} ({count} rows over the rollout)", first[1])


@register("vector.time_limit", "error", "each sub-env counts its own steps to the time limit")
def check_vector_time_limit(ctx: Context, out: Outcome) -> None:
    run = _run(ctx)
    n = run.num_envs
    limit = declared_limit(ctx.env)
    elapsed = np.zeros(n, np.int64)
    first = np.ones(n, bool)
    over_reported = np.zeros(n, bool)
    later_truncations: list[tuple[int, int, int]] = []
    for t, s in enumerate(run.steps):
        stepped = ~run.reset_rows(t)
        elapsed[stepped] += 1
        if limit is not None:
            past = stepped & (elapsed > limit) & ~over_reported
            if past.any():
                i = int(np.flatnonzero(past)[0])
                over_reported |= past
                out.fail(
                    f"sub-env {i} has run {elapsed[i]} steps of one episode at step {t}, past "
                    f"the limit of {limit}, without being truncated: its step counter is "
                    "shared with the other sub-envs (reset when another one resets?)",
                    f"step {t}",
                )
        truncated = s.truncated & ~s.terminated & stepped & ~first
        later_truncations += [(t, int(i), int(elapsed[i])) for i in np.flatnonzero(truncated)]
        done = s.done & stepped
        elapsed[done] = 0
        first[done] = False
    if not later_truncations:
        return
    full = limit if limit is not None else max(length for *_, length in later_truncations)
    early = [e for e in later_truncations if e[2] < full]
    early = _not_goal_truncated(ctx, run, early)
    if early:
        t, i, length = early[0]
        lengths = sorted({e[2] for e in early})
        out.fail(
            f"sub-env {i} was truncated after {length} steps at step {t}, in an episode after "
            f"an autoreset (the time limit is {full}; {len(early)} such truncations, lengths "
            f"{lengths[:6]}): the step counter is one for the whole vector, so sub-envs that "
            "restarted alone are cut short",
            f"step {t}",
        )


def _not_goal_truncated(
    ctx: Context, run: VecRun, early: list[tuple[int, int, int]]
) -> list[tuple[int, int, int]]:
    """The early truncations that compute_truncated does not explain."""
    methods = goal_methods(ctx)
    if not early or methods.truncated is None:
        return early
    ag = np.stack([run.ended_obs(t, "achieved_goal")[i] for t, i, _ in early])
    dg = np.stack([run.ended_obs(t, "desired_goal")[i] for t, i, _ in early])
    infos = [row_infos(run.steps[t].info, run.num_envs, [i])[0] for t, i, _ in early]
    info = info_argument(methods, infos, run.arrays)
    result = run.goal_call(
        ctx, "compute_truncated of the early truncations", methods.truncated, ag, dg, info
    )
    flags = np.broadcast_to(result.astype(bool).reshape(-1), (len(early),))
    return [e for e, goal in zip(early, flags, strict=True) if not goal]


# --------------------------------------------------------------------------- sub-envs apart


def _obs_pairs(a: object, b: object, suffix: str = "") -> list[tuple[str, Any, Any]]:
    if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
        return []
    return [(f"obs[{k!r}]{suffix}", a[k], b.get(k)) for k in a]


def _step_pairs(a: VecStep, b: VecStep, success: str) -> list[tuple[str, Any, Any]]:
    pairs = _obs_pairs(a.obs, b.obs)
    pairs += [(f, getattr(a, f), getattr(b, f)) for f in ("reward", "terminated", "truncated")]
    if "is_success" in a.info and "is_success" in b.info:
        pairs.append((success, a.info["is_success"], b.info["is_success"]))
    return pairs


def _first_difference(
    a: VecRun, b: VecRun, rows: Any = None
) -> tuple[int, int, str, Any, Any] | None:
    """The first (step, row, what, value in a, value in b) where two runs differ; step -1
    is the reset."""
    select = slice(None) if rows is None else rows
    compared = [(-1, *pair) for pair in _obs_pairs(a.reset_obs, b.reset_obs)]
    for t, (sa, sb) in enumerate(zip(a.steps, b.steps, strict=False)):
        masked = _obs_pairs(sa.mask_reset_obs, sb.mask_reset_obs, " after the masked reset")
        compared += [(t, *pair) for pair in _step_pairs(sa, sb, "is_success") + masked]
    for t, what, x, y in compared:
        x, y = np.asarray(x), np.asarray(y)
        if x.ndim == 0 or y.ndim == 0:
            continue  # not one value per sub-env: vector.success / vector.result_batch
        x, y = x[select], y[select]
        diff = np.flatnonzero(~rows_equal(x, y))
        if diff.size:
            i = int(diff[0])
            return t, i, what, x[i], y[i]
    return None


@register(
    "vector.seed", "warning", "the same seed and actions give the same batch, autoresets included"
)
def check_vector_seed(ctx: Context, out: Outcome) -> None:
    first = _run(ctx)
    again = replay(ctx)
    diff = _first_difference(first, again)
    if diff is None:
        if len(again.steps) != len(first.steps):
            out.fail(
                f"the replay stopped after {len(again.steps)} steps, the first run after "
                f"{len(first.steps)}: {again.stopped}"
            )
        return
    t, i, what, x, y = diff
    if t < 0:
        seeding = ": seed every sub-env from reset's seed (seed + i, as gymnasium's vector envs)"
        out.fail(replay_text(ctx.seed, f"sub-env {i} {what}", y, x) + seeding, "reset")
        return
    autoreset = _last_autoreset(first, t, i)
    if autoreset is None:
        text = replay_text(ctx.seed, f"sub-env {i} {what}", y, x, f"step {t}")
        out.fail(text, f"step {t}, sub-env {i}")
        return
    out.fail(
        f"sub-env {i} drew another episode at its autoreset {autoreset} when reset(seed="
        f"{ctx.seed}) and the same actions were replayed: at step {t} it gave {what} = "
        f"{fmt(y)}, the first run {fmt(x)}: autoresets draw from a generator that "
        "reset(seed=...) does not seed (draw them from the sub-env's own seeded generator)",
        f"step {t}, sub-env {i}",
    )


def _last_autoreset(run: VecRun, t: int, i: int) -> str | None:
    """When sub-env ``i`` last restarted by itself at or before step ``t``, in words."""
    for s in range(min(t, len(run.steps) - 1), -1, -1):
        if not run.steps[s].done[i]:
            continue
        if run.mode == AutoresetMode.SAME_STEP:
            return f"in step {s} (its episode ended there)"
        if run.mode == AutoresetMode.NEXT_STEP and s < t:
            return f"in step {s + 1} (its episode ended at step {s})"
        if run.mode == AutoresetMode.DISABLED and s < t:
            return f"by reset(options={{'reset_mask': ...}}) after step {s}"
    return None


def episode_starts(run: VecRun) -> list[list[tuple[int, dict[str, np.ndarray]]]]:
    """Each sub-env's episode starts, in order: ``(step, its first observation)``, the
    reset's as step -1, then every autoreset's (a masked reset's after the step it follows)."""
    if not isinstance(run.reset_obs, Mapping):
        return [[] for _ in range(run.num_envs)]

    def row(obs: Mapping, i: int) -> dict[str, np.ndarray]:
        return {k: np.asarray(v)[i] for k, v in obs.items()}

    starts = [[(-1, row(run.reset_obs, i))] for i in range(run.num_envs)]
    for t, step in enumerate(run.steps):
        if not isinstance(step.obs, Mapping):
            break
        for i in np.flatnonzero(run.new_starts(t)).tolist():
            starts[i].append((t, row(step.obs, i)))
        if step.mask_reset is not None and isinstance(step.mask_reset_obs, Mapping):
            for i in np.flatnonzero(step.mask_reset).tolist():
                starts[i].append((t, row(step.mask_reset_obs, i)))
    return starts


def _same_start(a: Mapping, b: Mapping) -> bool:
    return a.keys() == b.keys() and all(
        np.shape(a[k]) == np.shape(b[k]) and bool(np.array_equal(a[k], b[k])) for k in a
    )


@register(
    "vector.episodes_vary",
    "warning",
    "each sub-env's autoresets draw new episodes, not its first one again",
)
def check_episodes_vary(ctx: Context, out: Outcome) -> None:
    single_space(ctx)
    run = vector_rollout(ctx)
    starts = episode_starts(run)
    restarted = [i for i, s in enumerate(starts) if len(s) > 1]
    if not restarted:
        raise SkipCheckError("no sub-env restarted in the rollout")
    firsts = [s[0][1] for s in starts if s]
    if all(_same_start(f, firsts[0]) for f in firsts[1:]) and len(firsts) > 1:
        raise SkipCheckError("every sub-env starts alike (see vector.sub_envs_differ)")
    if any(
        not _same_start(start, starts[i][0][1]) for i in restarted for _, start in starts[i][1:]
    ):
        return
    i = restarted[0]
    t, start = starts[i][1]
    count = sum(len(starts[j]) - 1 for j in restarted)
    out.fail(
        f"each of the {count} autoresets of {len(restarted)} sub-envs restarted its sub-env "
        f"in the episode it drew at reset(seed={ctx.seed}): sub-env {i}'s episode from step "
        f"{t} starts at desired_goal={fmt(start.get('desired_goal'))}, achieved_goal="
        f"{fmt(start.get('achieved_goal'))}, as at the reset. Its generator is seeded again "
        "with its first seed at every autoreset, so training sees one episode per sub-env: "
        "seed it at reset(seed=...) only and let autoresets continue its draws",
        f"step {t}, sub-env {i}",
    )


@register("vector.sub_envs_differ", "warning", "the sub-envs are not copies of one another")
def check_sub_envs_differ(ctx: Context, out: Outcome) -> None:
    single_space(ctx)
    run = vector_rollout(ctx)
    if run.num_envs < 2:
        raise SkipCheckError("needs two sub-envs or more")
    if not isinstance(run.reset_obs, Mapping):
        raise SkipCheckError("reset returned no observation dict")
    copies = all(
        bool(rows_equal(np.asarray(v), np.broadcast_to(np.asarray(v)[:1], np.shape(v))).all())
        for v in run.reset_obs.values()
    )
    if copies:
        out.fail(
            f"reset(seed={ctx.seed}) gave all {run.num_envs} sub-envs the same observation "
            f"(desired_goal {fmt(np.asarray(run.reset_obs['desired_goal'])[0])}): they are "
            "copies, seeded alike; seed sub-env i with seed + i (gymnasium's vector envs do)",
            "reset",
        )
        return
    alike, groups = 0, 0
    for t in range(len(run.steps)):
        rows = np.flatnonzero(run.new_starts(t))
        if rows.size < 2:
            continue
        groups += 1
        goals = np.asarray(run.steps[t].obs["desired_goal"])[rows]
        if rows_equal(goals, np.broadcast_to(goals[:1], goals.shape)).all():
            alike += 1
    if groups >= 3 and alike == groups:
        out.fail(
            f"at each of the {groups} steps where several sub-envs restarted together, they "
            "all drew the same desired_goal: autoresets draw from one generator state copied "
            "to every sub-env"
        )


@register("vector.isolation", "error", "changing one sub-env's actions changes no other sub-env")
def check_isolation(ctx: Context, out: Outcome) -> None:
    run = _run(ctx)
    n = run.num_envs
    if n < 2:
        raise SkipCheckError("needs two sub-envs or more")
    again = replay(ctx)
    diff = _first_difference(run, again)
    horizon = len(again.steps) if diff is None else diff[0]
    if horizon <= 0:
        raise SkipCheckError(
            "the same seed and actions do not reproduce the rollout (see vector.seed), so a "
            "change cannot be told from noise"
        )
    space = ctx.env.single_action_space
    actions = []
    for t, step in enumerate(again.steps[:horizon]):
        batch = step.actions.copy()
        batch[0] = other_action(space, batch[0], t)
        actions.append(batch)
    probe = drive(ctx, ctx.env, ctx.seed, actions, "isolation probe: ")
    # Once sub-env 0's episodes end elsewhere, a restarting sub-env may draw from a
    # generator the sub-envs share (a torch twin's): from its restart on, it may differ.
    pairs = enumerate(zip(again.steps, probe.steps, strict=False))
    diverged = next((t for t, (x, y) in pairs if x.done[0] != y.done[0]), None)
    active = np.arange(n) > 0  # every sub-env but 0
    for t in range(min(len(again.steps), len(probe.steps))):
        a, b = again.steps[t], probe.steps[t]
        if diverged is not None and t >= diverged:
            active &= ~(again.new_starts(t) | probe.new_starts(t))
            if t > 0:
                prior = again.steps[t - 1].mask_reset
                if prior is not None:
                    active &= ~prior
        for what, x, y in _step_pairs(a, b, "info['is_success']"):
            if np.ndim(x) == 0 or np.shape(x) != np.shape(y):
                continue  # not one value per sub-env: vector.success
            changed = ~rows_equal(x, y) & active
            if changed.any():
                i = int(np.flatnonzero(changed)[0])
                out.fail(
                    f"changing only sub-env 0's actions (to {fmt(actions[t][0])} at step {t}) "
                    f"changed sub-env {i}'s {what}: {fmt(np.asarray(x)[i])} became "
                    f"{fmt(np.asarray(y)[i])} ({int(changed.sum())} of {n - 1} other sub-envs "
                    "at that step): the sub-envs are coupled (a reduction over the batch axis "
                    "in step, actions scaled by the batch, one sub-env's success ending all)",
                    f"step {t}",
                )
                return


# --------------------------------------------------------------------------- devices


@register(
    "vector.device",
    "error",
    "a torch env returns every result, mask and goal-function value on its device",
)
def check_vector_device(ctx: Context, out: Outcome) -> None:
    run = vector_rollout(ctx)
    declared = getattr(getattr(ctx.env, "unwrapped", ctx.env), "device", None)
    if not run.arrays.torch:
        declared_torch = declared is not None and (
            type(declared).__module__.startswith("torch") or isinstance(declared, str)
        )
        if declared_torch and run.kinds:
            out.fail(
                f"the env declares device {declared!r} but returns numpy arrays: a torch "
                "consumer copies every batch back to the device"
            )
            return
        raise SkipCheckError("the env returns numpy arrays, not torch tensors")
    expected = f"tensor on {run.arrays.device}"
    results = ("rewards", "terminations", "truncations")
    for (name, kind), where in run.kinds.items():
        if kind == expected:
            continue
        if (
            name in results
            or name.startswith("obs[")
            or kind == "numpy"
            or kind.startswith("tensor")
        ):
            out.fail(
                f"{name} is a {kind} where the env's observations are {expected}s: every "
                "result and mask of a torch env lives on its device (a numpy array or host "
                "tensor beside device ones costs a copy each step, or breaks the consumer)",
                where,
            )
    methods = goal_methods(ctx)
    if not run.steps or methods.per_row:
        return
    achieved, desired = stacked(run, "achieved_goal"), stacked(run, "desired_goal")
    if achieved is None or desired is None:
        return
    info = info_argument(methods, row_infos(run.steps[0].info, run.num_envs), run.arrays)
    for name, fn in methods.named().items():
        if fn is None:
            continue
        result = ctx.call(
            f"{name} of tensors", fn, run.arrays(achieved[0]), run.arrays(desired[0]), info
        )
        if not is_tensor(result) or str(result.device) != str(run.arrays.device):
            kind = f"tensor on {result.device}" if is_tensor(result) else type(result).__name__
            out.fail(
                f"{name} of goals on {run.arrays.device} returned a {kind}: goal functions "
                "return tensors on their goals' device (a HER buffer on the device calls them "
                "for every sampled batch)"
            )


@register(
    "vector.single_equal",
    "error",
    "the vector env equals gymnasium's SyncVectorEnv of its single env",
)
def check_single_equal(ctx: Context, out: Outcome) -> None:
    if ctx.single_factory is None:
        raise SkipCheckError(
            "no single env of this vector env is known (an id with both entry points, or "
            "--single ID)"
        )
    run = _run(ctx)
    if run.arrays.torch:
        raise SkipCheckError(
            "the env returns tensors: a device twin draws its episodes from its device's "
            "generator, not from each single env's seed"
        )
    rows = min(run.num_envs, SINGLE_ROWS)
    sync = ctx.call(
        f"building SyncVectorEnv of {rows} single envs",
        gym.vector.SyncVectorEnv,
        [ctx.single_factory] * rows,
        autoreset_mode=run.mode,
    )
    actions = [s.actions[:rows] for s in run.steps]
    try:
        reference = drive(ctx, sync, ctx.seed, actions, "SyncVectorEnv of the single env: ")
    finally:
        ctx.call("closing the SyncVectorEnv", sync.close)
    if reference.stopped:
        raise SkipCheckError(f"SyncVectorEnv of the single env stopped: {reference.stopped}")
    diff = _first_difference(run, reference, slice(0, rows))
    if diff is not None:
        t, i, what, x, y = diff
        where = "reset" if t < 0 else f"step {t}"
        out.fail(
            f"at {where} sub-env {i} gave {what} = {fmt(x)}; SyncVectorEnv of the single env "
            f"(seed {ctx.seed} + {i}, the same actions) gave {fmt(y)}: the vector env and "
            "the single env have drifted apart",
            where,
        )
