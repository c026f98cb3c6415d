"""The HER paper's manipulation table with DDPG+HER and each env's preset: Fetch Push,
PickAndPlace and Slide, the Shadow Hand's Reach, EggFull, PenRotate and BlockRotateZ,
panda-gym's Push and PickAndPlace, highway-env's parking-v0.

Runs ``goalenvs train`` (the CLI a user runs, nothing else) per seed until its eval
success first reaches 0.9 (``--stop-success 0.9``; FetchSlide's runs go on to their cap,
as its mark reads their last five evaluations), an env-step cap or a wall-clock budget,
whichever comes first; keeps each run's ``progress.csv`` and a JSON of what ran
where (command, config, commit, machine, the load once a minute, versions, the floor)
under ``benchmarks/results/manipulation/``, and draws eval success against env steps and
against minutes into ``docs/images/``. Run folders given by ``--out-root`` keep their
replay buffer with every epoch: running the same command again resumes them.

    python benchmarks/fetch.py train --task push --seeds 0 1 2 --budget 3600
    python benchmarks/fetch.py train --task slide --seeds 0 --max-env-steps 1500000 \
        --budget 7200 --out-root /data/runs
    python benchmarks/fetch.py record --task pick_and_place --seed 0 --run RUN --commit C \
        --train-command "goalenvs train ..." --load-log load.log   # a run trained by hand
    python benchmarks/fetch.py plot                  # tables and PNGs from the kept logs

Seconds are the trainer's own ``wall_time`` (training and the per-epoch evaluation; the
~20-30 s of imports and env construction before the first cycle are not counted).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import itertools
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's goalenvs, also for the launched trainers

from evidence import child_env, machine, portable  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "manipulation"
IMG = ROOT / "docs" / "images"
TASKS = {
    "push": "gymnasium_robotics:FetchPush-v4",
    "pick_and_place": "gymnasium_robotics:FetchPickAndPlace-v4",
    "slide": "gymnasium_robotics:FetchSlide-v4",
    "panda_push": "panda_gym:PandaPush-v3",
    "panda_pick_and_place": "panda_gym:PandaPickAndPlace-v3",
    "parking": "highway_env:parking-v0",
    "parking_no_walls": "highway_env:parking-v0",
    "hand_reach": "gymnasium_robotics:HandReach-v3",
    "hand_egg_full": "goalenvs.wrappers.hand_goals:HandManipulateEggFullBatched-v1",
    "hand_pen_rotate": "goalenvs.wrappers.hand_goals:HandManipulatePenRotateBatched-v1",
    "hand_block_rotate_z": "goalenvs.wrappers.hand_goals:HandManipulateBlockRotateZBatched-v1",
}
# The goalenvs train flags of a task beyond its env id, and how its table names them:
# parking-v0 without its walls never ends an episode by a crash into one, so it runs
# under a time limit (highway-env's own is 100 s of simulated driving, 500 steps).
TASK_FLAGS = {
    "parking_no_walls": [
        "--env-kwargs",
        '{"config": {"add_walls": false}}',
        "--max-episode-steps",
        "100",
    ]
}
TASK_NOTES = {"parking_no_walls": " with `config: {add_walls: false}`, 100-step episodes"}
#: Where a task's runs stop on success: 0.9, the mark, unless named here. FetchSlide's
#: mark (0.8 within 1,000,000 env steps and its last five evaluations >= 0.7) reads the
#: run to its cap, so its runs stop only at a perfect evaluation.
#: The hand manipulation marks (0.40 on EggFull, 0.25 on PenRotate within 2M env steps)
#: are read at their first evaluation there; their runs go on to the cap for the curve.
STOP_SUCCESS = {
    "slide": 1.0,
    "hand_egg_full": 1.0,
    "hand_pen_rotate": 1.0,
    "hand_block_rotate_z": 1.0,
}
TARGETS = (0.5, 0.7, 0.9)  # 0.7: the FetchSlide mark


def read_progress(path: str | os.PathLike) -> list[dict[str, float]]:
    """The rows of a run's progress.csv as floats (one per epoch)."""
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def first_reaching(rows: list[dict[str, float]], target: float) -> dict[str, float] | None:
    """The first epoch row whose eval success is at least ``target`` (None if none is)."""
    return next((r for r in rows if r["eval_success"] >= target), None)


