"""The HER training loop: epochs of (collect, update, move targets) cycles, then evaluate.

``train(config)`` builds the native vector envs (``gym.make_vec``), the HER replay
buffer and the agent, trains, and writes the run folder::

    config.json        the full config (rebuild it with ``config_from_dict``)
    progress.csv       one row per epoch
    curves.png         success rate and return against env steps, redrawn every epoch
    policy_best.pt     the policy with the best eval success so far
    policy_latest.pt   policy plus training state, every epoch (what --resume reads)
    policy_epoch_K.pt  every ``save_every`` epochs
    buffer.npz         the replay buffer, with ``save_buffer``

Ctrl-C finishes the current cycle, saves ``policy_latest.pt`` and returns.
"""

from __future__ import annotations

import csv
import importlib
import json
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
from gymnasium import spaces

import goalenvs  # importing registers the goalenvs ids
from goalenvs.core import GOAL_KEYS
from goalenvs.her import distributed
from goalenvs.her.algos import algo_for, check_action_space, get_algo, make_agent
from goalenvs.her.checkpoint import read_checkpoint, save_checkpoint, space_to_dict
from goalenvs.her.config import TrainConfig

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
    interrupted: bool  # True when Ctrl-C stopped the run
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


# Packages behind third-party env ids, and the goalenvs extra that installs each.
EXTRAS = {"gymnasium_robotics": "robotics"}


def env_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    """The registered spec of ``env_id``, gymnasium's ``module:EnvId`` form included.

    The module of ``module:EnvId`` is imported first (that registers its ids), so that
    a missing package is one clear line naming it (and the goalenvs extra providing it).
    """
    module, sep, name = env_id.rpartition(":")
    if sep:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or module.split(".")[0] != exc.name.split(".")[0]:
                raise  # the package is there; something it imports is broken
            package = module.split(".")[0]
            extra = EXTRAS.get(package)
            how = (
                f"pip install 'goalenvs[{extra}]'"
                if extra
                else f"install the package that provides it ({package})"
            )
            raise ValueError(
                f"env_id={env_id!r} needs the package {package!r}, which is not installed: {how}"
            ) from None
    try:
        return gym.spec(name)
    except gym.error.Error as exc:
        raise ValueError(f"env_id={env_id!r} could not be made: {exc}") from None


def validate_training_env(env_id: str, env_kwargs: dict[str, Any], algo: str | None) -> gym.Env:
    """Makes one env and checks the trainer can drive it: a goal Dict observation and an
    action space the algorithm (a registered name, or None for any) fits.

    This is the trainer's quick gate, not the goal-env contract: ``goalenvs check``
    (:func:`goalenvs.checker.check_goal_env`) checks that.
    """
    if algo is not None:
        get_algo(algo)
    env_spec(env_id)
    try:
        env = gym.make(env_id, **env_kwargs)
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


