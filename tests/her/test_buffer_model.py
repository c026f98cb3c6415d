"""The one HER buffer against the reference model of tests/her/model.py, on numpy and
torch: which episodes it holds as the rings wrap, where each batch value comes from, how
the draws and relabeled goals are spread, and the values it stores as given.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.her.model import (
    BIG,
    DEVICES,
    Model,
    Recorder,
    assert_same_batch,
    batch_arrays,
    check_batch,
    feed,
    make,
    on,
    reached,
    to_numpy,
)

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


plan_entry = st.tuples(st.integers(1, 5), st.sampled_from(["terminated", "truncated", "both"]))


@settings(max_examples=60, deadline=None)
@example(  # episodes of one step in rings of two rows: each add retires the oldest two
    device=None, n_envs=2, rows=2, mix=0, handle_timeout=False, recompute=False, seed=0,
    plan=[(1, "terminated"), (1, "truncated"), (1, "both")], lockstep=False, infos="dict",
    ops=[2] * 5,
)  # fmt: skip
@example(  # env 1's episode outgrows its 8 rows: the error that names it
    device="cpu", n_envs=2, rows=8, mix=0, handle_timeout=True, recompute=False, seed=0,
    plan=[(3, "terminated"), (50, "terminated")], lockstep=False, infos="list", ops=[5] * 3,
)  # fmt: skip
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
    model = Model(rows, plans)
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
        if op == 0:  # twice on the buffer: with nothing in progress, a no-op
            model.truncate()
            buffer.truncate_last_trajectory()
            buffer.truncate_last_trajectory()
            twin.truncate_last_trajectory()
        elif op == 1:  # the file holds the open episodes truncated; the live buffer goes on
            buffer.save(path)
            assert buffer.episodes_in_progress == len(model.open())
            terminated = kwargs["compute_terminated"]
            buffer = type(buffer).load(path, recorder, compute_terminated=terminated)
            assert buffer.device == twin.device and buffer.episodes_in_progress == 0
            model.truncate()
            twin.truncate_last_trajectory()
        for _ in range(op - 1 if op > 1 else 0):
            env = model.overflowing()
            if env is not None:  # an episode longer than rows: the error that names it
                match = (
                    rf"env {env} has reached {rows} transitions .*no longer fits.*"
                    rf"buffer_size={buffer.buffer_size} .*use a larger buffer_size"
                )
                with pytest.raises(ValueError, match=match):
                    feed([buffer], model, infos=infos)
                return
            feed([buffer, twin], model, infos=infos)
        live = model.live()
        assert buffer.n_transitions == twin.n_transitions == sum(e.length for e in live.values())
        assert buffer.episodes_in_progress == len(model.open())
        single = "desired" in sources and len(live) < 2
        assert buffer.can_sample() == (bool(live) and not single)
        if not live:
            with pytest.raises(RuntimeError, match="before an episode has ended: the buffer"):
                buffer.sample(4)
        elif single:
            with pytest.raises(RuntimeError, match="holds a single complete episode"):
                buffer.sample(4)
        else:
            batch = buffer.sample(64)
            terminated = kwargs["compute_terminated"]
            check_batch(batch, model, sources, recorder, handle_timeout, terminated)
            assert_same_batch(batch, twin.sample(64))
            twin_recorder.calls.clear()
            # A batch's indices locate its rows: row * n_envs + env.
            rows_held = to_numpy(buffer.state().fields["obs/observation"]).reshape(-1, 3)
            np.testing.assert_array_equal(
                rows_held[to_numpy(batch.indices)], to_numpy(batch.observations["observation"])
            )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strategy", ["future", "final", "episode", "random"])
def test_transitions_and_goals_of_episodes_straddling_the_ring_end_are_drawn_uniformly(
    device: Any, strategy: str
) -> None:
    """Rows 7, two envs: env 0's episode 1 (counters 4..8) sits in rows 4, 5, 6, 0, 1 and
    its episode 0 (0..3) left when add 7 overwrote row 0; env 1 keeps three episodes."""
    recorder = Recorder()
    buffer = make(device, 14, recorder, n_envs=2, n_sampled_goal=10**6, seed=7,
                  goal_selection_strategy=strategy, info_keys=("tag", "odd"))  # fmt: skip
    model = Model(7, [[(4, "truncated"), (5, "terminated")], [(2, "terminated"), (1, "both")]])
    feed([buffer], model, 9)
    live = model.live()
    assert (0, 0) not in live and (0, 1) in live and buffer.n_transitions == 5 + 7
    n = 40_000
    batch = buffer.sample(n)
    check_batch(batch, model, strategy, recorder)
    tags = to_numpy(batch.observations["observation"]).astype(int)
    for (e, m), ep in live.items():  # transitions: uniform across envs and episodes
        share, p = np.mean((tags[:, 0] == e) & (tags[:, 1] == m)), ep.length / 12
        assert abs(share - p) < 5 * np.sqrt(p * (1 - p) / n), (e, m, share, p)
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
def test_episodes_leave_whole_and_the_longest_that_fits_is_rows(device: Any) -> None:
    recorder = Recorder()
    buffer = make(device, 12, recorder, n_envs=2, seed=0, info_keys=("tag", "odd"))
    model = Model(6, [[(2, "terminated")], [(6, "truncated")]])
    feed([buffer], model, 6)  # env 0: three episodes fill its ring; env 1: one of 6 rows
    assert buffer.n_transitions == 12 and len(model.live()) == 4
    batch = buffer.sample(3000)
    check_batch(batch, model, "future", recorder)  # every row is drawn, the oldest too:
    drawn = {tuple(t) for t in to_numpy(batch.observations["observation"]).astype(int).tolist()}
    assert drawn == {(e, m, i) for (e, m), ep in model.live().items() for i in range(ep.length)}
    counters = buffer.state().counters
    assert to_numpy(counters["sampleable_from"]).tolist() == [0, 0]
    feed([buffer], model, 1)  # row 0 overwritten: env 0's first episode leaves with row 1,
    assert buffer.n_transitions == 4  # env 1's whole episode of 6 with rows 1..5
    assert set(model.live()) == {(0, 1), (0, 2)} and buffer.episodes_in_progress == 2
    counters = buffer.state().counters
    assert to_numpy(counters["sampleable_from"]).tolist() == [2, 6]
    assert to_numpy(counters["sampleable_to"]).tolist() == [6, 6]
    check_batch(buffer.sample(300), model, "future", recorder)
    # (Episodes of one step, and one too long for its rows: the property test's examples.)


@pytest.mark.parametrize("device", DEVICES)
def test_an_info_value_is_not_silently_cast_to_the_dtype_of_the_first_add(device: Any) -> None:
    recorder = Recorder()
    buffer = make(device, 20, recorder, info_keys=("distance",), seed=0)
    model = Model(20, [[(2, "truncated")]])
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

    buffer = make(device, 30, mismatches, observation_space=space, n_sampled_goal=10**6,
                  action_space=spaces.Discrete(5), seed=0)  # fmt: skip
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
