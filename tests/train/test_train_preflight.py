"""``goalenvs check`` and ``goalenvs train`` speak with one voice: what breaks training is
an error of the checker and stops ``train`` in one line before its first step; what the
trainer tolerates is a warning of the checker and a note of ``train``. Also the flags
every command shares (``--max-episode-steps``) and a run's budget in env steps or
minutes."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from goalenvs.checker import load
from goalenvs.checker.preflight import PREFLIGHT_CHECKS, preflight
from goalenvs.cli import main
from goalenvs.train.envs import goal_function

USER_ENV = Path(__file__).resolve().parents[1] / "user_envs" / "reach2d_env.py"
TINY = ["--epochs", "1", "--cycles", "2", "--batches", "2", "--batch-size", "16", "--quiet"]

# defect -> the check that finds it (an error in `check`, a stop in `train`)
DEFECTS = dict(scalar_reward="reward.batch", no_success="success.present",
               array_success="success.bool", endless="episode.ends")  # fmt: skip


def spec(name: str) -> str:
    return f"{USER_ENV}:{name}"


@pytest.mark.parametrize(("factory", "check_id"), DEFECTS.items())
def test_a_defect_is_an_error_of_check_and_stops_train_before_its_first_step(
    factory, check_id, tmp_path, capsys
):
    code = main(["check", spec(factory), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    failed = {r["id"]: r for r in report["checks"] if r["status"] == "failed"}
    assert failed[check_id]["severity"] == "error"
    out = tmp_path / "run"
    code = main(["train", spec(factory), *TINY, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1, err
    assert f"failed the pre-training check {check_id}" in err[0]
    assert "fix: " in err[0] and f"goalenvs check {spec(factory)}" in err[0]
    assert not out.exists()  # refused: no half-made run folder


def test_the_correct_env_checks_clean_of_errors_and_trains(tmp_path, capsys):
    assert main(["check", spec("Reach2D"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    warned = {r["id"] for r in report["checks"] if r["status"] == "failed"}
    assert "episode.length_declared" in warned  # tolerated: a warning, and a note of train
    assert report["facts"] == {"episode_length": 20}

    out = tmp_path / "run"
    argv = ["train", spec("Reach2D"), *TINY[:-1], "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "the episode length is taken as 20 steps" in printed.err
    assert "pre-training checks passed in " in printed.out
    config = json.loads((out / "config.json").read_text())
    assert config["max_episode_steps"] == 20 and config["preflight"] is True
    rows = (out / "progress.csv").read_text().splitlines()
    assert rows[1].split(",")[1] == str(2 * 20 * 2)  # 2 cycles x 20 steps x 2 envs
    # play takes the run's recorded length: Reach2D's own limit, now gymnasium's too
    argv = ["play", str(out / "policy_best.pt"), "--headless", "--episodes", "2"]
    assert main([*argv, "--max-episode-steps", "5"]) == 0
    assert "episode length 5.0 (min 5, max 5)" in capsys.readouterr().out


def test_no_preflight_skips_the_checks_and_the_buffer_still_refuses_a_scalar_reward(
    tmp_path, capsys
):
    out = tmp_path / "run"
    argv = ["train", spec("scalar_reward"), *TINY, "--out", str(out), "--no-preflight"]
    # baselines' cycles of one whole episode: the buffer samples in the first cycle
    code = main([*argv, "--max-episode-steps", "20", "--preset", "baselines"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Reach2D.compute_reward returned shape () for a batch of" in err
    assert "expected (16,), one reward per pair" in err


def test_goal_function_broadcasts_a_constant_termination_but_never_a_reward():
    env = gym.make(gym.envs.registration.EnvSpec("x", entry_point=lambda: _scalar_env()))
    envs = gym.vector.SyncVectorEnv([lambda: _scalar_env()])
    goals = np.zeros((5, 2), np.float32)
    reward = goal_function(envs, env, "compute_reward")
    assert np.shape(reward(goals, goals, None)) == ()  # left for the buffer to refuse
    assert reward.__qualname__ == "Reach2D.compute_reward"
    terminated = goal_function(envs, env, "compute_terminated")
    assert terminated(goals, goals, None).shape == (5,)


def _scalar_env():
    from tests.user_envs.reach2d_env import Reach2D

    env = Reach2D("scalar_reward")
    env.compute_terminated = lambda a, d, i: False  # Fetch's constant
    return env


def test_preflight_runs_only_the_cheap_checks_and_says_what_it_tolerates():
    env = load(spec("Reach2D"))[0]
    result = preflight(env, seed=0)
    assert result.ok
    assert {r.id for r in result.report.results} == set(PREFLIGHT_CHECKS)
    assert result.episode_length == 20
    # the measured length is the trainer's own note, not a second one
    assert not any(line.startswith("episode.length_declared") for line in result.notes)


def test_max_episode_steps_is_taken_by_check_train_and_applies_a_time_limit(tmp_path, capsys):
    # a class spec: the flag is gymnasium's TimeLimit, never an argument of the constructor
    assert main(["check", spec("endless"), "--max-episode-steps", "25", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert not [r for r in report["checks"] if r["status"] == "failed" and r["severity"] == "error"]
    env = load(spec("endless"), max_episode_steps=25)[0]
    env.reset(seed=0)
    assert next(n for n in itertools.count(1) if env.step(env.action_space.sample())[3]) == 25

    out = tmp_path / "run"
    code = main(["train", spec("endless"), *TINY, "--out", str(out), "--max-episode-steps", "25"])
    assert code == 0, capsys.readouterr().err
    assert json.loads((out / "config.json").read_text())["max_episode_steps"] == 25
    # the endless env ends its episodes only by the run's recorded limit, in play too
    assert main(["play", str(out / "policy_best.pt"), "--headless", "--episodes", "1"]) == 0
    assert "episode length 25.0 (min 25, max 25)" in capsys.readouterr().out
    code = main(["train", "--resume", str(out), "--max-episode-steps", "30", "--quiet"])
    assert code == 2
    assert "--max-episode-steps 30 differs from the resumed run's 25" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--max-episode-steps", "--max-env-steps", "--minutes"])
def test_budget_and_length_flags_refuse_non_positive_values(flag, capsys):
    assert main(["train", "goalenvs/PointReach-v0", flag, "0", "--show-config"]) == 2
    assert f"{flag} 0" in capsys.readouterr().err


def test_max_env_steps_sets_the_epochs_and_ends_the_run_resumable(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "goalenvs/PointReach-v0", "--cycles", "1", "--num-envs", "2"]
    argv += ["--batches", "1", "--batch-size", "8", "--quiet", "--out", str(out)]
    argv += ["--device", "cpu"]  # the preset's CPU rollout (its [device] one is longer)
    # an epoch: 1 cycle x 5 steps (the preset's rollout) x 2 envs = 10 env steps
    assert main([*argv, "--max-env-steps", "25", "--show-config"]) == 0
    assert json.loads(capsys.readouterr().out)["epochs"] == 3
    assert main([*argv, "--max-env-steps", "20", "--epochs", "5"]) == 0
    printed = capsys.readouterr().out
    assert "ended at its budget (--max-env-steps)" in printed
    assert f"--resume {out} --max-env-steps 40" in printed
    rows = (out / "progress.csv").read_text().splitlines()[1:]
    assert [row.split(",")[1] for row in rows] == ["10", "20"]

    assert main(["train", "--resume", str(out), "--max-env-steps", "30", "--quiet"]) == 0
    rows = (out / "progress.csv").read_text().splitlines()[1:]
    assert [row.split(",")[1] for row in rows] == ["10", "20", "30"]


def test_minutes_ends_the_run_at_the_first_epoch_past_them(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "goalenvs/PointReach-v0", "--cycles", "1", "--num-envs", "2", "--epochs"]
    argv += ["9", "--batches", "1", "--batch-size", "8", "--quiet", "--out", str(out)]
    assert main([*argv, "--minutes", "0.00001"]) == 0
    printed = capsys.readouterr().out
    assert "training ended at its budget (--minutes): 1 epochs" in printed
    assert len((out / "progress.csv").read_text().splitlines()) == 2
    assert (out / "policy_latest.pt").is_file()  # committed: --resume continues it


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["trian", "goalenvs/PointReach-v0"], "unknown command 'trian'.*did you mean 'train'"),
        (["check", "goalenvs/PointReach-v0", "--stric"], "did you mean --strict"),
        (
            ["train", "goalenvs/PointReach-v0", "--preset", "point_rech", "--show-config"],
            "did you mean 'point_reach'",
        ),
    ],
)
def test_misspellings_and_prefixes_are_refused_with_the_word_meant(argv, message, capsys):
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's own error exit
        code = exit.code
    assert code == 2
    assert re.search(message, capsys.readouterr().err)
