"""The checker on vector envs: a defect library of batched envs, the correct ones (the toy
in every autoreset mode, every goalenvs twin on numpy and torch, gymnasium-robotics'
FetchReach and panda-gym's PandaReach under SyncVectorEnv), loading and bad input."""

from __future__ import annotations

import importlib.util
import json
import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import goalenvs
from goalenvs.checker import CHECKS, LoadError, check_goal_env, load, load_vector
from goalenvs.cli import main
from tests.checker.broken_vector_envs import (
    SINGLE_DEFECTS,
    TORCH_DEFECTS,
    TOY_SINGLE_ID,
    TOY_VEC_ID,
    VECTOR_DEFECTS,
    HangingVecReach,
    ToyTorchVecReach,
    ToyVecReach,
    make,
)
from tests.checker.test_checker import assert_clean, installed

STEPS = 100  # the toy's episodes last at most 20 steps: five or more per sub-env
MODES = ("next_step", "same_step", "disabled")
GYM_MODES = {
    "next_step": AutoresetMode.NEXT_STEP,
    "same_step": AutoresetMode.SAME_STEP,
    "disabled": AutoresetMode.DISABLED,
}
ALL_DEFECTS = {**VECTOR_DEFECTS, **TORCH_DEFECTS, **SINGLE_DEFECTS}

# What a defect breaks besides its own check, by design: a consumer reading the batch
# through the declared mode is misled in those places too.
CONSEQUENCES: dict[str, set[str]] = {
    # final_obs views hold the next episode: rewards and terminations no longer match it
    "final_obs_aliased": {"vector.reward_match", "vector.terminated_match"},
    # read as next-step, the returned rows are the next episodes' starts
    "declares_next_does_same": {
        "vector.goal_fixed",
        "vector.reward_match",
        "vector.terminated_match",
        "vector.time_limit",
    },
    # every sub-env restarts with each masked reset
    "ignores_reset_mask": {"vector.goal_fixed", "vector.isolation", "vector.time_limit"},
    # sub-env 0's autoreset (moved by its own actions) redraws the others' goals
    "redraw_all_goals": {"vector.isolation"},
    # sub-env 0's success (moved by its own actions) terminates the others
    "success_terminates_all": {"vector.isolation"},
}
# What a defect's findings say: defect -> texts of its own check's findings.
EVIDENCE = {
    "reward_after_reset": (
        "ended: step returned reward = -1.0 but compute_reward(achieved_goal=",
        "of its final_obs = 0.0: the reward was computed after the reset",
    ),
    "declares_next_does_same": (  # which mode the env runs
        "declares next-step autoreset but restarts sub-envs in the step that ends",
        "its info carries final_obs",
    ),
    # the short episodes, listed
    "shared_counter": ("in an episode after an autoreset (the time limit is 20;",),
    # the changed sub-env and what changed
    "actions_scaled_by_batch": (
        "changing only sub-env 0's actions (to [1.0, 1.0] at step 0) changed sub-env",
        "'s obs['observation']",
    ),
}


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def build(defect: str) -> Any:
    if defect in SINGLE_DEFECTS:
        return gym.make_vec(TOY_VEC_ID, num_envs=8, defect=defect)
    if defect in TORCH_DEFECTS and not torch_available():
        pytest.skip("torch is not installed")
    return make(defect)


def run_check(env: Any, **kwargs: Any):
    kwargs.setdefault("steps", STEPS)
    kwargs.setdefault("timeout", 5.0)
    return check_goal_env(env, **kwargs)


# --------------------------------------------------------------------------- defects


def test_the_defect_library_covers_every_vector_check_but_num_envs():
    vector_ids = {c for c in CHECKS if CHECKS[c].targets == ("vector",)}
    caught = {check_id for check_id, *_ in ALL_DEFECTS.values()}
    assert vector_ids - caught == {"vector.num_envs"}  # not a defect: see the bad-input tests
    for check_id, severity, _, _ in ALL_DEFECTS.values():
        assert CHECKS[check_id].severity == severity, check_id
    # each defect's correct twin (the toy in its mode) is test_the_correct_toy_is_clean_...
    assert {mode for _, _, mode, _ in ALL_DEFECTS.values()} <= set(MODES)
    # the seeding defects are warnings, every other family an error
    assert {d for d, (_, s, _, _) in ALL_DEFECTS.items() if s == "warning"} == {
        "copies",
        "unseeded_autoreset",
        "replays_first_episode",
    }


