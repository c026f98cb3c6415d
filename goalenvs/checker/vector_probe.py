"""What the checker gathers from a vector env: recorded batched rollouts, every batch
copied to numpy at once and read through the declared autoreset mode, and goal functions.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from goalenvs.checker.context import Context, EnvCallError, SkipCheckError, find_method
from goalenvs.checker.probe import is_goal_dict, stack_infos
from goalenvs.core.backend import is_tensor
from goalenvs.core.types import DeviceLike

# Keys of a vector info that are not per-sub-env step values.
FINAL_KEYS = ("final_obs", "final_info", "final_observation")
# Sub-envs of the single-env comparison (``vector.single_equal``): each is one single env.
SINGLE_ROWS = 8

# --------------------------------------------------------------------------- arrays


def is_vector_env(env: object) -> bool:
    """Whether ``env`` is a gymnasium vector env (wrapped or not)."""
    return isinstance(env, gym.vector.VectorEnv)


def array_kind(value: object) -> str:
    """``numpy``, ``tensor on <device>``, or the type's name: where a result lives."""
    if isinstance(value, np.ndarray):
        return "numpy"
    if is_tensor(value):
        return f"tensor on {value.device}"
    return type(value).__name__


def to_numpy(value: object) -> object:
    """A numpy copy of an array, tensor, scalar or dict of them; else a deep copy."""
    if isinstance(value, Mapping):
        return {k: to_numpy(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.copy()
    if is_tensor(value):
        return value.detach().cpu().numpy().copy()
    if isinstance(value, (bool, int, float, np.generic)):
        return np.asarray(value)
    try:
        return copy.deepcopy(value)
    except Exception:  # an uncopyable object: the reference is the best we have
        return value


class EnvArrays:
    """Turns numpy arrays into what the env takes: numpy, or tensors on its device."""

    def __init__(self, device: DeviceLike = None) -> None:
        self.device = device

    @property
    def torch(self) -> bool:
        """Whether the env returns torch tensors."""
        return self.device is not None

    def __call__(self, value: object) -> object:
        if self.device is None or not isinstance(value, np.ndarray) or value.dtype == object:
            return value
        import torch

        return torch.as_tensor(np.ascontiguousarray(value), device=self.device)


def env_arrays(obs: object) -> EnvArrays:
    """Torch on the device of the batch's first tensor, else numpy."""
    values = obs.values() if isinstance(obs, Mapping) else [obs]
    for value in values:
        if is_tensor(value):
            return EnvArrays(value.device)
    return EnvArrays(None)


def random_actions(space: spaces.Space, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` random actions of ``space`` (a single action space) as one batch."""
    if isinstance(space, spaces.Box):
        low = np.broadcast_to(space.low, space.shape)
        high = np.broadcast_to(space.high, space.shape)
        if np.issubdtype(space.dtype, np.integer):
            return rng.integers(low, high, size=(n, *space.shape), endpoint=True).astype(
                space.dtype
            )
        finite = np.isfinite(low) & np.isfinite(high)
        draw = rng.uniform(
            np.where(finite, low, -1.0), np.where(finite, high, 1.0), size=(n, *space.shape)
        )
        return draw.astype(space.dtype)
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        return rng.integers(start, start + int(space.n), size=n).astype(space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return rng.integers(0, 2, size=(n, *space.shape)).astype(space.dtype)
    if isinstance(space, spaces.MultiDiscrete):
        draw = (rng.random((n, *space.nvec.shape)) * space.nvec).astype(np.int64)
        return (draw + space.start).astype(space.dtype)
    batched = gym.vector.utils.batch_space(space, n)
    batched.seed(int(rng.integers(2**31)))
    return batched.sample()


def other_action(space: spaces.Space, action: np.ndarray, t: int) -> np.ndarray:
    """An action unlike ``action`` for the isolation probe: a Box bound (high on even
    steps, low on odd ones), the next value of a discrete space."""
    if isinstance(space, spaces.Box):
        bound = space.high if t % 2 == 0 else space.low
        bound = np.where(np.isfinite(bound), bound, np.sign(bound) * 10.0)
        return np.asarray(np.broadcast_to(bound, space.shape), dtype=space.dtype)
    if isinstance(space, spaces.Discrete):
        return np.asarray(
            space.start + (int(action) - space.start + 1) % int(space.n), dtype=space.dtype
        )
    if isinstance(space, spaces.MultiBinary):
        return (1 - np.asarray(action)).astype(space.dtype)
    if isinstance(space, spaces.MultiDiscrete):
        return ((np.asarray(action) - space.start + 1) % space.nvec + space.start).astype(
            space.dtype
        )
    return np.asarray(action)


# --------------------------------------------------------------------------- the env's declarations


def declared_mode(env: object) -> tuple[AutoresetMode, str | None]:
    """The autoreset mode ``env`` declares (next-step when missing, the mode a string
    names), and what is wrong with the declaration (not an :class:`AutoresetMode`)."""
    metadata = getattr(env, "metadata", None) or {}
    if "autoreset_mode" not in metadata:
        return AutoresetMode.NEXT_STEP, None
    value = metadata["autoreset_mode"]
    if isinstance(value, AutoresetMode):
        return value, None
    names = {m.value.lower(): m for m in AutoresetMode}
    names.update({m.name.lower(): m for m in AutoresetMode})
    mode = names.get(str(value).replace("-", "_").lower()) if isinstance(value, str) else None
    problem = (
        f'metadata["autoreset_mode"] is {value!r} ({type(value).__name__}), not an '
        "AutoresetMode: gymnasium's wrappers and trainers compare it with the enum"
    )
    return mode or AutoresetMode.NEXT_STEP, problem


def declared_limit(env: object) -> int | None:
    """The declared episode length: the env's, its spec's or sub-env 0's spec's."""
    unwrapped = getattr(env, "unwrapped", env)
    for value in (
        getattr(unwrapped, "max_episode_steps", None),
        (getattr(getattr(env, "spec", None), "kwargs", None) or {}).get("max_episode_steps"),
        getattr(getattr(env, "spec", None), "max_episode_steps", None),
    ):
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
            return int(value)
    subs = getattr(unwrapped, "envs", None)
    if subs:
        limit = getattr(getattr(subs[0], "spec", None), "max_episode_steps", None)
        if isinstance(limit, int) and limit > 0:
            return limit
    return None


# Keyword arguments a vector env's spec carries that a single env does not take.
VECTOR_ONLY_KWARGS = (
    "num_envs", "vectorization_mode", "vector_kwargs", "wrappers", "autoreset_mode", "device",
    "max_episode_steps",
)  # fmt: skip


def single_env_factory(env: object) -> Callable[[], gym.Env] | None:
    """Builds one single env of a native twin's id (both entry points), else None."""
    spec = getattr(env, "spec", None)
    kwargs = dict(getattr(spec, "kwargs", None) or {})
    if (
        spec is None
        or spec.entry_point is None
        or spec.vector_entry_point is None
        or kwargs.get("vectorization_mode") != "vector_entry_point"
    ):
        return None
    return single_env_builder(spec, kwargs)


def single_env_builder(spec: Any, kwargs: dict[str, Any]) -> Callable[[], gym.Env]:
    """``gym.make`` of ``spec`` with ``kwargs`` less the vector-only ones."""
    single = copy.deepcopy(spec)
    single.kwargs = {k: v for k, v in kwargs.items() if k not in VECTOR_ONLY_KWARGS}
    single.vector_entry_point = None
    limit = kwargs.get("max_episode_steps", spec.max_episode_steps)

    def make() -> gym.Env:
        return gym.make(single, max_episode_steps=limit)

    return make


def num_envs(ctx: Context) -> int:
    """The number of sub-envs, checked to be a positive int."""
    n = getattr(ctx.env, "num_envs", None)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise SkipCheckError(f"num_envs is {n!r}, not a positive int (see vector.spaces)")
    return int(n)


def single_space(ctx: Context) -> spaces.Dict:
    """``single_observation_space`` when it is a goal Dict, else the check is skipped."""
    space = getattr(ctx.env, "single_observation_space", None)
    if not is_goal_dict(space):
        raise SkipCheckError("single_observation_space is not a goal Dict (see vector.spaces)")
    return space


# --------------------------------------------------------------------------- info forms


def per_env_info(info: Mapping) -> dict[str, object]:
    """A vector info's values and masks as numpy copies, less ``final_*`` and dicts."""
    return {
        key: to_numpy(value)
        for key, value in info.items()
        if key not in FINAL_KEYS
        and key.lstrip("_") not in FINAL_KEYS
        and not isinstance(value, Mapping)
    }


def info_rows(info: Mapping, rows: list[int]) -> dict[int, dict[str, object]]:
    """Each row's info dict from a dict of batched arrays with ``_key`` masks, or from
    per-row dicts."""
    if isinstance(info, Mapping):
        out: dict[int, dict[str, object]] = {i: {} for i in rows}
        for key, value in info.items():
            if key.startswith("_") or key in FINAL_KEYS:
                continue
            keep = _mask(info.get("_" + key))
            nested = isinstance(value, Mapping)
            array: Any = info_rows(value, rows) if nested else to_numpy(value)
            if not nested and (not isinstance(array, np.ndarray) or array.ndim == 0):
                continue
            for i in rows:
                if (nested or i < len(array)) and (keep is None or bool(keep[i])):
                    out[i][key] = array[i]
        return out
    items = list(info) if isinstance(info, (list, tuple, np.ndarray)) else []
    return {
        i: dict(items[i]) if i < len(items) and isinstance(items[i], Mapping) else {} for i in rows
    }


def final_obs_rows(value: object, rows: list[int]) -> dict[int, Any]:
    """Each ended row's last observation from ``info["final_obs"]`` (either form)."""
    if isinstance(value, Mapping):
        return {i: {k: to_numpy(v[i]) for k, v in value.items()} for i in rows}
    items = value if isinstance(value, (list, tuple, np.ndarray)) else []
    return {i: to_numpy(items[i]) if i < len(items) else None for i in rows}


# --------------------------------------------------------------------------- the rollout


@dataclass
class VecStep:
    """One batched step, copied to numpy."""

    t: int
    actions: np.ndarray
    obs: Any  # dict of (N, ...) arrays when the env returns one
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    info: dict[str, Any]  # the per-sub-env values and masks (final_* apart)
    final_present: bool = False  # info holds final_obs
    final_obs: dict[int, Any] = field(default_factory=dict)  # ended row -> its last obs
    final_obs_mask: np.ndarray | None = None
    final_info_present: bool = False
    final_info: dict[int, dict[str, object]] = field(default_factory=dict)
    final_info_mask: np.ndarray | None = None
    final_ref: object = None  # info["final_obs"] as returned (read again after the next step)
    obs_ref: object = None  # the obs as returned (read again after the next step)
    # disabled autoreset: the reset(options={"reset_mask": ...}) the driver sent after it
    mask_reset: np.ndarray | None = None
    mask_reset_obs: Any = None

    @property
    def done(self) -> np.ndarray:
        """Rows whose episode ended at this step."""
        return self.terminated | self.truncated


@dataclass
class VecRun:
    """A recorded rollout of a vector env, read through its autoreset mode."""

    mode: AutoresetMode
    num_envs: int
    seed: int
    reset_obs: Any = None
    steps: list[VecStep] = field(default_factory=list)
    # (what, kind) -> where each kind (numpy, tensor on a device) of a value was first seen
    kinds: dict[tuple[str, str], str] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (where, API deviation)
    fresh_problems: list[tuple[str, str]] = field(default_factory=list)  # views of env state
    cause: str | None = None
    stopped: str | None = None
    arrays: EnvArrays = field(default_factory=EnvArrays)

    def reset_rows(self, t: int) -> np.ndarray:
        """Rows that step ``t`` restarted instead of stepping (next-step autoreset)."""
        if self.mode != AutoresetMode.NEXT_STEP or t == 0:
            return np.zeros(self.num_envs, bool)
        return self.steps[t - 1].done.copy()

    def start_obs(self, t: int) -> dict[str, np.ndarray]:
        """The observation each row's step ``t`` started from."""
        if t == 0:
            return self.reset_obs
        before = self.steps[t - 1]
        if before.mask_reset is None:
            return before.obs
        mask = before.mask_reset
        return {
            k: np.where(mask.reshape((-1,) + (1,) * (np.ndim(v) - 1)), before.mask_reset_obs[k], v)
            for k, v in before.obs.items()
        }

    def ended_obs(self, t: int, key: str) -> np.ndarray:
        """Each row's observation ``key`` after step ``t`` (``final_obs`` where it ended)."""
        step = self.steps[t]
        value = step.obs[key].copy()
        if self.mode == AutoresetMode.SAME_STEP:
            for i, obs in step.final_obs.items():
                if isinstance(obs, Mapping) and key in obs:
                    with contextlib.suppress(ValueError, TypeError):  # vector.final_obs reports it
                        value[i] = obs[key]
        return value

    def new_starts(self, t: int) -> np.ndarray:
        """Rows whose returned observation at step ``t`` is a new episode's first."""
        if self.mode == AutoresetMode.SAME_STEP:
            return self.steps[t].done.copy()
        return self.reset_rows(t)  # next-step's restarted rows; none when disabled

    def goal_call(
        self, ctx: Context, what: str, fn: Callable, ag: object, dg: object, info: object
    ) -> np.ndarray:
        """``fn(ag, dg, info)`` with the goals in the env's array kind, as a numpy array."""
        return np.asarray(to_numpy(ctx.call(what, fn, self.arrays(ag), self.arrays(dg), info)))

    def where(self, t: int) -> str:
        """``step t``, noting the sub-envs it restarted."""
        restarted = np.flatnonzero(self.new_starts(t))
        if restarted.size:
            return f"step {t} (autoreset of sub-envs {listing(restarted)})"
        return f"step {t}"


def listing(rows: Any, limit: int = 6) -> str:
    """``1, 4, 7, ... (12 in all)``: sub-env indices for a message."""
    rows = [int(i) for i in rows]
    text = ", ".join(str(i) for i in rows[:limit])
    return text + (f", ... ({len(rows)} in all)" if len(rows) > limit else "")


# The most steps the rollout takes on its own to see two whole episodes.
MAX_EPISODE_STEPS_SEEN = 2_000


def rollout_length(ctx: Context) -> int:
    """``--steps``, and at least two declared episodes (up to the cap)."""
    limit = declared_limit(ctx.env)
    if limit is None:
        return ctx.steps
    return max(ctx.steps, min(2 * limit + 2, MAX_EPISODE_STEPS_SEEN))


def vector_rollout(ctx: Context) -> VecRun:
    """The shared recorded rollout: random actions from ``reset(seed=ctx.seed)``."""

    def build(ctx: Context) -> VecRun:
        n = num_envs(ctx)
        rng = np.random.default_rng(ctx.seed)
        space = getattr(ctx.env, "single_action_space", None)
        if space is None:
            raise SkipCheckError("the env has no single_action_space (see vector.spaces)")
        actions = [random_actions(space, n, rng) for _ in range(rollout_length(ctx))]
        return drive(ctx, ctx.env, ctx.seed, actions, "")

    return ctx.cached("vector_rollout", build)


def replay(ctx: Context) -> VecRun:
    """The shared rollout driven again: the same seed and actions."""

    def build(ctx: Context) -> VecRun:
        first = vector_rollout(ctx)
        actions = [s.actions for s in first.steps]
        return drive(ctx, ctx.env, ctx.seed, actions, "replay: ")

    return ctx.cached("vector_replay", build)


def drive(ctx: Context, env: Any, seed: int, actions: list[np.ndarray], label: str) -> VecRun:
    """Resets ``env`` with ``seed`` and steps it with ``actions``, copying every batch
    (disabled autoreset: ended rows reset by ``reset_mask``); an env call that raises or
    hangs, or a result off the vector API, stops the run."""
    mode, _ = declared_mode(env)
    n = int(env.num_envs)
    run = VecRun(mode, n, seed)
    try:
        ret = ctx.call(f"{label}reset(seed={seed})", env.reset, seed=seed)
    except EnvCallError as error:
        return _raised(run, f"{label}reset", error)
    if not isinstance(ret, tuple) or len(ret) != 2 or not isinstance(ret[1], Mapping):
        problem = f"reset returned {_shape_of(ret)}, expected (obs, infos)"
        return _stop(run, f"{label}reset", problem, "reset did not return (obs, infos)")
    run.arrays = env_arrays(ret[0])
    run.reset_obs = to_numpy(ret[0])
    _note_kinds(run, "reset", ret[0], ret[1])
    for t, batch in enumerate(actions):
        where = f"{label}step {t}"
        try:
            ret = ctx.call(where, env.step, run.arrays(batch))
        except EnvCallError as error:
            return _raised(run, where, error)
        step = _parse_step(run, t, where, batch, ret)
        if step is None:
            return run
        if run.steps:
            _compare_refs(run, run.steps[-1], f"{label}step {t - 1}")
        run.steps.append(step)
        done = step.done
        if mode == AutoresetMode.DISABLED and done.any() and t + 1 < len(actions):
            reset_where = f"{label}reset(options={{'reset_mask': ...}}) after step {t}"
            try:
                ret = ctx.call(
                    reset_where, env.reset, options={"reset_mask": run.arrays(done.copy())}
                )
            except EnvCallError as error:
                return _raised(run, reset_where, error)
            if not isinstance(ret, tuple) or len(ret) != 2:
                stopped = "a masked reset did not return (obs, infos)"
                return _stop(run, reset_where, f"reset returned {_shape_of(ret)}", stopped)
            step.mask_reset = done.copy()
            step.mask_reset_obs = to_numpy(ret[0])
    return run


def _stop(run: VecRun, where: str, problem: str, stopped: str, cause: str | None = None) -> VecRun:
    run.problems.append((where, problem))
    run.stopped, run.cause = stopped, cause
    return run


def _raised(run: VecRun, where: str, error: EnvCallError) -> VecRun:
    return _stop(run, where, str(error), str(error), error.cause)


def _shape_of(ret: object) -> str:
    if isinstance(ret, tuple):
        return f"a tuple of {len(ret)}"
    return f"a {type(ret).__name__}"


def _note_kinds(run: VecRun, where: str, obs: object, info: object, **results: Any) -> None:
    seen = run.kinds
    items: list[tuple[str, Any]] = []
    if isinstance(obs, Mapping):
        items += [(f"obs[{k!r}]", v) for k, v in obs.items()]
    items += list(results.items())
    if isinstance(info, Mapping):
        for key, value in info.items():
            if key in ("final_obs", "final_observation"):
                first = _first_row(value)
                if isinstance(first, Mapping):
                    items += [(f"info[{key!r}][...][{k!r}]", v) for k, v in first.items()]
            elif isinstance(value, Mapping):
                items += [(f"info[{key!r}][{k!r}]", v) for k, v in value.items()]
            else:
                items.append((f"info[{key!r}]", value))
    for name, value in items:
        kind = array_kind(value)
        seen.setdefault((name, kind), where)


def _first_row(final_obs: object) -> object:
    if isinstance(final_obs, Mapping):
        return final_obs
    rows = np.asarray(final_obs, dtype=object).reshape(-1)
    return next((row for row in rows if row is not None), None)


def _parse_step(
    run: VecRun, t: int, where: str, actions: np.ndarray, ret: object
) -> VecStep | None:
    n = run.num_envs

    def problem(message: str) -> None:
        run.problems.append((where, message))

    if not isinstance(ret, tuple) or len(ret) != 5:
        problem(
            f"step returned {_shape_of(ret)}, expected (obs, rewards, terminations, "
            "truncations, infos)"
        )
        run.stopped = "step did not return five values"
        return None
    obs, reward, terminated, truncated, info = ret
    if not isinstance(info, Mapping):
        problem(f"infos is a {type(info).__name__}, expected a dict")
        info = {}
    _note_kinds(
        run, where, obs, info, rewards=reward, terminations=terminated, truncations=truncated
    )
    arrays = {}
    for name, value, kind in (
        ("rewards", reward, "f"),
        ("terminations", terminated, "b"),
        ("truncations", truncated, "b"),
    ):
        array = np.asarray(to_numpy(value))
        if array.shape != (n,):
            problem(f"{name} has shape {array.shape}, expected (num_envs,) = ({n},)")
            if array.size == 1:
                array = np.full(n, array.reshape(-1)[0])
            else:
                run.stopped = f"{name} does not hold one value per sub-env"
                return None
        if kind == "b" and array.dtype != np.bool_:
            problem(f"{name} has dtype {array.dtype}, expected bool")
            array = array.astype(bool)
        if kind == "f" and array.dtype.kind not in "fiu":
            problem(f"{name} has dtype {array.dtype}, expected float")
            array = array.astype(np.float64)
        arrays[name] = array
    r, te, tr = arrays.values()  # as numpy arrays of one value per sub-env
    step = VecStep(
        t, np.asarray(actions), to_numpy(obs), r, te, tr, per_env_info(info), obs_ref=obs
    )
    ended = np.flatnonzero(step.done).tolist()
    final = info.get("final_obs", info.get("final_observation"))
    if final is not None:
        step.final_present, step.final_ref = True, final
        step.final_obs_mask = _mask(info.get("_final_obs", info.get("_final_observation")))
        step.final_obs = final_obs_rows(final, ended)
    if "final_info" in info:
        step.final_info_present = True
        step.final_info_mask = _mask(info.get("_final_info"))
        step.final_info = info_rows(info["final_info"], ended)
    return step


def _mask(value: object) -> np.ndarray | None:
    return None if value is None else np.asarray(to_numpy(value))


def _compare_refs(run: VecRun, step: VecStep, where: str) -> None:
    """A value ``step`` returned that changed since was a view of env state."""
    if isinstance(step.obs_ref, Mapping) and isinstance(step.obs, Mapping):
        for key, value in step.obs_ref.items():
            now = to_numpy(value)
            if isinstance(now, np.ndarray) and not np.array_equal(
                now, step.obs[key], equal_nan=True
            ):
                run.fresh_problems.append((where, f"obs[{key!r}]"))
    if step.final_ref is not None and step.final_obs:
        again = final_obs_rows(step.final_ref, list(step.final_obs))
        for i, obs in step.final_obs.items():
            if not isinstance(obs, Mapping) or not isinstance(again.get(i), Mapping):
                continue
            for key, value in obs.items():
                if not np.array_equal(
                    np.asarray(again[i].get(key)), np.asarray(value), equal_nan=True
                ):
                    run.fresh_problems.append((where, f"info['final_obs'][{i}][{key!r}]"))
                    return
    step.obs_ref = step.final_ref = None  # compared once; let the env free them


def stacked(run: VecRun, key: str, source: str = "obs") -> np.ndarray | None:
    """``obs[key]`` (or ``info[key]``) of every step as one ``(T, N, ...)`` array, or None."""
    try:
        array = np.stack([np.asarray(getattr(s, source)[key]) for s in run.steps])
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    rows = source == "obs" or (array.ndim >= 2 and array.shape[1] == run.num_envs)
    return array if rows else None


# --------------------------------------------------------------------------- goal functions


@dataclass
class GoalMethods:
    """The goal functions of a vector env; ``per_row``: a single env's, taking a list of
    per-row info dicts (a vector env's own take a dict of batched arrays)."""

    reward: Callable | None
    terminated: Callable | None
    truncated: Callable | None
    per_row: bool
    source: str

    def named(self) -> dict[str, Callable | None]:
        """Each goal function by its name."""
        return dict(
            zip(GOAL_FUNCTIONS, (self.reward, self.terminated, self.truncated), strict=True)
        )


def goal_methods(ctx: Context) -> GoalMethods:
    """The goal functions: the env's, sub-env 0's, or a single env's built from the spec."""
    return ctx.cached("vector_goal_methods", _find_goal_methods)


GOAL_FUNCTIONS = ("compute_reward", "compute_terminated", "compute_truncated")


def _find_goal_methods(ctx: Context) -> GoalMethods:
    for holder in (ctx.env, getattr(ctx.env, "unwrapped", None)):
        found = [f if callable(f := getattr(holder, n, None)) else None for n in GOAL_FUNCTIONS]
        if found[0] is not None:
            return GoalMethods(found[0], found[1], found[2], False, type(holder).__name__)
    unwrapped = getattr(ctx.env, "unwrapped", ctx.env)
    subs = getattr(unwrapped, "envs", None)
    single: Any = None
    source = ""
    if subs:
        single, source = subs[0], "sub-env 0"
    elif ctx.single_factory is not None:
        build = ctx.single_factory
        single = ctx.cached("vector_single_env", lambda _: build())
        source = "a single env built from the spec"
    if single is not None:
        wrapped = hasattr(single, "get_wrapper_attr")  # read through its wrappers only
        found = [find_method(single, n) if wrapped else None for n in GOAL_FUNCTIONS]
        return GoalMethods(found[0], found[1], found[2], True, source)
    return GoalMethods(None, None, None, False, "")


def info_argument(methods: GoalMethods, infos: list[dict[str, object]], arrays: EnvArrays) -> Any:
    """The info of a batch of rows carrying ``infos``, in the form ``methods`` take."""
    return infos if methods.per_row else stack_infos(infos, convert=arrays)


def row_infos(info: Mapping[str, Any], n: int, rows: Any = None) -> list[dict[str, object]]:
    """Per-row dicts of a step's per-sub-env info (masks and final_* left out)."""
    keys = [
        k
        for k, v in info.items()
        if not k.startswith("_") and isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == n
    ]
    rows = range(n) if rows is None else rows
    return [{k: info[k][i] for k in keys} for i in rows]
