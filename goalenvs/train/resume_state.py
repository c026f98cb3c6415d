"""What a resume restores besides the networks: every random generator of a run (torch's,
the agent's, the replay buffer's and the envs'), so that a resumed run draws what the
uninterrupted one draws. The envs' states are taken just before an epoch's last step
(:class:`GeneratorSnapshot`). Generators are found by duck typing
(:func:`find_generators`); names that do not match between the save and the resume are
returned to the caller, which says so."""

from __future__ import annotations

import logging
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from goalenvs.agents.base import Agent
from goalenvs.her.replay import ReplayBuffer

logger = logging.getLogger(__name__)

TORCH_GENERATORS = "torch_generators"  # key of a device twin's generators in the env states


def find_generators(obj: object) -> dict[str, np.random.Generator]:
    """The numpy generators ``obj`` holds, by attribute path, each object once: attributes
    that are one or a list / tuple of them, its ``rng`` (a replay buffer's), and each
    sub-env's ``np_random`` of a vector env with sub-envs."""
    found: dict[str, np.random.Generator] = {}
    seen: set[int] = set()

    def add(name: str, value: object) -> None:
        if isinstance(value, np.random.Generator) and id(value) not in seen:
            seen.add(id(value))
            found[name] = value

    for name, value in sorted(vars(obj).items()):
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                add(f"{name}[{i}]", item)
        else:
            add(name, value)
    # A replay buffer's sampling generator, as buffers before the one buffer held it: a run
    # folder of theirs restores into today's buffer.
    add("rng", getattr(obj, "rng", None))
    for i, env in enumerate(getattr(obj, "envs", None) or []):
        inner = getattr(env, "unwrapped", env)
        generator = getattr(inner, "_np_random", None)
        add(f"envs[{i}].np_random", generator)
    return found


def generator_states(obj: object) -> dict[str, object]:
    """``{path: bit_generator.state}`` of :func:`find_generators` (plain values)."""
    return {name: g.bit_generator.state for name, g in find_generators(obj).items()}


def restore_generators(obj: object, states: dict[str, Any]) -> list[str]:
    """Sets the generators of ``obj`` back to ``states`` (in place: aliases follow);
    returns the paths that did not match (saved but absent, or present but not saved)."""
    current = find_generators(obj)
    mismatched = sorted(set(current) ^ set(states))
    for name, generator in current.items():
        if name in states:
            state = states[name]
            if state.get("bit_generator") != type(generator.bit_generator).__name__:
                mismatched.append(name)
                continue
            generator.bit_generator.state = state
    return mismatched


def torch_generator_states(obj: object) -> dict[str, torch.Tensor]:
    """``{attribute: state}`` of the ``torch.Generator`` attributes of ``obj``."""
    return {name: generator.get_state() for name, generator in _torch_generators(obj).items()}


def _torch_generators(obj: object) -> dict[str, torch.Generator]:
    return {k: v for k, v in sorted(vars(obj).items()) if isinstance(v, torch.Generator)}


def restore_torch_generators(obj: object, states: dict[str, torch.Tensor]) -> list[str]:
    """Sets the torch generators of ``obj`` back to ``states``; returns the names that did
    not match, or were saved on another device (those keep their seeded state)."""
    current = _torch_generators(obj)
    missed = current.keys() ^ states.keys()
    for name in current.keys() & states.keys():
        try:
            current[name].set_state(states[name])
        except RuntimeError:  # torch refuses a state of another size before setting any
            missed.add(name)
    return sorted(missed)


def env_generator_states(env: object) -> dict[str, Any]:
    """:func:`generator_states` of a vector env, with a device twin's torch generators."""
    states = generator_states(env)
    torch_states = torch_generator_states(env)
    if torch_states:
        states[TORCH_GENERATORS] = torch_states
    return states


def restore_env_generators(env: object, states: dict[str, Any]) -> list[str]:
    """Sets a vector env's generators back to :func:`env_generator_states`' ``states``;
    returns the names that did not match."""
    states = dict(states)
    torch_states = states.pop(TORCH_GENERATORS, {})
    return restore_generators(env, states) + restore_torch_generators(env, torch_states)


class GeneratorSnapshot(gym.vector.VectorWrapper):
    """The envs' generator states from just before the last step of an epoch: a sub-env
    whose episode ends in that step draws its next episode inside it, which the resume's
    reset then draws again."""

    def __init__(self, env: gym.vector.VectorEnv) -> None:
        super().__init__(env)
        self._steps_taken, self._armed_step = 0, -1
        self._states: dict[str, Any] | None = None

    def arm(self, steps: int) -> None:
        """Takes the snapshot before the ``steps``-th step from now."""
        self._steps_taken, self._armed_step, self._states = 0, steps, None

    def step(self, actions: object) -> Any:
        """Steps the envs (after taking the snapshot when this is the armed step)."""
        self._steps_taken += 1
        if self._steps_taken == self._armed_step:
            self._states = env_generator_states(self.env.unwrapped)
        return self.env.step(actions)

    def generator_states(self) -> dict[str, object]:
        """The states before the last step when it was the armed one, else the current."""
        if self._states is not None and self._steps_taken == self._armed_step:
            return self._states
        return env_generator_states(self.env.unwrapped)

    def restore_generators(self, states: dict[str, object]) -> list[str]:
        """Sets the generators back to ``states``; returns the names that did not match."""
        return restore_env_generators(self.env.unwrapped, states)


def capture_random_state(
    agent: Agent, buffer: ReplayBuffer, env_states: dict[str, object]
) -> dict[str, object]:
    """Every random generator a resume restores, the envs' ``env_states`` among them."""
    return {
        "torch": torch.get_rng_state(),
        "cuda": list(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else [],
        "agent": generator_states(agent),
        # The torch generators of the device path (exploration, buffer sampling).
        "torch_generators": {
            "agent": torch_generator_states(agent),
            "buffer": torch_generator_states(buffer),
        },
        "buffer": generator_states(buffer),
        "envs": env_states,
    }


def restore_random_state(
    state: dict[str, Any], agent: Agent, buffer: ReplayBuffer
) -> dict[str, object]:
    """Sets torch's, the agent's and the buffer's generators back to ``state``; returns the
    envs' states, which the envs restore."""
    torch.set_rng_state(state["torch"].cpu())
    cuda = state["cuda"]
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([s.cpu() for s in cuda])
    for name, obj in (("agent", agent), ("buffer", buffer)):
        missed = restore_torch_generators(obj, state.get("torch_generators", {}).get(name, {}))
        if missed:
            logger.warning(
                "%s torch generators %s were not restored (saved on another device?); they "
                "draw on from their seeds",
                name,
                missed,
            )
        missed = restore_generators(obj, state[name])
        if name == "buffer":  # its file restores its own generator: only a saved one can miss
            missed = [path for path in missed if path in state[name]]
        if missed:
            logger.warning("%s generators %s were not restored", name, missed)
    return state["envs"]
