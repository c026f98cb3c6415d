"""The checksum every policy and checkpoint file carries: a file changed in place, at any
byte and at the same size, is refused by ``goalenvs play``, ``load_policy`` and
``--resume`` in one line naming it; unchanged files, and files written before goalenvs
wrote checksums, load."""

from __future__ import annotations

import logging
import shutil
import zipfile

import numpy as np
import pytest
import torch

from goalenvs.agents.dqn import DQNConfig
from goalenvs.cli import main as cli_main
from goalenvs.train.checkpoint import (
    CheckpointError,
    load_torch_file,
    read_checkpoint,
    save_torch_file,
)
from goalenvs.train.policy import load_policy
from goalenvs.train.trainer import Trainer
from tests.train.runs import TINY

CHANGED = "was changed or corrupted after goalenvs wrote it"
SEAL_BYTES = 2 + 80  # the comment's length field and the comment


def config(out, **kwargs) -> DQNConfig:
    settings = {**TINY, "env_kwargs": {"n_bits": 4}, "epochs": 2, "device": "cpu", **kwargs}
    return DQNConfig(env_id="goalenvs/BitFlipping-v0", out=str(out), **settings)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A two-epoch run's folder (two committed units), copied by each test."""
    out = tmp_path_factory.mktemp("trained") / "run"
    Trainer(config(out)).run()
    return out


@pytest.fixture
def run(trained, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy


def flip(path, offset: int | None = None) -> None:
    """Changes one byte of ``path`` in place (the middle one by default); same size."""
    data = bytearray(path.read_bytes())
    i = len(data) // 2 if offset is None else offset
    data[i] ^= 0x01
    path.write_bytes(bytes(data))
    assert path.stat().st_size == len(data)


def unsealed(data: bytes) -> bytes:
    """The file as goalenvs wrote it before checksums: the archive with no comment."""
    return data[:-SEAL_BYTES] + b"\0\0"


def test_every_torch_file_of_a_run_carries_its_checksum(run):
    files = [*run.glob("policy_*.pt"), *run.glob("checkpoints/epoch_*/*.pt")]
    names = sorted(p.relative_to(run).as_posix() for p in files)
    assert names == [
        "checkpoints/epoch_000001/policy.pt", "checkpoints/epoch_000001/state_rank0.pt",
        "checkpoints/epoch_000002/policy.pt", "checkpoints/epoch_000002/state_rank0.pt",
        "policy_best.pt", "policy_latest.pt",
    ]  # fmt: skip
    for path in files:
        assert zipfile.ZipFile(path).comment.startswith(b"goalenvs-sha256:"), path
        assert len(zipfile.ZipFile(path).comment) == 80


def test_play_refuses_a_policy_changed_in_place_in_one_line_naming_it(run, capsys):
    path = run / "policy_best.pt"
    flip(path)
    assert cli_main(["play", str(path), "--headless", "--episodes", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"goalenvs play: error: --policy: {str(path)!r} {CHANGED}: its bytes do not match "
        "the sha256 checksum saved in it\n"
    )
    assert "episode" not in captured.out


def test_any_changed_byte_is_refused(run, tmp_path):
    """Flipping a byte anywhere (the tensors, the pickled metadata, the zip records, the
    checksum itself) is refused: not loaded, never loaded with other values."""
    original = (run / "policy_best.pt").read_bytes()
    path = tmp_path / "policy.pt"
    offsets = sorted({*range(0, len(original), 97), *range(len(original) - 200, len(original))})
    for offset in offsets:
        changed = bytearray(original)
        changed[offset] ^= 0x01
        path.write_bytes(bytes(changed))
        with pytest.raises(CheckpointError, match=f"{CHANGED}|not a readable checkpoint"):
            load_torch_file(path)
    path.write_bytes(original)
    assert load_torch_file(path)["metadata"]["env_id"] == "goalenvs/BitFlipping-v0"


def test_a_file_written_before_checksums_loads_as_before(run, tmp_path):
    sealed = (run / "policy_best.pt").read_bytes()
    old = tmp_path / "old.pt"
    old.write_bytes(unsealed(sealed))
    assert zipfile.ZipFile(old).comment == b""
    bits, goal = np.array([0, 1, 1, 0], np.float32), np.array([1, 1, 0, 0], np.float32)
    obs = {"observation": bits, "achieved_goal": bits, "desired_goal": goal}
    np.testing.assert_array_equal(
        load_policy(old).predict(obs), load_policy(run / "policy_best.pt").predict(obs)
    )


def test_a_foreign_comment_is_refused(tmp_path):
    path = tmp_path / "state.pt"
    save_torch_file(path, {"format": "x", "value": torch.arange(3)})
    data = path.read_bytes()
    other = b"made by another tool"
    path.write_bytes(unsealed(data)[:-2] + len(other).to_bytes(2, "little") + other)
    assert zipfile.is_zipfile(path)
    with pytest.raises(CheckpointError, match=CHANGED):
        load_torch_file(path)


def test_resume_refuses_a_changed_checkpoint_and_names_it(run):
    for epoch in (1, 2):
        flip(run / f"checkpoints/epoch_{epoch:06d}/policy.pt")
    with pytest.raises(CheckpointError) as caught:
        Trainer(config(None, resume=str(run), epochs=3)).run()
    message = str(caught.value)
    assert "\n" not in message and "no checkpoint in it can be read" in message
    for epoch in (1, 2):
        assert f"{str(run / f'checkpoints/epoch_{epoch:06d}/policy.pt')!r} {CHANGED}" in message


def test_resume_falls_back_past_a_changed_newest_checkpoint(run, caplog):
    state = run / "checkpoints/epoch_000002/state_rank0.pt"
    flip(state)
    with caplog.at_level(logging.WARNING, logger="goalenvs.train.run_folder"):
        result = Trainer(config(None, resume=str(run), epochs=3)).run()
    assert f"{str(state)!r} {CHANGED}" in caplog.text
    assert "resuming from epoch 1" in caplog.text
    assert result.epochs == 3
    assert read_checkpoint(run / "policy_latest.pt")["metadata"]["epoch"] == 3
