"""`goalenvs check`: exit codes, JSON output, error messages."""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

import pytest

from goalenvs.checker import CHECKS
from goalenvs.cli import main
from tests.checker.broken_envs import ToyReach
from tests.console import run_goalenvs

TOY = "tests.checker.broken_envs:ToyReach"
ROOT = Path(__file__).resolve().parents[2]


class BannerReach(ToyReach):
    """ToyReach that prints a banner when built, as pybullet does: from Python, straight
    to file descriptor 1, and through C's buffered stdout."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        print("banner from print")
        os.write(1, b"banner from fd 1\n")
        if os.name == "posix":
            ctypes.CDLL(None).printf(b"banner from printf\n")


def check(*args: str) -> int:
    return main(["check", *args, "--steps", "100"])


def test_clean_env_exits_0(capsys):
    assert check(TOY) == 0
    out = capsys.readouterr().out
    assert "0 error(s), 0 warning(s)" in out and "CPU" in out


def test_error_exits_1_and_prints_the_evidence(capsys):
    assert check(TOY, "--kwargs", '{"defect": "reward_constant"}') == 1
    out = capsys.readouterr().out
    assert "reward.goal_dependent" in out and "compute_reward = -1.0 for all" in out


def test_warning_exits_0_unless_strict(capsys):
    assert check(TOY, "--kwargs", '{"defect": "goal_moves"}') == 0
    assert check(TOY, "--kwargs", '{"defect": "goal_moves"}', "--strict") == 1
    out = capsys.readouterr().out
    assert "goal.fixed" in out
    # a warning is marked WARN in the table, never FAIL
    row = next(line for line in out.splitlines() if "goal.fixed" in line and "│" in line)
    assert "WARN" in row and "FAIL" not in row, out


def test_notes_never_fail_a_run_even_with_strict(capsys):
    # unbounded observation Box: gymnasium's two remarks become notes
    assert check(TOY, "--kwargs", '{"infinite_obs": true}', "--strict") == 0
    out = capsys.readouterr().out
    # the footer counts checks (gym.notes made both notes), the findings beside them
    assert "0 error(s), 0 warning(s), 1 note(s)" in out and "NOTE" in out and "gym.notes" in out
    assert "(2 finding(s))" in out
    assert check(TOY, "--kwargs", '{"infinite_obs": true}', "--strict", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["errors"], data["warnings"], data["infos"], data["ok"]) == (0, 0, 2, True)
    assert data["failed_checks"] == {"error": 0, "warning": 0, "info": 1}


def test_json_parses_and_lists_every_check(capsys):
    assert check(TOY, "--kwargs", '{"defect": "reward_float64"}', "--json") == 0
    data = json.loads(capsys.readouterr().out)
    # a single env's report: every check of single envs (vector.* are a vector env's)
    assert [c["id"] for c in data["checks"]] == [c for c in CHECKS if "env" in CHECKS[c].targets]
    assert {c["status"] for c in data["checks"]} <= {"passed", "failed", "skipped"}
    assert data["warnings"] == 1 and data["errors"] == 0 and data["settings"]["steps"] == 100
    assert data["ok"] is True and data["cpu_seconds"] > 0
    dtype = next(c for c in data["checks"] if c["id"] == "reward.dtype")
    assert dtype["status"] == "failed" and "float64" in dtype["findings"][0]["message"]


def test_timeout_flag_reports_a_hanging_env(capsys):
    assert check(TOY, "--kwargs", '{"defect": "hang_step"}', "--timeout", "0.3") == 1
    assert "api.timeout" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no_such_module_xyz:Env"], "cannot import module 'no_such_module_xyz'"),
        ([TOY, "--kwargs", "{not json"], "--env-kwargs '{not json' is not valid JSON"),
        ([TOY, "--kwargs", "[1]"], "--env-kwargs must be a JSON object"),
        ([TOY, "--kwargs", '{"defect": "nope"}'], "defect='nope' is not valid"),
        ([TOY, "--timeout", "0"], "--timeout must be > 0"),
        (
            ["tests.checker.broken_envs:make_hanging", "--timeout", "0.3"],
            "building the env did not return within --timeout 0.3 s",
        ),
    ],
)
def test_unloadable_env_exits_2_with_the_message(capsys, args, message):
    assert check(*args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_json_is_alone_on_stdout_when_the_env_prints_and_stdout_comes_back(capfd):
    spec = "tests.checker.test_checker_cli:BannerReach"
    assert check(spec, "--json") == 0
    out, err = capfd.readouterr()
    data = json.loads(out)  # the banner went to stderr
    assert data["env"].endswith("BannerReach") and data["errors"] == 0
    assert "banner from print" in err and "banner from fd 1" in err
    os.write(1, b"after the check\n")
    print("and print")
    assert capfd.readouterr().out == "after the check\nand print\n"


@pytest.mark.skipif(os.name != "posix", reason="the banner's printf needs the C library")
def test_console_json_parses_although_the_env_printfs_to_buffered_stdout():
    # a pipe makes C's stdout block-buffered: unflushed, the banner would follow the JSON
    proc = run_goalenvs(
        "check", "tests.checker.test_checker_cli:BannerReach", "--json", "--steps", "30"
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["settings"]["steps"] == 30
    assert "banner from printf" in proc.stderr and "banner from fd 1" in proc.stderr


def test_table_lists_skipped_checks_only_with_verbose(capsys):
    # without compute_terminated, the terminated.* checks are skipped
    kwargs = '{"defect": "no_compute_terminated"}'
    assert check(TOY, "--kwargs", kwargs) == 0
    out = capsys.readouterr().out
    assert "terminated.present" in out  # the warning is listed
    assert "│ skip" not in out and "terminated.batch" not in out
    assert "3 skipped check(s) not listed: --verbose lists them" in out
    assert check(TOY, "--kwargs", kwargs, "--verbose") == 0
    out = capsys.readouterr().out
    assert "│ skip" in out and "terminated.batch" in out and "│ ok" in out
    assert "not listed" not in out


def test_a_non_goal_env_gets_its_verdict_and_fix_in_a_few_lines(capfd, monkeypatch):
    # no video driver chosen: the render check picks the dummy one itself (pygame would
    # complain about XDG_RUNTIME_DIR on stderr)
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    assert check("CartPole-v1") == 1
    out, err = capfd.readouterr()
    lines = out.splitlines()
    assert len(lines) <= 8, out
    assert lines[0].startswith("CartPole-v1 is not a goal env: its observation space is not a Dict")
    assert "space.dict (error)" in out and "expected Dict(observation=..." in out
    assert "fix: `observation_space = Dict(" in out and "docs: docs/checks.md#space.dict" in out
    assert "also failed: reward.present (error), success.present (error)" in out
    assert "│ skip" not in out and "reward.batch" not in out
    assert "XDG_RUNTIME_DIR" not in err
    assert "SDL_VIDEODRIVER" not in os.environ  # set only while it rendered
    assert check("CartPole-v1", "--verbose") == 1
    assert "reward.batch" in capfd.readouterr().out


def test_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["check", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "steps of the main rollout (default: 200)" in text
    assert "seed of every rollout and draw (default: 0)" in text
    assert "the env abandoned (default: 10.0)" in text


def test_console_command_exits_2_without_a_traceback():
    proc = run_goalenvs("check", "tests/checker/missing.py:Env")
    assert proc.returncode == 2
    assert "no such file: tests/checker/missing.py" in proc.stderr
    assert "Traceback" not in proc.stderr
