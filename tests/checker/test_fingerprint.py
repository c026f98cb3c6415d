"""`goalenvs check ENV --fingerprint FILE`: seeded rollouts pinned in a file.

The committed fingerprints under tests/checker/fingerprints/ were written by
``goalenvs check SPEC --fingerprint tests/checker/fingerprints/NAME.json``; a test here
fails when an env (or a dependency under it: MuJoCo, gymnasium-robotics, panda-gym,
highway-env) moves away from its file. After a change that is meant, delete the file and
run that command again.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import re
import shlex
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import goalenvs
from goalenvs.checker import fingerprint, load
from goalenvs.checker.cli import FINGERPRINT_CHANGED
from goalenvs.cli import main
from tests.checker.broken_envs import ToyReach

ROOT = Path(__file__).resolve().parents[2]
FINGERPRINTS = ROOT / "tests" / "checker" / "fingerprints"
TOY = "tests.checker.broken_envs:ToyReach"
# Third-party envs users pin across upgrades, with the module that must be installed.
THIRD_PARTY = {
    "gymnasium_robotics:FetchPush-v4": "gymnasium_robotics",
    "panda_gym:PandaPush-v3": "panda_gym",
    "highway_env:parking-v0": "highway_env",
}
FETCH_PUSH = "gymnasium_robotics:FetchPush-v4"


def committed(spec: str) -> Path:
    """The committed fingerprint of ``spec``: tests/checker/fingerprints/<id>.json."""
    return FINGERPRINTS / f"{spec.rpartition(':')[2].removeprefix('goalenvs/')}.json"


def build(spec: str) -> gym.Env:
    """A fresh env of ``spec``, built as ``goalenvs check`` builds its fingerprint's."""
    module = THIRD_PARTY.get(spec)
    if module is not None and importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")
    if module is not None:
        importlib.import_module(module)  # an installed module that fails to import fails
    env, factory, _ = load(spec)
    env.close()
    return factory()


def verdict(env: gym.Env, path: Path) -> fingerprint.Verdict:
    assert path.is_file(), f"write it: goalenvs check SPEC --fingerprint {path}"
    try:
        return fingerprint.check(env, fingerprint.env_id(env), path)
    finally:
        env.close()


# --------------------------------------------------------------------------- pinned envs


@pytest.mark.parametrize("spec", [*goalenvs.ENV_IDS, *THIRD_PARTY])
def test_env_matches_its_committed_fingerprint(spec):
    found = verdict(build(spec), committed(spec))
    assert (found.status, found.message) == ("unchanged", f"fingerprint unchanged: {found.path}")


def test_every_committed_fingerprint_is_small_and_rounded():
    files = sorted(FINGERPRINTS.glob("*.json"))
    assert {f.name for f in files} == {committed(s).name for s in [*goalenvs.ENV_IDS, *THIRD_PARTY]}
    for path in files:
        text = path.read_text()
        assert len(text) < 40_000, path.name
        data = json.loads(text)
        assert data["format_version"] == fingerprint.FORMAT_VERSION
        assert [r["seed"] for r in data["rollouts"]] == list(fingerprint.SEEDS)
        for rollout in data["rollouts"]:
            assert len(rollout["actions"]) <= fingerprint.STEPS
            for row in rollout["observation"]:
                # 6 significant digits at most: 1.34552, 0.000123457, 1.2e-07
                assert all(float(f"{x:.6g}") == x for x in row), (path.name, row)


def test_fetch_push_fingerprint_fails_on_another_distance_threshold():
    env = build(FETCH_PUSH)
    env.unwrapped.distance_threshold = 0.07  # from 0.05: compute_reward reads it per call
    found = verdict(env, committed(FETCH_PUSH))
    assert found.changed
    # the reset's goal is 0.3-0.5 away: 85% of the way is within 0.07 and outside 0.05
    assert (
        "seed 0, step 0, compute_reward[17] (an achieved goal 85% of the way to the desired "
        "goal): -1 in the file, 0 now (by 1)"
    ) in found.message


def test_fetch_push_fingerprint_fails_on_another_initial_object_range():
    env = build(FETCH_PUSH)
    env.unwrapped.obj_range = 0.1  # from 0.15: the same draws put the object elsewhere
    found = verdict(env, committed(FETCH_PUSH))
    assert found.changed
    assert "seed 0, step 0, observation[3]: 1.20783 in the file, 1.25374 now" in found.message
    # docs/checks.md shows this line as the example of a changed fingerprint
    shown = found.message.replace(str(committed(FETCH_PUSH)), "fingerprints/FetchPush-v4.json")
    assert f"```text\n{shown}\n```" in (ROOT / "docs" / "checks.md").read_text()


