"""Steps per second of the native twins: numpy, torch on the CPU, torch on CUDA.

One run measures, for each env and each number of sub-envs, the numpy twin
(``gym.make_vec(id, num_envs=N)``), the torch twin on the CPU (``device="cpu"``) and,
where a GPU is present, the torch twin on CUDA, eager and with its ``step`` wrapped by
``torch.compile``; and prints every figure as env steps per second and as a ratio to
the numpy twin at the same size (``*``: to the numpy twin's best size, for sizes beyond
the numpy ones). Columns without a GPU read "no CUDA device". Actions are drawn ahead
(a bank of 8 batches on each backend), so the figures time the step alone: the action
check, the kernel, the autoresets and the outcome arrays. All twins of one size are
built and warmed up first, then timed in ``--repeats`` alternating rounds of
``--seconds`` each, in this one process; each keeps its best round, so load from other
processes hits all columns alike.

The training table trains DDPG+HER on PointReach with the ``point_reach``
preset until the eval success reaches ``--target`` (0.95) or ``--train-epochs`` pass,
on each device: the numpy envs (``env_device="numpy"``: numpy twin and buffer, batches
copied to the device per update) against the on-device loop (``env_device="device"``:
torch twin, device buffer and networks on one device, no host copy per step). On CUDA
the on-device loop takes the preset's ``[device]`` section (2,048 envs), as ``--device
cuda`` does; on the CPU both run the ``[config]`` schedule (8 envs). Seeds alternate
between the two columns, so load from other processes hits both alike. It prints each
seed's time to the target (training wall time, evaluation included, at the first epoch
that reaches it) and env steps per second over the run, with the medians and the ratio
of the on-device loop to the numpy envs on the same device.

    python benchmarks/gpu_twins.py                         # every twin, 256..65k; training
    python benchmarks/gpu_twins.py --sizes 256 65536 --seconds 0.5
    python benchmarks/gpu_twins.py --cuda-max 16777216     # on a GPU machine: up to 16M
    python benchmarks/gpu_twins.py --tables train --seeds 0 1 2   # the training table only
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import goalenvs  # noqa: F401  (registers the ids)

ENVS = (
    "goalenvs/BitFlipping-v0",
    "goalenvs/PointReach-v0",
    "goalenvs/PointMaze-v0",
    "goalenvs/Push-v0",
    "goalenvs/Parking-v0",
    "goalenvs/ParkingCrowded-v0",
)
SIZES = (256, 4096, 65536, 1 << 20, 1 << 24)
NO_CUDA = "no CUDA device"


def random_actions(space: gym.Space, num_envs: int, seed: int) -> np.ndarray:
    """One batch of uniform random actions for ``num_envs`` sub-envs of ``space``."""
    rng = np.random.default_rng(seed)
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, num_envs)
    low, high = space.low, space.high
    return rng.uniform(low, high, (num_envs, *space.shape)).astype(space.dtype)


class Twin:
    """One twin ready to step: built, reset, warmed up, its actions drawn ahead."""

    def __init__(self, env_id: str, num_envs: int, device: str | None, compiled: bool) -> None:
        self.num_envs = num_envs
        self.env = gym.make_vec(env_id, num_envs=num_envs, device=device)
        self.env.reset(seed=0)
        bank = [random_actions(self.env.single_action_space, num_envs, k) for k in range(8)]
        self.actions: list[Any] = (
            bank if device is None else [torch.as_tensor(a, device=device) for a in bank]
        )
        self.step: Callable[[Any], Any] = (
            torch.compile(self.env.step) if compiled else self.env.step
        )
        cuda = device is not None and device.startswith("cuda")
        self.sync: Callable[[], None] | None = torch.cuda.synchronize if cuda else None
        self.rate(0.0)  # warm-up: compile, allocate

    def rate(self, seconds: float) -> float:
        """Env steps per second (sub-env steps, summed) over at least ``seconds``."""
        count, start = 0, time.perf_counter()
        while True:
            self.step(self.actions[count % 8])
            count += 1
            if count % 4 == 0:
                if self.sync is not None:
                    self.sync()
                elapsed = time.perf_counter() - start
                if elapsed >= seconds:
                    return count * self.num_envs / elapsed


def measure_size(
    env_id: str, n: int, backends: list[tuple[str | None, bool]], seconds: float, repeats: int
) -> list[float | str]:
    """Each backend's best rate over ``repeats`` rounds that alternate the backends, so a
    burst of load from other processes costs every backend a round, not one its figure."""
    twins: list[Twin | str] = []
    for device, compiled in backends:
        try:
            twins.append(Twin(env_id, n, device, compiled))
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
            twins.append("out of memory")
    best: list[float | str] = [t if isinstance(t, str) else 0.0 for t in twins]
    for _ in range(repeats):
        for i, twin in enumerate(twins):
            if isinstance(twin, Twin):
                best[i] = max(best[i], twin.rate(seconds))
    for twin in twins:
        if isinstance(twin, Twin):
            twin.env.close()
    return best


def cell(rate: float | str, reference: float | None, best: bool = False) -> str:
    """``rate`` as steps/s and its ratio to ``reference`` (``*`` when it is the best size's)."""
    if isinstance(rate, str):
        return rate
    text = f"{rate:.3g}"
    if reference:
        text += f" ({rate / reference:.2f}x{'*' if best else ''})"
    return text


def train_run(device: str, env_device: str, seed: int, target: float, epochs: int) -> dict:
    """One training run of the ``point_reach`` preset; its time to ``target`` (None if not
    reached) and env steps per second over the run."""
    from goalenvs.train.presets import resolve_config
    from goalenvs.train.trainer import train

    with tempfile.TemporaryDirectory() as folder:
        config = resolve_config(
            "goalenvs/PointReach-v0",
            device=device,
            env_device=env_device,
            seed=seed,
            epochs=epochs,
            stop_success=target,
            out=f"{folder}/run",
            verbose=False,
        )
        result = train(config)
    reached = [row["wall_time"] for row in result.history if row["eval_success"] >= target]
    return {
        "time": reached[0] if reached else None,
        "rate": result.env_steps / result.wall_time,
        "epochs": result.epochs,
        "envs": config.num_envs,
    }


def training_table(seeds: list[int], target: float, epochs: int) -> None:
    """Prints the training table: numpy envs against the on-device loop, per device."""
    cuda = torch.cuda.is_available()
    print(f"\nDDPG+HER on PointReach-v0 (point_reach preset) to eval success {target}:")
    header = ("device", "envs", "seconds to target (per seed)", "median s", "env steps/s")
    widths = (22, 6, 44, 9, 12)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for device in ("cpu", "cuda"):
        if device == "cuda" and not cuda:
            for loop in ("numpy envs", "device loop"):
                cells = (f"{device}, {loop}", "-", NO_CUDA, "-", "-")
                print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))
            continue
        runs: dict[str, list[dict]] = {"numpy": [], "device": []}
        for seed in seeds:  # alternating, so that load hits both columns alike
            for env_device in runs:
                runs[env_device].append(train_run(device, env_device, seed, target, epochs))
        medians = {}
        for env_device, results in runs.items():
            times = [r["time"] for r in results]
            # A seed that never reached the target counts as its whole run, marked ">".
            spent = [t if t is not None else float("inf") for t in times]
            medians[env_device] = (
                statistics.median(spent),
                statistics.median(r["rate"] for r in results),
            )
            per_seed = " ".join(
                f"{t:.1f}" if t is not None else f">{r['epochs']}ep"
                for t, r in zip(times, results, strict=True)
            )
            label = "numpy envs" if env_device == "numpy" else "device loop"
            cells = (
                f"{device}, {label}",
                str(results[0]["envs"]),
                per_seed,
                f"{medians[env_device][0]:.1f}",
                f"{medians[env_device][1]:.3g}",
            )
            print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)), flush=True)
        (t_numpy, r_numpy), (t_device, r_device) = medians["numpy"], medians["device"]
        times = (
            f"{t_device / t_numpy:.2f}x"
            if max(t_numpy, t_device) < float("inf")
            else "(a median seed missed the target)"
        )
        print(
            f"{device}: the device loop takes {times} the numpy envs' median time to {target} "
            f"and steps {r_device / r_numpy:.2f}x as many env steps/s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    parser.add_argument("--seconds", type=float, default=0.5, help="one timed round")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the best counts")
    parser.add_argument("--numpy-max", type=int, default=65536, help="largest numpy size")
    parser.add_argument("--cpu-max", type=int, default=65536, help="largest torch-CPU size")
    parser.add_argument("--cuda-max", type=int, default=1 << 24, help="largest CUDA size")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument(
        "--tables", nargs="+", choices=("steps", "train"), default=["steps", "train"]
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="training")
    parser.add_argument("--target", type=float, default=0.95, help="eval success to reach")
    parser.add_argument("--train-epochs", type=int, default=30, help="most epochs a run takes")
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    device_name = torch.cuda.get_device_name() if cuda else NO_CUDA
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, GPU: {device_name}")
    if "steps" in args.tables:
        steps_table(args, cuda)
    if "train" in args.tables:
        training_table(args.seeds, args.target, args.train_epochs)


