"""``goalenvs play --policy``: a file that is not a checkpoint, and a run of a file env
played and resumed from another folder (tests/play/test_play.py watches checkpoints)."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from goalenvs.cli import main as cli_main
from tests.console import refused
from tests.train.runs import TINY

torch = pytest.importorskip("torch")
pytest.importorskip("goalenvs.train.trainer")

torch.set_num_threads(1)


def test_a_file_that_is_not_a_checkpoint_is_refused_in_one_line(capsys, tmp_path):
    bad = tmp_path / "notes.pt"
    bad.write_text("not a checkpoint")
    err = refused(capsys, "play", "goalenvs/BitFlipping-v0", "--policy", str(bad), "--headless")
    assert err.startswith("goalenvs play: error: --policy: ")
    assert str(bad) in err and "not a readable checkpoint" in err


USER_ENV = Path(__file__).resolve().parents[1] / "user_envs" / "noframes_env.py"


@pytest.fixture
def file_env_run(tmp_path, monkeypatch):
    """A run trained from the user's folder on ``noframes_env.py:Reach`` (a relative file
    spec), and the folder."""
    from goalenvs.agents.ddpg import DDPGConfig
    from goalenvs.train.trainer import Trainer

    user = tmp_path / "user"
    user.mkdir()
    shutil.copy(USER_ENV, user / "noframes_env.py")
    monkeypatch.chdir(user)
    monkeypatch.setattr(sys, "path", list(sys.path))
    config = DDPGConfig(
        env_id="noframes_env.py:Reach", env_kwargs={"max_episode_steps": 10}, env_workers=1,
        out="run", device="cpu", **TINY,
    )  # fmt: skip
    Trainer(config).run()
    yield user, user / "run"
    gym.envs.registry.pop("noframes/Reach-v0", None)  # the module registers its id


def test_a_policy_of_a_file_env_plays_from_another_folder(file_env_run, monkeypatch, capsys):
    user, run = file_env_run
    recorded = str((user / "noframes_env.py").resolve())
    assert json.loads((run / "config.json").read_text())["env_file"] == recorded
    meta = torch.load(run / "policy_best.pt", weights_only=True)["metadata"]
    assert meta["env_id"] == "noframes_env.py:Reach" and meta["env_file"] == recorded

    elsewhere = user.parent / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert not (elsewhere / "noframes_env.py").exists()
    argv = ["play", str(run / "policy_best.pt"), "--headless", "--episodes", "2", "--seed", "0"]
    assert cli_main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert len(re.findall(r"^episode \d+: ", printed, re.M)) == 2
    assert re.search(r"^2 episodes: success rate \d+\.\d% \(\d/2\)", printed, re.M)


def test_a_run_of_a_file_env_resumes_from_another_folder(file_env_run, monkeypatch, capsys):
    user, run = file_env_run
    elsewhere = user.parent / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert cli_main(["train", "--resume", str(run), "--epochs", "2", "--quiet"]) == 0, (
        capsys.readouterr().err
    )
    rows = (run / "progress.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in rows[1:]] == ["1", "2"]


def test_a_moved_env_file_is_one_line_naming_where_it_was_and_how_to_give_it(
    file_env_run, monkeypatch, capsys
):
    user, run = file_env_run
    recorded = str((user / "noframes_env.py").resolve())
    (user / "noframes_env.py").rename(user / "moved.py")
    monkeypatch.chdir(user.parent)
    policy = str(run / "policy_best.pt")
    err = refused(capsys, "play", policy, "--headless", "--episodes", "1")
    assert err.startswith("goalenvs play: error: env 'noframes_env.py:Reach': ")
    assert f"neither at {recorded} (where the run recorded it)" in err
    assert "give the env before --policy: " in err and f":Reach --policy {policy}" in err
    # Given as it says, the env plays.
    moved = f"{user / 'moved.py'}:Reach"
    assert cli_main(["play", moved, "--policy", policy, "--headless", "--episodes", "1"]) == 0
    assert "1 episode: success rate" in capsys.readouterr().out
