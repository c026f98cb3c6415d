"""Learning results of the goalenvs HER trainers, side by side with stable-baselines3.

Every run evaluates the same way: a batch of deterministic episodes on separately seeded
native vector envs, success = ``info["is_success"]`` at episode end. Wall-clock times
count training only: stable-baselines3's evaluation time is subtracted, ours (a few
milliseconds an epoch) is left in, so the comparison leans towards the peer.

    python benchmarks/train.py                      # the full protocol (hours on 2 cores)
    python benchmarks/train.py --tasks point_reach --seeds 3
    python benchmarks/train.py --tasks bit_flipping_50 --seeds 1 --budget 600
    python benchmarks/train.py --tasks bit_flipping_50 --first-seed 1 --seeds 2 --no-peer
    python benchmarks/train.py --tasks bit_flipping_50 --peer-only --peer-steps 1000000 \
        --budget 960                                # SB3 DQN+HER alone, a longer run
    python benchmarks/train.py --tasks bit_flipping_50 --from-log   # table + plot, all seeds

Tasks:
  point_reach        DDPG+HER on PointReach-v0 vs SB3 DDPG+HER: success, time to 0.95
  strategies         the four goal strategies on PointReach-v0
  strategies_parking the four goal strategies on Parking-v0 (to 0.9, 300k env steps a run)
  bit_flipping_50    DQN+HER on BitFlipping-v0, n_bits=50, random goals (vs SB3 DQN+HER)
  bit_continuous_15  DDPG+HER on BitFlippingContinuous-v0, n_bits=15 (vs SB3 DDPG+HER)
  parking            DDPG+HER on Parking-v0, 15 minutes budget (vs SB3 SAC+HER as
                     highway-env's parking example sets it up)

Results are appended to benchmarks/results/train.jsonl; tables print as markdown and
curves go to docs/images/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

# The first Adam imports torch._dynamo (seconds): do it before any clock starts.
import torch._dynamo
from evidence import machine, machine_words

import goalenvs
from goalenvs.agents.config import STRATEGIES
from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.agents.dqn import DQNConfig
from goalenvs.demo import parking_config, point_reach_config
from goalenvs.train.trainer import train

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "train.jsonl"
IMG = ROOT / "docs" / "images"
EVAL_EPISODES = 20


# --------------------------------------------------------------------------- evaluation


def evaluate(predict, env_id: str, env_kwargs: dict, n: int, seed: int) -> tuple[float, float]:
    """Success rate and mean return of ``n`` deterministic episodes run side by side."""
    envs = gym.make_vec(env_id, num_envs=n, **env_kwargs)
    obs, _ = envs.reset(seed=seed)
    done = np.zeros(n, bool)
    success, returns = np.zeros(n), np.zeros(n)
    while not done.all():
        obs, reward, terminated, truncated, info = envs.step(predict(obs))
        active = ~done
        returns[active] += reward[active]
        ended = active & (terminated | truncated)
        success[ended] = info["is_success"][ended]
        done |= ended
    envs.close()
    return float(success.mean()), float(returns.mean())


# --------------------------------------------------------------------------- runners


def run_goalenvs(
    config, budget: float, target: float, max_steps: int | None = None
) -> dict[str, Any]:
    """Trains with goalenvs until ``budget`` seconds, ``max_steps`` env steps or the config's
    ``stop_success``; one curve."""
    curve: list[tuple[float, int, float]] = []
    start = time.perf_counter()

    def callback(row: dict) -> None:
        curve.append((time.perf_counter() - start, int(row["env_steps"]), row["eval_success"]))
        if curve[-1][0] > budget or (max_steps is not None and curve[-1][1] >= max_steps):
            raise _BudgetSpentError

    out = tempfile.mkdtemp(prefix="goalenvs-bench-")
    config.out, config.verbose, config.n_eval_episodes = out + "/run", False, EVAL_EPISODES
    try:
        train(config, callback=callback)
    except _BudgetSpentError:
        pass
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return summarize(curve, target)


class _BudgetSpentError(Exception):
    pass


def run_sb3(
    algo: str, env_id: str, env_kwargs: dict, seed: int, budget: float, target: float,
    eval_every: int, max_steps: int,
) -> dict[str, Any]:  # fmt: skip
    """SB3 DDPG/DQN/SAC with its HerReplayBuffer, as its HER docs show (SAC: as
    highway-env's parking example sets it up); eval every few steps."""
    from stable_baselines3 import DDPG, DQN, SAC, HerReplayBuffer
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.noise import NormalActionNoise

    env = gym.make(env_id, **env_kwargs)
    her = {"n_sampled_goal": 4, "goal_selection_strategy": "future"}
    curve: list[tuple[float, int, float]] = []
    clock = {"start": time.perf_counter(), "eval": 0.0}
    if algo == "ddpg":
        noise = NormalActionNoise(
            np.zeros(env.action_space.shape), 0.1 * np.ones(env.action_space.shape)
        )
        model = DDPG(
            "MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
            replay_buffer_kwargs=her, action_noise=noise, seed=seed, verbose=0,
        )  # fmt: skip
    elif algo == "sac":
        # highway-env's scripts/parking_her example: buffer 1e6, Adam 1e-3, gamma 0.95,
        # batch 256, three hidden layers of 256.
        model = SAC(
            "MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
            replay_buffer_kwargs=her, buffer_size=1_000_000, learning_rate=1e-3, gamma=0.95,
            batch_size=256, policy_kwargs={"net_arch": [256, 256, 256]}, seed=seed, verbose=0,
        )  # fmt: skip
    else:
        model = DQN(
            "MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
            replay_buffer_kwargs=her, learning_starts=1000, seed=seed, verbose=0,
        )  # fmt: skip

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % eval_every:
                return True
            t = time.perf_counter()
            success, _ = evaluate(
                lambda o: model.predict(o, deterministic=True)[0],
                env_id, env_kwargs, EVAL_EPISODES, 10_000 + seed,
            )  # fmt: skip
            clock["eval"] += time.perf_counter() - t
            elapsed = time.perf_counter() - clock["start"] - clock["eval"]
            curve.append((elapsed, self.num_timesteps, success))
            return elapsed < budget and success < 1.0

    model.learn(total_timesteps=max_steps, callback=Evaluate())
    env.close()
    return summarize(curve, target)


def summarize(curve: list[tuple[float, int, float]], target: float) -> dict[str, Any]:
    """Best success, and the time and steps of the first evaluation at ``target``."""
    hit = next((c for c in curve if c[2] >= target), None)
    return {
        "curve": curve,
        "best_success": max((c[2] for c in curve), default=0.0),
        "final_success": curve[-1][2] if curve else 0.0,
        "time_to_target": hit[0] if hit else None,
        "steps_to_target": hit[1] if hit else None,
        "wall_time": curve[-1][0] if curve else 0.0,
        "env_steps": curve[-1][1] if curve else 0,
    }


# --------------------------------------------------------------------------- tasks


def task_point_reach(seeds: list[int], budget: float, peer: str) -> list[dict]:
    rows = []
    for seed in seeds:
        if peer != "only":
            result = run_goalenvs(point_reach_config(seed=seed, stop_success=1.0), budget, 0.95)
            who = "goalenvs DDPG+HER (tuned)"
            rows.append(record("point_reach", who, seed, result))
        # One seed: at baselines' schedule a run takes minutes.
        if seed == seeds[0] and peer != "only":
            config = DDPGConfig(env_id="goalenvs/PointReach-v0", seed=seed, stop_success=1.0)
            result = run_goalenvs(config, budget, 0.95)
            who = "goalenvs DDPG+HER (baselines schedule)"
            rows.append(record("point_reach", who, seed, result))
        if peer != "without":
            result = run_sb3(
                "ddpg", "goalenvs/PointReach-v0", {}, seed, budget, 0.95, eval_every=500,
                max_steps=PEER_STEPS.get("point_reach", 20_000),
            )  # fmt: skip
            rows.append(record("point_reach", "SB3 DDPG+HER", seed, result))
    return rows


def task_strategies(seeds: list[int], budget: float, peer: str) -> list[dict]:
    rows: list[dict] = []
    if peer == "only":
        return rows
    for strategy in STRATEGIES:
        for seed in seeds:
            config = point_reach_config(
                seed=seed, goal_selection_strategy=strategy, stop_success=1.0
            )
            result = run_goalenvs(config, budget, 0.95)
            task = "strategies goalenvs/PointReach-v0"
            rows.append(record(task, strategy, seed, result))
    return rows


def task_strategies_parking(seeds: list[int], budget: float, peer: str) -> list[dict]:
    """Each strategy with ``parking_config()`` until 0.9 or 300k env steps: steps to 0.9
    are the measure, so runs side by side on a shared machine stay comparable."""
    rows: list[dict] = []
    if peer == "only" or not _parking_available():
        return rows
    for strategy in STRATEGIES:
        for seed in seeds:
            config = parking_config(seed=seed, goal_selection_strategy=strategy, stop_success=0.9)
            result = run_goalenvs(config, budget, 0.9, max_steps=300_000)
            task = "strategies goalenvs/Parking-v0"
            rows.append(record(task, strategy, seed, result))
    return rows


def task_bit_flipping_50(seeds: list[int], budget: float, peer: str) -> list[dict]:
    rows = []
    kwargs = {"n_bits": 50}
    for seed in seeds:
        if peer != "only":
            config = DQNConfig(
                env_id="goalenvs/BitFlipping-v0",
                env_kwargs=kwargs,
                seed=seed,
                epochs=1000,
                stop_success=1.0,
            )
            result = run_goalenvs(config, budget, 0.9)
            who = "goalenvs DQN+HER"
            rows.append(record("bit_flipping_50", who, seed, result))
        if peer != "without":
            max_steps = PEER_STEPS.get("bit_flipping_50", 120_000)
            result = run_sb3(
                "dqn", "goalenvs/BitFlipping-v0", kwargs, seed, budget, 0.9, 5000, max_steps
            )
            rows.append(record("bit_flipping_50", "SB3 DQN+HER", seed, result))
    return rows


def task_bit_continuous_15(seeds: list[int], budget: float, peer: str) -> list[dict]:
    rows: list[dict] = []
    kwargs = {"n_bits": 15}
    for seed in seeds:
        if peer != "only":
            config = DDPGConfig(
                env_id="goalenvs/BitFlippingContinuous-v0", env_kwargs=kwargs, seed=seed,
                epochs=1000, num_envs=8, rollout_steps=5, n_cycles=20, n_batches=5,
                polyak=0.8, stop_success=1.0,
            )  # fmt: skip
            result = run_goalenvs(config, budget, 0.9)
            who = "goalenvs DDPG+HER"
            rows.append(record("bit_continuous_15", who, seed, result))
        if peer != "without":
            result = run_sb3(
                "ddpg", "goalenvs/BitFlippingContinuous-v0", kwargs, seed, budget, 0.9,
                eval_every=1000, max_steps=PEER_STEPS.get("bit_continuous_15", 200_000),
            )  # fmt: skip
            who = "SB3 DDPG+HER"
            rows.append(record("bit_continuous_15", who, seed, result))
    return rows


def task_parking(seeds: list[int], budget: float, peer: str) -> list[dict]:
    rows: list[dict] = []
    if not _parking_available():
        return rows
    for seed in seeds:
        if peer != "only":
            result = run_goalenvs(parking_config(seed=seed), budget, 0.9)
            rows.append(record("parking", "goalenvs DDPG+HER", seed, result))
        if peer != "without":
            result = run_sb3(
                "sac", "goalenvs/Parking-v0", {}, seed, budget, 0.9, eval_every=2000,
                max_steps=PEER_STEPS.get("parking", 200_000),
            )  # fmt: skip
            who = "SB3 SAC+HER (highway-env's example)"
            rows.append(record("parking", who, seed, result))
    return rows


def _parking_available() -> bool:
    try:
        import goalenvs.envs.parking  # noqa: F401
    except ImportError:
        print("parking: goalenvs/Parking-v0 is not available in this checkout; skipped")
        return False
    return True


# Env steps a stable-baselines3 run may take, per task; --peer-steps overrides.
PEER_STEPS: dict[str, int] = {}

TASKS = {
    "point_reach": (task_point_reach, 300.0),
    "strategies": (task_strategies, 120.0),
    "strategies_parking": (task_strategies_parking, 900.0),
    "bit_flipping_50": (task_bit_flipping_50, 1800.0),
    "bit_continuous_15": (task_bit_continuous_15, 900.0),
    "parking": (task_parking, 900.0),
}


# --------------------------------------------------------------------------- report


def record(task: str, who: str, seed: int, result: dict[str, Any]) -> dict[str, Any]:
    """One run's row: printed and appended to ``RESULTS`` at once (a killed run loses
    nothing), and returned."""
    row = {"task": task, "who": who, "seed": seed, **result}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(json.dumps({**row, "date": time.strftime("%Y-%m-%d %H:%M")}) + "\n")
    t = row["time_to_target"]
    reached = "-" if t is None else f"{t:.1f} s / {row['steps_to_target']} steps"
    print(
        f"  {row['task']:<18} {row['who']:<40} seed {row['seed']}: best {row['best_success']:.2f}"
        f"  to target {reached}"
        f"  ({row['wall_time']:.0f} s, {row['env_steps']} steps)",
        flush=True,
    )
    return row


def table(rows: list[dict]) -> str:
    """Markdown table: mean and spread over seeds, per task and trainer."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["task"], row["who"]), []).append(row)
    lines = [
        "| task | trainer | seeds | best success (mean ± std) | reached target | "
        "time to target, s (mean ± std) | steps to target (mean ± std) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (task, who), runs in groups.items():
        best = np.array([r["best_success"] for r in runs])
        times = np.array([r["time_to_target"] for r in runs if r["time_to_target"] is not None])
        steps = [r["steps_to_target"] for r in runs if r["steps_to_target"] is not None]
        hit = f"{len(times)}/{len(runs)}"
        time_text = f"{times.mean():.1f} ± {times.std():.1f}" if len(times) else "-"
        step_text = f"{np.mean(steps):.0f} ± {np.std(steps):.0f}" if steps else "-"
        lines.append(
            f"| {task} | {who} | {len(runs)} | {best.mean():.2f} ± {best.std():.2f} | {hit} | "
            f"{time_text} | {step_text} |"
        )
    return "\n".join(lines)


def ratio_table(rows: list[dict]) -> str:
    """Time to 0.95 on PointReach: goalenvs over SB3, per seed where both got there."""
    by_seed: dict[int, dict[str, float]] = {}
    for row in rows:
        if row["task"] == "point_reach" and row["time_to_target"] is not None:
            by_seed.setdefault(row["seed"], {})[row["who"]] = row["time_to_target"]
    lines = ["| seed | goalenvs tuned, s | SB3, s | ratio (target <= 0.33) |", "|---|---|---|---|"]
    for seed, times in sorted(by_seed.items()):
        ours, peer = times.get("goalenvs DDPG+HER (tuned)"), times.get("SB3 DDPG+HER")
        if ours is not None and peer is not None:
            lines.append(f"| {seed} | {ours:.1f} | {peer:.1f} | {ours / peer:.2f} |")
    return "\n".join(lines)


def plot(rows: list[dict], task: str, path: Path) -> None:
    """Eval success against wall-clock seconds, one line per run."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(9, 3.4), dpi=90)
    FigureCanvasAgg(fig)
    ax_time, ax_steps = fig.subplots(1, 2)
    colors: dict[str, str] = {}
    labeled: set[str] = set()
    for row in rows:
        if row["task"] != task or not row["curve"]:
            continue
        color = colors.setdefault(row["who"], f"C{len(colors)}")
        t, steps, success = zip(*row["curve"], strict=True)
        label = None if row["who"] in labeled else row["who"]
        labeled.add(row["who"])
        ax_time.plot(t, success, color=color, alpha=0.8, label=label)
        ax_steps.plot(steps, success, color=color, alpha=0.8)
    ax_time.set(
        xlabel="wall-clock seconds (training)", ylabel="eval success rate", ylim=(-0.03, 1.03)
    )
    ax_steps.set(xlabel="env steps", ylim=(-0.03, 1.03))
    ax_steps.xaxis.set_major_formatter(
        FuncFormatter(lambda x, _: f"{x / 1e6:g}M" if x >= 1e6 else f"{x / 1e3:g}k")
    )
    ax_time.legend(loc="lower right", fontsize=8)
    for ax in (ax_time, ax_steps):
        ax.grid(alpha=0.3)
    fig.suptitle(task)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.16, top=0.88, wspace=0.2)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def plot_path(task: str) -> Path:
    slug = "".join(c if c.isalnum() else "_" for c in task.replace("goalenvs/", ""))
    return IMG / f"train_{slug}.png"


