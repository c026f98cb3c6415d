"""The goal-seeking probe, and reports a user can act on (fix lines, causes, origins)."""

from __future__ import annotations

import functools
import inspect
import io
import json
import re
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from rich.console import Console

from goalenvs.checker import CHECKS, check_goal_env, seek
from goalenvs.checker.fixes import FIXES
from tests.checker.broken_envs import SUCCESS_RADIUS, ToyReach, WrongSliceReach, make
from tests.checker.fix_lines import docs_fix_lines

STEPS = 100
ROOT = Path(__file__).resolve().parents[2]


class _Server:
    """A handle to state held elsewhere (a physics server): copies share it."""

    def __init__(self) -> None:
        self.pos = np.zeros(2, np.float32)

    def __deepcopy__(self, memo: dict) -> _Server:
        return self


class SharedStateReach(ToyReach):
    """ToyReach whose position lives in a server that deep copies share."""

    def __init__(self, **kwargs) -> None:
        self.server = _Server()
        super().__init__(**kwargs)

    @property
    def pos(self) -> np.ndarray:
        return self.server.pos

    @pos.setter
    def pos(self, value: np.ndarray) -> None:
        self.server.pos = value


class SlowReach(ToyReach):
    def step(self, action):
        time.sleep(0.01)
        return super().step(action)


class RaisingReward(ToyReach):
    def compute_reward(self, achieved_goal, desired_goal, info):
        raise ValueError("the reward table is empty")


# --------------------------------------------------------------------------- the probe


def test_probe_copies_a_separate_env_and_reaches_the_goal():
    report = check_goal_env(make(), steps=STEPS, factory=functools.partial(make, None))
    probe = report.probe
    assert probe["method"] == "candidate actions on copies of the env"
    assert probe["not_copied"] is None
    assert probe["closest_distance"] <= SUCCESS_RADIUS
    assert probe["successes"] > 0 and probe["terminations"] == probe["successes"]
    assert probe["stopped_early"] is None
    # its samples are compared at the goal: the near-goal checks ran and passed
    assert report.result("success.near_goal").status == "passed", str(report)
    assert report.result("terminated.at_goal").status == "passed", str(report)


def test_probe_without_a_factory_steps_the_env_with_the_model_and_says_why():
    report = check_goal_env(make(), steps=STEPS)
    probe = report.probe
    assert probe["method"] == "a linear model of the rollout, on the env itself"
    assert "no factory" in probe["not_copied"]
    assert probe["closest_distance"] <= SUCCESS_RADIUS  # the point moves linearly: it gets there


def test_probe_does_not_trust_copies_that_share_state():
    factory = SharedStateReach
    report = check_goal_env(factory(), steps=STEPS, factory=factory)
    probe = report.probe
    assert "stepped differently" in probe["not_copied"], probe
    assert probe["method"] == "a linear model of the rollout, on the env itself"
    assert probe["steps"] > 0
    assert "not copied: two copies given the same action stepped differently" in str(report)


def test_probe_on_a_slow_env_stops_at_its_budget_and_the_report_says_so(monkeypatch):
    monkeypatch.setattr(seek, "SEEK_WALL_SECONDS", 0.2)
    start = time.perf_counter()
    report = check_goal_env(SlowReach(), steps=20, factory=SlowReach, checks=["success.near_goal"])
    assert time.perf_counter() - start < 5.0
    stopped = report.probe["stopped_early"]
    assert stopped is not None and "0.2 s wall budget" in stopped
    assert report.probe["steps"] < seek.SEEK_EPISODES * seek.SEEK_STEPS
    assert "0.2 s wall budget" in str(report)


# --------------------------------------------------------------------------- reports


def test_every_finding_prints_its_fix_line_and_docs_anchor():
    report = check_goal_env(make("reward_inverted"), steps=STEPS)
    text = str(report)
    for r in report.results:
        if r.status == "failed":
            assert f"docs: docs/checks.md#{r.id}" in text
            assert f"fix: {FIXES[r.id]}"[:60] in text.replace("\n", " ")
    data = json.loads(report.to_json())
    entry = next(c for c in data["checks"] if c["id"] == "reward.success_at_goal")
    assert entry["fix"] == FIXES["reward.success_at_goal"]
    assert entry["docs"] == "docs/checks.md#reward.success_at_goal"


def test_every_check_has_a_fix_line_and_an_anchor_in_the_docs():
    text = (ROOT / "docs" / "checks.md").read_text()
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', text))
    assert set(CHECKS) <= anchors
    assert set(CHECKS) == set(FIXES)
    headings = [line for line in text.splitlines() if line.startswith("### ")]
    for check_id in CHECKS:  # each explained under a heading that names it
        assert any(f"`{check_id}`" in h for h in headings), check_id


