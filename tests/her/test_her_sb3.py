"""goalenvs.her.sb3.HerReplayBuffer under stable-baselines3's off-policy algorithms."""

from __future__ import annotations

import functools
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from goalenvs.core import GoalEnv

pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")

from stable_baselines3 import SAC  # noqa: E402
from stable_baselines3 import HerReplayBuffer as SB3HerReplayBuffer  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import VecNormalize  # noqa: E402

from goalenvs.her.sb3 import HerReplayBuffer  # noqa: E402
from tests.test_sb3_learning import _success_rate  # noqa: E402

torch.set_num_threads(1)


class PointGoalEnv(GoalEnv):
    """A 2D point that moves by 0.1 * action toward a goal in [-1, 1]^2 (reward -1 until
    within 0.1, then 0): small and fast for the adapter's plumbing tests. ``crash_penalty``
    adds an info-borne penalty (left half-plane), to exercise info_keys."""

    def __init__(self, crash_penalty: float = 0.0, discrete: bool = False) -> None:
        box = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Dict(observation=box, achieved_goal=box, desired_goal=box)
        self.discrete, self.crash_penalty = discrete, crash_penalty
        self.action_space = spaces.Discrete(4) if discrete else spaces.Box(-1, 1, (2,), np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        pos, goal = self.pos.copy(), self.goal.copy()
        return {"observation": pos, "achieved_goal": pos.copy(), "desired_goal": goal}

    def _info(self) -> dict[str, object]:
        near = bool(np.linalg.norm(self.pos - self.goal) < 0.1)
        return {"is_success": near, "crashed": bool(self.pos[0] < 0)}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self._obs(), self._info()

    def step(self, action: np.ndarray) -> tuple:
        if self.discrete:
            action = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]][int(action)], np.float32)
        move = 0.1 * np.clip(np.asarray(action, np.float32), -1, 1)
        self.pos = np.clip(self.pos + move, -1, 1).astype(np.float32)
        obs, info = self._obs(), self._info()
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
        return obs, reward, False, False, info

    def compute_reward(self, achieved_goal, desired_goal, info):
        far = np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1) >= 0.1
        reward = -far.astype(np.float32)
        if self.crash_penalty:
            from goalenvs.core import info_values

            crashed = info_values(info, "crashed", reward.shape, False, bool)
            reward = reward - self.crash_penalty * crashed
        return reward

    def compute_terminated(self, achieved_goal, desired_goal, info):
        return np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1) < 0.1


def make_env(n_envs: int = 1, seed: int = 0, **kwargs: object):
    return make_vec_env(
        lambda: gym.wrappers.TimeLimit(PointGoalEnv(**kwargs), 50), n_envs=n_envs, seed=seed
    )


def collect(venv, buffers: list, steps: int, seed: int = 0) -> None:
    """Steps a random policy and adds every step to all buffers, as SB3 would."""
    rng = np.random.default_rng(seed)
    obs = venv.reset()
    for _ in range(steps):
        if isinstance(venv.action_space, spaces.Discrete):
            action = rng.integers(0, venv.action_space.n, venv.num_envs)
        else:
            action = rng.uniform(-1, 1, (venv.num_envs, 2)).astype(np.float32)
        new_obs, reward, done, infos = venv.step(action)
        next_obs = {k: v.copy() for k, v in new_obs.items()}
        for i, d in enumerate(done):
            if d:
                for key in next_obs:
                    next_obs[key][i] = infos[i]["terminal_observation"][key]
        for buffer in buffers:
            buffer.add(obs, next_obs, action, reward, done, infos)
        obs = new_obs


