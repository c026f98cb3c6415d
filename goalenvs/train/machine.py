"""The machine a run trains on: the CPU cores it may use, how many env worker processes
they carry, and the description a run folder and a result file record.

A container sees every core of its host in ``os.cpu_count()`` and usually in its CPU
affinity too, while the scheduler gives it only the share its cgroup's CPU quota allows:
a 2-CPU container on a 64-core host runs 64 processes on 2 CPUs' time. The cores a run
may use are therefore the fewer of the two, the affinity and the quota rounded up
(:func:`usable_cores`), as the JVM and Go's automaxprocs count them. The quota is read
where a container sees its own cgroup, at the root of the cgroup file system: cgroup v2's
``cpu.max`` (``"max 100000"``: no limit; ``"200000 100000"``: two CPUs) and cgroup v1's
``cpu/cpu.cfs_quota_us`` over ``cpu/cpu.cfs_period_us`` (a quota of -1: no limit).
"""

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
    """The CPU cores this process may be scheduled on (its affinity; all cores where the
    system has no affinity call, as macOS and Windows)."""
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
    """``quota / period`` in CPUs, None for no limit (``max``, a negative quota) or text
    that is not two numbers (a cgroup file a kernel writes otherwise is no reason to stop
    a run)."""
    if quota == "max":
        return None
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    if q <= 0 or p <= 0:
        return None
    return q / p


def cpu_quota(cgroup_root: Path | None = None) -> float | None:
    """The CPUs the cgroup CPU quota grants this container (may be fractional: 1.5), or
    None when it sets no limit or no cgroup file says one: cgroup v2's ``cpu.max`` under
    ``cgroup_root`` (None: :data:`CGROUP_ROOT`) first, then cgroup v1's
    ``cfs_quota_us`` / ``cfs_period_us``."""
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
    """The CPU cores this process may use: its affinity (``affinity``; None: this
    process's), bounded by the cgroup CPU quota rounded up (1.5 CPUs: 2 cores), read
    under ``cgroup_root`` (None: :data:`CGROUP_ROOT`). At least 1."""
    cores = affinity_cores() if affinity is None else affinity
    quota = cpu_quota(cgroup_root)
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name (``/proc/cpuinfo``'s first ``model name``; elsewhere
    ``platform.processor()``, or the architecture when that is empty too)."""
    text = _read(cpuinfo) or ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return platform.processor() or platform.machine()


def describe_machine(
    cgroup_root: Path | None = None, cpuinfo: Path = Path("/proc/cpuinfo")
) -> dict[str, object]:
    """The machine as a run folder's plan and a result file record it: ``cpu`` (the model
    name), ``cores`` (usable under the affinity and the cgroup quota: what the trainer
    sizes its workers and threads by), ``cores_total`` (the host's, ``os.cpu_count()``),
    ``cpu_quota`` (the cgroup's CPUs, None: no limit), ``torch`` (its version),
    ``cpu_bf16`` (bfloat16 instructions: what precision "auto" reads), ``cuda`` (the
    device's name, None without one) and ``platform`` (system, release, architecture)."""
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
    """The resident memory (RSS, Linux's ``VmRSS``) of process ``pid`` in MB; 0.0 where it
    cannot be read (the process is gone, or no /proc)."""
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
    training ones: the largest divisor of ``n_eval_episodes`` up to ``env_workers`` (1:
    the trainer's process). The eval pool lives as long as the training one, so a run
    holds both: 16 env workers and 50 eval episodes are 16 + 10 processes."""
    return max(d for d in divisors(n_eval_episodes) if d <= env_workers)


def default_env_workers(
    num_envs: int,
    native_twin: bool,
    cores: int | None = None,
    step_seconds: float | None = None,
) -> int:
    """How many processes step ``num_envs`` training envs on this machine by default.

    A native twin steps all its envs in one numpy (or torch) call: it stays in the main
    process (1), as does an env whose step costs less than
    :data:`WORKER_MIN_STEP_SECONDS` (``step_seconds``, measured by
    :func:`measure_step_seconds`; None: not measured, taken as costly). Other envs get the
    largest divisor of ``num_envs`` that the machine's cores carry; on two cores or fewer
    they stay in the main process, where worker processes measured no faster
    (benchmarks/scaling.py: 424 env steps/s in one process against 424-428 with two
    workers, FetchPush on 2 cores).
    """
    cores = usable_cores() if cores is None else cores
    cheap = step_seconds is not None and step_seconds < WORKER_MIN_STEP_SECONDS
    if native_twin or cheap or cores <= 2:
        return 1
    return max(d for d in divisors(num_envs) if d <= cores)


def measure_step_seconds(env: gym.Env, steps: int = 20, seed: int = 0) -> float:
    """Seconds one step of ``env`` takes (random actions, the mean over ``steps``; resets
    are not counted)."""
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
    """``workers`` when it can step ``num_envs`` envs on this machine, else a ValueError
    naming the setting, the value and the range."""
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
