"""What the checker gathers from an env: the recorded rollout, goal pairs and batches,
every env call through :meth:`Context.call` and every result copied."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import numpy as np
from gymnasium import spaces

from goalenvs.checker.context import (
    Context,
    EnvCallError,
    EnvHungError,
    EnvTimeoutError,
    SkipCheckError,
)
from goalenvs.core import GOAL_KEYS

BATCH_SIZES = (1, 2, 7, 32)
LEADING_SHAPE = (3, 4)
# Every batch shape the goal methods are called with: flat batches, then a leading shape.
BATCH_SHAPES = [(n,) for n in BATCH_SIZES] + [LEADING_SHAPE]
ATOL = 1e-5
RTOL = 1e-5

# --------------------------------------------------------------------------- formatting


def fmt(value: object) -> str:
    """A short, readable one-line rendering of an array, scalar or dict for evidence."""
    if isinstance(value, Mapping):
        text = "{" + ", ".join(f"{k!r}: {fmt(v)}" for k, v in value.items()) + "}"
        return text if len(text) <= 160 else text[:157] + "...}"
    if isinstance(value, (np.ndarray, list, tuple)) or np.isscalar(value):
        try:
            arr = np.asarray(value)
            if arr.dtype.kind == "f":
                text = np.array2string(
                    arr,
                    separator=", ",
                    threshold=12,
                    max_line_width=10_000,
                    formatter={"float_kind": _short_float},  # type: ignore[arg-type]
                )
                return text.replace("\n", "")
            if arr.dtype.kind in "iub":
                text = np.array2string(arr, separator=", ", threshold=12, max_line_width=10_000)
                return text.replace("\n", "")
        except (ValueError, TypeError):
            pass
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _short_float(x: float) -> str:
    x = float(x) + 0.0  # -0.0 (what -(False) gives) reads as 0.0
    if not np.isfinite(x) or x == 0 or 1e-4 <= abs(x) < 1e6:
        return repr(round(x, 4))
    return f"{x:.4g}"


def values_close(a: Any, b: Any) -> bool:
    return bool(np.allclose(a, b, atol=ATOL, rtol=RTOL, equal_nan=True))


def disagree(field: str, returned: Any, computed: Any) -> np.ndarray:
    """Per transition (a single env's step, a batch's row): whether the ``field`` returned
    breaks its goal function's rule: a reward close to it, a goal truncation made (a time
    limit may add more), any other flag equal to it as a bool."""
    got, value = np.asarray(returned), np.asarray(computed)
    if field == "reward":
        a, b = got.astype(np.float64), value.astype(np.float64)
        return ~np.isclose(a, b, atol=ATOL, rtol=RTOL, equal_nan=True)
    if field == "truncated":
        return value.astype(bool) & ~got.astype(bool)
    return got.astype(bool) != value.astype(bool)


def mismatch(field: str, got: Any, name: str, args: tuple, value: Any, source: str = "") -> str:
    """The one wording of a step whose ``field`` disagrees with goal function ``name`` of
    ``args``: (achieved_goal, desired_goal), and the info when it is shown."""
    keys = ("achieved_goal", "desired_goal", "info")
    shown = ", ".join(f"{k}={fmt(v)}" for k, v in zip(keys, args, strict=False))
    return f"step returned {field} = {fmt(got)} but {name}({shown}){source} = {fmt(value)}"


def view_text(name: str, where: str, change: str = "", fix: str = "return a copy") -> str:
    """The one wording of a returned value a later step changed: a view of env state."""
    return (
        f"{name} returned at {where} changed when the env stepped again{change}: it is a view "
        f"of env state (a buffer storing the reference stores the wrong value); {fix}"
    )


def replay_text(seed: int, what: str, now: object, then: object, where: str = "") -> str:
    """The one wording of a replay unlike the first run (at the reset when no ``where``)."""
    if not where:
        return f"reset(seed={seed}) gave {what} = {fmt(now)}, the first time {fmt(then)}"
    return (
        f"replaying reset(seed={seed}) and the same actions gave {what} = {fmt(now)} at "
        f"{where}, the first run {fmt(then)}"
    )


def goal_moved(who: str, was: object, now: object, t: int, context: str = "") -> str:
    """The one wording of a desired goal that moved within an episode of ``who``."""
    return (
        f"{who} desired_goal moved from {fmt(was)} to {fmt(now)} at step {t} without its "
        f"episode ending{context}: HER assumes one goal per episode"
    )


def is_real_scalar(value: object) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, (int, float, np.integer, np.floating)):
        return True
    return isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "fiu"


def is_bool_like(value: object) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, np.ndarray) and value.shape == ():
        return value.dtype == bool or (value.dtype.kind in "iuf" and float(value) in (0.0, 1.0))
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value) in (0.0, 1.0)
    return False


def success_flag(info: object) -> bool | None:
    """``info["is_success"]`` as a bool, or None when it is missing or not bool-like: the
    one rule every check and the probe's footer read success by (docs/checks.md#success.bool)."""
    value = info.get("is_success") if isinstance(info, Mapping) else None
    return None if value is None or not is_bool_like(value) else bool(value)


