"""The HER buffer's rules beyond the reference model's (tests/her/model.py), the same on
each face of the one buffer: HerReplayBuffer (numpy, ``device=None``) and
DeviceHerReplayBuffer on torch's CPU, and on CUDA where there is one: values in and out,
bad settings and inputs, copies, state and files, and what the torch face adds.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from goalenvs.her import GoalSelectionStrategy
from goalenvs.her.buffer import DeviceHerReplayBuffer
from tests.her.model import (
    ACTIONS,
    CUDA,
    DEVICES,
    SPACE,
    TORCH,
    Model,
    assert_same_arrays,
    assert_same_draws,
    batch_arrays,
    check_batch,
    feed,
    goal_reward,
    host_state,
    make,
    on,
    step_reached,
    tagged,
    to_numpy,
)

torch.set_num_threads(1)


@pytest.mark.parametrize("device", DEVICES)
def test_each_sample_returns_fresh_arrays_the_next_one_leaves_alone(device: Any) -> None:
    buffer, model = tagged(device, 60, [[5], [5]], 12, seed=0)
    first = buffer.sample(64)
    kept = {name: value.copy() for name, value in batch_arrays(first).items()}
    later = [buffer.sample(64) for _ in range(3)]
    feed([buffer], model)
    assert_same_arrays(batch_arrays(first), kept)
    assert any((to_numpy(b.indices) != kept["indices"]).any() for b in later)  # other draws
    moved = buffer.sample(64, device="cpu")  # tensors on the CPU, whatever the face
    assert isinstance(moved.rewards, torch.Tensor) and moved.rewards.dtype == torch.float32
    assert moved.rewards.device.type == "cpu"
    check_batch(moved, model)


# ---------------------------------------------------------------------- values in, values out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 2])
def test_values_of_other_dtypes_layouts_and_types_are_stored_as_given(device: Any, n: int) -> None:
    # Strided and Fortran views, float64, int32, int64, big-endian, lists: the same numbers
    # (one env on numpy writes a row as bytes: an int32 goal has the bytes of no float32
    # number it holds, a view no bytes of its own); a float64 Box's actions are float32.
    buffer = make(device, 40, n_envs=n, action_space=spaces.Box(-9, 9, (3,), np.float64))
    wide = np.arange(12 * n, dtype=np.float32).reshape(n, 12)
    count = np.arange(3 * n).reshape(n, 3)
    obs = {
        "observation": wide[:, ::4],
        "achieved_goal": np.float64(count + 1),
        "desired_goal": np.int32(count + 7),
    }
    next_obs = {
        "observation": np.asfortranarray(wide[:, :3] + 100),
        "achieved_goal": np.int64(count + 10),
        "desired_goal": np.array(count + 20, ">f4"),
    }
    action = count + 0.5  # float64
    first = wide[:, ::4].copy()
    buffer.add(obs, next_obs, action, list(range(1, n + 1)), np.zeros(n), np.arange(n) == n - 1)
    f = {name: to_numpy(value) for name, value in buffer.state().fields.items()}
    for side, values in (("obs", obs), ("next_obs", next_obs)):
        for key, value in values.items():
            np.testing.assert_array_equal(f[f"{side}/{key}"][0], np.asarray(value, np.float32))
            assert f[f"{side}/{key}"].dtype == np.float32
    np.testing.assert_array_equal(f["action"][0], action.astype(np.float32))
    assert f["action"].dtype == np.float32
    np.testing.assert_array_equal(f["reward"][0], np.arange(1, n + 1))
    batch = batch_arrays(buffer.sample(8))  # the last env's episode ended
    assert batch["actions"].dtype == np.float32
    np.testing.assert_array_equal(batch["actions"], np.tile(np.float32(action[-1:]), (8, 1)))
    # The buffer copied the values: changing the caller's arrays changes nothing stored.
    wide[:] = -1
    action[:] = -1
    stored = buffer.state().fields
    np.testing.assert_array_equal(to_numpy(stored["obs/observation"][0]), first)
    assert float(stored["action"][0, 0, 0]) == 0.5
    # float32 values of the stored shapes take the fast write: the same numbers.
    plain = {key: np.ascontiguousarray(value, np.float32) for key, value in next_obs.items()}
    buffer.add(plain, plain, np.float32(count), np.full(n, -2, np.float32), [0] * n, [0] * n)
    f = {name: to_numpy(value) for name, value in buffer.state().fields.items()}
    np.testing.assert_array_equal(f["obs/observation"][1], plain["observation"])
    np.testing.assert_array_equal(f["action"][1], count)
    np.testing.assert_array_equal(f["reward"][1], np.full(n, -2.0))
    # A bad next_obs is an error naming it, and stores nothing.
    before = host_state(buffer)
    bad = {**next_obs, "achieved_goal": np.zeros((n, 4), np.float32)}
    with pytest.raises(ValueError, match=rf"next_obs\['achieved_goal'\] has shape \({n}, 4\)"):
        buffer.add(obs, bad, action, [1] * n, np.zeros(n), np.zeros(n))
    assert_same_arrays(host_state(buffer), before)


@pytest.mark.parametrize("device", DEVICES)
def test_done_flags_of_any_dtype_end_exactly_the_flagged_episodes(device: Any) -> None:
    # Numpy steps: a device buffer copies every value onto the device, the all-False flags
    # of the steps within an episode included, and stores them as the numpy buffer does.
    buffer, twin = make(device, 40, n_envs=2), make(None, 40, n_envs=2)
    flags = [
        (np.zeros(2, np.uint8), np.zeros(2, np.float64)),  # nothing ends
        (np.zeros(2, np.int8), np.array([0.0, 0.5])),  # env 1 truncated
        (np.array([1, 0], np.uint8), np.zeros(2, np.int64)),  # env 0 terminated
        (np.array([0, 3], np.int8), np.array([True, False])),  # env 1 terminated, 0 truncated
    ]
    flags += [(np.zeros(2, bool), np.array([t % 5 == 4, t % 3 == 2])) for t in range(4, 12)]
    for t, (terminated, truncated) in enumerate(flags):
        obs = {key: np.full((2, 3), t, np.float32) for key in SPACE.spaces}
        step = (obs, obs, np.full((2, 3), -t, np.float32), np.full(2, t, np.float32))
        for each in (buffer, twin):
            each.add(*step, terminated, truncated)
        if t == 3:
            assert buffer.n_transitions == 3 + 1 + 2 + 2 and buffer.episodes_in_progress == 0
    f = {name: to_numpy(value)[:4] for name, value in buffer.state().fields.items()}
    np.testing.assert_array_equal(f["terminated"], [[0, 0], [0, 0], [1, 0], [0, 1]])
    np.testing.assert_array_equal(f["truncated"], [[0, 0], [0, 1], [0, 0], [1, 0]])
    np.testing.assert_array_equal(f["episode_start"], [[0, 0], [0, 0], [0, 2], [3, 2]])
    assert_same_arrays(host_state(buffer), host_state(twin))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "rule", [step_reached, False, np.False_, np.array(False), np.array([True])]
)
def test_compute_terminated_recomputes_done_for_relabeled_goals_only(
    device: Any, rule: Any
) -> None:
    # A constant (Fetch's compute_terminated returns a plain False) stands for the batch.
    terminated = rule if callable(rule) else lambda a, d, i: rule
    buffer, model = tagged(device, 120, [[4], [6]], 40, compute_terminated=terminated, seed=4)
    batch = buffer.sample(2000)
    relabeled = check_batch(batch, model, recompute=terminated)  # the stored: truncations
    dones = to_numpy(batch.dones)[relabeled]
    assert relabeled.any() and (not callable(rule) or 0 < dones.mean() < 1)
    buffer.compute_terminated = lambda a, d, i: np.zeros(7, bool)
    with pytest.raises(ValueError, match=r"compute_terminated returned shape \(7,\) for a batch"):
        buffer.sample(300)


@pytest.mark.parametrize("device", DEVICES)
def test_a_reward_of_one_value_for_the_batch_is_refused_and_so_is_a_wrong_shape(
    device: Any,
) -> None:
    # Broadcast, one value would pay every relabeled transition the reward of one pair.
    def constant_reward(achieved_goal: Any, desired_goal: Any, info: Any) -> float:
        return -1.0

    buffer, _ = tagged(device, 40, [[5]], 12, seed=0, compute_reward=constant_reward)
    with pytest.raises(
        ValueError,
        match=r"^constant_reward returned shape \(\) for a batch of 200 goal pairs "
        r"\(achieved_goal and desired_goal of shape \(200, 3\)\); expected \(200,\)",
    ):
        buffer.sample(200)
    buffer.compute_reward = lambda a, d, i: np.zeros((200, 2))
    with pytest.raises(ValueError, match=r"returned shape \(200, 2\) for a batch of 200 goal"):
        buffer.sample(200)


@pytest.mark.parametrize("device", DEVICES)
def test_update_priorities_rejects_what_it_cannot_use(device: Any) -> None:
    # It never clamps an index nor keeps a priority that is not finite.
    buffer, _ = tagged(device, 20, [[4]], 8, prioritized=True, seed=0)
    indices = to_numpy(buffer.sample(4).indices)
    before = host_state(buffer)
    for bad in (-1, 10_000):
        wrong = indices.copy()
        wrong[0] = bad
        with pytest.raises(ValueError, match=r"indices must be in \[0, 20\)"):
            buffer.update_priorities(on(buffer, wrong), np.ones(4, np.float32))
    for bad in (np.nan, np.inf, -np.inf):
        td_errors = np.array([0.1, bad, 0.2, 0.3], np.float32)
        with pytest.raises(ValueError, match=r"td_errors\[1\] = (nan|-?inf); expected finite"):
            buffer.update_priorities(on(buffer, indices), td_errors)
    with pytest.raises(ValueError, match=r"indices has shape \(3,\) and td_errors shape \(2,\)"):
        buffer.update_priorities(np.array([0, 1, 2]), np.array([0.1, 0.2]))
    with pytest.raises(TypeError, match="indices must be integers"):
        buffer.update_priorities(np.array([0.5]), np.array([0.1]))
    buffer.update_priorities(np.array([], np.int64), np.array([], np.float32))  # a no-op
    assert_same_arrays(host_state(buffer), before)
    with pytest.raises(RuntimeError, match=r"needs a prioritized buffer.*prioritized=True\)"):
        make(device, 20).update_priorities(np.array([0]), np.array([0.1]))
    buffer.beta = 0.7
    with pytest.raises(ValueError, match=r"beta must be in \[0, 1\], got 1.2"):
        buffer.beta = 1.2
    assert buffer.beta == 0.7 == buffer.settings.beta
    with pytest.raises(AttributeError):  # the other settings are fixed at construction
        buffer.settings = buffer.settings


# ---------------------------------------------------------------------- settings, bad input


def test_the_repr_names_the_settings_that_shape_the_draws() -> None:
    assert repr(make(None, 20, n_envs=2, n_sampled_goal=2)) == (
        "HerReplayBuffer(buffer_size=20, n_envs=2, n_sampled_goal=2, "
        "goal_selection_strategy='future', n_transitions=0)"
    )
    mixed = make("cpu", 20, goal_mix="future=0.5,original=0.5", goal_mix_warmup=8)
    assert repr(mixed) == (
        "DeviceHerReplayBuffer(buffer_size=20, n_envs=1, goal_mix='future=0.5,original=0.5', "
        "goal_mix_warmup=8, device='cpu', n_transitions=0)"
    )


GM = {"prioritized": True, "priority": "goal_motion"}
ENERGY = r"priority='energy' is not valid; expected one of \['td_error', 'goal_motion'\]"
BAD_SETTINGS = [
    ({"n_envs": 0}, ValueError, "n_envs must be >= 1, got 0"),
    ({"n_envs": 1.5}, TypeError, r"n_envs must be an int, got 1.5 \(float\)"),
    ({"prioritized": "yes"}, TypeError, "prioritized must be a bool, got 'yes'"),
    ({"alpha": 1.5}, ValueError, r"alpha must be in \[0, 1\], got 1.5"),
    ({"alpha": -0.1}, ValueError, r"alpha must be in \[0, 1\], got -0.1"),
    ({"alpha": "high"}, TypeError, "alpha must be a float"),
    ({"beta": "x"}, TypeError, r"beta must be a float in \[0, 1\], got 'x'"),
    ({"priority_eps": 0.0}, ValueError, "priority_eps must be a positive finite float"),
    ({"priority_eps": True}, TypeError, "priority_eps must be a float, got True"),
    ({"n_sampled_goal": -1}, ValueError, "n_sampled_goal must be >= 0, got -1"),
    ({"n_envs": 11}, ValueError, "buffer_size=20 gives 1 rows per env for n_envs=11"),
    ({"info_keys": "scale"}, TypeError, "info_keys must be a sequence of strings"),
    ({"seed": 1.0}, TypeError, "seed must be an int or None, got 1.0"),
    ({"compute_reward": 42}, TypeError, "compute_reward must be a goal env"),
    ({"goal_selection_strategy": "later"}, ValueError, r"'later' is not valid; expected one"),
    ({"observation_space": spaces.Box(0, 1, (2,))}, TypeError, "must be a gymnasium.spaces"),
    ({"observation_space": spaces.Dict(a=ACTIONS)}, ValueError, "'achieved_goal' is"),
    ({"action_space": spaces.Tuple([ACTIONS])}, TypeError, "Box, Discrete or MultiBin"),
    # goal mixes
    ({"goal_mix": {"future": -0.2, "original": 1.2}}, ValueError,
     r"^goal_mix: future=-0\.2 is negative; expected fractions >= 0 that sum to 1"),
    ({"goal_mix": {"future": 0.5, "original": 0.4}}, ValueError,
     r"^goal_mix: the fractions sum to 0\.9 \(future=0\.5,original=0\.4\); expected them "
     r"to sum to 1"),
    ({"goal_mix": "future=0.5,original=0.6"}, ValueError, r"^goal_mix: the fractions sum to 1\.1 "),
    ({"goal_mix": {"futur": 1.0}}, ValueError, r"^goal_mix: 'futur' is not a goal source"),
    ({"goal_mix": "future:1"}, ValueError, r"^goal_mix='future:1': expected COMPONENT=FRACTION"),
    ({"goal_mix": "future=x"}, ValueError, r"^goal_mix='future=x': future='x' is not a number"),
    ({"goal_mix": {"future": "x", "original": 1}}, TypeError,
     r"^goal_mix: future='x' is not a number"),
    ({"goal_mix": {"future": float("nan")}}, ValueError, r"^goal_mix: future=nan is not finite"),
    ({"goal_mix": 0.8}, TypeError, r"^goal_mix must be a mapping of components to fractions"),
    ({"goal_mix": {"future": 1.0}, "goal_selection_strategy": "final"}, ValueError,
     r"^goal_mix='future=1' replaces goal_selection_strategy and n_sampled_goal, got "
     r"goal_selection_strategy='final' and n_sampled_goal=4 too"),
    ({"goal_mix_warmup": -1}, ValueError, r"^goal_mix_warmup must be >= 0, got -1"),
    # n-step returns
    ({"n_step": 0, "gamma": 0.9}, ValueError, r"n_step must be >= 1, got 0"),
    ({"n_step": 2.5, "gamma": 0.9}, TypeError, r"n_step must be an int, got 2\.5"),
    ({"n_step": "3", "gamma": 0.9}, TypeError, r"n_step must be an int, got '3'"),
    ({"n_step": 3}, ValueError, r"n_step=3 sums 3 rewards with a discount: pass gamma"),
    ({"n_step": 3, "gamma": 1.0}, ValueError, r"gamma must be in \(0, 1\) or None, got 1"),
    # goal-motion priorities
    ({"priority": "energy"}, ValueError, ENERGY),
    ({"priority": "goal_motion"}, ValueError, "got prioritized=False: pass prioritized"),
    ({"prioritized": True, "motion_clip": 0.1}, ValueError,
     "motion_clip=0.1 only applies to priority="),
    ({**GM, "motion_clip": -1.0}, ValueError, "motion_clip must be a positive finite distance"),
    ({**GM, "motion_clip": float("nan")}, ValueError,
     "motion_clip must be a positive finite distance"),
    ({"prioritized": True, "motion_weights": (1, 1, 4)}, ValueError,
     r"motion_weights=\(1, 1, 4\) only"),
    ({**GM, "motion_weights": (1.0, 4.0)}, ValueError, r"motion_weights=\[1.0, 4.0\] has 2 "
     r"weights; expected one per achieved_goal entry \(3, its shape \(3,\)\)"),
    ({**GM, "motion_weights": (1, -1, 1)}, ValueError, r"finite weights >= 0.*got \(1, -1, 1\)"),
    ({**GM, "motion_weights": (0, 0, 0)}, ValueError, "not all 0"),
    ({**GM, "motion_weights": "1,1,4"}, ValueError, "motion_weights must be finite weights"),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_SETTINGS)
def test_a_bad_setting_fails_with_the_same_message_on_every_face(
    kwargs: dict[str, Any], error: type, message: str
) -> None:
    caught = []
    for device in (None, "cpu"):
        with pytest.raises((TypeError, ValueError)) as raised:
            make(device, 20, **{"seed": 0, **kwargs})
        caught.append(raised.value)
        assert type(raised.value) is error and re.search(message, str(raised.value)), caught
    assert str(caught[0]) == str(caught[1])


@pytest.mark.parametrize("device", DEVICES)
def test_add_and_sample_reject_bad_inputs_with_the_same_messages(device: Any) -> None:
    buffer = make(device, 20, info_keys=("scale",))
    obs = {k: np.zeros((1, 3), np.float32) for k in SPACE.spaces}
    good = dict(
        obs=obs,
        next_obs=obs,
        action=np.zeros((1, 3), np.float32),
        reward=np.zeros(1, np.float32),
        terminated=np.zeros(1, bool),
        truncated=np.zeros(1, bool),
        infos={"scale": np.ones(1, np.float32)},
    )
    cases = [
        ({"obs": [1, 2]}, TypeError, "obs must be a dict of"),
        ({"obs": {"observation": obs["observation"]}}, ValueError, "obs has keys"),
        (
            {"next_obs": {**obs, "achieved_goal": np.zeros((1, 4), np.float32)}},
            ValueError,
            r"next_obs\['achieved_goal'\] has shape \(1, 4\), expected \(1, 3\)",
        ),
        ({"action": np.zeros(3, np.float32)}, ValueError, r"action has shape \(3,\), expected"),
        ({"reward": np.zeros(2, np.float32)}, ValueError, r"reward has shape \(2,\), expected"),
        ({"infos": {}}, KeyError, "infos has no 'scale'"),
        ({"infos": [{}]}, KeyError, "an info dict has no 'scale'"),
        ({"infos": 3}, TypeError, "infos must be a dict of per-env"),
    ]
    for change, error, message in cases:
        with pytest.raises(error, match=message):
            buffer.add(**{**good, **change})
    assert buffer.state().steps_added == 0  # nothing was stored
    good["truncated"] = np.ones(1, bool)
    buffer.add(**good)
    assert buffer.n_transitions == 1
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        buffer.sample(0)
    with pytest.raises(TypeError, match=r"batch_size must be an int, got 2\.0"):
        buffer.sample(2.0)


@pytest.mark.parametrize("device", TORCH)
def test_the_torch_face_names_a_bad_device_and_is_exported_by_goalenvs_her(device: Any) -> None:
    # (importing goalenvs.her loads no torch: tests/test_layout.py)
    import goalenvs.her

    assert goalenvs.her.DeviceHerReplayBuffer is DeviceHerReplayBuffer
    assert "DeviceHerReplayBuffer" in goalenvs.her.__all__
    with pytest.raises(ValueError, match=r"device='tpu9' is not a torch device"):
        make("tpu9", 40, n_envs=2)
    with pytest.raises(TypeError, match="device"):
        DeviceHerReplayBuffer(40, SPACE, ACTIONS, goal_reward)  # device is required
    buffer = make(device, 40, n_envs=2)
    obs = {k: torch.zeros(2, 3, device=device) for k in SPACE.spaces}
    flags = torch.zeros(2, dtype=torch.bool, device=device)
    reward = torch.zeros(2, device=device)
    with pytest.raises(ValueError, match=r"action is a tensor on meta, expected one on"):
        buffer.add(obs, obs, torch.zeros(2, 3, device="meta"), reward, flags, flags)


# ---------------------------------------------------------------------- copies, state, files


def filled(device: Any, **kwargs: Any) -> Any:
    """One env, episodes of 4 (truncated): two complete and one in progress (2 steps)."""
    buffer, model = tagged(device, 20, [[4]], 10, seed=0, **kwargs)
    assert buffer.episodes_in_progress == 1 and buffer.n_transitions == 8
    return buffer, model


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_a_copy_or_unpickled_buffer_samples_alike_and_goes_on_alone(device: Any, how: str) -> None:
    buffer, model = filled(device, prioritized=True)
    before = host_state(buffer)
    twin = {
        "copy": copy.copy,
        "deepcopy": copy.deepcopy,
        "pickle": lambda b: pickle.loads(pickle.dumps(b)),
    }[how](buffer)
    assert type(twin) is type(buffer) and twin.device == buffer.device
    assert twin.episodes_in_progress == 1 and twin.n_transitions == 8
    assert how != "copy" or twin.compute_reward is buffer.compute_reward
    assert_same_arrays(host_state(twin), before)
    assert_same_draws(buffer, twin)
    # The twin writes into its own storage (its packed fields too), through a ring wrap;
    # the original is left as it was.
    after_sampling = host_state(buffer)
    twin_model = copy.deepcopy(model)
    feed([twin], twin_model, 22)  # 32 transitions in 20 rows: the episodes of counters 12..31
    assert twin.n_transitions == 20 and twin.episodes_in_progress == 0
    check_batch(twin.sample(300), twin_model)
    assert_same_arrays(host_state(buffer), after_sampling)
    assert buffer.n_transitions == 8 and buffer.episodes_in_progress == 1


@pytest.mark.parametrize("device", DEVICES)
def test_a_buffer_rebuilt_from_its_state_is_the_same_buffer(device: Any) -> None:
    buffer, model = filled(device)
    state = buffer.state()
    assert state.steps_added == 10 and state.settings == buffer.settings
    rebuilt = type(buffer).from_state(state.copy(), goal_reward)
    assert rebuilt.episodes_in_progress == 1 and rebuilt.n_transitions == 8
    assert_same_arrays(host_state(rebuilt), host_state(buffer))
    assert_same_draws(buffer, rebuilt)
    feed([buffer], model)  # into the original only: the copy's arrays are its own
    assert rebuilt.state().steps_added == 10
    # Without copy() the rebuilt buffer works on the state's own arrays.
    shared = type(buffer).from_state(buffer.state(), goal_reward)
    assert shared.state().records is buffer.state().records
    # A bare object brought to life by the two pickle hooks is the buffer too.
    # (the state in between shares the buffer's arrays: a pickle copies them).
    bare = type(buffer).__new__(type(buffer))
    bare.__setstate__(buffer.__getstate__())
    assert bare.episodes_in_progress == 1 and bare.n_transitions == 8
    bare.truncate_last_trajectory()
    assert bare.n_transitions == 11  # the open episode's three steps


@pytest.mark.parametrize("device", DEVICES)
def test_a_state_that_does_not_fit_or_that_goalenvs_0_1_0_pickled_is_a_clear_error(device) -> None:
    buffer, _ = filled(device)
    state = buffer.state()
    short = dict(state.fields, episode_start=state.fields["episode_start"][:-1])
    bad = dataclasses.replace(state, fields=short, records=None)
    with pytest.raises(ValueError, match=r"'episode_start'\] has shape \(19, 1\); expected its"):
        type(buffer).from_state(bad, goal_reward)
    with pytest.raises(TypeError, match="state must be a BufferState, got dict"):
        type(buffer).from_state({"records": None}, goal_reward)
    # goalenvs 0.1.0 pickled a device buffer as its __dict__ (a "_state" dict of tensors).
    legacy = {"_state": {"records": torch.zeros(2, 1, 3)}, "compute_reward": goal_reward}
    bare = DeviceHerReplayBuffer.__new__(DeviceHerReplayBuffer)
    with pytest.raises(ValueError, match=r"pickled by an earlier goalenvs.*DeviceHerReplayBuffer"):
        bare.__setstate__(legacy)


@pytest.mark.parametrize("saved_on", DEVICES)
@pytest.mark.parametrize("loaded_on", DEVICES)
def test_a_saved_file_loads_on_either_module_as_the_truncated_twin(
    saved_on: Any, loaded_on: Any, tmp_path: Path
) -> None:
    buffer, model = tagged(
        saved_on, 3 * 20, [[4, 6, 5, 3], [2, 9], [5]], 0, seed=9, n_sampled_goal=2,
        goal_selection_strategy="episode", handle_timeout_termination=False, prioritized=True,
        alpha=0.5, priority_eps=1e-4,
    )  # fmt: skip
    buffer.beta = 0.55  # the live value is saved, not the constructor's
    feed([buffer], model, 37)  # wraps the 20-row rings; every env stops mid-episode
    before = host_state(buffer)
    path = tmp_path / "buffer.npz"
    buffer.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["buffer.npz"]  # no temporary file left
    assert_same_arrays(host_state(buffer), before)  # the live buffer keeps its open episodes
    face = make(loaded_on, 20)
    loaded = type(face).load(path, goal_reward, device=loaded_on)
    assert loaded.device == face.device
    for name in (
        "buffer_size",
        "n_envs",
        "n_sampled_goal",
        "goal_selection_strategy",
        "handle_timeout_termination",
        "info_keys",
        "prioritized",
        "alpha",
        "beta",
        "priority_eps",
        "observation_space",
        "action_space",
    ):
        assert getattr(loaded, name) == getattr(buffer, name), name
    assert loaded.beta == 0.55 and loaded.episodes_in_progress == 0
    twin = copy.deepcopy(buffer)  # what the file holds: the open episodes truncated
    twin.truncate_last_trajectory()
    open_steps = sum(ep.length for ep in model.open())
    assert loaded.n_transitions == twin.n_transitions == buffer.n_transitions + open_steps
    assert_same_arrays(host_state(loaded), host_state(twin))
    if saved_on == loaded_on:  # the generator's state was saved too
        assert_same_draws(twin, loaded)
    # It keeps collecting: the cut episodes ended, the envs go on with new ones.
    model.truncate()
    feed([loaded], model, 12)
    batch = loaded.sample(300)
    check_batch(batch._replace(weights=np.ones(300)), model, "episode", handle_timeout=False)
    newest = max(m for _, m in model.live())
    assert to_numpy(batch.observations["observation"])[:, 1].max() == newest


# ---------------------------------------------------------------------- torch specifics


@pytest.mark.parametrize("device", TORCH)
def test_the_host_reads_the_device_about_once_per_ring_cycle(
    device: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4 envs, 50 rows, episodes of 10: after the first read, the next ones come when the
    # newest ended episode could have been overwritten (every ~40 adds), never per batch.
    buffer = make(device, 4 * 50, n_envs=4, seed=0)
    reads = []
    original = DeviceHerReplayBuffer._read_horizons

    def counted(self: DeviceHerReplayBuffer) -> None:
        reads.append(self.state().steps_added)
        original(self)

    monkeypatch.setattr(DeviceHerReplayBuffer, "_read_horizons", counted)
    model = Model(50, [[10]] * 4)
    feed([buffer], model, 9)
    assert not buffer.can_sample()
    feed([buffer], model)
    for _ in range(190):
        feed([buffer], model)
        assert buffer.can_sample()
        buffer.sample(64)
    assert 2 <= len(reads) <= 8, reads  # over 190 samples and 200 adds


class _NoHostRead:
    """Makes every Python-level way a tensor's value reaches the host raise (bool(),
    int(), float(), .item(), .tolist(), .cpu(), .numpy(), nonzero): on the CPU, where
    torch's sync debug mode does not look."""

    NAMES = ("__bool__", "__int__", "__float__", "__index__", "item", "tolist", "cpu",
             "numpy", "nonzero")  # fmt: skip

    def __enter__(self) -> None:
        self.saved = {name: getattr(torch.Tensor, name) for name in self.NAMES}

        def refuse(name: str) -> Any:
            def method(*args: Any, **kwargs: Any) -> Any:
                raise AssertionError(f"sample read a tensor on the host: Tensor.{name}")

            return method

        for name in self.NAMES:
            setattr(torch.Tensor, name, refuse(name))
        self.nonzero, torch.nonzero = torch.nonzero, refuse("torch.nonzero")

    def __exit__(self, *exc: Any) -> None:
        for name, method in self.saved.items():
            setattr(torch.Tensor, name, method)
        torch.nonzero = self.nonzero


