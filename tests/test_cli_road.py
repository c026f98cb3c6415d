"""The road a user walks through the ``goalenvs`` command: the next commands it prints run
as printed, its help says what the registry and the presets say, its errors name the
subcommand, and a log written to a file holds one plain line per epoch."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from goalenvs.agents.registry import ALGOS
from goalenvs.cli import main
from goalenvs.core.io import command_name
from goalenvs.train.presets import load_preset, preset_for, resolve_config

ROOT = Path(__file__).resolve().parents[1]
ENV_COMMANDS = ("train", "play", "check")  # the subcommands that take an env spec
TINY = ["--epochs", "1", "--cycles", "2", "--batches", "1", "--batch-size", "16"]
USER_MODULE = textwrap.dedent(
    """
    import gymnasium as gym
    from gymnasium.wrappers import TimeLimit

    from line_env import LineEnv


    def make_line(**kwargs):
        return TimeLimit(LineEnv(**kwargs), max_episode_steps=10)


    gym.register("Line1D-v0", entry_point=LineEnv, max_episode_steps=10)
    """
)
# A goal env as many users write one: its constructor takes no render_mode and it offers no
# render modes; registered by its own module.
NO_RENDER_MODULE = ROOT / "tests" / "user_envs" / "noframes_env.py"


def console_script() -> list[str]:
    """The ``goalenvs`` command as a user types it: the console script, whose import path
    does not hold the current folder (``python -m`` would add it)."""
    script = Path(sys.executable).with_name("goalenvs")
    if not script.is_file():
        pytest.skip(f"no goalenvs console script beside {sys.executable} (pip install -e .)")
    return [str(script)]


def run_command(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {
        **os.environ,
        # The console script's folder on PATH, as in an activated venv or after pip install.
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "PYTHONPATH": os.pathsep.join(paths),
        "SDL_VIDEODRIVER": "dummy",
        "SDL_AUDIODRIVER": "dummy",
    }
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def printed_command(output: str, label: str) -> list[str]:
    """The command after ``label`` in the CLI's output, split as a shell would."""
    match = re.search(rf"^{re.escape(label)}\s+(.+)$", output, re.MULTILINE)
    assert match, f"no {label!r} line in:\n{output}"
    return shlex.split(match.group(1))


@pytest.fixture
def user_folder(tmp_path):
    """A user's folder: their env module (a copy of examples/minimal_env.py) and a module
    registering an id and offering a factory."""
    shutil.copy(ROOT / "examples" / "minimal_env.py", tmp_path / "line_env.py")
    (tmp_path / "myreg.py").write_text(USER_MODULE)
    return tmp_path


@pytest.mark.parametrize("spec", ["myreg:Line1D-v0", "myreg.py:make_line"])
def test_train_in_a_users_folder_prints_a_play_command_that_runs(user_folder, spec):
    goalenvs = console_script()
    trained = run_command([*goalenvs, "train", spec, *TINY, "--out", "my run"], user_folder)
    assert trained.returncode == 0 and "Traceback" not in trained.stderr, trained.stderr
    # The plan comes first, then one plain line per epoch (output is not a terminal).
    lines = trained.stdout.splitlines()
    assert lines[0].startswith(f"goalenvs train: ddpg on {spec}, preset one_cpu: 1 epochs x 2")
    # The plan, every resolved choice, on the next lines (printed with --quiet too).
    assert re.fullmatch(
        r"goalenvs train: plan: networks on (cpu|cuda:?\d*), (bf16|fp32) updates, .*", lines[1]
    ), lines[1]
    envs = r"goalenvs train: plan: envs numpy in the trainer's process.*; replay buffer in host"
    assert re.fullmatch(envs + " memory", lines[3]), lines[3]
    assert lines[4].startswith("goalenvs train: pre-training checks passed in "), lines[4]
    assert [line.split()[:2] for line in lines if line.startswith("epoch")] == [["epoch", "1/1"]]
    assert "cycle 1/2" not in trained.stdout and "cycle 2/2" not in trained.stdout

    play = printed_command(trained.stdout, "watch it:")
    assert play[:2] == ["goalenvs", "play"] and play[2] == spec
    assert play[4] == str(Path("my run") / "policy_best.pt")  # quoted: it has a space
    # LineEnv declares no render modes: watched only headless; the factory declares none.
    assert play[5:] == (["--headless"] if spec == "myreg:Line1D-v0" else [])
    watched = run_command([*play, "--headless", "--episodes", "2", "--seed", "0"], user_folder)
    assert watched.returncode == 0, watched.stderr
    assert re.search(r"^2 episodes: success rate \d+\.\d% \(\d/2\)", watched.stdout, re.M), (
        watched.stdout
    )


