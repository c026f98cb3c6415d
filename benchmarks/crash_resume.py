"""Crash safety of `goalenvs train`: the cost of saving an epoch, and kills.

Part 1, cost (21.7): the time to commit one epoch's unit (policy + training state, random
state, and the replay buffer with ``save_buffer``) with a buffer of 1e6 Fetch-sized
transitions (observation 25, goals 3, action 4), against the time of the epoch it
follows: baselines' Fetch epoch, 50 cycles x 40 gradient steps of batch 256 on 3x256
MLPs, measured here with the same buffer (the peer of the same run). The buffer is
written uncompressed; ``np.savez_compressed`` is measured beside it to show why.

Part 2, kills (21.8, the figure): SIGKILL `python -m goalenvs train goalenvs/PointReach-v0
--preset baselines --cycles 2 --batches 2 --save-buffer` at a random moment of its
training loop, `--resume` the folder, 30 times; then a last resume runs to its end.
Prints how many resumes succeeded, whether progress.csv holds epochs 1..N once each,
the temporary files left, and whether the numbers continue (env steps and updates per
epoch, wall time adding up).

    python benchmarks/crash_resume.py            # both parts (about 4 minutes on 2 cores)
    python benchmarks/crash_resume.py --kills 10 --skip-cost
    python benchmarks/crash_resume.py --skip-cost --replay-device device   # the torch buffer

The kills' figures go, with the machine, load and commit, as one JSON line per run to
benchmarks/results/crash_resume.jsonl.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from gymnasium import spaces

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.agents.registry import make_agent
from goalenvs.core.io import atomic_write, atomic_write_file
from goalenvs.her.buffer import HerReplayBuffer
from goalenvs.train.checkpoint import commit_unit, save_checkpoint, save_torch_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evidence import RESULTS, append_jsonl, load, run_info


def fetch_like_buffer(size: int, n_envs: int = 16, horizon: int = 50) -> HerReplayBuffer:
    """A buffer of ``size`` random Fetch-sized transitions (full)."""
    box = lambda n: spaces.Box(-np.inf, np.inf, (n,), np.float32)  # noqa: E731
    space = spaces.Dict(observation=box(25), achieved_goal=box(3), desired_goal=box(3))
    action_space = spaces.Box(-1.0, 1.0, (4,), np.float32)

    def reward(achieved, desired, info):
        return -(np.linalg.norm(achieved - desired, axis=-1) > 0.05).astype(np.float32)

    buffer = HerReplayBuffer(size, space, action_space, reward, n_envs=n_envs, seed=0)
    rng = np.random.default_rng(0)
    obs = {k: rng.standard_normal((n_envs, s.shape[0]), np.float32) for k, s in space.items()}
    zeros = np.zeros(n_envs, bool)
    for t in range(size // n_envs):
        nxt = {k: rng.standard_normal(v.shape, np.float32) for k, v in obs.items()}
        actions = rng.uniform(-1, 1, (n_envs, 4)).astype(np.float32)
        rewards = reward(nxt["achieved_goal"], nxt["desired_goal"], None)
        truncated = zeros | ((t + 1) % horizon == 0)
        buffer.add(obs, nxt, actions, rewards, zeros, truncated, [{}] * n_envs)
        obs = nxt
    return buffer


def timed(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def cost(size: int, folder: Path) -> None:
    torch.set_num_threads(1)
    print(f"filling a buffer of {size:,} Fetch-sized transitions ...", flush=True)
    buffer = fetch_like_buffer(size)
    config = DDPGConfig(env_id="FetchLike", batch_size=256)
    agent = make_agent(config, buffer.observation_space, buffer.action_space, 0.98, 0)
    # The epoch: 50 cycles x 40 gradient steps (collection left out: it only adds).
    steps = 40

    def some_updates() -> None:
        for _ in range(steps):
            agent.update(buffer.sample(256, device="cpu"))

    update = timed(some_updates, 2) / steps
    epoch = 50 * 40 * update
    unit = folder / "epoch_000001"
    unit.mkdir(parents=True, exist_ok=True)

    def policy_and_state() -> None:
        save_checkpoint(
            unit / "policy.pt",
            {"epoch": 1},
            agent.policy_modules(),
            agent.training_modules(),
        )
        state = {"torch": torch.get_rng_state(), "epoch": 1}
        save_torch_file(unit / "state_rank0.pt", state)

    def buffer_uncompressed() -> None:
        atomic_write_file(unit / "buffer_rank0.npz", buffer.save)

    def buffer_compressed() -> None:
        arrays = {k.replace("/", "__"): v for k, v in buffer.state().fields.items()}
        atomic_write(unit / "compressed.npz", lambda f: np.savez_compressed(f, **arrays))

    small = timed(policy_and_state)
    big = timed(buffer_uncompressed)
    size_mb = (unit / "buffer_rank0.npz").stat().st_size / 1e6
    packed = timed(buffer_compressed, 1)
    (unit / "compressed.npz").unlink()
    manifest = timed(lambda: commit_unit(unit, 1, {"world_size": 1}))
    print()
    print(f"epoch (baselines' Fetch: 2000 updates of batch 256, {update * 1e3:.2f} ms each): "
          f"{epoch:.1f} s")  # fmt: skip
    print(f"{'what is saved per epoch':<44}{'seconds':>9}{'share of epoch':>16}")
    rows = [
        ("policy + training + random state", small),
        ("manifest", manifest),
        (f"buffer, uncompressed .npz ({size_mb:.0f} MB)  [used]", big),
        ("buffer, np.savez_compressed (obs only)", packed),
        ("unit with save_buffer (used)", small + manifest + big),
        ("unit without save_buffer (default)", small + manifest),
    ]
    for name, seconds in rows:
        print(f"{name:<44}{seconds:>9.3f}{seconds / epoch:>15.1%}")


TRAIN = [sys.executable, "-m", "goalenvs", "train"]
FAST = ["--cycles", "2", "--batches", "2", "--save-buffer", "--device", "cpu", "--quiet"]
# The first start picks the schedule; a resume keeps it (its config.json).
FIRST = ["--preset", "baselines"]


def epochs_in(run: Path) -> list[dict[str, str]]:
    with open(run / "progress.csv", newline="") as f:
        return list(csv.DictReader(f))


def kills(n: int, folder: Path, seed: int, window: float, replay_device: str) -> None:
    run = folder / "run"
    fast = [*FAST, "--replay-device", replay_device]
    info = run_info(kills=n, window=window, seed=seed, replay_device=replay_device)
    rng = random.Random(seed)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ok, resumed_at, delays = 0, [], []
    for i in range(n):
        args = ["goalenvs/PointReach-v0", "--epochs", "400", "--out", str(run)]
        command = TRAIN + ([*args, *FIRST] if i == 0 else ["--resume", str(run)]) + fast
        config = run / "config.json"
        before = config.stat().st_mtime_ns if config.exists() else 0
        proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        # config.json is rewritten once the folder is restored: the loop starts.
        while proc.poll() is None and not (config.exists() and config.stat().st_mtime_ns > before):
            time.sleep(0.01)
        if proc.poll() is not None:
            print(f"run {i} FAILED to start: {proc.communicate()[1].strip()}")
            continue
        if i:
            ok += 1
            resumed_at.append(len(epochs_in(run)))
        delays.append(rng.uniform(0.0, window))
        time.sleep(delays[-1])
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    # The n-th resume runs to its end.
    resumed_at.append(len(epochs_in(run)))
    last = max((int(r["epoch"]) for r in epochs_in(run)), default=0)
    final = subprocess.run(
        [*TRAIN, "--resume", str(run), "--epochs", str(last + 2), *fast],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    ok += final.returncode == 0
    rows = epochs_in(run)
    epochs = [int(r["epoch"]) for r in rows]
    temp = [str(p.relative_to(run)) for p in run.rglob(".*.tmp*")]
    open_units = [p.name for p in (run / "checkpoints").glob("epoch_*")
                  if not (p / "manifest.json").exists()]  # fmt: skip
    steps_ok = [int(r["env_steps"]) for r in rows] == [200 * e for e in epochs]
    updates_ok = [int(r["updates"]) for r in rows] == [4 * e for e in epochs]
    walls = [float(r["wall_time"]) for r in rows]
    print()
    print(f"SIGKILLs at random moments (0-{window:.1f} s into the training loop): {n}")
    print(f"resumes that succeeded:                {ok} of {n}")
    print(f"epoch each resume started from:        {resumed_at}")
    print(f"last resume, run to epoch {last + 2}:    exit code {final.returncode}")
    if final.returncode:
        print(final.stderr[-500:])
    once = epochs == list(range(1, len(epochs) + 1))
    print(
        f"progress.csv epochs:                   1..{epochs[-1]}, {'once each' if once else epochs}"
    )
    left = temp + open_units
    print(f"temporary files / uncommitted units:   {len(temp)} / {len(open_units)} {left}")
    print(f"env steps 200/epoch, updates 4/epoch:  {steps_ok and updates_ok}")
    print(f"wall time adds up across sessions:     {walls == sorted(walls)}")
    figures = {
        "resumes_ok": ok,
        "last_exit_code": final.returncode,
        "resumed_at": resumed_at,
        "epochs_once_each": once,
        "temporary_files": len(temp),
        "open_units": len(open_units),
        "steps_and_updates_continue": steps_ok and updates_ok,
        "wall_time_adds_up": walls == sorted(walls),
    }
    path = append_jsonl(RESULTS / "crash_resume.jsonl", {**info, **figures, "load_after": load()})
    print(f"recorded in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="buffer transitions")
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--window", type=float, default=1.5, help="kill within this many s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--skip-kills", action="store_true")
    parser.add_argument(
        "--replay-device",
        choices=("host", "device"),
        default="host",
        help="the numpy buffer (host) or the torch one on the CPU (device)",
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="crash_resume_"))
    try:
        if not args.skip_cost:
            cost(args.size, folder / "cost")
        if not args.skip_kills:
            kills(args.kills, folder / "kills", args.seed, args.window, args.replay_device)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