def copy_obs(obs: object) -> object:
    if isinstance(obs, Mapping):
        return {k: np.array(v, copy=True) for k, v in obs.items()}
    return np.array(obs, copy=True)


def copy_info(info: object) -> Any:
    try:
        return copy.deepcopy(info)
    except Exception:  # an info holding an uncopyable object: a shallow copy is the best we can do
        return dict(info) if isinstance(info, Mapping) else info


def same(a: object, b: object) -> bool:
    """Exact structural equality of observations and info values (dicts, lists, arrays)."""
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)) or a.keys() != b.keys():
            return False
        return all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    arr_a: object
    arr_b: Any
    try:
        arr_a, arr_b = np.asarray(a), np.asarray(b)
    except Exception:  # not array-like at all: identity or == below
        arr_a = arr_b = None
    if arr_a is not None and arr_a.dtype != object and arr_b.dtype != object:
        numeric = arr_a.dtype.kind in "fc" and arr_b.dtype.kind in "fc"
        return arr_a.shape == arr_b.shape and bool(np.array_equal(arr_a, arr_b, equal_nan=numeric))
    if arr_a is not None and arr_a.ndim > 0 and arr_a.shape == arr_b.shape:
        return all(same(x, y) for x, y in zip(arr_a.ravel(), arr_b.ravel(), strict=True))
    if type(a) is type(b) and type(a).__eq__ is object.__eq__:
        # An object without its own == (compared with a deep copy of itself) cannot be
        # told apart; calling it different would be a false finding.
        return True
    try:
        return bool(a == b)
    except Exception:  # an == that returns no single truth value
        return a is b


# --------------------------------------------------------------------------- rollout


@dataclass
class StepRecord:
    """One step of the rollout, with copies of everything the env returned."""

    episode: int
    t: int  # step index within the whole rollout
    action: object
    obs: Any
    obs_ref: object  # the objects the env returned, kept to detect later in-place changes
    reward: float
    terminated: bool
    truncated: bool
    info: dict
    info_ref: object = None  # the info object step returned (info.fresh compares identities)
    before: Any = None  # a copy of the observation the step started from (reset's or a step's)


@dataclass
class Episode:
    reset_obs: Any
    reset_obs_ref: object
    reset_info: dict
    steps: list[StepRecord] = field(default_factory=list)


@dataclass
class Rollout:
    """The shared random-action rollout; ``stopped`` says why it ended early, if it did."""

    episodes: list[Episode] = field(default_factory=list)
    actions: list[object] = field(default_factory=list)
    reset_problems: list[tuple[str, str]] = field(default_factory=list)
    step_problems: list[tuple[str, str]] = field(default_factory=list)
    causes: dict[str, str] = field(default_factory=dict)  # where -> the env's exception
    stopped: str | None = None

    @property
    def steps(self) -> list[StepRecord]:
        return [s for e in self.episodes for s in e.steps]


def parse_reset(ret: object, where: str, problems: list) -> tuple[Any, dict] | None:
    """``(obs, info)`` of what ``reset`` returned, or None when it is not a pair; each
    deviation from gymnasium's API is appended to ``problems`` as ``(where, message)``."""
    if not isinstance(ret, tuple) or len(ret) != 2:
        n = len(ret) if isinstance(ret, tuple) else "not a tuple"
        problems.append(
            (where, f"reset returned {type(ret).__name__} ({n}), expected the tuple (obs, info)")
        )
        return None
    obs, info = ret
    if not isinstance(info, dict):
        problems.append((where, f"reset's info is a {type(info).__name__}, expected a dict"))
        info = {}
    return obs, info


