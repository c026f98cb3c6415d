"""n-step returns in both HER buffers: each sampled transition's reward is the discounted
sum of the rewards of it and of up to ``n_step - 1`` transitions after it in its episode
(recomputed for a relabeled goal), ``discounts`` is ``gamma`` to the power of the steps
summed, and the next observation is the one after the last of them. The buffers are
filled with the tagged episodes of test_buffer_backends.py, so every value of a batch
says which steps it came from."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch

from goalenvs.agents import DDPG, DDPGConfig, DQNConfig
from goalenvs.cli import main
from goalenvs.her import HerBatch
from goalenvs.train.trainer import Trainer
from tests.agents.test_policy_average import train_argv
from tests.her.test_buffer_backends import (
    BACKENDS,
    TAG_ACTIONS,
    TAG_SPACE,
    Writer,
    make_buffer,
    stored_reward,
    tag_reward,
    to_numpy,
)
from tests.train.test_train_resume import config as resume_config

GAMMA = 0.5  # exact in float32, so the sums are checked to the last bit that matters


def filled(backend: str, n_step: int, terminated: bool = False, **kwargs: Any) -> Any:
    """A buffer of two envs with episodes of 1-7 transitions, filled well past one ring."""
    buffer = make_buffer(backend, 160, 2, n_step=n_step, gamma=GAMMA, seed=3, **kwargs)
    writer = Writer(buffer, [[5, 1, 7, 3, 2] * 12, [2, 6, 4, 1, 7] * 12])
    for _ in range(150):
        writer.add_step(terminated=terminated)
    return buffer, writer


def arrays(batch: HerBatch) -> dict[str, Any]:
    obs, nxt = batch.observations, batch.next_observations
    return {
        "tags": to_numpy(obs["observation"]).astype(int),
        "goal": to_numpy(obs["desired_goal"]),
        "next": to_numpy(nxt["observation"]).astype(int),
        "next_goal": to_numpy(nxt["desired_goal"]),
        "next_achieved": to_numpy(nxt["achieved_goal"]),
        "rewards": to_numpy(batch.rewards),
        "dones": to_numpy(batch.dones),
        "discounts": to_numpy(batch.discounts),
    }


def expected_return(e: int, m: int, i: int, steps: int, goal: np.ndarray, relabeled: bool) -> float:
    """The discounted sum of ``steps`` rewards from step ``i`` of env ``e``'s episode ``m``."""
    total = 0.0
    for k in range(steps):
        if relabeled:
            achieved = np.array([e, m, i + k + 1], np.float32)
            reward = float(tag_reward(achieved, goal, None))
        else:
            reward = float(stored_reward(e, m, i + k))
        total += GAMMA**k * reward
    return total


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n_step", [2, 3])
def test_returns_sum_the_steps_left_in_the_episode(backend: str, n_step: int) -> None:
    buffer, writer = filled(backend, n_step)
    intact = writer.intact_episodes()
    got = arrays(buffer.sample(3000))
    relabeled = got["goal"][:, 0] >= 0
    assert 0.6 < relabeled.mean() < 0.95  # future k=4 relabels 80%
    steps_seen = set()
    for row, (e, m, i) in enumerate(got["tags"]):
        length = intact[(e, m)]
        steps = min(n_step, length - i)
        steps_seen.add(steps)
        np.testing.assert_array_equal(got["next"][row], [e, m, i + steps])
        np.testing.assert_array_equal(got["next_achieved"][row], [e, m, i + steps])
        np.testing.assert_array_equal(got["next_goal"][row], got["goal"][row])
        assert got["discounts"][row] == GAMMA**steps
        want = expected_return(e, m, i, steps, got["goal"][row], bool(relabeled[row]))
        assert got["rewards"][row] == pytest.approx(want, rel=1e-6, abs=1e-3)
    assert steps_seen == set(range(1, n_step + 1))  # near the end fewer steps are left
    np.testing.assert_array_equal(got["dones"], 0.0)  # time limits bootstrap


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_terminated_episode_ends_the_return_and_stops_bootstrapping(backend: str) -> None:
    buffer, writer = filled(backend, 3, terminated=True, n_sampled_goal=0)
    intact = writer.intact_episodes()
    got = arrays(buffer.sample(2000))
    for row, (e, m, i) in enumerate(got["tags"]):
        reaches_end = i + 3 >= intact[(e, m)]
        assert got["dones"][row] == float(reaches_end)
    # Without a termination in reach, the return bootstraps from three steps on.
    assert (got["discounts"][got["dones"] == 0] == GAMMA**3).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_relabeled_goal_reached_midway_stops_the_return_there(backend: str) -> None:
    def reached(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        return achieved_goal[..., 2] == desired_goal[..., 2]  # the goal's step index

    buffer, writer = filled(backend, 4, compute_terminated=reached)
    intact = writer.intact_episodes()
    got = arrays(buffer.sample(3000))
    relabeled = got["goal"][:, 0] >= 0
    stopped_early = 0
    for row, (e, m, i) in enumerate(got["tags"]):
        steps = min(4, intact[(e, m)] - i)
        if relabeled[row]:
            # Goal step g (a future achieved goal: g > i) is reached by step g - 1.
            g = int(got["goal"][row, 2])
            if g - i <= steps:
                stopped_early += g - i < steps
                steps = g - i
                assert got["dones"][row] == 1.0
            else:
                assert got["dones"][row] == 0.0
        else:
            assert got["dones"][row] == 0.0  # the stored ones: time limits
        np.testing.assert_array_equal(got["next"][row], [e, m, i + steps])
        assert got["discounts"][row] == GAMMA**steps
        want = expected_return(e, m, i, steps, got["goal"][row], bool(relabeled[row]))
        assert got["rewards"][row] == pytest.approx(want, rel=1e-6, abs=1e-3)
    assert stopped_early > 100


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_step_batches_carry_no_discounts_and_are_unchanged(backend: str) -> None:
    one = make_buffer(backend, 160, 2, seed=3)
    writer = Writer(one, [[5, 1, 7, 3, 2] * 12, [2, 6, 4, 1, 7] * 12])
    for _ in range(150):
        writer.add_step()
    batch = one.sample(64)
    assert batch.discounts is None
    assert one.n_step == 1 and one.gamma is None
    explicit, _ = filled(backend, 1)
    assert explicit.n_step == 1 and explicit.sample(64).discounts is None


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_n_step_survives_save_and_load(backend: str, tmp_path: Any) -> None:
    buffer, _ = filled(backend, 3)
    path = tmp_path / ("buffer.npz" if backend == "numpy" else "buffer.pt")
    buffer.save(path)
    loaded = type(buffer).load(
        path, tag_reward, None, **({} if backend == "numpy" else {"device": "cpu"})
    )
    assert (loaded.n_step, loaded.gamma) == (3, GAMMA)
    assert to_numpy(loaded.sample(256).discounts).min() >= GAMMA**3


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_step": 0, "gamma": 0.9}, ValueError, r"n_step must be >= 1, got 0"),
        ({"n_step": 2.5, "gamma": 0.9}, TypeError, r"n_step must be an int, got 2\.5"),
        ({"n_step": "3", "gamma": 0.9}, TypeError, r"n_step must be an int, got '3'"),
        ({"n_step": 3}, ValueError, r"n_step=3 sums 3 rewards with a discount: pass gamma"),
        ({"n_step": 3, "gamma": 1.0}, ValueError, r"gamma must be in \(0, 1\) or None, got 1"),
    ],
)
@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_bad_n_step_settings_name_the_field(
    backend: str, kwargs: dict[str, Any], error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        make_buffer(backend, 160, 2, **kwargs)


def test_the_agents_bootstrap_with_the_batch_discounts() -> None:
    """The critic's target is ``r + discounts * (1 - done) * Q'`` when a batch carries
    discounts, ``r + gamma * (1 - done) * Q'`` when it does not."""
    torch.manual_seed(0)
    agent = DDPG(TAG_SPACE, TAG_ACTIONS, DDPGConfig(hidden_sizes=(8,)), gamma=0.9, seed=0)
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


def test_the_flag_sets_it_a_bad_value_names_it_and_a_resume_keeps_it(
    tmp_path: Any, capsys: Any
) -> None:
    argv, tiny = train_argv(epochs=1)
    assert main([*argv, "--n-step", "0", "--show-config"]) == 2
    assert "n_step must be >= 1, got 0" in capsys.readouterr().err
    out = tmp_path / "run"
    assert main([*argv, *tiny, "--n-step", "3", "--out", str(out)]) == 0
    capsys.readouterr()
    assert json.loads((out / "config.json").read_text())["n_step"] == 3
    resume = ["train", "--resume", str(out), "--epochs", "2", "--quiet"]
    assert main([*resume, "--n-step", "2"]) == 2
    err = capsys.readouterr().err
    assert "--n-step cannot change when resuming a run: the run's replay has n_step 3" in err
    assert main([*resume, "--n-step", "3"]) == 0, capsys.readouterr().err


def _with_meta(path: Any, **entries: object) -> None:
    """Rewrites the metadata of the buffer file at ``path`` with ``entries`` added, as a
    file written by an older version that had them would read."""
    if str(path).endswith(".npz"):
        with np.load(path) as data:
            arrays = {key: data[key] for key in data.files}
        arrays["meta"] = np.array(json.dumps({**json.loads(str(arrays["meta"])), **entries}))
        np.savez(path, **arrays)
    else:
        data = torch.load(path, weights_only=True)
        data["meta"] = json.dumps({**json.loads(data["meta"]), **entries})
        torch.save(data, path)


@pytest.mark.parametrize(
    ("entry", "value"),
    [("n_step_until", 200), ("motion_threshold", 0.001), ("motion_scope", "ahead")],
)
@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_file_with_a_retired_setting_loads_at_its_off_value_and_is_refused_at_another(
    backend: str, entry: str, value: object, tmp_path: Any
) -> None:
    """Files written before n_step_until, motion_threshold and motion_scope were retired
    carry them: at the value that meant "off" they load and sample as before; at another,
    the load is one line that names the file, the setting and what to do."""
    buffer, _ = filled(backend, 3)
    path = tmp_path / ("buffer.npz" if backend == "numpy" else "buffer.pt")
    buffer.save(path)
    load_kwargs: dict[str, Any] = {} if backend == "numpy" else {"device": "cpu"}
    as_saved = arrays(type(buffer).load(path, tag_reward, None, **load_kwargs).sample(64))
    off = {"n_step_until": 0, "motion_threshold": None, "motion_scope": "episode"}[entry]
    _with_meta(path, **{entry: off})
    loaded = type(buffer).load(path, tag_reward, None, **load_kwargs)
    assert loaded.n_step == 3
    for key, values in arrays(loaded.sample(64)).items():
        np.testing.assert_array_equal(values, as_saved[key], err_msg=key)
    _with_meta(path, **{entry: value})
    with pytest.raises(ValueError) as caught:
        type(buffer).load(path, tag_reward, None, **load_kwargs)
    message = str(caught.value)
    assert message.startswith(f"{path}: written with {entry}={value!r}, a setting this version")
    assert "148f048" in message and "\n" not in message


def test_a_run_folder_with_a_retired_setting_resumes_at_its_off_value(
    tmp_path: Any, capsys: Any
) -> None:
    """A run folder written before the retirement records n_step_until 0 (and the motion
    settings' off values) in config.json: it resumes; one that used the setting is refused
    in one line, and the flag is gone."""
    argv, tiny = train_argv(epochs=1)
    out = tmp_path / "run"
    assert main([*argv, *tiny, "--n-step", "3", "--out", str(out)]) == 0
    capsys.readouterr()
    config_path = out / "config.json"
    written = json.loads(config_path.read_text())
    old = {"n_step_until": 0, "motion_threshold": None, "motion_scope": "episode"}
    config_path.write_text(json.dumps({**written, **old}))
    resume = ["train", "--resume", str(out), "--epochs", "2", "--quiet"]
    assert main(resume) == 0, capsys.readouterr().err
    capsys.readouterr()
    config_path.write_text(json.dumps({**written, **old, "n_step_until": 400}))
    assert main([*resume[:3], "--epochs", "3", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "n_step_until 400: goalenvs no longer has this setting" in err
    with pytest.raises(SystemExit):
        main([*argv, "--n-step-until", "100", "--show-config"])
    assert "unrecognized arguments: --n-step-until" in capsys.readouterr().err
