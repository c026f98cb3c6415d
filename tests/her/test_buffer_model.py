"""The one HER buffer against a slow reference model, on numpy and torch.

The model keeps every episode every env wrote and decides which ones the buffer holds:
each env's ring keeps its last ``rows`` transitions, and an episode leaves whole when its
first row is overwritten (it is intact while ``start >= adds - rows``). Every value written
names its origin: observations, achieved goals, actions and the ``tag`` info are ``(env,
episode, step)``, the desired goal is ``(-1, env, episode)``, the stored reward a function
of the three. A batch is checked field by field against the model. The other buffer test
files of this set (prioritized, goal motion, n-step) reuse this model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from goalenvs.her import HerBatch, HerReplayBuffer
from goalenvs.her.buffer import DeviceHerReplayBuffer

BIG = 1e6
SPACE = spaces.Dict(
    observation=spaces.Box(-BIG, BIG, (3,), np.float32),
    achieved_goal=spaces.Box(-BIG, BIG, (3,), np.float32),
    desired_goal=spaces.Box(-BIG, BIG, (3,), np.float32),
)
ACTIONS = spaces.Box(-BIG, BIG, (3,), np.float32)
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
#: numpy (device None), torch on the CPU, torch on CUDA where there is one.
DEVICES = [None, "cpu", pytest.param("cuda", marks=CUDA)]
# Each mix: (the buffer's settings, the sources its relabeled goals may come from).
MIXES = [
    ({"goal_selection_strategy": "future"}, {"future"}),
    ({"goal_selection_strategy": "final", "n_sampled_goal": 1}, {"final"}),
    ({"goal_selection_strategy": "episode", "n_sampled_goal": 2}, {"episode"}),
    ({"goal_selection_strategy": "random"}, {"achieved"}),
    ({"n_sampled_goal": 0}, set()),
    ({"goal_mix": "future=0.3,final=0.1,episode=0.1,achieved=0.2,desired=0.2,original=0.1"},
     {"future", "final", "episode", "achieved", "desired"}),
]  # fmt: skip


def to_numpy(value: Any) -> np.ndarray:
    return value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def goal_reward(achieved_goal: Any, desired_goal: Any, info: Any = None) -> Any:
    """Differs for every (achieved, desired) pair of tags (numpy or torch)."""
    a, d = achieved_goal, desired_goal
    return sum(
        w * a[..., k] - v * d[..., k] for k, (w, v) in enumerate([(1, 3), (10, 7), (100, 11)])
    )


def reached(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
    return (achieved_goal == desired_goal).all(-1)


def stored_reward(env: Any, episode: Any, step: Any) -> np.ndarray:
    """What add() is given: never a goal_reward value (those are integers)."""
    return np.asarray(
        0.25 + env + 100.0 * np.asarray(episode) + 0.001 * np.asarray(step), np.float32
    )


class Recorder:
    """A compute_reward that keeps every call's arguments, as numpy."""

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]] = []

    def __call__(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        info_np = {k: to_numpy(v) for k, v in info.items()}
        self.calls.append((to_numpy(achieved_goal), to_numpy(desired_goal), info_np))
        return goal_reward(achieved_goal, desired_goal)


def make(device: Any, buffer_size: int, compute_reward: Any = goal_reward, **kwargs: Any) -> Any:
    """The numpy face (device None) or the torch face on ``device``."""
    if device is None:
        return HerReplayBuffer(buffer_size, SPACE, ACTIONS, compute_reward, **kwargs)
    return DeviceHerReplayBuffer(
        buffer_size, SPACE, ACTIONS, compute_reward, device=device, **kwargs
    )


@dataclass
class Episode:
    env: int
    number: int  # per env
    start: int  # the counter (add number) of its first transition
    length: int = 0
    terminated: bool = False
    truncated: bool = False
    complete: bool = False


class Model:
    """Every episode of every env; env e runs ``plans[e]`` (length, how it ends), cycled."""

    def __init__(self, n_envs: int, rows: int, plans: list[list[tuple[int, str]]]) -> None:
        self.n, self.rows, self.plans, self.t = n_envs, rows, plans, 0
        self.episodes: list[list[Episode]] = [[] for _ in range(n_envs)]

    def current(self, e: int) -> Episode:
        eps = self.episodes[e]
        if not eps or eps[-1].complete:
            eps.append(Episode(e, len(eps), self.t))
        return eps[-1]

    def overflowing(self) -> int | None:
        """The env whose episode in progress already holds ``rows`` transitions: the next
        add would overwrite its first row (an error)."""
        for eps in self.episodes:
            if eps and not eps[-1].complete and eps[-1].length >= self.rows:
                return eps[-1].env
        return None

    def step(self, infos: str = "dict") -> tuple[Any, ...]:
        """The arguments of the next add(), the model advanced past it."""
        n = self.n
        tag, goal = np.zeros((n, 3), np.float32), np.zeros((n, 3), np.float32)
        terminated, truncated = np.zeros(n, bool), np.zeros(n, bool)
        for e in range(n):
            ep = self.current(e)
            tag[e], goal[e] = (e, ep.number, ep.length), (-1, e, ep.number)
            ep.length += 1
            length, end = self.plans[e][ep.number % len(self.plans[e])]
            if ep.length >= length:
                ep.terminated, ep.truncated = end in ("terminated", "both"), end != "terminated"
                terminated[e], truncated[e], ep.complete = ep.terminated, ep.truncated, True
        self.t += 1
        nxt = tag + np.float32([0, 0, 1])
        odd = tag[:, 2].astype(int) % 2 == 1
        info: Any = {"tag": tag, "odd": odd, "_odd": ~odd}
        if infos == "list":
            info = [{"tag": tag[e], "odd": bool(odd[e]), "other": "x"} for e in range(n)]
        return (
            {"observation": tag, "achieved_goal": tag.copy(), "desired_goal": goal},
            {"observation": nxt, "achieved_goal": nxt.copy(), "desired_goal": goal.copy()},
            tag.copy(), stored_reward(tag[:, 0], tag[:, 1], tag[:, 2]), terminated, truncated, info,
        )  # fmt: skip

    def truncate(self) -> None:
        for eps in self.episodes:
            if eps and not eps[-1].complete:
                eps[-1].truncated = eps[-1].complete = True

    def live(self) -> dict[tuple[int, int], Episode]:
        """The complete episodes whose first row no add has overwritten."""
        return {
            (ep.env, ep.number): ep
            for eps in self.episodes
            for ep in eps
            if ep.complete and ep.start >= self.t - self.rows
        }

    def in_progress(self) -> int:
        return sum(1 for eps in self.episodes if eps and not eps[-1].complete)


def on(buffer: Any, value: Any) -> Any:
    """``value`` (arrays, dicts of arrays) as the buffer's own arrays."""
    if isinstance(value, dict):
        return {k: on(buffer, v) for k, v in value.items()}
    if buffer.device is None or not isinstance(value, np.ndarray):
        return value
    return torch.as_tensor(value, device=buffer.device)


def feed(buffers: list[Any], model: Model, steps: int = 1, infos: str = "dict") -> None:
    for _ in range(steps):
        args = model.step(infos)
        for buffer in buffers:
            buffer.add(*[on(buffer, a) for a in args])


def batch_arrays(batch: HerBatch) -> dict[str, np.ndarray]:
    out = {f"obs/{k}": to_numpy(v) for k, v in batch.observations.items()}
    out.update({f"next/{k}": to_numpy(v) for k, v in batch.next_observations.items()})
    for name in ("actions", "rewards", "dones", "weights", "indices", "discounts"):
        if getattr(batch, name) is not None:
            out[name] = to_numpy(getattr(batch, name))
    return out


def check_batch(
    batch: HerBatch,
    model: Model,
    sources: set[str],
    recorder: Recorder,
    handle_timeout: bool = True,
    recompute: bool = False,
) -> np.ndarray:
    """Every provenance rule on one batch; returns the relabeled mask."""
    live, b = model.live(), batch_arrays(batch)
    tags = b["obs/observation"].astype(np.int64)
    for e, m, i in tags:
        assert (e, m) in live, f"sampled env {e} episode {m}: not complete and intact"
        assert 0 <= i < live[(e, m)].length
    for name in ("obs/achieved_goal", "actions"):
        np.testing.assert_array_equal(b[name], b["obs/observation"])
    # The next observation is the same episode's next step, also after its last one.
    np.testing.assert_array_equal(b["next/observation"], b["obs/observation"] + [0, 0, 1])
    np.testing.assert_array_equal(b["next/achieved_goal"], b["next/observation"])
    goal = b["obs/desired_goal"]
    np.testing.assert_array_equal(b["next/desired_goal"], goal)
    relabeled = (goal != np.c_[np.full(len(tags), -1), tags[:, :2]]).any(1)
    for (e, m, i), (ge, gm, gj) in zip(tags[relabeled], goal[relabeled].astype(int), strict=True):
        length = live[(e, m)].length
        if ge == -1:  # a desired goal: of another intact episode
            assert "desired" in sources and (gm, gj) in live and (gm, gj) != (e, m)
            continue
        mine = (ge, gm) == (e, m)
        allowed = {
            "future": mine and i + 1 <= gj <= length,  # next achieved goals of i..T-1
            "final": mine and gj == length,
            "episode": mine and 1 <= gj <= length,
            "achieved": (ge, gm) in live and 1 <= gj <= live[(ge, gm)].length,
        }
        assert any(allowed.get(s) for s in sources), (sources, (e, m, i), (ge, gm, gj))
    # One compute_reward call for the whole batch, with the batch's goals and the info of
    # the transition that produced next_obs.
    achieved, desired, info = recorder.calls.pop()
    assert not recorder.calls
    np.testing.assert_array_equal(achieved, b["next/achieved_goal"])
    np.testing.assert_array_equal(desired, goal)
    assert set(info) == {"tag", "odd"} and info["odd"].dtype == bool
    np.testing.assert_array_equal(info["tag"], b["obs/observation"])
    np.testing.assert_array_equal(info["odd"], tags[:, 2] % 2 == 1)
    want = np.where(relabeled, goal_reward(achieved, goal), stored_reward(*tags.T))
    np.testing.assert_array_equal(b["rewards"], want.astype(np.float32))
    assert b["rewards"].dtype == np.float32 and b["dones"].dtype == np.float32
    last = np.array([i == live[(e, m)].length - 1 for e, m, i in tags], bool)
    term = last & np.array([live[(e, m)].terminated for e, m, _ in tags], bool)
    trunc = last & np.array([live[(e, m)].truncated for e, m, _ in tags], bool)
    if recompute:
        term = np.where(relabeled, (b["next/achieved_goal"] == goal).all(1), term)
    np.testing.assert_array_equal(b["dones"], term | (trunc & (not handle_timeout)))
    np.testing.assert_array_equal(b["weights"], 1.0)
    return relabeled


def assert_same_batch(a: HerBatch, b: HerBatch) -> None:
    for (key, x), y in zip(batch_arrays(a).items(), batch_arrays(b).values(), strict=True):
        np.testing.assert_array_equal(x, y, err_msg=key)


plan_entry = st.tuples(st.integers(1, 5), st.sampled_from(["terminated", "truncated", "both"]))


@settings(max_examples=60, deadline=None)
@given(
    device=st.sampled_from([None, "cpu"]),
    n_envs=st.integers(1, 3),
    rows=st.integers(2, 14),
    mix=st.sampled_from(range(len(MIXES))),
    handle_timeout=st.booleans(),
    recompute=st.booleans(),
    plan=st.lists(plan_entry, min_size=1, max_size=10),
    lockstep=st.booleans(),
    infos=st.sampled_from(["dict", "list"]),
    # 0: truncate_last_trajectory, 1: save and load, k > 1: k - 1 add()s
    ops=st.lists(st.sampled_from([0, 1, *[2, 3, 4, 5] * 4]), min_size=5, max_size=60),
    seed=st.integers(0, 2**20),
)
def test_every_sample_matches_the_reference_model(
    device, n_envs, rows, mix, handle_timeout, recompute, plan, lockstep, infos, ops, seed,
    tmp_path_factory,
) -> None:  # fmt: skip
    torch.set_num_threads(1)
    plans = [
        plan if lockstep else plan[e % len(plan) :] + plan[: e % len(plan)] for e in range(n_envs)
    ]
    model = Model(n_envs, rows, plans)
    options, sources = MIXES[mix]
    recorder, twin_recorder = Recorder(), Recorder()
    kwargs = {
        "n_envs": n_envs, "info_keys": ("tag", "odd"), "seed": seed,
        "handle_timeout_termination": handle_timeout, **options,
        "compute_terminated": reached if recompute else None,
    }  # fmt: skip
    buffer = make(device, rows * n_envs + seed % n_envs, recorder, **kwargs)  # spare rows unused
    twin = make(device, rows * n_envs, twin_recorder, **kwargs)  # never saved and loaded
    assert buffer.rows_per_env == rows
    path = tmp_path_factory.mktemp("model") / "buffer.npz"
    for op in ops:  # every op is followed by a sample checked against the model
        if op == 0:
            model.truncate()
            buffer.truncate_last_trajectory()
            twin.truncate_last_trajectory()
        elif op == 1:  # the file holds the open episodes truncated; the live buffer goes on
            buffer.save(path)
            assert buffer.episodes_in_progress == model.in_progress()
            terminated = kwargs["compute_terminated"]
            buffer = type(buffer).load(path, recorder, compute_terminated=terminated)
            assert buffer.device == twin.device and buffer.episodes_in_progress == 0
            model.truncate()
            twin.truncate_last_trajectory()
        for _ in range(op - 1 if op > 1 else 0):
            env = model.overflowing()
            if env is not None:  # an episode longer than rows: the error that names it
                match = rf"env {env} .*no longer fits.*buffer_size={buffer.buffer_size}"
                with pytest.raises(ValueError, match=match):
                    feed([buffer], model, infos=infos)
                return
            feed([buffer, twin], model, infos=infos)
        live = model.live()
        assert buffer.n_transitions == twin.n_transitions == sum(e.length for e in live.values())
        assert buffer.episodes_in_progress == model.in_progress()
        if not live:
            with pytest.raises(RuntimeError, match="no complete episode"):
                buffer.sample(4)
        elif "desired" in sources and len(live) < 2:
            with pytest.raises(RuntimeError, match="holds a single complete episode"):
                buffer.sample(4)
        else:
            batch = buffer.sample(64)
            check_batch(batch, model, sources, recorder, handle_timeout, recompute)
            assert_same_batch(batch, twin.sample(64))
            twin_recorder.calls.clear()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strategy", ["future", "final", "episode", "random"])
def test_goals_of_an_episode_straddling_the_ring_end_are_uniform_over_their_source(
    device: Any, strategy: str
) -> None:
    """Rows 7, two envs: env 0's episode 1 (counters 4..8) sits in rows 4, 5, 6, 0, 1 and
    its episode 0 (0..3) left when add 7 overwrote row 0; env 1 keeps three episodes."""
    recorder = Recorder()
    buffer = make(device, 14, recorder, n_envs=2, n_sampled_goal=10**6, seed=7,
                  goal_selection_strategy=strategy, info_keys=("tag", "odd"))  # fmt: skip
    model = Model(2, 7, [[(4, "truncated"), (5, "terminated")], [(2, "terminated"), (1, "both")]])
    feed([buffer], model, 9)
    live = model.live()
    assert (0, 0) not in live and (0, 1) in live and buffer.n_transitions == 5 + 7
    n = 40_000
    batch = buffer.sample(n)
    check_batch(batch, model, {"achieved" if strategy == "random" else strategy}, recorder)
    tags = to_numpy(batch.observations["observation"]).astype(int)
    goals = [tuple(g) for g in to_numpy(batch.observations["desired_goal"]).astype(int)]
    for (e, m), ep in live.items():
        for i in range(ep.length):
            drawn = [g for g, t in zip(goals, tags.tolist(), strict=True) if t == [e, m, i]]
            allowed = {
                "future": {(e, m, j) for j in range(i + 1, ep.length + 1)},
                "final": {(e, m, ep.length)},
                "episode": {(e, m, j) for j in range(1, ep.length + 1)},
                "random": {(f, k, j) for (f, k), o in live.items() for j in range(1, o.length + 1)},
            }[strategy]
            assert set(drawn) <= allowed and len(drawn) > 1000
            p = 1 / len(allowed)  # uniform, within 5 standard deviations
            for g in allowed:
                assert abs(drawn.count(g) / len(drawn) - p) <= 5 * np.sqrt(p * (1 - p) / len(drawn))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n_sampled_goal", [0, 2])
def test_the_relabelled_fraction_is_k_over_k_plus_one(device: Any, n_sampled_goal: int) -> None:
    recorder = Recorder()
    buffer = make(device, 60, recorder, n_envs=2, n_sampled_goal=n_sampled_goal, seed=1,
                  info_keys=("tag", "odd"))  # fmt: skip
    model = Model(2, 30, [[(4, "truncated"), (6, "terminated")], [(3, "terminated")]])
    feed([buffer], model, 50)
    n = 20_000
    relabeled = check_batch(buffer.sample(n), model, {"future"}, recorder)
    p = n_sampled_goal / (n_sampled_goal + 1)
    assert abs(relabeled.mean() - p) <= 5 * np.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("device", DEVICES)
def test_episodes_leave_whole_and_the_longest_that_fits_is_rows(device: Any) -> None:
    recorder = Recorder()
    buffer = make(device, 12, recorder, n_envs=2, seed=0, info_keys=("tag", "odd"))
    model = Model(2, 6, [[(2, "terminated")], [(6, "truncated")]])
    feed([buffer], model, 6)  # env 0: three episodes fill its ring; env 1: one of 6 rows
    assert buffer.n_transitions == 12 and len(model.live()) == 4
    check_batch(buffer.sample(300), model, {"future"}, recorder)
    feed([buffer], model, 1)  # row 0 overwritten: env 0's first episode leaves with row 1,
    assert buffer.n_transitions == 4  # env 1's whole episode of 6 with rows 1..5
    assert set(model.live()) == {(0, 1), (0, 2)}
    check_batch(buffer.sample(300), model, {"future"}, recorder)
    one_row = make(device, 4, recorder, n_envs=2, seed=0, info_keys=("tag", "odd"),
                   handle_timeout_termination=False)  # fmt: skip
    ones = Model(2, 2, [[(1, "terminated"), (1, "truncated")], [(1, "both")]])
    for step in range(1, 5):  # each add retires the episode before the one before it
        feed([one_row], ones)
        assert one_row.n_transitions == 2 * min(step, 2)
        batch = one_row.sample(50)
        check_batch(batch, ones, {"future"}, recorder, handle_timeout=False)  # every one done
        assert set(to_numpy(batch.observations["observation"])[:, 1]) == {step - 2, step - 1} - {-1}
    too_long = make(device, 16, recorder, n_envs=2, seed=0, info_keys=("tag", "odd"))
    model = Model(2, 8, [[(3, "terminated")], [(50, "terminated")]])
    feed([too_long], model, 8)
    message = r"env 1 has reached 8 .*no longer fits.*buffer_size=16 .*use a larger buffer_size"
    with pytest.raises(ValueError, match=message):
        feed([too_long], model)


@pytest.mark.parametrize("device", DEVICES)
def test_an_info_value_is_not_silently_cast_to_the_dtype_of_the_first_add(device: Any) -> None:
    recorder = Recorder()
    buffer = make(device, 20, recorder, info_keys=("distance",), seed=0)
    model = Model(1, 20, [[(2, "truncated")]])
    for distance in (0, 0.75):  # SB3-style infos: the first value happens to be an int
        obs, nxt, action, _, terminated, truncated, _ = model.step()
        args = (obs, nxt, action, np.zeros(1, np.float32), terminated, truncated)
        buffer.add(*[on(buffer, a) for a in args], [{"distance": distance}])
    step = to_numpy(buffer.sample(64).observations["observation"])[:, 2]
    seen = recorder.calls[-1][2]["distance"]
    assert np.issubdtype(seen.dtype, np.floating) and (step == 1).any()
    np.testing.assert_array_equal(seen, np.where(step == 1, 0.75, 0.0))


@pytest.mark.parametrize("device", DEVICES)
def test_the_spaces_dtypes_are_kept_exactly(device: Any) -> None:
    """float64 observations (not packed into float32), int8 goals, Discrete actions."""
    space = spaces.Dict(
        observation=spaces.Box(-BIG, BIG, (2,), np.float64),
        achieved_goal=spaces.MultiBinary(4),
        desired_goal=spaces.MultiBinary(4),
    )

    def mismatches(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        return -(achieved_goal != desired_goal).sum(-1) * 1.0

    cls, extra = (
        (HerReplayBuffer, {}) if device is None else (DeviceHerReplayBuffer, {"device": device})
    )
    buffer = cls(30, space, spaces.Discrete(5), mismatches, n_sampled_goal=10**6, seed=0, **extra)
    bits, goal = np.eye(5, 4, -1, dtype=np.int8), np.ones((1, 4), np.int8)  # step i: bit i - 1
    for i in range(3):
        obs, nxt = ({"observation": np.array([[1 + 1e-12 * j, j]]), "desired_goal": goal,
                     "achieved_goal": bits[j : j + 1]} for j in (i, i + 1))  # fmt: skip
        args = (obs, nxt, np.array([[i + 1]]), np.zeros(1, np.float32), np.zeros(1, bool))
        buffer.add(*[on(buffer, a) for a in args], on(buffer, np.array([i == 2])))
    b = batch_arrays(buffer.sample(500))
    assert b["obs/observation"].dtype == np.float64 and b["obs/desired_goal"].dtype == np.int8
    step = b["obs/observation"][:, 1].astype(int)
    np.testing.assert_array_equal(b["obs/observation"][:, 0], 1 + 1e-12 * step)
    np.testing.assert_array_equal(b["next/observation"][:, 0], 1 + 1e-12 * (step + 1))
    np.testing.assert_array_equal(b["actions"], step + 1)
    assert b["actions"].dtype == np.int64
    # future goals: one-hot bits j in step..2, i.e. one of the next achieved goals
    goal_bit = b["obs/desired_goal"].argmax(1)
    assert (b["obs/desired_goal"].sum(1) == 1).all() and (goal_bit >= step).all()
    want = mismatches(b["next/achieved_goal"], b["obs/desired_goal"], None)
    np.testing.assert_array_equal(b["rewards"], want)