def test_the_adapter_takes_a_mix_and_refuses_what_it_cannot_use() -> None:
    from stable_baselines3.common.vec_env import DummyVecEnv

    from goalenvs.her import GoalMix
    from tests.checker.broken_envs import ToyReach

    mix = {"future": 0.4, "desired": 0.4, "original": 0.2}
    venv = DummyVecEnv([ToyReach])
    venv.seed(0)
    buffer = HerReplayBuffer(
        2000, venv.observation_space, venv.action_space, venv, device="cpu",
        n_sampled_goal=4,  # SB3's usual arguments, left at their defaults beside the mix
        goal_selection_strategy="future", goal_mix=mix, goal_mix_warmup=40, seed=0,
    )  # fmt: skip
    assert buffer.core.goal_mix == GoalMix(**mix) and buffer.core.goal_mix_warmup == 40
    collect(venv, [buffer], 300)
    batch = buffer.sample(4000)
    desired = batch.observations["desired_goal"].numpy()
    next_achieved = batch.next_observations["achieved_goal"].numpy()
    expected = venv.envs[0].unwrapped.compute_reward(next_achieved, desired, None)
    np.testing.assert_array_equal(batch.rewards.numpy()[:, 0], expected)
    for bad, message in [
        ({"goal_mix": mix, "n_sampled_goal": 2}, "replaces goal_selection_strategy"),
        ({"prioritized": True}, r"^prioritized=True is not supported under stable-baselines3"),
        ({"n_step": 3}, r"^n_step=3 is not supported under stable-baselines3"),
        ({"optimize_memory_usage": True}, r"^optimize_memory_usage=True is not supported"),
    ]:
        with pytest.raises(ValueError, match=message):
            HerReplayBuffer(2000, venv.observation_space, venv.action_space, venv, **bad)
    broken = DummyVecEnv([functools.partial(ToyReach, defect="not_vectorized")])
    broken.seed(0)
    buffer = HerReplayBuffer(2000, broken.observation_space, broken.action_space, broken, seed=0)
    collect(broken, [buffer], 100)
    with pytest.raises(
        ValueError,
        match=r"^ToyReach\.compute_reward returned shape \(\) for a batch of 32 goal pairs",
    ):
        buffer.sample(32)


@pytest.mark.parametrize(
    ("strategy", "discrete"),
    [("future", False), ("future", True), ("final", False), ("episode", True)],
)
def test_adapter_batches_have_sb3_shapes_goals_of_the_right_steps_and_relabeled_rewards(
    strategy: str, discrete: bool
) -> None:
    from stable_baselines3.common.utils import get_device

    venv = make_env(2, discrete=discrete)
    args = (2000, venv.observation_space, venv.action_space, venv)
    ours = HerReplayBuffer(*args, n_envs=2, goal_selection_strategy=strategy, seed=3)
    theirs = SB3HerReplayBuffer(*args, n_envs=2)
    collect(venv, [ours, theirs], 130)  # two complete episodes per env, a third begun
    assert ours.size() == 200
    a, b = ours.sample(512), theirs.sample(512)
    for key in a.observations:
        assert a.observations[key].shape == b.observations[key].shape
        assert a.observations[key].dtype == b.observations[key].dtype
        assert a.observations[key].device == b.observations[key].device  # both "auto"
    for name in ("actions", "rewards", "dones"):
        assert getattr(a, name).shape == getattr(b, name).shape, name
        assert getattr(a, name).dtype == getattr(b, name).dtype, name
    desired = a.observations["desired_goal"].cpu().numpy()
    next_achieved = a.next_observations["achieved_goal"].cpu().numpy()
    expected = venv.envs[0].unwrapped.compute_reward(next_achieved, desired, {})
    np.testing.assert_array_equal(a.rewards.cpu().numpy()[:, 0], expected)
    assert not a.dones.any()  # time-limit truncations bootstrap
    # Relabeled with the next achieved goal of a step the strategy allows.
    stored_desired = ours.observations["desired_goal"].reshape(-1, 2)
    allowed = ours.next_observations["achieved_goal"]
    allowed = allowed[ours.dones == 1] if strategy == "final" else allowed.reshape(-1, 2)
    original = (desired[:, None] == stored_desired[None]).all(-1).any(1)
    relabeled = (desired[:, None] == allowed[None]).all(-1).any(1)
    assert (original | relabeled).all()
    assert 0.7 < relabeled.mean() < 0.9  # k = 4: relabeled with probability 0.8
    next_desired = a.next_observations["desired_goal"].cpu().numpy()
    np.testing.assert_array_equal(next_desired, desired)
    # SB3's algorithms may keep a batch while sampling the next (and its buffer hands out
    # fresh tensors): no tensor of ours may share memory with arrays the buffer reuses.
    tensors = lambda x: [*x.observations.values(), x.actions, x.rewards, x.dones]  # noqa: E731
    kept = [t.clone() for t in tensors(a)]
    for _ in range(3):
        ours.sample(64)
    assert all(torch.equal(x, y) for x, y in zip(kept, tensors(a), strict=True))
    # The device is "auto" as SB3 resolves it (CUDA where there is one), unless given.
    assert ours.device == get_device("auto")
    assert HerReplayBuffer(*args, device="cpu").device == torch.device("cpu")


