"""`goalenvs check`: exit codes, JSON output, error messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from goalenvs.checker import CHECKS
from goalenvs.cli import main

TOY = "tests.checker.broken_envs:ToyReach"


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
    assert "goal.fixed" in capsys.readouterr().out


def test_notes_never_fail_a_run_even_with_strict(capsys):
    # unbounded observation Box: gymnasium's two remarks become notes
    assert check(TOY, "--kwargs", '{"infinite_obs": true}', "--strict") == 0
    out = capsys.readouterr().out
    assert "0 error(s), 0 warning(s), 2 note(s)" in out and "NOTE" in out and "gym.notes" in out
    assert check(TOY, "--kwargs", '{"infinite_obs": true}', "--strict", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["errors"], data["warnings"], data["infos"], data["ok"]) == (0, 0, 2, True)


def test_json_parses_and_lists_every_check(capsys):
    assert check(TOY, "--kwargs", '{"defect": "reward_float64"}', "--json") == 0
    data = json.loads(capsys.readouterr().out)
    # a single env's report: every check of single envs (vector.* are a vector env's)
    assert [c["id"] for c in data["checks"]] == [c for c in CHECKS if "env" in CHECKS[c].targets]
    assert {c["status"] for c in data["checks"]} <= {"passed", "failed", "skipped"}
    assert data["warnings"] == 1 and data["errors"] == 0 and data["settings"]["steps"] == 100


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


def test_console_command_exits_2_without_a_traceback():
    # Prepend this checkout to PYTHONPATH (replacing it would lose packages found
    # through it) and run from the checkout, wherever the suite itself was started.
    root = str(Path(__file__).resolve().parents[2])
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    proc = subprocess.run(
        [sys.executable, "-m", "goalenvs", "check", "tests/checker/missing.py:Env"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "no such file: tests/checker/missing.py" in proc.stderr
    assert "Traceback" not in proc.stderr
