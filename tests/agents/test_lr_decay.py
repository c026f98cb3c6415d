"""lr_decay_to / lr_decay_from: every optimizer's learning rate falls linearly, epoch by
epoch, from a point of the run to a factor of itself in the last epoch."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from goalenvs.agents import DDPGConfig
from goalenvs.cli import main
from goalenvs.train.trainer import Trainer, train
from tests.agents.test_learner import ALGOS, OBS_SPACE
from tests.agents.test_policy_average import train_argv
from tests.train.test_train_resume import config as resume_config

torch.set_num_threads(1)


def rates(agent) -> list[float]:
    return [
        float(group["lr"])
        for name in agent.optimizer_names
        for group in getattr(agent, name).param_groups
    ]


def test_the_factor_holds_then_falls_linearly_to_its_end_in_the_last_epoch():
    config = DDPGConfig(epochs=10, lr_decay_to=0.1, lr_decay_from=0.5)
    factors = [config.lr_factor(epoch) for epoch in range(10)]
    # epochs 1-5 end at or before half the run; epoch 6 ends a fifth of the way down
    assert factors[:5] == [1.0] * 5
    assert factors[5:] == pytest.approx([0.82, 0.64, 0.46, 0.28, 0.1])
    # from the start: the first epoch already falls, by a tenth of the way
    start = DDPGConfig(epochs=4, lr_decay_to=0.2)
    assert [start.lr_factor(e) for e in range(4)] == pytest.approx([0.8, 0.6, 0.4, 0.2])
    assert start.lr_factor(9) == pytest.approx(0.2)  # past the run (a resume with fewer epochs)
    assert [DDPGConfig(epochs=4).lr_factor(e) for e in range(4)] == [1.0] * 4


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        ("lr_decay_to", 0.0, ValueError, r"lr_decay_to must be in \(0, 1\], got 0.0"),
        ("lr_decay_to", 1.5, ValueError, r"lr_decay_to must be in \(0, 1\], got 1.5"),
        ("lr_decay_to", "0.5", TypeError, r"lr_decay_to must be a float in \(0, 1\], got '0.5'"),
        ("lr_decay_from", 1.0, ValueError, r"lr_decay_from must be in \[0, 1\), got 1.0"),
        ("lr_decay_from", -0.1, ValueError, r"lr_decay_from must be in \[0, 1\), got -0.1"),
    ],
)
def test_a_bad_schedule_names_its_field(field, value, error, message):
    with pytest.raises(error, match=message):
        DDPGConfig(**{field: value})


@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_every_optimizer_is_set_from_its_own_rate_not_compounded(algo):
    cls, config_cls, action_space = ALGOS[algo]
    config = config_cls(hidden_sizes=(16,), precision="fp32", device="cpu")
    agent = cls(OBS_SPACE, action_space, config, 0.9, seed=0)
    built = rates(agent)
    assert len(built) >= 1
    agent.set_lr_factor(0.5)
    agent.set_lr_factor(0.5)  # twice: still half, not a quarter
    assert rates(agent) == pytest.approx([0.5 * rate for rate in built])
    agent.set_lr_factor(1.0)
    assert rates(agent) == pytest.approx(built)
    with pytest.raises(ValueError, match=r"factor must be in \(0, 1\], got 0.0"):
        agent.set_lr_factor(0.0)


def progress(run_dir) -> list[dict[str, str]]:
    with open(run_dir / "progress.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_a_run_follows_the_schedule_logs_it_and_a_resume_goes_on_from_it(tmp_path):
    schedule = {"lr_decay_to": 0.25, "lr_decay_from": 0.5}
    first = train(resume_config(tmp_path, epochs=4, max_env_steps=96, save_buffer=True, **schedule))
    assert first.epochs == 2
    rows = progress(first.run_dir)
    assert list(rows[0])[9] == "lr_factor"  # after the evaluation columns
    assert [float(row["lr_factor"]) for row in rows] == [1.0, 1.0]
    # The checkpoint keeps the optimizer's own rate; the resumed epochs are set from it.
    trainer = Trainer(resume_config(tmp_path, epochs=4, resume=str(first.run_dir), **schedule))
    base = trainer.config.learning_rate
    trainer.run()
    assert [float(row["lr_factor"]) for row in progress(first.run_dir)] == [1.0, 1.0, 0.625, 0.25]
    assert rates(trainer.agent) == pytest.approx([0.25 * base])
    # Without a schedule the column is absent and the rates are the config's.
    plain = train(resume_config(tmp_path, epochs=1, out=str(tmp_path / "plain")))
    assert "lr_factor" not in progress(plain.run_dir)[0]


def test_the_flags_set_it_and_a_resume_keeps_it(tmp_path, capsys):
    argv, tiny = train_argv(epochs=2)
    assert main([*argv, "--lr-decay-to", "0", "--show-config"]) == 2
    assert "lr_decay_to must be in (0, 1], got 0.0" in capsys.readouterr().err
    out = tmp_path / "run"
    flags = ["--lr-decay-to", "0.5", "--lr-decay-from", "0.5", "--out", str(out)]
    assert main([*argv, *tiny, *flags]) == 0
    capsys.readouterr()
    recorded = json.loads((out / "config.json").read_text())
    assert (recorded["lr_decay_to"], recorded["lr_decay_from"]) == (0.5, 0.5)
    assert [float(row["lr_factor"]) for row in progress(out)] == [1.0, 0.5]
    resume = ["train", "--resume", str(out), "--epochs", "3", "--quiet"]
    assert main([*resume, "--lr-decay-to", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "--lr-decay-to cannot change when resuming a run" in err
    assert "its learning rates followed lr_decay_to 0.5, the flags ask for 0.1" in err