def test_an_env_without_render_mode_trains_and_its_printed_play_command_runs_headless(
    tmp_path,
):
    shutil.copy(NO_RENDER_MODULE, tmp_path / "mine.py")
    goalenvs = console_script()
    spec = "mine:noframes/Reach-v0"
    trained = run_command([*goalenvs, "train", spec, *TINY, "--out", "run"], tmp_path)
    assert trained.returncode == 0, trained.stderr
    play = printed_command(trained.stdout, "watch it:")
    policy = str(Path("run") / "policy_best.pt")
    assert play == ["goalenvs", "play", spec, "--policy", policy, "--headless"]

    episodes = 4
    watched = run_command([*play, "--episodes", str(episodes)], tmp_path)
    assert watched.returncode == 0, watched.stderr
    assert "Traceback" not in watched.stderr and "render_mode" not in watched.stderr
    line = r"^episode (\d+): return (-?\d+\.\d\d), length (\d+), success (True|False)$"
    lines = [
        (int(n), float(value), int(length), success == "True")
        for n, value, length, success in re.findall(line, watched.stdout, re.M)
    ]
    numbers, returns, lengths, successes = zip(*lines, strict=True)
    assert numbers == tuple(range(1, episodes + 1))
    for episode_return, length, success in zip(returns, lengths, successes, strict=True):
        # -1 a step until the goal, 0 on the step that reaches it; 10 steps at most.
        assert episode_return == (-(length - 1) if success else -length)
        assert 1 <= length <= 10 and (success or length == 10)
    summary = rf"^{episodes} episodes: success rate (\d+\.\d)% \((\d+)/{episodes}\), "
    summary = re.search(summary + r"mean return (-?\d+\.\d\d) \+/- ", watched.stdout, re.M)
    assert summary, watched.stdout
    rate, count, mean_return = float(summary[1]), int(summary[2]), float(summary[3])
    assert count == sum(successes) and rate == pytest.approx(100 * count / episodes, abs=0.05)
    assert mean_return == pytest.approx(sum(returns) / episodes, abs=0.005)
    assert -10.0 <= mean_return <= 0.0


def test_check_resolves_a_module_beside_the_user(user_folder):
    argv = ["check", "line_env:LineEnv", "--steps", "50", "--max-episode-steps", "50"]
    checked = run_command([*console_script(), *argv], user_folder)
    assert checked.returncode == 0, checked.stderr
    assert "line_env:LineEnv: " in checked.stdout and "0 error(s), 0 warning(s)" in checked.stdout


def test_an_interrupted_run_prints_a_resume_command_that_runs(
    tmp_path, monkeypatch, capsys, cpu_machine
):
    from goalenvs.train import trainer

    real_run = trainer.Trainer.run

    def interrupted(self):
        result = real_run(self)
        result.interrupted = True
        return result

    monkeypatch.setattr(trainer.Trainer, "run", interrupted)
    out = tmp_path / "a run"
    argv = ["train", "goalenvs/BitFlipping-v0", "--env-kwargs", '{"n_bits": 3}', *TINY]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "goalenvs train: plan: envs numpy in the trainer's process, overlap off;" in printed
    # BitFlipping draws rgb_array frames: its play command opens a window.
    play = printed_command(printed, "watch it:")
    assert play == [
        *shlex.split(command_name()), "play", "goalenvs/BitFlipping-v0", "--policy",
        str(out / "policy_best.pt"),
    ]  # fmt: skip
    resume = printed_command(printed, "continue with:")
    assert resume == [*shlex.split(command_name()), "train", "--resume", str(out)]
    monkeypatch.setattr(trainer.Trainer, "run", real_run)
    assert main([*resume[1:], "--epochs", "2", "--quiet"]) == 0
    assert len((out / "progress.csv").read_text().strip().splitlines()) == 3  # header + 2


def test_help_names_every_registered_algorithm_and_no_made_up_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    train_help = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for name in ALGOS:
        assert f"{name.upper()}+HER" in top and f"{name.upper()}+HER" in train_help
    assert "default 50" not in train_help and "default 40" not in train_help
    for flag in ("--cycles N cycles per epoch:", "--batches N gradient steps"):
        start = train_help.index(flag)
        assert train_help[start:].split(" --")[0].endswith("default: the preset's")
    device = train_help[train_help.rindex("--device {auto,cpu,cuda}") :]
    assert "auto: cuda when torch sees one, else cpu" in device.split("--env-device {")[0]


