"""The HER training loop: epochs of (collect, update, move targets) cycles, then evaluate.

``train(config)`` builds a :class:`Trainer` and runs it. A trainer is its parts, built
top to bottom in :meth:`Trainer.__init__`:

- the envs and where they run (:class:`~goalenvs.train.collectors.Collector`: numpy
  twins or any goal env in the trainer's process or in worker processes, or torch twins
  on a device),
- the agent (:mod:`goalenvs.agents`: networks, normalizer, the update's equations) and the
  replay buffer beside the envs,
- the run folder (:class:`~goalenvs.train.run_folder.RunFolder`: config.json,
  progress.csv, checkpoints, resume) and the progress display,

and :meth:`Trainer.run` is the loop::

    for each epoch:
        for each of n_cycles:
            collect rollout_steps steps of every env  (with overlap: the next cycle's,
            store them in the buffer                    in the background, beside the
            n_batches updates, then the targets move    updates)
        evaluate; commit the epoch to the run folder

On the device path (``env_device``: "device", or "auto" with ``device`` cuda) the
training and eval envs are the torch twins on the training device, the replay buffer
keeps its tensors there, and collecting, exploring, normalizing and evaluating are tensor
operations on it. Resuming restores the networks, optimizers, normalizer, replay buffer
(``save_buffer``) and every random generator, per worker; the envs start new episodes
(an episode in progress at the save is stored as cut). Where no episode is in progress at
an epoch's end (``rollout_steps`` = the episode length and no early termination, as
Fetch), a resumed run draws exactly what the uninterrupted run draws.

Ctrl-C or SIGTERM (what SLURM, Kubernetes and torchrun send before a kill) stops the
run after the current cycle (all workers agree on it); the folder keeps the last
finished epoch, and the cycles of the unfinished one are dropped.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from gymnasium import spaces

import goalenvs  # noqa: F401  (importing registers the goalenvs ids)
from goalenvs.agents import distributed
from goalenvs.agents.config import TrainConfig
from goalenvs.agents.learner import Learner
from goalenvs.agents.registry import make_agent
from goalenvs.core import GOAL_KEYS
from goalenvs.train.checkpoint import space_to_dict
from goalenvs.train.collectors import Collector, make_backend
from goalenvs.train.display import Display, mean_or_nan
from goalenvs.train.env_workers import (
    check_env_workers,
    default_env_workers,
    machine_cores,
    measure_step_seconds,
)
from goalenvs.train.envs import (
    device_twin_problem,
    goal_function,
    has_native_twin,
    probe_rewards,
    return_range,
    scalar_info_keys,
    validate_training_env,
)
from goalenvs.train.run_folder import (
    Counters,
    Restored,
    RunFolder,
    capture_random_state,
    restore_random_state,
)

logger = logging.getLogger(__name__)


class TrainingError(RuntimeError):
    """Training cannot go on (a loss became NaN or infinite)."""


@dataclass
class TrainResult:
    """What :func:`train` returns."""

    run_dir: Path  # the run folder
    best_success_rate: float  # best eval success rate over all epochs (resumed ones too)
    final_success_rate: float  # eval success rate of the last epoch
    epochs: int  # epochs completed (resumed ones included)
    env_steps: int  # env steps collected (over all workers, resumed ones included)
    wall_time: float  # seconds of training (resumed runs add up)
    interrupted: bool  # True when Ctrl-C or SIGTERM stopped the run
    history: list[dict[str, Any]] = field(default_factory=list)  # progress rows of this call

    @property
    def best_policy(self) -> Path:
        """Path of ``policy_best.pt``."""
        return self.run_dir / "policy_best.pt"

    @property
    def latest_policy(self) -> Path:
        """Path of ``policy_latest.pt``."""
        return self.run_dir / "policy_latest.pt"


def training_device(name: str) -> torch.device:
    """The device ``config.device`` names ("auto": cuda when torch sees one, else cpu)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked but torch sees no CUDA device")
    return torch.device(name)


@dataclass(frozen=True)
class Workers:
    """This worker's place in the run: its device, rank and the number of workers."""

    device: torch.device  # where this worker trains (its own GPU in a multi-GPU run)
    rank: int  # 0 for the main worker (the one that writes the run folder)
    world: int  # number of workers (1 without torch.distributed)
    owns_group: bool  # True when this run created the process group (and destroys it)