@pytest.mark.parametrize("defect", list(ALL_DEFECTS))
def test_vector_defect_is_caught_with_its_check_id_and_severity(defect):
    check_id, severity, mode, _ = ALL_DEFECTS[defect]
    report = run_check(build(defect))
    assert report.settings["autoreset_mode"] == (
        "next_step" if defect in ("declares_next_does_same", "mode_string") else mode
    )
    result = report.result(check_id)
    assert result.status == "failed", str(report)
    assert result.severity == severity
    assert result.findings and all(f.message for f in result.findings)
    said = _messages(report, check_id)
    assert all(text in said for text in EVIDENCE.get(defect, ())), said
    if severity == "error":
        assert not report.ok
        assert report.failed_ids("error") - {check_id} <= CONSEQUENCES.get(defect, set()), str(
            report
        )
    else:
        assert report.ok and report.failed_ids() == {check_id}, str(report)


@pytest.mark.parametrize("mode", MODES)
def test_a_replayed_first_episode_is_found_in_every_mode(mode):
    broken = run_check(ToyVecReach(num_envs=8, autoreset_mode=mode, defect="replays_first_episode"))
    (finding,) = broken.result("vector.episodes_vary").findings
    t, i = map(int, re.match(r"step (\d+), sub-env (\d+)", finding.where).groups())
    assert f"sub-env {i}'s episode from step {t} starts at" in finding.message
    assert "training sees one episode per sub-env" in finding.message
    assert broken.failed_ids() == {"vector.episodes_vary"}, str(broken)
    # its twin, the correct toy in the same mode: test_the_correct_toy_is_clean_in_every_mode


def test_an_unseeded_autoreset_names_the_sub_env_and_the_step_of_its_autoreset():
    report = run_check(make("unseeded_autoreset"))
    (finding,) = report.result("vector.seed").findings
    t, i = map(int, re.match(r"step (\d+), sub-env (\d+)$", finding.where).groups())
    ended = re.search(
        rf"sub-env {i} drew another episode at its autoreset in step (\d+) "
        r"\(its episode ended at step (\d+)\)",
        finding.message,
    )
    assert ended, finding.message
    assert int(ended.group(1)) == int(ended.group(2)) + 1 <= t  # next-step: the step after
    assert f"at step {t} it gave" in finding.message


def _toy_skips(mode: str, torch: bool = False, single: bool = False) -> set[str]:
    skips = set() if mode == "same_step" else {"vector.final_obs"}
    if not torch:
        skips.add("vector.device")
    if torch or not single:
        skips.add("vector.single_equal")
    return skips


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["numpy", "random_start_len", "torch", "registered"])
def test_the_correct_toy_is_clean_in_every_mode(mode, kind):
    # random_start_len: rsl_rl's init_at_random_ep_len, first episodes cut short on purpose;
    # registered: gym.make_vec of the id with both entry points, equal to its single env
    torch, single = kind == "torch", kind == "registered"
    if torch and not torch_available():
        pytest.skip("torch is not installed")
    if single:
        env = gym.make_vec(TOY_VEC_ID, num_envs=8, autoreset_mode=mode)
    elif torch:
        env = ToyTorchVecReach(num_envs=8, autoreset_mode=mode, device="cpu")
    else:
        env = ToyVecReach(num_envs=8, autoreset_mode=mode, random_start_len=kind != "numpy")
    # every vector check passed but the skips _toy_skips names: vector.device for torch,
    # vector.single_equal for the registered id, the isolation and seed checks for all
    assert_clean(run_check(env), _toy_skips(mode, torch=torch, single=single))


def test_gymnasiums_final_info_form_and_the_object_array_form_are_both_accepted():
    class ObjectArrayFinalInfo(gym.vector.VectorWrapper):
        """final_info as an object array of per-env dicts (the older form)."""

        def step(self, actions):
            obs, reward, terminated, truncated, info = self.env.step(actions)
            if "final_info" in info:
                rows = np.full(self.num_envs, None, dtype=object)
                for i in np.flatnonzero(info["_final_info"]):
                    rows[i] = {"is_success": info["final_info"]["is_success"][i]}
                info["final_info"] = rows
            return obs, reward, terminated, truncated, info

    toy = ToyVecReach(num_envs=8, autoreset_mode="same_step")
    for env in (toy, ObjectArrayFinalInfo(ToyVecReach(num_envs=8, autoreset_mode="same_step"))):
        report = run_check(env)
        assert_clean(report, _toy_skips("same_step"))
    # the toy itself returns gymnasium's form
    toy.reset(seed=0)
    for _ in range(60):
        *_, info = toy.step(toy.action_space.sample())
        if "final_info" in info:
            assert isinstance(info["final_info"], dict) and "_is_success" in info["final_info"]
            break
    else:
        raise AssertionError("no episode ended in 60 steps")