def test_adapter_sb3_strategy_enum_info_keys_and_vecnormalize() -> None:
    from stable_baselines3.her.goal_selection_strategy import GoalSelectionStrategy

    venv = VecNormalize(make_env(1, crash_penalty=5.0), norm_reward=False)
    buffer = HerReplayBuffer(
        500, venv.observation_space, venv.action_space, venv,
        goal_selection_strategy=GoalSelectionStrategy.FINAL, copy_info_dict=True, seed=1,
    )  # fmt: skip
    assert buffer.core.goal_selection_strategy.value == "final"
    collect(venv.venv, [buffer], 250)
    assert buffer.core.info_keys == ("is_success", "crashed")  # inferred numeric keys
    raw = buffer.sample(400)
    next_achieved = raw.next_observations["achieved_goal"].cpu().numpy()
    desired = raw.observations["desired_goal"].cpu().numpy()
    far = np.linalg.norm(next_achieved - desired, axis=1) >= 0.1
    crashed = next_achieved[:, 0] < 0  # the stored info of the step
    assert crashed.any() and not crashed.all()
    np.testing.assert_array_equal(raw.rewards.cpu().numpy()[:, 0], -1.0 * far - 5.0 * crashed)
    venv.obs_rms["observation"].mean[:] = 0.5
    normalized = buffer.sample(200, env=venv)
    assert normalized.observations["observation"].abs().max() <= venv.clip_obs


@pytest.mark.slow
def test_sac_learns_point_reach_with_the_adapter() -> None:
    # 5000 steps, one gradient step each (about 35 s on an idle core). Success over 50
    # episodes (benchmarks/sb3_her.py sac), seeds 0-4, on the one buffer (ebf41c5, Intel
    # Xeon, a FetchPickAndPlace run beside it): goalenvs' adapter 0.94 0.92 0.94 0.96 0.98,
    # SB3's buffer 0.96 0.94 0.96 0.92 0.94 (on the two buffers before it: 0.94 0.86 0.92
    # 0.96 0.90). The line keeps a margin of 0.16 below the lowest of either; whether both
    # buffers learn equally well is the benchmark's comparison, not this test's.
    import goalenvs  # noqa: F401  (registers goalenvs/PointReach-v0)

    venv = make_vec_env("goalenvs/PointReach-v0", n_envs=1, seed=1)
    model = SAC(
        "MultiInputPolicy", venv, replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        learning_starts=300, batch_size=128, gamma=0.95, learning_rate=1e-3,
        policy_kwargs={"net_arch": [64, 64]}, device="cpu", seed=1,
    )  # fmt: skip
    model.learn(5000)
    assert _success_rate(model, "goalenvs/PointReach-v0", 50) >= 0.7


