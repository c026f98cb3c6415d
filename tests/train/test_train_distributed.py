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


def join(rank: int, port: int) -> None:
    """Makes this process worker ``rank`` of two, on one torch thread."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2"
    )
    torch.set_num_threads(1)


def load_ranks(tmp_path, name: str) -> list[dict]:
    files = [tmp_path / f"{name}{r}.pt" for r in range(2)]
    return [torch.load(f, map_location="cpu", weights_only=True) for f in files]


def worker(rank: int, port: int, tmp: str) -> None:
    join(rank, port)
    from goalenvs.train.trainer import Trainer

    config = DDPGConfig(
        env_id="goalenvs/BitFlippingContinuous-v0", env_kwargs={"n_bits": 4},
        hidden_sizes=(16, 16), epochs=2, n_cycles=2, n_batches=3, batch_size=16,
        n_eval_episodes=2, out=os.path.join(tmp, "run"), verbose=False,
    )  # fmt: skip
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
    ranks = load_ranks(tmp_path, "rank")
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
    join(rank, port)
    from goalenvs.agents.dqn import DQNConfig
    from goalenvs.train.trainer import Trainer

    config = DQNConfig(
        env_id="goalenvs/BitFlipping-v0", env_kwargs={"n_bits": 2}, hidden_sizes=(8,), epochs=2,
        n_cycles=4, rollout_steps=1, num_envs=1, n_batches=2, batch_size=4, n_eval_episodes=1,
        device="cpu", out=os.path.join(tmp, "run"), verbose=False,
    )  # fmt: skip
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
    ranks = load_ranks(tmp_path, "uneven")
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


def all_reduce_worker(rank: int, port: int, tmp: str) -> None:
    """Counts the all-reduces of one Learner cycle per algorithm and of one normalizer
    recompute, on data that differs between the workers."""
    import numpy as np
    import torch.distributed as dist
    from gymnasium import spaces

    from goalenvs.agents import DQNConfig, Learner, SACConfig, TD3Config
    from goalenvs.agents.ddpg import DDPG
    from goalenvs.agents.dqn import DQN
    from goalenvs.agents.sac import SAC
    from goalenvs.agents.td3 import TD3
    from goalenvs.core import goal_dict_space
    from goalenvs.her import HerBatch

    join(rank, port)
    dist.init_process_group("gloo")
    calls = []
    all_reduce = dist.all_reduce

    def counting(tensor, *args, **kwargs):
        calls.append(tensor.numel())
        return all_reduce(tensor, *args, **kwargs)

    dist.all_reduce = counting
    obs_space = goal_dict_space(spaces.Box(-5, 5, (4,)), spaces.Box(-5, 5, (2,)))

    class Stub:
        prioritized = False

        def __init__(self, discrete: bool) -> None:
            self.rng, self.discrete = np.random.default_rng(100 + rank), discrete

        def sample(self, batch_size, device=None):
            rng = self.rng

            def observation():
                return {k: torch.from_numpy(rng.normal(size=(batch_size, *s.shape))).float()
                        for k, s in obs_space.items()}  # fmt: skip

            if self.discrete:
                actions = torch.tensor(rng.integers(0, 3, batch_size))
            else:
                actions = torch.tensor(rng.uniform(-1, 1, (batch_size, 2)), dtype=torch.float32)
            rewards = -torch.tensor(rng.random(batch_size) < 0.5, dtype=torch.float32)
            ones = torch.ones(batch_size)
            return HerBatch(observation(), actions, rewards, observation(), 0 * ones, ones)

    box, discrete = spaces.Box(-1.0, 1.0, (2,)), spaces.Discrete(3)
    algos = {
        "ddpg": (DDPG, DDPGConfig, box),
        "td3": (TD3, TD3Config, box),
        "sac": (SAC, SACConfig, box),
        "dqn": (DQN, DQNConfig, discrete),
    }
    results = {}
    for name, (cls, config_cls, action_space) in algos.items():
        torch.manual_seed(0)  # the same start on both workers
        config = config_cls(hidden_sizes=(16,), precision="fp32")
        agent = cls(obs_space, action_space, config, 0.9, seed=0)
        learner = Learner(agent, 8)
        try:
            Learner(agent, 8, graphs="on")
            refusal = ""
        except ValueError as error:
            refusal = str(error)
        calls.clear()
        learner.optimize(Stub(action_space is discrete), 4)
        results[name] = {
            "calls": len(calls),
            "graphs": learner.graphs,
            "refusal": refusal,
            "state": {k: v.clone() for k, v in agent.state_dict().items()},
        }
    agent.normalizer.update(
        {k: np.full((3, s.shape[0]), rank + 1.0) for k, s in obs_space.spaces.items()}
    )
    calls.clear()
    agent.normalizer.recompute()
    results["normalizer"] = {"calls": list(calls), "mean": agent.normalizer.obs.mean.clone()}
    torch.save(results, os.path.join(tmp, f"all_reduce{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.slow
def test_one_all_reduce_per_gradient_step_and_one_for_the_normalizer(tmp_path):
    mp.spawn(all_reduce_worker, args=(free_port(), str(tmp_path)), nprocs=2, join=True)
    ranks = load_ranks(tmp_path, "all_reduce")
    # 4 updates: DDPG and DQN one all-reduce each (DDPG's two networks in one); TD3 one per
    # critic step and one per actor step (every 2nd); SAC one for its critics and one for
    # its actor and temperature together.
    expected = {"ddpg": 4, "td3": 4 + 2, "sac": 2 * 4, "dqn": 4}
    for name, calls in expected.items():
        for rank in ranks:
            assert rank[name]["calls"] == calls, name
            assert not rank[name]["graphs"]
            assert rank[name]["refusal"] == (
                "graphs='on' cannot capture the updates: "
                "2 workers all-reduce every update's gradients, outside any graph"
            )
        # Different batches on each worker, the same averaged steps.
        for key, tensor in ranks[0][name]["state"].items():
            torch.testing.assert_close(ranks[1][name]["state"][key], tensor, rtol=0, atol=0)
    # Both normalizers' sums in one all-reduce: observation 2 x 4 + 1, goal 2 x 2 + 1.
    assert ranks[0]["normalizer"]["calls"] == [9 + 5]
    for rank in ranks:  # rows of 1.0 from one worker and 2.0 from the other: mean 1.5
        torch.testing.assert_close(rank["normalizer"]["mean"], torch.full((4,), 1.5))
