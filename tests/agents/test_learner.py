"""The Learner: a cycle's updates, eager and on static inputs, against agent.update by hand;
on CUDA the captured graphs against the eager updates."""

from __future__ import annotations

import contextlib
import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces

from goalenvs.agents import DDPGConfig, DQNConfig, Learner, SACConfig, TD3Config
from goalenvs.agents.ddpg import DDPG
from goalenvs.agents.dqn import DQN
from goalenvs.agents.learner import EagerUpdates, StaticUpdates, graph_obstacle
from goalenvs.agents.sac import SAC
from goalenvs.agents.td3 import TD3
from goalenvs.core import goal_dict_space
from goalenvs.her import HerBatch

torch.set_num_threads(1)

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="CUDA graphs are captured on a CUDA device only")

OBS_SPACE = goal_dict_space(spaces.Box(-10, 10, (3,)), spaces.Box(-10, 10, (2,)))
BOX = spaces.Box(-2.0, 2.0, (2,))
DISCRETE = spaces.Discrete(3, start=1)
ALGOS = {
    "ddpg": (DDPG, DDPGConfig, BOX),
    "td3": (TD3, TD3Config, BOX),
    "sac": (SAC, SACConfig, BOX),
    "dqn": (DQN, DQNConfig, DISCRETE),
}


def on(device, value):
    """``value`` (an array, a dict of arrays or None) as tensors on ``device``."""
    if isinstance(value, dict):
        return {k: torch.from_numpy(v).to(device) for k, v in value.items()}
    return None if value is None else torch.from_numpy(value).to(device)


