"""The goal-seeking probe: steps at and near the desired goal, which a random rollout
rarely reaches (docs/checks.md#goal-probe), on a separate env built by the factory,
within :data:`SEEK_SECONDS` of CPU and :data:`SEEK_WALL_SECONDS` of wall time."""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs.checker.context import (
    Context,
    EnvCallError,
    EnvHungError,
    EnvTimeoutError,
    SkipCheckError,
    uses_mujoco,
)
from goalenvs.checker.probe import (
    StepRecord,
    copy_info,
    copy_obs,
    goal_space,
    parse_reset,
    parse_step,
    rollout,
    same,
    success_flag,
)

# Budgets of the probe's steps in CPU time (a loaded machine does not cut it short) and
# wall time (an env that waits).
SEEK_SECONDS = 1.5
SEEK_WALL_SECONDS = 10.0
SEEK_EPISODES = 3
SEEK_STEPS = 40  # steps per episode at most
RANDOM_CANDIDATES = 2
# Fractions of the way to the goal the model aims at: near 1 they sample the last few
# percent of the distance, where success and reward thresholds sit.
MODEL_SCALES = (1.0, 0.98, 0.95, 0.9, 0.8, 0.65, 0.5, 0.25)
MAX_DISCRETE = 32
GOAL_PAIR = {"achieved_goal", "desired_goal"}


@dataclass
class GoalProbe:
    """What the goal-seeking probe did and every step it took (``samples``)."""

    samples: list[StepRecord] = field(default_factory=list)
    copied: bool = False
    not_copied: str | None = None  # why the env was not copied
    episodes: int = 0
    closest: float = float("inf")  # the smallest goal distance of any sample
    start_distance: float = float("nan")  # the goal distance at the first reset
    stopped: str | None = None  # why it stopped before its planned episodes
    seconds: float = 0.0
    # Copied steps where the candidates' achieved goals differed, where they did not, and
    # of those where one more common step moved them apart (the goal answers a step late)
    answered_now: int = 0
    unmoved: int = 0
    answered_late: int = 0

    def summary(self) -> dict[str, object]:
        """A JSON-ready description for the report."""
        return {
            "method": "candidate actions on copies of the env"
            if self.copied
            else "a linear model of the rollout, on the env itself",
            "not_copied": self.not_copied,
            "episodes": self.episodes,
            "steps": len(self.samples),
            "start_distance": _rounded(self.start_distance),
            "closest_distance": _rounded(self.closest),
            "successes": sum(1 for s in self.samples if success_flag(s.info)),
            "terminations": sum(1 for s in self.samples if s.terminated),
            "stopped_early": self.stopped,
            "seconds": round(self.seconds, 3),
        }

    def goal_samples(self) -> list[StepRecord]:
        """The samples whose observation holds both goals."""
        return [s for s in self.samples if isinstance(s.obs, Mapping) and s.obs.keys() >= GOAL_PAIR]

    def lags(self) -> bool:
        """Whether achieved_goal answers the probe's actions one step late: never in the
        step that takes them, and in the next one on at least half the steps (a block no
        single action moves, as in Push, moves in neither)."""
        return self.answered_now == 0 and self.answered_late >= max(3, self.unmoved / 2)


def _rounded(value: float) -> float | None:
    return round(float(value), 6) if np.isfinite(value) else None


def goal_distance(obs: Any) -> float:
    """The Euclidean distance between the two goals of a goal observation (inf if none)."""
    try:
        ag = np.asarray(obs["achieved_goal"], np.float64).reshape(-1)
        dg = np.asarray(obs["desired_goal"], np.float64).reshape(-1)
        return float(np.linalg.norm(ag - dg))
    except (KeyError, TypeError, ValueError, IndexError):
        return float("inf")


def goal_probe(ctx: Context) -> GoalProbe:
    """The probe's samples, computed once; skipped for envs without goal observations."""
    goal_space(ctx)
    return ctx.cached("goal_probe", _seek)


class _Model:
    """A least-squares map from a Box action to the change of achieved_goal it causes."""

    def __init__(self, ctx: Context, space: spaces.Box) -> None:
        self.space = space
        self.weights: np.ndarray | None = None
        xs, ys = [], []
        for s in rollout(ctx).steps:
            try:
                before = np.asarray(s.before["achieved_goal"], np.float64).reshape(-1)
                after = np.asarray(s.obs["achieved_goal"], np.float64).reshape(-1)
                xs.append(np.asarray(s.action, np.float64).reshape(-1))
                ys.append(after - before)
            except (KeyError, TypeError, ValueError, IndexError):
                pass
        if len(xs) >= 2 * (space.shape[0] + 1) and all(len(y) == len(ys[0]) for y in ys):
            x = np.column_stack([np.asarray(xs), np.ones(len(xs))])
            solution = np.linalg.lstsq(x, np.asarray(ys), rcond=None)[0]
            weights = solution[:-1]
            if np.all(np.isfinite(weights)) and np.abs(weights).max() > 1e-9:
                self.weights = weights

    def action(self, obs: Any, fraction: float) -> np.ndarray | None:
        """The action predicted to cover ``fraction`` of the way to the goal, clipped."""
        if self.weights is None:
            return None
        ag, dg = _achieved(obs), _achieved(obs, "desired_goal")
        if ag is None or dg is None or ag.shape[0] != self.weights.shape[1]:
            return None
        action = np.linalg.lstsq(self.weights.T, fraction * (dg - ag), rcond=None)[0]
        low, high = self.space.low.reshape(-1), self.space.high.reshape(-1)
        action = np.clip(action, np.where(np.isfinite(low), low, -1e6), high)
        return action.reshape(self.space.shape).astype(self.space.dtype)


