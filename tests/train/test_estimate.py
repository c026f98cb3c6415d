"""The run's first line estimates its time on this machine from parts timed at start."""

from __future__ import annotations

import dataclasses

import pytest

from goalenvs.agents.dqn import DQNConfig
from goalenvs.train.estimate import duration, estimate
from goalenvs.train.presets import resolve_config
from goalenvs.train.trainer import Trainer


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(0.2, "1 s"), (42.4, "42 s"), (89, "89 s"), (150, "2 minutes"), (3 * 3600, "3.0 hours")],
)
def test_duration_reads_as_a_person_says_it(seconds, words):
    assert duration(seconds) == words


@pytest.mark.parametrize("algo", ["ddpg", "dqn"])
def test_the_estimate_adds_up_the_schedule_of_timed_parts(algo, tmp_path):
    if algo == "dqn":
        config = DQNConfig(env_id="goalenvs/BitFlipping-v0", env_kwargs={"n_bits": 4})
    else:
        config = resolve_config("goalenvs/PointReach-v0", device="cpu")
    config = dataclasses.replace(
        config, epochs=3, n_cycles=4, n_batches=2, device="cpu", verbose=False, out=str(tmp_path)
    )
    trainer = Trainer(config)
    try:
        timed = estimate(trainer)
    finally:
        trainer.close()
    assert timed is not None
    assert timed.step_seconds > 0 and timed.act_seconds > 0 and timed.update_seconds > 0
    updates = config.epochs * config.n_cycles * config.n_batches
    steps = config.epochs * config.n_cycles * trainer.plan.rollout_steps
    least = updates * timed.update_seconds + steps * (timed.step_seconds + timed.act_seconds)
    assert least <= timed.seconds <= 10 * least
    assert timed.line().startswith(f"all epochs about {duration(timed.seconds)} on this machine")
