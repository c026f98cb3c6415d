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

import csv
import inspect
import io
import json
import logging
import math
import shutil
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
from gymnasium import spaces

import goalenvs  # importing registers the goalenvs ids
from goalenvs import envspec
from goalenvs.core import GOAL_KEYS, GoalVectorEnv
from goalenvs.her import distributed
from goalenvs.her.algos import algo_for, check_action_space, get_algo, make_agent
from goalenvs.her.checkpoint import (
    STATE_FORMAT,
    CheckpointError,
    atomic_copy,
    atomic_write,
    atomic_write_file,
    atomic_write_text,
    commit_unit,
    generator_states,
    read_checkpoint,
    read_manifest,
    remove_debris,
    restore_generators,
    save_checkpoint,
    space_to_dict,
    unit_dir,
    unit_epochs,
)
from goalenvs.her.config import TrainConfig

KEEP_UNITS = 2  # committed epochs kept in checkpoints/: the newest and one to fall back on
logger = logging.getLogger(__name__)
# Short names of the losses on the progress display (others are shown as they are).
LABELS = {"critic_loss": "critic", "actor_loss": "actor", "q_loss": "loss", "q_mean": "Q"}


def loss_names(algo: str) -> tuple[str, ...]:
    """The losses algorithm ``algo`` logs (its agent's ``loss_names``)."""
    return get_algo(algo).loss_names


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


# --------------------------------------------------------------------------- envs


def env_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    """The gymnasium spec of ``env_id``, in any form :func:`goalenvs.envspec.resolve` takes
    (``module:EnvId``, ``module:Class``, ``path/to/file.py:Class`` included).

    A missing package is one clear line naming it (and the goalenvs extra providing it).
    """
    return envspec.env_spec(env_id)


def validate_training_env(env_id: str, env_kwargs: dict[str, Any], algo: str | None) -> gym.Env:
    """Makes one env and checks the trainer can drive it: a goal Dict observation and an
    action space the algorithm (a registered name, or None for any) fits.

    This is the trainer's quick gate, not the goal-env contract: ``goalenvs check``
    (:func:`goalenvs.checker.check_goal_env`) checks that.
    """
    if algo is not None:
        get_algo(algo)
    spec = env_spec(env_id)
    try:
        env = gym.make(spec, **env_kwargs)
    except gym.error.Error as exc:
        raise ValueError(f"env_id={env_id!r} could not be made: {exc}") from None
    space = env.observation_space
    if not isinstance(space, spaces.Dict) or any(k not in space.spaces for k in GOAL_KEYS):
        env.close()
        raise ValueError(
            f"{env_id} is not a goal env: its observation space is {space}, expected "
            f"Dict(observation=..., achieved_goal=..., desired_goal=...). Run "
            f"`goalenvs check {env_id}` to see what the goal-env contract asks for."
        )
    try:
        check_action_space(algo or algo_for(env.action_space), env.action_space, env_id)
    except ValueError:
        env.close()
        raise
    return env


def device_twin_problem(env_id: str) -> str | None:
    """Why ``env_id`` cannot run as a torch twin on a device, or None when it can.

    It can when its vector entry point is a goalenvs twin (:class:`GoalVectorEnv`) that
    takes a ``device`` argument.
    """
    entry = env_spec(env_id).vector_entry_point
    if entry is None:
        return "it has no native vector twin (gymnasium's SyncVectorEnv steps it on numpy)"
    cls = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
    if not (isinstance(cls, type) and issubclass(cls, GoalVectorEnv)):
        return f"its vector env {entry} is not a goalenvs twin (GoalVectorEnv)"
    if "device" not in inspect.signature(cls).parameters:
        return f"its vector env {entry} takes no device argument"
    return None


def make_vector_env(
    env_id: str,
    env_kwargs: dict[str, Any],
    num_envs: int,
    mode: gym.vector.AutoresetMode,
    device: torch.device | None = None,
) -> gym.vector.VectorEnv:
    """The env's native vector twin (or gymnasium's SyncVectorEnv) in autoreset ``mode``;
    with ``device``, the torch twin on it (see :func:`device_twin_problem`)."""
    mode = gym.vector.AutoresetMode(mode)
    if device is not None:
        problem = device_twin_problem(env_id)
        if problem is not None:
            raise ValueError(f"{env_id} cannot run on device {device}: {problem}")
        return gym.make_vec(
            env_spec(env_id), num_envs=num_envs, autoreset_mode=mode, device=device, **env_kwargs
        )
    spec = env_spec(env_id)
    if spec.vector_entry_point is not None:
        return gym.make_vec(spec, num_envs=num_envs, autoreset_mode=mode, **env_kwargs)
    return gym.make_vec(
        spec,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
        **env_kwargs,
    )