def _candidates(model: _Model | None, sampler: spaces.Space, obs: object) -> list:
    """The actions to try from ``obs``; ``sampler`` is a seeded copy of the action space."""
    if isinstance(sampler, spaces.Discrete) and sampler.n <= MAX_DISCRETE:
        return [sampler.start + i for i in range(sampler.n)]
    found = []
    if model is not None:
        for scale in MODEL_SCALES:
            action = model.action(obs, scale)
            if action is not None:
                found.append(action)
    found += [sampler.sample() for _ in range(RANDOM_CANDIDATES)]
    return found


def _copy_step(env: gym.Env, action: object) -> tuple[gym.Env, Any]:
    twin = copy.deepcopy(env)
    return twin, twin.step(action)


def _look_ahead(twins: list[gym.Env], action: object) -> list[Any]:
    """The observation each twin returns after one more step with ``action`` (on copies)."""
    return [copy.deepcopy(twin).step(action)[0] for twin in twins]


def _copy_steps(env: gym.Env, actions: list) -> list[tuple[gym.Env, Any]]:
    # one call to the env's thread for every candidate (a hand-over costs more than a step)
    return [_copy_step(env, action) for action in actions]


def _copies_step_alike(ctx: Context, env: gym.Env, action: object) -> str | None:
    """None when two copies of ``env`` step alike, else why the env cannot be copied."""
    if uses_mujoco(env):
        # A deep copy of gymnasium's MuJoCo envs raises part way, and what it leaves behind
        # can hang the next OpenGL context the process opens (a later render): not tried.
        return "a MuJoCo env: its renderer holds an OpenGL context that deepcopy cannot copy"
    try:
        _, first = ctx.call("goal probe: deepcopy(env).step", _copy_step, env, action)
        _, second = ctx.call("goal probe: deepcopy(env).step", _copy_step, env, action)
    except EnvCallError as error:
        return f"copying or stepping a copy raised {error.cause}"
    if not (isinstance(first, tuple) and isinstance(second, tuple) and len(first) == 5):
        return "step of a copy did not return five values"
    if not (same(first[0], second[0]) and same(first[1], second[1])):
        return (
            "two copies given the same action stepped differently (they share state with "
            "the env, as a physics server does, or draw from an unseeded generator)"
        )
    return None


def _record(probe: GoalProbe, ret: object, action: object, before: object) -> StepRecord | None:
    parsed = parse_step(ret, "goal probe", [])
    if parsed is None:
        return None
    obs, reward, terminated, truncated, info = parsed
    copies = (copy_obs(obs), None, reward, terminated, truncated, copy_info(info), info)
    sample = StepRecord(-1, len(probe.samples), action, *copies, before)
    probe.samples.append(sample)
    probe.closest = min(probe.closest, goal_distance(sample.obs))
    return sample


def _seek(ctx: Context) -> GoalProbe:
    probe, start = GoalProbe(), time.perf_counter()
    env, owned = None, False
    if ctx.factory is not None:
        try:
            env, owned = ctx.call("goal probe: factory()", ctx.factory), True
        except EnvCallError as error:
            probe.not_copied = f"building a separate env raised {error.error!r}"
    else:
        probe.not_copied = (
            "no factory to build a separate env to copy (the env under check is not copied)"
        )
    try:
        _drive(ctx, probe, env)
    except EnvCallError as error:
        # the env's own exception is api.step's (or api.reset's) finding, not the probe's
        probe.stopped = f"stopped: {error} (see api.step)"
    except (EnvTimeoutError, EnvHungError) as error:
        probe.stopped = str(error)
    finally:
        if owned and env is not None and ctx.hung is None:
            # closing the probe's own env is not the env's contract
            with contextlib.suppress(EnvCallError, EnvTimeoutError, EnvHungError):
                ctx.call("goal probe: close()", env.close)
        probe.seconds = time.perf_counter() - start
    return probe


def _reset(ctx: Context, env: gym.Env, seed: int | None) -> object:
    ret = ctx.call("goal probe: reset", env.reset, seed=seed)
    parsed = parse_reset(ret, "goal probe reset", [])
    if parsed is None or not isinstance(parsed[0], Mapping):
        raise SkipCheckError("the goal probe could not reset the env to a goal observation")
    return parsed[0]


