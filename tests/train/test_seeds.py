"""Several seeds: ``goalenvs train ENV --seeds 0-4`` into one folder, and ``goalenvs plot``:
the IQM and its bootstrap band, each seed's env steps to a mark, and one line for bad
input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from goalenvs.cli import main
from goalenvs.train.curves import format_env_steps
from goalenvs.train.plan import RunPlan
from goalenvs.train.plot import SeedRun, bootstrap_band, iqm, on_grid, read_runs, seed_table
from goalenvs.train.seeds import parse_seeds, side_by_side
from tests.console import refused
from tests.train.runs import progress

USER_ENV = Path(__file__).resolve().parents[1] / "user_envs" / "cursor_env.py"
WHOLE = "expected a whole number >= 1"


def write_run(folder: Path, env_id: str, seed: int, success: list[float], every: int = 100):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"env_id": env_id, "seed": seed}))
    rows = [f"{every * (i + 1)},{value}" for i, value in enumerate(success)]
    (folder / "progress.csv").write_text("env_steps,eval_success\n" + "\n".join(rows) + "\n")
    return folder


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("0-4", [0, 1, 2, 3, 4]), ("0,3,7", [0, 3, 7]), ("5", [5]), ("1-2,9", [1, 2, 9])],
)
def test_seeds_read_as_ranges_and_lists(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["4-0", "a", "0-", "-1", "1,1", ""])
def test_a_bad_seed_range_is_one_error_naming_it(text):
    with pytest.raises(ValueError, match=rf"^--seeds {text!r}: "):
        parse_seeds(text)


def test_train_refuses_a_bad_seeds_range_in_one_line(capsys):
    assert refused(capsys, "train", "goalenvs/PointReach-v0", "--seeds", "4-0") == (
        "goalenvs train: error: --seeds '4-0': 4 > 0; expected a range FIRST-LAST (0-4), a "
        "list (0,3,7) or one seed, each >= 0\n"
    )
    err = refused(capsys, "train", "goalenvs/PointReach-v0", "--seeds", "0-4", "--seed", "3")
    assert err.endswith("--seeds 0-4 and --seed 3: give one of them\n")


@pytest.mark.parametrize(
    ("steps", "text"),
    [(0, "0"), (800, "800"), (1500, "1.5k"), (100_000, "100k"), (150_000, "150k"), (1.5e6, "1.5M")],
)
def test_env_step_ticks_read_in_k_and_m(steps, text):
    assert format_env_steps(steps) == text


def test_iqm_is_the_mean_of_the_middle_half_and_the_band_holds_it():
    values = np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 1.0], [3.0, 1.0], [10.0, 1.0]])
    np.testing.assert_allclose(iqm(values), [2.0, 1.0])  # 1, 2, 3 of the first point
    low, high = bootstrap_band(values)
    assert low[0] < 2.0 < high[0] and high[0] <= 10.0
    np.testing.assert_allclose([low[1], high[1]], [1.0, 1.0])  # all seeds agree: no width


def test_a_seed_that_stopped_early_keeps_its_last_value():
    long = SeedRun(Path("a"), "e", 0, np.array([100, 200, 300]), np.array([0.1, 0.5, 0.8]))
    short = SeedRun(Path("b"), "e", 1, np.array([100, 200]), np.array([0.2, 1.0]))
    grid, values = on_grid([long, short])
    np.testing.assert_array_equal(grid, [100, 200, 300])
    np.testing.assert_allclose(values, [[0.1, 0.5, 0.8], [0.2, 1.0, 1.0]])


def test_the_table_gives_each_seeds_env_steps_to_the_mark_with_median_and_iqr(tmp_path):
    for seed, success in enumerate([[0.2, 0.9, 1.0], [0.5, 0.6, 0.95], [0.1, 0.2, 0.3]]):
        write_run(tmp_path / f"seed_{seed}", "goalenvs/PointReach-v0", seed, success, 1000)
    assert seed_table(read_runs([tmp_path]), 0.9) == [
        "seed  env steps to 0.9  best  last",
        "   0             2,000  1.00  1.00",
        "   1             3,000  0.95  0.95",
        "   2                 -  0.30  0.30",
        "2 of 3 seeds reached 0.9: median 2.5k env steps, IQR 2.25k-2.75k",
    ]


def test_plot_draws_the_set_and_refuses_mixed_envs_or_an_empty_folder(tmp_path, capsys):
    for seed in range(3):
        write_run(tmp_path / "set" / f"seed_{seed}", "goalenvs/PointReach-v0", seed, [0.5, 1.0])
    assert main(["plot", str(tmp_path / "set")]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "set" / "curves.png").stat().st_size > 0
    assert "3 of 3 seeds reached 0.9: median 200 env steps, IQR 200-200" in out

    write_run(tmp_path / "other", "goalenvs/Push-v0", 0, [0.5])
    err = refused(capsys, "plot", str(tmp_path / "set"), str(tmp_path / "other"))
    assert err.startswith("goalenvs plot: error: the runs are of 2 envs, plot one env's runs: ")
    assert "(goalenvs/Push-v0)" in err

    (tmp_path / "empty").mkdir()
    assert refused(capsys, "plot", str(tmp_path / "empty")) == (
        f"goalenvs plot: error: RUN {str(tmp_path / 'empty')!r}: no progress.csv in it or its "
        "folders; expected a run folder or a folder of them\n"
    )


def test_seeds_side_by_side_train_what_one_after_another_trains_into_one_folder(tmp_path, capsys):
    argv = ["train", f"{USER_ENV}:CursorEnv", "--max-episode-steps", "10", "--seeds", "0-1"]
    tiny = ["--epochs", "2", "--cycles", "2", "--batches", "2", "--batch-size", "16", "--quiet"]
    assert main([*argv, *tiny, "--out", str(tmp_path / "apart"), "--seeds-at-once", "2"]) == 0
    out = capsys.readouterr().out
    assert "; 2 seeds 2 side by side into " in out.splitlines()[0]
    assert main([*argv, *tiny, "--out", str(tmp_path / "after"), "--seeds-at-once", "1"]) == 0
    after_out = capsys.readouterr().out
    assert "; 2 seeds one after another into " in after_out.splitlines()[0]
    assert "seed  env steps to 0.9  best  last" in after_out
    for seed in (0, 1):
        apart, after = tmp_path / "apart" / f"seed_{seed}", tmp_path / "after" / f"seed_{seed}"
        assert json.loads((after / "config.json").read_text())["seed"] == seed
        assert len(progress(apart)) == 2
        # losses, returns, successes: to the digit
        assert progress(apart, untimed=True) == progress(after, untimed=True)
        assert "train.log" in {path.name for path in apart.iterdir()}
        assert f"seed {seed}: best success " in out and f"seed {seed}: best success " in after_out
    for folder in ("apart", "after"):
        assert (tmp_path / folder / "curves.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        *(
            (["--seeds", "0-1", "--seeds-at-once", v], f"--seeds-at-once {v!r}: {WHOLE}")
            for v in ("0", "two")
        ),
        (["--seeds-at-once", "2"], "--seeds-at-once 2: it sets how --seeds trains; give --seeds"),
    ],
)
def test_a_bad_seeds_at_once_is_one_line_naming_it(flags, message, capsys):
    err = refused(capsys, "train", "goalenvs/PointReach-v0", *flags)
    assert err == f"goalenvs train: error: {message}\n"


def test_side_by_side_counts_each_runs_threads_and_workers():
    def plan(device="cpu", threads=1, workers=1, evals=1):
        fields = {name: None for name in RunPlan.__dataclass_fields__}
        fields.update(device=device, torch_threads=threads, env_workers=workers)
        fields.update(eval_workers=evals, machine={}, notes=())
        return RunPlan(**fields)

    assert side_by_side(plan(), 5, cores=2) == 2
    assert side_by_side(plan(threads=2), 5, cores=2) == 1
    assert side_by_side(plan(threads=2, workers=3), 5, cores=16) == 4  # 2 + 2 more processes
    assert side_by_side(plan(), 3, cores=16) == 3  # never more than the seeds
    assert side_by_side(plan(device="cuda"), 5, cores=16) == 1  # one GPU: one after another