def parameters(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def changed(before: list[torch.Tensor], module: torch.nn.Module) -> bool:
    return any(not torch.equal(b, p) for b, p in zip(before, module.parameters(), strict=True))


class ReplayStub:
    """Seeded random HER batches, sampled with device=None as numpy arrays (the numpy
    buffer) or, given a ``home`` device, as tensors there (the device buffer), and with a
    device as tensors there; records the priorities it is given."""

    def __init__(
        self, action_space: spaces.Space, seed: int = 0, prioritized: bool = False, home=None
    ):
        self.home = home
        self.rng = np.random.default_rng(seed)
        self.action_space = action_space
        self.prioritized = prioritized
        self.priorities: list[tuple[np.ndarray, np.ndarray]] = []
        self.samples = 0

    def sample(self, batch_size: int, device=None) -> HerBatch:
        rng, B = self.rng, batch_size

        def observation() -> dict[str, np.ndarray]:
            return {
                key: rng.normal(size=(B, *space.shape)).astype(np.float32)
                for key, space in OBS_SPACE.spaces.items()
            }

        if isinstance(self.action_space, spaces.Discrete):
            actions = rng.integers(1, 4, B).astype(np.int64)
        else:
            actions = rng.uniform(-2, 2, (B, 2)).astype(np.float32)
        batch = HerBatch(
            observation(),
            actions,
            -(rng.random(B) < 0.7).astype(np.float32),
            observation(),
            (rng.random(B) < 0.1).astype(np.float32),
            rng.uniform(0.2, 1.0, B).astype(np.float32),
            np.arange(B, dtype=np.int64) + B * self.samples,
        )
        self.samples += 1
        device = self.home if device is None else device
        return batch if device is None else HerBatch(*(on(device, field) for field in batch))

    def update_priorities(self, indices, td_errors) -> None:
        if isinstance(indices, torch.Tensor):
            indices = indices.cpu().numpy()
        self.priorities.append((np.array(indices), td_errors.detach().cpu().numpy().copy()))


def make(algo: str, device: str = "cpu", **kwargs):
    cls, config_cls, action_space = ALGOS[algo]
    torch.manual_seed(0)
    config = config_cls(hidden_sizes=(32, 32), **{"precision": "fp32", **kwargs})
    agent = cls(OBS_SPACE, action_space, config, 0.9, seed=0).to(device)
    with torch.no_grad():  # distinct targets, so the target move is seen
        for name in [n for n in agent.training_module_names if n.endswith("_target")]:
            for p in getattr(agent, name).parameters():
                p.mul_(0.5)
    return agent, action_space


def by_hand(agent, buffer, batch_size: int, n_batches: int) -> dict[str, torch.Tensor]:
    """The cycle as the trainer ran it: agent.update per sampled batch, then the targets."""
    totals: dict[str, torch.Tensor] = {}
    for _ in range(n_batches):
        batch = buffer.sample(batch_size, device=agent.device)
        out = agent.update(batch)
        td_errors = out.pop("td_errors")
        if buffer.prioritized:
            buffer.update_priorities(batch.indices, td_errors)
        for name, value in out.items():
            totals[name] = totals[name] + value if name in totals else value
    agent.update_targets()
    return {name: total / n_batches for name, total in totals.items()}


def assert_same_state(a, b, **tolerance) -> None:
    state_a, state_b = a.state_dict(), b.state_dict()
    assert state_a.keys() == state_b.keys()
    for name, tensor in state_a.items():
        torch.testing.assert_close(state_b[name], tensor, **tolerance, msg=name)
    for name in a.optimizer_names:
        for sa, sb in zip(
            getattr(a, name).state.values(), getattr(b, name).state.values(), strict=True
        ):
            for key in ("exp_avg", "exp_avg_sq"):
                torch.testing.assert_close(sb[key], sa[key], **tolerance, msg=f"{name} {key}")


@pytest.mark.parametrize("algo", sorted(ALGOS))
@pytest.mark.parametrize("path", ["eager", "static"])
def test_a_cycle_gives_the_numbers_and_priorities_of_update_by_hand_then_one_target_move(
    algo, path
):
    reference, action_space = make(algo)
    agent, _ = make(algo)
    learner = Learner(agent, 16, graphs="auto")  # on the CPU: eager
    assert not learner.graphs and isinstance(learner.updates, EagerUpdates)
    if path == "static":
        # The static-input path a CUDA graph captures, run eagerly on the CPU.
        learner.updates = StaticUpdates(agent, capture=False)
    for cycle in range(3):
        # a prioritized buffer: each batch's TD errors set its priorities, as by hand
        expected_buffer = ReplayStub(action_space, seed=cycle, prioritized=True)
        buffer = ReplayStub(action_space, seed=cycle, prioritized=True)
        torch.manual_seed(10 + cycle)  # TD3's target noise and SAC's actions draw on it
        expected = by_hand(reference, expected_buffer, 16, 5)
        torch.manual_seed(10 + cycle)
        losses = learner.optimize(buffer, 5)
        assert set(losses) == set(agent.loss_names)
        for name, value in losses.items():
            assert value.shape == () and value.device == agent.device
            torch.testing.assert_close(value, expected[name], rtol=1e-6, atol=1e-7)
        assert_same_state(reference, agent, rtol=0, atol=0)
        assert len(buffer.priorities) == 5
        for (indices, td), (want_indices, want_td) in zip(
            buffer.priorities, expected_buffer.priorities, strict=True
        ):
            np.testing.assert_array_equal(indices, want_indices)
            np.testing.assert_array_equal(td, want_td)
        assert np.any(buffer.priorities[0][1] != buffer.priorities[1][1])  # not one static value


def test_td3_plans_its_delayed_actor_from_the_counter_across_cycles():
    agent, action_space = make("td3", policy_delay=3)
    learner = Learner(agent, 8)
    assert agent.update_options(4) == [
        {"actor_step": False},
        {"actor_step": False},
        {"actor_step": True},
        {"actor_step": False},
    ]
    actor = parameters(agent.actor)
    learner.optimize(ReplayStub(action_space), 2)
    assert not changed(actor, agent.actor)
    learner.optimize(ReplayStub(action_space), 2)  # the third critic step brings the actor's
    assert int(agent.critic_steps.count) == 4 and changed(actor, agent.actor)
    assert agent.update_options(2) == [{"actor_step": False}, {"actor_step": True}]


def test_the_loss_means_are_tensors_the_caller_owns_and_uniform_buffers_get_no_priorities():
    agent, action_space = make("ddpg")
    learner = Learner(agent, 8)
    buffer = ReplayStub(action_space, seed=1)
    first = learner.optimize(buffer, 3)
    assert buffer.samples == 3 and buffer.priorities == []
    kept = {name: value.clone() for name, value in first.items()}
    learner.optimize(ReplayStub(action_space, seed=2), 2)
    for name, value in first.items():
        assert torch.equal(value, kept[name])


def test_the_clock_times_sampling_and_updates():
    seen: list[str] = []

    @contextlib.contextmanager
    def phase(name):
        seen.append(name)
        yield

    agent, action_space = make("ddpg")
    Learner(agent, 8, clock=phase).optimize(ReplayStub(action_space, prioritized=True), 2)
    # Per batch: sample, update, priorities (charged to sampling); then the target move.
    assert seen == ["sample", "update", "sample"] * 2 + ["update"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"graphs": "yes"}, r"graphs='yes' is not valid; expected one of \['auto', 'on', 'off'\]"),
        ({"graphs": "on"}, r"graphs='on' cannot capture the updates: the agent is on cpu"),
        ({"batch_size": 0}, "batch_size"),
        ({"n_batches": 0}, "n_batches"),  # optimize's
    ],
)
def test_bad_arguments_name_themselves(kwargs, message):
    agent, action_space = make("ddpg")
    kwargs = {"batch_size": 8, "n_batches": 1, **kwargs}
    n_batches = kwargs.pop("n_batches")
    with pytest.raises(ValueError, match=message):
        Learner(agent, **kwargs).optimize(ReplayStub(action_space), n_batches)


