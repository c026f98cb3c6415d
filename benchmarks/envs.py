"""Environment throughput: one env, gymnasium's SyncVectorEnv, and the native vector twins.

For every env case it prints steps per second (one step of one sub-env counts as one
step) for:

- ``single``: one env (the unwrapped class) stepped in a Python loop, reset when done;
- ``sync``: ``gymnasium.vector.SyncVectorEnv`` of ``gym.make(id)`` at 256 envs (what
  ``gym.make_vec(id, vectorization_mode="sync")`` builds);
- ``native``: the id's native vector twin at 256 and 4096 envs;

and the ratios measured in this run: native / sync at 256 envs (targets: every twin >= 50x,
PointReach >= 100x) and, for BitFlipping, our single env /
stable-baselines3's ``BitFlippingEnv`` (target >= 1x).

Then, per env, where one native step of 256 envs spends its time (the twin's hooks timed
one by one inside ``GoalVectorEnv.step``; the rest is that method's own bookkeeping: time
limit, autoreset, info masks) and where one SyncVectorEnv step spends it (the 256 bare
single-env steps, the rest being gymnasium's wrappers and SyncVectorEnv's batching).
Actions are drawn before timing. Time is the process's CPU time, not wall time, and
each figure is the best of several interleaved rounds: on a shared machine the wall
clock also counts the time other processes hold the CPU, which swings a ratio by 2x
from one run to the next. BLAS is held to one thread so CPU time is the work done.

Adding an env is one line in ``CASES``. Parking's own targets, against highway-env, are
checked by ``parking_vs_highway.py``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import goalenvs  # noqa: F401  (registers the ids)

SYNC_ENVS = 256
NATIVE_ENVS = (256, 4096)
ROUNDS = 6
MIN_SECONDS = 0.15  # CPU seconds per measurement


@dataclass
class EnvCase:
    """One env to measure, with an optional peer single env measured beside ours."""

    id: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    peer_name: str | None = None
    peer: Callable[[], gym.Env] | None = None
    # Native / sync at 256 envs: every twin >= 50x, PointReach >= 100x (the
    # targets). Parking's targets (against highway-env) are checked by parking_vs_highway.py,
    # so its ratio here is printed without a verdict.
    sync_target: float | None = 50.0


def _sb3_bit_flipping() -> gym.Env:
    from stable_baselines3.common.envs import BitFlippingEnv

    return BitFlippingEnv(n_bits=10)


CASES = [
    EnvCase("goalenvs/BitFlipping-v0", {}, "SB3 BitFlippingEnv", _sb3_bit_flipping),
    EnvCase("goalenvs/PointReach-v0", sync_target=100.0),
    EnvCase("goalenvs/PointMaze-v0"),
    EnvCase("goalenvs/Push-v0"),
    EnvCase("goalenvs/Parking-v0", sync_target=None),
]


def _actions(space: spaces.Space, batch: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if isinstance(space, spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, batch)
    if isinstance(space, spaces.Box):
        return rng.uniform(space.low, space.high, (*batch, *space.shape)).astype(space.dtype)
    raise TypeError(f"no action sampler for {space}")


def _rate(step: Callable[[int], None], envs: int) -> float:
    """Steps per CPU second of ``step(k)`` calls, each advancing ``envs`` sub-envs."""
    calls, start = 0, time.process_time()
    while True:
        for _ in range(16):
            step(calls)
            calls += 1
        elapsed = time.process_time() - start
        if elapsed >= MIN_SECONDS:
            return calls * envs / elapsed


def _single_stepper(env: gym.Env, actions: np.ndarray) -> Callable[[int], None]:
    env.reset(seed=0)

    def step(k: int) -> None:
        _, _, terminated, truncated, _ = env.step(actions[k % len(actions)])
        if terminated or truncated:
            env.reset()

    return step


def _vector_stepper(envs: gym.vector.VectorEnv, actions: np.ndarray) -> Callable[[int], None]:
    envs.reset(seed=0)
    return lambda k: envs.step(actions[k % len(actions)])


def measure(case: EnvCase) -> list[tuple[str, str, int, float]]:
    """Rows ``(env, mode, num_envs, steps/s)`` for one case."""
    rng = np.random.default_rng(0)
    single = gym.make(case.id, **case.kwargs).unwrapped
    space = single.action_space
    steppers: dict[tuple[str, int], tuple[Callable[[int], None], int]] = {
        ("single", 1): (_single_stepper(single, _actions(space, (1024,), rng)), 1)
    }
    if case.peer is not None:
        peer = case.peer()
        peer_actions = _actions(peer.action_space, (1024,), rng)
        steppers[(case.peer_name or "peer", 1)] = (_single_stepper(peer, peer_actions), 1)
    sync = gym.make_vec(case.id, SYNC_ENVS, vectorization_mode="sync", **case.kwargs)
    sync_actions = _actions(space, (64, SYNC_ENVS), rng)
    steppers[("sync", SYNC_ENVS)] = (_vector_stepper(sync, sync_actions), SYNC_ENVS)
    for n in NATIVE_ENVS:
        native = gym.make_vec(case.id, n, vectorization_mode="vector_entry_point", **case.kwargs)
        native_actions = _actions(space, (16, n), rng)
        steppers[("native", n)] = (_vector_stepper(native, native_actions), n)
    best = dict.fromkeys(steppers, 0.0)
    for _ in range(ROUNDS):
        for key, (step, n) in steppers.items():
            best[key] = max(best[key], _rate(step, n))
    return [(case.id, mode, n, rate) for (mode, n), rate in best.items()]


NATIVE_PARTS = ("check_actions", "_step_envs", "_reset_envs", "_observation", "_step_info")


def native_breakdown(case: EnvCase, steps: int = 400) -> dict[str, float]:
    """CPU microseconds per native step of ``SYNC_ENVS`` envs, split by the twin's hooks.

    Each hook (and the action check) is wrapped in a timer on the instance; what remains
    of the whole step is ``GoalVectorEnv.step``'s own work (``_goal_outcomes``, the time
    limit, autoresets, info masks). The timers add a few tenths of a microsecond each.
    """
    import goalenvs.core.vector as core  # where GoalVectorEnv.step looks check_actions up

    envs = gym.make_vec(case.id, SYNC_ENVS, vectorization_mode="vector_entry_point", **case.kwargs)
    twin = envs.unwrapped if hasattr(envs, "unwrapped") else envs
    spent = dict.fromkeys(NATIVE_PARTS, 0.0)

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.process_time() - start

        return wrapper

    for name in NATIVE_PARTS[1:]:
        setattr(twin, name, timed(name, getattr(twin, name)))
    original_check = core.check_actions
    core.check_actions = timed("check_actions", original_check)
    try:
        actions = _actions(twin.single_action_space, (16, SYNC_ENVS), np.random.default_rng(1))
        twin.reset(seed=0)
        spent.update(dict.fromkeys(spent, 0.0))
        start = time.process_time()
        for k in range(steps):
            twin.step(actions[k % len(actions)])
        total = time.process_time() - start
    finally:
        core.check_actions = original_check
    parts = {name: 1e6 * t / steps for name, t in spent.items()}
    parts["GoalVectorEnv.step's own work"] = 1e6 * total / steps - sum(parts.values())
    parts["total"] = 1e6 * total / steps
    return parts


def sync_breakdown(case: EnvCase, steps: int = 20) -> dict[str, float]:
    """CPU microseconds per SyncVectorEnv step of ``SYNC_ENVS`` envs: the bare single envs'
    steps (``env.unwrapped.step``, timed inside) and the rest (gymnasium's wrappers, the
    sub-envs' resets and SyncVectorEnv's batching)."""
    sync = gym.make_vec(case.id, SYNC_ENVS, vectorization_mode="sync", **case.kwargs)
    spent = [0.0]
    for env in sync.envs:
        bare = env.unwrapped
        step = bare.step

        def timed(action: Any, step: Callable[[Any], Any] = step) -> Any:
            start = time.process_time()
            try:
                return step(action)
            finally:
                spent[0] += time.process_time() - start

        bare.step = timed
    actions = _actions(sync.single_action_space, (8, SYNC_ENVS), np.random.default_rng(1))
    sync.reset(seed=0)
    start = time.process_time()
    for k in range(steps):
        sync.step(actions[k % len(actions)])
    total = time.process_time() - start
    bare_us = 1e6 * spent[0] / steps
    return {
        f"{SYNC_ENVS} bare env.step calls": bare_us,
        "wrappers, resets and batching": 1e6 * total / steps - bare_us,
        "total": 1e6 * total / steps,
    }


def print_breakdowns() -> None:
    """Where one step of 256 envs spends its CPU time, native twin and SyncVectorEnv."""
    print()
    rounds = f"best of {ROUNDS} rounds; each timer adds ~1 us"
    print(f"CPU microseconds per step of {SYNC_ENVS} envs ({rounds})")
    for case in CASES:
        # The round least slowed by other processes, as for the rates above.
        native = min((native_breakdown(case) for _ in range(ROUNDS)), key=lambda d: d["total"])
        sync = min((sync_breakdown(case) for _ in range(ROUNDS)), key=lambda d: d["total"])
        print(f"{case.id}")
        for name, us in native.items():
            share = "" if name == "total" else f" {100 * us / native['total']:5.1f}%"
            print(f"  native {name:<36} {us:>10,.1f}{share}")
        for name, us in sync.items():
            share = "" if name == "total" else f" {100 * us / sync['total']:5.1f}%"
            print(f"  sync   {name:<36} {us:>10,.1f}{share}")


def main() -> None:
    """Prints the table and the ratios against the targets."""
    header = f"{'env':<28} {'mode':<20} {'envs':>6} {'steps/s':>14}"
    print(header)
    print("-" * len(header))
    summary = []
    for case in CASES:
        rows = measure(case)
        rates = {(mode, n): rate for _, mode, n, rate in rows}
        for env_id, mode, n, rate in rows:
            print(f"{env_id:<28} {mode:<20} {n:>6} {rate:>14,.0f}")
        ratio = rates[("native", SYNC_ENVS)] / rates[("sync", SYNC_ENVS)]
        line = f"{case.id}: native / sync at {SYNC_ENVS} envs = {ratio:,.0f}x"
        if case.sync_target is not None:
            verdict = "ok" if ratio >= case.sync_target else "BELOW TARGET"
            line += f" (target >= {case.sync_target:.0f}x: {verdict})"
        summary.append(line)
        if case.peer is not None:
            peer_ratio = rates[("single", 1)] / rates[(case.peer_name or "peer", 1)]
            verdict = "ok" if peer_ratio >= 1 else "BELOW TARGET"
            summary.append(
                f"{case.id}: single / {case.peer_name} = {peer_ratio:.2f}x "
                f"(target >= 1x: {verdict})"
            )
    print()
    print("\n".join(summary))
    print_breakdowns()


if __name__ == "__main__":
    main()