def make_vector_env(
    env_id: str, env_kwargs: dict[str, Any], num_envs: int, mode: gym.vector.AutoresetMode
) -> gym.vector.VectorEnv:
    """The env's native vector twin (or gymnasium's SyncVectorEnv) in autoreset ``mode``."""
    mode = gym.vector.AutoresetMode(mode)
    if env_spec(env_id).vector_entry_point is not None:
        return gym.make_vec(env_id, num_envs=num_envs, autoreset_mode=mode, **env_kwargs)
    return gym.make_vec(
        env_id,
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

    def batched(achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        result = np.asarray(fn(achieved_goal, desired_goal, info))
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
        self.envs = make_vector_env(
            cfg.env_id, cfg.env_kwargs, cfg.num_envs, gym.vector.AutoresetMode.SAME_STEP
        )
        self.eval_envs = make_vector_env(
            cfg.env_id, cfg.env_kwargs, cfg.n_eval_episodes, gym.vector.AutoresetMode.NEXT_STEP
        )
        horizon = getattr(self.envs.unwrapped, "max_episode_steps", None) or (
            self.env.spec.max_episode_steps if self.env.spec is not None else None
        )
        if horizon is None and (cfg.rollout_steps is None or cfg.gamma is None):
            raise ValueError(
                f"{cfg.env_id} declares no episode length: set rollout_steps and gamma"
            )
        self.horizon = horizon
        self.rollout_steps = cfg.rollout_steps or int(horizon)
        self.gamma = cfg.gamma if cfg.gamma is not None else 1.0 - 1.0 / horizon

        seed = cfg.seed + self.rank
        torch.manual_seed(cfg.seed)
        self.agent = make_agent(cfg, self.observation_space, self.action_space, self.gamma, seed)
        self.agent.to(self.device)
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

        cfg = self.config
        return HerReplayBuffer(
            cfg.buffer_size // self.world,
            self.observation_space,
            self.action_space,
            self.compute_reward,
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

    def _default_run_dir(self) -> str:
        name = self.config.env_id.replace("/", "_").replace(":", "_")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return f"runs/{name}-{self.config.algo}-s{self.config.seed}-{stamp}"

    # ---- collection

    def collect(self, obs: dict[str, np.ndarray], stats: dict[str, list]) -> dict:
        """Steps the training envs ``rollout_steps`` times, storing every transition."""
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

    def optimize(self, stats: dict[str, list]) -> None:
        """``n_batches`` gradient steps, then the target networks move once."""
        cfg = self.config
        # Every worker must make the same collective calls (the gradient all-reduce of
        # each update): they agree in one all-reduce that all of them can sample, and
        # otherwise all skip this cycle's updates together.
        ready = torch.tensor([float(self.buffer.n_transitions > 0)], dtype=torch.float64)
        if float(distributed.all_reduce_sum(ready)[0]) < self.world:
            return
        totals: dict[str, torch.Tensor] = {}
        for _ in range(cfg.n_batches):
            batch = self.buffer.sample(cfg.batch_size, device=self.device)
            losses = self.agent.update(batch)
            # Per-sample TD errors are no loss to log: they set new replay priorities.
            td_errors = losses.pop("td_errors", None)
            if td_errors is not None and getattr(self.buffer, "prioritized", False):
                self.buffer.update_priorities(batch.indices, td_errors.cpu().numpy())
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

    def save(self, name: str, success: float, training: bool) -> Path:
        """Writes one checkpoint of the run (main worker only)."""
        return save_checkpoint(
            self.run_dir / name,
            self.metadata(success),
            self.agent.policy_modules(),
            self.agent.training_modules() if training else None,
        )

    def save_latest(self, success: float) -> None:
        """``policy_latest.pt`` with the training state (and the buffer when asked)."""
        if not self.main:
            return
        self.save("policy_latest.pt", success, training=True)
        if self.config.save_buffer:
            self.buffer.truncate_last_trajectory()
            self.buffer.save(self.run_dir / "buffer.npz")

    def start_run_dir(self) -> None:
        """Creates the run folder (or reopens it to resume) and restores a resumed state."""
        cfg = self.config
        if cfg.resume:
            self.restore(Path(cfg.resume))
        elif self.main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            if (self.run_dir / "policy_latest.pt").exists():
                raise ValueError(
                    f"out={str(self.run_dir)!r} already holds a run; pass "
                    f"resume={str(self.run_dir)!r} to continue it, or choose another folder"
                )
        if self.main:
            (self.run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
            if not cfg.resume or not (self.run_dir / "progress.csv").exists():
                with open(self.run_dir / "progress.csv", "w", newline="") as f:
                    csv.writer(f).writerow(self.columns())
            if cfg.tensorboard:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(str(self.run_dir / "tensorboard"))

    def restore(self, run_dir: Path) -> None:
        """Loads the training state of ``run_dir/policy_latest.pt`` (and its buffer)."""
        from goalenvs.her.buffer import HerReplayBuffer

        data = read_checkpoint(run_dir / "policy_latest.pt", map_location=self.device)
        meta = data["metadata"]
        if meta["env_id"] != self.config.env_id or meta["algo"] != self.config.algo:
            raise ValueError(
                f"resume={str(run_dir)!r} holds a {meta['algo']} run on {meta['env_id']}, not "
                f"{self.config.algo} on {self.config.env_id}"
            )
        if "training" not in data:
            raise ValueError(f"{run_dir / 'policy_latest.pt'} holds no training state to resume")
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
        buffer_path = run_dir / "buffer.npz"
        if self.config.save_buffer and buffer_path.exists() and self.world == 1:
            self.buffer = HerReplayBuffer.load(
                buffer_path, self.compute_reward, self.compute_terminated
            )

    def columns(self) -> list[str]:
        """The progress.csv header."""
        return [
            "epoch", "env_steps", "updates", "wall_time", "steps_per_s", "train_success",
            "eval_success", "eval_return", "eval_length", *loss_names(self.config.algo),
        ]  # fmt: skip

    def log(self, row: dict[str, Any]) -> None:
        """Appends the epoch's row to progress.csv, TensorBoard, and redraws the curves."""
        from goalenvs.her.curves import plot_curves

        self.history.append(row)
        if not self.main:
            return
        with open(self.run_dir / "progress.csv", "a", newline="") as f:
            csv.writer(f).writerow([row[c] for c in self.columns()])
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
        """Trains until ``config.epochs`` epochs are done (or Ctrl-C, or ``stop_success``)."""
        cfg = self.config
        self.start_run_dir()
        obs, _ = self.envs.reset(seed=cfg.seed + self.rank * cfg.num_envs)
        success = 0.0
        previous = self._catch_sigint()
        display = _Display(cfg, self.epoch) if cfg.verbose and self.main else None
        try:
            while self.epoch < cfg.epochs and not self._stop:
                start, steps_before = time.perf_counter(), self.env_steps
                stats: dict[str, list] = {name: [] for name in ("success", *loss_names(cfg.algo))}
                for cycle in range(cfg.n_cycles):
                    obs = self.collect(obs, stats)
                    self.optimize(stats)
                    if display is not None:
                        display.cycle(self, cycle, stats, time.perf_counter() - start)
                    if self._stop:
                        break
                if self._stop:
                    self.wall_time += time.perf_counter() - start
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
                if self.main and (success, ret) > (self.best_success, self.best_return):
                    self.best_success, self.best_return = success, ret
                    self.save("policy_best.pt", success, training=False)
                if self.main and cfg.save_every and self.epoch % cfg.save_every == 0:
                    self.save(f"policy_epoch_{self.epoch}.pt", success, training=False)
                self.save_latest(success)
                self.log(row)
                if display is not None:
                    display.epoch(row, self.best_success)
                if self.callback is not None:
                    self.callback(row)
                if cfg.stop_success is not None and success >= cfg.stop_success:
                    break
            if self._stop:
                self.save_latest(success)
        finally:
            if display is not None:
                display.close()
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            self.close()
        return TrainResult(
            run_dir=self.run_dir,
            best_success_rate=self.best_success,
            final_success_rate=success,
            epochs=self.epoch,
            env_steps=self.env_steps,
            wall_time=self.wall_time,
            interrupted=self._stop,
            history=self.history,
        )

    def _catch_sigint(self) -> Any:
        """The first Ctrl-C asks the loop to stop after the current cycle; a second one
        interrupts at once."""
        if threading.current_thread() is not threading.main_thread():
            return None

        def handler(signum: int, frame: Any) -> None:
            self._stop = True
            signal.signal(signal.SIGINT, signal.default_int_handler)

        return signal.signal(signal.SIGINT, handler)

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


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def _read_progress(path: Path) -> list[dict[str, float]]:
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


class _Display:
    """The rich progress display: a bar over epochs, one summary line per epoch."""

    def __init__(self, config: TrainConfig, first_epoch: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.config = config
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
        """Refreshes the status line after a cycle."""
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
        self.progress.console.print(
            f"epoch {row['epoch']:>3}  steps {row['env_steps']:>7}  "
            f"success {row['eval_success']:.2f} (best {best:.2f})  "
            f"return {row['eval_return']:.1f}  {losses}  {row['steps_per_s']:.0f} steps/s",
            soft_wrap=True,
        )
        self.progress.update(self.task, completed=row["epoch"])
        self.progress.refresh()

    def close(self) -> None:
        """Stops the live display."""
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