@pytest.fixture
def cpu_machine(monkeypatch):
    """A machine where torch sees no GPU: what these tests and the docs they quote show
    (no --device trains on the CPU with the presets' [config])."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize("env_id", ["goalenvs/Parking-v0", "goalenvs/PointReach-v0"])
def test_show_config_prints_the_presets_values_name_and_run_length(env_id, capsys, cpu_machine):
    assert main(["train", env_id, "--show-config"]) == 0
    captured = capsys.readouterr()
    preset = load_preset(preset_for(env_id))
    expected = resolve_config(env_id).to_dict()
    shown = json.loads(captured.out)
    plan = shown.pop("plan")  # what the config resolves to on this machine
    assert shown == expected
    assert plan["device"] == "cpu" and plan["rollout_steps"] == expected["rollout_steps"]
    config = preset.config
    per_epoch = config["n_cycles"] * config["rollout_steps"] * config["num_envs"]
    total = config["epochs"] * per_epoch
    length = (
        f"preset {preset.name}: {config['epochs']} epochs x {config['n_cycles']} cycles x "
        f"{config['rollout_steps']} steps x {config['num_envs']} envs = {per_epoch:,} env "
        f"steps an epoch, {total:,} in all"
    )
    if preset.measured:  # a preset with a measured speed says how long that is
        seconds = total / preset.measured["env_steps_per_s"]
        duration = f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} minutes"
        length += (
            f"; about {duration} at the {preset.measured['env_steps_per_s']} env steps/s "
            f"measured on {preset.measured['machine']}"
        )
    assert captured.err.strip() == f"{length} (it stops early at eval success 1)"
    if env_id == "goalenvs/Parking-v0":  # the training docs quote what it prints
        docs = (ROOT / "docs" / "training.md").read_text().split()
        assert " ".join(captured.err.split()) in " ".join(docs)


def test_parking_states_its_length_and_point_reach_the_speed_its_record_gives():
    parking, point_reach = load_preset("parking"), load_preset("point_reach")
    assert (parking.config["epochs"], parking.config["n_cycles"]) == (150, 150)
    assert parking.measured == {}  # its speed was recorded on no machine a record names
    assert point_reach.measured["machine"] == "2 CPU cores of AMD EPYC"
    assert 100 < point_reach.measured["env_steps_per_s"] < 5000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["play", "--bogus"], "goalenvs play: error: unrecognized arguments: --bogus"),
        (["check", "x:Y", "--stepz", "3"], "goalenvs check: error: unrecognized arguments: "),
    ],
)
def test_an_unknown_flag_is_reported_by_its_subcommand(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(message)


def test_check_takes_env_kwargs_and_its_old_name(capsys):
    from goalenvs.cli import build_parser

    parser = build_parser()
    for flag in ("--env-kwargs", "--kwargs"):
        args = parser.parse_args(["check", "goalenvs/BitFlipping-v0", flag, '{"n_bits": 3}'])
        assert args.kwargs == '{"n_bits": 3}'


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        *[([c, "PointMaze-v0"], "did you mean goalenvs/PointMaze-v0?") for c in ENV_COMMANDS],
        (["train", "examples/minimal_env.py"], "e.g. examples/minimal_env.py:LineEnv"),
        (["check", "examples/minimal_env.py"], "e.g. examples/minimal_env.py:LineEnv"),
        (
            ["train", "examples/minimal_env.py:LineEnv", "--quiet"],
            "failed the pre-training check episode.length: the env declares no max_episode_steps",
        ),
    ],
)
def test_a_mistaken_env_is_one_line_without_a_traceback(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_the_display_writes_one_plain_line_per_epoch_to_a_file_and_a_bar_to_a_terminal(
    capsys, monkeypatch
):
    import rich.console

    from goalenvs.agents.ddpg import DDPGConfig
    from goalenvs.train.display import Display

    config = DDPGConfig(env_id="goalenvs/PointReach-v0", epochs=3)
    display = Display(config, 0)
    assert display.progress is None  # capsys' stdout is not a terminal
    display.cycle(0, 800, {"success": [1.0]})
    row = {
        "epoch": 1, "env_steps": 800, "eval_success": 0.5, "eval_return": -20.0,
        "steps_per_s": 400.0, "critic_loss": 0.25, "actor_loss": 1.5, "q_mean": -3.0,
    }  # fmt: skip
    display.epoch(row, 0.5)
    display.close()
    out = capsys.readouterr().out
    assert out.startswith("epoch   1/3  steps     800  success 0.50 (best 0.50)  return -20.0")
    assert out.count("\n") == 1 and out.rstrip().endswith("400 steps/s")
    # on a terminal it keeps its live bar
    monkeypatch.setattr(rich.console.Console, "is_terminal", property(lambda self: True))
    display = Display(config, 0)
    try:
        assert display.progress is not None
    finally:
        display.close()


def test_the_printed_command_name_is_the_script_when_it_is_not_on_path(monkeypatch):
    script = Path(console_script()[0])
    monkeypatch.setenv("PATH", str(script.parent))
    assert command_name() == "goalenvs"
    monkeypatch.setenv("PATH", "/nonexistent")
    assert Path(command_name()).resolve() == script.resolve()
