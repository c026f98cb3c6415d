"""The HER training loop: epochs of (collect, update, move targets) cycles, then evaluate.

``train(config)`` builds the native vector envs (``gym.make_vec``), the HER replay
buffer and the agent, trains, and writes the run folder::

    config.json        the full config (rebuild it with ``config_from_dict``)
    progress.csv       one row per epoch
    curves.png         success rate and return against env steps, redrawn every epoch
    policy_best.pt     the policy with the best eval success so far
    policy_latest.pt   policy plus training state of the last finished epoch
    policy_epoch_K.pt  every ``save_every`` epochs
    checkpoints/epoch_N/   what --resume reads: one unit per finished epoch (the last two
                       are kept): policy.pt, state_rankR.pt (random generator states of
                       worker R), buffer_rankR.npz (with ``save_buffer``), manifest.json

Every file is written atomically and an epoch's unit is committed by its manifest,
written last (after the epoch's progress.csv row), so a kill at any moment leaves a
folder that ``--resume`` continues from the last committed epoch: rows of later epochs
are dropped from progress.csv (and purged from TensorBoard), temporary files of cut
writes are removed, and a damaged newest unit falls back to the one before (logged).

Resuming restores the networks, optimizers, normalizer, replay buffer (``save_buffer``)
and every random generator (exploration noise, buffer sampling, torch, the training
envs' per-sub-env generators), per worker. The envs restart their episodes on resume:
an episode in progress at the save is cut there (stored as truncated). Where no episode
is in progress at an epoch's end (``rollout_steps`` = the episode length and no early
termination, as Fetch), a resumed run draws exactly what the uninterrupted run draws.

On the device path (``env_device``: "device", or "auto" with ``device`` cuda) the
training and eval envs are the torch twins on the training device, the replay buffer
keeps its tensors there, and collecting, exploring, normalizing and evaluating are tensor
operations on it: per step the host learns one bool (did an episode end?), the
successes and eval sums come to it once per cycle or epoch. The training twin runs with
autoreset disabled and the loop resets the finished sub-envs itself, so the final
observations stay one batched tensor. Its torch generators (twin, buffer, exploration)
are saved and restored with the others.

Ctrl-C or SIGTERM (what SLURM, Kubernetes and torchrun send before a kill) stops the
run after the current cycle (all workers agree on it); the folder keeps the last
finished epoch, and the cycles of the unfinished one are dropped.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import goalenvs  # noqa: F401  (importing registers the goalenvs ids)
from goalenvs.agents import distributed
from goalenvs.agents.config import TrainConfig
from goalenvs.agents.registry import make_agent
from goalenvs.train.checkpoint import restore_generators
from goalenvs.train.collectors import Collector, make_collector
from goalenvs.train.display import _Display, _mean, loss_names
from goalenvs.train.envs import (
    device_twin_problem,
    goal_function,
    probe_rewards,
    return_range,
    scalar_info_keys,
    validate_training_env,
)
from goalenvs.train.run_folder import (
    TORCH_GENERATORS,
    RunFolder,
    logger,
    restore_torch_generators,
)


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


# --------------------------------------------------------------------------- loop


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


class Trainer(RunFolder):
    """One training run (one worker of a multi-worker run)."""

    def __init__(self, config: TrainConfig, callback: Callable | None = None) -> None:
        """Builds the run in the order its parts depend on each other: this worker's
        device, the envs and where they run, the agent and the goal functions, the replay
        buffer, then the run's counters (the run folder is read or made by :meth:`run`)."""
        self.config = config
        self.callback = callback
        self.notes: list[str] = []
        torch.set_num_threads(config.torch_threads)
        workers = join_workers(config.device)
        self.device, self.owns_group = workers.device, workers.owns_group
        self.rank, self.world, self.main = workers.rank, workers.world, workers.rank == 0
        if self.world > 1:
            self.note(
                f"{self.world} workers, torch.distributed backend "
                f"{torch.distributed.get_backend()} on {self.device.type}"
            )
        seed = config.seed + self.rank
        self._make_envs()
        self._make_agent(seed)
        self.buffer = self._new_buffer(seed)
        self.agent.set_return_range(*self._target_clip())
        self._start_counters()

    def _make_envs(self) -> None:
        """The checked env, the collector (where the envs run, decided here once: the loop
        only calls it), the training and eval vector envs, and the episode schedule."""
        cfg = self.config
        self.env = validate_training_env(cfg.env_id, cfg.env_kwargs, cfg.algo)
        self.observation_space: Any = self.env.observation_space  # a goal Dict (checked)
        self.action_space = self.env.action_space
        self.action_dtype = self.action_space.dtype
        self.on_device = self._resolve_env_device()
        self.collector: Collector = make_collector(
            self.on_device, cfg.env_id, cfg.env_kwargs, self.device
        )
        self.envs: Any = self.collector.make_envs(cfg.num_envs, self.collector.train_autoreset)
        self.eval_envs = self.collector.make_envs(
            cfg.n_eval_episodes, gym.vector.AutoresetMode.NEXT_STEP
        )
        horizon = getattr(self.envs.unwrapped, "max_episode_steps", None) or (
            self.env.spec.max_episode_steps if self.env.spec is not None else None
        )
        if horizon is None and (cfg.rollout_steps is None or cfg.gamma is None):
            raise ValueError(
                f"{cfg.env_id} declares no episode length: give it one with --env-kwargs "
                "'{\"max_episode_steps\": 50}' (gymnasium's time limit), or set rollout_steps "
                "and gamma in a --preset file"
            )
        self.horizon: int | None = horizon  # None only when both settings are given
        self.rollout_steps: int = cfg.rollout_steps or int(horizon or 0)
        self.gamma: float = cfg.gamma if cfg.gamma is not None else 1.0 - 1.0 / (horizon or 1)

    def _make_agent(self, seed: int) -> None:
        """The agent on this worker's device (rank 0's weights on every worker), and the
        env's goal functions HER relabels with."""
        cfg = self.config
        torch.manual_seed(cfg.seed)
        self.agent = make_agent(cfg, self.observation_space, self.action_space, self.gamma, seed)
        self.agent.to(self.device)
        self.collector.prepare(self.agent)
        distributed.broadcast_module(self.agent)
        compute_reward = goal_function(self.envs, self.env, "compute_reward")
        if compute_reward is None:
            raise ValueError(
                f"{cfg.env_id} has no compute_reward(achieved_goal, desired_goal, info): HER "
                f"cannot relabel its transitions. Run `goalenvs check {cfg.env_id}`."
            )
        self.compute_reward: Callable = compute_reward
        self.compute_terminated = goal_function(self.envs, self.env, "compute_terminated")
        if self.compute_terminated is None:
            self.note(
                f"{cfg.env_id} has no compute_terminated: relabeled transitions keep the "
                "terminated flag their real goal gave (a relabeled goal reached early does "
                "not end its episode), as stable-baselines3's HER does"
            )
        self.info_keys = cfg.info_keys if cfg.info_keys is not None else scalar_info_keys(self.env)

    def _start_counters(self) -> None:
        """A fresh run's counters and run-folder state (:meth:`restore` sets them again)."""
        cfg = self.config
        self.run_dir = Path(cfg.resume or cfg.out or self._default_run_dir())
        self.epoch, self.env_steps, self.updates, self.wall_time = 0, 0, 0, 0.0
        self.best_success, self.best_return = -1.0, -math.inf
        self.history: list[dict[str, Any]] = []
        self._stop = False
        self.writer: Any = None  # a TensorBoard SummaryWriter (tensorboard=True)
        self._plotter: threading.Thread | None = None
        self.progress_rows: list[list[str]] = []
        self.best_epoch = 0
        self.resumed_success = 0.0  # eval success of the epoch a resume starts from
        self._resumed_envs: dict[str, Any] | None = None  # env generator states to restore

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

    def note(self, message: str) -> None:
        """Records a fact about this run's setup, printed once (main worker, verbose)."""
        self.notes.append(message)
        if self.main and self.config.verbose:
            print(f"note: {message}", file=sys.stderr)

    def _new_buffer(self, seed: int) -> Any:
        """An empty replay buffer of the collector's backend, this worker's share."""
        cfg = self.config
        return self.collector.new_buffer(
            cfg.buffer_size // self.world,
            self.compute_reward,
            observation_space=self.observation_space,
            action_space=self.action_space,
            info_keys=self.info_keys,
            compute_terminated=self.compute_terminated,
            seed=seed,
            **cfg.her_settings(),
        )

    def _default_run_dir(self) -> str:
        name = self.config.env_id.replace("/", "_").replace(":", "_")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return f"runs/{name}-{self.config.algo}-s{self.config.seed}-{stamp}"

    # ---- collection

    def collect(self, obs: dict[str, Any], stats: dict[str, list]) -> dict[str, Any]:
        """Steps the training envs ``rollout_steps`` times, storing every transition."""
        obs = self.collector.collect(
            self.agent, self.buffer, self.envs, obs, self.rollout_steps, self.info_keys, stats
        )
        self.env_steps += self.rollout_steps * self.config.num_envs * self.world
        return obs

    def optimize(self, stats: dict[str, list]) -> None:
        """``n_batches`` gradient steps, then the target networks move once."""
        cfg = self.config
        # Every worker must make the same collective calls (the gradient all-reduce of
        # each update): they agree in one all-reduce that all of them can sample, and
        # otherwise all skip this cycle's updates together.
        # (The device buffer answers without reading the device most cycles.)
        ready = torch.tensor([float(self.buffer.can_sample())], dtype=torch.float64)
        if float(distributed.all_reduce_sum(ready)[0]) < self.world:
            return
        totals: dict[str, torch.Tensor] = {}
        clock = self.collector.clock
        for _ in range(cfg.n_batches):
            with clock("sample"):
                batch = self.buffer.sample(cfg.batch_size, device=self.device)
            with clock("update"):
                losses = self.agent.update(batch)
            # Per-sample TD errors are no loss to log: they set new replay priorities.
            td_errors = losses.pop("td_errors", None)
            if td_errors is not None and getattr(self.buffer, "prioritized", False):
                with clock("sample"):
                    priorities = self.collector.td_errors(td_errors)
                    self.buffer.update_priorities(batch.indices, priorities)
            for name, value in losses.items():
                totals[name] = totals[name] + value if name in totals else value
        with clock("update"):
            self.agent.update_targets()
        self.updates += cfg.n_batches
        for name, total in totals.items():
            mean = float(total) / cfg.n_batches
            if not math.isfinite(mean):
                kept = (
                    f"the last good checkpoint is kept in {self.run_dir / 'policy_latest.pt'}"
                    if self.epoch
                    else "no epoch had finished, so there is no checkpoint"
                )
                raise TrainingError(
                    f"{name} became {mean} in epoch {self.epoch + 1}: training stopped; {kept}"
                )
            stats[name].append(mean)

    # ---- evaluation

    def evaluate(self) -> tuple[float, float, float]:
        """Mean success, return and length of deterministic episodes on the eval envs."""
        n = self.config.n_eval_episodes
        seed = int(
            np.random.SeedSequence([self.config.seed, self.rank, self.epoch]).generate_state(1)[0]
        )
        with self.collector.clock("eval"):
            obs, _ = self.eval_envs.reset(seed=seed)
            limit = self.horizon or 100_000
            totals = self.collector.evaluate(self.agent, self.eval_envs, obs, limit)
        totals = distributed.all_reduce_sum(totals) / (n * self.world)
        return float(totals[0]), float(totals[1]), float(totals[2])

    # ---- main loop

    def run(self) -> TrainResult:
        """Trains until ``config.epochs`` epochs are done (or Ctrl-C / SIGTERM, or
        ``stop_success``)."""
        cfg = self.config
        self.start_run_dir()
        obs = self._first_observations()
        success = self.resumed_success
        previous = self._catch_signals()
        display = _Display(cfg, self.epoch) if cfg.verbose and self.main else None
        stopped = False
        try:
            while self.epoch < cfg.epochs and not (stopped := self._agreed_stop()):
                obs, row = self._train_epoch(obs, display)
                if row is None:  # a stop was agreed within the epoch, which is not committed
                    stopped = True
                    break
                success = row["eval_success"]
                if cfg.stop_success is not None and success >= cfg.stop_success:
                    break
        finally:
            if display is not None:
                display.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.close()
        return TrainResult(
            run_dir=self.run_dir,
            best_success_rate=self.best_success,
            final_success_rate=success,
            epochs=self.epoch,
            env_steps=self.env_steps,
            wall_time=self.wall_time,
            interrupted=stopped,
            history=self.history,
        )

    def _first_observations(self) -> dict[str, Any]:
        """Resets the training envs; a resumed run restores their random generators first
        (an episode in progress at the save restarts)."""
        cfg = self.config
        obs, _ = self.envs.reset(seed=cfg.seed + self.rank * cfg.num_envs)
        if self._resumed_envs is None:
            return obs
        states = dict(self._resumed_envs)
        torch_states = states.pop(TORCH_GENERATORS, {})
        missed = restore_generators(self.envs.unwrapped, states)
        missed += restore_torch_generators(self.envs.unwrapped, torch_states)
        if missed:
            logger.warning("env generators %s were not restored (another env version?)", missed)
        obs, _ = self.envs.reset()
        return obs

    def _train_epoch(
        self, obs: dict[str, Any], display: _Display | None
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """One epoch: ``n_cycles`` of (collect, optimize), then evaluate and commit it (run
        folder, log, display, callback). Returns the last observation and the epoch's
        progress row; the row is None when a stop was agreed before the epoch ended."""
        cfg = self.config
        start, steps_before = time.perf_counter(), self.env_steps
        stats: dict[str, list] = {name: [] for name in ("success", *loss_names(cfg.algo))}
        self.envs.arm(cfg.n_cycles * self.rollout_steps)
        self.collector.clock.reset()
        for cycle in range(cfg.n_cycles):
            obs = self.collect(obs, stats)
            self.optimize(stats)
            if display is not None:
                display.cycle(self, cycle, stats, time.perf_counter() - start)
            if self._agreed_stop():
                return obs, None
        success, ret, length = self.evaluate()
        self.epoch += 1
        elapsed = time.perf_counter() - start
        self.wall_time += elapsed
        row = {
            "epoch": self.epoch,
            "env_steps": self.env_steps,
            "updates": self.updates,
            "wall_time": round(self.wall_time, 3),
            "steps_per_s": round((self.env_steps - steps_before) / elapsed, 1),
            "train_success": _mean(stats["success"]),
            "eval_success": success,
            "eval_return": ret,
            "eval_length": length,
            **{name: _mean(stats[name]) for name in loss_names(cfg.algo)},
            **self.collector.clock.columns(),
        }
        self.save_epoch(row, success)
        self.log(row)
        if display is not None:
            display.epoch(row, self.best_success)
        if self.callback is not None:
            self.callback(row)
        return obs, row

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
        """Closes envs, the TensorBoard writer and a process group this run created."""
        self.wait_for_plot()
        self.envs.close()
        self.eval_envs.close()
        self.env.close()
        if self.writer is not None:
            self.writer.close()
        if self.owns_group:
            # Both workers leave together: one tearing its group down while the other is
            # still in its last collective aborts that one in gloo's threads.
            with contextlib.suppress(RuntimeError):
                torch.distributed.barrier()
            torch.distributed.destroy_process_group()


def train(config: TrainConfig, callback: Callable[[dict], Any] | None = None) -> TrainResult:
    """Trains the registered algorithm ``config.algo`` as ``config`` says; returns the result.

    ``callback(row)``, when given, is called with each epoch's progress row.
    """
    if config.tensorboard:
        try:
            import torch.utils.tensorboard  # noqa: F401
        except ImportError as exc:
            raise RuntimeError(
                "tensorboard=True needs torch.utils.tensorboard, which could not be imported "
                f"({exc}); install it with `pip install tensorboard`, or train without it"
            ) from None
    return Trainer(config, callback).run()
