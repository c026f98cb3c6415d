"""goalenvs' default preset against stable-baselines3 with rl-baselines3-zoo's *tuned*
hyperparameters (TQC+HER from sb3-contrib), same machine, same wall-clock budget.

Tasks (``--task``):
  fetch_reach  gymnasium_robotics:FetchReach-v4, 150 s a run, target 0.95 eval success;
               the zoo's ``FetchReach-v1`` entry (it has no v4 entry; v4 is the same task
               on the maintained mujoco bindings).
  parking      goalenvs/Parking-v0 (our own parking env), 400 s a run, target 0.9; the
               zoo's ``parking-v0`` entry (made for highway-env's parking-v0, whose step is
               too slow for a fair row in one session: docs/baselines.md gives its steps
               per CPU second from benchmarks/results/parking_vs_highway.log).

Trainers (``--who``):
  ours  ``goalenvs train ENV_ID`` as a user gets it with no flag: the env's default preset
        through the Python API (``resolve_config``), except that it does not stop at its
        preset's ``stop_success`` (it trains the whole budget, as the peer does).
  sb3   sb3-contrib TQC + stable-baselines3 HerReplayBuffer with the zoo's entry, the
        numbers in ``ZOO`` below, translated as ``zoo_model_kwargs`` says.

Both evaluate the same way: the same 20 fixed episodes (seeds 10000-10019, one after
another, deterministic policy), success = ``info["is_success"]`` at the episode's end.
Evaluation time is taken out of both clocks; both clocks start before the trainer (and its
envs) are built, after the one-off import of ``torch._dynamo``. Ours evaluates once an
epoch (800 env steps on FetchReach, 6,000 on Parking) and stops at the first epoch's end
past the budget (an overshoot of at most one epoch); SB3 evaluates every ``eval_every``
env steps and once more where the budget runs out. One torch thread each, one training at
a time.

    python benchmarks/tuned_sb3.py all --seeds 0 1 2       # every task, ours then sb3 a seed
    python benchmarks/tuned_sb3.py all --tasks parking --seeds 0 1
    python benchmarks/tuned_sb3.py run --task fetch_reach --who sb3 --seed 0
    python benchmarks/tuned_sb3.py table [--plot]           # tables (and PNGs) from the logs

Each run writes its curve to ``benchmarks/results/tuned_sb3/TASK_WHO_sSEED.csv``
(seconds, env_steps, success) and appends one line (budget, load average, date) to
``benchmarks/results/tuned_sb3/runs.jsonl`` (see :func:`run`).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
from curves import TARGETS, curve_cells, first_at, load_cell, load_runs, plot_runs  # noqa: E402
from evidence import append_jsonl  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "tuned_sb3"
IMAGES = ROOT / "docs" / "images"
EVAL_EPISODES = 20
EVAL_SEED = 10_000
WHO = ("ours", "sb3")

# rl-baselines3-zoo, hyperparams/tqc.yml at commit 22e3ff2450fd92033f7f032915e1f64894a09584
# (github.com/DLR-RM/rl-baselines3-zoo, 2026-04-23): the two entries as the zoo resolves
# them, numbers only. `parking-v0` inherits the file's `her-defaults` anchor (the
# FetchPush-v1 entry) and overrides what it sets; `net_arch` and `n_critics` come from there.
ZOO_FILE = "hyperparams/tqc.yml"
ZOO_COMMIT = "22e3ff2450fd92033f7f032915e1f64894a09584"
ZOO: dict[str, dict[str, Any]] = {
    "FetchReach-v1": {
        "n_timesteps": 20_000,
        "policy": "MultiInputPolicy",
        "buffer_size": 1_000_000,
        "ent_coef": "auto",
        "batch_size": 256,
        "gamma": 0.95,
        "learning_rate": 0.001,
        "learning_starts": 1000,
        "normalize": True,
        "replay_buffer_class": "HerReplayBuffer",
        "replay_buffer_kwargs": {"goal_selection_strategy": "future", "n_sampled_goal": 4},
        "policy_kwargs": {"net_arch": [64, 64], "n_critics": 1},
    },
    "parking-v0": {
        "n_timesteps": 100_000,
        "policy": "MultiInputPolicy",
        "buffer_size": 1_000_000,
        "batch_size": 512,
        "gamma": 0.98,
        "learning_rate": 0.0015,
        "tau": 0.005,
        "replay_buffer_class": "HerReplayBuffer",
        "replay_buffer_kwargs": {"goal_selection_strategy": "episode", "n_sampled_goal": 4},
        "policy_kwargs": {"net_arch": [512, 512, 512], "n_critics": 2},
    },
}


@dataclass(frozen=True)
class Task:
    """One row of the comparison: the env, the zoo entry, the budget and the target."""

    env_id: str
    zoo_entry: str
    budget: float  # training seconds a run
    target: float  # eval success that counts as solved
    eval_every: int  # SB3's env steps between evaluations (ours: once an epoch)
    title: str


TASKS = {
    "fetch_reach": Task(
        "gymnasium_robotics:FetchReach-v4", "FetchReach-v1", 150.0, 0.95, 1_000, "FetchReach-v4"
    ),
    "parking": Task("goalenvs/Parking-v0", "parking-v0", 400.0, 0.9, 1_000, "goalenvs Parking-v0"),
}


def zoo_model_kwargs(entry: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """TQC's keyword arguments for a zoo entry, and whether the zoo normalizes the env.

    What the zoo's experiment manager does with the keys that are not TQC arguments:
    ``n_timesteps`` is its training length (here the wall-clock budget decides, and the
    tables say whether a run got that far); ``normalize: True`` wraps the training env in
    ``VecNormalize(gamma=<the entry's gamma>)`` (observations and rewards, running
    statistics; the HER buffer stores raw values and normalizes at sample time), and the
    evaluation env uses the same observation statistics without reward normalization;
    ``replay_buffer_class`` names stable-baselines3's ``HerReplayBuffer``. ``policy`` is
    TQC's first argument. Neither entry sets an env wrapper or ``n_envs`` (one env).
    """
    from stable_baselines3 import HerReplayBuffer

    kwargs = {k: v for k, v in entry.items() if k not in ("n_timesteps", "normalize", "policy")}
    if kwargs.get("replay_buffer_class") != "HerReplayBuffer":
        raise ValueError(
            f"replay_buffer_class={kwargs.get('replay_buffer_class')!r}: expected "
            "'HerReplayBuffer' (the only buffer the zoo's goal-env entries name)"
        )
    kwargs["replay_buffer_class"] = HerReplayBuffer
    kwargs["replay_buffer_kwargs"] = dict(kwargs["replay_buffer_kwargs"])
    kwargs["policy_kwargs"] = dict(kwargs["policy_kwargs"])
    return kwargs, bool(entry.get("normalize", False))


def build_tqc(task: Task, seed: int, **overrides: Any) -> tuple[Any, Any]:
    """The zoo's TQC+HER model for ``task`` on the CPU, and its training VecEnv.

    ``overrides`` replace TQC arguments of the zoo's entry (the tests shrink
    ``buffer_size``: a million-transition buffer takes seconds to allocate).
    """
    import gymnasium as gym
    from sb3_contrib import TQC
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    import goalenvs  # noqa: F401  (registers goalenvs/Parking-v0)

    entry = ZOO[task.zoo_entry]
    kwargs, normalize = zoo_model_kwargs(entry)
    kwargs.update(overrides)
    venv = DummyVecEnv([lambda: Monitor(gym.make(task.env_id))])
    if normalize:
        venv = VecNormalize(venv, gamma=entry["gamma"])
    model = TQC(entry["policy"], venv, seed=seed, device="cpu", verbose=0, **kwargs)
    return model, venv


# --------------------------------------------------------------------------- evaluation


def evaluate(act: Callable[[dict], np.ndarray], env_id: str) -> float:
    """Success rate of ``act`` (a batch of one observation -> a batch of one action) on
    the fixed evaluation episodes of ``env_id``."""
    import gymnasium as gym

    import goalenvs  # noqa: F401

    env = gym.make(env_id)
    successes = 0
    for episode in range(EVAL_EPISODES):
        obs, _ = env.reset(seed=EVAL_SEED + episode)
        while True:
            action = act({k: np.asarray(v)[None] for k, v in obs.items()})[0]
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        successes += bool(info["is_success"])
    env.close()
    return successes / EVAL_EPISODES


class _BudgetSpentError(Exception):
    pass


def run_ours(task: Task, seed: int, budget: float) -> tuple[list[tuple[float, int, float]], str]:
    """goalenvs with the env's default preset: one (seconds, env steps, success) an epoch,
    and the precision its updates ran in (the plan's)."""
    from goalenvs.train import trainer as trainer_module
    from goalenvs.train.presets import resolve_config

    clock = {"start": time.perf_counter(), "eval": 0.0}
    config = resolve_config(task.env_id, seed=seed, verbose=False, stop_success=None)
    out = tempfile.mkdtemp(prefix="tuned-sb3-")
    config.out = out
    curve: list[tuple[float, int, float]] = []

    def fixed_evaluate(self: Any) -> tuple[float, float, float]:
        begin = time.perf_counter()
        success = evaluate(lambda obs: self.agent.act(obs, False), task.env_id)
        clock["eval"] += time.perf_counter() - begin
        return success, float("nan"), float("nan")

    def callback(row: dict) -> None:
        elapsed = time.perf_counter() - clock["start"] - clock["eval"]
        curve.append((elapsed, int(row["env_steps"]), float(row["eval_success"])))
        print(f"  ours {task.env_id} seed {seed}: {curve[-1]}", flush=True)
        if elapsed > budget:
            raise _BudgetSpentError

    trainer_module.Trainer.evaluate = fixed_evaluate
    try:
        trainer = trainer_module.Trainer(config, callback)
        with contextlib.suppress(_BudgetSpentError):
            trainer.run()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return curve, trainer.plan.precision


def run_sb3(task: Task, seed: int, budget: float) -> tuple[list[tuple[float, int, float]], str]:
    """The zoo's TQC+HER: a point every ``task.eval_every`` env steps and at the budget,
    and its precision (SB3 trains in float32)."""
    from stable_baselines3.common.callbacks import BaseCallback

    clock = {"start": time.perf_counter(), "eval": 0.0}
    model, venv = build_tqc(task, seed)
    normalize = getattr(venv, "normalize_obs", None)
    curve: list[tuple[float, int, float]] = []

    def act(obs: dict) -> np.ndarray:
        return model.predict(obs if normalize is None else normalize(obs), deterministic=True)[0]

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            elapsed = time.perf_counter() - clock["start"] - clock["eval"]
            spent = elapsed >= budget
            if self.num_timesteps % task.eval_every and not spent:
                return True
            begin = time.perf_counter()
            success = evaluate(act, task.env_id)
            clock["eval"] += time.perf_counter() - begin
            curve.append((elapsed, self.num_timesteps, success))
            print(f"  sb3 {task.env_id} seed {seed}: {curve[-1]}", flush=True)
            return not spent

    model.learn(total_timesteps=10_000_000, callback=Evaluate())
    venv.close()
    return curve, "fp32"


# --------------------------------------------------------------------------- logs


def csv_path(task: str, who: str, seed: int) -> Path:
    """Where one run's curve is kept."""
    return RESULTS / f"{task}_{who}_s{seed}.csv"


def write_curve(path: Path, curve: Sequence[Sequence[float]]) -> None:
    """A curve as CSV: seconds, env_steps, success."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["seconds", "env_steps", "success"])
        for seconds, steps, success in curve:
            writer.writerow([f"{seconds:.2f}", int(steps), f"{success:.4f}"])


def read_curve(path: Path) -> list[tuple[float, int, float]]:
    """The (seconds, env steps, success) points of a curve CSV."""
    with open(path, newline="") as f:
        return [
            (float(r["seconds"]), int(r["env_steps"]), float(r["success"]))
            for r in csv.DictReader(f)
        ]


def run(task_name: str, who: str, seed: int, budget: float | None = None) -> dict[str, Any]:
    """One run: its curve CSV written and its record appended to runs.jsonl when it ends:
    :func:`evidence.run_info` (commit, machine, load at the start), the precision trained
    in, the load sampled every 15 s through the run, and the run's figures within the
    budget (env steps and seconds to the task's target, best)."""
    import torch
    import torch._dynamo  # (the first Adam imports it: not on the clock)
    from evidence import load, run_info
    from fetch import LoadLog

    torch.set_num_threads(1)
    task = TASKS[task_name]
    budget = task.budget if budget is None else budget
    info = run_info()
    sampled = LoadLog(every=15.0)
    curve, precision = (run_sb3 if who == "sb3" else run_ours)(task, seed, budget)
    samples = sampled.stop()
    path = csv_path(task_name, who, seed)
    write_curve(path, curve)
    counted = [point for point in curve if point[0] <= budget + BUDGET_SLACK]
    hit = first_at(counted, task.target)
    row = {
        "task": task_name,
        "who": who,
        "trainer": NAMES[who],
        "seed": seed,
        "budget": budget,
        "csv": path.name,
        "target": task.target,
        "seconds_to_target": None if hit is None else round(hit[0], 1),
        "steps_to_target": None if hit is None else hit[1],
        "best": max(point[2] for point in counted),
        "env_steps": counted[-1][1],
        "precision": precision,
        **info,
        "load_after": load(),
        "load_samples": samples,
        "load_span": f"{samples['min']:.1f}-{samples['max']:.1f}",
    }
    append_jsonl(RESULTS / "runs.jsonl", row)
    return row


# An evaluation counts when it comes at most this many training seconds past the budget.
# SB3's last one comes one env step past it (under 0.3 s here); ours comes at the end of
# the epoch that crossed it, up to an epoch (~20 s on Parking) later: those points stay
# in the CSV but are left out of the tables and pictures, so both get the same seconds.
BUDGET_SLACK = 1.0


def logged_runs(results: Path = RESULTS) -> list[dict[str, Any]]:
    """Every logged run, the last one of each (task, trainer, seed): ``curve`` holds its
    evaluations within the budget (see BUDGET_SLACK), ``past_budget`` the later ones."""
    latest: dict[tuple[str, str, int], dict[str, Any]] = {}
    for row in load_runs(results / "runs.jsonl") or []:
        latest[(row["task"], row["who"], row["seed"])] = row
    runs = []
    for row in latest.values():
        curve = read_curve(results / row["csv"])
        limit = row["budget"] + BUDGET_SLACK
        runs.append(
            {
                **row,
                "curve": [point for point in curve if point[0] <= limit],
                "past_budget": [point for point in curve if point[0] > limit],
            }
        )
    return runs


# --------------------------------------------------------------------------- tables


NAMES = {
    "ours": "goalenvs DDPG+HER (default preset)",
    "sb3": "SB3 TQC+HER (zoo's tuned config)",
}


def summary(runs: list[dict[str, Any]], target: float) -> dict[str, Any]:
    """Over the seeds of one trainer: best success (mean, std with ddof 0), the seeds that
    reached ``target``, the median seconds and env steps to it over those seeds, and the
    fewest and most env steps a run took in its budget."""
    best = np.array([max(point[2] for point in run["curve"]) for run in runs])
    hits = [hit for run in runs if (hit := first_at(run["curve"], target)) is not None]
    steps = [run["curve"][-1][1] for run in runs]
    return {
        "seeds": len(runs),
        "best_mean": float(best.mean()),
        "best_std": float(best.std()),
        "reached": len(hits),
        "seconds_to_target": float(np.median([h[0] for h in hits])) if hits else None,
        "steps_to_target": float(np.median([h[1] for h in hits])) if hits else None,
        "steps_in_budget": (min(steps), max(steps)),
    }


def table(rows: list[dict[str, Any]], task_name: str) -> str:
    """The task's markdown table: one line per trainer, then one line per run."""
    target = TASKS[task_name].target
    rows = sorted(
        (r for r in rows if r["task"] == task_name and r["curve"]),
        key=lambda r: (WHO.index(r["who"]), r["seed"]),
    )
    lines = [
        f"| trainer | seeds | best success (mean ± std) | reached {target} | "
        f"seconds to {target} (median) | env steps to {target} (median) | env steps in budget |",
        "|---|---|---|---|---|---|---|",
    ]
    for who in WHO:
        runs = [r for r in rows if r["who"] == who]
        if not runs:
            continue
        s = summary(runs, target)
        low, high = s["steps_in_budget"]
        seconds = "-" if s["seconds_to_target"] is None else f"{s['seconds_to_target']:.0f}"
        steps = "-" if s["steps_to_target"] is None else f"{s['steps_to_target']:,.0f}"
        lines.append(
            f"| {NAMES[who]} | {s['seeds']} | {s['best_mean']:.2f} ± {s['best_std']:.2f} | "
            f"{s['reached']}/{s['seeds']} | {seconds} | {steps} | {low:,}-{high:,} |"
        )
    # The per-run table: curves.py's cells (to 0.5 and to 0.9), plus the task's target
    # when it is another.
    extra = target not in TARGETS
    to = "".join(f" to {t}: steps / s |" for t in (*TARGETS, *([target] if extra else [])))
    lines += [
        "",
        f"| trainer | seed | budget, s | env steps |{to} best | final success | load avg |",
        "|---|---|---|---|" + "---|" * (len(TARGETS) + extra) + "---|---|---|",
    ]
    for row in rows:
        cells = curve_cells(row)
        if extra:
            hit = first_at(row["curve"], target)
            cells.insert(2 + len(TARGETS), "-" if hit is None else f"{hit[1]:,} / {hit[0]:.0f}")
        span = row.get("load_span") or load_cell(row)  # older rows: [start, end]
        cells = [NAMES[row["who"]], str(row["seed"]), *cells, span]
        lines.append("| " + " | ".join(cells) + " |")
    late = [
        f"{row['who']} seed {row['seed']}: {point[2]:.2f} at {point[0]:.0f} s"
        for row in rows
        for point in row.get("past_budget", [])
    ]
    if late:
        lines += ["", "Evaluations past the budget, not counted: " + "; ".join(late) + "."]
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], task_name: str) -> Path:
    """Eval success against training seconds and env steps, one line per run."""
    path = IMAGES / f"tuned_sb3_{task_name}.png"
    plot_runs(
        [r for r in rows if r["task"] == task_name],
        path,
        group=lambda row: (WHO.index(row["who"]), NAMES[row["who"]]),
        title=f"{TASKS[task_name].title}: goalenvs preset vs zoo-tuned TQC+HER, same budget",
        style="-o",
        legend_loc="center right",
    )
    return path