def _drive(ctx: Context, probe: GoalProbe, env: gym.Env | None) -> None:
    action_space = ctx.env.action_space
    sampler = copy.deepcopy(action_space)
    sampler.seed(ctx.seed + 1)
    model = _Model(ctx, action_space) if isinstance(action_space, spaces.Box) else None
    seed = ctx.seed + 1
    if env is not None:
        obs = _reset(ctx, env, seed)
        first = _candidates(model, sampler, obs)[0]
        probe.not_copied = _copies_step_alike(ctx, env, first)
        probe.copied = probe.not_copied is None
        if probe.copied:
            obs = _reset(ctx, env, seed)
    if not probe.copied or env is None:
        env = ctx.env
        obs = _reset(ctx, env, seed)
    probe.start_distance = goal_distance(obs)
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(SEEK_EPISODES):
        probe.episodes += 1
        for _ in range(SEEK_STEPS):
            over = [
                f"{limit:g} s {kind}"
                for kind, spent, limit in (
                    ("CPU", time.process_time() - cpu, SEEK_SECONDS),
                    ("wall", time.perf_counter() - wall, SEEK_WALL_SECONDS),
                )
                if spent > limit
            ]
            if over:
                probe.stopped = (
                    f"stopped at its {over[0]} budget after {len(probe.samples)} "
                    f"steps in {probe.episodes} episode(s)"
                )
                return
            env, obs, ended = _advance(ctx, probe, env, obs, model, sampler)
            if ended:
                break
        obs = _reset(ctx, env, None)


def _advance(
    ctx: Context,
    probe: GoalProbe,
    env: gym.Env,
    obs: object,
    model: _Model | None,
    sampler: spaces.Space,
) -> tuple[gym.Env, Any, bool]:
    """One step toward the goal: the best candidate on copies, or the model's action."""
    if not probe.copied:
        action = model.action(obs, 0.5) if model is not None else None
        action = sampler.sample() if action is None else action
        before = copy_obs(obs)
        ret = ctx.call("goal probe: step", env.step, action)
        sample = _record(probe, ret, action, before)
        if sample is None or not isinstance(sample.obs, Mapping):
            raise SkipCheckError("the goal probe's step did not return a goal observation")
        return env, ret[0], sample.terminated or sample.truncated
    before = copy_obs(obs)
    actions = _candidates(model, sampler, obs)
    stepped = ctx.call_with_limit(
        ctx.timeout * len(actions), "goal probe: deepcopy(env).step", _copy_steps, env, actions
    )
    kept = []  # (sample, twin, observation returned)
    for action, (twin, ret) in zip(actions, stepped, strict=True):
        sample = _record(probe, ret, action, before)
        if sample is not None and isinstance(sample.obs, Mapping):
            kept.append((sample, twin, ret[0]))
    if not kept:
        raise SkipCheckError("no step of the goal probe returned a goal observation")
    keys = [(goal_distance(s.obs), -s.reward) for s, _, _ in kept]
    ahead = _answer(ctx, probe, kept, actions[0])
    if ahead is not None:
        # the goal answers a step late: judge each candidate by where it is a step on
        keys = [(goal_distance(obs), key[1]) for obs, key in zip(ahead, keys, strict=True)]
    best = min(range(len(kept)), key=keys.__getitem__)
    sample, twin, returned = kept[best]
    return twin, returned, sample.terminated or sample.truncated


def _achieved(obs: Any, key: str = "achieved_goal") -> np.ndarray | None:
    try:
        return np.asarray(obs[key], np.float64).reshape(-1)
    except (KeyError, TypeError, ValueError):
        return None


def _apart(observations: list[Any]) -> bool:
    goals = [_achieved(obs) for obs in observations]
    first = goals[0]
    return first is not None and any(
        g is not None and (g.shape != first.shape or not np.array_equal(g, first))
        for g in goals[1:]
    )


def _answer(
    ctx: Context, probe: GoalProbe, kept: list[tuple[StepRecord, gym.Env, Any]], common: object
) -> list[Any] | None:
    """Counts when achieved_goal answered the candidates; where it did not in this step,
    the observations one more ``common`` step returns when they are apart, else None."""
    if len(kept) < 2:
        return None
    if _apart([s.obs for s, _, _ in kept]):
        probe.answered_now += 1
        return None
    if any(s.terminated or s.truncated for s, _, _ in kept):
        return None  # an ended episode takes no further step
    probe.unmoved += 1
    twins = [twin for _, twin, _ in kept]
    try:
        ahead = ctx.call_with_limit(
            ctx.timeout * len(twins), "goal probe: one step ahead", _look_ahead, twins, common
        )
    except EnvCallError:
        return None
    if not _apart(ahead):
        return None
    probe.answered_late += 1
    return ahead