def test_static_inputs_refuse_a_batch_of_another_shape():
    agent, action_space = make("ddpg")
    updates = StaticUpdates(agent, capture=False)
    updates.step(ReplayStub(action_space).sample(8), {})
    with pytest.raises(ValueError, match=r"shape \(4, 2\), the static input \(8, 2\)"):
        updates.step(ReplayStub(action_space).sample(4), {})


def test_an_algorithm_not_marked_graph_safe_is_not_captured():
    class EagerOnly(DDPG):
        graph_safe_update = False

    torch.manual_seed(0)
    agent = EagerOnly(OBS_SPACE, BOX, DDPGConfig(hidden_sizes=(8,)), 0.9)
    assert graph_obstacle(agent) == "EagerOnly.update is not marked graph_safe_update"
    with pytest.raises(ValueError, match=r"EagerOnly\.update is not marked graph_safe_update"):
        Learner(agent, 8, graphs="on")


def test_a_checkpoint_of_a_capturable_optimizer_steps_eagerly_on_the_cpu():
    agent, action_space = make("ddpg")
    Learner(agent, 8).optimize(ReplayStub(action_space), 1)
    state = agent.critic_optimizer.state_dict()
    for group in state["param_groups"]:
        group["capturable"] = True  # as a run with CUDA graphs saves it
    agent.critic_optimizer.load_state_dict(state)
    before = parameters(agent.critic)
    Learner(agent, 8).optimize(ReplayStub(action_space, seed=1), 1)
    assert all(not g["capturable"] for g in agent.critic_optimizer.param_groups)
    assert changed(before, agent.critic)