@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize("strategy", list(GoalSelectionStrategy))
@pytest.mark.parametrize("device", TORCH)
def test_sample_reads_nothing_on_the_host_once_can_sample_said_yes(
    device: Any, strategy: GoalSelectionStrategy, prioritized: bool
) -> None:
    # What a CUDA graph capture of sample needs: no host read, so no data-dependent shape
    # or branch, whatever the strategy, the handling of timeouts or the priorities.
    def done_if_close(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        return (achieved_goal - desired_goal).abs().sum(-1) < 1.0

    buffer, model = tagged(
        device, 3 * 40, [[4, 6, 5], [2, 9], [5]], 30, goal_selection_strategy=strategy,
        prioritized=prioritized, seed=6, compute_terminated=done_if_close,
        handle_timeout_termination=False,
    )  # fmt: skip
    assert buffer.can_sample()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            batch = buffer.sample(128)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    else:
        with _NoHostRead():
            batch = buffer.sample(128)
    if prioritized:
        batch = batch._replace(weights=torch.ones(128))
    close = lambda a, d, i: np.abs(a - d).sum(-1) < 1.0  # noqa: E731  (done_if_close)
    check_batch(batch, model, strategy, handle_timeout=False, recompute=close)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("prioritized", [False, True])
def test_the_seed_makes_the_draws_and_rng_or_generator_draws_them(
    device: Any, prioritized: bool
) -> None:
    buffers = [
        tagged(device, 60, [[5], [3]], 15, seed=7, prioritized=prioritized)[0] for _ in range(2)
    ]
    numpy_face = device is None
    source = buffers[1].rng if numpy_face else buffers[1].generator
    assert isinstance(source, np.random.Generator if numpy_face else torch.Generator)
    assert (buffers[1].generator if numpy_face else buffers[1].rng) is None
    assert numpy_face or source.device == buffers[1].device
    assert_same_draws(*buffers)
    if numpy_face:  # one draw more: the next batches differ
        source.random()
    else:
        torch.rand(1, generator=source, device=source.device)
    a, b = buffers[0].sample(64), buffers[1].sample(64)
    assert (to_numpy(a.indices) != to_numpy(b.indices)).any()


@pytest.mark.parametrize("prioritized", [False, True])
@CUDA
def test_a_sample_captured_in_a_cuda_graph_replays_fresh_draws_of_what_the_buffer_holds(
    prioritized: bool,
) -> None:
    # The trainer captures its update, sampling included: each replay must draw anew from
    # the buffer as it is then (new episodes in, old ones retired), and a new beta counts.
    buffer, model = tagged(
        "cuda", 4 * 40, [[10]] * 4, 30, seed=0, prioritized=prioritized, beta=1.0
    )
    assert buffer.can_sample()  # reads the horizons now, not inside the capture
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            buffer.sample(256)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(buffer.generator)
    with torch.cuda.graph(graph):
        batch = buffer.sample(256)
    graph.replay()  # a capture runs no kernel: the batch holds draws after a replay
    indices = []
    for _ in range(4):
        feed([buffer], model, 25)  # ends 10 episodes, retires the oldest
        assert buffer.can_sample()
        if prioritized:
            buffer.update_priorities(batch.indices, torch.arange(256.0, device="cuda") % 5)
        graph.replay()
        torch.cuda.synchronize()
        checked = batch
        if prioritized:
            checked = batch._replace(weights=torch.ones(256))
            assert batch.weights.min() < 1.0  # unequal priorities: unequal weights
        check_batch(checked, model)
        tags = to_numpy(batch.observations["observation"]).astype(int)
        assert tags[:, 1].max() == max(m for _, m in model.live())  # the newest are drawn
        indices.append(to_numpy(batch.indices).copy())
    assert not (indices[0] == indices[1]).all()  # each replay draws anew
    if prioritized:
        buffer.beta = 0.0  # no correction: every weight 1, in the next replay
        graph.replay()
        np.testing.assert_array_equal(to_numpy(batch.weights), np.ones(256, np.float32))
