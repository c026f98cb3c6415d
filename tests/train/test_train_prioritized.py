"""``--prioritized``: the trainers feed TD errors back as replay priorities; goal-motion
priorities are the episodes' own."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.agents.dqn import DQNConfig
from goalenvs.cli import main
from goalenvs.her import HerReplayBuffer
from goalenvs.her.buffer import DeviceHerReplayBuffer
from goalenvs.train.trainer import Trainer


@contextlib.contextmanager
def filled_trainer(config_cls, env_id: str, tmp_path, **kwargs) -> Iterator[tuple[Trainer, dict]]:
    """A small trainer on ``env_id`` with ``kwargs``, after 3 collected cycles, and the
    stats dict its ``optimize`` fills."""
    config = config_cls(
        env_id=env_id, num_envs=2, n_batches=3, batch_size=32, hidden_sizes=(16,), device="cpu",
        verbose=False, out=str(tmp_path), **kwargs,
    )  # fmt: skip
    trainer = Trainer(config)
    try:
        trainer.collector.reset(seed=0)
        stats = {name: [] for name in ("success", *trainer.agent.loss_names)}
        for _ in range(3):
            rollout = trainer.collector.collect(trainer.agent)
            stats["success"] += trainer.collector.store(rollout, trainer.buffer, trainer.agent)
        yield trainer, stats
    finally:
        trainer.close()


@pytest.mark.parametrize(
    ("config_cls", "env_id"),
    [(DDPGConfig, "goalenvs/PointReach-v0"), (DQNConfig, "goalenvs/BitFlipping-v0")],
)
def test_updates_set_priorities_from_td_errors(config_cls, env_id, tmp_path):
    with filled_trainer(config_cls, env_id, tmp_path, prioritized=True) as (trainer, stats):
        assert trainer.buffer.prioritized
        leaves = priorities(trainer.buffer)
        before = np.unique(leaves[leaves > 0])
        assert len(before) == 1  # new transitions all enter at the max priority
        trainer.optimize(stats)
        leaves = priorities(trainer.buffer)
        after = np.unique(leaves[leaves > 0])
        assert len(after) > 1  # the sampled ones now carry their own |TD error|
        weights = trainer.buffer.sample(64).weights
        assert weights.max() == pytest.approx(1.0) and weights.min() < 1.0
        assert all(np.isfinite(stats[name]).all() for name in trainer.agent.loss_names)


@pytest.mark.parametrize("replay_device", ["host", "device"])
@pytest.mark.parametrize("weights", [None, (1.0, 0.5)])
def test_goal_motion_priorities_are_left_to_the_episodes(replay_device, weights, tmp_path) -> None:
    kwargs = {"prioritized": True, "priority": "goal_motion", "priority_alpha": 1.0}
    kwargs.update(motion_weights=weights, priority_eps=0.01)
    with filled_trainer(
        DDPGConfig, "goalenvs/PointReach-v0", tmp_path, replay_device=replay_device, **kwargs
    ) as (trainer, stats):
        buffer = trainer.buffer
        kind = HerReplayBuffer if replay_device == "host" else DeviceHerReplayBuffer
        assert isinstance(buffer, kind) and buffer.priority == "goal_motion"
        assert buffer.motion_weights == weights  # the config's weights reach the buffer
        assert buffer.priority_eps == 0.01  # and its floor
        before = priorities(buffer).copy()
        assert len(np.unique(before[before > 0])) > 1  # episodes moved by different amounts
        trainer.optimize(stats)  # no update_priorities: it would raise
        np.testing.assert_array_equal(priorities(buffer), before)
        np.testing.assert_array_equal(as_numpy(buffer.sample(64).weights), 1.0)


def priorities(buffer: HerReplayBuffer | DeviceHerReplayBuffer) -> np.ndarray:
    """Each row's draw weight, 0 where it cannot be drawn (for goal motion, its episode's
    path; for TD errors, its ``|TD error| ** alpha``)."""
    return as_numpy(buffer.priorities.weights())


def as_numpy(value: object) -> np.ndarray:
    return value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def show_config(capsys, *flags: str) -> dict:
    """The config ``goalenvs train goalenvs/PointReach-v0 FLAGS --show-config`` prints."""
    assert main(["train", "goalenvs/PointReach-v0", *flags, "--show-config"]) == 0
    return json.loads(capsys.readouterr().out)


def test_prioritized_and_priority_alpha_and_beta_flags_reach_the_config(capsys):
    assert show_config(capsys, "--prioritized")["prioritized"] is True
    config = show_config(capsys, "--prioritized", "--priority-alpha", "0.5", "--priority-beta", "1")
    assert (config["priority_alpha"], config["priority_beta"]) == (0.5, 1.0)
    config = show_config(capsys, "--priority", "goal_motion", "--priority-alpha", "0.25")
    assert (config["priority"], config["priority_alpha"]) == ("goal_motion", 0.25)
    assert config["priority_eps"] == 1e-6  # the buffers' floor unless a flag moves it
    config = show_config(capsys, "--priority", "goal_motion", "--priority-eps", "0.01")
    assert config["priority_eps"] == 0.01


UNIFORM = "only applies to prioritized replay, and this run's is uniform"
UNUSED = [("--priority-alpha", "0.5"), ("--priority-beta", "0.7"), ("--priority-eps", "0.01")]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        *(([flag, value], f"{flag} {value} {UNIFORM}") for flag, value in UNUSED),
        (["--prioritized", "--priority-eps", "0"], "priority_eps must be > 0.0, got 0.0"),
        (
            ["--priority", "goal_motion", "--priority-beta", "0.7"],
            "--priority-beta 0.7 only applies to priority td_error: draws by goal motion carry",
        ),
        (["--prioritized", "--priority-alpha", "2"], "priority_alpha must be in [0, 1], got 2.0"),
    ],
)
def test_priority_flags_the_run_would_ignore_stop_it(flags, message, capsys):
    assert main(["train", "goalenvs/PointReach-v0", *flags, "--show-config"]) == 2
    assert message in capsys.readouterr().err


def test_a_resumed_run_keeps_its_replay_settings(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "goalenvs/PointReach-v0", "--epochs", "1", "--cycles", "1"]
    tiny = ["--num-envs", "2", "--batches", "2", "--batch-size", "16", "--quiet"]
    flags = ["--priority", "goal_motion", "--priority-alpha", "0.5", "--save-buffer"]
    assert main([*argv, *tiny, *flags, "--out", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    resume = ["train", "--resume", str(out), "--epochs", "2", "--quiet"]
    # the flags that change the saved buffer's draws are refused, by name and value
    for flags, said in [
        (["--priority-alpha", "1"], "--priority-alpha cannot change when resuming a run"),
        (["--priority-alpha", "1"], "priority_alpha 0.5, the flags ask for 1.0"),
        (["--priority", "td_error"], "--priority cannot change when resuming a run"),
        (["--n-sampled-goal", "8"], "--n-sampled-goal cannot change"),
        (["--priority-eps", "0.01"], "priority_eps 1e-06, the flags ask for 0.01"),
        (["--motion-clip", "0.05"], "motion_clip None, the flags ask for 0.05"),
    ]:
        assert main([*resume, *flags]) == 2
        assert said in capsys.readouterr().err
    # the same values again are no change: the run goes on
    assert main([*resume, "--priority", "goal_motion", "--priority-alpha", "0.5"]) == 0
    assert json.loads((out / "config.json").read_text())["priority_alpha"] == 0.5
