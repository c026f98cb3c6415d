"""Checks of the Gymnasium API as the rollout met it: reset, step, observations."""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs.checker.context import Context, SkipCheckError
from goalenvs.checker.probe import Rollout, fmt, goal_space, rollout, same, view_text
from goalenvs.checker.registry import Outcome, register


@register("api.reset", "error", "reset(seed=, options=) returns (obs, info)")
def check_reset(ctx: Context, out: Outcome) -> None:
    try:
        params: Mapping[str, inspect.Parameter] = inspect.signature(
            ctx.env.unwrapped.reset
        ).parameters
    except (TypeError, ValueError):
        params = {}
    has_var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
    for name in ("seed", "options"):
        if params and name not in params and not has_var_kw:
            out.fail(f"reset has no '{name}' keyword argument: signature {list(params)}")
    ro = rollout(ctx)
    _report_problems(out, ro.reset_problems, "resets", ro.causes)


@register("api.step", "error", "step returns (obs, float reward, bool, bool, dict) without raising")
def check_step(ctx: Context, out: Outcome) -> None:
    ro = rollout(ctx)
    if not ro.episodes:
        raise SkipCheckError(f"no successful reset ({ro.stopped})")
    _report_problems(out, ro.step_problems, "steps", ro.causes)


def _report_problems(
    out: Outcome, problems: list[tuple[str, str]], unit: str, causes: dict[str, str]
) -> None:
    """One finding per kind of problem (its first words), with how often it recurred."""
    first: dict[str, tuple[str, str]] = {}
    counts: dict[str, int] = {}
    for where, message in problems:
        kind = " ".join(message.split(" ")[:2])
        first.setdefault(kind, (where, message))
        counts[kind] = counts.get(kind, 0) + 1
    for kind, (where, message) in first.items():
        again = counts[kind] - 1
        more = f" (and {again} more {unit} like it)" if again else ""
        out.fail(message + more, where, cause=causes.get(where))


def _observations(ro: Rollout) -> list[tuple[str, Any, Any]]:
    """(where, copy, returned object) of every observation of the rollout."""
    items = []
    for i, episode in enumerate(ro.episodes):
        items.append((f"reset of episode {i}", episode.reset_obs, episode.reset_obs_ref))
        items.extend((f"step {s.t}", s.obs, s.obs_ref) for s in episode.steps)
    return items


def _entries(ctx: Context, out: Outcome | None = None) -> Iterator[tuple[str, str, Any, Any]]:
    """``(where, key, value, space)`` of every entry of every observation of the rollout,
    in order. With ``out``, an observation that is no dict, or lacks keys, is a finding."""
    space = goal_space(ctx)
    for where, obs, _ in _observations(rollout(ctx)):
        if not isinstance(obs, Mapping):
            if out is not None:
                out.fail(f"observation is a {type(obs).__name__}, expected a dict", where)
            continue
        missing = [k for k in space.spaces if k not in obs]
        if missing and out is not None:
            out.fail(f"observation lacks keys {missing}", where)
        for key, sub in space.spaces.items():
            if key in obs:
                yield where, key, obs[key], sub


@register("api.obs_in_space", "error", "every observation (goals included) lies in its space")
def check_obs_in_space(ctx: Context, out: Outcome) -> None:
    reported: set[str] = set()
    for where, key, entry, sub in _entries(ctx, out):
        if key in reported:
            continue
        value = np.asarray(entry)
        try:
            inside = value.shape == sub.shape and sub.contains(value.astype(sub.dtype))
        except (TypeError, ValueError):
            inside = False
        if not inside:
            reported.add(key)
            bounds = (
                f" bounds [{fmt(sub.low)}, {fmt(sub.high)}]" if isinstance(sub, spaces.Box) else ""
            )
            out.fail(
                f"obs[{key!r}] = {fmt(value)} (shape {value.shape}) is outside {sub}{bounds}",
                where,
            )


@register("api.obs_dtype", "error", "every observation array has its space's dtype")
def check_obs_dtype(ctx: Context, out: Outcome) -> None:
    for where, key, entry, sub in _entries(ctx):
        dtype = np.asarray(entry).dtype
        if sub.dtype is not None and dtype != sub.dtype:
            out.fail_once(
                key,
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
    for where, obs, ref in _observations(ro):
        if not isinstance(ref, Mapping):
            continue
        for key, value in ref.items():
            if key not in obs:
                continue
            now = np.asarray(value)
            if not same(now, obs[key]):
                change = f" (from {fmt(obs[key])} to {fmt(now)})"
                out.fail_once(key, view_text(f"obs[{key!r}]", where, change), where)
