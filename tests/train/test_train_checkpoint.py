"""Checkpoints: round trip, atomic files, and clear errors for anything that is not one."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.agents.dqn import DQNConfig
from goalenvs.train.checkpoint import CheckpointError, read_checkpoint
from goalenvs.train.policy import load_policy
from goalenvs.train.trainer import Trainer
from tests.train.runs import TINY


def tiny_run(tmp_path, config_cls, env_id, **kwargs):
    settings = {**TINY, "env_kwargs": {"n_bits": 4}, **kwargs}
    config = config_cls(env_id=env_id, out=str(tmp_path / "run"), **settings)
    trainer = Trainer(config)
    return trainer, trainer.run()


def observations(n_bits: int, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, (n, n_bits)).astype(np.float32)
    goal = rng.integers(0, 2, (n, n_bits)).astype(np.float32)
    return {"observation": bits, "achieved_goal": bits.copy(), "desired_goal": goal}


@pytest.fixture(scope="module")
def ddpg_run(tmp_path_factory):
    """A finished one-epoch DDPG run on 4-bit BitFlippingContinuous, saving every epoch."""
    tmp = tmp_path_factory.mktemp("ddpg")
    return tiny_run(tmp, DDPGConfig, "goalenvs/BitFlippingContinuous-v0", save_every=1)


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory):
    """A finished one-epoch DQN run on 4-bit BitFlipping, shared by the tests that read it."""
    return tiny_run(tmp_path_factory.mktemp("dqn"), DQNConfig, "goalenvs/BitFlipping-v0")


@pytest.mark.parametrize("trained", ["ddpg_run", "dqn_run"])
def test_round_trip_gives_identical_actions(request, trained):
    trainer, result = request.getfixturevalue(trained)
    config_cls, env_id = type(trainer.config), trainer.config.env_id
    obs = observations(4, 32)
    policy = load_policy(result.latest_policy)  # on the CPU, whichever device trained it
    expected = trainer.agent.act(obs, explore=False)
    if trainer.device.type == "cpu":
        np.testing.assert_array_equal(policy.predict(obs), expected)
    else:  # trained on a GPU (device "auto"): the CPU's float rounding may differ a little
        np.testing.assert_allclose(policy.predict(obs), expected, rtol=1e-5, atol=1e-6)
        back = load_policy(result.latest_policy, device=trainer.device)
        np.testing.assert_allclose(back.predict(obs), expected, rtol=1e-6, atol=1e-7)
    single = policy.predict({k: v[3] for k, v in obs.items()})
    # One row alone may round differently from the same row in a batch (BLAS blocking).
    np.testing.assert_allclose(single, expected[3], rtol=1e-5, atol=1e-7)
    assert single.shape == policy.action_space.shape
    assert policy.env_id == env_id and policy.env_kwargs == {"n_bits": 4}
    # `goalenvs play` compares these with the env it is asked to drive.
    env = gym.make(env_id, n_bits=4)
    assert policy.observation_space == env.observation_space
    assert policy.action_space == env.action_space
    assert policy.algo == config_cls.algo
    # The normalizer statistics travel with the policy: they are not the initial ones.
    assert float(policy.agent.normalizer.obs.count) > 0
    torch.testing.assert_close(
        policy.agent.normalizer.obs.mean, trainer.agent.normalizer.obs.mean.cpu()
    )


def test_checkpoint_is_tensors_and_plain_metadata(ddpg_run):
    run = ddpg_run[1].run_dir
    assert sorted(p.name for p in run.iterdir()) == [
        "checkpoints",
        "config.json",
        "curves.png",
        "policy_best.pt",
        "policy_epoch_1.pt",
        "policy_latest.pt",
        "progress.csv",
    ]  # fmt: skip  (no temporary file left behind)
    unit = run / "checkpoints" / "epoch_000001"
    names = sorted(p.name for p in unit.iterdir())
    assert names == ["manifest.json", "policy.pt", "state_rank0.pt"]
    # policy_latest.pt is a copy of the committed unit's policy.
    assert (run / "policy_latest.pt").read_bytes() == (unit / "policy.pt").read_bytes()
    state = torch.load(unit / "state_rank0.pt", weights_only=True)
    assert state["epoch"] == 1 and state["rank"] == 0 and set(state["agent"]) == {"rng"}
    data = torch.load(run / "policy_latest.pt", weights_only=True)
    meta = data["metadata"]
    assert meta["env_id"] == "goalenvs/BitFlippingContinuous-v0"
    assert meta["env_kwargs"] == {"n_bits": 4} and meta["algo"] == "ddpg"
    assert meta["hidden_sizes"] == [16, 16] and meta["epoch"] == 1
    assert meta["env_steps"] == 2 * 2 * 4  # cycles x envs x episode length
    assert set(data["policy"]) == {"normalizer", "actor"}
    assert {"obs.mean", "obs.std", "goal.mean", "goal.std"} <= set(data["policy"]["normalizer"])
    assert {"critic", "critic_target", "actor_optimizer"} <= set(data["training"])
    assert "training" not in torch.load(run / "policy_best.pt", weights_only=True)


class Payload:
    """An object whose unpickling would create a file (what a malicious checkpoint does)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_cut_foreign_unsafe_or_newer_file_is_refused_naming_why(tmp_path, dqn_run):
    best = dqn_run[1].best_policy
    raw = best.read_bytes()
    path = tmp_path / "file.pt"
    for cut_or_text in (raw[: len(raw) // 2], b"hello"):
        path.write_bytes(cut_or_text)
        with pytest.raises(CheckpointError, match="not a readable checkpoint"):
            load_policy(path)
    for foreign in ({"state_dict": {"weight": torch.zeros(3)}}, torch.zeros(3)):
        torch.save(foreign, path)
        with pytest.raises(CheckpointError, match="not a goalenvs checkpoint"):
            load_policy(path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_policy(tmp_path / "missing.pt")
    data = torch.load(best, weights_only=True)
    torch.save({**data, "version": 99}, path)
    with pytest.raises(CheckpointError, match="version 99"):
        read_checkpoint(path)
    marker = tmp_path / "code_ran"
    data["metadata"]["extra"] = Payload(str(marker))
    torch.save(data, path)
    with pytest.raises(CheckpointError, match="pickled Python objects"):
        load_policy(path)
    assert not marker.exists()


def test_policy_names_the_expected_shapes_on_a_wrong_observation(dqn_run):
    result = dqn_run[1]
    policy = load_policy(result.best_policy)
    with pytest.raises(ValueError, match=r"match neither one observation"):
        policy.predict(observations(5, 3))
    with pytest.raises(ValueError, match="must be a dict with keys"):
        policy.predict(np.zeros(4))
    assert not any(name.endswith(".tmp") for name in os.listdir(result.run_dir))
