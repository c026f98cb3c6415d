"""The checker on goal envs written as a new user writes them (tests/checker/user_envs.py),
and the guard that every defect family docs/checks.md names keeps a broken env."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pytest
from gymnasium.wrappers import TimeLimit

from goalenvs.checker import CHECKS, check_goal_env
from tests.checker import user_envs
from tests.checker.broken_envs import DEFECTS
from tests.checker.broken_vector_envs import SINGLE_DEFECTS, TORCH_DEFECTS, VECTOR_DEFECTS
from tests.checker.user_envs import CONSEQUENCES, USER_DEFECTS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "checks.md"

# Documented checks whose defect is pinned by a test of its own instead of a library
# entry: check id -> the test that asserts it with its severity.
PINNED_ELSEWHERE = {
    "reward.info_keys": "test_info_dependent_reward_is_a_note_naming_the_her_settings",
    "success.terminates": "test_success_that_ends_the_episode_only_sometimes_is_a_warning",
    "compat.goalenvs_her": (
        "test_a_reward_of_one_value_for_the_batch_fails_the_goalenvs_buffer_check"
    ),
    "compat.sb3_her": "test_sb3_her_finding_gives_the_shape_it_got_and_the_one_expected",
    "gym.check_env": "test_panda_gym_verdict_seed_nondeterminism_and_no_compute_terminated",
    "gym.warnings": "test_unbounded_observation_box_is_a_note_and_real_gym_warnings_stay_warnings",
    "gym.notes": "test_unbounded_observation_box_is_a_note_and_real_gym_warnings_stay_warnings",
    "vector.num_envs": "test_one_sub_env_is_a_warning_and_the_loader_checks_two_instead",
    "probe.reached": "test_probe_that_cannot_reach_the_goal_says_so_in_the_plain_report",
}


def run(env, factory, **kwargs):
    kwargs.setdefault("steps", 200)
    kwargs.setdefault("timeout", 5.0)
    return check_goal_env(env, factory=factory, **kwargs)


def assert_clean(report):
    assert report.errors == [] and report.warnings == [], str(report)


# --------------------------------------------------------------------------- the guard


def documented_ids() -> list[str]:
    ids = []
    for line in DOCS.read_text().split("\n"):
        if line.startswith("### `"):
            ids += re.findall(r"`([a-z0-9_]+\.[a-z0-9_]+)`", line.split(" (")[0])
    return ids


def test_every_documented_family_has_a_broken_env_or_a_pinning_test():
    libraries = (DEFECTS, VECTOR_DEFECTS, TORCH_DEFECTS, SINGLE_DEFECTS, USER_DEFECTS)
    caught = {entry[0] for library in libraries for entry in library.values()}
    for library in libraries:
        for check_id, severity, *_ in library.values():
            assert CHECKS[check_id].severity == severity, check_id
    sources = "\n".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    for check_id in documented_ids():
        assert check_id in CHECKS, f"docs/checks.md documents {check_id}, which is not a check"
        if check_id in caught:
            continue
        test = PINNED_ELSEWHERE.get(check_id)
        assert test is not None, f"{check_id}: no broken env in tests/checker/ catches it"
        body = sources.split(f"def {test}(", 1)
        assert len(body) == 2, f"{check_id}: the test {test} that pins it is gone"
        assert check_id in body[1].split("\ndef ", 1)[0], f"{test} no longer asserts {check_id}"


def test_every_defect_the_docs_table_names_is_in_the_library():
    text = DOCS.read_text()
    table = text.split("<!-- report:checker -->", 1)[1].split("<!-- /report:checker -->")[0]
    named = re.findall(r"^\| ([a-z0-9_]+): ", table, re.MULTILINE)
    assert named, "the broken-env table is missing from docs/checks.md"
    library = {**DEFECTS, **{f"user_{d}": v for d, v in USER_DEFECTS.items()}}
    assert [d for d in named if d not in library] == []


# --------------------------------------------------------------------------- user envs


@pytest.mark.parametrize("defect", list(USER_DEFECTS))
def test_user_defect_is_caught_with_its_check_id_and_severity(defect):
    check_id, severity, _ = USER_DEFECTS[defect]
    report = run(user_envs.make(defect), functools.partial(user_envs.make, defect))
    result = report.result(check_id)
    assert result.status == "failed" and result.severity == severity, str(report)
    assert report.failed_ids() == {check_id} | CONSEQUENCES.get(defect, set()), str(report)


def test_correct_cursor_is_clean():
    cursor = run(user_envs.make(), user_envs.make)
    assert_clean(cursor)
    assert cursor.result("probe.reached").status == "passed"


def test_probe_that_cannot_reach_the_goal_says_so_in_the_plain_report():
    # the push look-alike is correct: clean, but no single action moves its block before
    # contact (neither now nor a step later), so the probe never reaches the goal
    report = run(user_envs.make_push_like(), user_envs.make_push_like)
    assert_clean(report)
    assert report.result("goal.achieved_current").status == "passed", str(report)
    (note,) = report.result("probe.reached").findings
    closest = float(re.search(r"no closer to desired_goal than ([0-9.]+)", note.message).group(1))
    assert closest == pytest.approx(report.probe["closest_distance"], abs=1e-4)
    assert closest > user_envs.RADIUS
    assert "success.near_goal could not run" in note.message
    assert report.result("success.near_goal").status == "skipped"
    text = str(report)  # the plain report, not --verbose
    assert "NOTE" in text and "probe.reached" in text and "success.near_goal could not" in text


def test_lagging_observation_is_named_and_its_reward_near_the_goal_is_an_error():
    report = run(user_envs.make("obs_lags"), functools.partial(user_envs.make, "obs_lags"))
    (lag,) = report.result("goal.achieved_current").findings
    assert lag.where == "goal probe"
    assert "read before the state update, so it answers each action a step late" in lag.message
    unmoved, late = map(
        int, re.search(r"\((\d+) copied steps\).*? apart on (\d+)", lag.message).groups()
    )
    assert unmoved == late > 0
    # the probe judged candidates a step ahead, reached the goal, and saw the reward there
    (reward,) = report.result("reward.step_match").findings
    assert reward.where.startswith("goal-probe step")
    assert "the two part near the goal" in reward.message
    assert "achieved_goal answers each action a step late" in reward.message
    assert report.probe["closest_distance"] <= user_envs.RADIUS
    assert report.result("probe.reached").status == "passed"


def test_smaller_success_radius_names_both_lines_and_the_step():
    report = run(
        user_envs.make("success_radius_small"),
        functools.partial(user_envs.make, "success_radius_small"),
        checks=["success.near_goal"],
    )
    (finding,) = report.result("success.near_goal").findings
    distance = float(re.search(r"goal distance ([0-9.]+)", finding.where).group(1))
    # the step shown lies between the two radii, refused by is_success, paid by the reward
    assert user_envs.SMALL_RADIUS < distance <= user_envs.RADIUS, finding
    assert finding.message.startswith("is_success=False but the reward 0.0 is what")
    success_line = re.search(r"is_success is True up to goal distance ([0-9.]+)", finding.message)
    reward_line = re.search(r"goal reward up to goal distance ([0-9.]+)", finding.message)
    assert float(success_line.group(1)) <= user_envs.SMALL_RADIUS < distance
    assert user_envs.SMALL_RADIUS < float(reward_line.group(1)) <= user_envs.RADIUS
    assert "draw the line at different distances" in finding.message


def test_late_success_names_the_step_that_reached_and_the_step_that_left():
    report = run(
        user_envs.make("success_late"),
        functools.partial(user_envs.make, "success_late"),
        checks=["success.near_goal"],
    )
    (finding,) = report.result("success.near_goal").findings
    message = finding.message
    assert message.startswith("is_success is one step late"), message
    reached = re.search(r"reached the goal \(achieved_goal ([0-9.]+) .*?is_success=False", message)
    left = re.search(r"left the goal \(achieved_goal ([0-9.]+) .*?is_success=True", message)
    assert reached and float(reached.group(1)) <= user_envs.RADIUS, message
    assert left and float(left.group(1)) > user_envs.RADIUS, message
    assert "Judge is_success on the achieved_goal the step returns" in message
    assert "from the goals the step returns" in report.result("success.near_goal").fix


class _WideLate(user_envs.Cursor):
    """A late is_success on a radius so wide that random actions cross it often."""

    wide = 0.6

    def compute_reward(self, achieved_goal, desired_goal, info):
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        return -(distance > self.wide).astype(np.float32)

    def step(self, action):
        before = float(np.linalg.norm(self.position - self.goal))
        obs, reward, terminated, truncated, _ = super().step(action)
        return obs, reward, terminated, truncated, {"is_success": before <= self.wide}


def test_late_success_in_the_random_rollout_is_named_by_success_consistent():
    def build():
        return TimeLimit(_WideLate(), user_envs.EPISODE_STEPS)

    report = run(build(), build, checks=["success.consistent"])
    first = report.result("success.consistent").findings[0].message
    assert first.startswith("is_success is one step late"), str(report)
    assert "step " in first and "Judge is_success on the achieved_goal" in first
