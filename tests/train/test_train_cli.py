"""``goalenvs train`` end to end and its errors on bad input."""

from __future__ import annotations

import json
import re
import sys

import pytest
import torch

from goalenvs.cli import main
from tests.console import run_goalenvs

TINY = ["--epochs", "1", "--cycles", "2", "--batches", "2", "--batch-size", "16", "--quiet"]


def test_train_writes_the_run_folder_says_how_to_play_and_resumes_it(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "goalenvs/BitFlipping-v0", "--env-kwargs", '{"n_bits": 4}', "--num-envs", "2"]
    code = main([*argv, *TINY, "--out", str(out), "--save-every", "1", "--seed", "3"])
    printed = capsys.readouterr().out
    assert code == 0
    assert {p.name for p in out.iterdir()} == {
        "config.json", "progress.csv", "curves.png", "policy_best.pt", "policy_latest.pt",
        "policy_epoch_1.pt", "checkpoints",
    }  # fmt: skip
    config = json.loads((out / "config.json").read_text())
    assert config["algo"] == "dqn"  # picked from the Discrete action space
    assert config["env_kwargs"] == {"n_bits": 4} and config["seed"] == 3
    assert f"goalenvs play goalenvs/BitFlipping-v0 --policy {out / 'policy_best.pt'}" in printed
    # curves.png has a third panel for the algorithm's losses: 13.5 in x 80 dpi wide.
    png = (out / "curves.png").read_bytes()
    assert int.from_bytes(png[16:20], "big") == 1080

    code = main(["train", "--resume", str(out), "--epochs", "2", "--quiet"])
    assert code == 0
    rows = (out / "progress.csv").read_text().strip().splitlines()
    assert len(rows) == 3  # header + two epochs
    for unit in (out / "checkpoints").iterdir():  # what --resume reads, all of it garbage
        (unit / "policy.pt").write_bytes(b"g" * (unit / "policy.pt").stat().st_size)
    assert main(["train", "--resume", str(out), "--epochs", "3", "--quiet"]) == 2
    assert "not a readable checkpoint" in capsys.readouterr().err


def test_algo_is_ddpg_for_box_actions(capsys):
    argv = ["train", "goalenvs/BitFlippingContinuous-v0", "--env-kwargs", '{"n_bits": 3}']
    assert main([*argv, *TINY, "--show-config"]) == 0
    assert json.loads(capsys.readouterr().out)["algo"] == "ddpg"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["CartPole-v1"], "not a goal env.*goalenvs check CartPole-v1"),
        (["goalenvs/BitFlippingContinuous-v0", "--algo", "dqn"], "needs a Discrete action space"),
        (["goalenvs/BitFlipping-v0", "--algo", "ddpg"], "needs a Box action space"),
        (["goalenvs/BitFlipping-v0", "--env-kwargs", "{n_bits: 4}"], "not valid JSON"),
        (["goalenvs/BitFlipping-v0", "--env-kwargs", "[4]"], "must be a JSON object"),
        (["goalenvs/NoSuchEnv-v0"], "unknown env id 'goalenvs/NoSuchEnv-v0'"),
        (["--resume", "/nonexistent/run"], "no config.json there"),
        ([], "ENV_ID is required"),
        (["goalenvs/BitFlipping-v0", "--epochs", "0"], "epochs must be > 0"),
        (
            ["goalenvs/PointReach-v0", "--env-workers", "0"],
            r"--env-workers 0: expected 1 \(the envs in the trainer's process\) to",
        ),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(argv, message, capsys):
    assert main(["train", *argv, "--quiet"]) == 2
    assert re.search(message, capsys.readouterr().err)


@pytest.mark.parametrize("flag", ["--env-device", "--replay-device"])
def test_a_choice_flag_reaches_the_config_and_a_bad_choice_is_refused(flag, capsys):
    assert main(["train", "goalenvs/PointReach-v0", flag, "device", "--show-config"]) == 0
    assert json.loads(capsys.readouterr().out)[flag[2:].replace("-", "_")] == "device"
    with pytest.raises(SystemExit) as exited:
        main(["train", "goalenvs/PointReach-v0", flag, "gpu"])
    assert exited.value.code == 2
    assert f"{flag}: invalid choice: 'gpu'" in capsys.readouterr().err


def test_cuda_on_a_machine_without_one_exits_2_and_writes_nothing(tmp_path, monkeypatch, capsys):
    # Forced off, so that the test means the same on a machine with a GPU.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "r"
    argv = ["train", "goalenvs/PointReach-v0", "--device", "cuda", "--out", str(out)]
    assert main([*argv, *TINY]) == 2
    assert "device='cuda' was asked but torch sees no CUDA device" in capsys.readouterr().err
    assert not (out / "policy_latest.pt").exists()


def test_tensorboard_without_tensorboard_installed_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    argv = ["train", "goalenvs/BitFlipping-v0", "--tensorboard", "--out", str(tmp_path / "r")]
    assert main([*argv, *TINY]) == 2
    err = capsys.readouterr().err
    assert "tensorboard" in err and "pip install tensorboard" in err
    assert not (tmp_path / "r").exists()


def test_an_unknown_algo_lists_the_registered_ones(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "goalenvs/PointReach-v0", "--algo", "ppo"])
    assert exit_info.value.code == 2
    assert re.search(
        r"invalid choice: 'ppo' \(choose from '?ddpg'?, '?dqn'?, '?sac'?, '?td3'?\)",
        capsys.readouterr().err,
    )


@pytest.mark.skipif(sys.platform == "win32", reason="the banner's printf needs the C library")
def test_show_config_prints_json_alone_although_the_env_printfs_to_stdout():
    # pybullet (panda-gym) prints its banner to fd 1 when the env is built: a program
    # reading --show-config gets the JSON alone, the banner goes to stderr
    done = run_goalenvs("train", "tests.checker.test_checker_cli:BannerReach", "--show-config")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["env_id"] == "tests.checker.test_checker_cli:BannerReach"
    assert shown["plan"]["episode_length"] is not None
    assert "banner from fd 1" in done.stderr and "banner from printf" in done.stderr