class ShiftObject(gym.Wrapper):
    """Moves FetchPush's object ``dx`` metres along x after every reset."""

    def __init__(self, env: gym.Env, dx: float) -> None:
        super().__init__(env)
        self.dx = dx

    def reset(self, **kwargs):
        _, info = self.env.reset(**kwargs)
        fetch = self.env.unwrapped
        qpos = fetch._utils.get_joint_qpos(fetch.model, fetch.data, "object0:joint").copy()
        qpos[0] += self.dx
        fetch._utils.set_joint_qpos(fetch.model, fetch.data, "object0:joint", qpos)
        fetch._mujoco.mj_forward(fetch.model, fetch.data)
        return fetch._get_obs(), info


def test_fetch_push_fingerprint_fails_on_an_object_start_one_millimetre_away():
    found = verdict(ShiftObject(build(FETCH_PUSH), 0.001), committed(FETCH_PUSH))
    assert found.changed
    # observation[3:6] is the object's position; achieved_goal is it too
    assert "seed 0, step 0, observation[3]: 1.20783 in the file, 1.20883 now (by 0.001)" in (
        found.message
    )


class Jitter(gym.Wrapper):
    """Moves every MuJoCo joint position and velocity by ``scale`` times a normal draw
    after every reset: far more than the last bits another CPU computes differently."""

    def __init__(self, env: gym.Env, scale: float) -> None:
        super().__init__(env)
        self.scale = scale
        self.rng = np.random.default_rng(7)

    def reset(self, **kwargs):
        _, info = self.env.reset(**kwargs)
        sim = self.env.unwrapped
        sim.data.qpos[:] += self.scale * self.rng.standard_normal(sim.data.qpos.shape)
        sim.data.qvel[:] += self.scale * self.rng.standard_normal(sim.data.qvel.shape)
        sim._mujoco.mj_forward(sim.model, sim.data)
        return sim._get_obs(), info


def test_fetch_push_fingerprint_holds_under_a_billionth_of_a_metre_of_noise():
    # 1e-9 in every joint (the object pushed in seed 1 included) is 10^7 times float64's
    # last bit here: what another CPU computes differently stays inside the tolerance
    found = verdict(Jitter(build(FETCH_PUSH), 1e-9), committed(FETCH_PUSH))
    assert found.status == "unchanged", found.message
    pushed = json.loads(committed(FETCH_PUSH).read_text())["rollouts"][1]["observation"]
    assert abs(pushed[-1][3] - pushed[0][3]) > 0.01  # the object moved: contact is pinned


# --------------------------------------------------------------------------- comparing


def taken(spec: str = "goalenvs/PointReach-v0", **make_kwargs) -> dict:
    env = gym.make(spec, **make_kwargs)
    try:
        return fingerprint.take(env, fingerprint.env_id(env))
    finally:
        env.close()


def test_a_fingerprint_takes_a_few_seeded_rollouts_of_every_step_key():
    data = taken()
    assert data["env_id"] == "goalenvs/PointReach-v0"
    (rollout, *_) = data["rollouts"]
    steps = len(rollout["actions"])
    assert steps == fingerprint.STEPS
    for key in ("observation", "achieved_goal", "desired_goal", "is_success"):
        assert len(rollout[key]) == steps + 1  # step 0 is the reset
    for key in ("reward", "terminated", "truncated"):
        assert rollout[key][0] is None and len(rollout[key]) == steps + 1
    assert len(rollout["compute_reward"]) == fingerprint.PATH_POINTS
    assert rollout["compute_reward"][-1] == 0  # the desired goal itself pays success
    # another seed, other actions and another goal
    assert data["rollouts"][1]["actions"] != rollout["actions"]
    assert data["rollouts"][1]["desired_goal"][0] != rollout["desired_goal"][0]
    assert taken() == data  # seeded