def test_fix_lines_are_the_docs_fix_paragraphs():
    # fixes.py is generated from docs/checks.md: `python tests/checker/fix_lines.py`
    assert docs_fix_lines() == FIXES


def test_one_exception_in_many_checks_is_printed_once_with_the_checks_it_reached():
    report = check_goal_env(RaisingReward(), steps=STEPS)
    (cause,) = report.causes()
    assert cause.cause.startswith("ValueError: the reward table is empty (at ")
    assert {"reward.batch", "reward.leading_dims", "reward.step_match"} <= set(cause.checks)
    text = str(report)
    assert text.count("the reward table is empty") == 2 + len(  # the cause, its first finding
        [c for c in cause.checks if c in report.failed_ids()]
    )  # and one "from the cause above" line per check
    assert f"reached {len(cause.checks)} checks: " in text
    data = json.loads(report.to_json())
    assert data["causes"][0]["checks"] == cause.checks


def test_an_exception_from_the_env_shows_its_file_line_and_function():
    report = check_goal_env(make("step_raises"), steps=STEPS)
    (finding,) = report.result("api.step").findings
    source, first = inspect.getsourcelines(ToyReach.step)
    line = first + next(i for i, s in enumerate(source) if "raise RuntimeError" in s)
    assert f"broken_envs.py:{line}, in step" in finding.message
    assert finding.cause.endswith(f"broken_envs.py:{line}, in step)")


def test_a_skipped_check_reads_skipped_never_error():
    report = check_goal_env(make("box_obs"), steps=20)
    skipped = [r for r in report.results if r.status == "skipped"]
    assert skipped
    buffer = io.StringIO()
    report.render(Console(file=buffer, width=140, color_system=None), verbose=True)
    rows = [line for line in buffer.getvalue().splitlines() if line.startswith("│ skip")]
    assert len(rows) == len(skipped)
    for line in rows:
        assert "│ skipped" in line and "│ error" not in line, line
    data = json.loads(report.to_json())
    assert {c["status"] for c in data["checks"] if c["id"] in {r.id for r in skipped}} == {
        "skipped"
    }


# --------------------------------------------------------------------------- layout


def _checker_imports() -> dict[str, set[str]]:
    """Module -> the goalenvs.checker modules it imports (at any depth of its code)."""
    import ast

    package = ROOT / "goalenvs" / "checker"
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            found |= {t for t in targets if t.startswith("goalenvs.checker")}
        graph[name] = found
    return {m: {t for t in targets if t in graph and t != m} for m, targets in graph.items()}


def test_the_registry_and_the_probes_import_no_check():
    # (no import cycle among the modules: tests/test_layout.py)
    graph = _checker_imports()
    checks = {m for m in graph if m.startswith("goalenvs.checker.checks")}
    for low in ("registry", "context", "probe", "seek", "report", "fixes"):
        assert not graph[f"goalenvs.checker.{low}"] & (checks | {"goalenvs.checker.runner"}), low


def test_the_checks_package_registers_every_family_in_order():
    from goalenvs.checker import checks
    from goalenvs.checker.checks import reward, spaces
    from goalenvs.checker.context import Context, EnvCallError, SkipCheckError
    from goalenvs.checker.probe import fmt, perturbed, rollout  # noqa: F401
    from goalenvs.checker.registry import CHECKS as RUNNER_CHECKS
    from goalenvs.checker.registry import Check, Outcome, register
    from goalenvs.checker.runner import _run_one

    assert RUNNER_CHECKS is CHECKS is checks.CHECKS
    assert spaces.check_space_dict is CHECKS["space.dict"].func
    assert reward.needed_info_keys.__module__ == "goalenvs.checker.checks.reward"
    assert list(CHECKS)[:3] == ["space.dict", "space.goal_match", "space.goal_bounds"]
    assert list(CHECKS)[-3:] == ["gym.warnings", "gym.notes", "api.timeout"]
    assert all(callable(x) for x in (Check, Context, EnvCallError, Outcome, _run_one, register))
    assert issubclass(SkipCheckError, Exception)


def test_probe_out_of_cpu_budget_leaves_the_near_goal_checks_skipped(monkeypatch):
    monkeypatch.setattr(seek, "SEEK_SECONDS", 0.0)
    report = check_goal_env(
        make("success_radius_differs"),
        steps=20,
        factory=functools.partial(make, "success_radius_differs"),
        checks=["success.near_goal", "terminated.at_goal"],
    )
    assert report.probe["stopped_early"].startswith("stopped at its 0 s CPU budget after 0 steps")
    for check_id in ("success.near_goal", "terminated.at_goal"):
        result = report.result(check_id)
        assert result.status == "skipped" and "took no step" in result.note, str(report)