# ------------------------------------------------------------------ SB3's public arrays
# What stable-baselines3's own tests/test_her.py checks (test_save_load_replay_buffer,
# test_truncate_last_trajectory, test_goal_selection_strategy, several envs), as our own
# tests: tests/test_sb3_suite.py runs SB3's file itself, as setup extracts it from the
# source distribution.

PUBLIC = ("actions", "rewards", "dones", "timeouts", "ep_start", "ep_length")


def feed_both(
    ours: HerReplayBuffer, theirs: SB3HerReplayBuffer, steps: int, seed: int, end_p: float
) -> None:
    """Adds the same random steps to both buffers; each env's episodes end at random."""
    rng = np.random.default_rng(seed)
    n = ours.n_envs
    obs = {k: rng.uniform(-1, 1, (n, 2)).astype(np.float32) for k in ours.observation_space}
    for _ in range(steps):
        next_obs = {k: rng.uniform(-1, 1, (n, 2)).astype(np.float32) for k in obs}
        action = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
        reward = rng.uniform(-1, 0, n).astype(np.float32)
        done = rng.random(n) < end_p
        timeout = done & (rng.random(n) < 0.5)
        infos = [
            {"TimeLimit.truncated": bool(t)} if d else {}
            for d, t in zip(done, timeout, strict=True)
        ]
        for buffer in (ours, theirs):
            buffer.add(obs, next_obs, action, reward, done, infos)
        obs = {
            k: np.where(done[:, None], rng.uniform(-1, 1, (n, 2)), v).astype(np.float32)
            for k, v in next_obs.items()
        }


def assert_public_arrays_equal(ours: HerReplayBuffer, theirs: SB3HerReplayBuffer) -> int:
    """Every public array of ours equals SB3's where our ring still holds the transition
    (and reads zeros elsewhere); returns how many (position, env) pairs it holds."""
    assert (ours.pos, ours.full) == (theirs.pos, theirs.full)
    np.testing.assert_array_equal(ours._current_ep_start, theirs._current_ep_start)
    held = ours._cache()["held"]
    for name in ("observations", "next_observations"):
        for key in theirs.observations:
            mine, sb3 = getattr(ours, name)[key], getattr(theirs, name)[key]
            assert mine.shape == sb3.shape and mine.dtype == sb3.dtype, (name, key)
            np.testing.assert_array_equal(mine[held], sb3[held], err_msg=f"{name}[{key}]")
            assert not mine[~held].any(), f"{name}[{key}] outside what is held"
    for name in PUBLIC:
        mine, sb3 = getattr(ours, name), getattr(theirs, name)
        assert mine.shape == sb3.shape and mine.dtype == sb3.dtype, name
        np.testing.assert_array_equal(mine[held], sb3[held], err_msg=name)
        assert not mine[~held].any(), name
    return int(held.sum())


