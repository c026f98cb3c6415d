"""Seeded learning checks kept in CI: the trainers solve the small tasks within a budget."""

from __future__ import annotations

import pytest
import torch

from goalenvs.agents.dqn import DQNConfig
from goalenvs.demo import point_reach_config
from goalenvs.train.policy import load_policy
from goalenvs.train.trainer import train

torch.set_num_threads(1)


@pytest.mark.slow
def test_ddpg_her_reaches_90_percent_on_point_reach(tmp_path):
    # Margin, from benchmarks/results/seed_margins.jsonl (python benchmarks/seed_margins.py:
    # point_reach preset, 12 epochs of 800 env steps, no early stop, seeds 0-4): first eval
    # >= 0.9 at epoch 6 / 7 / 5 / 5 / 6, best 1.0 on every seed (by epoch 11 at the latest).
    # The budget leaves 5 epochs to the slowest seed (1, the one tested here). The device
    # and the arithmetic the margins were measured with are pinned: the numpy envs and
    # float32 networks on the CPU, whatever GPU or bf16 instructions the machine has.
    config = point_reach_config(
        seed=1, epochs=12, stop_success=0.9, out=str(tmp_path / "run"), verbose=False,
        device="cpu", precision="fp32",
    )  # fmt: skip
    result = train(config)
    assert result.best_success_rate >= 0.9, [r["eval_success"] for r in result.history]
    assert result.env_steps <= 12 * 800
    assert load_policy(result.best_policy).metadata["success_rate"] == result.best_success_rate


@pytest.mark.slow
def test_dqn_her_reaches_90_percent_on_8_bit_flipping(tmp_path):
    # Margin, measured over seeds 0-4 (this config without the early stop, 8 epochs of
    # 1,280 env steps): first eval >= 0.9 at epoch 2 / 2 / 1 / 1 / 1, best 1.0 on every
    # seed. The budget leaves 6 epochs to the slowest seeds (0 and 1, 1 tested here).
    config = DQNConfig(
        env_id="goalenvs/BitFlipping-v0",
        env_kwargs={"n_bits": 8},
        seed=1,
        epochs=8,
        n_cycles=10,
        stop_success=0.9,
        n_eval_episodes=20,
        device="cpu",
        precision="fp32",
        out=str(tmp_path / "run"),
        verbose=False,
    )
    result = train(config)
    assert result.best_success_rate >= 0.9, [r["eval_success"] for r in result.history]