@pytest.mark.parametrize(
    ("defect", "near_goal_check", "rollout_check"),
    [
        ("success_radius_differs", "success.near_goal", "success.consistent"),
        ("terminates_differently", "terminated.at_goal", "terminated.step_match"),
    ],
)
def test_probe_finds_near_goal_defects_a_random_rollout_never_reaches(
    defect, near_goal_check, rollout_check
):
    # two random steps of at most 0.14 cannot come within 0.2 of a goal 0.45 away: only
    # the goal-seeking probe gets there
    report = check_goal_env(
        make(defect),
        steps=2,
        factory=functools.partial(make, defect),
        checks=[near_goal_check, rollout_check],
    )
    assert report.result(rollout_check).status == "passed", str(report)
    assert report.result(near_goal_check).status == "failed", str(report)
    assert report.probe["closest_distance"] < SUCCESS_RADIUS


def test_near_goal_skip_says_no_success_only_when_the_probe_had_none(monkeypatch):
    # one step from a reset 0.45 from its goal moves at most 0.14: never within 0.2
    monkeypatch.setattr(seek, "SEEK_EPISODES", 1)
    monkeypatch.setattr(seek, "SEEK_STEPS", 1)
    report = check_goal_env(make(), steps=STEPS, factory=make, checks=["success.near_goal"])
    result = report.result("success.near_goal")
    assert report.probe["successes"] == 0
    assert result.status == "skipped"
    assert result.note.startswith("no goal-probe step reported is_success=True")


def test_success_from_another_slice_than_achieved_goal_names_achieved_goal():
    # is_success reads the position, achieved_goal is (time, x): not two thresholds
    report = check_goal_env(
        WrongSliceReach(),
        steps=STEPS,
        factory=WrongSliceReach,
        checks=["success.consistent", "success.near_goal"],
    )
    first = report.result("success.consistent").findings[0].message
    assert first.startswith("achieved_goal may not be what is_success measures"), str(report)
    assert "no threshold on the distance between the two goals" in first
    (near,) = report.result("success.near_goal").findings
    assert near.message.startswith("achieved_goal may not be what is_success measures")
    assert "draw the line at different distances" not in near.message
    # the probe's footer and the finding agree: it had successes
    assert report.probe["successes"] > 0


def test_two_success_radii_still_blame_the_thresholds():
    report = check_goal_env(
        make("success_radius_differs"),
        steps=STEPS,
        factory=functools.partial(make, "success_radius_differs"),
        checks=["success.consistent", "success.near_goal"],
    )
    for check_id in ("success.consistent", "success.near_goal"):
        messages = " ".join(f.message for f in report.result(check_id).findings)
        assert messages and "achieved_goal may not be" not in messages, str(report)
    (near,) = report.result("success.near_goal").findings
    assert near.message.endswith("success and reward draw the line at different distances")
    # each line named by the farthest goal distance it accepts (success ends the episode
    # as soon as the reward's 0.2 is reached: no probe step came within 0.05)
    assert "is_success is True on no step" in near.message, near.message
    assert "compute_reward pays the goal reward up to goal distance 0.19" in near.message


def test_an_env_holding_a_mujoco_env_counts_as_mujoco():
    # PointMaze keeps its MuJoCo env as an attribute (point_env): the render check's memory
    # of a failed OpenGL context and the probe's copy rule must see it as MuJoCo too.
    from goalenvs.checker.context import uses_mujoco

    class Inner:
        mujoco_renderer = object()

    class Maze:
        def __init__(self) -> None:
            self.point_env = Inner()

    assert uses_mujoco(Inner()) and uses_mujoco(Maze())
    import goalenvs  # noqa: F401  (registers the id)

    assert not uses_mujoco(gym.make("goalenvs/PointReach-v0"))


def test_probe_footer_counts_only_bool_successes_as_the_near_goal_checks_do():
    # is_success is the goal distance: truthy on almost every step, never a bool success
    report = check_goal_env(
        make("success_float"),
        steps=STEPS,
        factory=functools.partial(make, "success_float"),
        checks=["success.near_goal"],
    )
    result = report.result("success.near_goal")
    assert result.status == "skipped" and "bool info['is_success']" in result.note
    assert report.probe["steps"] > 0 and report.probe["successes"] == 0
    assert "0 success(es)" in report.probe_line()
