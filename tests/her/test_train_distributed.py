"""Two workers with torch.distributed (gloo on CPU) stay in lockstep."""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from goalenvs.her.config import DDPGConfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank: int, port: int, tmp: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2"
    )
    torch.set_num_threads(1)
    from goalenvs.her.trainer import Trainer

    config = DDPGConfig(
        env_id="goalenvs/BitFlippingContinuous-v0",
        env_kwargs={"n_bits": 4},
        hidden_sizes=(16, 16),
        epochs=2,
        n_cycles=2,
        n_batches=3,
        batch_size=16,
        n_eval_episodes=2,
        out=os.path.join(tmp, "run"),
        verbose=False,
    )
    trainer = Trainer(config)
    initial = {k: v.clone() for k, v in trainer.agent.state_dict().items()}
    result = trainer.run()
    state = {k: v.clone() for k, v in trainer.agent.state_dict().items()}
    torch.save(
        {"initial": initial, "final": state, "env_steps": result.env_steps},
        os.path.join(tmp, f"rank{rank}.pt"),
    )


@pytest.mark.slow
def test_two_gloo_workers_keep_identical_parameters_and_statistics(tmp_path):
    mp.spawn(worker, args=(free_port(), str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    # Start: rank 0's initial parameters were broadcast.
    for name, tensor in ranks[0]["initial"].items():
        torch.testing.assert_close(ranks[1]["initial"][name], tensor, rtol=0, atol=0)
    # End: different data per worker, yet the same averaged gradients and statistics.
    for name, tensor in ranks[0]["final"].items():
        torch.testing.assert_close(ranks[1]["final"][name], tensor, rtol=0, atol=0)
    changed = ranks[0]["final"]["actor.net.0.weight"] - ranks[0]["initial"]["actor.net.0.weight"]
    assert changed.abs().max() > 0
    # The normalizer counted both workers' observations: 2 workers x 2 epochs x 2 cycles x
    # 2 envs x 4 steps.
    assert float(ranks[0]["final"]["normalizer.obs.count"][0]) == 2 * 2 * 2 * 2 * 4
    assert ranks[0]["env_steps"] == 2 * 2 * 2 * 2 * 4
    assert (tmp_path / "run" / "policy_latest.pt").exists()
