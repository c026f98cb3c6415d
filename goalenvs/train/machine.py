"""The machine a run trains on: the CPU cores it may use, how many env worker processes
they carry, and the description a run folder and a result file record.

A container sees every core of its host in ``os.cpu_count()`` and its affinity, while its
cgroup's CPU quota may grant it only a few: the cores a run may use are the fewer of the
affinity and the quota rounded up (:func:`usable_cores`), as the JVM and Go's
automaxprocs count them. The quota is cgroup v2's ``cpu.max`` (``"200000 100000"``: two
CPUs) or cgroup v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``."""

from __future__ import annotations

import math
import os
import platform
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from goalenvs.agents.precision import cpu_has_bf16

# How many worker processes a machine's cores carry, at most: beyond that they only wait
# for each other.
WORKERS_PER_CORE = 4
# An env step cheaper than this stays in the trainer's process by default: a worker's pipe
# round trip and the infos it sends back cost about as much (tens of microseconds each on
# a 2-core x86 machine), where a MuJoCo Fetch step costs ~1.8 ms and panda-gym's ~1.25 ms.
WORKER_MIN_STEP_SECONDS = 100e-6


CGROUP_ROOT = Path("/sys/fs/cgroup")
# Where cgroup v1 mounts the cpu controller (one folder, or the cpu,cpuacct pair).
CGROUP_V1_CPU = ("cpu", "cpu,cpuacct")


def affinity_cores() -> int:
    """The CPU cores this process may be scheduled on (all where there is no affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _quota(quota: str, period: str) -> float | None:
    """``quota / period`` in CPUs; None for no limit ("max") or text that is not two numbers."""
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def cpu_quota(cgroup_root: Path | None = None) -> float | None:
    """The CPUs the cgroup CPU quota under ``cgroup_root`` (None: :data:`CGROUP_ROOT`)
    grants (1.5, say), or None when no cgroup file sets a limit; v2 first, then v1."""
    cgroup_root = CGROUP_ROOT if cgroup_root is None else cgroup_root
    v2 = _read(cgroup_root / "cpu.max")
    if v2 is not None:
        fields = v2.split()
        return _quota(fields[0], fields[1] if len(fields) > 1 else "100000") if fields else None
    for folder in CGROUP_V1_CPU:
        quota = _read(cgroup_root / folder / "cpu.cfs_quota_us")
        period = _read(cgroup_root / folder / "cpu.cfs_period_us")
        if quota is not None and period is not None:
            return _quota(quota, period)
    return None


def usable_cores(cgroup_root: Path | None = None, affinity: int | None = None) -> int:
    """The CPU cores this process may use: its ``affinity`` (None: this process's) bounded
    by the cgroup CPU quota under ``cgroup_root`` rounded up; at least 1."""
    cores = affinity_cores() if affinity is None else affinity
    quota = cpu_quota(cgroup_root)
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name (``/proc/cpuinfo``'s, else ``platform``'s)."""
    text = _read(cpuinfo) or ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return platform.processor() or platform.machine()


def describe_machine(
    cgroup_root: Path | None = None, cpuinfo: Path = Path("/proc/cpuinfo")
) -> dict[str, object]:
    """The machine as a run folder's plan and a result file record it: CPU model, usable
    and total cores, cgroup quota, torch version, bfloat16 instructions, CUDA device and
    platform."""
    return {
        "cpu": cpu_model(cpuinfo),
        "cores": usable_cores(cgroup_root),
        "cores_total": os.cpu_count() or 1,
        "cpu_quota": cpu_quota(cgroup_root),
        "torch": torch.__version__,
        "cpu_bf16": cpu_has_bf16(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "platform": platform.platform(),
    }


def resident_mb(pid: int) -> float:
    """The resident memory (``VmRSS``) of process ``pid`` in MB; 0.0 where unreadable."""
    for line in (_read(Path(f"/proc/{pid}/status")) or "").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# --------------------------------------------------------------------------- env workers


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


def eval_env_workers(n_eval_episodes: int, env_workers: int) -> int:
    """How many processes step the ``n_eval_episodes`` eval envs beside ``env_workers``
    training ones: the largest divisor of ``n_eval_episodes`` up to ``env_workers``."""
    return max(d for d in divisors(n_eval_episodes) if d <= env_workers)


def default_env_workers(
    num_envs: int,
    native_twin: bool,
    cores: int | None = None,
    step_seconds: float | None = None,
) -> int:
    """How many processes step ``num_envs`` training envs on this machine by default: 1
    for a native twin, a step cheaper than :data:`WORKER_MIN_STEP_SECONDS`
    (``step_seconds``; None: taken as costly) or two cores or fewer (benchmarks/scaling.py
    measured two workers no faster there); else the largest divisor of ``num_envs`` the
    cores carry."""
    cores = usable_cores() if cores is None else cores
    cheap = step_seconds is not None and step_seconds < WORKER_MIN_STEP_SECONDS
    if native_twin or cheap or cores <= 2:
        return 1
    return max(d for d in divisors(num_envs) if d <= cores)


def measure_step_seconds(env: gym.Env, steps: int = 20, seed: int = 0) -> float:
    """Seconds one step of ``env`` takes (random actions, the mean over ``steps``)."""
    env.action_space.seed(seed)
    env.reset(seed=seed)
    total = 0.0
    for _ in range(steps):
        action = env.action_space.sample()
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        total += time.perf_counter() - start
        if terminated or truncated:
            env.reset()
    return total / steps


def check_env_workers(workers: int, num_envs: int, cores: int | None = None) -> int:
    """``workers`` when it can step ``num_envs`` envs on this machine, else a ValueError."""
    cores = usable_cores() if cores is None else cores
    most = WORKERS_PER_CORE * cores
    if isinstance(workers, bool) or not isinstance(workers, int | np.integer) or workers < 1:
        raise ValueError(
            f"env_workers (--env-workers) must be an integer from 1 (the envs in the trainer's "
            f"process) to {most}, got {workers!r}"
        )
    if workers > most:
        raise ValueError(
            f"env_workers (--env-workers) {workers} is far beyond this machine's {cores} cores: "
            f"expected 1 to {most}"
        )
    if num_envs % workers:
        fitting = [d for d in divisors(num_envs) if d <= most]
        raise ValueError(
            f"env_workers (--env-workers) {workers} does not divide num_envs {num_envs}: each "
            f"worker steps an equal share; expected one of {fitting}"
        )
    return int(workers)
