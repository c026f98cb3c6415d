"""The HER training loop: epochs of (collect, update, move targets) cycles, then evaluate.

``train(config)`` builds a :class:`Trainer` and runs it. :meth:`Trainer.__init__` builds
its parts from the run's plan: the envs (a :class:`~goalenvs.train.collectors.Collector`
over numpy envs, worker processes or torch twins on a device), the agent and its
:class:`~goalenvs.agents.learner.Learner`, the replay buffer beside the envs, and the
:class:`~goalenvs.train.run_folder.RunFolder`. :meth:`Trainer.run` is the loop::

    for each epoch:
        for each of n_cycles:
            collect rollout_steps steps of every env  (with overlap: the next cycle's,
            store them in the buffer                    in the background, beside the
            n_batches updates, then the targets move    updates)
        evaluate; commit the epoch to the run folder

A resume restores the networks, optimizers, normalizer, replay buffer (``save_buffer``)
and every random generator, per worker; the envs start new episodes. Where no episode is
in progress at an epoch's end, a resumed run draws what the uninterrupted run draws.
Ctrl-C or SIGTERM stops the run after the current cycle (all workers agree on it); the
folder keeps the last finished epoch."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import logging
import math
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch

import goalenvs  # noqa: F401  (importing registers the goalenvs ids)
from goalenvs.agents import distributed
from goalenvs.agents.config import TrainConfig
from goalenvs.agents.learner import Learner
from goalenvs.agents.registry import make_agent
from goalenvs.core.types import GoalFunction
from goalenvs.train.collectors import Backend, Collector, DeviceBackend
from goalenvs.train.display import Display, mean_or_nan
from goalenvs.train.envs import goal_function, validate_training_env
from goalenvs.train.plan import check_device, follow_recorded, make_plan
from goalenvs.train.policy import Policy, load_policy
from goalenvs.train.resume_state import capture_random_state, restore_random_state
from goalenvs.train.run_folder import Counters, RunFolder

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
    # the budget that ended the run ("max_env_steps" or "max_minutes"), None if none did
    budget_spent: str | None = None
    history: list[dict[str, object]] = field(default_factory=list)  # progress rows of this call

    @property
    def best_policy(self) -> Path:
        """Path of ``policy_best.pt``."""
        return self.run_dir / "policy_best.pt"

    @property
    def latest_policy(self) -> Path:
        """Path of ``policy_latest.pt``."""
        return self.run_dir / "policy_latest.pt"

    @functools.cached_property
    def policy(self) -> Policy:
        """The best policy, loaded on the CPU (``result.policy.predict(obs)``)."""
        return load_policy(self.best_policy)


def training_device(name: str) -> torch.device:
    """The device ``config.device`` names ("auto": cuda when torch sees one, else cpu)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked but torch sees no CUDA device")
    return torch.device(name)


def join_workers(device_name: str) -> tuple[torch.device, int, int, bool]:
    """Joins the process group torchrun describes, if any: this worker's device (its own
    GPU in a multi-GPU run), rank (0: the one that writes the run folder), the number of
    workers, and whether this run created the group (and destroys it)."""
    device = training_device(device_name)
    owns_group = distributed.init_from_env(device)
    rank, world = distributed.rank(), distributed.world_size()
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    return device, rank, world, owns_group


