"""n-step returns in the one HER buffer, on numpy and torch: each sampled transition's reward
is the discounted sum of the rewards of it and of up to ``n_step - 1`` transitions after it
in its episode (recomputed for a relabeled goal), ``discounts`` is ``gamma`` to the power
of the steps summed, and the next observation is the one after the last of them. The
buffers hold the tagged episodes of model.py, so every value of a batch says
which steps it came from."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch

from goalenvs.agents import DDPG, DDPGConfig, DQNConfig
from goalenvs.cli import main
from goalenvs.train.trainer import Trainer
from tests.agents.test_policy_average import train_argv
from tests.her.model import (
    ACTIONS,
    DEVICES,
    SPACE,
    Model,
    Recorder,
    batch_arrays,
    feed,
    goal_reward,
    make,
    step_reached,
    stored_reward,
    to_numpy,
)
from tests.train.test_train_resume import config as resume_config

GAMMA = 0.5  # exact in float32, so the sums are checked to the last bit that matters
LENGTHS = [[5, 1, 7, 3, 2], [2, 6, 4, 1, 7]]


def filled(device: Any, n_step: int, end: str = "truncated", **kwargs: Any) -> tuple[Any, dict]:
    """Two envs with episodes of 1-7 transitions, filled well past one ring of 80 rows;
    the buffer and its intact episodes' lengths."""
    buffer = make(device, 160, n_envs=2, n_step=n_step, gamma=GAMMA, seed=3, **kwargs)
    model = Model(80, [[(length, end) for length in plan] for plan in LENGTHS])
    feed([buffer], model, 150)
    return buffer, {key: ep.length for key, ep in model.live().items()}


def sampled(buffer: Any, count: int) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """A batch's arrays, its tags and which of its goals are relabeled."""
    got = batch_arrays(buffer.sample(count))
    tags = got["obs/observation"].astype(int)
    own = np.c_[np.full(len(tags), -1), tags[:, :2]]
    return got, tags, (got["obs/desired_goal"] != own).any(1)


def expected_return(e: int, m: int, i: int, steps: int, goal: np.ndarray, relabeled: bool) -> float:
    """The discounted sum of ``steps`` rewards from step ``i`` of env ``e``'s episode ``m``."""
    return sum(
        GAMMA**k
        * float(
            goal_reward(np.float32([e, m, i + k + 1]), goal)
            if relabeled
            else stored_reward(e, m, i + k)
        )
        for k in range(steps)
    )


def check_step(got: dict, row: int, tag: Any, steps: int, relabeled: bool) -> None:
    e, m, i = tag
    np.testing.assert_array_equal(got["next/observation"][row], [e, m, i + steps])
    np.testing.assert_array_equal(got["next/achieved_goal"][row], [e, m, i + steps])
    np.testing.assert_array_equal(got["next/desired_goal"][row], got["obs/desired_goal"][row])
    assert got["discounts"][row] == GAMMA**steps
    want = expected_return(e, m, i, steps, got["obs/desired_goal"][row], relabeled)
    assert got["rewards"][row] == pytest.approx(want, rel=1e-6, abs=1e-3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("n_step", "end", "kwargs"),
    [
        (2, "truncated", {}),
        (3, "truncated", {}),
        (3, "terminated", {"n_sampled_goal": 0}),
        (4, "truncated", {"compute_terminated": step_reached}),
    ],
)
def test_returns_sum_the_steps_left_in_the_episode_up_to_its_end_or_goal(
    device: Any, n_step: int, end: str, kwargs: dict[str, Any]
) -> None:
    """A time limit bootstraps; a terminated episode ends the return and stops
    bootstrapping, and so does a relabeled goal reached midway where compute_terminated
    says so."""
    recorder = Recorder()
    buffer, intact = filled(device, n_step, end, compute_reward=recorder, **kwargs)
    got, tags, relabeled = sampled(buffer, 3000)
    if "n_sampled_goal" not in kwargs:
        [(achieved, _, _)] = recorder.calls  # one call for every step of every return
        assert len(achieved) == n_step * 3000
        assert 0.6 < relabeled.mean() < 0.95  # future k=4 relabels 80%
    steps_seen, stopped_early = set(), 0
    for row, (e, m, i) in enumerate(tags):
        steps = min(n_step, intact[(e, m)] - i)
        done = end == "terminated" and i + n_step >= intact[(e, m)]
        if relabeled[row] and "compute_terminated" in kwargs:
            g = int(got["obs/desired_goal"][row, 2])  # goal step g (> i) is reached by g - 1
            if g - i <= steps:
                stopped_early += g - i < steps
                steps, done = g - i, True
        steps_seen.add(steps)
        assert got["dones"][row] == float(done)
        check_step(got, row, (e, m, i), steps, bool(relabeled[row]))
    assert steps_seen == set(range(1, n_step + 1))  # near the end fewer steps are left
    assert "compute_terminated" not in kwargs or stopped_early > 100


