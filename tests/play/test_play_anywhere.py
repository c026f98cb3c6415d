"""A run of a user's env that never ends an episode itself, played from a folder other than
the one it trained in: play takes the episode length the run recorded, and an env with no
length at all is cut at a ceiling with a line that says why, never played without end."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from goalenvs.play.screen import EPISODE_CEILING
from goalenvs.play.watch import watch
from tests.console import run_goalenvs

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
USER_ENV = ROOT / "tests" / "user_envs" / "cursor_env.py"
LENGTH = 12
EPISODE = re.compile(r"^episode \d+: return -?\d+\.\d\d, length (\d+), success", re.MULTILINE)


def test_a_run_of_a_never_ending_env_plays_its_recorded_length_from_another_folder(tmp_path):
    user, elsewhere = tmp_path / "user", tmp_path / "elsewhere"
    user.mkdir()
    elsewhere.mkdir()
    shutil.copy(USER_ENV, user / "cursor_env.py")
    tiny = ["--epochs", "1", "--cycles", "2", "--batches", "1", "--batch-size", "16"]
    argv = ["train", "cursor_env.py:CursorEnv", "--max-episode-steps", str(LENGTH), *tiny]
    trained = run_goalenvs(*argv, "--out", "run", "--quiet", cwd=user, timeout=240)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    policy = user / "run" / "policy_best.pt"

    played = run_goalenvs(
        "play", str(policy), "--headless", "--episodes", "2", cwd=elsewhere, timeout=240
    )
    assert played.returncode == 0, played.stderr
    assert [int(n) for n in EPISODE.findall(played.stdout)] == [LENGTH, LENGTH]
    assert "stopped after" not in played.stdout  # the recorded TimeLimit ended them


@pytest.fixture
def cursor_env(monkeypatch):
    """The user's CursorEnv class, imported from its folder."""
    monkeypatch.syspath_prepend(str(USER_ENV.parent))
    from cursor_env import CursorEnv

    return CursorEnv


def test_an_env_declaring_no_length_stops_at_the_ceiling_with_one_line(cursor_env, capsys):
    env = cursor_env()
    stats = watch(env, lambda obs: env.action_space.sample() * 0, episodes=1, show=False)
    assert stats.lengths == [EPISODE_CEILING]
    out = capsys.readouterr().out
    assert f"episode 1 stopped after {EPISODE_CEILING} steps: the env declares no episode" in out
    assert "--max-episode-steps N" in out


def test_a_declared_length_the_env_ignores_still_ends_the_episode(cursor_env, capsys):
    class Declares(cursor_env):
        max_episode_steps = 7  # declared, but step() never truncates

    stats = watch(Declares(), lambda obs: [0.0, 0.0], episodes=2, show=False)
    assert stats.lengths == [7, 7]
    assert capsys.readouterr().out.count("stopped after 7 steps: the episode length 7") == 2
