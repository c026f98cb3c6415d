"""The highway and panda presets' schedules (test_train_config's preset table holds the ids
they are the defaults for)."""

from __future__ import annotations

import pytest

from goalenvs.train.presets import resolve_config


def test_highway_and_panda_presets_resolve_to_their_schedules():
    highway = resolve_config("highway_env:parking-v0")
    assert (highway.n_batches, highway.batch_size, highway.gamma) == (20, 512, 0.95)
    assert highway.clip_range == (-20.0, 0.0) and highway.hidden_sizes == (128, 128, 128)
    panda = resolve_config("panda_gym:PandaReach-v3", seed=3)
    schedule = (panda.num_envs, panda.rollout_steps, panda.n_batches, panda.batch_size)
    assert schedule == (8, 5, 10, 512)
    assert panda.gamma is None and panda.seed == 3 and panda.algo == "ddpg"


@pytest.mark.parametrize("env_id", ["gymnasium_robotics:FetchPush-v4", "panda_gym:PandaPush-v3"])
def test_push_presets_fold_the_multi_worker_data_ratio_into_one_process(env_id):
    config = resolve_config(env_id, device="cpu")
    per_cycle = config.num_envs * config.rollout_steps
    assert (config.num_envs, config.rollout_steps) == (16, 50) and per_cycle == 800
    assert (config.n_batches, config.batch_size, config.hidden_sizes) == (40, 2048, (256,) * 3)
    # About 100 sampled transitions per env step, as 8-19 baselines workers summing
    # gradients.
    assert config.n_batches * config.batch_size / per_cycle == pytest.approx(102.4)
    assert config.torch_threads == 2 and config.n_eval_episodes >= 50
