"""How the trainer scales with the machine: env steps/s and where a cycle's time goes.

Each mode trains FetchPush-v4 (or ``--env``) for one short epoch through ``goalenvs
train`` (the CLI a user runs) with the env's preset and the mode's flags, in a fresh
process, and reads the epoch's row of progress.csv: env steps per second of training
(the evaluation's seconds left out) and the seconds of each phase (env, act, store,
sample, update). Modes:

- ``preset``: no flags beyond the short epoch: what ``goalenvs train ENV`` does here;
- ``one-process``: the envs in the trainer's process, no overlap (fp32 and, where the
  CPU has it, bf16);
- ``workers=N``: N env worker processes, overlap on and off, for N = 2, 4, ... up to
  the cores (divisors of the preset's num_envs);
- ``replay``: the most env workers the cores carry, with overlap, and the replay buffer
  on ``--device`` (``--replay-device device``) against host memory;
- ``torchrun=N``: N data-parallel workers (``torchrun --nproc-per-node N``);
- ``floor``: the cost of the parts alone, measured in this process: the epoch's env
  steps with random actions on as many env worker processes as the cores carry (no
  agent, no buffer), plus its updates on random batches; the floor is env steps per
  second of (env + updates) one after the other, and of max(env, updates) with overlap.

``--before REV`` also runs the ``preset`` mode on an older revision of goalenvs (checked
out with ``git archive``), alternating with this checkout, so a speed-up is measured
against the code it replaces on the same machine at the same load.

    python benchmarks/scaling.py                        # every mode, this machine
    python benchmarks/scaling.py --modes preset --before 0cf506c --rounds 2
    python benchmarks/scaling.py --device cuda --modes preset workers floor

Results are appended to ``benchmarks/results/scaling.jsonl`` with the machine, its
load, the versions and the command.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from before_after import checkout  # noqa: E402
from evidence import child_env, machine  # noqa: E402

from goalenvs.train.machine import usable_cores  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "scaling.jsonl"
PHASES = ("env", "act", "store", "sample", "update")
MODES = ("preset", "one-process", "workers", "replay", "torchrun", "floor")


def run_training(
    env_id: str, flags: list[str], cycles: int, package: Path, launcher: list[str] | None = None
) -> dict[str, Any]:
    """One short epoch of ``goalenvs train`` from ``package`` (a goalenvs checkout):
    its env steps/s of training and phase seconds."""
    with tempfile.TemporaryDirectory(prefix="scaling_") as tmp:
        out = Path(tmp) / "run"
        train = ["-m", "goalenvs", "train", env_id, "--epochs", "1", "--cycles", str(cycles)]
        command = [*(launcher or [sys.executable]), *train, "--seed", "0", "--quiet"]
        command += ["--out", str(out), *flags]
        env = child_env(package, OMP_NUM_THREADS="1")
        env.pop("MUJOCO_GL", None)
        start = time.perf_counter()
        done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        with open(out / "progress.csv", newline="") as f:
            row = next(csv.DictReader(f))
    wall = float(row["wall_time"])
    eval_seconds = float(row.get("time_eval") or 0.0)
    result: dict[str, Any] = {
        "env_steps": int(row["env_steps"]),
        "steps_per_s": int(row["env_steps"]) / max(wall - eval_seconds, 1e-9),
        "train_seconds": wall - eval_seconds,
        "process_seconds": seconds,
        "placement": next(
            (line for line in done.stdout.splitlines() if "envs:" in line), ""
        ).removeprefix("goalenvs train: "),
    }
    for phase in PHASES:
        value = row.get(f"time_{phase}")
        result[f"time_{phase}"] = float(value) if value else None
    return result


def bf16_supported() -> bool:
    """Whether this CPU computes bf16 natively (what the trainer's precision "auto" reads)."""
    import torch

    return bool(getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)())


