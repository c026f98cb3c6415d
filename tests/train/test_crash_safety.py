"""Crash safety of a run folder: units committed by a manifest, fallback on damaged files,
progress.csv cut to the resumed epoch, SIGTERM, exact continuation, and SIGKILL at random
moments."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.agents.dqn import DQNConfig
from goalenvs.agents.registry import config_from_dict
from goalenvs.envs.point_reach import PointReachEnv
from goalenvs.train.checkpoint import CheckpointError
from goalenvs.train.trainer import Trainer, train
from tests.train.runs import progress
from tests.train.test_train_distributed import free_port, join, load_ranks
from tests.train.test_train_resume import stop_at_epoch

# A PointReach whose episodes end only at the time limit (the goal radius is out of
# reach) and that gymnasium vectorizes with SyncVectorEnv: its sub-envs draw straight
# from their np_random.
SYNC_ID = "test_crash/PointReachSync-v0"
if SYNC_ID not in gym.registry:
    gym.register(SYNC_ID, entry_point=PointReachEnv, max_episode_steps=10)


def dqn(tmp_path, **kwargs) -> DQNConfig:
    # device cpu: the numpy buffer's files (buffer_rank0.npz), whatever the machine
    base = dict(
        env_id="goalenvs/BitFlipping-v0", env_kwargs={"n_bits": 4}, hidden_sizes=(16,),
        num_envs=2, n_cycles=2, n_batches=2, batch_size=16, n_eval_episodes=2, buffer_size=4000,
        save_buffer=True, device="cpu", out=str(tmp_path / "run"), verbose=False,
    )  # fmt: skip
    return DQNConfig(**{**base, **kwargs})


def resumed(config: DQNConfig, epochs: int) -> DQNConfig:
    data = config.to_dict()
    return config_from_dict({**data, "epochs": epochs, "out": None, "resume": config.out})


def epochs_in_csv(run: Path) -> list[int]:
    return [int(row["epoch"]) for row in progress(run)]


def units(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "checkpoints").iterdir())


def debris(run: Path) -> list[str]:
    """Temporary files and uncommitted unit folders anywhere in the run folder."""
    found = [str(p) for p in run.rglob(".*.tmp*")]
    for unit in (run / "checkpoints").glob("epoch_*"):
        if not (unit / "manifest.json").is_file():
            found.append(str(unit))
    return found


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A three-epoch run's folder, copied by each test that resumes or damages it."""
    config = dqn(tmp_path_factory.mktemp("trained"), epochs=3)
    train(config)
    return Path(config.out)


@pytest.fixture
def three(trained, tmp_path) -> DQNConfig:
    """The config of a fresh copy of ``trained`` at ``tmp_path/run``."""
    shutil.copytree(trained, tmp_path / "run")
    return dqn(tmp_path, epochs=3)


def test_each_epoch_is_one_committed_unit_and_two_are_kept(three):
    run = Path(three.out)
    assert units(run) == ["epoch_000002", "epoch_000003"]
    manifest = json.loads((run / "checkpoints/epoch_000003/manifest.json").read_text())
    assert manifest["epoch"] == 3 and manifest["world_size"] == 1
    assert set(manifest["files"]) == {"policy.pt", "state_rank0.pt", "buffer_rank0.npz"}
    for name, entry in manifest["files"].items():
        assert (run / "checkpoints/epoch_000003" / name).stat().st_size == entry["size"]
    latest = torch.load(run / "policy_latest.pt", weights_only=True)
    assert latest["metadata"]["epoch"] == 3
    assert epochs_in_csv(run) == [1, 2, 3]
    assert debris(run) == []


