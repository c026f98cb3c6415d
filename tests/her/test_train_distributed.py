"""Two workers with torch.distributed (gloo on CPU) stay in lockstep."""

from __future__ import annotations

import os
import socket
import time

import pytest
import torch
import torch.multiprocessing as mp

from goalenvs.agents.ddpg import DDPGConfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank: int, port: int, tmp: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2"
    )
    torch.set_num_threads(1)
    from goalenvs.train.trainer import Trainer

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
    ranks = [
        torch.load(tmp_path / f"rank{r}.pt", map_location="cpu", weights_only=True)
        for r in range(2)
    ]
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


def uneven_worker(rank: int, port: int, tmp: str) -> None:
    """BitFlipping with 2 bits, one step per cycle: one worker ends an episode (a
    success can come at the first step) while the other has none yet."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2"
    )
    torch.set_num_threads(1)
    from goalenvs.agents.dqn import DQNConfig
    from goalenvs.train.trainer import Trainer

    config = DQNConfig(
        env_id="goalenvs/BitFlipping-v0",
        env_kwargs={"n_bits": 2},
        hidden_sizes=(8,),
        epochs=2,
        n_cycles=4,
        rollout_steps=1,
        num_envs=1,
        n_batches=2,
        batch_size=4,
        n_eval_episodes=1,
        device="cpu",
        out=os.path.join(tmp, "run"),
        verbose=False,
    )
    trainer = Trainer(config)
    ready = []
    optimize = trainer.optimize

    def recording(stats):
        ready.append(trainer.buffer.n_transitions > 0)
        optimize(stats)

    trainer.optimize = recording
    result = trainer.run()
    torch.save(
        {"ready": ready, "updates": result.history[-1]["updates"], "notes": trainer.notes},
        os.path.join(tmp, f"uneven{rank}.pt"),
    )


@pytest.mark.slow
def test_workers_agree_to_skip_updates_until_all_have_an_episode(tmp_path):
    context = mp.spawn(uneven_worker, args=(free_port(), str(tmp_path)), nprocs=2, join=False)
    deadline = time.monotonic() + 120
    # join() returns as each worker ends (True once all have); a deadlock never ends.
    while not context.join(timeout=max(deadline - time.monotonic(), 0.1)):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail("the workers did not finish within 120 s (deadlock)")
    ranks = [
        torch.load(tmp_path / f"uneven{r}.pt", map_location="cpu", weights_only=True)
        for r in range(2)
    ]
    # The seeds give the workers different episodes: at some cycle one had a complete
    # episode and the other none (what deadlocked before), and both updated equally.
    assert any(a != b for a, b in zip(ranks[0]["ready"], ranks[1]["ready"], strict=True))
    assert ranks[0]["updates"] == ranks[1]["updates"] > 0
    assert "2 workers, torch.distributed backend gloo on cpu" in ranks[0]["notes"]


def test_the_backend_follows_the_device():
    from goalenvs.agents.distributed import backend_for

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert backend_for(cpu, 2, 0) == "gloo"
    assert backend_for(cuda, 2, 2) == "nccl"
    assert backend_for(cuda, 2, 1) == "gloo"  # nccl refuses two ranks on one GPU


def test_device_auto_picks_cuda_when_torch_sees_one(monkeypatch, tmp_path):
    from goalenvs.train import trainer as trainer_module

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    seen = {}

    def stop(device):  # stops the Trainer right after its device choice
        seen["device"] = device
        raise RuntimeError("stop")

    monkeypatch.setattr(trainer_module.distributed, "init_from_env", stop)
    config = DDPGConfig(env_id="goalenvs/PointReach-v0", out=str(tmp_path), verbose=False)
    with pytest.raises(RuntimeError, match="stop"):
        trainer_module.Trainer(config)
    assert seen["device"] == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="stop"):
        trainer_module.Trainer(config)
    assert seen["device"] == torch.device("cpu")