def parse_step(ret: object, where: str, problems: list) -> tuple | None:
    """``(obs, reward, terminated, truncated, info)`` of what ``step`` returned, as a float
    and two bools, or None when it is not a 5-tuple; each deviation from gymnasium's API
    is appended to ``problems`` as ``(where, message)``."""

    def problem(message: str) -> None:
        problems.append((where, message))

    if not isinstance(ret, tuple) or len(ret) != 5:
        n = f"length {len(ret)}" if isinstance(ret, tuple) else "not a tuple"
        problem(
            f"step returned {type(ret).__name__} ({n}), expected "
            "(obs, reward, terminated, truncated, info)"
        )
        return None
    obs, reward, terminated, truncated, info = ret
    if not is_real_scalar(reward):
        problem(
            f"reward is {fmt(reward)} of type {type(reward).__name__}, expected a real "
            "scalar (float)"
        )
    for name, value in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(value, (bool, np.bool_)):
            problem(f"{name} is {fmt(value)} of type {type(value).__name__}, expected a bool")
    if not isinstance(info, dict):
        problem(f"info is a {type(info).__name__}, expected a dict")
        info = {}
    try:
        reward_value = float(np.asarray(reward, dtype=np.float64).reshape(-1)[0])
    except (TypeError, ValueError, IndexError):
        reward_value = float("nan")
    flags = [bool(np.asarray(flag).reshape(-1)[0]) for flag in (terminated, truncated)]
    return obs, reward_value, *flags, info


def rollout(ctx: Context) -> Rollout:
    """The shared rollout: ``ctx.steps`` random actions from ``reset(seed=ctx.seed)``."""
    return ctx.cached("rollout", _record_rollout)


_STOPPED = object()  # what an env call that stopped the rollout returns


def _record_rollout(ctx: Context) -> Rollout:
    env, ro = ctx.env, Rollout()

    def call(
        where: str, problems: list, description: str, fn: Callable, *args: Any, **kw: Any
    ) -> Any:
        """``fn(*args, **kw)`` on the env's thread, or :data:`_STOPPED` with the reason kept."""
        try:
            return ctx.call(description, fn, *args, **kw)
        except EnvCallError as error:
            problems.append((where, str(error)))
            ro.causes[where] = error.cause
            ro.stopped = str(error)
        except (EnvTimeoutError, EnvHungError) as error:
            ro.stopped = str(error)
        return _STOPPED

    def reset(where: str, description: str, **kw: Any) -> bool:
        """A reset recorded as a new episode's start; False when it stopped the rollout."""
        ret = call(where, ro.reset_problems, description, env.reset, **kw)
        if ret is _STOPPED:
            return False
        parsed = parse_reset(ret, where, ro.reset_problems)
        if parsed is None:
            ro.stopped = "reset did not return (obs, info)"
            return False
        ro.episodes.append(Episode(copy_obs(parsed[0]), parsed[0], copy_info(parsed[1])))
        return True

    seeded = call("reset", ro.reset_problems, "action_space.seed", env.action_space.seed, ctx.seed)
    if seeded is _STOPPED:
        return ro
    ro.actions = [env.action_space.sample() for _ in range(ctx.steps)]
    if not reset("reset", f"reset(seed={ctx.seed})", seed=ctx.seed):
        return ro
    for t, action in enumerate(ro.actions):
        where = f"step {t}"
        ret = call(where, ro.step_problems, f"step {t}: step({fmt(action)})", env.step, action)
        if ret is _STOPPED:
            return ro
        parsed_step = parse_step(ret, where, ro.step_problems)
        if parsed_step is None:
            ro.stopped = "step did not return five values"
            return ro
        obs, reward, terminated, truncated, info = parsed_step
        episode = ro.episodes[-1]
        before = episode.steps[-1].obs if episode.steps else episode.reset_obs
        copies = (copy_obs(obs), obs, reward, terminated, truncated, copy_info(info), info)
        episode.steps.append(StepRecord(len(ro.episodes) - 1, t, action, *copies, before))
        ended = (terminated or truncated) and t + 1 < len(ro.actions)
        if ended and not reset(f"reset after step {t}", f"reset after step {t}"):
            return ro
    return ro