@pytest.mark.parametrize("n_envs", [1, 2, 3])
@pytest.mark.parametrize("handle_timeout_termination", [True, False])
def test_public_arrays_are_sb3s_for_the_same_steps_and_truncation(
    n_envs: int, handle_timeout_termination: bool
) -> None:
    env = PointGoalEnv()
    args = (60 * n_envs, env.observation_space, env.action_space, None)
    kwargs = {"n_envs": n_envs, "handle_timeout_termination": handle_timeout_termination}
    ours = HerReplayBuffer(*args, device="cpu", **kwargs)
    theirs = SB3HerReplayBuffer(*args, device="cpu", **kwargs)
    assert ours.buffer_size == theirs.buffer_size == 60
    feed_both(ours, theirs, 37, seed=n_envs, end_p=0.1)  # not wrapped: everything is held
    assert assert_public_arrays_equal(ours, theirs) == 37 * n_envs
    # Read-only copies, cached until the data changes (the comparisons with SB3's arrays
    # after the truncation and the adds below read them rebuilt).
    observations, dones = ours.observations, ours.dones
    assert ours.observations is observations and ours.dones is dones
    for array in (dones, observations["observation"]):
        with pytest.raises(ValueError, match="read-only"):
            array[0, 0] = 1.0
    for name in ("observations", "next_observations", *PUBLIC):
        with pytest.raises(AttributeError, match=f"{name} of the HER buffer is a read-only"):
            setattr(ours, name, None)
        assert getattr(HerReplayBuffer, name).__doc__  # documented, as a property is
    assert ours.observations is observations  # a refused assignment changes nothing

    # truncate_last_trajectory as SB3's test checks it: the open episodes end at pos - 1,
    # with done (and timeout under handle_timeout_termination); nothing else changes.
    pos = ours.pos
    open_envs = np.flatnonzero(ours._current_ep_start != pos)
    assert open_envs.size  # end_p = 0.1: some episode is open on these seeds
    before = {name: getattr(ours, name) for name in (*PUBLIC, "observations")}
    with pytest.warns(UserWarning, match="will be truncated"):
        ours.truncate_last_trajectory()
    with pytest.warns(UserWarning, match="will be truncated"):
        theirs.truncate_last_trajectory()
    assert (ours._current_ep_start == pos).all() and ours.dones is not dones
    assert (ours.dones[pos - 1] == 1).all()
    assert (ours.timeouts[pos - 1, open_envs] == handle_timeout_termination).all()
    assert (ours.ep_length[pos - 1] != 0).all()
    for key, array in before["observations"].items():
        np.testing.assert_array_equal(array, ours.observations[key])
    for name in ("actions", "rewards"):
        np.testing.assert_array_equal(before[name], getattr(ours, name))
    np.testing.assert_array_equal(before["dones"][: pos - 1], ours.dones[: pos - 1])
    assert_public_arrays_equal(ours, theirs)

    # Past the ring's end: both rings hold 60 transitions per env, but ours retires an
    # episode whole once its first one is overwritten, so those positions read zeros; the
    # rest is SB3's.
    feed_both(ours, theirs, 150, seed=10 + n_envs, end_p=0.15)
    assert ours.full and theirs.full
    held = assert_public_arrays_equal(ours, theirs)
    assert held >= 0.6 * 60 * n_envs


@pytest.mark.parametrize("truncate", [False, True])
@pytest.mark.parametrize("n_envs", [1, 2])
def test_save_load_replay_buffer_keeps_every_array(
    tmp_path: Path, n_envs: int, truncate: bool
) -> None:
    import copy
    import warnings

    venv = make_env(n_envs)
    model = SAC(
        "MultiInputPolicy", venv, replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": 2, "goal_selection_strategy": "future"},
        learning_starts=100, gradient_steps=1, train_freq=10, buffer_size=20_000,
        policy_kwargs={"net_arch": [16]}, device="cpu", seed=0,
    )  # fmt: skip
    model.learn(130)  # 130 or 70 steps per env: every env has an episode open at the save
    old = copy.deepcopy(model.replay_buffer)
    model.save_replay_buffer(tmp_path / "buffer.pkl")
    del model.replay_buffer
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.load_replay_buffer(tmp_path / "buffer.pkl", truncate_last_traj=truncate)
    truncated = [w for w in caught if "will be truncated" in str(w.message)]
    assert len(truncated) == int(truncate)
    new = model.replay_buffer
    assert new.pos == old.pos and new.env is model.env
    pos = new.pos
    for key in old.observations:
        np.testing.assert_array_equal(old.observations[key], new.observations[key])
        np.testing.assert_array_equal(old.next_observations[key], new.next_observations[key])
    for name in ("actions", "rewards"):
        np.testing.assert_array_equal(getattr(old, name), getattr(new, name))
    for name in ("dones", "timeouts", "ep_start"):
        np.testing.assert_array_equal(getattr(old, name)[: pos - 1], getattr(new, name)[: pos - 1])
    if truncate:
        assert (new.dones[pos - 1] == 1).all() and (new.ep_length[pos - 1] > 0).all()
        # The cut episodes (pos % 50 steps each: episodes of 50 from position 0) became
        # sampleable.
        assert new.size() == old.size() + n_envs * (pos % 50)
    else:
        np.testing.assert_array_equal(old.dones, new.dones)
        np.testing.assert_array_equal(old.ep_length, new.ep_length)
        assert new.size() == old.size()
    model.learn(60, reset_num_timesteps=truncate)  # training goes on from the loaded buffer
    assert new.pos == pos + 60 // n_envs