def test_values_within_the_tolerance_pass_and_beyond_it_are_named_with_the_amount():
    data = taken()
    near = copy.deepcopy(data)
    for rollout in near["rollouts"]:
        rollout["observation"] = (np.asarray(rollout["observation"]) * (1 + 2e-6)).tolist()
    assert fingerprint.compare(data, near) is None  # another CPU's last bits
    far = copy.deepcopy(data)
    old = far["rollouts"][1]["achieved_goal"][4][1]
    far["rollouts"][1]["achieved_goal"][4][1] = old + 0.01
    moved = fingerprint.compare(far, data)
    assert moved == (
        f"seed 1, step 4, achieved_goal[1]: {old + 0.01:.6g} in the file, {old:.6g} now "
        "(by 0.01) (1 value(s) moved in all)"
    )


def test_an_episode_that_ends_at_another_step_is_named_by_its_truncation():
    short = taken(max_episode_steps=10)
    moved = fingerprint.compare(short, taken())
    assert moved is not None
    assert moved.startswith("seed 0, step 10, truncated: true in the file, false now")


def test_another_reward_is_named_by_the_reward_of_the_first_step_that_pays_otherwise():
    moved = fingerprint.compare(taken(), taken("goalenvs/PointReachDense-v0"))
    assert moved is not None and moved.startswith("seed 0, step 0, compute_reward[0]")
    without_path = taken()
    for rollout in without_path["rollouts"]:
        del rollout["compute_reward"]
    dense = taken("goalenvs/PointReachDense-v0")
    for rollout in dense["rollouts"]:
        del rollout["compute_reward"]
    moved = fingerprint.compare(without_path, dense)
    assert moved is not None and moved.startswith("seed 0, step 1, reward: -1 in the file")


# --------------------------------------------------------------------------- the command


def check(*args: str) -> int:
    return main(["check", TOY, "--steps", "50", *args])


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def test_first_run_writes_the_file_and_later_runs_say_unchanged(tmp_path, capsys):
    path = tmp_path / "pins" / "toy.json"  # its folder is made
    assert check("--fingerprint", str(path)) == 0
    out = capsys.readouterr().out
    data = json.loads(path.read_text())
    steps = sum(len(r["actions"]) for r in data["rollouts"])  # ToyReach ends on success
    assert out.strip().splitlines()[-1] == (
        f"fingerprint written to {path}: 3 seeds, {steps} steps; later runs compare against it"
    )
    assert data["env_id"] == "ToyReach" and 3 < steps <= 60
    assert check("--fingerprint", str(path)) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"fingerprint unchanged: {path}"
    assert check("--fingerprint", str(path), "--json") == 0
    data = json.loads(capsys.readouterr().out)  # stdout is the JSON alone
    assert data["fingerprint"] == {
        "file": str(path),
        "status": "unchanged",
        "message": f"fingerprint unchanged: {path}",
    }
    assert data["errors"] == 0


def moved_file(path: Path) -> float:
    """Moves seed 2's observation at step 3 by 0.5 in the file; returns the old value."""
    data = json.loads(path.read_text())
    old = data["rollouts"][2]["observation"][3][0]
    data["rollouts"][2]["observation"][3][0] = old + 0.5
    path.write_text(json.dumps(data))
    return old


def test_a_moved_env_exits_3_naming_seed_step_key_and_amount(tmp_path, capsys):
    path = tmp_path / "toy.json"
    assert check("--fingerprint", str(path)) == 0
    old = moved_file(path)
    assert check("--fingerprint", str(path)) == FINGERPRINT_CHANGED == 3
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == (
        f"fingerprint changed ({path}): seed 2, step 3, observation[0]: {old + 0.5:.6g} in the "
        f"file, {old:.6g} now (by 0.5) (1 value(s) moved in all)"
    )
    assert check("--fingerprint", str(path), "--json") == 3
    assert json.loads(capsys.readouterr().out)["fingerprint"]["status"] == "changed"


def test_a_moved_env_with_a_check_error_exits_4(tmp_path, capsys):
    path = tmp_path / "toy.json"
    defect = ("--kwargs", '{"defect": "reward_constant"}')
    assert check(*defect, "--fingerprint", str(path)) == 1
    moved_file(path)
    assert check(*defect, "--fingerprint", str(path)) == 1 + FINGERPRINT_CHANGED
    out = capsys.readouterr().out
    assert "reward.goal_dependent" in out and "fingerprint changed" in out