def goal_function(vector_env: Any, env: gym.Env, name: str) -> Callable | None:
    """The batched ``compute_reward`` / ``compute_terminated`` of the env (None if absent).

    Its result is broadcast to the batch: Fetch's ``compute_terminated`` returns one
    scalar ``False`` for a whole batch of goals.
    """
    fn = getattr(vector_env.unwrapped, name, None)
    if not callable(fn):
        try:
            fn = env.get_wrapper_attr(name)
        except AttributeError:
            return None
    if not callable(fn):
        return None
    goal_ndim = len(env.observation_space["achieved_goal"].shape)

    def batched(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        result = fn(achieved_goal, desired_goal, info)
        if isinstance(achieved_goal, torch.Tensor):  # a device twin's: tensors stay there
            batch_shape = achieved_goal.shape[: achieved_goal.ndim - goal_ndim]
            result = torch.as_tensor(result, device=achieved_goal.device)
            return result if result.shape == batch_shape else result.broadcast_to(batch_shape)
        result = np.asarray(result)
        batch_shape = np.shape(achieved_goal)[: np.ndim(achieved_goal) - goal_ndim]
        return np.broadcast_to(result, batch_shape) if result.shape != batch_shape else result

    return batched


def scalar_info_keys(env: gym.Env) -> tuple[str, ...]:
    """The numeric or boolean scalar entries of the env's info, ``is_success`` aside.

    Storing them all lets HER recompute rewards that read the info (a collision
    penalty, say) without the user naming them; they cost a few bytes per transition.
    """
    _, info = env.reset(seed=0)
    return tuple(
        key
        for key, value in info.items()
        if key != "is_success"
        and not key.startswith("_")
        and np.ndim(value) == 0
        and np.asarray(value).dtype.kind in "biuf"
    )


def probe_rewards(
    env: gym.Env, compute_reward: Callable, info_keys: tuple[str, ...], seed: int, steps: int = 200
) -> tuple[float, float]:
    """The lowest and highest reward ``compute_reward`` paid on a random-action probe.

    Goals reached in ``steps`` random steps are paired with other episodes' desired goals
    and with themselves (success), under the info seen and with every boolean info entry
    set both ways (a crash flag, say), so penalties the info carries are found too.
    """
    env.action_space.seed(seed)
    obs, info = env.reset(seed=seed)
    achieved, desired, infos = [], [], {k: [] for k in info_keys}
    for _ in range(steps):
        obs, _, terminated, truncated, info = env.step(env.action_space.sample())
        achieved.append(obs["achieved_goal"])
        desired.append(obs["desired_goal"])
        for key in info_keys:
            infos[key].append(info[key])
        if terminated or truncated:
            obs, _ = env.reset()
    achieved_goals, desired_goals = np.asarray(achieved), np.asarray(desired)
    info_batch = {k: np.asarray(v) for k, v in infos.items()}
    variants = [info_batch]
    for key, values in info_batch.items():
        if values.dtype == bool:
            for flag in (False, True):
                variants.append({**info_batch, key: np.full_like(values, flag)})
    shuffled = np.random.default_rng(seed).permutation(len(desired_goals))
    rewards = [
        np.asarray(compute_reward(achieved_goals, goals, variant), dtype=np.float64)
        for variant in variants
        for goals in (desired_goals, desired_goals[shuffled], achieved_goals)
    ]
    return float(min(r.min() for r in rewards)), float(max(r.max() for r in rewards))


def return_range(reward_low: float, reward_high: float, gamma: float) -> tuple[float, float]:
    """Bounds of any discounted return of rewards in ``[reward_low, reward_high]``.

    An episode may end at any step, so 0 (no more reward) is inside the range too.
    """
    return min(reward_low, 0.0) / (1.0 - gamma), max(reward_high, 0.0) / (1.0 - gamma)


def _final(info: dict[str, Any], key: str, i: int) -> Any:
    """Entry ``key`` of sub-env ``i``'s final info (same-step autoreset)."""
    final = info["final_info"]
    if isinstance(final, dict):  # SyncVectorEnv: a dict of per-env arrays
        return final[key][i]
    return final[i][key]


def _final_obs(info: dict[str, Any], i: int) -> dict[str, np.ndarray]:
    return info["final_obs"][i]


# --------------------------------------------------------------------------- loop


class Trainer:
    """One training run (one worker of a multi-worker run)."""

    def __init__(self, config: TrainConfig, callback: Callable | None = None) -> None:
        self.config = config
        self.callback = callback
        cfg = config
        torch.set_num_threads(cfg.torch_threads)
        device = cfg.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device='cuda' was asked but torch sees no CUDA device")
        self.device = torch.device(device)
        self.owns_group = distributed.init_from_env(self.device)
        self.rank, self.world = distributed.rank(), distributed.world_size()
        self.main = self.rank == 0
        if self.device.type == "cuda" and self.world > 1:
            self.device = torch.device("cuda", self.rank % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
        self.notes: list[str] = []
        if self.world > 1:
            self.note(
                f"{self.world} workers, torch.distributed backend "
                f"{torch.distributed.get_backend()} on {self.device.type}"
            )

        self.env = validate_training_env(cfg.env_id, cfg.env_kwargs, cfg.algo)
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self.action_dtype = self.action_space.dtype
        self.on_device = self._resolve_env_device()
        env_device = self.device if self.on_device else None
        # On a device the loop resets finished sub-envs itself (autoreset disabled): the
        # step's observation is then the final one of every sub-env, one batched tensor,
        # where same-step autoreset hands them out one sub-env at a time.
        self.envs = make_vector_env(
            cfg.env_id,
            cfg.env_kwargs,
            cfg.num_envs,
            gym.vector.AutoresetMode.DISABLED
            if self.on_device
            else gym.vector.AutoresetMode.SAME_STEP,
            env_device,
        )
        self.eval_envs = make_vector_env(
            cfg.env_id,
            cfg.env_kwargs,
            cfg.n_eval_episodes,
            gym.vector.AutoresetMode.NEXT_STEP,
            env_device,
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
        self.horizon = horizon
        self.rollout_steps = cfg.rollout_steps or int(horizon)
        self.gamma = cfg.gamma if cfg.gamma is not None else 1.0 - 1.0 / horizon

        seed = cfg.seed + self.rank
        torch.manual_seed(cfg.seed)
        self.agent = make_agent(cfg, self.observation_space, self.action_space, self.gamma, seed)
        self.agent.to(self.device)
        if self.on_device:
            self.agent.noise_generator()  # made now, so that a resume finds it to restore
        distributed.broadcast_module(self.agent)
        self.compute_reward = goal_function(self.envs, self.env, "compute_reward")
        if self.compute_reward is None:
            raise ValueError(
                f"{cfg.env_id} has no compute_reward(achieved_goal, desired_goal, info): HER "
                f"cannot relabel its transitions. Run `goalenvs check {cfg.env_id}`."
            )
        self.compute_terminated = goal_function(self.envs, self.env, "compute_terminated")
        if self.compute_terminated is None:
            self.note(
                f"{cfg.env_id} has no compute_terminated: relabeled transitions keep the "
                "terminated flag their real goal gave (a relabeled goal reached early does "
                "not end its episode), as stable-baselines3's HER does"
            )
        self.info_keys = cfg.info_keys if cfg.info_keys is not None else scalar_info_keys(self.env)
        self.buffer = self._new_buffer(seed)
        self.agent.set_return_range(*self._target_clip())

        self.run_dir = Path(cfg.resume or cfg.out or self._default_run_dir())
        self.epoch, self.env_steps, self.updates, self.wall_time = 0, 0, 0, 0.0
        self.best_success, self.best_return = -1.0, -math.inf
        self.history: list[dict[str, Any]] = []
        self._stop = False
        self.writer = None
        self._plotter: threading.Thread | None = None

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

    def _new_buffer(self, seed: int):
        from goalenvs.her.buffer import HerReplayBuffer
        from goalenvs.her.device_buffer import DeviceHerReplayBuffer

        cfg = self.config
        args = (cfg.buffer_size // self.world, self.observation_space, self.action_space)
        kwargs = dict(
            n_envs=cfg.num_envs,
            n_sampled_goal=cfg.n_sampled_goal,
            goal_selection_strategy=cfg.goal_selection_strategy,
            info_keys=self.info_keys,
            compute_terminated=self.compute_terminated,
            seed=seed,
            prioritized=cfg.prioritized,
            alpha=cfg.priority_alpha,
            beta=cfg.priority_beta,
        )
        if self.on_device:
            return DeviceHerReplayBuffer(*args, self.compute_reward, device=self.device, **kwargs)
        return HerReplayBuffer(*args, self.compute_reward, **kwargs)

    def _buffer_file(self) -> str:
        """The name of this worker's saved replay buffer in an epoch's unit."""
        return f"buffer_rank{self.rank}.{'pt' if self.on_device else 'npz'}"

    def _load_buffer(self, path: Path) -> Any:
        """A saved replay buffer of this run's kind (numpy, or on the device)."""
        from goalenvs.her.buffer import HerReplayBuffer
        from goalenvs.her.device_buffer import DeviceHerReplayBuffer

        if self.on_device:
            return DeviceHerReplayBuffer.load(
                path, self.compute_reward, self.compute_terminated, device=self.device
            )
        return HerReplayBuffer.load(path, self.compute_reward, self.compute_terminated)

    def _default_run_dir(self) -> str:
        name = self.config.env_id.replace("/", "_").replace(":", "_")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return f"runs/{name}-{self.config.algo}-s{self.config.seed}-{stamp}"

    # ---- collection

    def collect(self, obs: dict[str, np.ndarray], stats: dict[str, list]) -> dict:
        """Steps the training envs ``rollout_steps`` times, storing every transition."""
        if self.on_device:
            return self._collect_on_device(obs, stats)
        cfg, envs = self.config, self.envs
        seen = []
        for _ in range(self.rollout_steps):
            # The env and the buffer get the action space's dtype (float64 Boxes are common).
            actions = self.agent.act(obs, explore=True).astype(self.action_dtype, copy=False)
            next_obs, rewards, terminated, truncated, info = envs.step(actions)
            done = terminated | truncated
            real_next = next_obs
            infos = {k: np.asarray(info[k]) for k in self.info_keys}
            if done.any():
                real_next = {k: v.copy() for k, v in next_obs.items()}
                infos = {k: v.copy() for k, v in infos.items()}
                for i in np.flatnonzero(done):
                    final_obs = _final_obs(info, i)
                    for key in real_next:
                        real_next[key][i] = final_obs[key]
                    for key in infos:
                        infos[key][i] = _final(info, key, i)
                    stats["success"].append(float(_final(info, "is_success", i)))
            self.buffer.add(obs, real_next, actions, rewards, terminated, truncated, infos)
            seen.append(obs)
            obs = next_obs
        self.agent.normalizer.update({k: np.concatenate([o[k] for o in seen]) for k in GOAL_KEYS})
        self.agent.normalizer.recompute()
        self.env_steps += self.rollout_steps * cfg.num_envs * self.world
        return obs

    def _collect_on_device(
        self, obs: dict[str, torch.Tensor], stats: dict[str, list]
    ) -> dict[str, torch.Tensor]:
        """:meth:`collect` on the torch twins: actions, transitions and normalizer sums stay
        on the device. Per step the host learns one bool (did an episode end?); the
        episodes' successes come to it once per cycle."""
        envs, keys = self.envs, self.info_keys
        seen, successes = [], []
        for _ in range(self.rollout_steps):
            actions = self.agent.act(obs, explore=True)
            next_obs, rewards, terminated, truncated, info = envs.step(actions)
            # Autoreset is off: next_obs is every sub-env's true next (or final) observation.
            self.buffer.add(
                obs, next_obs, actions, rewards, terminated, truncated, {k: info[k] for k in keys}
            )
            seen.append(obs)
            done = terminated | truncated
            if bool(done.any()):
                successes.append(info["is_success"][done])
                fresh, _ = envs.reset(options={"reset_mask": done})
                next_obs = {
                    k: torch.where(done.reshape(-1, *(1,) * (v.ndim - 1)), fresh[k], v)
                    for k, v in next_obs.items()
                }
            obs = next_obs
        self.agent.normalizer.update({k: torch.cat([o[k] for o in seen]) for k in GOAL_KEYS})
        self.agent.normalizer.recompute()
        if successes:
            stats["success"].extend(torch.cat(successes).float().cpu().tolist())
        self.env_steps += self.rollout_steps * self.config.num_envs * self.world
        return obs

    def optimize(self, stats: dict[str, list]) -> None:
        """``n_batches`` gradient steps, then the target networks move once."""
        cfg = self.config
        # Every worker must make the same collective calls (the gradient all-reduce of
        # each update): they agree in one all-reduce that all of them can sample, and
        # otherwise all skip this cycle's updates together.
        # (The device buffer answers without reading the device most cycles.)
        can_sample = self.buffer.can_sample() if self.on_device else self.buffer.n_transitions > 0
        ready = torch.tensor([float(can_sample)], dtype=torch.float64)
        if float(distributed.all_reduce_sum(ready)[0]) < self.world:
            return
        totals: dict[str, torch.Tensor] = {}
        for _ in range(cfg.n_batches):
            batch = self.buffer.sample(cfg.batch_size, device=self.device)
            losses = self.agent.update(batch)
            # Per-sample TD errors are no loss to log: they set new replay priorities.
            td_errors = losses.pop("td_errors", None)
            if td_errors is not None and getattr(self.buffer, "prioritized", False):
                # The device buffer takes them where they are: no host copy per batch.
                self.buffer.update_priorities(
                    batch.indices, td_errors if self.on_device else td_errors.cpu().numpy()
                )
            for name, value in losses.items():
                totals[name] = totals[name] + value if name in totals else value
        self.agent.update_targets()
        self.updates += cfg.n_batches
        for name, total in totals.items():
            value = float(total) / cfg.n_batches
            if not math.isfinite(value):
                kept = (
                    f"the last good checkpoint is kept in {self.run_dir / 'policy_latest.pt'}"
                    if self.epoch
                    else "no epoch had finished, so there is no checkpoint"
                )
                raise TrainingError(
                    f"{name} became {value} in epoch {self.epoch + 1}: training stopped; {kept}"
                )
            stats[name].append(value)

    # ---- evaluation

    def evaluate(self) -> tuple[float, float, float]:
        """Mean success, return and length of deterministic episodes on the eval envs."""
        envs, n = self.eval_envs, self.config.n_eval_episodes
        seed = int(
            np.random.SeedSequence([self.config.seed, self.rank, self.epoch]).generate_state(1)[0]
        )
        obs, _ = envs.reset(seed=seed)
        if self.on_device:
            return self._evaluate_on_device(obs)
        done = np.zeros(n, bool)
        success, returns, lengths = np.zeros(n), np.zeros(n), np.zeros(n)
        limit = self.horizon or 100_000
        for _ in range(limit):
            actions = self.agent.act(obs, False).astype(self.action_dtype, copy=False)
            obs, rewards, terminated, truncated, info = envs.step(actions)
            active = ~done
            returns[active] += rewards[active]
            lengths[active] += 1
            ended = active & (terminated | truncated)
            success[ended] = np.asarray(info["is_success"])[ended]
            done |= ended
            if done.all():
                break
        totals = torch.tensor([success.sum(), returns.sum(), lengths.sum()], dtype=torch.float64)
        totals = distributed.all_reduce_sum(totals) / (n * self.world)
        return float(totals[0]), float(totals[1]), float(totals[2])

    def _evaluate_on_device(self, obs: dict[str, torch.Tensor]) -> tuple[float, float, float]:
        """:meth:`evaluate` on the torch twins: the sums stay on the device until the end."""
        envs, n = self.eval_envs, self.config.n_eval_episodes
        done = torch.zeros(n, dtype=torch.bool, device=self.device)
        success = torch.zeros(n, dtype=torch.float64, device=self.device)
        returns, lengths = torch.zeros_like(success), torch.zeros_like(success)
        for _ in range(self.horizon or 100_000):
            actions = self.agent.act(obs, False)
            obs, rewards, terminated, truncated, info = envs.step(actions)
            active = ~done
            returns += torch.where(active, rewards.double(), 0.0)
            lengths += active.double()
            ended = active & (terminated | truncated)
            success = torch.where(ended, info["is_success"].double(), success)
            done |= ended
            if bool(done.all()):
                break
        totals = torch.stack([success.sum(), returns.sum(), lengths.sum()]).cpu()
        totals = distributed.all_reduce_sum(totals) / (n * self.world)
        return float(totals[0]), float(totals[1]), float(totals[2])

    # ---- run folder

    def metadata(self, success: float) -> dict[str, Any]:
        """Plain metadata stored in every checkpoint."""
        cfg = self.config
        return {
            "env_id": cfg.env_id,
            "env_kwargs": cfg.env_kwargs,
            "algo": cfg.algo,
            "hidden_sizes": list(cfg.hidden_sizes),
            "gamma": self.gamma,
            "observation_space": {k: space_to_dict(self.observation_space[k]) for k in GOAL_KEYS},
            "action_space": space_to_dict(self.action_space),
            "config": cfg.to_dict(),
            "epoch": self.epoch,
            "env_steps": self.env_steps,
            "updates": self.updates,
            "wall_time": self.wall_time,
            "success_rate": success,
            "best_success_rate": self.best_success,
            "best_return": self.best_return,
            "goalenvs_version": goalenvs.__version__,
            "torch_version": str(torch.__version__),
        }

    def save(self, name: str | Path, success: float, training: bool) -> Path:
        """Writes one checkpoint of the run (main worker only); ``name`` is relative to the
        run folder."""
        return save_checkpoint(
            self.run_dir / name,
            self.metadata(success),
            self.agent.policy_modules(),
            self.agent.training_modules() if training else None,
        )

    def random_state(self) -> dict[str, Any]:
        """This worker's random generator states (plain values and tensors)."""
        envs = self.envs
        snapshot = getattr(envs, "snapshot", None)
        return {
            "format": STATE_FORMAT,
            "version": 1,
            "epoch": self.epoch,
            "rank": self.rank,
            "world_size": self.world,
            "torch": torch.get_rng_state(),
            "cuda": list(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else [],
            "agent": generator_states(self.agent),
            # The torch generators of the device path (exploration, buffer sampling).
            "torch_generators": {
                "agent": torch_generator_states(self.agent),
                "buffer": torch_generator_states(self.buffer),
            },
            "buffer": generator_states(self.buffer),
            # Before the epoch's last step (see _GeneratorSnapshot): a sub-env that reset
            # in that step draws the same episode again when the resume resets it.
            "envs": snapshot() if snapshot is not None else env_generator_states(envs.unwrapped),
        }

    def save_epoch(self, row: dict[str, Any], success: float) -> None:
        """Commits the finished epoch as one unit, then updates the files derived from it.

        Order: every worker writes its part of ``checkpoints/epoch_N`` (policy and training
        state from worker 0, random state and buffer from each), progress.csv gets the
        row, and worker 0 writes the manifest, which commits the epoch. Only then are
        policy_latest.pt, policy_best.pt and policy_epoch_K.pt updated and older units
        removed. A kill before the manifest leaves epoch N-1 as the last committed one.
        """
        cfg = self.config
        unit = unit_dir(self.run_dir, self.epoch)
        best = (success, row["eval_return"]) > (self.best_success, self.best_return)
        if best:
            self.best_success, self.best_return = success, row["eval_return"]
            self.best_epoch = self.epoch
        self.progress_rows.append([_csv_value(row[c]) for c in self.columns()])
        if self.main:
            if unit.exists():  # left by a run that was resumed from an earlier epoch
                shutil.rmtree(unit)
            unit.mkdir(parents=True)
        self._barrier()
        if self.main:
            self.save(unit.relative_to(self.run_dir) / "policy.pt", success, training=True)
        state = self.random_state()
        atomic_write(unit / f"state_rank{self.rank}.pt", lambda f: torch.save(state, f))
        if cfg.save_buffer:
            # The live buffer is saved as it is (episodes in progress included): the
            # resume closes them, since the envs restart there (issue 13.10).
            atomic_write_file(unit / self._buffer_file(), self.buffer.save)
        self._barrier()
        if not self.main:
            return
        self.write_progress()
        commit_unit(
            unit,
            self.epoch,
            {
                "world_size": self.world,
                "env_steps": self.env_steps,
                "best_epoch": self.best_epoch,
                "save_buffer": bool(cfg.save_buffer),
            },
        )
        atomic_copy(unit / "policy.pt", self.run_dir / "policy_latest.pt")
        if best:
            self.save("policy_best.pt", success, training=False)
        if cfg.save_every and self.epoch % cfg.save_every == 0:
            self.save(f"policy_epoch_{self.epoch}.pt", success, training=False)
        for epoch in unit_epochs(self.run_dir)[KEEP_UNITS:]:
            shutil.rmtree(unit_dir(self.run_dir, epoch), ignore_errors=True)

    def write_progress(self) -> None:
        """Rewrites progress.csv atomically with the header and every epoch's row so far."""
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(self.columns())
        writer.writerows(self.progress_rows)
        atomic_write_text(self.run_dir / "progress.csv", text.getvalue())

    def start_run_dir(self) -> None:
        """Creates the run folder (or reopens it to resume) and restores a resumed state."""
        cfg = self.config
        self.progress_rows: list[list[str]] = []
        self.best_epoch = 0
        self._resumed_envs: dict[str, Any] | None = None
        if not isinstance(self.envs, _GeneratorSnapshot):
            self.envs = _GeneratorSnapshot(self.envs)
        if cfg.resume:
            self.restore(Path(cfg.resume))
        elif self.main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            if (self.run_dir / "policy_latest.pt").exists() or unit_epochs(self.run_dir):
                raise ValueError(
                    f"out={str(self.run_dir)!r} already holds a run; pass "
                    f"resume={str(self.run_dir)!r} to continue it, or choose another folder"
                )
        if self.main:
            self.write_progress()
            # Written last: its new time says the folder is restored (tests wait for it).
            atomic_write_text(
                self.run_dir / "config.json", json.dumps(cfg.to_dict(), indent=2) + "\n"
            )
            if cfg.tensorboard:
                from torch.utils.tensorboard import SummaryWriter

                # Events past the resumed epoch (written before a kill) are hidden.
                purge = self.env_steps + 1 if cfg.resume else None
                self.writer = SummaryWriter(str(self.run_dir / "tensorboard"), purge_step=purge)

    def restore(self, run_dir: Path) -> None:
        """Loads the last committed epoch of ``run_dir`` (falling back to the one before
        when it is damaged) and cuts progress.csv to it."""
        if not (run_dir / "config.json").is_file():
            raise ValueError(f"resume={str(run_dir)!r} is not a run folder (no config.json)")
        if self.main:
            for path in remove_debris(run_dir):
                logger.info("removed %s, left by a write that was cut", path)
        self._barrier()
        epochs = unit_epochs(run_dir)
        if not epochs:
            if (run_dir / "policy_latest.pt").exists():
                self._restore_legacy(run_dir)
                return
            logger.warning(
                "resume=%r holds no finished epoch yet: training starts from the beginning",
                str(run_dir),
            )
            return
        failures = []
        for epoch in epochs:
            try:
                loaded = self._read_unit(unit_dir(run_dir, epoch))
                error = None
            except CheckpointError as exc:
                loaded, error = None, str(exc)
            ok = float(error is None)
            agreed = float(distributed.all_reduce_sum(torch.tensor([ok]))[0]) == self.world
            if agreed:
                break
            failures.append(f"epoch {epoch}: {error or 'damaged on another worker'}")
            logger.warning(
                "the checkpoint of epoch %d cannot be resumed (%s)%s",
                epoch,
                error or "damaged on another worker",
                "; trying the epoch before" if epoch != epochs[-1] else "",
            )
        else:
            raise CheckpointError(
                f"resume={str(run_dir)!r}: no checkpoint in it can be read ("
                + "; ".join(failures)
                + "). Restore the files from a backup, or start a new run with out=<folder>"
            )
        self._apply_unit(run_dir, epoch, *loaded)
        if epoch != epochs[0]:
            logger.warning("resuming from epoch %d, the last readable checkpoint", epoch)
        if self.main:
            for newer in epochs[: epochs.index(epoch)]:
                shutil.rmtree(unit_dir(run_dir, newer), ignore_errors=True)
            atomic_copy(unit_dir(run_dir, epoch) / "policy.pt", run_dir / "policy_latest.pt")
            best = run_dir / "policy_best.pt"
            if self.best_epoch == epoch and _checkpoint_epoch(best) != epoch:
                self.save("policy_best.pt", self.success, training=False)
        if self.main:
            self.progress_rows = self._read_progress_rows(run_dir, epoch)

    def _read_unit(self, unit: Path) -> tuple[dict, dict | None, Any]:
        """Reads every part of a unit this worker needs, applying nothing yet."""

        manifest = read_manifest(unit)
        epoch = manifest["epoch"]
        data = read_checkpoint(unit / "policy.pt", map_location=self.device)
        if data["metadata"].get("epoch") != epoch or "training" not in data:
            raise CheckpointError(
                f"{str(unit / 'policy.pt')!r} holds epoch {data['metadata'].get('epoch')!r} "
                f"{'with' if 'training' in data else 'without'} training state; its unit is "
                f"epoch {epoch}"
            )
        data["manifest"] = manifest
        if manifest.get("world_size") != self.world:
            return data, None, None
        path = unit / f"state_rank{self.rank}.pt"
        state = read_checkpoint_like(path, STATE_FORMAT)
        if state.get("epoch") != epoch or state.get("rank") != self.rank:
            raise CheckpointError(
                f"{str(path)!r} holds epoch {state.get('epoch')!r} of rank {state.get('rank')!r}, "
                f"expected epoch {epoch} of rank {self.rank}"
            )
        buffer = None
        path = unit / self._buffer_file()
        if self.config.save_buffer and path.name in manifest["files"]:
            try:
                buffer = self._load_buffer(path)
            except Exception as exc:  # numpy / zipfile raise many kinds on a damaged file
                raise CheckpointError(
                    f"{str(path)!r} is not a readable replay buffer ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0] if str(exc) else ''})"
                ) from None
        elif (
            self.config.save_buffer
            and path.with_suffix(".npz" if self.on_device else ".pt").name in manifest["files"]
        ):
            logger.warning(
                "%s holds a replay buffer of the other env_device: this run starts an empty one",
                unit,
            )
        return data, state, buffer

    def _apply_unit(
        self, run_dir: Path, epoch: int, data: dict, state: dict | None, buffer: Any
    ) -> None:
        meta = data["metadata"]
        self._load_training_state(run_dir, data)
        self.success = float(meta["success_rate"])
        self.best_epoch = int(data["manifest"].get("best_epoch", epoch))
        if state is None:
            logger.warning(
                "epoch %d was saved by %s workers, this run has %d: the networks resume, the "
                "random generators and replay buffers start anew",
                epoch,
                data["manifest"].get("world_size"),
                self.world,
            )
            return
        if buffer is not None:
            buffer.truncate_last_trajectory()  # the envs restart: open episodes end here
            self.buffer = buffer
        torch.set_rng_state(state["torch"].cpu())
        cuda = state["cuda"]
        if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all([s.cpu() for s in cuda])
        for name, obj in (("agent", self.agent), ("buffer", self.buffer)):
            missed = restore_torch_generators(obj, state.get("torch_generators", {}).get(name, {}))
            if missed:
                logger.warning("%s torch generators %s were not restored", name, missed)
            missed = restore_generators(obj, state[name])
            if missed:
                logger.warning("%s generators %s were not restored", name, missed)
        self._resumed_envs = state["envs"]

    def _load_training_state(self, run_dir: Path, data: dict) -> None:
        meta = data["metadata"]
        if meta["env_id"] != self.config.env_id or meta["algo"] != self.config.algo:
            raise ValueError(
                f"resume={str(run_dir)!r} holds a {meta['algo']} run on {meta['env_id']}, not "
                f"{self.config.algo} on {self.config.env_id}"
            )
        try:
            for name, module in self.agent.policy_modules().items():
                module.load_state_dict(data["policy"][name])
            for name, module in self.agent.training_modules().items():
                module.load_state_dict(data["training"][name])
        except (KeyError, RuntimeError, ValueError) as exc:
            raise ValueError(
                f"resume={str(run_dir)!r}: its checkpoint does not fit this config's networks "
                f"({type(exc).__name__}: {str(exc).splitlines()[0]})"
            ) from None
        self.epoch, self.env_steps = int(meta["epoch"]), int(meta["env_steps"])
        self.updates, self.wall_time = int(meta["updates"]), float(meta["wall_time"])
        self.best_success = float(meta["best_success_rate"])
        self.best_return = float(meta.get("best_return", -math.inf))

    def _restore_legacy(self, run_dir: Path) -> None:
        """A folder of goalenvs <= 0.x: policy_latest.pt (and buffer.npz), no units."""
        from goalenvs.her.buffer import HerReplayBuffer

        data = read_checkpoint(run_dir / "policy_latest.pt", map_location=self.device)
        if "training" not in data:
            raise ValueError(f"{run_dir / 'policy_latest.pt'} holds no training state to resume")
        self._load_training_state(run_dir, data)
        self.success = float(data["metadata"]["success_rate"])
        buffer_path = run_dir / "buffer.npz"
        if self.config.save_buffer and buffer_path.exists() and self.world == 1:
            if self.on_device:
                raise ValueError(
                    f"resume={str(run_dir)!r} holds a numpy replay buffer (buffer.npz) of "
                    "goalenvs <= 0.x: resume it with env_device='numpy'"
                )
            self.buffer = HerReplayBuffer.load(
                buffer_path, self.compute_reward, self.compute_terminated
            )
            self.buffer.truncate_last_trajectory()
        if self.main:
            self.progress_rows = self._read_progress_rows(run_dir, self.epoch)

    def _read_progress_rows(self, run_dir: Path, epoch: int) -> list[list[str]]:
        """progress.csv's rows of epochs 1..``epoch`` (later ones are dropped)."""
        path = run_dir / "progress.csv"
        try:
            with open(path, newline="") as f:
                rows = list(csv.reader(f))
        except OSError as exc:
            raise CheckpointError(f"{str(path)!r} cannot be read ({exc})") from None
        header, body = (rows[0], rows[1:]) if rows else ([], [])
        if header != self.columns():
            raise CheckpointError(
                f"{str(path)!r} does not start with the header {','.join(self.columns())}"
            )
        kept = [row for row in body if row and row[0].isdigit() and int(row[0]) <= epoch]
        if [int(row[0]) for row in kept] != list(range(1, epoch + 1)):
            raise CheckpointError(
                f"{str(path)!r} lacks rows of epochs 1..{epoch} (it holds epochs "
                f"{[row[0] for row in kept][:20]}): restore it from a backup to resume"
            )
        if len(body) > len(kept):
            logger.info("progress.csv: dropped %d rows past epoch %d", len(body) - len(kept), epoch)
        return kept

    def _barrier(self) -> None:
        """Waits for every worker (a no-op alone)."""
        if self.world > 1:
            distributed.all_reduce_sum(torch.zeros(1))

    def columns(self) -> list[str]:
        """The progress.csv header."""
        return [
            "epoch", "env_steps", "updates", "wall_time", "steps_per_s", "train_success",
            "eval_success", "eval_return", "eval_length", *loss_names(self.config.algo),
        ]  # fmt: skip

    def log(self, row: dict[str, Any]) -> None:
        """Sends the committed epoch's row to TensorBoard and redraws the curves.

        progress.csv already holds the row: :meth:`save_epoch` writes it with the epoch.
        """
        from goalenvs.her.curves import plot_curves

        self.history.append(row)
        if not self.main:
            return
        if self.writer is not None:
            for key, value in row.items():
                if key not in ("epoch", "env_steps"):
                    self.writer.add_scalar(key, value, row["env_steps"])
            self.writer.flush()
        rows = _read_progress(self.run_dir / "progress.csv")
        # Drawing takes a few hundred ms: it runs beside the next epoch's training.
        self.wait_for_plot()
        self._plotter = threading.Thread(
            target=plot_curves,
            args=(
                rows,
                self.run_dir / "curves.png",
                f"{self.config.env_id} {self.config.algo}",
                loss_names(self.config.algo),
            ),
            daemon=True,
        )
        self._plotter.start()

    def wait_for_plot(self) -> None:
        """Waits for the curves being drawn, if any."""
        if self._plotter is not None:
            self._plotter.join()
            self._plotter = None

    # ---- main loop

    def run(self) -> TrainResult:
        """Trains until ``config.epochs`` epochs are done (or Ctrl-C / SIGTERM, or
        ``stop_success``)."""
        cfg = self.config
        self.start_run_dir()
        obs, _ = self.envs.reset(seed=cfg.seed + self.rank * cfg.num_envs)
        if self._resumed_envs is not None:
            states = dict(self._resumed_envs)
            torch_states = states.pop(TORCH_GENERATORS, {})
            missed = restore_generators(self.envs.unwrapped, states)
            missed += restore_torch_generators(self.envs.unwrapped, torch_states)
            if missed:
                logger.warning("env generators %s were not restored (another env version?)", missed)
            obs, _ = self.envs.reset()
        success = getattr(self, "success", 0.0)
        previous = self._catch_signals()
        display = _Display(cfg, self.epoch) if cfg.verbose and self.main else None
        steps_per_epoch = cfg.n_cycles * self.rollout_steps
        stopped = False
        try:
            while self.epoch < cfg.epochs and not (stopped := self._agreed_stop()):
                start, steps_before = time.perf_counter(), self.env_steps
                stats: dict[str, list] = {name: [] for name in ("success", *loss_names(cfg.algo))}
                self.envs.arm(steps_per_epoch)
                for cycle in range(cfg.n_cycles):
                    obs = self.collect(obs, stats)
                    self.optimize(stats)
                    if display is not None:
                        display.cycle(self, cycle, stats, time.perf_counter() - start)
                    if stopped := self._agreed_stop():
                        break
                if stopped:
                    break
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
                }
                self.save_epoch(row, success)
                self.log(row)
                if display is not None:
                    display.epoch(row, self.best_success)
                if self.callback is not None:
                    self.callback(row)
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
            torch.distributed.destroy_process_group()


TORCH_GENERATORS = "torch_generators"  # key of a device twin's generator in the env states


def torch_generator_states(obj: Any) -> dict[str, torch.Tensor]:
    """``{attribute: state}`` of the ``torch.Generator`` attributes of ``obj`` (those of
    the device path: a device twin's, the device buffer's, the agent's exploration)."""
    return {
        name: value.get_state()
        for name, value in sorted(vars(obj).items())
        if isinstance(value, torch.Generator)
    }


def restore_torch_generators(obj: Any, states: dict[str, torch.Tensor]) -> list[str]:
    """Sets the torch generators of ``obj`` back to ``states``; returns the names that did
    not match (saved but absent, or present but not saved)."""
    current = {k: v for k, v in vars(obj).items() if isinstance(v, torch.Generator)}
    for name in current.keys() & states.keys():
        current[name].set_state(states[name])
    return sorted(current.keys() ^ states.keys())


def env_generator_states(env: Any) -> dict[str, Any]:
    """:func:`generator_states` of a vector env, with a device twin's torch generator."""
    states = generator_states(env)
    torch_states = torch_generator_states(env)
    if torch_states:
        states[TORCH_GENERATORS] = torch_states
    return states


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def _csv_value(value: Any) -> str:
    return str(value)


def _checkpoint_epoch(path: Path) -> int | None:
    """The epoch a checkpoint file names (None when it is missing or unreadable)."""
    try:
        return int(read_checkpoint(path)["metadata"]["epoch"])
    except (OSError, CheckpointError, KeyError, TypeError, ValueError):
        return None


def read_checkpoint_like(path: Path, format_name: str) -> dict:
    """Loads a small torch file of ours (tensors and plain values) with the checks and
    errors of :func:`read_checkpoint`."""
    if not path.is_file():
        raise CheckpointError(f"{str(path)!r} is missing")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            f"{str(path)!r} is not readable (truncated, corrupt, or not a torch file): "
            f"{type(exc).__name__}"
        ) from None
    if not isinstance(data, dict) or data.get("format") != format_name:
        raise CheckpointError(f"{str(path)!r} is not a {format_name} file")
    return data


class _GeneratorSnapshot(gym.vector.VectorWrapper):
    """Keeps the envs' generator states from just before the last step of an epoch.

    A sub-env whose episode ends in that step (same-step autoreset) draws its next
    episode inside it; saving the states from before the step lets the resume's reset
    draw that same episode again. Sub-envs that did not reset drew nothing in the step,
    so their state is the current one either way. Costs one comparison per step.
    """

    def __init__(self, env: gym.vector.VectorEnv) -> None:
        super().__init__(env)
        self._steps, self._target, self._states = 0, -1, None

    def arm(self, steps: int) -> None:
        """Takes the snapshot before the ``steps``-th step from now."""
        self._steps, self._target, self._states = 0, steps, None

    def step(self, actions: Any) -> Any:
        """Steps the envs (after taking the snapshot when this is the armed step)."""
        self._steps += 1
        if self._steps == self._target:
            self._states = env_generator_states(self.env.unwrapped)
        return self.env.step(actions)

    def snapshot(self) -> dict[str, Any]:
        """The states before the last step when it was the armed one, else the current."""
        if self._states is not None and self._steps == self._target:
            return self._states
        return env_generator_states(self.env.unwrapped)


def _read_progress(path: Path) -> list[dict[str, float]]:
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


class _Display:
    """The progress display: on a terminal, a rich bar over epochs with a live status line
    and one summary line per epoch; with output redirected (a log file, a pipe), only the
    summary lines, plain, one per epoch (a live line would leave cut copies in the file)."""

    def __init__(self, config: TrainConfig, first_epoch: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.config = config
        self.progress: Progress | None = None
        if not Console().is_terminal:
            return
        self.progress = Progress(
            TextColumn("[bold]epoch"),
            MofNCompleteColumn(),
            BarColumn(),
            TextColumn("{task.fields[status]}"),
            auto_refresh=False,
        )
        self.task = self.progress.add_task(
            "train", total=config.epochs, completed=first_epoch, status=""
        )
        self.progress.start()

    def cycle(self, trainer: Trainer, cycle: int, stats: dict[str, list], elapsed: float) -> None:
        """Refreshes the status line after a cycle (on a terminal only)."""
        if self.progress is None:
            return
        losses = "  ".join(
            f"{LABELS.get(name, name)} {stats[name][-1]:.3g}"
            for name in loss_names(self.config.algo)
            if stats[name]
        )
        status = (
            f"cycle {cycle + 1}/{self.config.n_cycles}  steps {trainer.env_steps}  "
            f"train success {_mean(stats['success'][-50:]):.2f}  {losses}"
        )
        self.progress.update(self.task, status=status)
        self.progress.refresh()

    def epoch(self, row: dict[str, Any], best: float) -> None:
        """Prints the epoch's summary line."""
        losses = "  ".join(
            f"{LABELS.get(name, name)} {row[name]:.3g}" for name in loss_names(self.config.algo)
        )
        line = (
            f"epoch {row['epoch']:>3}/{self.config.epochs}  steps {row['env_steps']:>7}  "
            f"success {row['eval_success']:.2f} (best {best:.2f})  "
            f"return {row['eval_return']:.1f}  {losses}  {row['steps_per_s']:.0f} steps/s"
        )
        if self.progress is None:
            print(line, flush=True)
            return
        self.progress.console.print(line, soft_wrap=True, markup=False, highlight=False)
        self.progress.update(self.task, completed=row["epoch"])
        self.progress.refresh()

    def close(self) -> None:
        """Stops the live display."""
        if self.progress is not None:
            self.progress.stop()


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
