"""How long a run will take on this machine, measured before it starts: one env step, one
act of the policy and one gradient update, each timed a few times on throwaway copies,
then multiplied by the counts the run's schedule makes of each. It leaves out what it
cannot see in a second (HER sampling, checkpoints, a machine that gets busier), so it is
printed as an estimate: "about 3 minutes"."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from gymnasium import spaces

from goalenvs.agents.registry import make_agent
from goalenvs.her.common import HerBatch
from goalenvs.train.machine import measure_step_seconds

if TYPE_CHECKING:
    from goalenvs.train.trainer import Trainer

REPEATS = 5  # timed calls of each part, after one untimed warm-up


@dataclass(frozen=True)
class Estimate:
    """The measured parts and the whole run's seconds they add up to."""

    step_seconds: float  # one step of one env
    act_seconds: float  # one policy call on the run's envs
    update_seconds: float  # one gradient update of a batch
    seconds: float  # the run: env steps, acting, updates and evaluation

    def line(self) -> str:
        """E.g. ``all epochs about 3 minutes on this machine (measured now: ...)``."""
        return (
            f"all epochs about {duration(self.seconds)} on this machine (measured now: an "
            f"env step {1e6 * self.step_seconds:.0f} us, "
            f"an update {1e3 * self.update_seconds:.1f} ms)"
        )


def duration(seconds: float) -> str:
    """``42 s``, ``3 minutes`` or ``2.5 hours``: seconds as a reader takes them in."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} minutes"
    return f"{seconds / 3600:.1f} hours"


def estimate(trainer: Trainer) -> Estimate | None:
    """The :class:`Estimate` of ``trainer``'s run, or None where the parts cannot be
    timed apart (several workers, envs on a device, a resumed run's remaining epochs)."""
    cfg, plan = trainer.config, trainer.plan
    if trainer.world > 1 or plan.env_device == "device" or trainer.device.type != "cpu":
        return None
    facts = plan.facts
    step = plan.step_seconds or measure_step_seconds(trainer.env, steps=REPEATS, seed=cfg.seed)
    obs_space, action_space = facts.observation_space, facts.action_space
    agent = make_agent(cfg, obs_space, action_space, plan.gamma, cfg.seed)
    act = _timed(lambda: agent.act(_observations(obs_space, cfg.num_envs), False))
    batch = _batch(obs_space, action_space, cfg.batch_size)
    update = _timed(lambda: agent.update(batch))
    # one vector step of a gymnasium vector env steps each env; a native twin, all at once
    vector_step = step if facts.native_twin else step * cfg.num_envs / max(1, plan.env_workers)
    eval_step = step if facts.native_twin else step * cfg.n_eval_episodes
    vector_steps = cfg.epochs * cfg.n_cycles * plan.rollout_steps
    eval_steps = cfg.epochs * (plan.episode_length or plan.rollout_steps)
    seconds = (
        vector_steps * (vector_step + act)
        + cfg.epochs * cfg.n_cycles * cfg.n_batches * update
        + eval_steps * (eval_step + act)
    )
    return Estimate(step, act, update, seconds)


def _timed(call: Any) -> float:
    call()
    start = time.perf_counter()
    for _ in range(REPEATS):
        call()
    return (time.perf_counter() - start) / REPEATS


def _sample(space: spaces.Space, n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    if isinstance(space, spaces.Box):
        low = np.where(np.isfinite(space.low), space.low, -1.0)
        high = np.where(np.isfinite(space.high), space.high, 1.0)
        return rng.uniform(low, high, (n, *space.shape)).astype(np.float32)
    if isinstance(space, spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, n)
    return np.stack([np.asarray(space.sample(), dtype=np.float32) for _ in range(n)])


def _observations(space: spaces.Dict, n: int) -> dict[str, np.ndarray]:
    return {key: _sample(space[key], n) for key in space.spaces}


def _batch(observation_space: spaces.Dict, action_space: spaces.Space, n: int) -> HerBatch:
    """A batch of the run's shapes (values drawn from the spaces: only its cost counts)."""
    zeros = torch.zeros(n, dtype=torch.float32)
    return HerBatch(
        observations=_observations(observation_space, n),
        actions=torch.as_tensor(_sample(action_space, n)),
        rewards=zeros,
        next_observations=_observations(observation_space, n),
        dones=zeros,
        weights=torch.ones(n, dtype=torch.float32),
    )
