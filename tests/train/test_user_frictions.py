"""What a user's first runs print: an epoch before any update says so instead of nan
losses, and an env with float64 observations gets one line of train's own instead of
gymnasium's warnings."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.train.display import Display
from goalenvs.train.trainer import Trainer

USER_ENV = Path(__file__).resolve().parents[1] / "user_envs" / "cursor_env.py"
TINY = dict(
    epochs=1, n_cycles=2, rollout_steps=5, num_envs=2, n_batches=1, batch_size=16,
    n_eval_episodes=2, hidden_sizes=(16, 16), device="cpu", max_episode_steps=10,
)  # fmt: skip


def test_an_epoch_without_updates_says_so_instead_of_nan_losses(capsys):
    display = Display(DDPGConfig(epochs=1), 0)
    row = {
        "epoch": 1, "env_steps": 80, "eval_success": 0.0, "eval_return": -50.0,
        "steps_per_s": 400.0, "critic_loss": float("nan"), "actor_loss": float("nan"),
        "q_mean": float("nan"),
    }  # fmt: skip
    display.epoch(row, 0.0)
    out = capsys.readouterr().out
    assert "no update yet (the buffer fills first)" in out
    assert "nan" not in out
    display.epoch({**row, "critic_loss": 0.25, "actor_loss": 1.5, "q_mean": -3.0}, 0.0)
    assert "critic 0.25  actor 1.5  Q -3" in capsys.readouterr().out


@pytest.mark.parametrize(("name", "noted"), [("Float64Cursor", True), ("CursorEnv", False)])
def test_float64_observations_get_one_note_and_no_gymnasium_warnings(name, noted, tmp_path):
    config = DDPGConfig(env_id=f"{USER_ENV}:{name}", out=str(tmp_path), verbose=False, **TINY)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = Trainer(config)
        trainer.run()
    dtype_notes = [note for note in trainer.notes if "api.obs_dtype" in note]
    if noted:
        assert dtype_notes == [
            f"{config.env_id} returns observations of another dtype than its space: "
            "observation float64 (space float32), achieved_goal float64 (space float32), "
            "desired_goal float64 (space float32); training casts them to the space's "
            "(`goalenvs check` calls it api.obs_dtype; `.astype(space.dtype)` in the env "
            "fixes it)"
        ]
    else:
        assert dtype_notes == []
    assert [str(w.message) for w in caught if "passive_env_checker" in w.filename] == []