def modes(selected: list[str], num_envs: int, device: str) -> list[tuple[str, list[str]]]:
    """(name, flags) of every mode to train, in order."""
    runs: list[tuple[str, list[str]]] = []
    base = ["--device", device]
    if "preset" in selected:
        runs.append(("preset", base))
    if "one-process" in selected:
        one = [*base, "--env-workers", "1", "--no-overlap"]
        runs.append(("one-process fp32", [*one, "--precision", "fp32"]))
        if device == "cpu" and bf16_supported():
            runs.append(("one-process bf16", [*one, "--precision", "bf16"]))
    if "workers" in selected:
        most = usable_cores()
        for n in (d for d in range(2, num_envs + 1) if num_envs % d == 0 and d <= most):
            for overlap in ("--overlap", "--no-overlap"):
                runs.append(
                    (f"workers={n} {overlap[2:]}", [*base, "--env-workers", str(n), overlap])
                )
    if "replay" in selected:
        most = max(d for d in range(1, num_envs + 1) if num_envs % d == 0 and d <= usable_cores())
        workers = [*base, "--env-workers", str(most), "--overlap"]
        for where in ("host", "device"):
            runs.append(
                (f"workers={most} overlap replay={where}", [*workers, "--replay-device", where])
            )
    return runs


def torchrun_modes(selected: list[str], device: str) -> list[tuple[str, int]]:
    """(name, workers) of the torchrun modes."""
    if "torchrun" not in selected:
        return []
    most = usable_cores()
    return [(f"torchrun={n}", n) for n in (2, 4, 8, 16) if n <= most]


def floor(
    env_id: str, schedule: dict[str, Any], steps: int, batches: int, device: str
) -> dict[str, Any]:
    """The parts alone: ``steps`` vector steps of ``num_envs`` envs on as many worker
    processes as the cores carry, and ``batches`` DDPG updates of ``batch`` random
    transitions."""
    import gymnasium as gym
    import numpy as np
    import torch

    import goalenvs  # noqa: F401
    from goalenvs import envspec
    from goalenvs.agents.ddpg import DDPG, DDPGConfig
    from goalenvs.train.env_workers import EnvWorkers

    num_envs, batch = int(schedule["num_envs"]), int(schedule["batch_size"])
    torch.set_num_threads(int(schedule["torch_threads"]))
    workers = max(d for d in range(1, num_envs + 1) if num_envs % d == 0 and d <= usable_cores())
    mode = gym.vector.AutoresetMode.SAME_STEP
    if workers > 1:
        envs = EnvWorkers(env_id, {}, num_envs, workers, mode)
    else:
        envs = gym.make_vec(envspec.env_spec(env_id), num_envs=num_envs, vectorization_mode="sync")
    envs.reset(seed=0)
    actions = np.zeros((num_envs, *envs.single_action_space.shape), np.float32)
    start = time.perf_counter()
    for _ in range(steps):
        envs.step(actions)
    env_seconds = time.perf_counter() - start
    observation_space, action_space = envs.single_observation_space, envs.single_action_space
    envs.close()

    config = DDPGConfig(env_id=env_id, device=device, precision=schedule["precision"])
    agent = DDPG(observation_space, action_space, config, gamma=0.98, seed=0).to(device)
    rng = np.random.default_rng(0)

    def batch_of(size: int) -> Any:
        from types import SimpleNamespace

        def obs() -> dict:
            return {
                k: torch.as_tensor(
                    rng.normal(size=(size, *s.shape)).astype(np.float32), device=device
                )
                for k, s in observation_space.spaces.items()
            }

        shape = (size, *action_space.shape)
        return SimpleNamespace(
            observations=obs(),
            next_observations=obs(),
            actions=torch.as_tensor(rng.uniform(-1, 1, shape).astype(np.float32), device=device),
            rewards=-torch.ones(size, 1, device=device),
            dones=torch.zeros(size, 1, device=device),
            weights=None,
        )

    batches_data = [batch_of(batch) for _ in range(4)]
    for b in batches_data:
        agent.update(b)  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(batches):
        agent.update(batches_data[i % 4])
    if device == "cuda":
        torch.cuda.synchronize()
    update_seconds = time.perf_counter() - start
    env_steps = steps * num_envs
    return {
        "env_workers": workers,
        "env_seconds": env_seconds,
        "update_seconds": update_seconds,
        "steps_per_s_one_after_other": env_steps / (env_seconds + update_seconds),
        "steps_per_s_overlapped": env_steps / max(env_seconds, update_seconds),
    }


