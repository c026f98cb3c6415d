"""The Collector on its own: what a cycle of collection gives, what storing it does, the
successes of the episodes that ended, evaluation, and the envs' generators across a
resume. A random agent stands in for the trained one."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from goalenvs.core import GOAL_KEYS
from goalenvs.her import HerReplayBuffer
from goalenvs.train.collectors import Backend, Collector

ENV = "goalenvs/PointReach-v0"


class RandomAgent:
    """What the Collector asks of an agent: actions, and a normalizer to update."""

    def __init__(self, action_space: gym.spaces.Box, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.space = action_space
        self.seen = 0
        self.normalizer = self

    def act(self, obs: dict[str, np.ndarray], explore: bool) -> np.ndarray:
        n = len(obs["observation"])
        return self.rng.uniform(self.space.low, self.space.high, (n, *self.space.shape))

    def update(self, batch: dict[str, np.ndarray]) -> None:
        self.seen += len(batch["observation"])

    def recompute(self) -> None:
        pass


def collector(num_envs: int = 4, rollout_steps: int = 7, **kwargs: Any) -> Collector:
    backend = Backend(ENV, {"max_episode_steps": 10}, torch.device("cpu"))
    return Collector(backend, num_envs, 3, rollout_steps, (), **kwargs)


def buffer_for(c: Collector) -> HerReplayBuffer:
    env = c.envs
    spaces = env.single_observation_space, env.single_action_space
    return HerReplayBuffer(1000, *spaces, compute_reward=env.unwrapped, n_envs=env.num_envs)


def test_a_cycle_is_rollout_steps_of_every_env_chained_observation_to_observation():
    c = collector()
    c.reset(seed=0)
    agent = RandomAgent(c.envs.single_action_space)
    rollout = c.collect(agent)
    assert len(rollout.steps) == 7 and len(rollout.observations) == 7
    for before, step in zip(rollout.observations[1:], rollout.steps[:-1], strict=True):
        np.testing.assert_equal(step.start, {k: before[k] for k in GOAL_KEYS})  # chained
    assert rollout.steps[0].actions.shape == (4, 2)
    assert set(c.clock.columns()) >= {"time_env", "time_act"}
    c.close()


def test_storing_fills_the_buffer_updates_the_normalizer_and_reports_ended_episodes():
    c = collector(rollout_steps=10)  # episodes of 10 steps: every env ends in the cycle
    c.reset(seed=0)
    agent = RandomAgent(c.envs.single_action_space)
    buffer = buffer_for(c)
    successes = c.store(c.collect(agent), buffer, agent)
    assert buffer.n_transitions == 4 * 10
    assert agent.seen == 4 * 10  # every observation of the cycle reached the normalizer
    assert len(successes) == 4 and set(successes) <= {0.0, 1.0}
    c.close()


def test_evaluation_sums_one_episode_per_eval_env():
    c = collector()
    success, returns, lengths = c.evaluate(RandomAgent(c.envs.single_action_space), 5, 10)
    assert 0 <= float(success) <= 3
    assert float(lengths) == pytest.approx(3 * 10)  # three eval envs, 10 steps each
    assert -30.0 <= float(returns) <= 0.0
    c.close()


def test_the_envs_generators_restore_a_resumed_collection():
    first = collector()
    first.reset(seed=3)
    states = first.envs.generator_states()
    again = collector()
    assert again.reset(seed=99, generator_states=states) == []
    restored = again.envs.generator_states()
    assert restored.keys() == states.keys()
    first.close()
    again.close()


def test_collecting_ahead_needs_overlap():
    c = collector()
    c.reset(seed=0)
    with pytest.raises(AssertionError, match="overlap=True"):
        c.collect_ahead(RandomAgent(c.envs.single_action_space))
    c.close()