def feed_seeded_episodes(buffer: HerReplayBuffer) -> None:
    """27 steps of seeded random values into a 2-env adapter of PointReach's spaces, as
    stable-baselines3 adds them: episodes of 4-9 steps, one in progress per env at the
    end. tests/her/data/sb3_adapter_148f048.pkl is this, fed and pickled by goalenvs
    148f048 (whose buffer kept an observation once, one row more per episode)."""
    space = buffer.observation_space.spaces
    rng = np.random.default_rng(7)
    lengths = [[5, 4, 7, 6, 9], [6, 7, 4, 5, 8]]
    left = [lengths[0].pop(0), lengths[1].pop(0)]
    obs = {k: rng.uniform(-1, 1, (2, *s.shape)).astype(np.float32) for k, s in space.items()}
    for _ in range(27):
        nxt = {k: rng.uniform(-1, 1, (2, *s.shape)).astype(np.float32) for k, s in space.items()}
        left = [n - 1 for n in left]
        done = np.array([n == 0 for n in left])
        infos = [{"TimeLimit.truncated": bool(d)} for d in done]
        action = rng.uniform(-1, 1, (2, 2)).astype(np.float32)
        reward = rng.uniform(-1, 0, 2).astype(np.float32)
        buffer.add(obs, nxt, action, reward, done, infos)
        for e in range(2):
            if done[e]:
                left[e] = lengths[e].pop(0)
                for k in nxt:
                    nxt[k][e] = rng.uniform(-1, 1, nxt[k][e].shape)
        obs = nxt


def _pickled_and_fed(name: str) -> tuple:
    """PointReach, the adapter pickled in tests/her/data/``name`` and today's adapter of
    the same settings fed :func:`feed_seeded_episodes`'s steps, as the pickle's was."""
    import pickle

    env = gym.make("goalenvs/PointReach-v0")
    with open(Path(__file__).parent / "data" / name, "rb") as f:
        loaded = pickle.load(f)
    fresh = HerReplayBuffer(
        40, env.observation_space, env.action_space, env, device="cpu", n_envs=2,
        n_sampled_goal=2, seed=3,
    )  # fmt: skip
    feed_seeded_episodes(fresh)
    return env, loaded, fresh


def test_a_buffer_pickled_by_goalenvs_148f048_holds_what_was_written() -> None:
    # Every transition the old buffer still held, the two episodes in progress included
    # (the old layout kept their rows apart from the complete episodes'), reads back as
    # today's buffer fed the same steps holds it; the old one's smaller ring had retired
    # one more episode of env 0.
    env, loaded, fresh = _pickled_and_fed("sb3_adapter_148f048.pkl")
    old, new = loaded.core, fresh.core
    assert (old.n_transitions, old.episodes_in_progress, old.steps_added) == (15, 2, 27)
    assert old.counters["sampleable_from"].tolist() == [16, 13]
    for name in ("current_start", "sampleable_to", "newest_start"):
        assert old.counters[name].tolist() == new.counters[name].tolist(), name
    rows = new.rows_per_env
    for e in range(2):
        held = np.arange(int(old.counters["sampleable_from"][e]), 27) % rows
        for name, values in new.fields.items():
            if name != "episode_end":
                np.testing.assert_array_equal(
                    old.fields[name][held, e], values[held, e], err_msg=f"env {e} {name}"
                )
        starts = np.unique(new.fields["episode_start"][held[:-5], e]) % rows
        np.testing.assert_array_equal(
            old.fields["episode_end"][starts, e], new.fields["episode_end"][starts, e]
        )
    # It goes on: the episodes in progress end as the next steps come.
    loaded.set_env(env)
    feed_seeded_episodes(loaded)
    assert loaded.core.episodes_in_progress == 2 and loaded.core.steps_added == 54
    assert loaded.sample(8).rewards.shape == (8, 1)