def test_rows_past_the_last_committed_epoch_are_dropped_on_resume(three, caplog):
    run = Path(three.out)
    # A kill after epoch 3's row but before its manifest: the unit is not committed.
    (run / "checkpoints/epoch_000003/manifest.json").unlink()
    (run / ".policy_latest.pt.999.tmp").write_bytes(b"cut")  # a write cut by the kill
    (run / "checkpoints/epoch_000002/.buffer_rank0.npz.999.tmp.npz").write_bytes(b"PK")
    trainer = Trainer(resumed(three, 4))
    with caplog.at_level(logging.INFO, logger="goalenvs.train"):
        trainer.start()
    assert trainer.counters.epoch == 2
    assert epochs_in_csv(run) == [1, 2]
    assert debris(run) == [] and units(run) == ["epoch_000002"]
    assert "dropped 1 rows past epoch 2" in caplog.text
    assert torch.load(run / "policy_latest.pt", weights_only=True)["metadata"]["epoch"] == 2
    result = trainer.run()
    assert result.epochs == 4 and epochs_in_csv(run) == [1, 2, 3, 4]
    steps = [int(row["env_steps"]) for row in progress(run)]
    assert steps == [2 * 2 * 4 * e for e in range(1, 5)]  # cycles x envs x n_bits


DAMAGES = [("policy.pt", "truncate"), ("policy.pt", "garbage"), ("state_rank0.pt", "garbage"),
           ("buffer_rank0.npz", "truncate"), ("buffer_rank0.npz", "garbage"),
           ("manifest.json", "garbage")]  # fmt: skip


