"""policy_average: deterministic acting by an exponential average of the policy's weights,
moved once a cycle; training, exploring and the trained networks as without it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from goalenvs.agents import DQNConfig, Learner
from goalenvs.cli import main
from goalenvs.train.policy import load_policy
from goalenvs.train.trainer import Trainer, train
from tests.agents.test_learner import (
    ALGOS,
    OBS_SPACE,
    ReplayStub,
    assert_same_state,
    cuda_cycles,
    needs_cuda,
    parameters,
)
from tests.agents.test_learner import make as make_on
from tests.train.runs import progress
from tests.train.test_train_resume import config as resume_config

torch.set_num_threads(1)

ACTING = {"ddpg": "actor", "td3": "actor", "sac": "actor", "dqn": "q"}


def make(algo: str, seed: int = 0, **kwargs):
    cls, config_cls, action_space = ALGOS[algo]
    torch.manual_seed(seed)
    config = config_cls(hidden_sizes=(32, 32), precision="fp32", device="cpu", **kwargs)
    return cls(OBS_SPACE, action_space, config, 0.9, seed=seed), action_space


def observations(n: int = 64) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {k: rng.normal(size=(n, *s.shape)).astype(np.float32) for k, s in OBS_SPACE.items()}


@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_the_average_moves_by_its_weight_after_each_cycle_and_training_is_unchanged(algo):
    agent, action_space = make(algo, policy_average=0.75)
    reference, _ = make(algo)  # the same networks, no average
    name = ACTING[algo]
    average = parameters(getattr(agent, f"{name}_average"))
    for online, start in zip(average, getattr(agent, name).parameters(), strict=True):
        torch.testing.assert_close(online, start.detach(), rtol=0, atol=0)  # starts equal
    for cycle in range(3):
        for learner in (Learner(agent, 16), Learner(reference, 16)):
            torch.manual_seed(10 + cycle)  # TD3's target noise and SAC's actions draw on it
            learner.optimize(ReplayStub(action_space, seed=cycle), 4)
        trained = parameters(getattr(agent, name))
        average = [0.75 * a + 0.25 * t for a, t in zip(average, trained, strict=True)]
        moved = parameters(getattr(agent, f"{name}_average"))
        for got, want in zip(moved, average, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
        assert any(not torch.equal(a, t) for a, t in zip(moved, trained, strict=True))
    # What trains (networks, targets, optimizers) is the run without an average, exactly.
    state = {k: v for k, v in agent.state_dict().items() if "_average." not in k}
    assert state.keys() == reference.state_dict().keys()
    for key, tensor in reference.state_dict().items():
        torch.testing.assert_close(state[key], tensor, rtol=0, atol=0, msg=key)


@needs_cuda
@pytest.mark.parametrize("algo", ["ddpg", "td3", "dqn"])
def test_the_average_moves_outside_the_cuda_graphs_as_in_the_eager_updates(algo):
    kwargs = {"policy_average": 0.9, **({"target_noise": 0.0} if algo == "td3" else {})}
    name = ACTING[algo]
    start = parameters(getattr(make_on(algo, "cuda", **kwargs)[0], f"{name}_average"))
    graphed, learner, _ = cuda_cycles(algo, "on", "cuda", cycles=1, **kwargs)
    assert learner.graphs
    trained = parameters(getattr(graphed, name))
    average = getattr(graphed, f"{name}_average").parameters()
    for got, s, t in zip(average, start, trained, strict=True):
        assert got.device.type == "cuda"
        torch.testing.assert_close(got.detach(), 0.9 * s + 0.1 * t, rtol=1e-6, atol=1e-7)
    # Three cycles: the averages (and everything else) as the eager updates leave them.
    graphed, _, _ = cuda_cycles(algo, "on", "cuda", **kwargs)
    eager, _, _ = cuda_cycles(algo, "off", "cuda", **kwargs)
    assert_same_state(eager, graphed, rtol=1e-3, atol=5e-4)


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac", "dqn"])
def test_deterministic_acting_uses_the_average_and_exploring_the_policy(algo):
    no_exploration = {} if algo == "sac" else {"random_eps": 0.0}
    if algo in ("ddpg", "td3"):
        no_exploration["noise_eps"] = 0.0
    agent, _ = make(algo, policy_average=0.5, **no_exploration)
    other, _ = make(algo, seed=1)  # networks the average is set to
    own, _ = make(algo)  # the agent's own trained networks, alone
    name = ACTING[algo]
    getattr(agent, f"{name}_average").load_state_dict(getattr(other, name).state_dict())
    obs = observations()
    np.testing.assert_array_equal(agent.act(obs, explore=False), other.act(obs, explore=False))
    with agent.online_acting():
        np.testing.assert_array_equal(agent.act(obs, explore=False), own.act(obs, explore=False))
    assert agent.acting_average  # restored on leaving
    assert not np.array_equal(own.act(obs, explore=False), other.act(obs, explore=False))
    if algo != "sac":  # with no exploration, exploring acts by the trained networks
        np.testing.assert_array_equal(agent.act(obs, explore=True), own.act(obs, explore=False))
    tensors = {k: torch.from_numpy(v) for k, v in obs.items()}  # a device twin's path
    torch.testing.assert_close(
        agent.act(tensors, explore=False), torch.as_tensor(other.act(obs, explore=False))
    )


def test_saved_policies_hold_the_average_and_old_configs_have_none():
    agent, _ = make("ddpg", policy_average=0.9)
    assert sorted(agent.policy_modules()) == ["actor", "actor_average", "normalizer"]
    plain, _ = make("ddpg")
    assert sorted(plain.policy_modules()) == ["actor", "normalizer"]
    assert not hasattr(plain, "actor_average") and not plain.acting_average


def run_config(tmp_path, **kwargs) -> DQNConfig:
    """test_train_resume's small BitFlipping run, evaluated by an average of its Q-network."""
    return resume_config(tmp_path, policy_average=0.5, **kwargs)


