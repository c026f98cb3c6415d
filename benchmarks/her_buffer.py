"""HER replay buffer: goalenvs beside stable-baselines3, same data, same run.

Fetch-like sizes (observation 25, goal 3, action 4, episodes of 50 steps, truncated by
the time limit), a buffer of 1e6 transitions filled completely, for 1 and 8 envs, with
the same steps for both buffers.

Times: both buffers live in one subprocess and take turns, filling in chunks of CHUNK
steps, then sampling in alternate rounds, so that the load of a shared machine falls on
both alike (run one after the other, the same code can measure far apart). They
are the process's CPU time, which leaves out the time spent waiting for a core;
everything timed is single-threaded, so on an idle machine CPU and wall time agree.
Printed per buffer: add time per env step (one add() call of n_envs transitions), over
the whole first fill (fresh memory: the first touch of each page, mapped and zeroed by
the kernel, costs every buffer alike and is slow on some virtual machines) and over a
second fill that wraps the ring (memory already touched, the oldest episodes retired as
it goes: a long run's steady state), and sample time at batch 256 and 2048 (best of 7
runs of many calls; both as torch CPU tensors, which is what stable-baselines3 returns).
The sample "floor" is a plain numpy gather of the same bytes: uniform random rows of the
packed float32 records (both observations, the action, the reward), one take, with no
relabeling and no bookkeeping. The add "floor" is the bare numpy row write of the same
steps (one concatenation into the row) into fresh storage of the goalenvs layout, timed in
the same alternation: what is left of add() without its checks and bookkeeping.

Memory: each buffer is built and filled again alone in its own subprocess, and its
resident memory measured as the growth of the process's RSS (VmRSS) from before
construction to after the fill: everything the buffer keeps alive, Python objects
included.

Prioritized replay: a uniform and a prioritized goalenvs buffer (alpha 0.6, beta 0.4),
one env, 1e6 transitions, filled and sampled in alternation as above; "sample+update" also
feeds the batch's TD errors back (update_priorities). Beside them, when the package
``cpprb`` imports (add its site-packages to PYTHONPATH; it is not a dependency), cpprb's
HindsightReplayBuffer(prioritized=True) filled with 1e6 entries of the same sizes: cpprb
relabels when an episode ends and stores ``1 + additional_goals`` copies of each
transition, so its sampling is a plain prioritized draw with no relabeling, in C++.

Run: python benchmarks/her_buffer.py   (about 6-8 minutes; the numbers are noisy on a
shared machine: compare the ratios, measured in the same run).
     python benchmarks/her_buffer.py --transitions 100000   (a smaller buffer, ~1 minute)

Every run appends its raw times, memory and ratios, with the machine, load, versions and
command, as one JSON line to benchmarks/results/her_buffer.jsonl (benchmarks/report.py
builds docs/benchmarks.md's table from it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

OBS, GOAL, ACTION, EPISODE = 25, 3, 4, 50
# The buffer size; --transitions sets it for the run (the workers read it from the env).
TRANSITIONS = int(os.environ.get("GOALENVS_BENCH_TRANSITIONS", 1_000_000))
BATCHES = (256, 2048)
CHUNK = 5_000  # fill steps per turn when both buffers are timed in alternation


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def fetch_like_env():
    """A stand-in goal env of Fetch's sizes: only its spaces and compute_reward are used."""
    import gymnasium as gym
    from gymnasium import spaces

    class FetchLike(gym.Env):
        observation_space = spaces.Dict(
            observation=spaces.Box(-np.inf, np.inf, (OBS,), np.float32),
            achieved_goal=spaces.Box(-np.inf, np.inf, (GOAL,), np.float32),
            desired_goal=spaces.Box(-np.inf, np.inf, (GOAL,), np.float32),
        )
        action_space = spaces.Box(-1.0, 1.0, (ACTION,), np.float32)

        def compute_reward(self, achieved_goal, desired_goal, info):
            distance = np.linalg.norm(achieved_goal - desired_goal, axis=-1)
            return -(distance > 0.05).astype(np.float32)

        def reset(self, *, seed=None, options=None):
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), 0.0, False, False, {}

    return FetchLike


