"""``goalenvs train ENV --seeds 0-4``: one run per seed, one after another, into one folder
(``seed_<S>/`` each), then the set's curves (:mod:`goalenvs.train.plot`) and each seed's
env steps to the mark."""

from __future__ import annotations

import dataclasses
import re
import shlex
import time
from pathlib import Path

import gymnasium as gym

from goalenvs.agents.config import TrainConfig
from goalenvs.core import command_name
from goalenvs.train.estimate import duration, estimate
from goalenvs.train.plot import DEFAULT_MARK, plot_seeds, read_runs, seed_table
from goalenvs.train.trainer import Trainer

_RANGE = re.compile(r"(\d+)-(\d+)")


def parse_seeds(text: str) -> list[int]:
    """``0-4`` (a range, both ends in), ``0,3,7`` or ``5`` as a list of seeds; anything
    else is a ValueError naming ``--seeds``, the value and what is expected."""
    expected = "expected a range FIRST-LAST (0-4), a list (0,3,7) or one seed, each >= 0"
    words = [word.strip() for word in text.split(",")]
    seeds: list[int] = []
    for word in words:
        found = _RANGE.fullmatch(word)
        if found:
            first, last = int(found.group(1)), int(found.group(2))
            if first > last:
                raise ValueError(f"--seeds {text!r}: {first} > {last}; {expected}")
            seeds.extend(range(first, last + 1))
        elif word.isdigit():
            seeds.append(int(word))
        else:
            raise ValueError(f"--seeds {text!r}: {expected}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {text!r}: a seed given twice; {expected}")
    return seeds


def set_folder(config: TrainConfig, seeds: list[int]) -> Path:
    """The seed set's folder: ``--out``, else a new one under ``runs/``."""
    if config.out:
        return Path(config.out)
    name = config.env_id.replace("/", "_").replace(":", "_")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(f"runs/{name}-{config.algo}-seeds{seeds[0]}-{seeds[-1]}-{stamp}")


def train_seeds(config: TrainConfig, env: gym.Env | None, seeds: list[int], header: str) -> int:
    """Trains ``config`` once per seed into one folder (the first seed's trainer takes
    ``env``, one env of the run already built, and closes it); prints ``header`` (the
    run's first line) with the estimate for all seeds, one line per seed, the table and
    where the set's curves are. Returns 0, or 130 when a seed was interrupted."""
    folder = set_folder(config, seeds)
    for index, seed in enumerate(seeds):
        seeded = dataclasses.replace(config, seed=seed, out=str(folder / f"seed_{seed}"))
        trainer = Trainer(seeded, env=env if index == 0 else None)
        if index == 0:
            timed = estimate(trainer)
            total = ""
            if timed is not None:
                total = f"; all their epochs about {duration(timed.seconds * len(seeds))}"
            print(f"{header}; {len(seeds)} seeds one after another into {folder}{total}")
            for line in trainer.plan_lines():
                print(f"goalenvs train: {line}", flush=True)
        result = trainer.run()
        print(
            f"seed {seed}: best success {result.best_success_rate:.2f}, {result.epochs} "
            f"epochs, {result.env_steps} env steps, {result.wall_time:.1f} s",
            flush=True,
        )
        if result.interrupted:
            print(f"interrupted at seed {seed}; the finished seeds are in {folder}")
            return 130
    runs = read_runs([folder])
    path = plot_seeds(runs, folder / "curves.png", DEFAULT_MARK)
    print("\n".join(seed_table(runs, DEFAULT_MARK)))
    print(f"curves:        {path}")
    again = f"{command_name()} plot {shlex.quote(str(folder))} --mark {DEFAULT_MARK}"
    print(f"plot again:    {again}")
    return 0
