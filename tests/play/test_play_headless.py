"""``goalenvs play --headless`` on a user's env whose constructor takes no ``render_mode``:
every env-spec form plays it without frames, and a run that needs frames says why not."""

from __future__ import annotations

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

ENV_ID = "noframes/Reach-v0"  # as tests/user_envs/noframes_env.py registers it
HORIZON = 10
EPISODES = 3
# The user's module, copied into their folder (tests/user_envs/noframes_env.py).
USER_ENV = Path(__file__).resolve().parents[1] / "user_envs" / "noframes_env.py"
SUMMARY = re.compile(
    rf"^{EPISODES} episodes: success rate (?P<rate>\d+\.\d)% \((?P<successes>\d+)/{EPISODES}\), "
    r"mean return (?P<mean>-?\d+\.\d\d) \+/- \d+\.\d\d, episode length \d+\.\d "
    r"\(min (?P<min>\d+), max (?P<max>\d+)\)$",
    re.MULTILINE,
)
EPISODE = re.compile(
    r"^episode (\d+): return (-?\d+\.\d\d), length (\d+), success (True|False)$", re.MULTILINE
)


@pytest.fixture(scope="module")
def user_env(tmp_path_factory):
    """The user's folder with noframes_env.py, and a policy trained on it for one tiny
    epoch through the file form of its registered id."""
    from goalenvs.agents.ddpg import DDPGConfig
    from goalenvs.train.trainer import Trainer

    folder = tmp_path_factory.mktemp("user")
    shutil.copy(USER_ENV, folder / "noframes_env.py")
    env_id = f"{folder / 'noframes_env.py'}:{ENV_ID}"
    config = DDPGConfig(env_id=env_id, out=str(folder / "run"), device="cpu", **TINY)
    policy = str(Trainer(config).run().latest_policy)
    yield folder, policy
    gym.envs.registry.pop(ENV_ID, None)
    sys.modules.pop("noframes_env", None)


@pytest.fixture
def in_user_folder(user_env, monkeypatch):
    """The user's folder as the current one, with the import path restored afterwards."""
    folder, _ = user_env
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return folder


SPECS = [
    ENV_ID,  # registered when the file form was imported
    f"noframes_env:{ENV_ID}",
    "noframes_env:Reach",
    "noframes_env.py:Reach",
    f"noframes_env.py:{ENV_ID}",
    "noframes_env:make_reach",
]


@pytest.mark.parametrize("spec", SPECS)
def test_headless_play_builds_the_env_without_render_mode_and_prints_its_statistics(
    spec, user_env, in_user_folder, capsys
):
    _, policy = user_env
    argv = ["play", spec, "--policy", policy, "--headless", "--episodes", str(EPISODES)]
    assert cli_main([*argv, "--seed", "0"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    episodes = EPISODE.findall(captured.out)
    assert [int(number) for number, *_ in episodes] == list(range(1, EPISODES + 1))
    returns = [float(value) for _, value, _, _ in episodes]
    lengths = [int(length) for _, _, length, _ in episodes]
    successes = [success == "True" for *_, success in episodes]
    for episode_return, length, success in zip(returns, lengths, successes, strict=True):
        # -1 a step until the goal, 0 on the step that reaches it; HORIZON steps at most.
        assert 1 <= length <= HORIZON
        assert episode_return == (-(length - 1) if success else -length)
        assert success or length == HORIZON
    summary = SUMMARY.search(captured.out)
    assert summary, captured.out
    assert int(summary["successes"]) == sum(successes)
    assert float(summary["rate"]) == pytest.approx(100 * sum(successes) / EPISODES, abs=0.05)
    assert float(summary["mean"]) == pytest.approx(sum(returns) / EPISODES, abs=0.005)
    assert -HORIZON <= float(summary["mean"]) <= 0
    assert (int(summary["min"]), int(summary["max"])) == (min(lengths), max(lengths))


@pytest.mark.parametrize("spec", [ENV_ID, "noframes_env:Reach", "noframes_env.py:Reach"])
def test_play_with_a_window_names_the_render_modes_and_suggests_headless(
    spec, user_env, in_user_folder, capsys
):
    err = refused(capsys, "play", spec, "--policy", user_env[1])
    assert f"{spec} has no 'rgb_array' render mode (it offers [])" in err
    assert "--policy PATH --headless watches a policy without them" in err


@pytest.mark.parametrize(
    ("spec", "rejected"),
    [
        # metadata that offers rgb_array, a constructor that takes no render_mode
        ("noframes_env:DrawsNothing", "Reach.__init__() got an unexpected keyword argument"),
        # a factory without metadata: the render mode is tried, and refused
        ("noframes_env:make_reach", "make_reach() got an unexpected keyword argument"),
    ],
)
def test_a_constructor_refusing_render_mode_is_named_not_the_env_kwargs(
    spec, rejected, user_env, in_user_folder, capsys
):
    err = refused(capsys, "play", spec, "--policy", user_env[1], "--record", "out.gif")
    assert err.startswith(
        f"goalenvs play: error: {spec} takes no render_mode argument, which goalenvs play "
        "passes to draw frames (render_mode='rgb_array'): "
    )
    assert rejected in err and "--env-kwargs" not in err
    assert "was raised from the environment creator" not in err
    assert not Path("out.gif").exists()


def test_env_kwargs_the_constructor_refuses_are_named_as_env_kwargs(
    user_env, in_user_folder, capsys
):
    _, policy = user_env
    argv = ["play", "noframes_env:Reach", "--policy", policy, "--headless"]
    assert cli_main([*argv, "--env-kwargs", '{"size": 2}']) == 2
    err = capsys.readouterr().err
    assert err == (
        'goalenvs play: error: noframes_env:Reach rejected --env-kwargs {"size": 2}: '
        "Reach.__init__() got an unexpected keyword argument 'size'\n"
    )


def test_env_kwargs_cannot_choose_the_render_mode(user_env, in_user_folder, capsys):
    argv = ["play", ENV_ID, "--policy", user_env[1], "--headless"]
    err = refused(capsys, *argv, "--env-kwargs", '{"render_mode": "human"}')
    assert "--env-kwargs cannot set render_mode: goalenvs play chooses it" in err
