"""The numpy and the device replay buffer answer the same questions the same way:
``update_priorities`` rejects what it cannot use (it never clamps an index or keeps a NaN
priority), and ``can_sample()`` says whether ``sample`` works."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from goalenvs.her import DeviceHerReplayBuffer, HerReplayBuffer

SPACE = spaces.Dict(
    observation=spaces.Box(-10, 10, (2,), np.float32),
    achieved_goal=spaces.Box(-10, 10, (2,), np.float32),
    desired_goal=spaces.Box(-10, 10, (2,), np.float32),
)
ACTIONS = spaces.Box(-1, 1, (2,), np.float32)
BACKENDS = ["numpy", "cpu"]


def reward(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
    return (
        -(achieved_goal[..., 0] != desired_goal[..., 0]).float()
        if isinstance(achieved_goal, torch.Tensor)
        else -(achieved_goal[..., 0] != desired_goal[..., 0]).astype(np.float32)
    )


def make(backend: str, **kwargs: Any) -> Any:
    if backend == "numpy":
        return HerReplayBuffer(20, SPACE, ACTIONS, reward, seed=0, **kwargs)
    return DeviceHerReplayBuffer(20, SPACE, ACTIONS, reward, seed=0, device=backend, **kwargs)


def add_steps(buffer: Any, backend: str, steps: int, start: int = 0, episode: int = 4) -> None:
    """Steps ``start``.. of one env whose episodes end (truncated) every ``episode`` steps."""
    as_array = np.asarray if backend == "numpy" else torch.as_tensor
    for t in range(start, start + steps):
        obs = {k: as_array(np.full((1, 2), t, np.float32)) for k in SPACE.spaces}
        nxt = {k: as_array(np.full((1, 2), t + 1, np.float32)) for k in SPACE.spaces}
        buffer.add(
            obs,
            nxt,
            as_array(np.zeros((1, 2), np.float32)),
            as_array(np.zeros(1, np.float32)),
            as_array(np.zeros(1, bool)),
            as_array(np.array([(t + 1) % episode == 0])),
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_can_sample_is_false_until_an_episode_ends_then_true(backend: str) -> None:
    buffer = make(backend)
    assert not buffer.can_sample()
    add_steps(buffer, backend, 3)
    assert not buffer.can_sample()
    with pytest.raises(RuntimeError):
        buffer.sample(2)
    add_steps(buffer, backend, 1, start=3)
    assert buffer.can_sample()
    assert buffer.sample(2).rewards.shape == (2,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_update_priorities_rejects_out_of_range_indices_instead_of_clamping(backend: str) -> None:
    buffer = make(backend, prioritized=True)
    add_steps(buffer, backend, 8)
    batch = buffer.sample(4)
    for bad in (-1, 10_000):
        indices = batch.indices.clone() if backend != "numpy" else batch.indices.copy()
        indices[0] = bad
        with pytest.raises(ValueError, match=r"indices must be in \[0, \d+\)"):
            buffer.update_priorities(indices, np.ones(4, np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_update_priorities_rejects_td_errors_that_are_not_finite(backend: str, bad: float) -> None:
    buffer = make(backend, prioritized=True)
    add_steps(buffer, backend, 8)
    batch = buffer.sample(4)
    td_errors = np.array([0.1, bad, 0.2, 0.3], np.float32)
    with pytest.raises(ValueError, match=r"td_errors\[1\] = (nan|-?inf); expected finite"):
        buffer.update_priorities(batch.indices, td_errors)


@pytest.mark.parametrize("backend", BACKENDS)
def test_update_priorities_checks_shapes_and_integer_indices_alike(backend: str) -> None:
    buffer = make(backend, prioritized=True)
    add_steps(buffer, backend, 8)
    with pytest.raises(ValueError, match=r"indices has shape \(3,\) and td_errors shape \(2,\)"):
        buffer.update_priorities(np.array([0, 1, 2]), np.array([0.1, 0.2]))
    with pytest.raises(TypeError, match="indices must be integers"):
        buffer.update_priorities(np.array([0.5]), np.array([0.1]))
    buffer.update_priorities(np.array([], np.int64), np.array([], np.float32))  # a no-op
    plain = make(backend)
    with pytest.raises(RuntimeError, match="needs a prioritized buffer"):
        plain.update_priorities(np.array([0]), np.array([0.1]))