def test_an_env_that_raises_while_its_fingerprint_is_taken_exits_1(tmp_path, capsys):
    path = tmp_path / "toy.json"
    assert check("--kwargs", '{"defect": "step_raises"}', "--fingerprint", str(path)) == 1
    out = capsys.readouterr().out
    assert "api.step" in out  # the checks ran and found it too
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"fingerprint not taken ({path}): RuntimeError: index out of range")
    assert not path.exists()


def edited(path: Path, change) -> Path:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def written(tmp_path) -> Path:
    """ToyReach's fingerprint, as ``goalenvs check TOY --fingerprint`` writes it."""
    path = tmp_path / "toy.json"
    assert fingerprint.check(ToyReach(), "ToyReach", path).status == "written"
    return path


def _space_shape(data):
    data["observation_space"]["spaces"]["observation"]["shape"] = [3]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d.update(env_id="FetchPush-v4"),
            "a fingerprint of env 'FetchPush-v4', not of 'ToyReach'",
        ),
        (
            lambda d: d.update(format_version=99),
            "format version 99, this goalenvs reads version 1; delete the file to write it again",
        ),
        (
            _space_shape,
            "a different observation space at 'observation': the file has "
            "Box(-1.0, 1.0, (3,), float32), this env has Box(-1.0, 1.0, (2,), float32)",
        ),
        (
            lambda d: d.update(env_kwargs={"penalty": True}),
            'taken with --env-kwargs {"penalty": true}, this run has {}',
        ),
        (
            lambda d: d.update(max_episode_steps=10),
            "taken with --max-episode-steps 10, this run has none",
        ),
        (
            lambda d: d["rollouts"][0]["actions"].__setitem__(2, [5.0, 0.0]),
            "seed 0's action 3 ([5.0, 0.0]) is not in the action space Box(-1.0, 1.0, (2,), "
            "float32)",
        ),
        (
            lambda d: d.update(rollouts=7),
            "its rollouts are not a list of seeded rollouts; expected a fingerprint written "
            "by goalenvs check --fingerprint",
        ),
    ],
    ids=[
        "env_id",
        "format_version",
        "observation_space",
        "env_kwargs",
        "max_episode_steps",
        "actions",
        "rollouts",
    ],
)
def test_a_fingerprint_of_another_env_is_one_line_exit_2(written, capsys, change, message):
    assert check("--fingerprint", str(edited(written, change))) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before the checks ran
    assert one_line(captured.err) == f"goalenvs check: --fingerprint {written}: {message}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"format_version": 1, "rollouts": [', "not JSON (Expecting value at line 1)"),
        ("[1, 2]", "no format_version"),
        ("", "not JSON (Expecting value at line 1)"),
    ],
)
def test_a_corrupt_fingerprint_file_is_one_line_exit_2(tmp_path, capsys, text, message):
    path = tmp_path / "broken.json"
    path.write_text(text)
    assert check("--fingerprint", str(path)) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"goalenvs check: --fingerprint {path}: {message}")


def test_a_vector_env_is_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "vector.json"
    assert (
        main(["check", "goalenvs/PointReach-v0", "--num-envs", "2", "--fingerprint", str(path)])
        == 2
    )
    assert one_line(capsys.readouterr().err) == (
        f"goalenvs check: --fingerprint {path}: a fingerprint takes a single env; this one is "
        "a PointReachVectorEnv"
    )
    assert not path.exists()


# --------------------------------------------------------------------------- the docs


def test_the_docs_ci_recipe_runs_as_written(tmp_path, monkeypatch, capsys):
    text = (ROOT / "docs" / "checks.md").read_text()
    section = text[text.index("## Fingerprints") :]
    recipe = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert recipe is not None
    monkeypatch.chdir(tmp_path)
    verdicts = []
    for line in recipe.group(1).splitlines():
        words = shlex.split(line, comments=True)
        if words[:2] == ["test", "-f"]:
            assert Path(words[2]).is_file(), line
        elif words:
            assert words[:2] == ["goalenvs", "check"], f"the recipe runs only these: {line}"
            assert main(words[1:]) == 0, line
            verdicts.append(capsys.readouterr().out.strip().splitlines()[-1].split(":")[0])
    assert verdicts == ["fingerprint written to fingerprints/Push-v0.json", "fingerprint unchanged"]
    for status in (
        "**0**",
        "**2**",
        f"**{FINGERPRINT_CHANGED}**",
        f"**{FINGERPRINT_CHANGED + 1}**",
    ):
        assert status in section
