"""Ctrl-C, resuming a run, and stopping on a NaN loss."""

from __future__ import annotations

import csv
import signal

import gymnasium as gym
import numpy as np
import pytest
import torch

from goalenvs.agents.dqn import DQN, DQNConfig
from goalenvs.her import HerReplayBuffer
from goalenvs.train.resume_state import (
    capture_random_state,
    restore_random_state,
    restore_torch_generators,
)
from goalenvs.train.trainer import Trainer, TrainingError, train


def config(tmp_path, **kwargs) -> DQNConfig:
    base = dict(
        env_id="goalenvs/BitFlipping-v0", env_kwargs={"n_bits": 4}, hidden_sizes=(32,),
        num_envs=4, n_cycles=3, n_batches=4, batch_size=32, n_eval_episodes=8, device="cpu",
        out=str(tmp_path / "run"), verbose=False,
    )  # fmt: skip
    return DQNConfig(**{**base, **kwargs})


def progress(run_dir) -> list[dict[str, float]]:
    with open(run_dir / "progress.csv", newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def stop_at_epoch(epoch: int, signum: int):
    def callback(row):
        if row["epoch"] == epoch:
            signal.raise_signal(signum)  # SIGINT: what Ctrl-C delivers; SIGTERM: a scheduler

    return callback


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_stops_after_the_cycle_and_resume_continues_steps_and_best(
    tmp_path, signum
):
    before = signal.getsignal(signum)  # SIGINT: SIG_IGN when pytest runs in the background
    first = train(config(tmp_path, epochs=5, save_buffer=True), callback=stop_at_epoch(2, signum))
    assert first.interrupted and first.epochs == 2
    steps_per_epoch = 3 * 4 * 4  # cycles x envs x n_bits steps
    assert first.env_steps == 2 * steps_per_epoch
    assert signal.getsignal(signum) is before  # handler restored
    assert [r["epoch"] for r in progress(first.run_dir)] == [1, 2]  # the unfinished one dropped
    assert (first.run_dir / "checkpoints" / "epoch_000002" / "buffer_rank0.npz").exists()

    second = train(config(tmp_path, epochs=5, save_buffer=True, resume=str(first.run_dir)))
    assert not second.interrupted and second.epochs == 5
    assert second.env_steps == 5 * steps_per_epoch
    rows = progress(second.run_dir)
    assert [r["epoch"] for r in rows] == [1, 2, 3, 4, 5]
    assert [r["env_steps"] for r in rows] == [steps_per_epoch * e for e in range(1, 6)]
    assert rows[2]["wall_time"] > rows[1]["wall_time"]  # time adds up across sessions
    best = max(r["eval_success"] for r in rows)
    assert second.best_success_rate == best
    meta = torch.load(second.best_policy, weights_only=True)["metadata"]
    assert meta["success_rate"] == best and meta["best_success_rate"] == best


def test_resume_restores_networks_optimizer_and_buffer_and_refuses_another_env(tmp_path):
    first = train(config(tmp_path, epochs=1, save_buffer=True))
    trainer = Trainer(config(tmp_path, epochs=2, save_buffer=True, resume=str(first.run_dir)))
    trainer.start()
    saved = torch.load(first.latest_policy, weights_only=True)
    for name, tensor in saved["policy"]["q"].items():
        torch.testing.assert_close(trainer.agent.q.state_dict()[name], tensor)
    assert trainer.agent.optimizer.state_dict()["state"][0]["step"] == 3 * 4
    assert trainer.buffer.n_transitions == 3 * 4 * 4
    assert trainer.counters.epoch == 1 and trainer.counters.env_steps == first.env_steps
    trainer.close()
    other = config(tmp_path, epochs=2, env_kwargs={"n_bits": 5}, resume=str(first.run_dir))
    with pytest.raises(ValueError, match="does not fit this config's networks"):
        train(other)


def test_nan_loss_stops_with_epoch_and_keeps_last_good_checkpoint(tmp_path, monkeypatch):
    calls = {"n": 0}
    update = DQN.update

    def poisoned(self, batch):
        losses = update(self, batch)
        calls["n"] += 1
        if calls["n"] > 3 * 4:  # every update of epoch 2 onwards
            losses["q_loss"] = torch.tensor(float("nan"))
        return losses

    monkeypatch.setattr(DQN, "update", poisoned)
    with pytest.raises(TrainingError, match=r"q_loss became nan in epoch 2") as info:
        train(config(tmp_path, epochs=3))
    run = tmp_path / "run"
    assert "policy_latest.pt" in str(info.value)
    assert torch.load(run / "policy_latest.pt", weights_only=True)["metadata"]["epoch"] == 1
    assert len(progress(run)) == 1
    assert np.isfinite(progress(run)[0]["q_loss"])


def test_torch_generator_states_of_another_device_are_skipped_and_named():
    # A run recorded on CUDA saves 16-byte CUDA generator states; resumed on the CPU (the
    # plan's --device cpu), each such generator keeps its seeded state instead of stopping
    # the resume with torch's "Expected a CPUGeneratorImplState of size 5056".
    class Holder:
        def __init__(self) -> None:
            self.generator = torch.Generator().manual_seed(3)
            self.other = torch.Generator().manual_seed(4)

    holder, source = Holder(), torch.Generator().manual_seed(5)
    seeded = holder.generator.get_state().clone()
    cuda_like = torch.zeros(16, dtype=torch.uint8)  # the size of a CUDA generator's state
    missed = restore_torch_generators(
        holder, {"generator": cuda_like, "other": source.get_state(), "gone": cuda_like}
    )
    assert missed == ["generator", "gone"]
    assert torch.equal(holder.generator.get_state(), seeded)
    assert torch.equal(holder.other.get_state(), source.get_state())


def test_a_run_folder_of_the_two_buffers_restores_the_buffer_generator(caplog):
    # Before the one buffer, a run's random state held the numpy buffer's generator as
    # {"rng": state}; today's buffer keeps it in its own file too. Either way it resumes
    # the saved stream, and neither form is reported as missed.
    env = gym.make("goalenvs/PointReach-v0")
    agent = DQN(env.observation_space, gym.spaces.Discrete(3), DQNConfig(), gamma=0.9, seed=0)
    buffer = HerReplayBuffer(100, env.observation_space, env.action_space, env, seed=1)
    saved = np.random.default_rng(7).bit_generator.state
    state = capture_random_state(agent, buffer, {})
    assert state["buffer"]["rng"] == buffer.rng.bit_generator.state
    for held in ({"rng": saved}, {}):  # the two buffers' run folder, then a save without it
        caplog.clear()
        before = buffer.rng.bit_generator.state
        restore_random_state({**state, "buffer": held}, agent, buffer)
        assert buffer.rng.bit_generator.state == (saved if held else before)
        assert "were not restored" not in caplog.text