@pytest.mark.parametrize(("victim", "damage"), DAMAGES)
def test_a_damaged_newest_unit_falls_back_to_the_one_before(three, caplog, victim, damage):
    run = Path(three.out)
    path = run / "checkpoints/epoch_000003" / victim
    size = path.stat().st_size
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[: size // 2])
    else:  # same size, so only the reader can tell
        path.write_bytes(bytes(random.Random(0).randrange(256) for _ in range(size)))
    with caplog.at_level(logging.WARNING, logger="goalenvs.train"):
        result = train(resumed(three, 4))
    assert f"the checkpoint of epoch 3 cannot be resumed ({str(path)!r}" in caplog.text or (
        victim == "manifest.json" and "epoch 3 cannot be resumed" in caplog.text
    )
    assert "resuming from epoch 2, the last readable checkpoint" in caplog.text
    assert result.epochs == 4 and epochs_in_csv(run) == [1, 2, 3, 4]


def test_overwriting_policy_latest_in_place_does_not_touch_what_resume_reads(three):
    run = Path(three.out)
    with open(run / "policy_latest.pt", "r+b") as f:  # in place, as torch.save(x, path) does
        f.write(b"garbage")
    result = train(resumed(three, 4))
    assert result.epochs == 4 and epochs_in_csv(run) == [1, 2, 3, 4]
    assert torch.load(run / "policy_latest.pt", weights_only=True)["metadata"]["epoch"] == 4


def test_no_readable_unit_is_a_clear_error_naming_the_file_and_the_way_out(three):
    run = Path(three.out)
    for unit in ("epoch_000002", "epoch_000003"):
        (run / "checkpoints" / unit / "policy.pt").write_text("hello")
    with pytest.raises(CheckpointError) as info:
        train(resumed(three, 4))
    message = str(info.value)
    assert "epoch_000003/policy.pt" in message and "epoch_000002/policy.pt" in message
    assert "truncated or overwritten" in message and "start a new run with out=" in message


def test_resume_of_a_folder_killed_before_its_first_epoch_starts_over(tmp_path, caplog):
    config = dqn(tmp_path, epochs=1)
    run = Path(config.out)
    run.mkdir()
    (run / "config.json").write_text(json.dumps(config.to_dict()))
    (run / "checkpoints/epoch_000001").mkdir(parents=True)
    (run / "checkpoints/epoch_000001/policy.pt").write_bytes(b"half")
    with caplog.at_level(logging.WARNING, logger="goalenvs.train"):
        result = train(resumed(config, 1))
    assert "holds no finished epoch yet" in caplog.text
    assert result.epochs == 1 and epochs_in_csv(run) == [1] and debris(run) == []


def test_saving_the_buffer_leaves_episodes_in_progress_alone(tmp_path):
    # 3 steps per cycle, 4-step episodes: episodes run across every epoch's end.
    config = dqn(tmp_path, epochs=2, rollout_steps=3, gamma=0.9)
    seen = []

    def callback(row):
        seen.append((trainer.buffer.episodes_in_progress, trainer.buffer.n_transitions))

    trainer = Trainer(config, callback)
    trainer.run()
    # Transitions are sampleable once their episode ends; none was cut by the save.
    assert seen[0][0] > 0  # the live buffer still holds the open episodes after the save
    live = trainer.buffer
    saved = Trainer(resumed(config, 3))
    saved.start()
    # The resumed buffer closes them (its envs restart) and holds every transition.
    assert saved.buffer.episodes_in_progress == 0
    assert saved.buffer.n_transitions == live.n_transitions + _open_steps(live)
    saved.close()


def _open_steps(buffer) -> int:
    """Transitions of the episodes in progress (not counted in n_transitions yet)."""
    closed = type(buffer).__new__(type(buffer))
    closed.__setstate__(buffer.__getstate__())
    closed.truncate_last_trajectory()
    return closed.n_transitions - buffer.n_transitions


@pytest.mark.parametrize("env_id", [SYNC_ID, "goalenvs/PointReach-v0"])
def test_resume_continues_the_run_with_the_same_numbers(tmp_path, env_id):
    def config(name: str, epochs: int, **kwargs) -> DDPGConfig:
        return DDPGConfig(
            env_id=env_id, env_kwargs={"distance_threshold": 1e-6}, hidden_sizes=(16,),
            num_envs=2, n_cycles=2, n_batches=3, batch_size=16, n_eval_episodes=2,
            buffer_size=2000, epochs=epochs, save_buffer=True, device="cpu", verbose=False,
            out=None if name is None else str(tmp_path / name), **kwargs,
        )  # fmt: skip

    straight = Trainer(config("straight", 4))
    straight.run()
    train(config("cut", 2))
    cut = Trainer(config(None, 4, resume=str(tmp_path / "cut")))
    cut.run()
    a, b = progress(tmp_path / "cut", untimed=True), progress(tmp_path / "straight", untimed=True)
    assert [r["epoch"] for r in a] == ["1", "2", "3", "4"]
    assert a == b  # losses, Q values, returns, env steps: every epoch, to the last digit
    for name, tensor in straight.agent.state_dict().items():
        torch.testing.assert_close(cut.agent.state_dict()[name], tensor, rtol=0, atol=0)
    assert straight.buffer.n_transitions == cut.buffer.n_transitions
    stored = cut.buffer.state().fields
    for key, value in straight.buffer.state().fields.items():
        np.testing.assert_array_equal(stored[key], value, err_msg=key)


# ------------------------------------------------------------------ fault injection

TRAIN = [sys.executable, "-m", "goalenvs", "train"]
FAST = ["--cycles", "2", "--batches", "2", "--save-buffer", "--device", "cpu", "--quiet"]
# The first start picks the schedule; a resume keeps it (its config.json).
FIRST = ["--preset", "baselines"]


def started(proc: subprocess.Popen, config: Path, before: float, limit: float) -> bool:
    """Waits until the process has reopened its run folder (it rewrites config.json
    after restoring), or has exited; False when it exited."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        if config.exists() and config.stat().st_mtime_ns > before:
            return True
        time.sleep(0.01)
    raise AssertionError(f"the run did not start within {limit} s")


def kill_and_resume(
    run: Path, kills: int, seed: int, window: float, extra: tuple[str, ...] = ()
) -> list[float]:
    """SIGKILLs `goalenvs train` at random moments of its training loop ``kills`` times,
    resuming the folder after each (``extra`` flags on its first start); returns the
    delays used. Fails on a resume that does not start."""
    rng = random.Random(seed)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    delays = []
    for i in range(kills):
        args = ["goalenvs/PointReach-v0", "--epochs", "400", "--out", str(run)]
        command = TRAIN + ([*args, *FIRST, *extra] if i == 0 else ["--resume", str(run)]) + FAST
        config = run / "config.json"
        before = config.stat().st_mtime_ns if config.exists() else 0
        proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        if not started(proc, config, before, 120):
            raise AssertionError(f"kill {i}: the resume failed: {proc.communicate()[1]}")
        delays.append(rng.uniform(0.0, window))
        time.sleep(delays[-1])
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    return delays


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env_device", "kills", "buffer_file"),
    [("numpy", 4, "buffer_rank0.npz"), ("device", 4, "buffer_rank0.pt")],
)
def test_sigkill_at_random_moments_every_resume_succeeds(tmp_path, env_device, kills, buffer_file):
    # "device": the torch twin and the device buffer on the CPU, whose save is a .pt file.
    # Four kills a buffer kind here (each a fresh start of the CLI, most of the time);
    # benchmarks/crash_resume.py kills 30 times each.
    run = tmp_path / "run"
    kill_and_resume(run, kills=kills, seed=0, window=1.0, extra=("--env-device", env_device))
    last = max(epochs_in_csv(run), default=0)
    final = subprocess.run(
        [*TRAIN, "--resume", str(run), "--epochs", str(last + 1), *FAST],
        env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert final.returncode == 0, final.stderr
    epochs = epochs_in_csv(run)
    assert epochs == list(range(1, len(epochs) + 1)) and len(epochs) >= last + 1
    assert debris(run) == []
    rows = progress(run)
    # The numbers continue: 2 cycles x 2 envs x 50 steps and 2 x 2 updates per epoch,
    # wall time adding up over the sessions.
    assert [int(r["env_steps"]) for r in rows] == [200 * e for e in epochs]
    assert [int(r["updates"]) for r in rows] == [4 * e for e in epochs]
    walls = [float(r["wall_time"]) for r in rows]
    assert walls == sorted(walls)
    newest = max(run.glob("checkpoints/epoch_*"))
    assert buffer_file in json.loads((newest / "manifest.json").read_text())["files"]


# ------------------------------------------------------------------ several workers


def sigterm_worker(rank: int, port: int, tmp: str, epochs: int, resume: bool) -> None:
    join(rank, port)
    run = os.path.join(tmp, "run")
    # device cpu: two gloo workers and the numpy buffer, whatever GPUs are there
    config = DDPGConfig(
        env_id="goalenvs/BitFlippingContinuous-v0", env_kwargs={"n_bits": 4}, hidden_sizes=(16,),
        epochs=epochs, n_cycles=3, n_batches=2, batch_size=16, n_eval_episodes=2,
        buffer_size=2000, save_buffer=True, device="cpu", out=None if resume else run,
        resume=run if resume else None, verbose=False,
    )  # fmt: skip
    # Only worker 1 gets SIGTERM (after epoch 1): both must leave the loop together.
    callback = stop_at_epoch(1, signal.SIGTERM) if rank == 1 and not resume else None
    result = train(config, callback=callback)
    torch.save(
        {"interrupted": result.interrupted, "epochs": result.epochs},
        os.path.join(tmp, f"result{rank}.pt"),
    )


@pytest.mark.slow
def test_sigterm_to_one_of_two_workers_stops_both_and_each_resumes_its_own_state(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(sigterm_worker, args=(free_port(), str(tmp_path), 4, False), nprocs=2, join=True)
    assert load_ranks(tmp_path, "result") == [{"interrupted": True, "epochs": 1}] * 2
    run = tmp_path / "run"
    assert epochs_in_csv(run) == [1]
    manifest = json.loads((run / "checkpoints/epoch_000001/manifest.json").read_text())
    assert manifest["world_size"] == 2
    assert {"state_rank0.pt", "state_rank1.pt", "buffer_rank0.npz", "buffer_rank1.npz"} <= set(
        manifest["files"]
    )
    states = load_ranks(run / "checkpoints/epoch_000001", "state_rank")
    assert states[0]["agent"] != states[1]["agent"]  # each worker explores with its own noise
    mp.spawn(sigterm_worker, args=(free_port(), str(tmp_path), 2, True), nprocs=2, join=True)
    assert load_ranks(tmp_path, "result") == [{"interrupted": False, "epochs": 2}] * 2
    assert epochs_in_csv(run) == [1, 2] and debris(run) == []