class LoadLog:
    """The machine's load average once a minute while a run trains (a background thread),
    so a figure in minutes names the load it was measured under."""

    def __init__(self, every: float = 60.0) -> None:
        self.samples: list[tuple[float, float]] = []  # (seconds since start, 1-minute load)
        self._every = every
        self._stop = threading.Event()
        self._start = time.time()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        while not self._stop.is_set():
            self.samples.append((round(time.time() - self._start), os.getloadavg()[0]))
            self._stop.wait(every)

    def stop(self) -> dict[str, Any]:
        """Stops sampling; the summary a run's JSON keeps."""
        self._stop.set()
        self._thread.join()
        return load_summary([[t, round(load, 2)] for t, load in self.samples], round(self._every))


def load_summary(samples: list[list[float]], every_s: int = 60) -> dict[str, Any]:
    """What a run's JSON keeps of its load: ``samples`` (``[seconds into the run, 1-minute
    load]``, one every ``every_s``) with their least, most and mean."""
    loads = [load for _, load in samples]
    return {
        "every_s": every_s,
        "min": round(min(loads), 2),
        "max": round(max(loads), 2),
        "mean": round(sum(loads) / len(loads), 2),
        "samples": samples,
    }


def train(
    task: str,
    seed: int,
    budget: float,
    extra: list[str],
    out: Path | None = None,
    max_env_steps: int | None = None,
) -> Path:
    """Trains one seed for ``budget`` seconds (then SIGINT: the trainer stops after the
    cycle, keeping every committed epoch), or resumes the run in ``out`` when it holds one,
    and keeps its progress.csv and JSON in RESULTS. The replay buffer is saved with every
    epoch, so a run cut by its budget (or by a kill) continues with ``--resume``; the kept
    JSON then keeps the first part's commit, command and load, and ``resumed`` says where
    and at which commit it went on. ``max_env_steps`` caps the run (its epochs),
    ``--stop-success`` ends it at the mark (:data:`STOP_SUCCESS`), a resume too."""
    load_before = os.getloadavg()
    out = out or Path(tempfile.mkdtemp(prefix=f"fetch_{task}_s{seed}_")) / "run"
    command = train_command(task, seed, out, extra, max_env_steps)
    env = child_env(ROOT, OMP_NUM_THREADS="1")
    env.pop("MUJOCO_GL", None)
    print(" ".join(command[1:]), flush=True)
    load = LoadLog()
    proc = subprocess.Popen(command, cwd=ROOT, env=env)
    try:
        proc.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=300)
    if not (out / "progress.csv").is_file():
        load.stop()
        raise SystemExit(
            f"{task} seed {seed}: goalenvs train exited with {proc.returncode} before its "
            "first epoch (its error is above); nothing to keep"
        )
    return record(task, seed, out, load_before, load.stop(), command)


