"""WORK IN PROGRESS (branch buffer-wip): the one buffer's file, and the files of the two
buffers it replaces (goalenvs 148f048 and earlier) loading into it on numpy and torch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from goalenvs.her import DeviceHerReplayBuffer, HerReplayBuffer
from goalenvs.her.xp_buffer import XpHerBuffer
from tests.her.test_buffer_pinned import DATA, reward


def transitions(batch: Any) -> set[tuple[float, ...]]:
    """Each sampled transition as (observation, next observation, action), rounded."""

    def host(value: Any) -> np.ndarray:
        return value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)

    obs = host(batch.observations["observation"])
    nxt = host(batch.next_observations["observation"])
    actions = host(batch.actions).reshape(len(obs), -1)
    rows = np.round(np.concatenate([obs, nxt, actions], axis=1), 4)
    return {tuple(row) for row in rows.tolist()}


@pytest.mark.parametrize("case", ["pinned_case4", "pinned_case5"])
@pytest.mark.parametrize(("suffix", "device"), [(".npz", None), (".npz", "cpu"), (".pt", "cpu"),
                                                (".pt", None)])  # fmt: skip
def test_an_old_buffer_file_loads_with_the_same_transitions(
    case: str, suffix: str, device: str | None
) -> None:
    path = DATA / f"{case}{suffix}"
    if suffix == ".npz":
        old = HerReplayBuffer.load(path, reward)
    else:
        old = DeviceHerReplayBuffer.load(path, reward, device="cpu")
    new = XpHerBuffer.load(path, reward, device=device)
    assert new.n_transitions == old.n_transitions
    # 5,000 draws of a few dozen transitions: every one of them, in both.
    assert transitions(new.sample(5000)) == transitions(old.sample(5000))


def test_a_saved_buffer_loads_on_the_other_array_module(tmp_path: Path) -> None:
    numpy_buffer = XpHerBuffer.load(DATA / "pinned_case4.npz", reward)
    path = tmp_path / "buffer.npz"
    numpy_buffer.save(path)
    on_torch = XpHerBuffer.load(path, reward, device="cpu")
    assert isinstance(on_torch.sample(8).rewards, torch.Tensor)
    assert transitions(on_torch.sample(5000)) == transitions(numpy_buffer.sample(5000))
    again = tmp_path / "again.npz"
    on_torch.save(again)
    back = XpHerBuffer.load(again, reward, device=None)  # (default: where it was saved)
    assert isinstance(back.sample(8).rewards, np.ndarray)
    assert back.n_transitions == numpy_buffer.n_transitions


def test_a_file_that_is_no_buffer_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "other.npz"
    np.savez(path, meta=np.array('{"format": "something else"}'))
    with pytest.raises(ValueError) as caught:
        XpHerBuffer.load(path, reward)
    message = str(caught.value)
    assert message.startswith(f"{path} is not a HER buffer file of this goalenvs")
    assert "\n" not in message
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="cannot be read as a HER buffer file"):
        XpHerBuffer.load(garbage, reward)