def _task_name(logged: str) -> str:
    """The --tasks name of a logged row's task ("strategies goalenvs/Parking-v0", ...)."""
    if logged.startswith("strategies "):
        return "strategies_parking" if "Parking" in logged else "strategies"
    return logged


def report_from_log(tasks: list[str]) -> int:
    """Table and plots from ``RESULTS``: per task, trainer and seed, the latest row wins."""
    latest: dict[tuple[str, str, int], dict] = {}
    with open(RESULTS) as f:
        for line in f:
            row = json.loads(line)
            if _task_name(row["task"]) in tasks:
                latest[(row["task"], row["who"], row["seed"])] = row
    if not latest:
        print(f"no rows for tasks {tasks} in {RESULTS}", file=sys.stderr)
        return 1
    rows = [latest[key] for key in sorted(latest)]
    for task in sorted({r["task"] for r in rows}):
        plot(rows, task, plot_path(task))
    print(table(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--seeds", type=int, default=3, help="seeds per task (0, 1, ...)")
    parser.add_argument(
        "--first-seed", type=int, default=0, help="first seed, to add seeds to earlier runs"
    )
    parser.add_argument("--budget", type=float, help="seconds per run (default: per task)")
    peers = parser.add_mutually_exclusive_group()
    peers.add_argument("--no-peer", action="store_true", help="skip stable-baselines3")
    peers.add_argument("--peer-only", action="store_true", help="run stable-baselines3 only")
    parser.add_argument(
        "--peer-steps",
        type=int,
        help="env steps per stable-baselines3 run (default: 20,000 PointReach, 120,000 "
        "BitFlipping-50, 200,000 BitFlippingContinuous-15 and Parking; the budget applies too)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both trainers")
    parser.add_argument(
        "--from-log",
        action="store_true",
        help="train nothing: redraw the tables and plots of --tasks from the latest logged run "
        "of each trainer and seed, so seeds run in separate invocations share one figure",
    )
    args = parser.parse_args(argv)
    if args.from_log:
        return report_from_log(args.tasks)
    if args.peer_steps is not None:
        PEER_STEPS.update(dict.fromkeys(TASKS, args.peer_steps))
    torch.set_num_threads(args.threads)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    print(f"goalenvs {goalenvs.__version__}, {machine_words(machine())}, "
          f"{args.threads} torch thread(s)")  # fmt: skip
    rows: list[dict] = []
    for name in args.tasks:
        fn, default_budget = TASKS[name]
        print(f"== {name}", flush=True)
        task_rows = fn(
            list(range(args.first_seed, args.first_seed + args.seeds)),
            args.budget or default_budget,
            "without" if args.no_peer else "only" if args.peer_only else "with",
        )
        rows += task_rows
        for task in sorted({r["task"] for r in task_rows}):
            plot(task_rows, task, plot_path(task))
    print()
    print(table(rows))
    if any(r["task"] == "point_reach" for r in rows):
        print()
        print(ratio_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