def test_a_failed_capture_falls_back_to_eager_updates_with_one_line(monkeypatch, caplog):
    # On the CPU a capture is made to fail as a real one fails: inside torch.cuda.graph.
    from goalenvs.agents import learner as learner_module

    @contextlib.contextmanager
    def failing_graph(*args, **kwargs):
        raise RuntimeError("operation not permitted when stream is capturing\nmore")
        yield

    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: None)
    monkeypatch.setattr(torch.cuda, "graph", failing_graph)
    monkeypatch.setattr(learner_module, "WARMUP_UPDATES", 0)
    agent, action_space = make("ddpg")
    before = parameters(agent.critic)
    learner = Learner(agent, 8, graphs="off")
    learner.updates = StaticUpdates(agent, capture=True)  # as on a CUDA device
    with caplog.at_level("WARNING", logger="goalenvs.agents.learner"):
        losses = learner.optimize(ReplayStub(action_space), 3)
        learner.optimize(ReplayStub(action_space, seed=1), 2)  # eager from then on
    assert isinstance(learner.updates, EagerUpdates) and not learner.graphs
    [line] = [r.getMessage() for r in caplog.records]  # said once
    assert "capturing the update as a CUDA graph failed (operation not permitted" in line
    assert "--cuda-graphs off" in line and "\n" not in line
    # the cycle went on: its batches were learned from and its losses are real numbers
    assert all(torch.isfinite(value) and value != 0 for value in losses.values())
    assert changed(before, agent.critic)


def filled_buffer(kind: str, device: str = "cpu"):
    """A prioritized HER buffer (numpy, or on-device on ``device``) holding the same three
    episodes of five steps."""
    from goalenvs.her import DeviceHerReplayBuffer, HerReplayBuffer

    def compute_reward(achieved_goal, desired_goal, info):
        lib = torch if isinstance(achieved_goal, torch.Tensor) else np
        distance = lib.abs(achieved_goal - desired_goal).sum(-1)
        return -(distance > 0.5).astype(np.float32) if lib is np else -(distance > 0.5).float()

    settings = dict(n_envs=1, seed=3, prioritized=True)
    cls = HerReplayBuffer if kind == "numpy" else DeviceHerReplayBuffer
    where = {} if kind == "numpy" else {"device": device}
    buffer = cls(100, OBS_SPACE, BOX, compute_reward, **settings, **where)
    rng = np.random.default_rng(0)
    for _episode in range(3):
        obs = {k: rng.normal(size=(1, *v.shape)).astype(np.float32) for k, v in OBS_SPACE.items()}
        for step in range(5):
            next_obs = {k: v + rng.normal(size=v.shape).astype(np.float32) for k, v in obs.items()}
            next_obs["desired_goal"] = obs["desired_goal"]
            fields = [obs, next_obs, rng.uniform(-2, 2, (1, 2)).astype(np.float32)]
            fields += [-np.ones(1, np.float32), np.zeros(1, bool), np.full(1, step == 4)]
            buffer.add(*(fields if kind == "numpy" else [on(device, f) for f in fields]))
            obs = next_obs
    return buffer


@pytest.mark.parametrize("kind", ["numpy", "device"])
def test_the_static_path_gives_the_eager_numbers_on_real_prioritized_buffers(kind):
    agents = []
    for static in (False, True):
        agent, _ = make("sac")
        learner = Learner(agent, 16, graphs="off")
        if static:
            learner.updates = StaticUpdates(agent, capture=False)
        buffer = filled_buffer(kind)
        torch.manual_seed(0)
        losses = [learner.optimize(buffer, 3) for _ in range(2)]
        agents.append((agent, losses))
    (eager, eager_losses), (static, static_losses) = agents
    # The priorities set after each batch steer the next draws: equal states mean each
    # batch got its own TD errors.
    assert_same_state(eager, static, rtol=0, atol=0)
    for want, got in zip(eager_losses, static_losses, strict=True):
        for name in want:
            assert torch.equal(want[name], got[name])


# --------------------------------------------------------------------------- CUDA graphs


def cuda_cycles(algo: str, graphs: str, buffer_device, cycles: int = 3, **kwargs):
    agent, action_space = make(algo, "cuda", **kwargs)
    learner = Learner(agent, 64, graphs=graphs)
    history = []
    for cycle in range(cycles):
        torch.manual_seed(cycle)
        home = "cuda" if buffer_device == "cuda" else None
        stub = ReplayStub(action_space, seed=cycle, prioritized=True, home=home)
        losses = learner.optimize(stub, 7)
        history.append(({k: float(v) for k, v in losses.items()}, stub.priorities))
    return agent, learner, history


