"""highway-env's own ``parking-v0`` (walls on, as installed): goalenvs DDPG+HER beside SB3
SAC+HER set up as highway-env's parking example, run side by side on the same machine.

Each run trains for a wall-clock ``--budget`` (seconds of training: evaluation time is
taken out of both trainers' clocks alike) and evaluates every few thousand env steps on
the same 20 fixed episodes (``parking-v0`` reset with seeds 10000-10019, deterministic
policy, one episode after another): success = ``info["is_success"]`` at the episode's
end, crash rate = episodes that ended with ``info["crashed"]``.

Trainers (``--who``):
  ours        ``goalenvs train highway_env:parking-v0`` with its default preset
              (goalenvs/train/presets/highway.toml).
  ours-crash  the same on ``goalenvs.wrappers.crash_penalty:parking-crash-v0``: parking-v0 with the
              collision penalty moved into compute_reward, so HER's relabeled rewards
              keep it (the trainer stores ``info["crashed"]`` with every transition).
  sb3         stable-baselines3 SAC + HerReplayBuffer as highway-env's parking example
              (``scripts/sb3_highway_her`` / ``parking_her``): future k=4, buffer 1e6,
              Adam 1e-3, gamma 0.95, batch 256, three hidden layers of 256, SAC's other
              defaults (tau 0.005, one gradient step per env step, 100 random steps).

    python benchmarks/highway_parking.py side-by-side --seeds 0 1 2 --budget 1200
    python benchmarks/highway_parking.py side-by-side --seeds 0 --budget 900 \\
        --who ours ours-crash                 # the crash comparison
    python benchmarks/highway_parking.py run --who ours --seed 0 --budget 600
    python benchmarks/highway_parking.py table [--plot]     # from the log, every run

``side-by-side`` starts one process per trainer for a seed, at the same time (so the
machine's load hits them alike), waits for both, then the next seed. Every run appends
one JSON line (its curve, the load average) to benchmarks/results/highway_parking.jsonl.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gymnasium as gym  # noqa: E402
from curves import curve_cells, load_cell, load_runs, plot_runs  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "highway_parking.jsonl"
IMAGE = ROOT / "docs" / "images" / "highway_parking.png"
EVAL_ENV = "highway_env:parking-v0"
EVAL_EPISODES = 20
EVAL_SEED = 10_000
SB3_EVAL_EVERY = 4_000  # env steps; ours evaluates once an epoch (4,000 env steps)
TRAIN_IDS = {"ours": EVAL_ENV, "ours-crash": "goalenvs.wrappers.crash_penalty:parking-crash-v0"}
WHO = ("ours", "ours-crash", "sb3")


def evaluate(act, episodes: int = EVAL_EPISODES, env: gym.Env | None = None) -> tuple[float, float]:
    """Success and crash rate of ``act`` (a batch of observations -> actions) on the fixed
    evaluation episodes (reset seeds ``EVAL_SEED`` on) of ``env``, by default parking-v0
    as installed; the env is closed after."""
    env = env if env is not None else gym.make(EVAL_ENV)
    successes = crashes = 0
    for episode in range(episodes):
        obs, _ = env.reset(seed=EVAL_SEED + episode)
        while True:
            action = act({k: v[None] for k, v in obs.items()})[0]
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        successes += bool(info["is_success"])
        crashes += bool(info["crashed"])
    env.close()
    return successes / episodes, crashes / episodes


class _BudgetSpentError(Exception):
    pass


def run_ours(env_id: str, seed: int, budget: float) -> list[tuple[float, int, float, float]]:
    """goalenvs DDPG+HER with the env's default preset; one (seconds, env steps, success,
    crash rate) point per epoch."""
    import torch._dynamo  # noqa: F401  (the first Adam imports it: not on the clock)

    from goalenvs.train import trainer as trainer_module
    from goalenvs.train.presets import resolve_config

    config = resolve_config(env_id, seed=seed, verbose=False, stop_success=None)
    config.out = str(ROOT / "runs" / f"highway-bench-{env_id.split(':')[-1]}-s{seed}-{os.getpid()}")
    clock = {"start": time.perf_counter(), "eval": 0.0, "crash": 0.0}
    curve: list[tuple[float, int, float, float]] = []

    def fixed_evaluate(self: Any) -> tuple[float, float, float]:
        begin = time.perf_counter()
        success, crash = evaluate(lambda obs: self.agent.act(obs, False))
        clock["eval"] += time.perf_counter() - begin
        clock["crash"] = crash
        return success, float("nan"), float("nan")

    def callback(row: dict) -> None:
        # Called once an epoch (4,000 env steps): the run stops at the first epoch's end
        # past the budget, so it may overshoot by up to an epoch.
        elapsed = time.perf_counter() - clock["start"] - clock["eval"]
        curve.append((elapsed, int(row["env_steps"]), float(row["eval_success"]), clock["crash"]))
        print(f"  {env_id} seed {seed}: {curve[-1]}", flush=True)
        if elapsed > budget:
            raise _BudgetSpentError

    trainer_module.Trainer.evaluate = fixed_evaluate
    with contextlib.suppress(_BudgetSpentError):
        trainer_module.train(config, callback=callback)
    return curve


def run_sb3(seed: int, budget: float) -> list[tuple[float, int, float, float]]:
    """SB3 SAC+HER as highway-env's parking example sets it up; a point every
    ``SB3_EVAL_EVERY`` env steps."""
    import highway_env  # noqa: F401
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.callbacks import BaseCallback

    env = gym.make(EVAL_ENV)
    model = SAC(
        "MultiInputPolicy",
        env,
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        buffer_size=1_000_000,
        learning_rate=1e-3,
        gamma=0.95,
        batch_size=256,
        policy_kwargs={"net_arch": [256, 256, 256]},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    clock = {"start": time.perf_counter(), "eval": 0.0}
    curve: list[tuple[float, int, float, float]] = []

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            # The budget is checked every step, with a last evaluation where it runs out:
            # at 4,000 steps between evaluations SB3 would otherwise overshoot it by
            # up to twice (it trains at about 4 env steps/s here under load).
            elapsed = time.perf_counter() - clock["start"] - clock["eval"]
            spent = elapsed >= budget
            if self.num_timesteps % SB3_EVAL_EVERY and not spent:
                return True
            begin = time.perf_counter()
            success, crash = evaluate(lambda obs: model.predict(obs, deterministic=True)[0])
            clock["eval"] += time.perf_counter() - begin
            curve.append((elapsed, self.num_timesteps, success, crash))
            print(f"  sb3 seed {seed}: {curve[-1]}", flush=True)
            return not spent

    model.learn(total_timesteps=10_000_000, callback=Evaluate())
    env.close()
    return curve


def run(who: str, seed: int, budget: float) -> dict[str, Any]:
    """One run, appended to ``RESULTS`` as soon as it ends."""
    import torch

    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    curve = run_sb3(seed, budget) if who == "sb3" else run_ours(TRAIN_IDS[who], seed, budget)
    row = {
        "who": who,
        "seed": seed,
        "budget": budget,
        "curve": curve,
        "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(json.dumps(row) + "\n")
    return row


def side_by_side(seeds: list[int], budget: float, who: list[str]) -> None:
    """For each seed, one process per trainer at the same time."""
    for seed in seeds:
        common = ["--seed", str(seed), "--budget", str(budget)]
        procs = [
            subprocess.Popen([sys.executable, __file__, "run", "--who", w, *common]) for w in who
        ]
        for proc in procs:
            proc.wait()


def table(rows: list[dict]) -> str:
    """One line per run: steps and seconds to 0.5 / 0.9, best, final success and crash rate."""
    names = {
        "ours": "goalenvs DDPG+HER (`highway` preset)",
        "ours-crash": "goalenvs DDPG+HER, crash in compute_reward",
        "sb3": "SB3 SAC+HER (highway-env's example)",
    }
    lines = [
        "| trainer | seed | budget, s | env steps | to 0.5: steps / s | to 0.9: steps / s | "
        "best | final success | final crash rate | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda r: (WHO.index(r["who"]), r["seed"], r["date"])):
        if row["curve"]:
            crash = f"{row['curve'][-1][3]:.2f}"
            cells = [names[row["who"]], str(row["seed"]), *curve_cells(row), crash, load_cell(row)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    """Eval success against training seconds and env steps, one line per run."""
    plot_runs(
        rows,
        path,
        group=lambda row: (WHO.index(row["who"]), row["who"]),
        title="highway-env parking-v0",
    )


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run``, ``side-by-side`` or ``table``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run", help="one trainer, one seed")
    one.add_argument("--who", choices=WHO, required=True)
    one.add_argument("--seed", type=int, default=0)
    one.add_argument("--budget", type=float, default=600.0, help="training seconds")
    both = sub.add_parser("side-by-side", help="trainers at the same time, seed after seed")
    both.add_argument("--who", nargs="+", choices=WHO, default=["ours", "sb3"])
    both.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    both.add_argument("--budget", type=float, default=1200.0, help="training seconds")
    report = sub.add_parser("table", help="the table of every logged run")
    report.add_argument("--plot", action="store_true", help=f"also write {IMAGE.name}")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.who, args.seed, args.budget)
    elif args.command == "side-by-side":
        side_by_side(args.seeds, args.budget, args.who)
    rows = load_runs(RESULTS)
    if rows is None:
        print(f"no runs logged in {RESULTS}")
        return 1
    print(table(rows))
    if args.command == "table" and args.plot:
        plot(rows, IMAGE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