def join_workers(device_name: str) -> Workers:
    """Joins the process group torchrun describes, if any, and picks this worker's device."""
    device = training_device(device_name)
    owns_group = distributed.init_from_env(device)
    rank, world = distributed.rank(), distributed.world_size()
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    return Workers(device, rank, world, owns_group)


class Trainer:
    """One training run (one worker of a multi-worker run): its parts, and the loop."""

    def __init__(self, config: TrainConfig, callback: Callable | None = None) -> None:
        """Builds the run's parts in the order they depend on each other: this worker's
        place, the env and its episode schedule, where the envs run, the agent, the
        replay buffer, the run folder."""
        cfg = self.config = config
        if cfg.tensorboard:
            try:
                importlib.import_module("torch.utils.tensorboard")
            except ImportError as exc:
                raise RuntimeError(
                    "tensorboard=True needs torch.utils.tensorboard, which could not be "
                    f"imported ({exc}); install it with `pip install tensorboard`, or train "
                    "without it"
                ) from None
        self.callback = callback
        self.notes: list[str] = []
        workers = join_workers(cfg.device)
        self.workers = workers
        self.device, self.rank, self.world = workers.device, workers.rank, workers.world
        self.main = workers.rank == 0
        torch.set_num_threads(self._torch_threads())
        if self.world > 1:
            self.note(
                f"{self.world} workers, torch.distributed backend "
                f"{torch.distributed.get_backend()} on {self.device.type}"
            )

        # A failed build closes what it had opened (worker processes included).
        with contextlib.ExitStack() as opened:
            self.env = validate_training_env(cfg.env_id, cfg.env_kwargs, cfg.algo)
            opened.callback(self.env.close)
            # A goal Dict: validate_training_env checked it.
            self.observation_space = cast(spaces.Dict, self.env.observation_space)
            self.action_space = self.env.action_space
            self.horizon, self.rollout_steps, self.gamma = self._episode_schedule()
            self._check_buffer_fits()
            keys = cfg.info_keys
            self.info_keys = keys if keys is not None else scalar_info_keys(self.env)

            self.on_device = self._resolve_env_device()
            self.replay_on_device = self._resolve_replay_device()
            env_workers = self._env_workers()
            self.collector = Collector(
                make_backend(
                    self.on_device,
                    cfg.env_id,
                    cfg.env_kwargs,
                    self.device,
                    replay_on_device=self.replay_on_device,
                ),
                cfg.num_envs,
                cfg.n_eval_episodes,
                self.rollout_steps,
                self.info_keys,
                workers=env_workers,
                overlap=self._overlap(env_workers),
            )
            opened.callback(self.collector.close)
            self.compute_reward, self.compute_terminated = self._goal_functions()

            seed = cfg.seed + self.rank
            torch.manual_seed(cfg.seed)
            self.agent = make_agent(
                cfg, self.observation_space, self.action_space, self.gamma, seed
            )
            self.agent.to(self.device)
            self.agent.noise_generator()  # made now, so that a resume finds it to restore
            distributed.broadcast_module(self.agent)
            self.agent.set_return_range(*self._target_clip())
            self.learner = self._new_learner()

            self.buffer = self.collector.backend.new_buffer(
                cfg.buffer_size // self.world,
                self.compute_reward,
                observation_space=self.observation_space,
                action_space=self.action_space,
                info_keys=self.info_keys,
                compute_terminated=self.compute_terminated,
                seed=seed,
                **cfg.her_settings(),
            )
            self.run_folder = RunFolder(
                Path(cfg.resume or cfg.out or self._default_run_dir()),
                cfg,
                rank=self.rank,
                world=self.world,
                describe=self._describe(),
                loss_names=self.agent.loss_names,
                buffer_file=f"buffer_rank{self.rank}.{self.collector.backend.buffer_suffix}",
                device=self.device,
            )
            opened.pop_all()  # built: close() closes them from now on
        self.counters = Counters()
        self.history: list[dict[str, Any]] = []
        self.started = False  # see start()
        self.success = 0.0  # the eval success of the last epoch (a resumed one's at first)
        self._stop = False

    # ---- building

    def placement(self) -> str:
        """One line: where the envs, the replay buffer and the networks run."""
        cfg, collector = self.config, self.collector
        if self.on_device:
            envs = f"{cfg.num_envs} envs, the torch twin on {self.device}"
            buffer = f"on {self.device}"
        else:
            twin = ", the numpy twin," if has_native_twin(cfg.env_id) else ""
            workers = collector.workers
            where = "in the trainer's process" if workers == 1 else f"in {workers} worker processes"
            envs = f"{cfg.num_envs} envs{twin} {where}"
            if collector.overlap:
                envs += ", collecting beside the updates"
            buffer = f"on {self.device}" if self.replay_on_device else "in host memory"
        return f"envs: {envs}; replay buffer {buffer}; networks on {self.device}"

    def _new_learner(self) -> Learner:
        """The learner of the agent as it is now (its updates captured as CUDA graphs on a
        GPU unless ``cuda_graphs`` is "off")."""
        return Learner(
            self.agent,
            self.config.batch_size,
            graphs=self.config.cuda_graphs,
            clock=self.collector.clock,
        )

    def note(self, message: str) -> None:
        """Records a fact about this run's setup, printed once (main worker, verbose)."""
        self.notes.append(message)
        if self.main and self.config.verbose:
            print(f"note: {message}", file=sys.stderr)

    def _torch_threads(self) -> int:
        """``config.torch_threads``, or fewer when the workers torchrun started on this
        machine (``LOCAL_WORLD_SIZE``) would otherwise ask more threads than it has cores:
        oversubscribed threads make stragglers that every all-reduce waits for."""
        threads = self.config.torch_threads
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        fair = max(1, machine_cores() // local)
        if threads > fair:
            self.note(
                f"torch_threads {threads} lowered to {fair}: {local} workers share this "
                f"machine's {machine_cores()} cores"
            )
            return fair
        return threads

    def _episode_schedule(self) -> tuple[int | None, int, float]:
        """The episode length (None when the env declares none), the steps of a cycle and
        the discount (``1 - 1/T`` by default)."""
        cfg = self.config
        horizon = getattr(self.env.unwrapped, "max_episode_steps", None) or (
            self.env.spec.max_episode_steps if self.env.spec is not None else None
        )
        if horizon is None and (cfg.rollout_steps is None or cfg.gamma is None):
            raise ValueError(
                f"{cfg.env_id} declares no episode length: give it one with --env-kwargs "
                "'{\"max_episode_steps\": 50}' (gymnasium's time limit), or set rollout_steps "
                "and gamma in a --preset file"
            )
        rollout_steps = cfg.rollout_steps or int(horizon or 0)
        gamma = cfg.gamma if cfg.gamma is not None else 1.0 - 1.0 / (horizon or 1)
        return horizon, rollout_steps, gamma

    def _check_buffer_fits(self) -> None:
        """A ValueError naming the field and its value when the schedule cannot run: a
        batch larger than the replay buffer, or a buffer whose stream per env cannot hold
        one episode (its transitions could never be sampled)."""
        cfg = self.config
        size = cfg.buffer_size // self.world
        share = f"buffer_size {cfg.buffer_size}" + (
            f" over {self.world} workers" if self.world > 1 else ""
        )
        if cfg.batch_size > size:
            raise ValueError(
                f"batch_size {cfg.batch_size} is larger than the replay buffer ({share} "
                f"holds {size} transitions): lower batch_size or raise buffer_size"
            )
        episode = self.horizon or self.rollout_steps
        rows = size // cfg.num_envs
        if rows < episode + 1:
            raise ValueError(
                f"{share} gives each of the num_envs {cfg.num_envs} envs {rows} rows, fewer "
                f"than one episode of {episode} steps takes ({episode + 1}): no transition "
                f"could ever be sampled; raise buffer_size to at least "
                f"{(episode + 1) * cfg.num_envs * self.world} or lower num_envs"
            )

    def _resolve_env_device(self) -> bool:
        """Whether the training envs run as torch twins on ``self.device``
        (``config.env_device``); a clear error when that was asked and cannot be."""
        cfg = self.config
        if cfg.env_device == "numpy":
            return False
        problem = device_twin_problem(cfg.env_id)
        if cfg.env_device == "auto":
            if self.device.type != "cuda":
                return False
            if problem is not None:
                self.note(
                    f"env_device='auto' runs numpy envs: {cfg.env_id} cannot run on "
                    f"{self.device}, as {problem}"
                )
                return False
        elif problem is not None:
            raise ValueError(
                f"env_device='device': {cfg.env_id} cannot run on device {self.device}: "
                f"{problem}. Use env_device='numpy' (or 'auto')"
            )
        return True

    def _resolve_replay_device(self) -> bool:
        """Whether the replay buffer lives on ``self.device`` (``config.replay_device``;
        "auto": beside the envs)."""
        choice = self.config.replay_device
        if self.on_device and choice == "host":
            raise ValueError(
                f"replay_device (--replay-device) 'host': the torch twins step on "
                f"{self.device} and their replay buffer lives there; expected 'device' or "
                "'auto' with env_device 'device'"
            )
        return self.on_device or choice == "device"

    def _env_workers(self) -> int:
        """How many processes step the training envs (``config.env_workers``; None: as
        many as the machine's cores carry, for an env without a native twin)."""
        cfg = self.config
        if self.on_device:
            if cfg.env_workers not in (None, 1):
                raise ValueError(
                    f"env_workers (--env-workers) {cfg.env_workers}: the torch twins run on "
                    f"{self.device} in the trainer's process; expected 1 with env_device "
                    "'device'"
                )
            return 1
        if cfg.env_workers is not None:
            return check_env_workers(cfg.env_workers, cfg.num_envs)
        if has_native_twin(cfg.env_id):
            return 1
        return default_env_workers(
            cfg.num_envs, False, step_seconds=measure_step_seconds(self.env, seed=cfg.seed)
        )

    def _overlap(self, env_workers: int) -> bool:
        """Whether collection runs beside the updates (``config.overlap``; None: when
        worker processes step the envs, which leaves the trainer's process free)."""
        overlap = self.config.overlap
        if overlap is None:
            return env_workers > 1
        if overlap and self.on_device:
            raise ValueError(
                "overlap=True collects in a background thread, which the on-device loop (torch "
                "twins on the GPU) has no use for; set overlap to None or False there"
            )
        return bool(overlap)

    def _goal_functions(self) -> tuple[Callable, Callable | None]:
        """The env's batched ``compute_reward`` and ``compute_terminated`` (a device twin's
        run on its device; a numpy env's get numpy arrays from a replay buffer on a
        device)."""
        cfg, envs = self.config, self.collector.envs
        host_arrays = self.replay_on_device and not self.on_device
        compute_reward = goal_function(envs, self.env, "compute_reward", host_arrays)
        if compute_reward is None:
            raise ValueError(
                f"{cfg.env_id} has no compute_reward(achieved_goal, desired_goal, info): HER "
                f"cannot relabel its transitions. Run `goalenvs check {cfg.env_id}`."
            )
        compute_terminated = goal_function(envs, self.env, "compute_terminated", host_arrays)
        if compute_terminated is None:
            self.note(
                f"{cfg.env_id} has no compute_terminated: relabeled transitions keep the "
                "terminated flag their real goal gave (a relabeled goal reached early does "
                "not end its episode), as stable-baselines3's HER does"
            )
        return compute_reward, compute_terminated

    def _target_clip(self) -> tuple[float, float]:
        """The range Bellman targets are clipped to (``clip_return``), with why."""
        cfg = self.config
        if not cfg.clip_return:
            return -math.inf, math.inf
        if cfg.clip_range is not None:
            return cfg.clip_range
        declared = getattr(self.env.unwrapped, "reward_range", None)
        if declared is not None and np.all(np.isfinite(declared)):
            low, high = (float(x) for x in declared)
            return return_range(low, high, self.gamma)
        low, high = probe_rewards(self.env, self.compute_reward, self.info_keys, cfg.seed)
        if low >= -1.0 and high <= 0.0:
            return return_range(-1.0, 0.0, self.gamma)
        self.note(
            f"clip_return is off: {cfg.env_id} paid rewards in [{low:.3g}, {high:.3g}] on a "
            "random probe, outside baselines' [-1, 0], and declares no finite reward_range; "
            "set clip_range to clip the targets"
        )
        return -math.inf, math.inf

    def _describe(self) -> dict[str, Any]:
        """The plain metadata every checkpoint of the run carries besides its counters."""
        cfg = self.config
        return {
            "env_id": cfg.env_id,
            "env_kwargs": cfg.env_kwargs,
            "env_file": cfg.env_file,  # where a path/to/file.py env's file is: play finds it
            "algo": cfg.algo,
            "hidden_sizes": list(cfg.hidden_sizes),
            "gamma": self.gamma,
            "observation_space": {k: space_to_dict(self.observation_space[k]) for k in GOAL_KEYS},
            "action_space": space_to_dict(self.action_space),
            "config": cfg.to_dict(),
        }

    def _default_run_dir(self) -> str:
        name = self.config.env_id.replace("/", "_").replace(":", "_")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return f"runs/{name}-{self.config.algo}-s{self.config.seed}-{stamp}"

    # ---- the loop

    def run(self) -> TrainResult:
        """Trains until ``config.epochs`` epochs are done (or Ctrl-C / SIGTERM, or
        ``stop_success``)."""
        cfg = self.config
        previous = self._catch_signals()
        display = None
        stopped = False
        try:
            if not self.started:
                self.start()
            if cfg.verbose and self.main:
                display = Display(cfg, self.counters.epoch)
            while self.counters.epoch < cfg.epochs and not (stopped := self._agreed_stop()):
                row = self._train_epoch(display)
                if row is None:  # a stop was agreed within the epoch, which is not committed
                    stopped = True
                    break
                if cfg.stop_success is not None and self.success >= cfg.stop_success:
                    break
        finally:
            if display is not None:
                display.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.close()
        counters = self.counters
        return TrainResult(
            run_dir=self.run_folder.path,
            best_success_rate=counters.best_success,
            final_success_rate=self.success,
            epochs=counters.epoch,
            env_steps=counters.env_steps,
            wall_time=counters.wall_time,
            interrupted=stopped,
            history=self.history,
        )

    def start(self) -> None:
        """Opens the run folder (a resume restores its last committed epoch into the
        trainer's parts) and starts the envs' episodes; :meth:`run` calls it unless it
        was called."""
        restored = self.run_folder.open(self.agent, self._load_buffer)
        self._take(restored)
        if restored is not None:
            # The checkpoint's optimizer state replaced tensors a captured update reads.
            self.learner = self._new_learner()
        self.started = True

    def _take(self, restored: Restored | None) -> None:
        """Takes a resumed run's counters, buffer and random generators, and starts the
        envs' episodes."""
        cfg = self.config
        seed = cfg.seed + self.rank * cfg.num_envs
        if restored is None:
            self.collector.reset(seed)
            return
        self.counters, self.success = restored.counters, restored.success
        env_states = None
        if restored.random_state is not None:
            if restored.buffer is not None:
                restored.buffer.truncate_last_trajectory()  # the envs start new episodes
                self.buffer = restored.buffer
            env_states = restore_random_state(restored.random_state, self.agent, self.buffer)
        missed = self.collector.reset(seed, env_states)
        if missed:
            logger.warning("env generators %s were not restored (another env version?)", missed)

    def _train_epoch(self, display: Display | None) -> dict[str, Any] | None:
        """One epoch: ``n_cycles`` of (collect, store, update), then evaluate and commit it.
        Returns the epoch's progress row; None when a stop was agreed before it ended."""
        cfg, collector, counters = self.config, self.collector, self.counters
        start, steps_before = time.perf_counter(), counters.env_steps
        stats: dict[str, list] = {name: [] for name in ("success", *self.agent.loss_names)}
        collector.clock.reset()
        collector.arm(cfg.n_cycles * self.rollout_steps)
        rollout = collector.collect(self.agent)
        for cycle in range(cfg.n_cycles):
            stats["success"] += collector.store(rollout, self.buffer, self.agent)
            counters.env_steps += self.rollout_steps * cfg.num_envs * self.world
            more = cycle + 1 < cfg.n_cycles
            ahead = collector.collect_ahead(self.agent) if more and collector.overlap else None
            self.optimize(stats)
            if more:
                rollout = ahead.result() if ahead is not None else collector.collect(self.agent)
            if display is not None:
                display.cycle(cycle, counters.env_steps, stats)
            if self._agreed_stop():
                return None
        success, eval_return, length = self.evaluate()
        self.success = success
        counters.epoch += 1
        elapsed = time.perf_counter() - start
        counters.wall_time += elapsed
        row = {
            "epoch": counters.epoch,
            "env_steps": counters.env_steps,
            "updates": counters.updates,
            "wall_time": round(counters.wall_time, 3),
            "steps_per_s": round((counters.env_steps - steps_before) / elapsed, 1),
            "train_success": mean_or_nan(stats["success"]),
            "eval_success": success,
            "eval_return": eval_return,
            "eval_length": length,
            **{name: mean_or_nan(stats[name]) for name in self.agent.loss_names},
            **collector.clock.columns(),
        }
        best = counters.record_eval(success, eval_return)
        random_state = capture_random_state(self.agent, self.buffer, collector.generator_states())
        self.run_folder.commit_epoch(counters, row, best, self.agent, self.buffer, random_state)
        self.history.append(row)
        self.run_folder.log(row)
        if display is not None:
            display.epoch(row, counters.best_success)
        if self.callback is not None:
            self.callback(row)
        return row

    def optimize(self, stats: dict[str, list]) -> None:
        """The learner's ``n_batches`` gradient steps, then the target networks move once;
        the losses' means go to ``stats``."""
        cfg = self.config
        # Every worker must make the same collective calls (the gradient all-reduce of
        # each update): they agree in one all-reduce that all of them can sample, and
        # otherwise all skip this cycle's updates together.
        ready = torch.tensor([float(self.buffer.can_sample())], dtype=torch.float64)
        if float(distributed.all_reduce_sum(ready)[0]) < self.world:
            return
        losses = self.learner.optimize(self.buffer, cfg.n_batches)
        self.counters.updates += cfg.n_batches
        for name, mean in losses.items():
            value = float(mean)  # the cycle's one read of each loss from the device
            if not math.isfinite(value):
                kept = (
                    f"the last good checkpoint is kept in "
                    f"{self.run_folder.path / 'policy_latest.pt'}"
                    if self.counters.epoch
                    else "no epoch had finished, so there is no checkpoint"
                )
                raise TrainingError(
                    f"{name} became {value} in epoch {self.counters.epoch + 1}: training "
                    f"stopped; {kept}"
                )
            stats[name].append(value)

    def evaluate(self) -> tuple[float, float, float]:
        """Mean success, return and length of deterministic episodes on the eval envs."""
        n = self.config.n_eval_episodes
        seed = np.random.SeedSequence([self.config.seed, self.rank, self.counters.epoch])
        totals = self.collector.evaluate(
            self.agent, int(seed.generate_state(1)[0]), self.horizon or 100_000
        )
        totals = distributed.all_reduce_sum(totals) / (n * self.world)
        return float(totals[0]), float(totals[1]), float(totals[2])

    def _load_buffer(self, path: Path) -> Any:
        """A replay buffer this run's backend saved at ``path``."""
        return self.collector.backend.load_buffer(
            path, self.compute_reward, self.compute_terminated
        )

    def _agreed_stop(self) -> bool:
        """True once any worker was asked to stop; every worker calls it at the same points
        (one tiny all-reduce), so all leave the loop together."""
        if self.world == 1:
            return self._stop
        asked = torch.tensor([float(self._stop)])
        return bool(float(distributed.all_reduce_sum(asked)[0]) > 0)

    def _catch_signals(self) -> dict[int, Any]:
        """The first Ctrl-C (SIGINT) or SIGTERM asks the loop to stop after the current
        cycle; a second one interrupts at once. Returns the handlers it replaced."""
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum: int, frame: Any) -> None:
            self._stop = True
            again = signal.default_int_handler if signum == signal.SIGINT else previous[signum]
            signal.signal(signum, again)

        previous: dict[int, Any] = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, handler)
        return previous

    def close(self) -> None:
        """Closes envs, the run folder's writers and a process group this run created."""
        self.run_folder.close()
        self.collector.close()
        self.env.close()
        if self.workers.owns_group:
            # Both workers leave together: one tearing its group down while the other is
            # still in its last collective aborts that one in gloo's threads.
            with contextlib.suppress(RuntimeError):
                torch.distributed.barrier()
            torch.distributed.destroy_process_group()


def train(config: TrainConfig, callback: Callable[[dict], Any] | None = None) -> TrainResult:
    """Trains the registered algorithm ``config.algo`` as ``config`` says; returns the result.

    ``callback(row)``, when given, is called with each epoch's progress row.
    """
    return Trainer(config, callback).run()