@needs_cuda
@pytest.mark.parametrize("algo", sorted(ALGOS))
@pytest.mark.parametrize("buffer_device", ["host", "cuda"])
def test_cuda_graphs_give_the_eager_numbers(algo, buffer_device):
    # TD3's target noise is off: the graphs draw it from the same generator, but the
    # comparison should not hang on the draw order.
    kwargs = {"target_noise": 0.0} if algo == "td3" else {}
    eager, eager_learner, expected = cuda_cycles(algo, "off", buffer_device, **kwargs)
    graphed, learner, history = cuda_cycles(algo, "on", buffer_device, **kwargs)
    assert learner.graphs and not eager_learner.graphs
    # 21 updates: 3 warm-ups of each kind, then captures replayed.
    assert len(learner.updates._graphs) == (2 if algo == "td3" else 1)
    for (losses, priorities), (want, want_priorities) in zip(history, expected, strict=True):
        for name, value in losses.items():
            assert value == pytest.approx(want[name], rel=1e-4, abs=1e-6), name
        for (indices, td), (want_indices, want_td) in zip(priorities, want_priorities, strict=True):
            np.testing.assert_array_equal(indices, want_indices)
            np.testing.assert_allclose(td, want_td, rtol=1e-4, atol=1e-5)
    if algo == "sac":  # its actions are drawn: the same distribution, not the same draws
        return
    # The losses above agree to 1e-4; the weights drift further apart, since the graphs'
    # capturable Adam computes its bias correction on the device, in another order than
    # the eager Adam's host floats: after these 21 updates on an H100 the largest gap was
    # 1.1e-4 (DDPG's actor) and 1.9e-5 (TD3's critic), while the losses agreed to 6e-6.
    assert_same_state(eager, graphed, rtol=1e-3, atol=5e-4)


@needs_cuda
def test_cuda_graphs_are_captured_again_after_the_optimizer_state_is_replaced():
    agent, learner, _ = cuda_cycles("ddpg", "on", "host", cycles=2)
    graphs = dict(learner.updates._graphs)
    # A checkpoint's state is new tensors (a copy here; torch's load_state_dict keeps the
    # very tensors of a state_dict() of the same device and dtype, whose addresses do not
    # move). The old state stays alive, so the loaded one cannot take its addresses: the
    # graphs read tensors that are no longer the optimizer's, and must be captured again.
    old_state = [v for s in agent.critic_optimizer.state.values() for v in s.values()]
    agent.critic_optimizer.load_state_dict(copy.deepcopy(agent.critic_optimizer.state_dict()))
    assert old_state
    action_space = ALGOS["ddpg"][2]
    before = parameters(agent.critic)
    learner.optimize(ReplayStub(action_space, seed=9), 5)
    assert learner.updates._graphs.keys() == graphs.keys()
    assert all(learner.updates._graphs[k] is not graphs[k] for k in graphs)
    assert changed(before, agent.critic)


@needs_cuda
@pytest.mark.parametrize("kind", ["numpy", "device"])
def test_cuda_graphs_on_real_prioritized_buffers_give_the_eager_numbers(kind):
    agents = []
    for graphs in ("off", "on"):
        agent, _ = make("ddpg", "cuda")
        learner = Learner(agent, 16, graphs=graphs)
        buffer = filled_buffer(kind, "cuda")
        losses = [learner.optimize(buffer, 6) for _ in range(3)]
        agents.append((agent, losses))
    (eager, eager_losses), (graphed, graph_losses) = agents
    assert_same_state(eager, graphed, rtol=1e-4, atol=1e-5)
    for want, got in zip(eager_losses, graph_losses, strict=True):
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-6)
