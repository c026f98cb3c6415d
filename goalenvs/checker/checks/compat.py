"""Checks that the env's transitions go through goalenvs' and SB3's HER replay buffers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from goalenvs.checker.checks.reward import needed_keys_or_none
from goalenvs.checker.context import Context, SkipCheckError
from goalenvs.checker.probe import StepRecord, fmt, goal_space, rollout
from goalenvs.checker.registry import Outcome, register


def _fill_and_sample(ctx: Context, label: str, build: Callable, add: Callable) -> Any:
    """A buffer ``build(size)`` filled with every rollout step through ``add(buffer, (obs,
    next_obs, action, reward), step, last)`` (the last step ends an episode), then a sample
    of 32, on the env's thread."""
    goal_space(ctx)
    steps = rollout(ctx).steps
    if len(steps) < 2:
        raise SkipCheckError("the rollout has fewer than two steps")

    def fill_and_sample() -> object:
        buffer = build(len(steps) + 8)
        for i, s in enumerate(steps):
            action, reward = np.asarray(s.action)[None], np.asarray([s.reward], np.float32)
            arrays = (_batched(s.before), _batched(s.obs), action, reward)
            add(buffer, arrays, s, i == len(steps) - 1)
        return buffer.sample(32)

    return ctx.call_with_limit(ctx.timeout * 10, f"{label} fill and sample", fill_and_sample)


def _batched(obs: Mapping) -> dict[str, np.ndarray]:
    return {k: np.asarray(v)[None] for k, v in obs.items()}


@register("compat.goalenvs_her", "error", "goalenvs' HerReplayBuffer fills and samples")
def check_compat_goalenvs(ctx: Context, out: Outcome) -> None:
    try:
        from goalenvs.her.buffer import HerReplayBuffer
    except ImportError as error:
        raise SkipCheckError(f"goalenvs.her.buffer is not importable ({error})") from None
    space = goal_space(ctx)
    info_keys = tuple(needed_keys_or_none(ctx))

    def build(size: int) -> Any:
        return HerReplayBuffer(
            size, space, ctx.env.action_space, ctx.env, info_keys=info_keys, seed=ctx.seed
        )

    def add(buffer: Any, arrays: tuple, s: StepRecord, last: bool) -> None:
        flags = np.asarray([s.terminated]), np.asarray([s.truncated or last])
        buffer.add(*arrays, *flags, [s.info])

    batch = _fill_and_sample(ctx, "goalenvs HerReplayBuffer", build, add)
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
    space = goal_space(ctx)
    copy_info_dict = bool(needed_keys_or_none(ctx))

    def build(size: int) -> Any:
        env = DummyVecEnv([lambda: ctx.env])
        return HerReplayBuffer(
            size, space, ctx.env.action_space, env=env, device="cpu", copy_info_dict=copy_info_dict
        )

    def add(buffer: Any, arrays: tuple, s: StepRecord, last: bool) -> None:
        info = {**s.info, "TimeLimit.truncated": (s.truncated or last) and not s.terminated}
        buffer.add(*arrays, np.asarray([s.terminated or s.truncated or last]), [info])

    batch = _fill_and_sample(ctx, "SB3 HerReplayBuffer", build, add)
    rewards = batch.rewards.numpy()
    if rewards.size != 32 or not np.all(np.isfinite(rewards)):
        fewer = (
            "; compute_reward returned fewer values than the goals it was given (see reward.batch)"
            if rewards.size < 32
            else ""
        )
        out.fail(
            f"a sample of 32 transitions has rewards of shape {rewards.shape}, expected "
            f"(32, 1) (one per transition, as SB3 stores them), values "
            f"{fmt(rewards.reshape(-1))}{fewer}"
        )