def train_command(
    task: str, seed: int, out: Path, extra: list[str], max_env_steps: int | None = None
) -> list[str]:
    """The ``goalenvs train`` command of one seed of ``task`` into ``out``: a new run with
    the task's flags, ``extra`` and as many epochs as ``max_env_steps`` takes, or the
    resume of the run ``out`` holds; either stops at the task's :data:`STOP_SUCCESS`."""
    env_id = TASKS[task]
    stop = ["--stop-success", f"{STOP_SUCCESS.get(task, 0.9):g}"]
    if (out / "config.json").is_file():
        # the run's config.json holds its flags (a --preset cannot change on a resume)
        command = [sys.executable, "-m", "goalenvs", "train", "--resume", str(out), "--quiet"]
        command += stop
        if max_env_steps is not None:  # a run capped before continues to the new cap
            command += ["--max-env-steps", str(max_env_steps)]
        return command
    command = [sys.executable, "-m", "goalenvs", "train", env_id, "--seed", str(seed)]
    command += ["--quiet", "--out", str(out), "--save-buffer", *stop]
    command += TASK_FLAGS.get(task, [])
    if max_env_steps is not None:
        steps = epoch_env_steps(env_id, TASK_FLAGS.get(task, []) + extra)
        command += ["--epochs", str(-(-max_env_steps // steps))]
    return command + extra


def load_from_log(path: Path, run: Path) -> dict[str, Any]:
    """The load summary of a run folder's training time from a log of ``unix-time load1
    load5 load15`` lines (one a minute, taken while it trained)."""
    start = (run / "config.json").stat().st_mtime
    end = (run / "progress.csv").stat().st_mtime
    samples = []
    for line in path.read_text().splitlines():
        stamp, load1, *_ = line.split()
        if start <= float(stamp) <= end:
            samples.append([round(float(stamp) - start), float(load1)])
    return load_summary(samples)


def epoch_env_steps(env_id: str, extra: list[str]) -> int:
    """Env steps in one epoch of ``goalenvs train env_id *extra`` (from its config)."""
    command = [sys.executable, "-m", "goalenvs", "train", env_id, *extra, "--show-config"]
    env = child_env(ROOT)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    config = json.loads(done.stdout)
    return config["n_cycles"] * config["num_envs"] * (config["rollout_steps"] or 50)


def record(
    task: str,
    seed: int,
    run: Path,
    load_before: Sequence[float],
    load: dict[str, Any] | None,
    command: list[str],
    commit: str | None = None,
    load_after: Sequence[float] | None = None,
    floor: bool = True,
) -> Path:
    """Keeps ``run``'s progress.csv as RESULTS/<task>_s<seed>.csv beside a JSON of what
    ran where: the command, config, commit, machine, load, versions and the floor."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    target = RESULTS / f"{task}_s{seed}.csv"
    earlier = _earlier_part(target, run / "progress.csv")
    shutil.copyfile(run / "progress.csv", target)
    meta = {
        "task": task,
        "env_id": TASKS[task],
        "seed": seed,
        "command": " ".join(["goalenvs", *command[3:]]),
        "config": json.loads((run / "config.json").read_text()),
        "commit": commit or _commit(),
        "machine": machine(),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in (load_after or os.getloadavg())],
        "load": load,
        "python": platform.python_version(),
        "versions": _versions(),
    }
    if earlier is not None:
        meta = _join_resumed(*earlier, meta)
    rows = read_progress(target)
    meta["env_steps_per_s"] = round(rows[-1]["env_steps"] / rows[-1]["wall_time"], 1)
    # The floor is measured alone on the machine; beside another run it says nothing.
    meta["floor"] = measure_floor(meta["config"]) if floor else None
    meta["ratio_to_floor"] = (
        round(meta["env_steps_per_s"] / meta["floor"]["floor_env_steps_per_s"], 3)
        if floor
        else None
    )
    if task.startswith("parking"):
        meta["best_policy"] = parking_outcomes(run)
    folders = {run.resolve().parent: "runs"}
    preset = preset_file(command)
    if preset is not None and not preset.is_relative_to(ROOT):
        folders[preset.parent] = "presets"  # a preset file of the machine's: by its name
    meta = portable(meta, folders)
    (RESULTS / f"{task}_s{seed}.json").write_text(json.dumps(meta, indent=1) + "\n")
    return target


def _earlier_part(kept_csv: Path, progress: Path) -> tuple[dict[str, Any], dict[str, float]] | None:
    """The kept JSON of this run's earlier part and its last progress row, when
    ``kept_csv`` (what was kept before) holds fewer epochs than the run's ``progress`` and
    each of them as the run has it: the run was resumed, and its record must keep what the
    first part ran with. None otherwise (a new run in the same place replaces the old
    record)."""
    kept_json = kept_csv.with_suffix(".json")
    if not (kept_csv.is_file() and kept_json.is_file()):
        return None
    before = kept_csv.read_text().splitlines()
    now = progress.read_text().splitlines()
    if len(before) < 2 or len(before) >= len(now) or now[: len(before)] != before:
        return None
    return json.loads(kept_json.read_text()), read_progress(kept_csv)[-1]


def _join_resumed(
    earlier: dict[str, Any], last: dict[str, float], meta: dict[str, Any]
) -> dict[str, Any]:
    """The record of a resumed run: ``meta`` (what the resuming part ran) keeping the first
    part's commit, command and load before it (``earlier``, whose last epoch was ``last``),
    with ``resumed`` saying where and at which commit it went on (and, under ``earlier``,
    where an earlier resume did), its lever, and the load samples of both parts on the
    run's own clock."""
    first_commit = str(earlier["commit"]).split(" (resumed at ")[0]
    joined = {**meta, "command": earlier["command"]}
    joined["load_before"] = earlier["load_before"]
    joined["commit"] = (
        first_commit
        if meta["commit"] == first_commit
        else f"{first_commit} (resumed at {meta['commit']})"
    )
    joined["resumed"] = {
        "at_env_steps": int(last["env_steps"]),
        "commit": meta["commit"],
        "command": meta["command"],
        **({"earlier": earlier["resumed"]} if "resumed" in earlier else {}),
    }
    if "lever" in earlier:  # what the run tried stays what its first part tried
        joined["lever"] = earlier["lever"]
    both = [(earlier.get("load"), 0.0), (meta.get("load"), last["wall_time"])]
    parts: list[tuple[dict[str, Any], float]] = [(p, shift) for p, shift in both if p]
    if parts:
        samples = [[round(t + shift), load] for part, shift in parts for t, load in part["samples"]]
        joined["load"] = load_summary(samples, parts[0][0]["every_s"])
    return joined


def preset_file(command: Sequence[str]) -> Path | None:
    """The preset file a train ``command`` names after ``--preset`` (resolved), or None
    when it names none or a preset by name."""
    for flag, value in itertools.pairwise(command):
        if flag == "--preset" and Path(value).is_file():
            return Path(value).resolve()
    return None


PARKING_EPISODES = 100


def parking_outcomes(run: Path, episodes: int = PARKING_EPISODES) -> dict[str, Any]:
    """Success and crash rate of ``run``'s best policy (deterministic) on ``episodes``
    fixed episodes of its parking env (the run's env kwargs and episode length), as
    ``highway_parking.evaluate`` counts them: success = ``info["is_success"]`` at the
    episode's end, a crash = an episode that ended with ``info["crashed"]``."""
    import gymnasium as gym
    import highway_parking

    from goalenvs.train.policy import load_policy

    config = json.loads((run / "config.json").read_text())
    policy = load_policy(run / "policy_best.pt")
    env = gym.make(config["env_id"], **config.get("env_kwargs", {}))
    if config.get("max_episode_steps"):
        env = gym.wrappers.TimeLimit(env, config["max_episode_steps"])
    success, crash_rate = highway_parking.evaluate(policy.predict, episodes, env)
    first = highway_parking.EVAL_SEED
    return {
        "policy": "policy_best.pt",
        "episodes": episodes,
        "seeds": f"{first}-{first + episodes - 1}",
        "success": success,
        "crash_rate": crash_rate,
    }


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True)
    return done.stdout.decode().strip()


def measure_floor(config: dict, cycles: int = 3) -> dict[str, float]:
    """The floor of one training cycle of ``config`` (a run's config.json) on this machine:
    bare env steps (gymnasium's SyncVectorEnv, random actions, no acting or storing) plus
    bare gradient steps of the same sizes in the run's precision (plain torch MLPs, DDPG's
    losses and target networks, random batches: no sampling, no normalizer). Returns
    seconds per cycle of each and the env steps per second of a cycle made of nothing
    else."""
    import importlib

    import gymnasium as gym
    import torch

    module, _, bare_id = config["env_id"].rpartition(":")
    if module:
        importlib.import_module(module)
    num_envs, steps = config["num_envs"], config["rollout_steps"]
    envs = gym.make_vec(bare_id, num_envs=num_envs, vectorization_mode="sync")
    envs.reset(seed=0)
    envs.action_space.seed(0)
    start = time.perf_counter()
    for _ in range(cycles * steps):
        envs.step(envs.action_space.sample())
    env_seconds = (time.perf_counter() - start) / cycles
    spaces = envs.single_observation_space
    obs_dim = spaces["observation"].shape[0] + spaces["desired_goal"].shape[0]
    act_dim = envs.single_action_space.shape[0]
    envs.close()

    torch.set_num_threads(config["torch_threads"])
    hidden = config["hidden_sizes"]

    def mlp(n_in: int, n_out: int) -> torch.nn.Sequential:
        layers: list[torch.nn.Module] = []
        for width in hidden:
            layers += [torch.nn.Linear(n_in, width), torch.nn.ReLU()]
            n_in = width
        return torch.nn.Sequential(*layers, torch.nn.Linear(n_in, n_out))

    actor, critic = mlp(obs_dim, act_dim), mlp(obs_dim + act_dim, 1)
    actor_target, critic_target = mlp(obs_dim, act_dim), mlp(obs_dim + act_dim, 1)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
    batch = config["batch_size"]
    gen = torch.Generator().manual_seed(0)

    from goalenvs.agents.precision import update_autocast

    # The run's arithmetic: bf16 autocast where its precision resolves to it on this CPU.
    arithmetic = update_autocast(config.get("precision", "fp32"), torch.device("cpu"))

    def update() -> None:
        with arithmetic:
            losses()

    def losses() -> None:
        obs, next_obs = torch.randn(batch, obs_dim, generator=gen), torch.randn(batch, obs_dim)
        act, rew = torch.rand(batch, act_dim) * 2 - 1, -torch.rand(batch, 1)
        with torch.no_grad():
            next_act = torch.tanh(actor_target(next_obs))
            target = rew + 0.98 * critic_target(torch.cat([next_obs, next_act], 1))
        critic_loss = (critic(torch.cat([obs, act], 1)) - target).pow(2).mean()
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()
        pi = torch.tanh(actor(obs))
        actor_loss = -critic(torch.cat([obs, pi], 1)).mean() + pi.pow(2).mean()
        actor_opt.zero_grad()
        actor_loss.backward()
        actor_opt.step()

    for _ in range(3):
        update()
    start = time.perf_counter()
    for _ in range(cycles * config["n_batches"]):
        update()
    update_seconds = (time.perf_counter() - start) / cycles
    with torch.no_grad():  # the target move, once a cycle
        for net, target in ((actor, actor_target), (critic, critic_target)):
            for p, q in zip(net.parameters(), target.parameters(), strict=True):
                q.mul_(0.95).add_(p, alpha=0.05)
    per_cycle = num_envs * steps
    return {
        "env_seconds_per_cycle": round(env_seconds, 4),
        "update_seconds_per_cycle": round(update_seconds, 4),
        "floor_env_steps_per_s": round(per_cycle / (env_seconds + update_seconds), 1),
        "cycles_timed": float(cycles),
    }


#: progress.csv's training time of an epoch: env steps, acting, storing, sampling, updates.
TRAINING_TIME = ("time_env", "time_act", "time_store", "time_sample", "time_update")


def compute(tasks: Sequence[str], rounds: int = 3, cycles: int = 5) -> dict[str, Any]:
    """Training seconds per env step of each task's preset, measured side by side: each
    round trains every task in turn (``goalenvs train ENV`` with no flags but 2 epochs of
    ``cycles`` cycles and 10 eval episodes, a fresh run folder) and reads its second
    epoch's training time (:data:`TRAINING_TIME`; evaluation left out, the first epoch's
    warm-up too) over that epoch's env steps. Returns per task each round's milliseconds
    per env step, their median, the median over the first task's, and the precision the
    run resolved."""
    measured: dict[str, dict[str, Any]] = {task: {"rounds": []} for task in tasks}
    with tempfile.TemporaryDirectory() as tmp:
        for index, task in itertools.product(range(rounds), tasks):
            out = Path(tmp) / f"{task}_r{index}"
            command = [sys.executable, "-m", "goalenvs", "train", TASKS[task], "--seed", "0"]
            command += ["--quiet", "--out", str(out), "--epochs", "2", "--cycles", str(cycles)]
            command += ["--n-eval-episodes", "10", *TASK_FLAGS.get(task, [])]
            done = subprocess.run(command, cwd=ROOT, env=child_env(ROOT), capture_output=True)
            if done.returncode != 0:
                tail = done.stderr.decode(errors="replace")[-1500:]
                raise SystemExit(f"compute: {task} exited {done.returncode}: {tail}")
            first, second = read_progress(out / "progress.csv")[:2]
            steps = second["env_steps"] - first["env_steps"]
            seconds = sum(second[part] for part in TRAINING_TIME)
            measured[task]["rounds"].append(round(1000 * seconds / steps, 4))
            config = json.loads((out / "config.json").read_text())
            measured[task]["precision"] = config.get("plan", {}).get(
                "precision", config["precision"]
            )
    for task in tasks:
        ms = sorted(measured[task]["rounds"])
        measured[task]["ms_per_env_step"] = ms[len(ms) // 2]
    base = measured[tasks[0]]["ms_per_env_step"]
    for task in tasks:
        measured[task]["x_first"] = round(measured[task]["ms_per_env_step"] / base, 3)
    return measured


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("goalenvs", "torch", "gymnasium", "gymnasium-robotics", "mujoco", "panda-gym"):
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    return found


def table(task: str, runs: dict[str, list[dict[str, float]]], folder: Path = RESULTS) -> str:
    """Markdown: per run the env steps and seconds to each target, best and final success,
    env steps/s, its ratio to the floor and the load (from the run's JSON in ``folder``,
    when kept)."""
    head = ["run", "epochs", "env steps", "seconds"]
    for t in TARGETS:
        head += [f"env steps to {t}", f"seconds to {t}"]
    head += ["best eval success", "final eval success", "env steps/s", "x floor", "load"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, rows in runs.items():
        last = rows[-1]
        cells = [name, f"{last['epoch']:.0f}", f"{last['env_steps']:,.0f}"]
        cells.append(f"{last['wall_time']:.0f}")
        for t in TARGETS:
            hit = first_reaching(rows, t)
            cells += ["-", "-"] if hit is None else [
                f"{hit['env_steps']:,.0f}", f"{hit['wall_time']:.0f}"
            ]  # fmt: skip
        best = max(r["eval_success"] for r in rows)
        cells += [f"{best:.2f}", f"{last['eval_success']:.2f}"]
        meta_path = folder / f"{task}_{name}.json"
        meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
        floor = meta.get("ratio_to_floor")
        # The load over the run when it was logged, else its ends.
        summary = meta.get("load") or {}
        load = summary.get("min"), summary.get("max")
        if None in load:
            load = meta.get("load_before", [None])[0], meta.get("load_after", [None])[0]
        cells += [
            f"{meta['env_steps_per_s']:.0f}" if "env_steps_per_s" in meta else "-",
            "-" if floor is None else f"{floor:.2f}",
            "-" if None in load else f"{load[0]:.1f}-{load[1]:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(task: str, runs: dict[str, list[dict[str, float]]], path: Path) -> Path:
    """Eval success vs env steps and vs seconds, one line per run, a small PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(9, 3.2), dpi=72)
    FigureCanvasAgg(fig)
    ax_steps, ax_time = fig.subplots(1, 2, sharey=True)
    for name, rows in runs.items():
        success = [r["eval_success"] for r in rows]
        ax_steps.plot([r["env_steps"] for r in rows], success, label=name)
        ax_time.plot([r["wall_time"] / 60 for r in rows], success, label=name)
    ax_steps.set(xlabel="env steps", ylabel="eval success", ylim=(-0.03, 1.03))
    # thousands, so that the tick labels of a short run do not run into each other
    ax_steps.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:.0f}k"))
    ax_time.set(xlabel="minutes of training (2 shared cores)")
    for ax in (ax_steps, ax_time):
        for t in TARGETS:
            ax.axhline(t, color="grey", lw=0.6, ls=":")
        ax.grid(alpha=0.3)
    ax_time.legend(loc="upper left", fontsize="small")
    fig.suptitle(f"{TASKS[task]}: DDPG+HER, its preset, one process")
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.16, top=0.87, wspace=0.08)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


def kept_runs(
    extra: list[str], folder: Path = RESULTS
) -> dict[str, dict[str, list[dict[str, float]]]]:
    """The kept logs by task (``<task>_s<seed>.csv`` in ``folder``), plus ``name=path``
    pairs given."""
    runs: dict[str, dict[str, list[dict[str, float]]]] = {task: {} for task in TASKS}
    paths = {p.stem: p for p in sorted(folder.glob("*_s*.csv"))}
    for item in extra:
        name, _, path = item.partition("=")
        paths[name] = Path(path)
    for name, path in paths.items():
        match = re.fullmatch(r"(\w+?)_(s\d+)", name)
        if match is None or match.group(1) not in TASKS:
            raise SystemExit(f"--runs: {name!r} must be <task>_s<seed>, task one of {list(TASKS)}")
        runs[match.group(1)][match.group(2)] = read_progress(path)
    return runs


def main(argv: list[str] | None = None) -> None:
    """Command line: ``train`` runs seeds, ``plot`` prints tables and draws the PNGs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("train", help="train seeds for a budget, keep their progress.csv")
    run.add_argument("--task", choices=list(TASKS), default="push")
    run.add_argument("--seeds", type=int, nargs="+", default=[0])
    run.add_argument("--budget", type=float, default=3600.0, help="seconds per seed")
    run.add_argument("--max-env-steps", type=int, help="cap each run at this many env steps")
    run.add_argument(
        "--out-root",
        type=Path,
        help="keep run folders here (<task>_s<seed>); a folder that holds a run is resumed",
    )
    run.add_argument("extra", nargs="*", help="more goalenvs train flags (after --)")
    keep = sub.add_parser("record", help="keep a run folder trained outside this script")
    keep.add_argument("--task", choices=list(TASKS), required=True)
    keep.add_argument("--seed", type=int, required=True)
    keep.add_argument("--run", type=Path, required=True, help="the run folder")
    keep.add_argument("--commit", required=True, help="the commit it trained with")
    keep.add_argument("--load-log", type=Path, help="lines of 'unix-time load1 load5 load15'")
    keep.add_argument("--train-command", required=True, help="the goalenvs train command it ran")
    floor = sub.add_parser("floor", help="measure the floor of kept runs again, into their JSON")
    floor.add_argument("names", nargs="+", help="kept runs, e.g. push_s0")
    side = sub.add_parser(
        "compute", help="training seconds per env step of tasks' presets, side by side"
    )
    side.add_argument("tasks", nargs="+", choices=list(TASKS), help="the first is the base")
    side.add_argument("--rounds", type=int, default=3)
    side.add_argument("--cycles", type=int, default=5, help="cycles of each measured epoch")
    outcomes = sub.add_parser(
        "outcomes", help="success and crash rate of a kept parking run's best policy, into its JSON"
    )
    outcomes.add_argument("name", help="a kept parking run, e.g. parking_s0")
    outcomes.add_argument("--run", type=Path, required=True, help="its run folder")
    draw = sub.add_parser("plot", help="tables and PNGs from the kept logs")
    draw.add_argument("--runs", nargs="*", default=[], help="name=progress.csv pairs")
    args = parser.parse_args(argv)
    if args.command == "train":
        if args.budget <= 0:
            raise SystemExit(f"--budget must be > 0 seconds, got {args.budget}")
        for seed in args.seeds:
            start = time.perf_counter()
            out = args.out_root / f"{args.task}_s{seed}" if args.out_root else None
            path = train(args.task, seed, args.budget, args.extra, out, args.max_env_steps)
            print(f"seed {seed}: {time.perf_counter() - start:.0f} s, log {path}", flush=True)
        return
    if args.command == "record":
        load = load_from_log(args.load_log, args.run) if args.load_log is not None else None
        ends = [load["samples"][0][1], load["samples"][-1][1]] if load else [math.nan] * 2
        command = ["python", "-m", *args.train_command.split()]
        path = record(
            args.task, args.seed, args.run, [ends[0]], load, command, args.commit, [ends[1]],
            floor=False,
        )  # fmt: skip
        print(f"kept {path}")
        return
    if args.command == "floor":
        for name in args.names:
            path = RESULTS / f"{name}.json"
            if not path.is_file():
                raise SystemExit(f"floor: no kept run {name!r} ({path} is missing)")
            meta = json.loads(path.read_text())
            meta["floor"] = measure_floor(meta["config"])
            meta["ratio_to_floor"] = round(
                meta["env_steps_per_s"] / meta["floor"]["floor_env_steps_per_s"], 3
            )
            path.write_text(json.dumps(meta, indent=1) + "\n")
            print(name, meta["floor"], "ratio", meta["ratio_to_floor"])
        return
    if args.command == "compute":
        if args.rounds < 1 or args.cycles < 1:
            raise SystemExit(
                f"compute: --rounds and --cycles must be >= 1, got {args.rounds}, {args.cycles}"
            )
        from evidence import append_jsonl, load, run_info

        info = run_info()
        info["tasks"] = compute(args.tasks, args.rounds, args.cycles)
        info["load_after"] = load()
        print(json.dumps(info["tasks"], indent=1))
        print("kept", append_jsonl("compute.jsonl", info))
        return
    if args.command == "outcomes":
        path = RESULTS / f"{args.name}.json"
        if not path.is_file():
            raise SystemExit(f"outcomes: no kept run {args.name!r} ({path} is missing)")
        if not (args.run / "policy_best.pt").is_file():
            raise SystemExit(f"outcomes: --run {args.run} holds no policy_best.pt")
        meta = json.loads(path.read_text())
        meta["best_policy"] = parking_outcomes(args.run)
        path.write_text(json.dumps(meta, indent=1) + "\n")
        print(args.name, meta["best_policy"])
        return
    for task, runs in kept_runs(args.runs).items():
        if not runs:
            continue
        print(f"\n{TASKS[task]}\n\n{table(task, runs)}")
        print(plot(task, dict(sorted(runs.items())), IMG / f"fetch_{task}.png"))


if __name__ == "__main__":
    main()
