"""The cores a run may use are those of its affinity and its container's CPU quota, and a
run's machine is described in one dict: tested on fake cgroup and cpuinfo files."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import pytest
import torch

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.agents.precision import cpu_has_bf16
from goalenvs.train import machine
from goalenvs.train.machine import (
    check_env_workers,
    cpu_model,
    cpu_quota,
    default_env_workers,
    describe_machine,
    usable_cores,
)
from goalenvs.train.trainer import Trainer

FETCH_STEP = 1.8e-3  # seconds: an env worth worker processes


def cgroup_v2(root: Path, text: str) -> Path:
    (root / "cpu.max").write_text(text + "\n")
    return root


def cgroup_v1(root: Path, quota: int, period: int = 100000, folder: str = "cpu") -> Path:
    (root / folder).mkdir(parents=True)
    (root / folder / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (root / folder / "cpu.cfs_period_us").write_text(f"{period}\n")
    return root


@pytest.mark.parametrize(
    ("v2", "v1", "affinity", "cores"),
    [
        ("200000 100000", None, 64, 2),  # a 2-CPU container
        ("150000 100000", None, 64, 2),  # 1.5 CPUs: rounded up
        ("50000 100000", None, 64, 1),  # half a CPU: still one core
        ("800000 200000", None, 64, 4),  # another period
        ("max 100000", None, 64, 64),  # no limit: the affinity
        ("800000 100000", None, 3, 3),  # the affinity bounds the cores below the quota
        (None, (200000, 100000, "cpu"), 64, 2),
        (None, (250000, 100000, "cpu,cpuacct"), 64, 3),  # where some hosts mount v1's cpu
        (None, (-1, 100000, "cpu"), 64, 64),  # -1: no limit
    ],
)
def test_the_cgroup_quota_bounds_the_affinitys_cores(tmp_path, v2, v1, affinity, cores):
    root = cgroup_v2(tmp_path, v2) if v2 is not None else cgroup_v1(tmp_path, *v1)
    assert usable_cores(root, affinity=affinity) == cores


def test_without_cgroup_files_or_with_unreadable_ones_the_affinity_counts(tmp_path):
    assert cpu_quota(tmp_path) is None
    assert usable_cores(tmp_path, affinity=6) == 6
    assert usable_cores(cgroup_v2(tmp_path, "lots of cpu"), affinity=6) == 6


def test_cgroup_v2_is_read_before_v1(tmp_path):
    cgroup_v1(tmp_path, 400000)
    assert cpu_quota(cgroup_v2(tmp_path, "100000 100000")) == 1.0


def test_a_two_cpu_container_on_a_64_core_host_gets_the_workers_of_two_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "CGROUP_ROOT", cgroup_v2(tmp_path, "200000 100000"))
    monkeypatch.setattr(machine, "affinity_cores", lambda: 64)
    assert usable_cores() == 2
    # On 2 cores or fewer a costly env stays in the trainer's process; 64 cores give 16.
    assert default_env_workers(16, native_twin=False, step_seconds=FETCH_STEP) == 1
    assert default_env_workers(16, False, cores=64, step_seconds=FETCH_STEP) == 16
    with pytest.raises(ValueError, match=r"env_workers \(--env-workers\) 9 is far beyond this "):
        check_env_workers(9, 18)  # 4 per core x 2 cores: at most 8
    (tmp_path / "cpu.max").write_text("800000 100000\n")  # 8 CPUs
    assert default_env_workers(16, False, step_seconds=FETCH_STEP) == 8


def test_torchrun_workers_split_the_quota_not_the_host_and_torch_takes_their_share(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(machine, "CGROUP_ROOT", cgroup_v2(tmp_path, "400000 100000"))
    monkeypatch.setattr(machine, "affinity_cores", lambda: 64)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    previous = torch.get_num_threads()
    config = DDPGConfig(
        env_id="goalenvs/PointReach-v0", num_envs=2, n_eval_episodes=2, hidden_sizes=(16,),
        batch_size=16, torch_threads=8, device="cpu", verbose=False, out=str(tmp_path / "run"),
    )  # fmt: skip
    try:
        trainer = Trainer(config)
        trainer.close()
        threads = torch.get_num_threads()  # what the run set torch to
    finally:
        torch.set_num_threads(previous)
    assert trainer.plan.torch_threads == threads == 2  # 4 CPUs over 2 workers, not 64 over 2
    assert "torch_threads 8 lowered to 2: 2 workers share this machine's 4 cores" in trainer.notes
    assert (trainer.plan.machine["cores"], trainer.plan.machine["cpu_quota"]) == (4, 4.0)


def test_cpu_model_reads_the_model_name_and_falls_back_to_the_platform(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654\n")
    assert cpu_model(info) == "AMD EPYC 9654"
    info.write_text("processor\t: 0\nBogoMIPS\t: 50.00\n")  # an ARM board names no model
    assert cpu_model(info) == (platform.processor() or platform.machine())
    assert cpu_model(tmp_path / "missing") == (platform.processor() or platform.machine())


def test_describe_machine_records_model_cores_quota_torch_and_bf16(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("model name\t: Intel(R) Xeon(R) Platinum 8480+\n")
    root = tmp_path / "cgroup"
    root.mkdir()
    described = describe_machine(cgroup_v2(root, "200000 100000"), cpuinfo=info)
    assert described == {
        "cpu": "Intel(R) Xeon(R) Platinum 8480+",
        "cores": min(2, machine.affinity_cores()),
        "cores_total": os.cpu_count(),
        "cpu_quota": 2.0,
        "torch": torch.__version__,
        "cpu_bf16": cpu_has_bf16(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "platform": platform.platform(),
    }
