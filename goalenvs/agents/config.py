"""Hyperparameters every HER algorithm shares (:class:`TrainConfig`), every field explained.

Each algorithm's own settings subclass it in that algorithm's file (``agents/ddpg.py``...).

The defaults are OpenAI baselines' HER defaults (Plappert et al. 2018) for DDPG+HER and
the HER paper's bit-flipping setup (Andrychowicz et al. 2017) for DQN+HER. A training
epoch is ``n_cycles`` cycles; a cycle collects ``rollout_steps`` steps on each of the
``num_envs`` vector sub-envs, then runs ``n_batches`` gradient steps of ``batch_size``
and moves the target networks towards the online ones (``polyak``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from goalenvs import envspec
from goalenvs.core import check_choice, check_in_range, check_int, check_positive
from goalenvs.her.goal_mix import GoalMix
from goalenvs.her.settings import (
    PRIORITIES,
    GoalSelectionStrategy,
    check_motion_clip,
    check_motion_weights,
)

# The buffer's enum is the one list of strategies; configs and the CLI read it.
STRATEGIES = tuple(strategy.value for strategy in GoalSelectionStrategy)
DEVICES = ("auto", "cpu", "cuda")
ENV_DEVICES = ("auto", "numpy", "device")
REPLAY_DEVICES = ("auto", "host", "device")  # replay_device: where the replay buffer lives
PRECISIONS = ("auto", "bf16", "fp32")
GRAPH_MODES = ("auto", "on", "off")  # cuda_graphs: goalenvs.agents.learner.Learner's graphs


@dataclass
class TrainConfig:
    """Settings every HER algorithm shares; each algorithm's file subclasses it with its own
    (:class:`goalenvs.agents.ddpg.DDPGConfig`, :class:`goalenvs.agents.dqn.DQNConfig`, ...)."""

    algo: ClassVar[str] = ""

    env_id: str = "goalenvs/PointReach-v0"  # gymnasium id of a goal env (Dict observation)
    env_kwargs: dict[str, object] = field(default_factory=dict)  # passed to gym.make / make_vec
    max_episode_steps: int | None = None  # gymnasium's time limit on every env; None: the env's
    # Recorded in config.json and the checkpoints, so that `goalenvs play` finds the file
    # from any folder; None: resolved from the current folder (for env_id's other forms: None).
    env_file: str | None = None  # absolute path of a path/to/file.py:Name env_id's file
    seed: int = 0  # seeds torch, the buffer, the training envs and (offset) the eval envs
    epochs: int = 50  # training epochs; evaluation, logging and checkpoints once per epoch
    n_cycles: int = 50  # cycles per epoch: collect, then n_batches updates, then targets
    rollout_steps: int | None = None  # vector steps collected per cycle; None: one episode
    n_batches: int = 40  # gradient steps per cycle
    batch_size: int = 256  # transitions per gradient step
    num_envs: int = 2  # parallel sub-envs of the native vector env (baselines: 2 per worker)
    buffer_size: int = 1_000_000  # transitions kept by the replay buffer
    n_sampled_goal: int = 4  # HER's k: relabeled goals per real one (k=4 relabels 80%)
    goal_selection_strategy: str = "future"  # where relabeled goals come from
    # A relabelling mix, fractions summing to 1 of future / final / episode / achieved
    # (anywhere in the buffer) / desired (other episodes' desired goals) / original goals,
    # e.g. {"future": 0.4, "desired": 0.4, "original": 0.2} (mrl's futureactual); when set
    # it replaces goal_selection_strategy and n_sampled_goal (goalenvs.her.goal_mix).
    goal_mix: dict[str, float] | None = None  # None: the strategy's mix (future k=4: 80/20)
    goal_mix_warmup: int = 0  # env steps stored in the buffer before the mix: only future
    gamma: float | None = None  # discount; None: 1 - 1/T with T the episode length
    # e.g. 3: each sampled transition's target sums its reward and the next two of its
    # episode (recomputed for a relabeled goal), discounted, and bootstraps from the third
    # next observation with gamma ** 3 (fewer steps near an episode's end or a termination)
    n_step: int = 1  # steps of each sampled return; 1: one-step targets
    polyak: float = 0.95  # target <- polyak * target + (1 - polyak) * online, once a cycle
    target_update_every: int = 0  # also move the targets every K updates of a cycle (0: no)
    # e.g. 0.9: deterministic acting (the evaluation, the saved policy's predict) by an
    # average of the policy's weights that moves 10% of the way to them after each cycle's
    # updates, as polyak moves the targets; each epoch also evaluates the policy itself
    # (progress.csv's eval_success_online). Exploring always acts by the policy itself.
    policy_average: float = 0.0  # 0: deterministic acting by the policy itself
    # e.g. 0.1 and 0.5: every optimizer's learning rate holds for the first half of the run's
    # epochs, then falls linearly, epoch by epoch, to 0.1 of itself in the last epoch
    # (progress.csv's lr_factor); the algorithm's own rates (actor_lr, ...) are the 1.
    lr_decay_to: float = 1.0  # the learning rates' factor in the last epoch; 1: constant
    lr_decay_from: float = 0.0  # the fraction of the epochs done before they start to fall
    clip_return: bool = True  # clip targets to the return range the env's rewards allow
    clip_range: tuple[float, float] | None = None  # that range given; None: from the rewards
    hidden_sizes: tuple[int, ...] = (256, 256, 256)  # hidden layers of every network
    layer_norm: bool = False  # LayerNorm after each hidden layer's Linear (as mrl's networks)
    norm_clip: float = 5.0  # normalized inputs are clipped to +-norm_clip
    norm_eps: float = 0.01  # smallest standard deviation the normalizer divides by
    clip_obs: float = 200.0  # raw observations and goals are clipped to +-clip_obs first
    info_keys: tuple[str, ...] | None = None  # info kept for compute_reward; None: every scalar
    n_eval_episodes: int = 10  # deterministic evaluation episodes per epoch, separate envs
    stop_success: float | None = None  # stop early once eval success reaches this
    preflight: bool = True  # run the checker's pre-training checks before the first step
    max_env_steps: int | None = None  # end at the first epoch that reaches this many env steps
    max_minutes: float | None = None  # end at the first epoch past this many minutes of a call
    device: str = "auto"  # "auto" (cuda when available), "cpu" or "cuda"
    # "numpy": the numpy twins, batches copied to `device` per update; "device": the torch
    # twins on `device`, with the replay buffer there too (no host copy per step; goalenvs
    # twins only); "auto": "device" when `device` is cuda and the env has a torch twin.
    env_device: str = "auto"  # where the training envs run: "auto", "numpy" or "device"
    # "host": the numpy buffer; "device": the torch buffer on `device`, sampled there (numpy
    # envs' steps are copied there as they are stored, and their goal functions get numpy
    # arrays back); "auto": beside the envs ("device" with env_device "device", else "host").
    replay_device: str = "auto"  # where the replay buffer lives: "auto", "host" or "device"
    torch_threads: int = 1  # torch intra-op threads; small nets gain nothing from more
    env_workers: int | None = None  # env processes (1: the trainer's); None: from the cores
    overlap: bool | None = None  # collect the next cycle beside the updates; None: with workers
    # "bf16": autocast, bfloat16 hidden layers with float32 weights, optimizer state and
    # output layers; "auto": bf16 on a CPU with bfloat16 instructions, else fp32
    # (goalenvs.agents.precision).
    precision: str = "auto"  # the networks' arithmetic in the updates: "auto", "bf16", "fp32"
    cuda_graphs: str = "auto"  # updates as captured CUDA graphs: "auto" (on CUDA), "on", "off"
    out: str | None = None  # run folder; None: runs/<env>-<algo>-<seed>-<time>
    save_every: int = 0  # also keep policy_epoch_K.pt every K epochs; 0: never
    prioritized: bool = False  # prioritized replay (Schaul et al. 2016) by TD error
    priority_alpha: float = 0.6  # how much priorities skew sampling (0: uniform)
    priority_beta: float = 0.4  # importance-weight correction (1: full)
    # the draw weight of a transition with no |TD error|, or (goal_motion) of an episode
    # whose object never moved: added to each priority before alpha
    priority_eps: float = 1e-6  # a floor under every priority
    # "goal_motion": each episode by how far its achieved goal moved (no importance weights)
    priority: str = "td_error"  # what prioritized replay draws by: "td_error", "goal_motion"
    motion_clip: float | None = None  # goal_motion: the most one step's move counts
    # e.g. (1, 1, 4): a Fetch object's lift counts four times a slide as long
    motion_weights: tuple[float, ...] | None = None  # goal_motion: a weight per goal entry
    save_buffer: bool = False  # save the replay buffer with policy_latest.pt (for --resume)
    resume: str | None = None  # run folder to continue (its policy_latest.pt)
    tensorboard: bool = False  # also log scalars with torch.utils.tensorboard
    verbose: bool = True  # show the progress display

    def __post_init__(self) -> None:
        self.env_kwargs = dict(self.env_kwargs)
        self.env_file = _env_file(self.env_id, self.env_file)
        self.hidden_sizes = tuple(int(h) for h in self.hidden_sizes)
        if self.info_keys is not None:
            self.info_keys = tuple(self.info_keys)
        for name in ("priority_alpha", "priority_beta", "polyak"):
            check_in_range(name, getattr(self, name))
        # 1 would keep the average at the untrained networks forever
        check_in_range("policy_average", self.policy_average, open_high=True)
        # 0 would stop the training in its last epoch
        check_in_range("lr_decay_to", self.lr_decay_to, open_low=True)
        check_in_range("lr_decay_from", self.lr_decay_from, open_high=True)
        check_positive("priority_eps", self.priority_eps)
        if self.clip_range is not None:
            clip = tuple(float(x) for x in self.clip_range)
            if len(clip) != 2 or not clip[0] < clip[1]:
                raise ValueError(f"clip_range must be (low, high) with low < high, got {clip}")
            self.clip_range = (clip[0], clip[1])
        for name in ("epochs", "n_cycles", "n_batches", "batch_size", "num_envs", "buffer_size"):
            check_positive(name, getattr(self, name), integer=True)
        check_positive("n_eval_episodes", self.n_eval_episodes, integer=True)
        check_positive("torch_threads", self.torch_threads, integer=True)
        if self.rollout_steps is not None:
            check_positive("rollout_steps", self.rollout_steps, integer=True)
        check_int("n_sampled_goal", self.n_sampled_goal, minimum=0)
        if self.goal_mix is not None:
            # Text as the command line gives it, or a table as a preset does: kept as the
            # plain dict of its nonzero fractions (what config.json records).
            self.goal_mix = GoalMix.parse(self.goal_mix).fractions()
        check_int("goal_mix_warmup", self.goal_mix_warmup, minimum=0)
        check_int("n_step", self.n_step, minimum=1)
        check_int("save_every", self.save_every, minimum=0)
        check_int("target_update_every", self.target_update_every, minimum=0)
        if self.env_workers is not None:
            check_int("env_workers", self.env_workers, minimum=1)
        for name in ("layer_norm", "preflight"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.overlap is not None and not isinstance(self.overlap, bool):
            raise ValueError(f"overlap must be True, False or None (auto), got {self.overlap!r}")
        check_choice("goal_selection_strategy", self.goal_selection_strategy, STRATEGIES)
        check_choice("priority", self.priority, PRIORITIES)
        if self.priority != "td_error" and not self.prioritized:
            raise ValueError(
                f"priority {self.priority!r} sets what prioritized replay draws by, got "
                "prioritized False: set prioritized True too (--priority sets both)"
            )
        check_motion_clip(self.motion_clip, self.priority)
        if self.motion_weights is not None:
            self.motion_weights = check_motion_weights(
                self.motion_weights, self.priority, text=True
            )
        check_choice("device", self.device, DEVICES)
        check_choice("env_device", self.env_device, ENV_DEVICES)
        check_choice("replay_device", self.replay_device, REPLAY_DEVICES)
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("cuda_graphs", self.cuda_graphs, GRAPH_MODES)
        check_in_range("gamma", self.gamma, open_low=True, open_high=True, none_ok=True)
        if not self.hidden_sizes or min(self.hidden_sizes) < 1:
            raise ValueError(f"hidden_sizes must be positive layer widths, got {self.hidden_sizes}")
        for name in ("norm_clip", "norm_eps", "clip_obs"):
            check_positive(name, getattr(self, name))
        check_in_range("stop_success", self.stop_success, open_low=True, none_ok=True)
        for name in ("max_episode_steps", "max_env_steps"):
            if getattr(self, name) is not None:
                check_positive(name, getattr(self, name), integer=True)
        if self.max_minutes is not None:
            check_positive("max_minutes", self.max_minutes)

    @property
    def lr_decays(self) -> bool:
        """True when the learning rates follow the ``lr_decay_to`` schedule (progress.csv
        then has an ``lr_factor`` column)."""
        return self.lr_decay_to != 1.0

    def lr_factor(self, epoch: int) -> float:
        """The learning rates' factor in epoch ``epoch`` (0 the first) of ``epochs``: 1
        until the epochs done at its end pass ``lr_decay_from`` of the run, then falling
        linearly to ``lr_decay_to`` in the last epoch."""
        check_int("epoch", epoch, minimum=0)
        if not self.lr_decays:
            return 1.0
        done = min(epoch + 1, self.epochs) / self.epochs
        past = max(0.0, done - self.lr_decay_from) / (1.0 - self.lr_decay_from)
        return 1.0 - (1.0 - self.lr_decay_to) * past

    def make_kwargs(self) -> dict[str, object]:
        """The keyword arguments every env of the run is built with (``gym.make``,
        ``gym.make_vec``): ``env_kwargs``, and ``max_episode_steps`` when one is given
        (gymnasium applies it as a ``TimeLimit``; it never reaches the env's constructor)."""
        if self.max_episode_steps is None:
            return dict(self.env_kwargs)
        return {**self.env_kwargs, "max_episode_steps": self.max_episode_steps}

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values, with the algorithm name under ``"algo"``."""
        data = dataclasses.asdict(self)
        data["hidden_sizes"] = list(self.hidden_sizes)
        data["info_keys"] = None if self.info_keys is None else list(self.info_keys)
        data["clip_range"] = None if self.clip_range is None else list(self.clip_range)
        if self.motion_weights is not None:
            data["motion_weights"] = list(self.motion_weights)
        return {"algo": self.algo, **data}

    def her_settings(self, gamma: float | None = None) -> dict[str, object]:
        """The replay buffer's HER, priority and n-step settings, under the buffers'
        argument names (``goal_mix``, when set, in place of the strategy and
        ``n_sampled_goal``); ``gamma`` is the run's resolved discount, which n-step
        returns are summed with (``config.gamma`` when that is set)."""
        if self.goal_mix is not None:
            relabelling: dict[str, object] = {"goal_mix": GoalMix.parse(self.goal_mix)}
        else:
            relabelling = {
                "n_sampled_goal": self.n_sampled_goal,
                "goal_selection_strategy": self.goal_selection_strategy,
            }
        return {
            "n_envs": self.num_envs,
            **relabelling,
            "goal_mix_warmup": self.goal_mix_warmup,
            "prioritized": self.prioritized,
            "alpha": self.priority_alpha,
            "beta": self.priority_beta,
            "priority_eps": self.priority_eps,
            "priority": self.priority,
            "motion_clip": self.motion_clip,
            "motion_weights": self.motion_weights,
            "n_step": self.n_step,
            "gamma": (self.gamma if self.gamma is not None else gamma) if self.n_step > 1 else None,
        }


def _env_file(env_id: str, given: str | None) -> str | None:
    """``env_file`` for ``env_id``: ``given`` when it is the absolute path of a file of the
    name ``env_id`` gives (a config read back from config.json), else the path
    :func:`goalenvs.envspec.recorded_file` resolves now (None for env_id's other forms)."""
    path = envspec.env_file(env_id) if isinstance(env_id, str) else None
    if path is None:
        return None
    if (
        isinstance(given, str)
        and not path.is_absolute()
        and Path(given).is_absolute()
        and Path(given).name == path.name
    ):
        return given
    return envspec.recorded_file(env_id)
