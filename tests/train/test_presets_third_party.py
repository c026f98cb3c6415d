"""The highway and panda presets are the defaults for their ids, and only for theirs."""

from __future__ import annotations

import pytest

from goalenvs.train.presets import preset_for, resolve_config


@pytest.mark.parametrize(
    ("env_id", "preset"),
    [
        ("highway_env:parking-v0", "highway"),
        ("parking-v0", "highway"),
        ("goalenvs.wrappers.crash_penalty:parking-crash-v0", "highway"),
        ("panda_gym:PandaReach-v3", "panda"),
        ("PandaPush-v3", "panda_push"),
        ("panda_gym:PandaPickAndPlaceDense-v3", "panda_push"),
        ("panda_gym:PandaReachDense-v3", "panda"),
        # goalenvs' own Parking twin keeps its preset (ids are matched case-sensitively).
        ("goalenvs/Parking-v0", "parking"),
        ("highway_env:highway-v0", "one_cpu"),  # no preset of its own: the CPU default
    ],
)
def test_third_party_ids_get_their_preset(env_id, preset):
    assert preset_for(env_id) == preset


def test_highway_and_panda_presets_resolve_to_their_schedules():
    highway = resolve_config("highway_env:parking-v0")
    assert (highway.n_batches, highway.batch_size, highway.gamma) == (20, 512, 0.95)
    assert highway.clip_range == (-20.0, 0.0) and highway.hidden_sizes == (128, 128, 128)
    panda = resolve_config("panda_gym:PandaReach-v3", seed=3)
    assert (panda.num_envs, panda.rollout_steps, panda.n_batches, panda.batch_size) == (
        8,
        5,
        10,
        512,
    )
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