def episode_steps(n_envs: int, rng: np.random.Generator) -> list[tuple]:
    """Two episodes of every env as the add() arguments of each step (reused cyclically)."""
    steps = []
    for _ in range(2):
        obs = rng.standard_normal((EPISODE + 1, n_envs, OBS)).astype(np.float32)
        achieved = rng.standard_normal((EPISODE + 1, n_envs, GOAL)).astype(np.float32) * 0.1
        desired = np.repeat(rng.standard_normal((1, n_envs, GOAL)).astype(np.float32) * 0.1, 51, 0)
        for t in range(EPISODE):
            last = t == EPISODE - 1
            steps.append(
                (
                    {
                        "observation": obs[t],
                        "achieved_goal": achieved[t],
                        "desired_goal": desired[t],
                    },
                    {
                        "observation": obs[t + 1],
                        "achieved_goal": achieved[t + 1],
                        "desired_goal": desired[t + 1],
                    },
                    rng.uniform(-1, 1, (n_envs, ACTION)).astype(np.float32),
                    -np.ones(n_envs, np.float32),
                    np.full(n_envs, last),
                    [{"TimeLimit.truncated": True} if last else {} for _ in range(n_envs)],
                    np.zeros(n_envs, bool),  # terminated (goalenvs keeps it apart)
                )
            )
    return steps


def best_time(function, calls: int, repeats: int = 7) -> float:
    """CPU seconds per call: the best of ``repeats`` runs of ``calls`` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(calls):
            function()
        best = min(best, (time.process_time() - start) / calls)
    return best


def build(kind: str, n_envs: int) -> tuple:
    """A fresh buffer of ``kind`` as (add, sample, buffer): the calls a real caller makes."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv([fetch_like_env()] * n_envs)
    if kind == "sb3":
        from stable_baselines3 import HerReplayBuffer

        np.random.seed(0)  # noqa: NPY002 (stable-baselines3 samples from the global generator)
        buffer = HerReplayBuffer(
            TRANSITIONS,
            venv.observation_space,
            venv.action_space,
            venv,
            device="cpu",
            n_envs=n_envs,
        )

        def add(step: tuple) -> None:
            obs, next_obs, action, reward, done, infos, _ = step
            buffer.add(obs, next_obs, action, reward, done, infos)

        def sample(batch: int) -> object:
            return buffer.sample(batch)
    else:
        from goalenvs.her import HerReplayBuffer

        buffer = HerReplayBuffer(
            TRANSITIONS, venv.observation_space, venv.action_space, venv, n_envs=n_envs, seed=0
        )

        def add(step: tuple) -> None:
            # The same per-env info dicts as stable-baselines3 gets (a real caller passes
            # its infos; without info_keys the buffer reads none of them).
            obs, next_obs, action, reward, truncated, infos, terminated = step
            buffer.add(obs, next_obs, action, reward, terminated, truncated, infos)

        def sample(batch: int) -> object:
            return buffer.sample(batch, device="cpu")

    return add, sample, buffer