class Trainer:
    """One training run (one worker of a multi-worker run): its parts, and the loop."""

    def __init__(
        self,
        config: TrainConfig,
        callback: Callable | None = None,
        *,
        env: gym.Env | None = None,
        recorded: dict[str, object] | None = None,
    ) -> None:
        """Builds the run's parts in the order they depend on each other, from its plan
        (:func:`~goalenvs.train.plan.make_plan`). ``env``: one env of the run built with
        ``config.make_kwargs()`` (None: built here); ``recorded``: a resumed run's plan,
        followed where this machine can."""
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
        self.loud = False  # whether notes are printed: verbose, on the main worker
        # A failed build closes what it had opened (worker processes included).
        with contextlib.ExitStack() as opened:
            if env is None:
                env = validate_training_env(cfg.env_id, cfg.make_kwargs(), cfg.algo)
            self.env = env
            opened.callback(env.close)
            # a resume takes what its config left to the machine as it was recorded
            followed = follow_recorded(cfg, recorded)
            joined = join_workers(check_device(followed, recorded))
            self.device, self.rank, self.world, self.owns_group = joined
            self.main = self.rank == 0
            self.loud = self.main and cfg.verbose
            plan = self.plan = make_plan(
                followed, env, self.device, self.rank, self.world, recorded
            )
            facts = plan.facts
            if facts.declared_length is None:  # measured: every env of the run gets it
                cfg.max_episode_steps = plan.episode_length
            for line in plan.notes:
                self.note(line)
            torch.set_num_threads(plan.torch_threads)
            if self.world > 1:
                self.note(
                    f"{self.world} workers, torch.distributed backend "
                    f"{torch.distributed.get_backend()} on {self.device.type}"
                )
            kwargs = cfg.make_kwargs()
            backend = (
                DeviceBackend(cfg.env_id, kwargs, self.device)
                if plan.env_device == "device"
                else Backend(cfg.env_id, kwargs, self.device, plan.replay_device == "device")
            )
            self.collector = Collector(
                backend, cfg.num_envs, cfg.n_eval_episodes, plan.rollout_steps, plan.info_keys,
                workers=plan.env_workers, overlap=plan.overlap, eval_workers=plan.eval_workers,
            )  # fmt: skip
            opened.callback(self.collector.close)
            # the vector envs' own, else the env's, which the plan found (a numpy env's get
            # numpy arrays from a replay buffer on a device)
            host = plan.replay_device == "device" and plan.env_device == "numpy"
            envs = self.collector.envs
            reward = goal_function(envs, env, "compute_reward", host)
            self.compute_reward = cast(GoalFunction, reward)
            self.compute_terminated = goal_function(envs, env, "compute_terminated", host)

            seed = cfg.seed + self.rank
            torch.manual_seed(cfg.seed)
            resolved = dataclasses.replace(cfg, precision=plan.precision)  # never "auto"
            obs_space, action_space = facts.observation_space, facts.action_space
            self.agent = make_agent(resolved, obs_space, action_space, plan.gamma, seed)
            self.agent.to(self.device)
            self.agent.noise_generator()  # made now, so that a resume finds it to restore
            distributed.broadcast_module(self.agent)
            self.agent.set_return_range(*(plan.clip_range or (-math.inf, math.inf)))
            self.learner = self._new_learner()

            self.buffer = backend.new_buffer(
                cfg.buffer_size // self.world, self.compute_reward, observation_space=obs_space,
                action_space=action_space, info_keys=plan.info_keys,
                compute_terminated=self.compute_terminated, seed=seed,
                **cfg.her_settings(plan.gamma),
            )  # fmt: skip
            self.run_folder = RunFolder(
                cfg, rank=self.rank, world=self.world, gamma=plan.gamma,
                observation_space=obs_space, action_space=action_space,
                loss_names=self.agent.loss_names,
                buffer_file=f"buffer_rank{self.rank}.{backend.buffer_suffix}",
                device=self.device, plan=plan.to_dict(),
            )  # fmt: skip
            opened.pop_all()  # built: close() closes them from now on
        self.counters = Counters()
        self.history: list[dict[str, Any]] = []
        self.started = False  # see start()
        self.success = 0.0  # the eval success of the last epoch (a resumed one's at first)
        self._stop = False

    # ---- building

    def plan_lines(self) -> list[str]:
        """The lines ``goalenvs train`` prints before the first epoch: the placement, the
        plan and what the pre-training checks cost."""
        seconds = self.plan.preflight_seconds
        checks = (
            "pre-training checks skipped (--no-preflight)"
            if seconds is None
            else f"pre-training checks passed in {seconds:.2f} s (--no-preflight skips them; "
            f"`goalenvs check {self.config.env_id}` runs them all)"
        )
        return [*self.plan.lines(), checks]

    def _new_learner(self) -> Learner:
        """The learner of the agent as it is now (its updates captured as CUDA graphs where
        the plan says)."""
        graphs, clock = "on" if self.plan.cuda_graphs else "off", self.collector.clock
        return Learner(self.agent, self.config.batch_size, graphs=graphs, clock=clock)

    def note(self, message: str) -> None:
        """Records a fact about this run's setup, printed once (main worker, verbose)."""
        self.notes.append(message)
        if self.loud:
            print(f"note: {message}", file=sys.stderr)

    # ---- the loop

    def run(self) -> TrainResult:
        """Trains until ``config.epochs`` epochs are done (or Ctrl-C / SIGTERM, or
        ``stop_success``)."""
        cfg, previous, called = self.config, self._catch_signals(), time.perf_counter()
        display, stopped, spent = None, False, None
        try:
            if not self.started:
                self.start()
            if cfg.verbose and self.main:
                display = Display(cfg, self.counters.epoch)
            while self.counters.epoch < cfg.epochs and not (stopped := self._agreed_stop()):
                if (spent := self._budget_spent(called)) is not None:
                    break
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
        c = self.counters
        return TrainResult(
            self.run_folder.path, best_success_rate=c.best_success, final_success_rate=self.success,
            epochs=c.epoch, env_steps=c.env_steps, wall_time=c.wall_time, interrupted=stopped,
            budget_spent=spent, history=self.history,
        )  # fmt: skip

    def start(self) -> None:
        """Opens the run folder (a resume restores its last committed epoch: networks,
        counters, buffer, random generators) and starts the envs' episodes; :meth:`run`
        calls it unless it was called."""
        cfg = self.config
        backend = self.collector.backend  # a saved buffer is loaded where it was kept
        restored = self.run_folder.open(
            self.agent,
            lambda path: backend.load_buffer(path, self.compute_reward, self.compute_terminated),
        )
        seed = cfg.seed + self.rank * cfg.num_envs
        if restored is None:
            self.collector.reset(seed)
        else:
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
            # The checkpoint's optimizer state replaced tensors a captured update reads.
            self.learner = self._new_learner()
        self.started = True

    def _train_epoch(self, display: Display | None) -> dict[str, Any] | None:
        """One epoch: ``n_cycles`` of (collect, store, update), then evaluate and commit it.
        Returns the epoch's progress row; None when a stop was agreed before it ended."""
        cfg, collector, counters = self.config, self.collector, self.counters
        start, steps_before = time.perf_counter(), counters.env_steps
        stats: dict[str, list] = {name: [] for name in ("success", *self.agent.loss_names)}
        collector.clock.reset()
        # the envs keep their generator states from before the epoch's last step (saved)
        collector.envs.arm(cfg.n_cycles * self.plan.rollout_steps)
        rollout = collector.collect(self.agent)
        for cycle in range(cfg.n_cycles):
            stats["success"] += collector.store(rollout, self.buffer, self.agent)
            counters.env_steps += self.plan.rollout_steps * cfg.num_envs * self.world
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
        online = {}
        if cfg.policy_average > 0:
            # the averaged policy acted above; the trained one on the same episodes
            with self.agent.online_acting():
                online = {"eval_success_online": self.evaluate()[0]}
        self.success, elapsed = success, time.perf_counter() - start
        counters.epoch += 1
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
            **online,
            **{name: mean_or_nan(stats[name]) for name in self.agent.loss_names},
            **collector.clock.columns(),
        }
        best = counters.record_eval(success, eval_return)
        states = collector.envs.generator_states()
        random_state = capture_random_state(self.agent, self.buffer, states)
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
                latest = self.run_folder.path / "policy_latest.pt"
                kept = f"the last good checkpoint is kept in {latest}"
                if not self.counters.epoch:
                    kept = "no epoch had finished, so there is no checkpoint"
                raise TrainingError(
                    f"{name} became {value} in epoch {self.counters.epoch + 1}: training "
                    f"stopped; {kept}"
                )
            stats[name].append(value)

    def evaluate(self) -> tuple[float, float, float]:
        """Mean success, return and length of deterministic episodes on the eval envs (the
        same episodes at each call of an epoch: their seed is the epoch's)."""
        seeds = np.random.SeedSequence([self.config.seed, self.rank, self.counters.epoch])
        seed, limit = int(seeds.generate_state(1)[0]), self.plan.episode_length or 100_000
        totals = distributed.all_reduce_sum(self.collector.evaluate(self.agent, seed, limit))
        totals = totals / (self.config.n_eval_episodes * self.world)
        return float(totals[0]), float(totals[1]), float(totals[2])

    def _budget_spent(self, called: float) -> str | None:
        """The budget that is spent at this epoch boundary: ``"max_env_steps"`` (env steps
        of the whole run) or ``"max_minutes"`` (minutes since :meth:`run` was called, once
        an epoch of this call has ended, agreed by every worker); None while both last."""
        cfg = self.config
        if cfg.max_env_steps is not None and self.counters.env_steps >= cfg.max_env_steps:
            return "max_env_steps"
        if cfg.max_minutes is None or not self.history:
            return None
        late = self._any_worker(time.perf_counter() - called >= 60.0 * cfg.max_minutes)
        return "max_minutes" if late else None

    def _agreed_stop(self) -> bool:
        """True once any worker was asked to stop."""
        return self._any_worker(self._stop)

    def _any_worker(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any worker: one tiny all-reduce, which every worker
        calls at the same points, so that all leave the loop together."""
        if self.world == 1:
            return flag
        return float(distributed.all_reduce_sum(torch.tensor([float(flag)]))[0]) > 0

    def _catch_signals(self) -> dict[int, Any]:
        """The first Ctrl-C (SIGINT) or SIGTERM asks the loop to stop after the current
        cycle; a second one interrupts at once. Returns the handlers it replaced."""
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum: int, frame: object) -> None:
            self._stop = True
            again = signal.default_int_handler if signum == signal.SIGINT else previous[signum]
            signal.signal(signum, again)

        signals = (signal.SIGINT, signal.SIGTERM)
        previous: dict[int, Any] = {s: signal.signal(s, handler) for s in signals}
        return previous

    def close(self) -> None:
        """Closes envs, the run folder's writers and a process group this run created."""
        self.run_folder.close()
        self.collector.close()
        self.env.close()
        if self.owns_group:
            # Both workers leave together: one tearing its group down while the other is
            # still in its last collective aborts that one in gloo's threads.
            with contextlib.suppress(RuntimeError):
                torch.distributed.barrier()
            torch.distributed.destroy_process_group()


def train(config: TrainConfig, callback: Callable[[dict], object] | None = None) -> TrainResult:
    """Trains the registered algorithm ``config.algo`` as ``config`` says; returns the result.
    ``callback(row)``, when given, is called with each epoch's progress row."""
    return Trainer(config, callback).run()