def test_an_adapter_pickled_by_goalenvs_1a3bdcd_is_todays_fed_the_same_steps() -> None:
    # goalenvs 1a3bdcd kept the flags and episode starts in arrays of their own beside the
    # float32 records; its pickle reads back into today's records, episodes in progress
    # included, and samples what today's buffer fed the same steps samples.
    env, loaded, fresh = _pickled_and_fed("sb3_adapter_1a3bdcd.pkl")
    old, new = loaded.core.state(), fresh.core.state()
    assert loaded.core.episodes_in_progress == 2 and old.steps_added == new.steps_added == 27
    assert old.fields.keys() == new.fields.keys()
    for name, value in new.fields.items():
        np.testing.assert_array_equal(old.fields[name], value, err_msg=name)
    for name, value in new.counters.items():
        np.testing.assert_array_equal(old.counters[name], value, err_msg=name)
    loaded.set_env(env)
    for _ in range(3):
        a, b = loaded.sample(8), fresh.sample(8)
        for key in a.observations:
            torch.testing.assert_close(a.observations[key], b.observations[key])
        torch.testing.assert_close(a.rewards, b.rewards)
        torch.testing.assert_close(a.dones, b.dones)


def test_a_buffer_pickled_by_goalenvs_0_1_0_loads_and_samples_as_it_did() -> None:
    # model.save_replay_buffer pickles the adapter; this file was pickled by goalenvs
    # 0.1.0 (2 envs, 27 steps of random values, one episode in progress per env), and the
    # digests are of the batches that code drew from it, with this reward function.
    import hashlib
    import pickle

    def reward(achieved_goal, desired_goal, info):
        far = np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1) >= 0.5
        return -far.astype(np.float32)

    def digest(batch) -> str:
        sides = (batch.observations, batch.next_observations)
        values = [*(side[key] for side in sides for key in sorted(side)), batch.actions,
                  batch.rewards, batch.dones, batch.indices]  # fmt: skip
        data = b"".join(np.ascontiguousarray(value).tobytes() for value in values)
        return hashlib.sha256(data).hexdigest()[:16]

    path = Path(__file__).parent / "data" / "sb3_adapter_0.1.0.pkl"
    with open(path, "rb") as f:
        buffer = pickle.load(f)
    assert isinstance(buffer, HerReplayBuffer)
    core = buffer.core
    assert core.n_transitions == 17 and core.episodes_in_progress == 2
    assert core.goal_selection_strategy.value == "future" and core.n_sampled_goal == 2
    core.compute_reward = reward
    # Read into today's layout, each transition's next observation is the observation of
    # the one after it in its episode (the old layout stored it once, in the next row),
    # the episodes in progress included.
    f, c, rows = core.fields, core.counters, core.rows_per_env
    for env in range(core.n_envs):
        for k in range(int(c["sampleable_from"][env]), core.steps_added - 1):
            if f["episode_start"][(k + 1) % rows, env] != f["episode_start"][k % rows, env]:
                continue
            for key in core.observation_space.spaces:
                now, after = (
                    f[f"next_obs/{key}"][k % rows, env],
                    f[f"obs/{key}"][(k + 1) % rows, env],
                )
                np.testing.assert_array_equal(now, after, err_msg=f"env {env} step {k} {key}")
    # The draws of today's sampling path from it (the 0.1.0 code's draws were others).
    digests = [digest(core.sample(16)) for _ in range(3)]
    assert digests == ["5cf2c5bc16821ad1", "38d6b4e1b6ac24ce", "ff7884b163a5ed88"]