def _messages(report, check_id: str) -> str:
    return " ".join(f.message for f in report.result(check_id).findings)


# --------------------------------------------------------------------------- goalenvs twins


@pytest.mark.parametrize("device", [None, "cpu"], ids=["numpy", "torch_cpu"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("env_id", goalenvs.ENV_IDS)
def test_every_goalenvs_twin_is_clean_on_numpy_and_torch_cpu(env_id, mode, device):
    if device is not None and not torch_available():
        pytest.skip("torch is not installed")
    on = {} if device is None else {"device": device}
    env = gym.make_vec(env_id, num_envs=4, autoreset_mode=GYM_MODES[mode], **on)
    report = check_goal_env(env)
    torch = device is not None
    assert_clean(report, _toy_skips(mode, torch=torch, single=not torch))


# --------------------------------------------------------------------------- third-party envs


@pytest.mark.slow
def test_fetch_reach_under_syncvectorenv_is_clean():
    installed("mujoco")
    installed("gymnasium_robotics")
    loaded = load_vector("gymnasium_robotics:FetchReach-v4", num_envs=2)
    assert loaded.notes == [
        "FetchReach-v4 has no vector entry point: checking gymnasium's SyncVectorEnv of 2 "
        "copies of its single env"
    ]
    try:
        report = check_goal_env(loaded.env, steps=110)
    finally:
        loaded.env.close()
    assert isinstance(loaded.env.unwrapped, gym.vector.SyncVectorEnv)
    assert_clean(report, {"vector.final_obs", "vector.device", "vector.single_equal"})


@pytest.mark.slow
def test_panda_reach_under_syncvectorenv_draws_autoresets_from_an_unseeded_generator():
    installed("panda_gym")
    loaded = load_vector("panda_gym:PandaReach-v3", num_envs=2)
    try:
        report = check_goal_env(loaded.env, steps=110)
    finally:
        loaded.env.close()
    # panda_gym/envs/core.py, RobotTaskEnv.reset: `self.task.np_random, seed =
    # seeding.np_random(seed)` on every reset, so SyncVectorEnv's autoreset (reset()
    # without a seed) draws the next goal from the operating system's entropy.
    assert report.errors == [], str(report)
    assert report.failed_ids("warning") == {"vector.seed"}, str(report)
    assert "autoresets draw from a generator that reset(seed=...) does not seed" in _messages(
        report, "vector.seed"
    )


# --------------------------------------------------------------------------- loading, bad input


def test_load_vector_takes_every_spec_form():
    # a registered id with both entry points: its vector entry point, or sync / async
    loaded = load_vector(TOY_VEC_ID, num_envs=3)
    assert isinstance(loaded.env, ToyVecReach) and loaded.env.num_envs == 3 and not loaded.notes
    assert loaded.single is not None and loaded.single().unwrapped.__class__.__name__ == (
        "ToySingleReach"
    )
    for mode, cls in (("sync", gym.vector.SyncVectorEnv), ("async", gym.vector.AsyncVectorEnv)):
        loaded = load_vector(TOY_VEC_ID, num_envs=2, vectorization_mode=mode)
        try:
            assert isinstance(loaded.env, cls) and loaded.env.num_envs == 2
            report = run_check(loaded.env, single=loaded.single)
            assert_clean(report, _toy_skips("next_step", single=mode == "async"))
        finally:
            loaded.env.close()
    # module:Class and file.py:Factory, with num_envs passed to them
    loaded = load_vector("tests.checker.broken_vector_envs:ToyVecReach", num_envs=5)
    assert isinstance(loaded.env, ToyVecReach) and loaded.env.num_envs == 5
    loaded = load_vector("tests/checker/broken_vector_envs.py:make", num_envs=6)
    assert type(loaded.env).__name__ == "ToyVecReach" and loaded.env.num_envs == 6
    # load() detects a factory that builds a vector env
    env, factory, _ = load("tests.checker.broken_vector_envs:ToyVecReach", {"num_envs": 3})
    assert isinstance(env, gym.vector.VectorEnv) and factory().num_envs == 3


def test_device_goes_to_a_torch_vector_env():
    if not torch_available():
        pytest.skip("torch is not installed")
    loaded = load_vector("goalenvs/PointReach-v0", num_envs=3, device="cpu")
    obs, _ = loaded.env.reset(seed=0)
    assert type(obs["achieved_goal"]).__module__.startswith("torch")
    loaded = load_vector("tests.checker.broken_vector_envs:ToyTorchVecReach", device="cpu")
    assert str(loaded.env.device) == "cpu"


def test_one_sub_env_is_a_warning_and_the_loader_checks_two_instead():
    report = run_check(ToyVecReach(num_envs=1))
    assert report.failed_ids() == {"vector.num_envs"}, str(report)
    assert "num_envs=1: defects between sub-envs cannot show" in _messages(
        report, "vector.num_envs"
    )
    for check_id in ("vector.isolation", "vector.sub_envs_differ"):
        assert report.result(check_id).status == "skipped"
    loaded = load_vector(TOY_VEC_ID, num_envs=1)
    assert loaded.env.num_envs == 2
    (note,) = loaded.notes
    assert note.startswith("--num-envs 1 hides the defects between sub-envs") and "\n" not in note


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        (
            "tests.checker.broken_vector_envs:make_raising",
            {"num_envs": 4},
            "building tests.checker.broken_vector_envs:make_raising failed: RuntimeError: no "
            "simulator license found",
        ),
        (TOY_SINGLE_ID, {"num_envs": 2, "device": "cpu"}, "--device cpu: checker_test/"),
        (
            TOY_SINGLE_ID,
            {"num_envs": 2, "vectorization_mode": "vector_entry_point"},
            "has no vector entry point; use sync or async",
        ),
        (TOY_VEC_ID, {"num_envs": 0}, "--num-envs 0: expected a positive integer"),
        (TOY_VEC_ID, {"vectorization_mode": "gpu"}, "--vectorization-mode 'gpu': expected one of"),
        (TOY_VEC_ID, {"single": "checker_test/Nope-v0"}, "--single checker_test/Nope-v0: unknown"),
    ],
)
def test_bad_vector_input_is_one_line_naming_the_argument(spec, options, message):
    with pytest.raises(LoadError) as caught:
        load_vector(spec, **options)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_an_id_without_a_vector_entry_point_is_checked_under_syncvectorenv_with_a_note():
    loaded = load_vector(TOY_SINGLE_ID, num_envs=3)
    assert isinstance(loaded.env, gym.vector.SyncVectorEnv)
    assert loaded.notes == [
        "checker_test/ToySingleReach-v0 has no vector entry point: checking gymnasium's "
        "SyncVectorEnv of 3 copies of its single env"
    ]
    assert_clean(run_check(loaded.env), _toy_skips("next_step"))