def test_a_run_logs_both_evaluations_saves_the_average_and_resumes_it(tmp_path):
    first = train(run_config(tmp_path, epochs=2, save_buffer=True))
    rows = progress(first.run_dir)
    evals = ["eval_success", "eval_return", "eval_length", "eval_success_online"]
    assert list(rows[0])[6:10] == evals
    assert len(rows) == 2
    for row in rows:
        assert 0.0 <= float(row["eval_success_online"]) <= 1.0
    saved = torch.load(first.latest_policy, map_location="cpu", weights_only=True)["policy"]
    assert set(saved) == {"normalizer", "q", "q_average"}
    assert any(not torch.equal(saved["q"][k], saved["q_average"][k]) for k in saved["q"])
    # The saved policy acts by the average, as the evaluation did.
    policy = load_policy(first.latest_policy)
    bits = np.array([[0, 1, 1, 0]], np.float32)
    obs = {"observation": bits, "achieved_goal": bits, "desired_goal": np.roll(bits, -1, 1)}
    with torch.no_grad():
        by_average = policy.agent.q_average(policy.agent.inputs(obs)).argmax(dim=1).numpy()
    np.testing.assert_array_equal(policy.predict(obs), by_average)
    for key, tensor in saved["q_average"].items():
        torch.testing.assert_close(policy.agent.q_average.state_dict()[key], tensor)
    # A resumed run starts from the saved average and keeps the header.
    trainer = Trainer(run_config(tmp_path, epochs=3, save_buffer=True, resume=str(first.run_dir)))
    trainer.start()
    for key, tensor in saved["q_average"].items():
        torch.testing.assert_close(trainer.agent.q_average.state_dict()[key], tensor)
    resumed = trainer.run()
    assert [row["epoch"] for row in progress(resumed.run_dir)] == ["1", "2", "3"]


def train_argv(epochs: int) -> tuple[list[str], list[str]]:
    """A PointReach run's command line of ``epochs`` one-cycle epochs, and the flags that
    make its cycles tiny (a --show-config check leaves them off)."""
    argv = ["train", "goalenvs/PointReach-v0", "--epochs", str(epochs), "--cycles", "1"]
    tiny = ["--num-envs", "2", "--batches", "2", "--batch-size", "16", "--device", "cpu"]
    return [*argv, "--quiet"], tiny


def test_the_flag_sets_it_a_bad_value_names_it_and_a_resume_keeps_it(tmp_path, capsys):
    argv, tiny = train_argv(epochs=1)
    assert main([*argv, "--policy-average", "1", "--show-config"]) == 2
    assert "policy_average must be in [0, 1), got 1.0" in capsys.readouterr().err
    out = tmp_path / "run"
    assert main([*argv, *tiny, "--policy-average", "0.8", "--out", str(out)]) == 0
    capsys.readouterr()
    assert json.loads((out / "config.json").read_text())["policy_average"] == 0.8
    saved = torch.load(out / "policy_latest.pt", map_location="cpu", weights_only=True)
    assert set(saved["policy"]) == {"normalizer", "actor", "actor_average"}
    resume = ["train", "--resume", str(out), "--epochs", "2", "--quiet"]
    for value in ("0", "0.9"):
        assert main([*resume, "--policy-average", value]) == 2
        err = capsys.readouterr().err
        assert "--policy-average cannot change when resuming a run" in err
        assert f"policy_average 0.8, the flags ask for {float(value)}" in err
    assert main([*resume, "--policy-average", "0.8"]) == 0, capsys.readouterr().err
