"""The RunFolder on its own: what opening a folder writes, what committing an epoch
leaves on disk, and what a resume reads back, without a Trainer around it."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
import torch

import goalenvs  # noqa: F401  (registers the ids)
from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.agents.registry import make_agent
from goalenvs.her import HerReplayBuffer
from goalenvs.train.checkpoint import unit_epochs
from goalenvs.train.run_folder import Counters, RunFolder
from tests.train.runs import progress


def parts(tmp_path: Path, **kwargs):
    env = gym.make("goalenvs/PointReach-v0")
    config = DDPGConfig(hidden_sizes=(8,), out=str(tmp_path / "run"), save_buffer=True,
                        verbose=False, **kwargs)  # fmt: skip
    spaces = env.observation_space, env.action_space
    agent = make_agent(config, *spaces, 0.98, 0)
    buffer = HerReplayBuffer(200, *spaces, compute_reward=env.unwrapped, n_envs=1)
    folder = run_folder(config, env, 0.98, plan={"precision": "fp32", "env_workers": 1})
    return folder, agent, buffer


def run_folder(config: DDPGConfig, env: gym.Env, gamma: float, **kwargs) -> RunFolder:
    """Worker 0's folder of a one-worker DDPG run on ``env`` on the CPU."""
    return RunFolder(
        config, rank=0, world=1, gamma=gamma, observation_space=env.observation_space,
        action_space=env.action_space, loss_names=("critic_loss", "actor_loss", "q_mean"),
        buffer_file="buffer_rank0.npz", device=torch.device("cpu"), **kwargs,
    )  # fmt: skip


def commit(folder: RunFolder, agent, buffer, epoch: int, success: float) -> Counters:
    counters = Counters(epoch=epoch, env_steps=100 * epoch, updates=10 * epoch)
    row = {name: 0.0 for name in folder.columns()}
    row.update(epoch=epoch, env_steps=counters.env_steps, eval_success=success)
    best = counters.record_eval(success, -1.0)
    folder.commit_epoch(counters, row, best, agent, buffer, {"envs": {}})
    return counters


def test_opening_a_new_folder_writes_config_and_plan_and_refuses_a_used_one(tmp_path):
    folder, agent, buffer = parts(tmp_path)
    assert folder.open(agent, lambda path: None) is None  # a fresh run restores nothing
    config = json.loads((folder.path / "config.json").read_text())
    assert config["algo"] == "ddpg" and config["plan"] == {"precision": "fp32", "env_workers": 1}
    assert (folder.path / "progress.csv").read_text().splitlines() == [",".join(folder.columns())]
    commit(folder, agent, buffer, 1, 0.5)
    folder.close()
    again, agent, _ = parts(tmp_path)
    with pytest.raises(ValueError, match="already holds a run; pass resume="):
        again.open(agent, lambda path: None)


def test_each_committed_epoch_is_a_unit_a_row_and_the_policies_and_a_resume_reads_the_last(
    tmp_path,
):
    folder, agent, buffer = parts(tmp_path)
    folder.open(agent, lambda path: None)
    commit(folder, agent, buffer, 1, 0.5)
    commit(folder, agent, buffer, 2, 0.75)
    folder.close()
    assert sorted(unit_epochs(folder.path)) == [1, 2]  # the last two are kept
    rows = progress(folder.path)
    assert [(r["epoch"], r["eval_success"]) for r in rows] == [("1", "0.5"), ("2", "0.75")]
    assert (folder.path / "policy_latest.pt").is_file()
    assert (folder.path / "policy_best.pt").is_file()
    weights = {k: v.clone() for k, v in agent.actor.state_dict().items()}

    resumed, fresh, _ = parts(tmp_path, resume=str(tmp_path / "run"))
    loaded = []
    restored = resumed.open(fresh, lambda path: loaded.append(path.name) or "a buffer")
    resumed.close()
    assert restored is not None
    assert (restored.counters.epoch, restored.counters.env_steps) == (2, 200)
    assert restored.success == 0.75 and restored.counters.best_success == 0.75
    assert restored.buffer == "a buffer" and loaded == ["buffer_rank0.npz"]
    for name, value in fresh.actor.state_dict().items():
        assert torch.equal(value, weights[name]), name


def test_the_folder_is_named_for_the_run_without_out_and_describes_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = gym.make("goalenvs/PointReach-v0")
    config = DDPGConfig(hidden_sizes=(8,), seed=3, verbose=False)
    folder = run_folder(config, env, 0.9)
    assert folder.path.parts[0] == "runs"
    assert folder.path.name.startswith("goalenvs_PointReach-v0-ddpg-s3-")
    described = folder.describe
    assert (described["env_id"], described["algo"]) == ("goalenvs/PointReach-v0", "ddpg")
    assert described["gamma"] == 0.9
    assert described["hidden_sizes"] == [8]
    assert described["observation_space"]["desired_goal"]["shape"] == [2]
    assert described["config"]["seed"] == 3