def is_goal_dict(space: object) -> TypeGuard[spaces.Dict]:
    """Whether ``space`` is a Dict holding the three goal keys."""
    return isinstance(space, spaces.Dict) and all(k in space.spaces for k in GOAL_KEYS)


def goal_space(ctx: Context) -> spaces.Dict:
    """The observation space when it is a goal Dict, else the check is skipped."""
    space = ctx.env.observation_space
    if not is_goal_dict(space):
        raise SkipCheckError("the observation space is not a goal Dict (see space.dict)")
    return space


def goal_steps(ctx: Context) -> list[StepRecord]:
    """Rollout steps whose observation is a dict holding both goals."""
    goal_space(ctx)
    ro = rollout(ctx)
    steps = [
        s
        for s in ro.steps
        if isinstance(s.obs, Mapping) and "achieved_goal" in s.obs and "desired_goal" in s.obs
    ]
    if not steps:
        raise SkipCheckError(
            f"the rollout produced no goal observations ({ro.stopped or 'no steps'})"
        )
    return steps


def call_goal(
    ctx: Context, description: str, fn: Callable, achieved: object, desired: object, info: object
) -> Any:
    """Calls a goal method on copies of its arguments (one that writes into them must not
    corrupt the rollout; reward.no_mutation reports it)."""
    ag, dg = np.array(achieved, copy=True), np.array(desired, copy=True)
    return ctx.call(description, fn, ag, dg, copy_info(info))


def method(ctx: Context, name: str) -> Callable:
    """The env's goal method, or the check is skipped (``reward.present`` reports it)."""
    fn = ctx.goal_method(name)
    if fn is None:
        if name == "compute_reward":
            raise SkipCheckError("the env has no compute_reward (see reward.present)")
        raise SkipCheckError(f"the env does not define {name} (optional)")
    if name == "compute_reward" and not _takes_goal_args(fn):
        # Every call would raise the same TypeError: reported once, by reward.signature.
        raise SkipCheckError(
            "compute_reward cannot take its three arguments (see reward.signature)"
        )
    return fn


def _takes_goal_args(fn: Callable) -> bool:
    try:
        inspect.signature(fn).bind(np.zeros(1), np.zeros(1), {})
    except TypeError:
        return False
    except ValueError:  # no signature to inspect (a builtin): assume it does
        return True
    return True


@dataclass
class Pair:
    """One goal pair of a test batch, with its origin (for evidence)."""

    achieved: np.ndarray
    desired: np.ndarray
    info: dict
    origin: str


def goal_sampler(ctx: Context) -> spaces.Space:
    """A seeded copy of the desired-goal space (the env's own space RNG is left alone)."""

    def build(ctx: Context) -> spaces.Space:
        sampler = copy.deepcopy(goal_space(ctx)["desired_goal"])
        sampler.seed(ctx.seed)
        return sampler

    return ctx.cached("goal_sampler", build)


def goal_pairs(ctx: Context, n: int) -> list[Pair]:
    """``n`` heterogeneous goal pairs: rollout pairs, goal-space draws and goal == goal."""
    steps = goal_steps(ctx)
    goal_sp = goal_sampler(ctx)
    pairs = []
    for i in range(n):
        step = steps[int(ctx.rng.integers(len(steps)))]
        other = steps[int(ctx.rng.integers(len(steps)))]
        ag, dg, kind = step.obs["achieved_goal"], step.obs["desired_goal"], i % 4
        if kind == 0:
            pair = (ag, dg, f"step {step.t}")
        elif kind == 1:
            pair = (np.asarray(goal_sp.sample()), np.asarray(goal_sp.sample()), "goal-space draws")
        elif kind == 2:
            pair = (ag, ag, f"achieved goal of step {step.t} as both goals")
        else:
            origin = f"achieved goal of step {other.t}, desired goal of step {step.t}"
            pair = (other.obs["achieved_goal"], dg, origin)
        pairs.append(Pair(pair[0], pair[1], step.info, pair[2]))
    return pairs


