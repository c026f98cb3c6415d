"""``--prioritized``: the trainers feed TD errors back as replay priorities."""

from __future__ import annotations

import numpy as np
import pytest

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.agents.dqn import DQNConfig
from goalenvs.cli import main
from goalenvs.train.trainer import Trainer


@pytest.mark.parametrize(
    ("config_cls", "env_id"),
    [(DDPGConfig, "goalenvs/PointReach-v0"), (DQNConfig, "goalenvs/BitFlipping-v0")],
)
def test_updates_set_priorities_from_td_errors(config_cls, env_id, tmp_path):
    config = config_cls(
        env_id=env_id,
        prioritized=True,
        num_envs=2,
        n_batches=3,
        batch_size=32,
        hidden_sizes=(16,),
        device="cpu",
        verbose=False,
        out=str(tmp_path),
    )
    trainer = Trainer(config)
    try:
        assert trainer.buffer.prioritized
        trainer.collector.reset(seed=0)
        stats = {name: [] for name in ("success", *trainer.agent.loss_names)}
        for _ in range(3):
            rollout = trainer.collector.collect(trainer.agent)
            stats["success"] += trainer.collector.store(rollout, trainer.buffer, trainer.agent)
        leaves = trainer.buffer._tree.leaves
        before = np.unique(leaves[leaves > 0])
        assert len(before) == 1  # new transitions all enter at the max priority
        trainer.optimize(stats)
        leaves = trainer.buffer._tree.leaves
        after = np.unique(leaves[leaves > 0])
        assert len(after) > 1  # the sampled ones now carry their own |TD error|
        weights = trainer.buffer.sample(64).weights
        assert weights.max() == pytest.approx(1.0) and weights.min() < 1.0
        assert all(np.isfinite(stats[name]).all() for name in trainer.agent.loss_names)
    finally:
        trainer.close()


def test_prioritized_flag_reaches_the_config(tmp_path, capsys):
    assert main(["train", "goalenvs/PointReach-v0", "--prioritized", "--show-config"]) == 0
    assert '"prioritized": true' in capsys.readouterr().out


@pytest.mark.parametrize("name", ["priority_alpha", "priority_beta"])
@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_priority_exponents_outside_0_1_name_the_field(name, value):
    with pytest.raises(ValueError, match=rf"{name} must be in \[0, 1\], got {value}"):
        DDPGConfig(**{name: value})
