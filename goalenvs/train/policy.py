"""Saved policies: ``load_policy(path).predict(obs)`` on any env with the checkpoint's spaces."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from goalenvs.agents.base import Agent
from goalenvs.agents.registry import config_from_dict, make_agent
from goalenvs.core import GOAL_KEYS
from goalenvs.train.checkpoint import CheckpointError, read_checkpoint, space_from_dict


class Policy:
    """A trained policy restored from a checkpoint: ``env_id``, ``env_kwargs``,
    ``max_episode_steps``, ``env_file`` (what it was trained on), ``algo``, the single-env
    ``observation_space`` and ``action_space``, and all of its plain ``metadata``."""

    def __init__(self, agent: Agent, metadata: dict[str, Any]) -> None:
        self.agent = agent.eval()
        self.metadata = metadata
        self.env_id: str = metadata["env_id"]
        self.env_kwargs: dict[str, object] = dict(metadata.get("env_kwargs", {}))
        # the time limit the run put on the env; None: the env's own
        self.max_episode_steps: int | None = (metadata.get("config") or {}).get("max_episode_steps")
        # a path/to/file.py env's absolute path (None: another form, or an older checkpoint)
        self.env_file: str | None = metadata.get("env_file")
        self.algo: str = metadata["algo"]
        self.observation_space = _observation_space(metadata)
        self.action_space: spaces.Space = agent.action_space

    def predict(self, observation: dict[str, object], deterministic: bool = True) -> np.ndarray:
        """The action for one observation dict, or an array of actions for a batch (every
        entry one leading dimension more); ``deterministic=False`` explores as training."""
        if not isinstance(observation, dict) or any(k not in observation for k in GOAL_KEYS):
            got = sorted(observation) if isinstance(observation, dict) else type(observation)
            raise ValueError(f"observation must be a dict with keys {list(GOAL_KEYS)}, got {got}")
        arrays = {k: np.asarray(observation[k], dtype=np.float32) for k in GOAL_KEYS}
        shapes = {k: self.observation_space[k].shape for k in GOAL_KEYS}
        single = all(arrays[k].shape == shapes[k] for k in GOAL_KEYS)
        if single:
            arrays = {k: v[None] for k, v in arrays.items()}
        elif (
            not all(arrays[k].shape[1:] == shapes[k] for k in GOAL_KEYS)
            or len({arrays[k].shape[0] for k in GOAL_KEYS}) != 1
        ):
            seen = {k: arrays[k].shape for k in GOAL_KEYS}
            raise ValueError(
                f"observation shapes {seen} match neither one observation {shapes} nor a batch "
                f"of them (policy trained on {self.env_id})"
            )
        actions: Any = self.agent.act(arrays, explore=not deterministic)
        return actions[0] if single else actions


def load_policy(path: str | os.PathLike, device: str | torch.device = "cpu") -> Policy:
    """Restores the policy saved in a checkpoint (``policy_best.pt``, ...); a
    :class:`CheckpointError` for a corrupt, foreign or unsafe file."""
    data = read_checkpoint(path, map_location=device)
    meta = data["metadata"]
    try:
        config = config_from_dict(meta["config"])
        action_space = space_from_dict(meta["action_space"])
        agent = make_agent(config, _observation_space(meta), action_space, float(meta["gamma"]))
        for name, module in agent.policy_modules().items():
            module.load_state_dict(data["policy"][name])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(
            f"{str(path)!r} has inconsistent contents: {type(exc).__name__}: {exc}"
        ) from None
    return Policy(agent.to(device), meta)


def _observation_space(metadata: dict[str, Any]) -> spaces.Dict:
    """The single-env goal Dict a checkpoint's metadata describes."""
    return spaces.Dict({k: space_from_dict(v) for k, v in metadata["observation_space"].items()})