def stack_pairs(pairs: list[Pair], shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    ag = np.stack([np.asarray(p.achieved) for p in pairs])
    dg = np.stack([np.asarray(p.desired) for p in pairs])
    return ag.reshape(*shape, *ag.shape[1:]), dg.reshape(*shape, *dg.shape[1:])


def stack_infos(
    infos: Sequence[Mapping], kinds: str | None = None, convert: Callable[[Any], Any] = np.asarray
) -> dict[str, Any]:
    """The infos as one dict of per-key arrays (as goalenvs' buffer stores them): the keys
    every info holds whose values stack (into an array of dtype kind ``kinds``, if given)
    and ``convert`` takes (a key it raises TypeError or ValueError on is left out)."""
    keys = set.intersection(*(set(d) for d in infos)) if infos else set()
    stacked = {}
    for key in sorted(keys, key=str):
        try:
            values = np.stack([np.asarray(d[key]) for d in infos])
            if kinds is None or values.dtype.kind in kinds:
                stacked[key] = convert(values)
        except (ValueError, TypeError):
            continue
    return stacked


def info_array(pairs: list[Pair], shape: tuple[int, ...]) -> np.ndarray:
    infos = np.empty(len(pairs), dtype=object)
    for i, p in enumerate(pairs):
        infos[i] = p.info
    return infos.reshape(shape)


@dataclass
class BatchEval:
    """A batched call of a goal method next to the per-element calls it must equal."""

    shape: tuple[int, ...]
    pairs: list[Pair]
    singles: list[Any]
    result: Any = None
    error: EnvCallError | None = None
    info_form: str = ""


def perturbed(value: Any) -> object:
    """A different value of the same kind (bool flipped, number + 1), or None."""
    if isinstance(value, (bool, np.bool_)):
        return not value
    arr = np.asarray(value) if isinstance(value, (int, float, np.number, np.ndarray)) else None
    if arr is None or arr.dtype.kind not in "fiub":
        return None
    if arr.dtype == bool:
        changed = ~arr
    else:
        changed = (arr + 1).astype(arr.dtype)
        # + 1 is lost on large floats (1e30 + 1 == 1e30); the negation is not.
        changed = np.where(changed == arr, -arr - 1, changed).astype(arr.dtype)
    if isinstance(value, np.ndarray):
        return changed
    scalar = changed[()]
    return type(value)(scalar) if type(value) in (int, float) else scalar


def same_value(a: Any, b: Any) -> bool:
    try:
        return np.shape(a) == np.shape(b) and values_close(
            np.asarray(a, float), np.asarray(b, float)
        )
    except (TypeError, ValueError):
        return False


def evaluate_batches(ctx: Context, name: str) -> list[BatchEval]:
    """Batched calls of goal method ``name`` over several batch shapes, with singles."""

    def build(ctx: Context) -> list[BatchEval]:
        fn = method(ctx, name)
        evals = []
        for shape in BATCH_SHAPES:
            n = int(np.prod(shape))
            pairs = goal_pairs(ctx, n)
            singles = [
                call_goal(ctx, f"{name}(one pair)", fn, p.achieved, p.desired, p.info)
                for p in pairs
            ]
            ag, dg = stack_pairs(pairs, shape)
            ev = BatchEval(shape, pairs, singles)
            # The step infos go with the batch, as with the singles; None is the last resort,
            # compared with singles that get None too (reward.info_forms reports failures).
            forms: list[tuple[str, Any]] = [
                ("an object array of the step infos", info_array(pairs, shape)),
                ("a list of the step infos", [p.info for p in pairs]),
                ("None", None),
            ]
            for form, info in forms:
                try:
                    ev.result = call_goal(ctx, f"{name}(batch {shape})", fn, ag, dg, info)
                except EnvCallError as error:
                    ev.error, ev.info_form = error, form
                    continue
                ev.error, ev.info_form = None, form
                if info is None:
                    ev.singles = [
                        call_goal(ctx, f"{name}(one pair, None)", fn, p.achieved, p.desired, None)
                        for p in pairs
                    ]
                break
            evals.append(ev)
        return evals

    return ctx.cached(f"batches:{name}", build)


def pair_text(p: Pair) -> str:
    return f"achieved_goal={fmt(p.achieved)}, desired_goal={fmt(p.desired)} ({p.origin})"