def preset_schedule(env_id: str, package: Path) -> dict[str, Any]:
    """The preset's resolved config (num_envs, rollout steps, batches, batch size)."""
    command = [sys.executable, "-m", "goalenvs", "train", env_id, "--show-config"]
    env = child_env(package)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def table(rows: list[dict[str, Any]], reference: float | None) -> str:
    """A markdown table of the rows, with each mode's ratio to ``reference`` steps/s."""
    lines = [
        "| mode | env steps/s | x reference | " + " | ".join(PHASES) + " |",
        "|---|---|---|" + "---|" * len(PHASES),
    ]
    for row in rows:
        total = sum(row.get(f"time_{p}") or 0.0 for p in PHASES) or 1.0
        shares = " | ".join(f"{100 * (row.get(f'time_{p}') or 0.0) / total:.0f}%" for p in PHASES)
        ratio = f"{row['steps_per_s'] / reference:.2f}" if reference else "-"
        lines.append(f"| {row['mode']} | {row['steps_per_s']:.0f} | {ratio} | {shares} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="gymnasium_robotics:FetchPush-v4")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--cycles", type=int, default=10, help="cycles of the measured epoch")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--before", metavar="REV", help="also run the preset mode on REV")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the preset modes")
    args = parser.parse_args(argv)

    schedule = preset_schedule(args.env, ROOT)
    num_envs = int(schedule["num_envs"])
    rows: list[dict[str, Any]] = []
    before_root = None
    tmp = Path(tempfile.mkdtemp(prefix="scaling_before_"))
    try:
        if args.before:
            before_root = checkout(args.before, tmp / "before")
        plan: list[tuple[str, list[str], Path, list[str] | None]] = []
        for _ in range(args.rounds):
            if before_root is not None:
                plan.append(
                    (f"preset @ {args.before}", ["--device", args.device], before_root, None)
                )
            plan += [
                (name, flags, ROOT, None)
                for name, flags in modes(args.modes, num_envs, args.device)
                if name == "preset"
            ]
        plan += [
            (name, flags, ROOT, None)
            for name, flags in modes(args.modes, num_envs, args.device)
            if name != "preset"
        ]
        for name, n in torchrun_modes(args.modes, args.device):
            launcher = [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                f"--nproc-per-node={n}",
            ]
            plan.append((name, ["--device", args.device], ROOT, launcher))
        for name, flags, package, launcher in plan:
            load = os.getloadavg()[0]
            result = run_training(args.env, flags, args.cycles, package, launcher)
            rows.append({"mode": name, "flags": flags, "load_before": load, **result})
            print(
                f"{name:28s} {result['steps_per_s']:8.0f} env steps/s  ({result['placement']})",
                flush=True,
            )
        floor_row = None
        if "floor" in args.modes:
            steps = args.cycles * int(schedule["rollout_steps"] or 50)
            batches = args.cycles * int(schedule["n_batches"])
            floor_row = floor(args.env, schedule, steps, batches, args.device)
            print(f"floor: {json.dumps(floor_row)}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    reference = next((r["steps_per_s"] for r in rows if r["mode"].startswith("preset @")), None)
    best = {}
    for row in rows:  # best round of each mode
        if row["mode"] not in best or row["steps_per_s"] > best[row["mode"]]["steps_per_s"]:
            best[row["mode"]] = row
    print()
    print(table(list(best.values()), reference))
    import torch

    record = {
        "benchmark": "scaling",
        "env_id": args.env,
        "schedule": {
            k: schedule[k] for k in ("num_envs", "rollout_steps", "n_batches", "batch_size")
        },
        "cycles": args.cycles,
        "device": args.device,
        "rows": rows,
        "floor": floor_row,
        "machine": machine(),
        "load_end": os.getloadavg(),
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "command": "python benchmarks/scaling.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