def test_the_agents_bootstrap_with_the_batch_discounts() -> None:
    """The critic's target is ``r + discounts * (1 - done) * Q'`` when a batch carries
    discounts, ``r + gamma * (1 - done) * Q'`` when it does not."""
    torch.manual_seed(0)
    agent = DDPG(SPACE, ACTIONS, DDPGConfig(hidden_sizes=(8,)), gamma=0.9, seed=0)
    agent.set_return_range(-100.0, 100.0)
    rewards = torch.tensor([-1.0, -2.0, 0.0])
    dones = torch.tensor([0.0, 0.0, 1.0])
    next_values = torch.tensor([-10.0, -10.0, -10.0])
    discounts = torch.tensor([0.81, 0.729, 0.81])
    one_step = agent.targets(rewards, dones, next_values)
    n_step = agent.targets(rewards, dones, next_values, discounts)
    torch.testing.assert_close(one_step, torch.tensor([-10.0, -11.0, 0.0]))
    torch.testing.assert_close(n_step, torch.tensor([-9.1, -9.29, 0.0]))


def test_a_run_samples_n_step_returns_with_its_own_discount(tmp_path: Any) -> None:
    """The trainer hands the buffer the run's n_step and its resolved gamma (BitFlipping's
    4 steps: 1 - 1/4), and every update reads batches that carry discounts."""
    trainer = Trainer(resume_config(tmp_path, epochs=1, n_step=3))
    try:
        trainer.run()
        buffer = trainer.buffer
        assert (buffer.n_step, buffer.gamma) == (3, 0.75)
        discounts = to_numpy(buffer.sample(512).discounts)
        assert set(np.round(discounts, 6)) == {0.75, 0.5625, 0.421875}
    finally:
        trainer.close()
    assert DQNConfig(n_step=3).her_settings(0.9)["gamma"] == 0.9
    assert DQNConfig(n_step=3, gamma=0.8).her_settings(0.9)["gamma"] == 0.8
    assert DQNConfig().her_settings(0.9)["gamma"] is None  # one step: no discount to hand


def test_the_flag_sets_it_a_resume_keeps_it_and_a_retired_setting_resumes_only_off(
    tmp_path: Any, capsys: Any
) -> None:
    """A resume keeps it (a bad value: tests/train/test_train_config.py). A run folder
    written before the retirement records n_step_until 0 (and the motion settings' off
    values) in config.json: it resumes; one that used the setting is refused in one line,
    and the flag is gone."""
    argv, tiny = train_argv(epochs=1)
    out = tmp_path / "run"
    assert main([*argv, *tiny, "--n-step", "3", "--out", str(out)]) == 0
    capsys.readouterr()
    config_path = out / "config.json"
    written = json.loads(config_path.read_text())
    assert written["n_step"] == 3
    resume = ["train", "--resume", str(out), "--epochs", "2", "--quiet"]
    assert main([*resume, "--n-step", "2"]) == 2
    err = capsys.readouterr().err
    assert "--n-step cannot change when resuming a run: the run's replay has n_step 3" in err
    old = {"n_step_until": 0, "motion_threshold": None, "motion_scope": "episode"}
    config_path.write_text(json.dumps({**written, **old}))
    assert main([*resume, "--n-step", "3"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    config_path.write_text(json.dumps({**written, **old, "n_step_until": 400}))
    assert main([*resume[:3], "--epochs", "3", "--quiet"]) == 2
    assert "n_step_until 400: goalenvs no longer has this setting" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*argv, "--n-step-until", "100", "--show-config"])
    assert "unrecognized arguments: --n-step-until" in capsys.readouterr().err
