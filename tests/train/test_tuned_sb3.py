"""benchmarks/tuned_sb3.py: rl-baselines3-zoo's tuned TQC+HER configs build the model the
zoo would build, and the comparison's table computes its numbers right."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "tuned_sb3.py"
_SPEC = importlib.util.spec_from_file_location("tuned_sb3", _PATH)
tuned_sb3 = importlib.util.module_from_spec(_SPEC)
sys.modules["tuned_sb3"] = tuned_sb3  # its dataclass looks its module up there
_SPEC.loader.exec_module(tuned_sb3)


# The zoo's buffers hold 1e6 transitions: seconds to allocate, and nothing these tests pin.
SMALL = 2_000


def _tqc_or_skip() -> None:
    pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    pytest.importorskip("sb3_contrib", reason="sb3-contrib (TQC) is not installed")


def test_zoo_entries_keep_the_zoo_numbers() -> None:
    reach, parking = tuned_sb3.ZOO["FetchReach-v1"], tuned_sb3.ZOO["parking-v0"]
    assert (reach["gamma"], reach["batch_size"], reach["learning_starts"]) == (0.95, 256, 1000)
    assert reach["policy_kwargs"] == {"net_arch": [64, 64], "n_critics": 1}
    assert reach["normalize"] is True
    # parking-v0 overrides the her-defaults anchor's gamma, lr, batch, tau and strategy,
    # and keeps its networks.
    assert (parking["gamma"], parking["learning_rate"], parking["tau"]) == (0.98, 0.0015, 0.005)
    assert parking["batch_size"] == 512
    assert parking["replay_buffer_kwargs"]["goal_selection_strategy"] == "episode"
    assert parking["policy_kwargs"] == {"net_arch": [512, 512, 512], "n_critics": 2}
    assert "normalize" not in parking


def test_zoo_kwargs_refuse_a_buffer_that_is_not_her() -> None:
    _tqc_or_skip()
    entry = {**tuned_sb3.ZOO["parking-v0"], "replay_buffer_class": "DictReplayBuffer"}
    with pytest.raises(ValueError, match=r"replay_buffer_class='DictReplayBuffer'"):
        tuned_sb3.zoo_model_kwargs(entry)


def test_parking_zoo_config_builds_tqc_on_goalenvs_parking() -> None:
    _tqc_or_skip()
    from stable_baselines3 import HerReplayBuffer
    from stable_baselines3.common.vec_env import VecNormalize

    model, venv = tuned_sb3.build_tqc(tuned_sb3.TASKS["parking"], seed=0, buffer_size=SMALL)
    try:
        assert not isinstance(venv, VecNormalize)
        assert isinstance(model.replay_buffer, HerReplayBuffer)
        assert model.replay_buffer.n_sampled_goal == 4
        assert model.replay_buffer.goal_selection_strategy.name == "EPISODE"
        assert (model.gamma, model.batch_size, model.tau) == (0.98, 512, 0.005)
        assert model.learning_rate == 0.0015
        assert (model.critic.n_critics, len(model.critic.q_networks)) == (2, 2)
        widths = [m.out_features for m in model.actor.latent_pi if hasattr(m, "out_features")]
        assert widths == [512, 512, 512]
    finally:
        venv.close()


def test_fetch_reach_zoo_config_builds_tqc_with_vec_normalize() -> None:
    _tqc_or_skip()
    pytest.importorskip("gymnasium_robotics", reason="the robotics extra is not installed")
    from stable_baselines3.common.vec_env import VecNormalize

    model, venv = tuned_sb3.build_tqc(tuned_sb3.TASKS["fetch_reach"], seed=0, buffer_size=SMALL)
    try:
        # The zoo's `normalize: True`: VecNormalize with the entry's gamma.
        assert isinstance(venv, VecNormalize)
        assert venv.gamma == 0.95
        assert model.replay_buffer.goal_selection_strategy.name == "FUTURE"
        assert (model.batch_size, model.learning_starts) == (256, 1000)
        assert (model.critic.n_critics, len(model.critic.q_networks)) == (1, 1)
        widths = [m.out_features for m in model.actor.latent_pi if hasattr(m, "out_features")]
        assert widths == [64, 64]
    finally:
        venv.close()


def _log(tmp_path: Path, task: str, curves: dict[tuple[str, int], list[tuple]]) -> None:
    lines = []
    for (who, seed), curve in curves.items():
        path = tmp_path / f"{task}_{who}_s{seed}.csv"
        tuned_sb3.write_curve(path, curve)
        row = {"task": task, "who": who, "seed": seed, "budget": 100.0, "csv": path.name}
        lines.append(json.dumps({**row, "load": [1.0, 2.0], "date": "2026-01-01 00:00"}))
    (tmp_path / "runs.jsonl").write_text("\n".join(lines) + "\n")


def test_summary_from_fixed_csv_logs(tmp_path: Path) -> None:
    curves = {
        ("ours", 0): [(10.0, 800, 0.5), (20.0, 1600, 0.95), (30.0, 2400, 0.9)],
        ("ours", 1): [(12.0, 800, 0.96), (24.0, 1600, 1.0)],
        # past the budget of 100 s (and its 1 s of slack): left out
        ("ours", 2): [(11.0, 800, 0.1), (22.0, 1600, 0.2), (120.0, 3200, 1.0)],
        ("sb3", 0): [(50.0, 1000, 0.0), (100.5, 1900, 0.3)],
    }
    _log(tmp_path, "fetch_reach", curves)
    rows = tuned_sb3.logged_runs(tmp_path)
    late = {(r["who"], r["seed"]): r["past_budget"] for r in rows}
    assert late[("ours", 2)] == [(120.0, 3200, 1.0)] and late[("sb3", 0)] == []
    ours = tuned_sb3.summary([r for r in rows if r["who"] == "ours"], 0.95)
    assert ours["seeds"] == 3 and ours["reached"] == 2
    # best 0.95, 1.0, 0.2: mean 0.7166..., std (ddof 0) 0.3659...
    assert ours["best_mean"] == pytest.approx(0.716667, abs=1e-5)
    assert ours["best_std"] == pytest.approx(0.365908, abs=1e-5)
    # first >= 0.95: seed 0 at (20 s, 1600), seed 1 at (12 s, 800): medians 16 s, 1200
    assert ours["seconds_to_target"] == pytest.approx(16.0)
    assert ours["steps_to_target"] == pytest.approx(1200.0)
    assert ours["steps_in_budget"] == (1600, 2400)
    sb3 = tuned_sb3.summary([r for r in rows if r["who"] == "sb3"], 0.95)
    assert (sb3["reached"], sb3["seconds_to_target"], sb3["steps_to_target"]) == (0, None, None)

    text = tuned_sb3.table(rows, "fetch_reach").splitlines()
    assert text[2:4] == [
        "| goalenvs DDPG+HER (default preset) | 3 | 0.72 ± 0.37 | 2/3 | 16 | 1,200 | 1,600-2,400 |",
        "| SB3 TQC+HER (zoo's tuned config) | 1 | 0.30 ± 0.00 | 0/1 | - | - | 1,900-1,900 |",
    ]
    # Per run: to 0.5, to 0.9 and the task's own 0.95 (steps / seconds).
    assert text[7] == (
        "| goalenvs DDPG+HER (default preset) | 0 | 100 | 2,400 | 800 / 10 | 1,600 / 20 | "
        "1,600 / 20 | 0.95 | 0.90 | 1.0-2.0 |"
    )
    assert text[-1] == "Evaluations past the budget, not counted: ours seed 2: 1.00 at 120 s."


def test_logged_runs_keep_the_last_run_of_a_seed(tmp_path: Path) -> None:
    _log(tmp_path, "parking", {("ours", 0): [(5.0, 6000, 0.1)]})
    tuned_sb3.write_curve(tmp_path / "again.csv", [(6.0, 6000, 0.4)])
    with open(tmp_path / "runs.jsonl", "a") as f:
        row = {"task": "parking", "who": "ours", "seed": 0, "budget": 100.0, "csv": "again.csv"}
        f.write(json.dumps({**row, "load": [1.0, 1.0], "date": "2026-01-01 01:00"}) + "\n")
    rows = tuned_sb3.logged_runs(tmp_path)
    assert [r["curve"] for r in rows] == [[(6.0, 6000, 0.4)]]