def run_all(tasks: list[str], seeds: list[int], who: list[str]) -> None:
    """Every run, one process at a time: a seed's ours then its sb3, seed after seed."""
    for task in tasks:
        for seed in seeds:
            for w in who:
                cmd = [sys.executable, __file__, "run", "--task", task, "--who", w]
                subprocess.run([*cmd, "--seed", str(seed)], check=True)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run``, ``all`` or ``table``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run", help="one trainer, one task, one seed")
    one.add_argument("--task", choices=list(TASKS), required=True)
    one.add_argument("--who", choices=WHO, required=True)
    one.add_argument("--seed", type=int, default=0)
    one.add_argument("--budget", type=float, help="training seconds (default: the task's)")
    every = sub.add_parser("all", help="tasks x seeds x trainers, one run at a time")
    every.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    every.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    every.add_argument("--who", nargs="+", choices=WHO, default=list(WHO))
    report = sub.add_parser("table", help="the tables of every logged run")
    report.add_argument("--plot", action="store_true", help="also write the PNGs")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.task, args.who, args.seed, args.budget)
        return 0
    if args.command == "all":
        run_all(args.tasks, args.seeds, args.who)
    rows = logged_runs()
    for task_name in TASKS:
        if any(r["task"] == task_name for r in rows):
            print(f"\n{TASKS[task_name].title}, budget {TASKS[task_name].budget:.0f} s\n")
            print(table(rows, task_name))
            if args.command == "table" and args.plot:
                print(plot(rows, task_name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