def memory_worker(kind: str, n_envs: int) -> dict:
    """RSS growth over construction + fill of one buffer, alone in this process."""
    # Import both libraries (and torch, which they use) before the baseline: the growth
    # then counts the buffer, not the code.
    import stable_baselines3  # noqa: F401
    import torch  # noqa: F401

    import goalenvs.her  # noqa: F401

    steps = episode_steps(n_envs, np.random.default_rng(0))
    baseline = rss_bytes()
    add, _, buffer = build(kind, n_envs)
    for i in range(TRANSITIONS // n_envs):
        add(steps[i % len(steps)])
    stored = buffer.n_transitions if kind == "goalenvs" else int((buffer.ep_length > 0).sum())
    return {"rss": rss_bytes() - baseline, "stored": stored}


def floor_writer(width: int, rows: int, n_envs: int):
    """The add() floor: the bare numpy row write of the same step into fresh storage.

    The goalenvs layout (``rows`` rows of ``n_envs`` packed float32 records of ``width``,
    zeroed as the buffer's are, so that first writes to fresh memory cost both alike): per
    step one concatenation of the observation's and next observation's keys, the action
    and the reward into the row's first columns (the flags and episode start after them
    are left alone). No checks, no bookkeeping: the time any buffer of this layout spends
    in numpy, whatever its Python code.
    """
    records = np.zeros((rows, n_envs, width), np.float32)
    values = records[:, :, : 2 * (OBS + 2 * GOAL) + ACTION + 1]
    keys = ("achieved_goal", "desired_goal", "observation")
    state = {"row": 0}

    def add(step: tuple) -> None:
        obs, next_obs, action, reward = step[:4]
        parts = [obs[k] for k in keys] + [next_obs[k] for k in keys]
        parts += [action, reward.reshape(n_envs, 1)]
        np.concatenate(parts, axis=1, out=values[state["row"]])
        state["row"] = (state["row"] + 1) % rows

    return add


def timing_worker(n_envs: int) -> dict:
    """Add and sample times of both buffers, filled and sampled in alternation.

    Both live in this process and take turns (fill chunks of CHUNK steps, then sampling
    rounds), so that the load of a shared machine falls on both alike.
    """
    import torch

    torch.set_num_threads(1)
    steps = episode_steps(n_envs, np.random.default_rng(0))
    kinds = ("sb3", "goalenvs")
    built = {kind: build(kind, n_envs) for kind in kinds}
    buffer = built["goalenvs"][2]
    writers = {kind: built[kind][0] for kind in kinds}
    stored = buffer.state()
    width = stored.records.shape[2]
    writers["floor"] = floor_writer(width, buffer.rows_per_env, n_envs)
    n_steps = TRANSITIONS // n_envs
    result: dict = {kind: {} for kind in writers}
    # The first fill writes into fresh memory, whose first touch costs every buffer alike
    # (the kernel maps and zeroes its pages); the second wraps the ring over memory
    # already touched (and retires the oldest episodes as it goes): a long run's steady state.
    for phase in ("add", "add_wrapped"):
        add_time = dict.fromkeys(writers, 0.0)
        for first in range(0, n_steps, CHUNK):
            chunk = [steps[i % len(steps)] for i in range(first, min(first + CHUNK, n_steps))]
            for kind, add in writers.items():
                start = time.process_time()
                for step in chunk:
                    add(step)
                add_time[kind] += time.process_time() - start
        for kind in writers:
            result[kind][phase] = add_time[kind] / n_steps

    # The floor gathers the same bytes: uniform random rows of the packed records (both
    # observations, the action, the reward), one take, with no relabeling or bookkeeping.
    records = stored.records.reshape(-1, width)
    rng = np.random.default_rng(1)
    total = len(records)

    def floor(batch: int) -> list:
        rows = np.take(records, rng.integers(0, total, batch), axis=0)
        return [torch.from_numpy(rows)]

    samplers = {"sb3": built["sb3"][1], "goalenvs": built["goalenvs"][1], "floor": floor}
    for batch in BATCHES:
        calls = 40_000 // batch + 40
        best = dict.fromkeys(samplers, float("inf"))
        for _ in range(7):
            for name, function in samplers.items():
                best[name] = min(best[name], best_time(lambda f=function, b=batch: f(b), calls, 1))
        for name, seconds in best.items():
            result.setdefault(name, {})[f"sample{batch}"] = seconds
    return result


def prioritized_worker() -> dict:
    """Sample times of a uniform and a prioritized goalenvs buffer, and of cpprb's PER HER."""
    import torch

    from goalenvs.her import HerReplayBuffer

    torch.set_num_threads(1)
    env = fetch_like_env()()
    rows = TRANSITIONS * (EPISODE + 1) // EPISODE
    buffers = {
        name: HerReplayBuffer(
            rows, env.observation_space, env.action_space, env, seed=0, prioritized=prioritized
        )
        for name, prioritized in (("uniform", False), ("prioritized", True))
    }
    steps = episode_steps(1, np.random.default_rng(0))
    add_time = dict.fromkeys(buffers, 0.0)
    for first in range(0, TRANSITIONS, CHUNK):
        chunk = [steps[i % len(steps)] for i in range(first, first + CHUNK)]
        for name, buffer in buffers.items():
            start = time.process_time()
            for obs, next_obs, action, reward, truncated, _, terminated in chunk:
                buffer.add(obs, next_obs, action, reward, terminated, truncated)
            add_time[name] += time.process_time() - start
    result = {name: {"add": add_time[name] / TRANSITIONS} for name in buffers}
    rng = np.random.default_rng(2)
    uniform, prioritized = buffers["uniform"], buffers["prioritized"]

    def sample_update(batch: int) -> None:
        drawn = prioritized.sample(batch, device="cpu")
        prioritized.update_priorities(drawn.indices, rng.standard_normal(batch))

    samplers = {
        "uniform": lambda b: uniform.sample(b, device="cpu"),
        "prioritized": lambda b: prioritized.sample(b, device="cpu"),
        "prioritized+update": sample_update,
    }
    try:
        import cpprb
    except ImportError:
        result["cpprb"] = None
    else:
        her = cpprb_buffer(cpprb)
        samplers["cpprb"] = lambda b: her.sample(b, beta=0.4)
        samplers["cpprb+update"] = lambda b: her.update_priorities(
            her.sample(b, beta=0.4)["indexes"], np.abs(rng.standard_normal(b)) + 1e-6
        )
        result["cpprb_stored"] = int(her.get_stored_size())
    for batch in BATCHES:
        calls = 40_000 // batch + 40
        best = dict.fromkeys(samplers, float("inf"))
        for _ in range(7):
            for name, function in samplers.items():
                best[name] = min(best[name], best_time(lambda f=function, b=batch: f(b), calls, 1))
        for name, seconds in best.items():
            result.setdefault(name, {})[f"sample{batch}"] = seconds
    return result


def cpprb_buffer(cpprb: object) -> object:
    """cpprb's HindsightReplayBuffer(prioritized=True) holding 1e6 entries of Fetch's sizes.

    The goal is the first GOAL numbers of the state (cpprb derives goals from next states).
    """

    def goal_of(state: np.ndarray) -> np.ndarray:
        return state[..., :GOAL]

    def reward(next_state: np.ndarray, action: np.ndarray, goal: np.ndarray) -> np.ndarray:
        return -(np.linalg.norm(goal_of(next_state) - goal, axis=-1) > 0.05).astype(np.float32)

    her = cpprb.HindsightReplayBuffer(
        TRANSITIONS,
        {"obs": {"shape": OBS}, "act": {"shape": ACTION}, "next_obs": {"shape": OBS}},
        max_episode_len=EPISODE,
        reward_func=reward,
        goal_func=goal_of,
        goal_shape=(GOAL,),
        strategy="future",
        additional_goals=4,
        prioritized=True,
    )
    rng = np.random.default_rng(0)
    while her.get_stored_size() < TRANSITIONS:
        states = rng.standard_normal((EPISODE + 1, OBS)).astype(np.float32)
        actions = rng.uniform(-1, 1, (EPISODE, ACTION)).astype(np.float32)
        for t in range(EPISODE):
            her.add(obs=states[t], act=actions[t], next_obs=states[t + 1])
        her.on_episode_end(goal_of(rng.standard_normal(OBS).astype(np.float32)))
    return her


def run(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", *args],
        check=True,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
            ),
        },
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(transitions: int = TRANSITIONS) -> None:
    """Runs every measure in subprocesses, prints the tables and saves the raw results."""
    global TRANSITIONS
    TRANSITIONS = transitions
    os.environ["GOALENVS_BENCH_TRANSITIONS"] = str(transitions)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from evidence import append_jsonl, run_info

    record = run_info(transitions=transitions, episode_steps=EPISODE, per_n_envs={})
    print(
        f"HER buffer, Fetch-like sizes: obs {OBS}, goal {GOAL}, action {ACTION}, episodes of "
        f"{EPISODE} steps, {TRANSITIONS:.0e} transitions; sample times as torch CPU tensors; "
        "memory = RSS growth of a fresh process over construction + fill"
    )
    header = (
        f"{'n_envs':>6} {'buffer':<10} {'add us/step':>12} {'wrapped us':>11} "
        f"{'sample256 us':>13} {'sample2048 us':>14} {'RSS MB':>8} {'stored':>9}"
    )
    ratios = []
    for n_envs in (1, 8):
        times = run("timing", str(n_envs))
        sb3 = {**times["sb3"], **run("memory", "sb3", str(n_envs))}
        ours = {**times["goalenvs"], **run("memory", "goalenvs", str(n_envs))}
        floor = times["floor"]
        record["per_n_envs"][str(n_envs)] = {"sb3": sb3, "goalenvs": ours, "floor": floor}
        print(header)
        for name, r in (("sb3", sb3), ("goalenvs", ours)):
            print(
                f"{n_envs:>6} {name:<10} {r['add'] * 1e6:>12.1f} {r['add_wrapped'] * 1e6:>11.1f} "
                f"{r['sample256'] * 1e6:>13.1f} {r['sample2048'] * 1e6:>14.1f} "
                f"{r['rss'] / 2**20:>8.1f} {r['stored']:>9}"
            )
        print(
            f"{n_envs:>6} {'floor':<10} {floor['add'] * 1e6:>12.1f} "
            f"{floor['add_wrapped'] * 1e6:>11.1f} {floor['sample256'] * 1e6:>13.1f} "
            f"{floor['sample2048'] * 1e6:>14.1f}"
        )
        ratios.append(
            (
                n_envs,
                sb3["add"] / ours["add"],
                sb3["add_wrapped"] / ours["add_wrapped"],
                sb3["sample256"] / ours["sample256"],
                sb3["sample2048"] / ours["sample2048"],
                ours["rss"] / sb3["rss"],
                ours["add"] / floor["add"],
                sb3["add"] / floor["add"],
                ours["sample256"] / floor["sample256"],
                ours["sample2048"] / floor["sample2048"],
            )
        )
    print()
    print(
        f"{'n_envs':>6} {'add x faster':>13} {'wrapped x':>10} {'s256 x faster':>14} "
        f"{'s2048 x faster':>15} {'memory ratio':>13} {'add / floor':>12} "
        f"{'sb3 add / floor':>16} {'s256 / floor':>13} {'s2048 / floor':>14}"
    )
    for n_envs, *r in ratios:
        print(
            f"{n_envs:>6} {r[0]:>13.2f} {r[1]:>10.2f} {r[2]:>14.2f} {r[3]:>15.2f} {r[4]:>13.2f} "
            f"{r[5]:>12.2f} {r[6]:>16.2f} {r[7]:>13.2f} {r[8]:>14.2f}"
        )
    print("targets: add >= 2x, sample >= 10x SB3's")
    print(
        "add: the first fill (fresh memory); wrapped: a second fill over the same ring.\n"
        "add floor: the bare numpy row write of the same steps (one concatenation) into "
        "fresh storage of the same layout;\nsb3 add / floor is the most any buffer of this "
        "layout can be faster than SB3's add, whatever its Python code"
    )

    times = run("prioritized")
    print()
    print(
        f"Prioritized replay, 1 env, {TRANSITIONS:.0e} transitions (alpha 0.6, beta 0.4); "
        "x uniform = time"
    )
    print("over the uniform goalenvs buffer's in the same run")
    print(f"{'buffer':<20} {'add us/step':>12} {'sample256 us':>13} {'sample2048 us':>14} "
          f"{'s256 x uniform':>15} {'s2048 x uniform':>16}")  # fmt: skip
    uniform = times["uniform"]
    if times.get("cpprb") is None:
        print("(cpprb not importable: its rows are left out)")
    for name in ("uniform", "prioritized", "prioritized+update", "cpprb", "cpprb+update"):
        r = times.get(name)
        if not r:
            continue
        add = f"{r['add'] * 1e6:>12.1f}" if "add" in r else f"{'':>12}"
        print(
            f"{name:<20} {add} {r['sample256'] * 1e6:>13.1f} {r['sample2048'] * 1e6:>14.1f} "
            f"{r['sample256'] / uniform['sample256']:>15.2f} "
            f"{r['sample2048'] / uniform['sample2048']:>16.2f}"
        )
    if times.get("cpprb_stored"):
        print(f"cpprb stored entries: {times['cpprb_stored']} (relabeled copies included)")
    print("target: prioritized sample <= 3x uniform")
    record["prioritized"] = times
    record["load_after"] = run_info()["load"]
    print("saved to", append_jsonl("her_buffer.jsonl", record))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1:3] == ["--worker", "timing"]:
        print(json.dumps(timing_worker(int(sys.argv[3]))))
    elif sys.argv[1:] == ["--worker", "prioritized"]:
        print(json.dumps(prioritized_worker()))
    elif len(sys.argv) == 5 and sys.argv[1:3] == ["--worker", "memory"]:
        print(json.dumps(memory_worker(sys.argv[3], int(sys.argv[4]))))
    elif sys.argv[1:2] == ["--transitions"] and len(sys.argv) == 3:
        main(int(sys.argv[2]))
    else:
        main()
