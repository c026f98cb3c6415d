"""``goalenvs play --policy``: a checkpoint written by the trainer, watched and refused."""

from __future__ import annotations

import pytest

from goalenvs.cli import main as cli_main

torch = pytest.importorskip("torch")
pytest.importorskip("goalenvs.train.trainer")

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    """A DQN+HER policy for BitFlipping with 4 bits, after a tiny training run."""
    from goalenvs.agents.dqn import DQNConfig
    from goalenvs.train.trainer import Trainer

    config = DQNConfig(
        env_id="goalenvs/BitFlipping-v0",
        env_kwargs={"n_bits": 4},
        hidden_sizes=(16, 16),
        num_envs=2,
        epochs=1,
        n_cycles=2,
        n_batches=2,
        batch_size=16,
        n_eval_episodes=2,
        out=str(tmp_path_factory.mktemp("run")),
        verbose=False,
    )
    return str(Trainer(config).run().latest_policy)


def test_watching_a_checkpoint_uses_the_env_and_kwargs_it_names(checkpoint, capsys, tmp_path):
    out = tmp_path / "policy.gif"
    assert (
        cli_main(["play", checkpoint, "--headless", "--episodes", "3", "--record", str(out)]) == 0
    )
    printed = capsys.readouterr().out
    lengths = [
        int(line.split("length ")[1].split(",")[0])
        for line in printed.splitlines()
        if line.startswith("episode ")
    ]
    assert len(lengths) == 3 and all(1 <= n <= 4 for n in lengths)  # n_bits=4 steps at most
    assert "3 episodes: success rate" in printed
    assert f"recorded {sum(lengths) + 3} frames" in printed


def test_a_checkpoint_for_other_spaces_is_refused_in_one_line(checkpoint, capsys):
    argv = ["play", "goalenvs/BitFlipping-v0", "--policy", checkpoint, "--headless"]
    assert cli_main([*argv, "--env-kwargs", '{"n_bits": 6}']) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "does not match goalenvs/BitFlipping-v0" in err
    assert 'trained on goalenvs/BitFlipping-v0 (env kwargs {"n_bits": 4})' in err


def test_a_file_that_is_not_a_checkpoint_is_refused_in_one_line(capsys, tmp_path):
    bad = tmp_path / "notes.pt"
    bad.write_text("not a checkpoint")
    assert cli_main(["play", "goalenvs/BitFlipping-v0", "--policy", str(bad), "--headless"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("goalenvs play: error: --policy: ")
    assert str(bad) in err and "not a readable checkpoint" in err
