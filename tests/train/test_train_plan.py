"""A run knows what it ran: its plan is worked out once, printed whole, recorded in
config.json with the machine, and a resume follows it (or says in one line why it
cannot)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.cli import main
from goalenvs.train import plan as plan_module
from goalenvs.train.plan import PlanError, follow_recorded
from goalenvs.train.trainer import Trainer
from tests.train.runs import reach_config

TINY = ["--epochs", "1", "--cycles", "2", "--batches", "2", "--batch-size", "16"]


def test_config_json_records_every_resolved_choice_and_the_machine(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "goalenvs/PointReach-v0", *TINY, "--quiet", "--out", str(out)]
    # The CPU plan (on a CUDA machine "auto" is CUDA, with the point_reach preset's
    # [device] section).
    assert main([*argv, "--precision", "fp32", "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    plan = config["plan"]
    assert config["precision"] == "fp32" and config["env_workers"] is None  # as asked
    assert plan["precision"] == "fp32" and plan["device"] == "cpu"
    assert (plan["env_workers"], plan["overlap"], plan["cuda_graphs"]) == (1, False, False)
    assert (plan["episode_length"], plan["rollout_steps"]) == (50, 5)
    assert plan["gamma"] == pytest.approx(0.98) and plan["clip_range"] == pytest.approx([-50, 0])
    assert plan["machine"]["cores"] >= 1 and plan["machine"]["torch"] == torch.__version__
    assert "env workers 1: the native vector twin" in " ".join(plan["notes"])
    # printed whole, even with --quiet
    assert "plan: networks on cpu, fp32 updates, CUDA graphs off" in printed
    assert "plan: episode length 50, rollout 5 steps, gamma 0.98" in printed


def test_show_config_prints_the_plan_as_json(capsys):
    assert main(["train", "goalenvs/PointReach-v0", "--precision", "auto", "--show-config"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["precision"] == "auto"  # the config as asked
    assert shown["plan"]["precision"] in ("bf16", "fp32")  # and what it resolves to here
    assert shown["plan"]["episode_length"] == 50


def test_a_resume_follows_the_recorded_plan_not_this_machine(tmp_path):
    cfg = reach_config(tmp_path, save_buffer=True)
    trainer = Trainer(cfg)
    trainer.run()
    run = Path(cfg.out)
    data = json.loads((run / "config.json").read_text())
    assert data["precision"] == "auto"
    # the run recorded choices another machine made: fp32, overlap on, 2 env workers
    data["plan"].update(precision="fp32", overlap=True, env_workers=2, step_seconds=0.5)
    (run / "config.json").write_text(json.dumps(data))
    resumed = reach_config(tmp_path, resume=str(run), epochs=2, out=None, save_buffer=True)
    trainer = Trainer(resumed, recorded=data["plan"])
    try:
        assert (trainer.plan.precision, trainer.plan.overlap) == ("fp32", True)
        assert (trainer.plan.env_workers, trainer.plan.step_seconds) == (2, 0.5)
        assert trainer.collector.workers == 2
    finally:
        trainer.close()


def test_a_recorded_cuda_device_this_machine_lacks_is_one_line_naming_the_flag(
    tmp_path, capsys, monkeypatch
):
    out = tmp_path / "run"
    argv = ["train", "goalenvs/PointReach-v0", *TINY, "--quiet", "--out", str(out)]
    assert main(argv) == 0
    data = json.loads((out / "config.json").read_text())
    data["plan"]["device"] = "cuda:0"
    (out / "config.json").write_text(json.dumps(data))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    capsys.readouterr()
    assert main(["train", "--resume", str(out), "--epochs", "2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "goalenvs train: the run was recorded on device cuda:0; this machine gives no CUDA "
        "device (torch sees none); --device cpu accepts the change"
    ]
    assert main(["train", "--resume", str(out), "--epochs", "2", "--quiet", "--device", "cpu"]) == 0


def test_recorded_env_workers_beyond_this_machine_are_refused_with_the_flag(tmp_path, monkeypatch):
    monkeypatch.setattr(plan_module, "usable_cores", lambda: 2)
    cfg = reach_config(tmp_path, env_workers=9)  # 9 > 4 per core x 2 cores
    with pytest.raises(PlanError, match=r"recorded with 9 env workers; .* 2 cores carry at most 8"):
        Trainer(cfg, recorded={"device": "cpu", "env_workers": 9})


def test_follow_recorded_keeps_what_the_config_sets_and_a_new_device_resets_its_choices():
    recorded = dict(device="cuda:0", env_device="device", replay_device="device", env_workers=1)
    recorded.update(overlap=False, precision="fp32", cuda_graphs=True)
    asked = DDPGConfig(env_id="goalenvs/PointReach-v0")
    followed = follow_recorded(asked, recorded)
    assert (followed.device, followed.env_device, followed.cuda_graphs) == ("cuda", "device", "on")
    assert (followed.precision, followed.env_workers, followed.overlap) == ("fp32", 1, False)
    assert asked.precision == "auto"  # the asked config is left as it was
    moved = follow_recorded(DDPGConfig(device="cpu", precision="bf16"), recorded)
    assert (moved.device, moved.precision) == ("cpu", "bf16")  # set at the resume: kept
    assert (moved.env_device, moved.replay_device, moved.cuda_graphs) == ("auto", "auto", "auto")
    assert follow_recorded(asked, None) is asked