def steps_table(args: argparse.Namespace, cuda: bool) -> None:
    """Prints the steps/s table: every twin, size and backend."""
    header = ("env", "envs", "numpy", "torch cpu", "cuda eager", "cuda compiled")
    widths = (24, 9, 10, 18, 18, 18)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for env_id in args.envs:
        best: float | None = None
        for n in args.sizes:
            row: list[float | str] = []
            wanted: list[tuple[str | None, bool]] = []
            for device, compiled, limit in (
                (None, False, args.numpy_max),
                ("cpu", False, args.cpu_max),
                ("cuda", False, args.cuda_max),
                ("cuda", True, args.cuda_max),
            ):
                if device == "cuda" and not cuda:
                    row.append(NO_CUDA)
                elif compiled and args.no_compile:
                    row.append("skipped")
                elif n > limit:
                    row.append("-")
                else:
                    row.append("")
                    wanted.append((device, compiled))
            rates = iter(measure_size(env_id, n, wanted, args.seconds, args.repeats))
            row = [next(rates) if r == "" else r for r in row]
            numpy_rate = row[0] if isinstance(row[0], float) else None
            if numpy_rate is not None:
                best = max(best or 0.0, numpy_rate)
            reference, starred = (numpy_rate, False) if numpy_rate else (best, True)
            cells = [
                env_id.removeprefix("goalenvs/"),
                str(n),
                cell(row[0], None),
                *(cell(r, reference, starred) for r in row[1:]),
            ]
            if all(isinstance(r, str) for r in row):
                continue  # a size no backend ran here
            print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)), flush=True)


if __name__ == "__main__":
    main()
