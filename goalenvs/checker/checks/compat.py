"""Checks that the env's transitions go through goalenvs' and SB3's HER replay buffers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from goalenvs.checker.checks.reward import needed_keys_or_none
from goalenvs.checker.context import Context, SkipCheckError
from goalenvs.checker.probe import StepRecord, fmt, goal_space, rollout
from goalenvs.checker.registry import Outcome, register


def _transitions(ctx: Context) -> list[tuple[Any, StepRecord]]:
    """(previous obs, step) for every rollout step, the last step marked as an episode end."""
    goal_space(ctx)
    out = [(s.before, s) for s in rollout(ctx).steps]
    if len(out) < 2:
        raise SkipCheckError("the rollout has fewer than two steps")
    return out


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
    info_keys = tuple(needed_keys_or_none(ctx))

    def fill_and_sample() -> object:
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
    copy_info_dict = bool(needed_keys_or_none(ctx))

    def fill_and_sample() -> object:
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
