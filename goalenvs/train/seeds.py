"""``goalenvs train ENV --seeds 0-4``: one run per seed into one folder (``seed_<S>/``
each), side by side where the cores allow (:func:`side_by_side`) and one after another
otherwise, then the set's curves (:mod:`goalenvs.train.plot`) and each seed's env steps to
the mark."""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import re
import shlex
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path

import gymnasium as gym

from goalenvs.agents.config import TrainConfig
from goalenvs.core import command_name
from goalenvs.train.estimate import duration, estimate
from goalenvs.train.machine import usable_cores
from goalenvs.train.plan import RunPlan
from goalenvs.train.plot import DEFAULT_MARK, plot_seeds, read_runs, seed_table
from goalenvs.train.run_folder import new_run_path
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
    return (
        Path(config.out)
        if config.out
        else new_run_path(config.env_id, config.algo, f"seeds{seeds[0]}-{seeds[-1]}")
    )


def side_by_side(plan: RunPlan, n_seeds: int, cores: int | None = None) -> int:
    """How many seeds train at once: as many runs as ``cores`` (None: this machine's) hold,
    each taking its torch threads and env workers, at most ``n_seeds``; 1 on a GPU."""
    if plan.device != "cpu":
        return 1
    per_run = plan.torch_threads + max(0, plan.env_workers - 1) + max(0, plan.eval_workers - 1)
    cores = usable_cores() if cores is None else cores
    return max(1, min(n_seeds, cores // per_run))


def train_seeds(
    config: TrainConfig,
    env: gym.Env | None,
    seeds: list[int],
    header: str,
    at_once: int | None = None,
) -> int:
    """Trains ``config`` once per seed into one folder, printing ``header`` with the
    estimate, a line per seed, the table and the set's curves. ``at_once`` seeds train
    side by side, each in its own process logging to its ``train.log`` (None:
    :func:`side_by_side`); ``env`` goes to the first seed's trainer, which closes it.
    Returns 0, or 130 when a seed was interrupted."""
    folder = set_folder(config, seeds)
    runs = [dataclasses.replace(config, seed=s, out=str(folder / f"seed_{s}")) for s in seeds]
    trainer = Trainer(runs[0], env=env)
    at_once = side_by_side(trainer.plan, len(seeds)) if at_once is None else at_once
    at_once = max(1, min(at_once, len(seeds)))
    timed = estimate(trainer)
    rounds = -(-len(seeds) // at_once)
    total = "" if timed is None else f"; all their epochs about {duration(timed.seconds * rounds)}"
    how = "one after another" if at_once == 1 else f"{at_once} side by side"
    print(f"{header}; {len(seeds)} seeds {how} into {folder}{total}")
    for line in trainer.plan_lines():
        print(f"goalenvs train: {line}", flush=True)
    if at_once == 1:
        for index, run in enumerate(runs):
            ended = (trainer if index == 0 else Trainer(run)).run()
            if _report(run.seed, _summary(ended)):
                print(f"interrupted at seed {run.seed}; the finished seeds are in {folder}")
                return 130
    else:
        trainer.close()  # each seed trains in a process of its own
        if _train_apart(runs, at_once):
            print(f"interrupted; the finished seeds are in {folder}")
            return 130
    sets = read_runs([folder])
    path = plot_seeds(sets, folder / "curves.png", DEFAULT_MARK)
    print("\n".join(seed_table(sets, DEFAULT_MARK)))
    print(f"curves:        {path}")
    again = f"{command_name()} plot {shlex.quote(str(folder))} --mark {DEFAULT_MARK}"
    print(f"plot again:    {again}")
    return 0


def _summary(result: object) -> dict[str, object]:
    """What the seed lines print of a run's result."""
    names = ("best_success_rate", "epochs", "env_steps", "wall_time", "interrupted")
    return {name: getattr(result, name) for name in names}


def _report(seed: int, summary: dict[str, object]) -> bool:
    """Prints a seed's line; whether it was interrupted."""
    print(
        f"seed {seed}: best success {summary['best_success_rate']:.2f}, {summary['epochs']} "
        f"epochs, {summary['env_steps']} env steps, {summary['wall_time']:.1f} s",
        flush=True,
    )
    return bool(summary["interrupted"])


def _train_apart(runs: list[TrainConfig], at_once: int) -> bool:
    """Trains ``runs`` in ``at_once`` spawned processes at a time, printing each seed's line
    as it ends; whether one was interrupted (each saves its run, to resume)."""
    context = multiprocessing.get_context("spawn")
    interrupted = False
    with ProcessPoolExecutor(max_workers=at_once, mp_context=context) as pool:
        pending: dict[Future[dict[str, object]], int] = {
            pool.submit(_train_one, run): run.seed for run in runs
        }
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    interrupted |= _report(pending.pop(future), future.result())
        except KeyboardInterrupt:
            pool.shutdown(wait=True, cancel_futures=True)
            return True
    return interrupted


def _train_one(config: TrainConfig) -> dict[str, object]:
    """One seed's run in a worker process, its output into its folder's ``train.log``."""
    out = Path(str(config.out))
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "train.log", "w")  # noqa: SIM115 (closed below, after the redirects)
    with log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        return _summary(Trainer(config).run())
