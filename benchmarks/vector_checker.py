"""What ``goalenvs check`` costs on a vector env, against the check of its single env.

One run checks, with the same ``--steps`` and seed, the single env
(``gym.make(ID)``: the 51 single-env checks, the goal probe and gymnasium's check_env
included), its numpy twin with ``--numpy-envs`` sub-envs (``gym.make_vec(ID,
num_envs=1024)``) and its torch twin on the CPU with ``--torch-envs`` sub-envs
(``device="cpu"``): the vector checks' batched rollout (at least two episodes of the
declared length), its replay, the isolation probe and, for the numpy twin, the
SyncVectorEnv of 8 single envs it must equal. The three are timed in ``--repeats``
alternating rounds in this one process; each keeps its fastest round (CPU seconds, and
wall seconds beside them), so load from other processes hits all three alike. It prints
each check's time and its ratio to the single env's check, the slowest vector checks,
and appends the figures with the machine, load and versions to
``benchmarks/results/vector_checker.jsonl`` (``--no-record``: print only).

    python benchmarks/vector_checker.py                       # PointReach: 1,024 numpy, 4,096 torch
    python benchmarks/vector_checker.py --env goalenvs/Push-v0 --repeats 5
    python benchmarks/vector_checker.py --numpy-envs 8 --torch-envs 8 --repeats 1 --no-record
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from evidence import append_jsonl, run_info

import goalenvs  # noqa: F401  (registers the ids)
from goalenvs.checker import check_goal_env


def single_check(env_id: str, steps: int) -> Callable[[], Any]:
    """A check of one single env of ``env_id``, built fresh each time."""

    def run() -> Any:
        env = gym.make(env_id)
        try:
            return check_goal_env(env, steps=steps, factory=lambda **kw: gym.make(env_id, **kw))
        finally:
            env.close()

    return run


def vector_check(env_id: str, steps: int, num_envs: int, device: str | None) -> Callable[[], Any]:
    """A check of ``gym.make_vec(env_id, num_envs, device=device)``, built fresh each time."""
    kwargs = {} if device is None else {"device": device}

    def run() -> Any:
        envs = gym.make_vec(env_id, num_envs=num_envs, **kwargs)
        try:
            return check_goal_env(envs, steps=steps)
        finally:
            envs.close()

    return run


def timed(run: Callable[[], Any]) -> tuple[float, float, Any]:
    """(CPU seconds, wall seconds, the report) of one check, the env's build included."""
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    report = run()
    return time.process_time() - cpu, time.perf_counter() - wall, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="goalenvs/PointReach-v0")
    parser.add_argument("--numpy-envs", type=int, default=1024)
    parser.add_argument("--torch-envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="print, write no result")
    args = parser.parse_args()
    for name in ("numpy_envs", "torch_envs", "steps", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")

    import torch

    cases = {
        "single env": single_check(args.env, args.steps),
        f"numpy twin, {args.numpy_envs:,} envs": vector_check(
            args.env, args.steps, args.numpy_envs, None
        ),
        f"torch twin (cpu), {args.torch_envs:,} envs": vector_check(
            args.env, args.steps, args.torch_envs, "cpu"
        ),
    }
    best: dict[str, tuple[float, float, Any]] = {}
    for _ in range(args.repeats):
        for name, run in cases.items():  # alternating: load hits every case alike
            cpu, wall, report = timed(run)
            if name not in best or cpu < best[name][0]:
                best[name] = (cpu, wall, report)

    base = best["single env"][0]
    print(f"goalenvs check of {args.env}, --steps {args.steps}, best of {args.repeats}")
    print(f"{'check':<34} {'CPU s':>7} {'wall s':>7} {'x single':>9}  verdict")
    rows = []
    for name, (cpu, wall, report) in best.items():
        verdict = f"{len(report.errors)} errors, {len(report.warnings)} warnings"
        print(f"{name:<34} {cpu:7.2f} {wall:7.2f} {cpu / base:9.2f}  {verdict}")
        slowest = sorted(report.results, key=lambda r: r.seconds, reverse=True)[:4]
        rows.append(
            {
                "case": name,
                "cpu_seconds": round(cpu, 3),
                "wall_seconds": round(wall, 3),
                "ratio_to_single": round(cpu / base, 3),
                "errors": len(report.errors),
                "warnings": len(report.warnings),
                "checks": len(report.results),
                "slowest": {r.id: round(r.seconds, 3) for r in slowest},
            }
        )
    for row in rows[1:]:
        slow = ", ".join(f"{k} {v:.2f} s" for k, v in row["slowest"].items())
        print(f"  {row['case']}: slowest checks {slow}")
    if not args.no_record:
        record = run_info(
            env=args.env,
            steps=args.steps,
            repeats=args.repeats,
            torch_threads=torch.get_num_threads(),
            results=rows,
        )
        print(f"written to {append_jsonl('vector_checker.jsonl', record)}")


if __name__ == "__main__":
    main()
