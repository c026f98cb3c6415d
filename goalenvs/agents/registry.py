"""The algorithm registry: every HER algorithm ``goalenvs train`` knows, in one table.

Registering an algorithm is one entry of :data:`ALGOS`::

    ALGOS["sac"] = Algo(
        name="sac",
        config="goalenvs.agents.sac:SACConfig",  # a class, or "module:Name" imported on use
        agent="goalenvs.agents.sac:SAC",  # the Agent subclass, imported on use (torch stays lazy)
        action_space="box",  # "box" or "discrete"
        summary="SAC+HER for continuous actions",
    )

The agent class declares the losses its ``update`` returns in
``loss_names: ClassVar[tuple[str, ...]]``; the trainer logs them (progress.csv columns, the
progress display, the curves), in that order. The CLI's ``--algo`` choices, the trainer's
env check, :func:`algo_for`, the checkpoint loader (:func:`goalenvs.train.policy.load_policy`) and
:func:`goalenvs.agents.config.config_from_dict` all read this table. An unknown name is an
error listing the registered ones.

Importing this module stays light (no torch): agent classes load on first use."""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gymnasium import spaces

from goalenvs.agents.config import RETIRED, TrainConfig

if TYPE_CHECKING:
    from goalenvs.agents.base import Agent

ACTION_SPACE_KINDS = {"box": spaces.Box, "discrete": spaces.Discrete}


def _resolve(target: type | str, what: str) -> Any:
    """A class given directly or as ``"module:Name"``."""
    if not isinstance(target, str):
        return target
    module_name, _, attribute = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"the {what} {target!r} could not be imported: {exc}") from exc


@dataclass(frozen=True)
class Algo:
    """One registered algorithm: its config class, agent class and action-space kind."""

    name: str  # the registry key, the ``algo`` of configs and checkpoints, ``--algo``
    config: type[TrainConfig] | str  # the config dataclass, or "module:Name"
    agent: type[Agent] | str  # the Agent subclass, or "module:Name" (imported on first use)
    action_space: str  # "box" (continuous actions) or "discrete"
    summary: str = ""  # one line for --help

    def __post_init__(self) -> None:
        if self.action_space not in ACTION_SPACE_KINDS:
            raise ValueError(
                f"Algo {self.name!r}: action_space={self.action_space!r} is not valid; "
                f"expected one of {list(ACTION_SPACE_KINDS)}"
            )

    def config_class(self) -> type[TrainConfig]:
        """The config dataclass (imported on first use when given as a path)."""
        return _resolve(self.config, f"config class of algo {self.name!r}")

    def agent_class(self) -> type[Agent]:
        """The Agent subclass (imported on first use when given as a path)."""
        return _resolve(self.agent, f"agent class of algo {self.name!r}")

    @property
    def loss_names(self) -> tuple[str, ...]:
        """The losses the agent's ``update`` returns (its ``loss_names``), in log order."""
        return tuple(self.agent_class().loss_names)

    def fits(self, action_space: spaces.Space) -> bool:
        """True when the algorithm can drive ``action_space``."""
        return isinstance(action_space, ACTION_SPACE_KINDS[self.action_space])


def _shipped(name: str, action_space: str, summary: str) -> Algo:
    """An algorithm of ``goalenvs/agents/<name>.py``, whose classes are ``<NAME>Config`` and
    ``<NAME>`` (imported on first use)."""
    module, agent = f"goalenvs.agents.{name}", name.upper()
    return Algo(name, f"{module}:{agent}Config", f"{module}:{agent}", action_space, summary)


# The algorithms goalenvs ships, one line each (name, action space, --help summary); the
# first that fits an action space is its default (algo_for).
_SHIPPED = (
    ("ddpg", "box", "DDPG+HER for continuous (Box) actions, OpenAI baselines' defaults"),
    ("dqn", "discrete", "double DQN+HER for Discrete actions, the HER paper's bit flipping"),
    ("sac", "box", "SAC+HER: twin critics, squashed-Gaussian policy, learned temperature"),
    ("td3", "box", "TD3+HER: twin critics, delayed actor, target policy smoothing"),
)
ALGOS: dict[str, Algo] = {name: _shipped(name, kind, summary) for name, kind, summary in _SHIPPED}


def get_algo(name: object, argument: str = "algo") -> Algo:
    """The registered algorithm ``name``; a ValueError listing the registered names if none."""
    if not isinstance(name, str) or name not in ALGOS:
        raise ValueError(
            f"{argument}={name!r} is not a registered algorithm; expected one of {list(ALGOS)}"
        )
    return ALGOS[name]


def algo_for(action_space: spaces.Space) -> str:
    """The default algorithm for ``action_space``: the first registered one that fits it."""
    for algo in ALGOS.values():
        if algo.fits(action_space):
            return algo.name
    kinds = sorted({algo.action_space for algo in ALGOS.values()})
    raise ValueError(
        f"no registered HER algorithm for the action space {action_space}; "
        f"the registered ones drive {kinds} action spaces"
    )


def check_action_space(name: str, action_space: spaces.Space, env_id: str) -> None:
    """Raises a ValueError when algorithm ``name`` cannot drive ``action_space``, naming
    the registered algorithms that can."""
    algo = get_algo(name)
    if algo.fits(action_space):
        return
    others = [a.name for a in ALGOS.values() if a.fits(action_space)]
    hint = f"use algo in {others}" if others else "no registered algorithm fits it"
    raise ValueError(
        f"algo={name!r} needs a {ACTION_SPACE_KINDS[algo.action_space].__name__} action space "
        f"but {env_id} has {action_space}; {hint}"
    )


def make_agent(
    config: TrainConfig,
    observation_space: spaces.Dict,
    action_space: spaces.Space,
    gamma: float,
    seed: int | None = None,
) -> Agent:
    """The agent of the algorithm ``config`` belongs to (``config.algo``)."""
    algo = get_algo(config.algo)
    return algo.agent_class()(observation_space, action_space, config, gamma, seed)


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """Rebuilds a config written by :meth:`TrainConfig.to_dict` (e.g. a run's config.json).
    ``data["algo"]`` names a registered algorithm (:data:`goalenvs.agents.registry.ALGOS`)."""
    data = dict(data)
    data.pop("plan", None)  # a run folder's resolved plan (goalenvs.train.plan), not a field
    cls = get_algo(data.pop("algo", None)).config_class()
    for name, (idle, commit) in RETIRED.items():
        value = data.pop(name, idle)
        if value != idle:
            raise ValueError(
                f"{name} {value!r}: goalenvs no longer has this setting (its runs are in "
                f"docs/baselines.md's tried tables; commit {commit} has it)"
            )
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(
            f"unknown {cls.__name__} fields {unknown}; expected some of {sorted(names)}"
        )
    return cls(**data)
