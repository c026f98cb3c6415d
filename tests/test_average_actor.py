"""benchmarks/average_actor.py: a checkpoint's actor, target actor and average on the same
episodes."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from goalenvs.agents import DDPGConfig
from goalenvs.train.trainer import train

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import average_actor  # noqa: E402

torch.set_num_threads(1)


def test_the_target_actor_is_the_average_at_the_same_rate(tmp_path):
    # polyak and policy_average both 0.8, both moved once a cycle from the same start: the
    # target actor and the average are the same weights, so they succeed alike.
    config = DDPGConfig(
        env_id="goalenvs/PointReach-v0", hidden_sizes=(32,), epochs=2, n_cycles=4, n_batches=4,
        batch_size=64, num_envs=2, n_eval_episodes=4, polyak=0.8, policy_average=0.8,
        device="cpu", preflight=False, out=str(tmp_path / "run"), verbose=False,
    )  # fmt: skip
    result = train(config)
    row = average_actor.measure(result.run_dir / "checkpoints" / "epoch_000002" / "policy.pt", 30)
    assert row["epoch"] == 2 and row["episodes"] == 30 and row["polyak"] == 0.8
    rates = row["success"]
    assert set(rates) == {"actor", "target", "average"}
    assert all(0.0 <= rate <= 1.0 for rate in rates.values())
    assert rates["target"] == rates["average"]
    saved = torch.load(result.latest_policy, map_location="cpu", weights_only=True)
    for key, tensor in saved["policy"]["actor_average"].items():
        torch.testing.assert_close(saved["training"]["actor_target"][key], tensor)
