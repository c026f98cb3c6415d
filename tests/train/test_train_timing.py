"""Where a cycle's time goes: the phase clock and its progress.csv columns."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pytest

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.agents.registry import config_from_dict
from goalenvs.train.timing import PHASES, TIME_COLUMNS, PhaseClock
from goalenvs.train.trainer import train
from tests.train.runs import progress


def test_the_clock_charges_each_block_to_its_phase():
    clock = PhaseClock()
    with clock("update"):
        time.sleep(0.02)
    with clock("env"):
        pass
    assert clock.seconds["update"] >= 0.02
    assert clock.seconds["env"] < clock.seconds["update"]
    assert clock.seconds["eval"] == 0.0
    assert clock.columns()["time_update"] == round(clock.seconds["update"], 4)
    assert clock.shares().split("  ")[4].startswith("update 10")  # ~100% of the time
    clock.reset()
    assert set(clock.seconds.values()) == {0.0} and clock.shares() == ""


def test_an_unknown_phase_is_an_error_naming_it():
    clock = PhaseClock()
    with pytest.raises(ValueError, match=r"phase='optimizer' is not a phase"), clock("optimizer"):
        pass


def tiny(tmp_path: Path, **kwargs) -> DDPGConfig:
    # rollout_steps 25 of 50-step episodes: updates start in the third cycle
    settings = dict(
        env_id="goalenvs/PointReach-v0", epochs=2, n_cycles=4, rollout_steps=25, n_batches=4,
        batch_size=256, hidden_sizes=(16, 16), n_eval_episodes=3, buffer_size=5000,
        out=str(tmp_path / "run"), verbose=False,
    )  # fmt: skip
    return DDPGConfig(**{**settings, **kwargs})


def test_every_epoch_row_says_where_its_time_went_and_an_older_csv_still_resumes(tmp_path):
    config = tiny(tmp_path, save_buffer=True)
    run = train(config).run_dir
    logged = progress(run)
    assert len(logged) == 2
    for row in logged:
        seconds = {phase: float(row[f"time_{phase}"]) for phase in PHASES}
        # Every phase of the loop ran, so every one took some time.
        assert all(s > 0 for s in seconds.values()), seconds
        # The phases are parts of the epoch: together at most its wall time.
        epoch_time = 2 * 25 * 4 / float(row["steps_per_s"])  # 2 envs x 25 steps x 4 cycles
        assert sum(seconds.values()) <= epoch_time * 1.01 + 0.01
    # A progress.csv from before the time columns: the resumed run goes on writing them.
    path = run / "progress.csv"
    old = [row[: -len(TIME_COLUMNS)] for row in csv.reader(path.open())]
    with path.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(old)
    resumed = config_from_dict({**config.to_dict(), "epochs": 3, "out": None, "resume": str(run)})
    train(resumed)
    logged = progress(run)
    assert [row["epoch"] for row in logged] == ["1", "2", "3"]
    assert logged[0]["time_update"] == logged[1]["time_update"] == ""
    assert float(logged[2]["time_update"]) > 0
