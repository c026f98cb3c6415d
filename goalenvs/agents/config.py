"""Hyperparameters every HER algorithm shares (:class:`TrainConfig`), every field explained.

Each algorithm's own settings subclass it in that algorithm's file (``agents/ddpg.py``...).

The defaults are OpenAI baselines' HER defaults (Plappert et al. 2018) for DDPG+HER and
the HER paper's bit-flipping setup (Andrychowicz et al. 2017) for DQN+HER. A training
epoch is ``n_cycles`` cycles; a cycle collects ``rollout_steps`` steps on each of the
``num_envs`` vector sub-envs, then runs ``n_batches`` gradient steps of ``batch_size``
and moves the target networks towards the online ones (``polyak``).

Each field is declared once, with :func:`option`: its help, its check and whether a
resumed run keeps it. The ``goalenvs train`` flag (``--field-name``), the preset key, the
resume rule and docs/training.md's option table are derived from it (:func:`options`)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

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

#: Settings goalenvs had and no longer has -> the value at which they did nothing and a
#: commit that has them: a config.json of an older run that holds that value still loads.
RETIRED: dict[str, tuple[object, str]] = {
    "lr_decay_to": (1.0, "41a2076"),
    "lr_decay_from": (0.0, "41a2076"),
    "target_update_every": (0, "ab85a68"),
    "n_step_until": (0, "148f048"),
    "motion_threshold": (None, "148f048"),
    "motion_scope": ("episode", "148f048"),
}

_T = TypeVar("_T")
Check = Callable[[str, Any], Any]  # (field name, value) -> the value kept, or raises


@dataclass(frozen=True)
class Option:
    """What a config field is to its users, declared beside it with :func:`option`."""

    help: str  # one line: --help, the preset key's meaning, docs/training.md's table
    check: Check | None = None  # the value's check; None is let through where it is the default
    choices: tuple[str, ...] = ()  # the values it takes (checked; the flag's choices)
    kept: str = ""  # a resumed run keeps it, held by this ("the run's replay has"); "": free
    flags: tuple[str, ...] = ()  # short names the flag also takes (--cycles for n_cycles)
    metavar: str | None = None  # the flag's value in --help
    cli: bool = True  # False: no flag of its own (a preset sets it, or another flag does)


def option(
    default: _T,
    help: str,
    *,
    check: Check | None = None,
    choices: tuple[str, ...] = (),
    kept: str = "",
    flags: tuple[str, ...] = (),
    metavar: str | None = None,
    cli: bool = True,
) -> _T:
    """A config field with its :class:`Option` (a dict or list default is copied per config)."""
    metadata = {"option": Option(help, check, choices, kept, flags, metavar, cli)}
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: copy.copy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


_OPTIONS: dict[type, dict[str, tuple[dataclasses.Field, Option]]] = {}


def options(cls: type) -> dict[str, tuple[dataclasses.Field, Option]]:
    """Each field of the config class ``cls`` -> (the field, its :class:`Option`); a field
    a subclass declares again with a plain default (DQN's ``batch_size``) keeps its base's,
    and a plain field of a config declared elsewhere gets no flag."""
    if cls not in _OPTIONS:
        found = {}
        for f in dataclasses.fields(cls):
            declared = (getattr(c, "__dataclass_fields__", {}).get(f.name) for c in cls.__mro__)
            given = (d.metadata["option"] for d in declared if d and "option" in d.metadata)
            found[f.name] = (f, next(given, Option("", cli=False)))
        _OPTIONS[cls] = found
    return _OPTIONS[cls]


def value_type(f: dataclasses.Field) -> str:
    """The annotation of ``f`` without ``| None``: "int", "float", "str", "bool", "tuple[...]"."""
    return str(f.type).replace(" | None", "")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def at_least_zero(name: str, value: Any) -> Any:
    """``value`` when it is a finite number >= 0, else the error naming ``name``."""
    if not (_number(value) and value >= 0):
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return value


def finite(name: str, value: Any) -> Any:
    """``value`` when it is a finite number, else the error naming ``name``."""
    if not _number(value):
        raise ValueError(f"{name} must be a finite number or None, got {value!r}")
    return value


POSITIVE: Check = check_positive
POSITIVE_INT: Check = functools.partial(check_positive, integer=True)
FRACTION: Check = check_in_range  # in [0, 1]
COUNT: Check = functools.partial(check_int, minimum=0)
REPLAY = "the run's replay has"  # what holds a replay setting on resume: its saved buffer


@dataclass
class TrainConfig:
    """Settings every HER algorithm shares; each algorithm's file subclasses it with its own
    (:class:`goalenvs.agents.ddpg.DDPGConfig`, :class:`goalenvs.agents.dqn.DQNConfig`, ...)."""

    algo: ClassVar[str] = ""

    env_id: str = option("goalenvs/PointReach-v0", "gymnasium id of a goal env", cli=False)
    env_kwargs: dict[str, object] = option(  # noqa: RUF009 (a field specifier)
        {}, "env constructor arguments, passed to gym.make / make_vec", cli=False
    )
    max_episode_steps: int | None = option(
        None,
        "end every episode after N steps (gymnasium's TimeLimit), for an env that declares no "
        "episode length or to change it; default: the env's own",
        check=POSITIVE_INT,
    )
    # Recorded in config.json and the checkpoints, so that `goalenvs play` finds the file
    # from any folder; None: resolved from the current folder (for env_id's other forms: None).
    env_file: str | None = option(
        None, "absolute path of a path/to/file.py:Name env_id's file", cli=False
    )
    seed: int = option(
        0, "seeds torch, the buffer, the training envs and (offset) the eval envs", check=COUNT
    )
    epochs: int = option(
        50,
        "training epochs (total, when resuming); evaluation, logging and checkpoints once per "
        "epoch",
        check=POSITIVE_INT,
    )
    n_cycles: int = option(
        50,
        "cycles per epoch: collect, then n_batches updates, then the targets move",
        check=POSITIVE_INT,
        flags=("--cycles",),
    )
    rollout_steps: int | None = option(
        None, "vector steps collected per cycle; None: one episode", check=POSITIVE_INT
    )
    n_batches: int = option(
        40, "gradient steps per cycle", check=POSITIVE_INT, flags=("--batches",)
    )
    batch_size: int = option(256, "transitions per gradient step", check=POSITIVE_INT)
    num_envs: int = option(
        2, "parallel envs per worker (baselines: 2 per worker)", check=POSITIVE_INT
    )
    buffer_size: int = option(
        1_000_000, "transitions kept by the replay buffer", check=POSITIVE_INT
    )
    n_sampled_goal: int = option(
        4, "HER's k: relabeled goals per real one (k=4 relabels 80%)", check=COUNT, kept=REPLAY
    )
    goal_selection_strategy: str = option(
        "future",
        "where HER's relabeled goals come from",
        choices=STRATEGIES,
        kept=REPLAY,
        flags=("--strategy",),
    )
    # text as the command line gives it, or a table as a preset does: kept as the plain
    # dict of its nonzero fractions (what config.json records)
    goal_mix: dict[str, float] | None = option(  # noqa: RUF009 (a field specifier)
        None,
        "a relabelling mix in place of the strategy and n_sampled_goal: fractions of future, "
        "final, episode, achieved (anywhere in the buffer), desired (other episodes' desired "
        "goals) and original goals that sum to 1, e.g. future=0.4,desired=0.4,original=0.2 (mrl's "
        "futureactual); None: the strategy's mix (future k=4: 80/20)",
        check=lambda name, mix: GoalMix.parse(mix).fractions(),
        kept=REPLAY,
        metavar="SOURCE=FRACTION,...",
    )
    goal_mix_warmup: int = option(
        0,
        "env steps stored before the goal mix applies (future goals only until then)",
        check=COUNT,
        kept=REPLAY,
    )
    gamma: float | None = option(
        None,
        "discount; None: 1 - 1/T with T the episode length",
        check=functools.partial(check_in_range, open_low=True, open_high=True, none_ok=True),
    )
    n_step: int = option(
        1,
        "steps of each sampled return: the target sums a transition's reward and the next N-1 of "
        "its episode (recomputed for a relabeled goal) and bootstraps with gamma**N (fewer steps "
        "near an episode's end or a termination); 1: one-step targets",
        check=functools.partial(check_int, minimum=1),
        kept=REPLAY,
    )
    polyak: float = option(
        0.95, "target <- polyak * target + (1 - polyak) * online, once a cycle", check=FRACTION
    )
    # 1 would keep the average at the untrained networks forever
    policy_average: float = option(
        0.0,
        "evaluate, save and play an average of the policy's weights that moves 1 - W of the way to"
        " the trained ones after each cycle's updates, in [0, 1) (each epoch also evaluates the "
        "policy itself: progress.csv's eval_success_online; training and exploring are unchanged);"
        " 0: the policy itself",
        check=functools.partial(check_in_range, open_high=True),
        kept="its checkpoints hold the networks of",
        metavar="W",
    )
    clip_return: bool = option(True, "clip targets to the return range the env's rewards allow")
    clip_range: tuple[float, float] | None = option(
        None, "that range, (low, high); None: from the rewards", cli=False
    )
    hidden_sizes: tuple[int, ...] = option(
        (256, 256, 256), "hidden layers of every network", cli=False
    )
    layer_norm: bool = option(
        False, "a LayerNorm after each hidden layer's Linear (as mrl's networks)"
    )
    norm_clip: float = option(5.0, "normalized inputs are clipped to +-norm_clip", check=POSITIVE)
    norm_eps: float = option(
        0.01, "smallest standard deviation the normalizer divides by", check=POSITIVE
    )
    clip_obs: float = option(
        200.0, "raw observations and goals are clipped to +-clip_obs first", check=POSITIVE
    )
    info_keys: tuple[str, ...] | None = option(
        None, "info entries kept for compute_reward; None: every scalar", cli=False
    )
    n_eval_episodes: int = option(
        10, "deterministic evaluation episodes per epoch, on separate envs", check=POSITIVE_INT
    )
    stop_success: float | None = option(
        None,
        "stop early once the eval success rate reaches this",
        check=functools.partial(check_in_range, open_low=True, none_ok=True),
    )
    preflight: bool = option(
        True,
        "run the goal-env checks before the first step (the cheap ones of `goalenvs check`: goal "
        "Dict, batched goal functions, is_success, episode length, the replay buffer)",
    )
    max_env_steps: int | None = option(
        None,
        "end at the first epoch that reaches N env steps (the run's total, resumed epochs "
        "included); without --epochs the run gets the epochs N needs",
        check=POSITIVE_INT,
    )
    max_minutes: float | None = option(
        None,
        "end at the first epoch that ends past M minutes of this call (committed, so --resume "
        "continues it)",
        check=POSITIVE,
        flags=("--minutes",),
        metavar="M",
    )
    device: str = option(
        "auto",
        "where the networks (and with env_device device, the envs and the replay buffer) live; "
        "auto: cuda when torch sees one, else cpu",
        choices=DEVICES,
    )
    env_device: str = option(
        "auto",
        "where the training envs run: numpy twins (batches copied to device per update), or torch "
        "twins on device with the replay buffer there too (device; goalenvs twins only); auto: "
        "device when device is cuda and the env has a torch twin",
        choices=ENV_DEVICES,
    )
    replay_device: str = option(
        "auto",
        "where the replay buffer lives: host memory (numpy) or device (torch, sampled there; numpy"
        " envs' steps are copied there as they are stored); auto: beside the envs",
        choices=REPLAY_DEVICES,
    )
    torch_threads: int = option(
        1, "torch intra-op threads; small nets gain nothing from more", check=POSITIVE_INT
    )
    env_workers: int | None = option(
        None,
        "processes that step the training envs (1: the trainer's own); None: from the machine's "
        "cores, 1 for envs with a native vector twin",
        check=functools.partial(check_int, minimum=1),
    )
    overlap: bool | None = option(
        None,
        "collect the next cycle in the background while the learner updates (one cycle of policy "
        "lag); None: on with env worker processes",
    )
    precision: str = option(
        "auto",
        "the networks' arithmetic in the updates: bf16 autocast (bfloat16 hidden layers, float32 "
        "weights, optimizer state and output layers) or fp32; auto: bf16 on a CPU with bfloat16 "
        "instructions, else fp32 (goalenvs.agents.precision)",
        choices=PRECISIONS,
    )
    cuda_graphs: str = option(
        "auto",
        "run each update as a captured CUDA graph; auto: on a CUDA device",
        choices=GRAPH_MODES,
    )
    out: str | None = option(None, "run folder; None: runs/<env>-<algo>-s<seed>-<time>")
    save_every: int = option(0, "also keep policy_epoch_K.pt every K epochs; 0: never", check=COUNT)
    prioritized: bool = option(
        False,
        "prioritized replay (Schaul et al. 2016) by TD error (importance weights in the critic "
        "loss)",
        kept=REPLAY,
    )
    priority_alpha: float = option(
        0.6,
        "prioritized replay: how far the priorities skew the draws, in [0, 1] (0: uniform, 1: in "
        "proportion)",
        check=FRACTION,
        kept=REPLAY,
    )
    priority_beta: float = option(
        0.4,
        "prioritized replay by td_error: how much the importance weights correct the skew, in [0, "
        "1] (1: fully)",
        check=FRACTION,
        kept=REPLAY,
    )
    priority_eps: float = option(
        1e-6,
        "prioritized replay: added to each |TD error| or episode's goal motion before "
        "priority_alpha, the draw weight of a transition with none (goal_motion: an episode whose "
        "object never moved)",
        check=POSITIVE,
        kept=REPLAY,
    )
    priority: str = option(
        "td_error",
        "what prioritized replay draws by: td_error, or goal_motion (each episode by how far its "
        "achieved goal moved, no importance weights); the flag sets prioritized too",
        choices=PRIORITIES,
        kept=REPLAY,
    )
    motion_clip: float | None = option(
        None, "goal_motion: the most one step's move of the achieved goal counts", kept=REPLAY
    )
    motion_weights: tuple[float, ...] | None = option(
        None,
        "goal_motion: a weight per achieved-goal entry, applied to each step before its length is "
        "taken (1,1,4: a Fetch object's lift counts four times a slide as long)",
        kept=REPLAY,
        metavar="W,W,...",
    )
    save_buffer: bool = option(
        False, "save the replay buffer with policy_latest.pt too (for --resume)"
    )
    resume: str | None = option(
        None, "continue the run in this folder, from its last committed epoch", cli=False
    )
    tensorboard: bool = option(False, "also log scalars with torch.utils.tensorboard")
    verbose: bool = option(True, "show the progress display", flags=("--quiet",))

    def __post_init__(self) -> None:
        for name, (f, opt) in options(type(self)).items():
            value = getattr(self, name)
            if value is None and f.default is None:
                continue
            if value_type(f) == "bool" and not isinstance(value, bool):
                none = ", or None" if f.default is None else ""
                raise ValueError(f"{name} must be True or False{none}, got {value!r}")
            if opt.choices:
                check_choice(name, value, opt.choices)
            elif opt.check is not None:
                value = opt.check(name, value)
            setattr(self, name, value)
        self.env_kwargs = dict(self.env_kwargs)
        self.env_file = _env_file(self.env_id, self.env_file)
        # tuples, as lists from JSON and TOML
        self.hidden_sizes = tuple(int(h) for h in self.hidden_sizes)
        if self.info_keys is not None:
            self.info_keys = tuple(self.info_keys)
        if not self.hidden_sizes or min(self.hidden_sizes) < 1:
            raise ValueError(f"hidden_sizes must be positive layer widths, got {self.hidden_sizes}")
        if self.clip_range is not None:
            clip = tuple(float(x) for x in self.clip_range)
            if len(clip) != 2 or not clip[0] < clip[1]:
                raise ValueError(f"clip_range must be (low, high) with low < high, got {clip}")
            self.clip_range = (clip[0], clip[1])
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
        data = {key: list(v) if isinstance(v, tuple) else v for key, v in data.items()}
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
