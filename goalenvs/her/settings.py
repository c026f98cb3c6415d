"""The HER buffer's settings, checked once (:class:`BufferSettings`, and a saved file's
metadata of them), its strategies and its goal-function lookup."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs.core import check_choice, check_in_range, check_int
from goalenvs.core.io import space_from_json, space_to_json
from goalenvs.core.types import Array, GoalFunction
from goalenvs.her.goal_mix import GoalMix

__all__ = ["PRIORITIES", "BufferSettings", "GoalSelectionStrategy", "resolve_goal_function"]

#: What a prioritized buffer draws by: TD errors, or the achieved goal's path in an episode.
PRIORITIES = ("td_error", "goal_motion")
# Settings of older files that this buffer no longer has, each with its "off" value (a
# file at it loads, one with another is refused), and the last commit that had them.
RETIRED = {"n_step_until": 0, "motion_threshold": None, "motion_scope": "episode"}
RETIRED_AT = "148f048"
_FILE = "a HER buffer file"  # where a space description lives, for the codec's errors


class GoalSelectionStrategy(str, enum.Enum):
    """Where a relabeled goal comes from: the :class:`~goalenvs.her.goal_mix.GoalMix`
    sources ``future``, ``final``, ``episode`` and (``random``) ``achieved``."""

    FUTURE = "future"
    FINAL = "final"
    EPISODE = "episode"
    RANDOM = "random"

    @classmethod
    def parse(cls, value: str | GoalSelectionStrategy) -> GoalSelectionStrategy:
        """The strategy named by ``value`` (a member or its name, any case)."""
        if isinstance(value, cls):
            return value
        names = [member.value for member in cls]
        if isinstance(value, str) and value.lower() in names:
            return cls(value.lower())
        # Not a name in any case: check_choice raises the error that lists the names.
        return cls(check_choice("goal_selection_strategy", value, names))


def resolve_goal_function(source: Any, name: str) -> GoalFunction:
    """Finds the batched goal function ``name`` on an env, a vector env, or a callable.

    Single gymnasium envs are read through their wrappers (``get_wrapper_attr``); vector
    envs through ``unwrapped`` (a native vector twin has the method itself; a
    ``SyncVectorEnv`` or stable-baselines3 ``DummyVecEnv`` lends its first sub-env's); any
    other object with stable-baselines3's ``env_method`` is asked through it.
    """
    if isinstance(source, gym.Env):
        try:
            return source.get_wrapper_attr(name)
        except AttributeError:
            raise TypeError(f"{name}: the env {source} has no method {name}") from None
    inner = getattr(source, "unwrapped", None)
    if inner is not None and callable(getattr(inner, name, None)):
        return getattr(inner, name)
    sub_envs = getattr(inner, "envs", None)
    if isinstance(sub_envs, Sequence) and sub_envs:
        first = sub_envs[0]
        if isinstance(first, gym.Env):
            try:
                return first.get_wrapper_attr(name)
            except AttributeError:
                raise TypeError(f"{name}: the sub-env {first} has no method {name}") from None
    if callable(getattr(source, "env_method", None)):

        def remote(achieved_goal: Array, desired_goal: Array, info: object) -> Array:
            return source.env_method(name, achieved_goal, desired_goal, info, indices=[0])[0]

        remote.__qualname__ = f"{type(source).__name__}.env_method({name!r})"

        return remote
    if callable(source) and not isinstance(source, gym.vector.VectorEnv):
        return source
    raise TypeError(
        f"{name} must be a goal env (single or vector, wrappers allowed) or a callable "
        f"(achieved_goal, desired_goal, info) -> array; got {source!r}"
    )


@dataclasses.dataclass(frozen=True)
class BufferSettings:
    """The checked constructor arguments of the HER buffer (see
    :class:`goalenvs.her.HerReplayBuffer`), normalized (ints, floats, a
    :class:`GoalSelectionStrategy`, tuples) in ``__post_init__``."""

    buffer_size: int
    observation_space: spaces.Dict
    action_space: spaces.Space
    n_envs: int = 1
    n_sampled_goal: int = 4
    goal_selection_strategy: str | GoalSelectionStrategy = GoalSelectionStrategy.FUTURE
    handle_timeout_termination: bool = True
    info_keys: Sequence[str] = ()
    seed: int | None = None
    prioritized: bool = False
    alpha: float = 0.6
    beta: float = 0.4
    priority_eps: float = 1e-6
    goal_mix: GoalMix | Mapping[str, float] | str | None = None
    goal_mix_warmup: int = 0
    priority: str = "td_error"
    motion_clip: float | None = None
    motion_weights: Sequence[float] | None = None
    n_step: int = 1
    gamma: float | None = None

    def __post_init__(self) -> None:
        check_int("n_envs", self.n_envs, minimum=1)
        if not isinstance(self.prioritized, (bool, np.bool_)):
            raise TypeError(f"prioritized must be a bool, got {self.prioritized!r}")
        check_choice("priority", self.priority, PRIORITIES)
        if self.priority != "td_error" and not self.prioritized:
            raise ValueError(
                f"priority={self.priority!r} sets what a prioritized buffer draws by, got "
                "prioritized=False: pass prioritized=True too"
            )
        clip = check_motion_clip(self.motion_clip, self.priority)
        weights = check_motion_weights(self.motion_weights, self.priority)
        check_in_range("alpha", self.alpha)
        check_in_range("beta", self.beta)
        eps = self.priority_eps
        if isinstance(eps, bool) or not isinstance(eps, (int, float)):
            raise TypeError(f"priority_eps must be a float, got {eps!r}")
        if not (0 < eps < np.inf):
            raise ValueError(f"priority_eps must be a positive finite float, got {eps}")
        check_int("buffer_size", self.buffer_size, minimum=1)
        check_int("n_sampled_goal", self.n_sampled_goal, minimum=0)
        rows = int(self.buffer_size) // int(self.n_envs)
        if rows < 2:
            raise ValueError(
                f"buffer_size={self.buffer_size} gives {rows} rows per env for "
                f"n_envs={self.n_envs}; expected at least 2"
            )
        if rows >= 2**31:
            raise ValueError(f"buffer_size={self.buffer_size}: at most 2**31 - 1 rows per env")
        _check_observation_space(self.observation_space)
        if not isinstance(self.action_space, (spaces.Box, spaces.Discrete, spaces.MultiBinary)):
            raise TypeError(
                f"action_space must be Box, Discrete or MultiBinary, got {self.action_space!r}"
            )
        goal_size = int(np.prod(self.observation_space["achieved_goal"].shape or ()))
        if weights is not None and len(weights) != goal_size:
            raise ValueError(
                f"motion_weights={list(weights)} has {len(weights)} weights; expected one per "
                f"achieved_goal entry ({goal_size}, its shape "
                f"{self.observation_space['achieved_goal'].shape})"
            )
        keys = self.info_keys
        if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
            raise TypeError(f"info_keys must be a sequence of strings, got {keys!r}")
        goal_mix = None if self.goal_mix is None else GoalMix.parse(self.goal_mix)
        strategy = GoalSelectionStrategy.parse(self.goal_selection_strategy)
        if goal_mix is not None and (
            strategy is not GoalSelectionStrategy.FUTURE or int(self.n_sampled_goal) != 4
        ):
            raise ValueError(
                f"goal_mix={str(goal_mix)!r} replaces goal_selection_strategy and "
                f"n_sampled_goal, got goal_selection_strategy={strategy.value!r} and "
                f"n_sampled_goal={self.n_sampled_goal} too: pass goal_mix alone (future k=4 "
                "is future=0.8,original=0.2)"
            )
        check_int("goal_mix_warmup", self.goal_mix_warmup, minimum=0)
        check_int("n_step", self.n_step, minimum=1)
        if int(self.n_step) > 1 and self.gamma is None:
            raise ValueError(
                f"n_step={self.n_step} sums {self.n_step} rewards with a discount: pass "
                "gamma, the agent's discount, in (0, 1)"
            )
        check_in_range("gamma", self.gamma, open_low=True, open_high=True, none_ok=True)
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"seed must be an int or None, got {seed!r}")
        normalized = {
            **{k: int(getattr(self, k)) for k in _INTS},
            **{k: float(getattr(self, k)) for k in ("alpha", "beta", "priority_eps")},
            **{k: bool(getattr(self, k)) for k in ("handle_timeout_termination", "prioritized")},
            "goal_selection_strategy": strategy,
            "goal_mix": goal_mix,
            "info_keys": tuple(keys),
            "motion_clip": None if clip is None else float(clip),
            "motion_weights": weights,
            "gamma": None if self.gamma is None else float(self.gamma),
        }
        for name, value in normalized.items():
            object.__setattr__(self, name, value)

    @property
    def rows_per_env(self) -> int:
        """Rows of storage each env writes: ``buffer_size // n_envs``."""
        return self.buffer_size // self.n_envs

    @property
    def relabel_mix(self) -> GoalMix:
        """The mix sampling draws goals from: ``goal_mix``, or the strategy's and ``k``'s."""
        if self.goal_mix is not None:
            return GoalMix.parse(self.goal_mix)
        strategy = GoalSelectionStrategy.parse(self.goal_selection_strategy)
        return GoalMix.from_strategy(strategy.value, self.n_sampled_goal)

    @property
    def her_ratio(self) -> float:
        """The probability that a sample is relabeled (after the warm-up)."""
        return 1.0 - self.relabel_mix.original

    @property
    def action_shape(self) -> tuple[int, ...]:
        """The shape of one stored action: ``()`` for Discrete, the space's shape else."""
        if isinstance(self.action_space, spaces.Discrete):
            return ()
        return tuple(self.action_space.shape or ())

    @property
    def action_dtype(self) -> np.dtype:
        """The stored actions' dtype: int64 for Discrete, float32 for a float64 Box (actors
        emit float32, as stable-baselines3 stores them), the space's dtype else."""
        if isinstance(self.action_space, spaces.Discrete):
            return np.dtype(np.int64)
        dtype = np.dtype(self.action_space.dtype)
        return np.dtype(np.float32) if dtype == np.float64 else dtype

    def to_meta(self) -> dict[str, object]:
        """The settings as a saved file's JSON metadata (but the seed: a file holds the
        generator's state)."""
        meta: dict[str, object] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name.endswith("_space"):
                value = space_to_json(value, _FILE)
            elif field.name == "goal_selection_strategy":
                value = GoalSelectionStrategy.parse(value).value
            elif field.name == "goal_mix" and value is not None:
                value = GoalMix.parse(value).fractions()
            elif isinstance(value, tuple):  # info_keys, motion_weights
                value = list(value)
            if field.name != "seed":
                meta[field.name] = value
        return meta

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> BufferSettings:
        """The settings a saved file's metadata describes, checked as a constructor's. A
        setting newer than the file gets its default (it samples as it did); a missing one
        of :data:`IN_EVERY_FILE` raises KeyError, a :data:`RETIRED` one not off ValueError."""
        for name, off in RETIRED.items():
            if meta.get(name, off) != off:
                raise ValueError(
                    f"written with {name}={meta[name]!r}, a setting this version no longer "
                    f"has: sample it with goalenvs {RETIRED_AT} or earlier, or start a new buffer"
                )
        values = {
            field.name: meta[field.name]
            if field.name in IN_EVERY_FILE
            else meta.get(field.name, field.default)
            for field in dataclasses.fields(cls)
            if field.name != "seed"
        }
        observation_space = space_from_json(values["observation_space"], _FILE)
        if not isinstance(observation_space, spaces.Dict):
            raise ValueError(f"{_FILE} describes observation_space {observation_space}: not a Dict")
        values["observation_space"] = observation_space
        values["action_space"] = space_from_json(values["action_space"], _FILE)
        return cls(**values)


_INTS = ("buffer_size", "n_envs", "n_sampled_goal", "goal_mix_warmup", "n_step")
#: The settings every saved file (and pickle) holds; those after them have defaults there.
IN_EVERY_FILE = tuple(field.name for field in dataclasses.fields(BufferSettings))[:8]


def check_motion_clip(clip: Any, priority: str) -> float | None:
    """``motion_clip`` as given, or the error naming it: None, or a positive finite
    distance with ``priority="goal_motion"``."""
    if clip is None or _goal_motion_only("motion_clip", clip, priority):
        return None
    number = isinstance(clip, (int, float, np.integer, np.floating)) and not isinstance(clip, bool)
    if not number or not 0 < clip < np.inf:
        raise ValueError(f"motion_clip must be a positive finite distance (or None), got {clip!r}")
    return clip


def _goal_motion_only(name: str, value: Any, priority: str) -> bool:
    """False, or the error saying that setting ``name`` applies to goal motion only."""
    if priority != "goal_motion":
        raise ValueError(
            f"{name}={value!r} only applies to priority='goal_motion', got priority={priority!r}"
        )
    return False


def check_motion_weights(
    weights: Any, priority: str, *, text: bool = False
) -> tuple[float, ...] | None:
    """``motion_weights`` as a tuple of floats (None stays None), or the error naming it: a
    sequence of finite weights >= 0, one of them positive, for ``priority="goal_motion"``.
    With ``text`` a string is read as the command line gives it (``"1,1,4"``)."""
    if weights is None or _goal_motion_only("motion_weights", weights, priority):
        return None
    expected = "finite weights >= 0, one per achieved_goal entry, not all 0 (e.g. 1,1,4)"
    from_text = text and isinstance(weights, str)
    parts = weights.split(",") if from_text else weights
    if isinstance(parts, np.ndarray):
        parts = list(parts.reshape(-1)) if parts.ndim == 1 else parts
    if isinstance(parts, (str, bytes)) or not isinstance(parts, Sequence):
        raise ValueError(f"motion_weights must be {expected}; got {weights!r}")
    number = (str,) if from_text else (int, float, np.integer, np.floating)
    values: tuple[float, ...] = ()
    if all(isinstance(part, number) and not isinstance(part, bool) for part in parts):
        try:
            values = tuple(float(part) for part in parts)
        except ValueError:
            values = ()
    if not values or not all(0 <= w < np.inf for w in values) or max(values) == 0:
        raise ValueError(f"motion_weights must be {expected}; got {weights!r}")
    return values


def _check_observation_space(space: object) -> None:
    if not isinstance(space, spaces.Dict):
        raise TypeError(
            "observation_space must be a gymnasium.spaces.Dict with keys observation, "
            f"achieved_goal, desired_goal; got {space!r}"
        )
    for key in ("achieved_goal", "desired_goal"):
        if key not in space.spaces:
            raise ValueError(f"observation_space has keys {list(space.spaces)}: '{key}' is missing")
    for key, sub in space.spaces.items():
        if not isinstance(sub, (spaces.Box, spaces.MultiBinary, spaces.Discrete)):
            raise TypeError(
                f"observation_space[{key!r}] is {sub}: expected Box, MultiBinary or Discrete"
            )
    if space["achieved_goal"].shape != space["desired_goal"].shape:
        raise ValueError(
            f"observation_space: achieved_goal {space['achieved_goal']} and desired_goal "
            f"{space['desired_goal']} must have the same shape"
        )