def test_a_hanging_step_is_a_timeout_finding_and_the_report_still_ends():
    report = run_check(HangingVecReach(num_envs=4), timeout=0.5)
    assert report.result("api.timeout").status == "failed"
    assert "step 3 did not return within 0.5 s" in _messages(report, "api.timeout")
    assert report.result("vector.isolation").status == "skipped"


def test_vector_checks_apply_to_vector_envs_only():
    single = [c for c in CHECKS if "env" in CHECKS[c].targets]
    report = run_check(ToyVecReach(num_envs=4))
    assert [r.id for r in report.results] == [c for c in CHECKS if "vector" in CHECKS[c].targets]
    assert "vector.isolation" not in single and "api.timeout" in single
    with pytest.raises(ValueError, match=r"checks=\['reward.batch'\] do not apply to a vector env"):
        check_goal_env(ToyVecReach(num_envs=4), checks=["reward.batch"])


# --------------------------------------------------------------------------- the command line


def test_cli_checks_an_id_with_num_envs_and_prints_json(capsys):
    code = main(["check", TOY_VEC_ID, "--num-envs", "4", "--steps", "60", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.out
    data = json.loads(captured.out)
    assert data["settings"]["num_envs"] == 4 and data["settings"]["autoreset_mode"] == "next_step"
    assert data["errors"] == 0 and data["warnings"] == 0
    assert {c["id"] for c in data["checks"]} >= {"vector.isolation", "vector.single_equal"}


def test_cli_defect_exits_1_with_its_fix_and_bad_input_exits_2_in_one_line(capsys):
    spec = "tests.checker.broken_vector_envs:make"
    assert main(["check", spec, "--env-kwargs", '{"defect": "norm_axis1"}', "--num-envs", "4"]) == 1
    out = capsys.readouterr().out
    assert "vector.goal_batch" in out and "fix: " in out
    assert main(["check", "tests.checker.broken_vector_envs:make_raising", "--num-envs", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no simulator license found" in err
    assert main(["check", TOY_VEC_ID, "--num-envs", "1", "--steps", "60"]) == 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "checking with --num-envs 2" in err
