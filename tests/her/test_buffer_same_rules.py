"""The numpy and the device replay buffer answer the same questions the same way:
``update_priorities`` rejects what it cannot use (it never clamps an index or keeps a NaN
priority), ``can_sample()`` says whether ``sample`` works, a bad setting, space, input or
batch size fails with the same message, a saved file keeps every setting, and copies,
pickles and states behave alike (episodes in progress stay in progress; a save leaves
them alone)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from goalenvs.her import DeviceHerReplayBuffer, HerReplayBuffer

SPACE = spaces.Dict(
    observation=spaces.Box(-10, 10, (2,), np.float32),
    achieved_goal=spaces.Box(-10, 10, (2,), np.float32),
    desired_goal=spaces.Box(-10, 10, (2,), np.float32),
)
ACTIONS = spaces.Box(-1, 1, (2,), np.float32)
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
BACKENDS = ["numpy", "cpu"]
# The device buffer on CUDA too, where there is one.
ALL_BACKENDS = [*BACKENDS, pytest.param("cuda", marks=CUDA)]


def reward(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
    return (
        -(achieved_goal[..., 0] != desired_goal[..., 0]).float()
        if isinstance(achieved_goal, torch.Tensor)
        else -(achieved_goal[..., 0] != desired_goal[..., 0]).astype(np.float32)
    )


def make(backend: str, **kwargs: Any) -> Any:
    if backend == "numpy":
        return HerReplayBuffer(20, SPACE, ACTIONS, reward, **{"seed": 0, **kwargs})
    return DeviceHerReplayBuffer(
        20, SPACE, ACTIONS, reward, device=backend, **{"seed": 0, **kwargs}
    )


def add_steps(buffer: Any, backend: str, steps: int, start: int = 0, episode: int = 4) -> None:
    """Steps ``start``.. of one env whose episodes end (truncated) every ``episode`` steps."""

    def as_array(value: np.ndarray) -> Any:
        return value if backend == "numpy" else torch.as_tensor(value, device=backend)

    for t in range(start, start + steps):
        obs = {k: as_array(np.full((1, 2), t, np.float32)) for k in SPACE.spaces}
        nxt = {k: as_array(np.full((1, 2), t + 1, np.float32)) for k in SPACE.spaces}
        buffer.add(
            obs,
            nxt,
            as_array(np.zeros((1, 2), np.float32)),
            as_array(np.zeros(1, np.float32)),
            as_array(np.zeros(1, bool)),
            as_array(np.array([(t + 1) % episode == 0])),
        )


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_can_sample_is_false_until_an_episode_ends_then_true(backend: str) -> None:
    buffer = make(backend)
    assert not buffer.can_sample()
    add_steps(buffer, backend, 3)
    assert not buffer.can_sample()
    with pytest.raises(RuntimeError):
        buffer.sample(2)
    add_steps(buffer, backend, 1, start=3)
    assert buffer.can_sample()
    assert buffer.sample(2).rewards.shape == (2,)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_update_priorities_rejects_out_of_range_indices_instead_of_clamping(backend: str) -> None:
    buffer = make(backend, prioritized=True)
    add_steps(buffer, backend, 8)
    batch = buffer.sample(4)
    for bad in (-1, 10_000):
        indices = batch.indices.clone() if backend != "numpy" else batch.indices.copy()
        indices[0] = bad
        with pytest.raises(ValueError, match=r"indices must be in \[0, \d+\)"):
            buffer.update_priorities(indices, np.ones(4, np.float32))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_update_priorities_rejects_td_errors_that_are_not_finite(backend: str, bad: float) -> None:
    buffer = make(backend, prioritized=True)
    add_steps(buffer, backend, 8)
    batch = buffer.sample(4)
    td_errors = np.array([0.1, bad, 0.2, 0.3], np.float32)
    with pytest.raises(ValueError, match=r"td_errors\[1\] = (nan|-?inf); expected finite"):
        buffer.update_priorities(batch.indices, td_errors)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_update_priorities_checks_shapes_and_integer_indices_alike(backend: str) -> None:
    buffer = make(backend, prioritized=True)
    add_steps(buffer, backend, 8)
    with pytest.raises(ValueError, match=r"indices has shape \(3,\) and td_errors shape \(2,\)"):
        buffer.update_priorities(np.array([0, 1, 2]), np.array([0.1, 0.2]))
    with pytest.raises(TypeError, match="indices must be integers"):
        buffer.update_priorities(np.array([0.5]), np.array([0.1]))
    buffer.update_priorities(np.array([], np.int64), np.array([], np.float32))  # a no-op
    plain = make(backend)
    with pytest.raises(RuntimeError, match="needs a prioritized buffer"):
        plain.update_priorities(np.array([0]), np.array([0.1]))


def both(**kwargs: Any) -> list[BaseException]:
    """The exception each backend raises when built with ``kwargs``; both of one type."""
    errors = []
    for backend in BACKENDS:
        with pytest.raises((TypeError, ValueError)) as caught:
            make(backend, **kwargs)
        errors.append(caught.value)
    assert type(errors[0]) is type(errors[1]), errors
    return errors


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_envs": 0}, "n_envs must be >= 1, got 0"),
        ({"n_envs": 1.5}, r"n_envs must be an int, got 1.5 \(float\)"),
        ({"prioritized": "yes"}, "prioritized must be a bool, got 'yes'"),
        ({"alpha": 1.5}, r"alpha must be in \[0, 1\], got 1.5"),
        ({"beta": "x"}, r"beta must be a float in \[0, 1\], got 'x'"),
        ({"priority_eps": 0.0}, "priority_eps must be a positive finite float, got 0.0"),
        ({"priority_eps": True}, "priority_eps must be a float, got True"),
        ({"n_sampled_goal": -1}, "n_sampled_goal must be >= 0, got -1"),
        ({"n_envs": 11}, "buffer_size=20 gives 1 rows per env for n_envs=11; expected at least 2"),
        ({"info_keys": "scale"}, "info_keys must be a sequence of strings, got 'scale'"),
        ({"seed": 1.0}, "seed must be an int or None, got 1.0"),
        (
            {"goal_selection_strategy": "later"},
            r"goal_selection_strategy='later' is not valid; expected one of "
            r"\['future', 'final', 'episode', 'random'\]",
        ),
    ],
)
def test_both_buffers_reject_a_bad_setting_with_the_same_message(
    kwargs: dict[str, Any], message: str
) -> None:
    for error in both(**kwargs):
        assert re.search(message, str(error)), (message, str(error))


def test_both_buffers_reject_bad_spaces_alike() -> None:
    for backend in BACKENDS:
        build = DeviceHerReplayBuffer if backend != "numpy" else HerReplayBuffer
        extra = {"device": backend} if backend != "numpy" else {}
        with pytest.raises(TypeError, match=r"observation_space must be a gymnasium\.spaces\.Dict"):
            build(20, spaces.Box(0, 1, (2,)), ACTIONS, reward, **extra)
        no_goal = spaces.Dict(
            observation=SPACE["observation"], achieved_goal=SPACE["achieved_goal"]
        )
        with pytest.raises(ValueError, match="'desired_goal' is missing"):
            build(20, no_goal, ACTIONS, reward, **extra)
        with pytest.raises(TypeError, match="action_space must be Box, Discrete or MultiBinary"):
            build(20, SPACE, spaces.Tuple([ACTIONS]), reward, **extra)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_beta_setter_checks_its_value_alike(backend: str) -> None:
    buffer = make(backend, prioritized=True)
    buffer.beta = 0.7
    assert buffer.beta == 0.7
    with pytest.raises(ValueError, match=r"beta must be in \[0, 1\], got 1.2"):
        buffer.beta = 1.2
    assert buffer.beta == 0.7


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_add_rejects_bad_inputs_with_the_same_messages(backend: str) -> None:
    buffer = make(backend, info_keys=("scale",))
    obs = {k: np.zeros((1, 2), np.float32) for k in SPACE.spaces}
    good = dict(
        obs=obs,
        next_obs=obs,
        action=np.zeros((1, 2), np.float32),
        reward=np.zeros(1, np.float32),
        terminated=np.zeros(1, bool),
        truncated=np.zeros(1, bool),
        infos={"scale": np.ones(1, np.float32)},
    )
    cases = [
        ({"obs": [1, 2]}, TypeError, "obs must be a dict of"),
        ({"obs": {"observation": obs["observation"]}}, ValueError, "obs has keys"),
        (
            {"next_obs": {**obs, "achieved_goal": np.zeros((1, 3), np.float32)}},
            ValueError,
            r"next_obs\['achieved_goal'\] has shape \(1, 3\), expected \(1, 2\)",
        ),
        ({"action": np.zeros((1, 3), np.float32)}, ValueError, r"action has shape \(1, 3\)"),
        ({"reward": np.zeros(2, np.float32)}, ValueError, r"reward has shape \(2,\), expected"),
        ({"infos": {}}, KeyError, "infos has no 'scale'"),
        ({"infos": [{}]}, KeyError, "an info dict has no 'scale'"),
        ({"infos": 3}, TypeError, "infos must be a dict of per-env"),
    ]
    for change, error, message in cases:
        with pytest.raises(error, match=message):
            buffer.add(**{**good, **change})
    buffer.add(**good)  # the good inputs are stored


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_sample_checks_batch_size_alike(backend: str) -> None:
    buffer = make(backend)
    add_steps(buffer, backend, 4)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        buffer.sample(0)
    with pytest.raises(TypeError, match=r"batch_size must be an int, got 2\.0"):
        buffer.sample(2.0)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_a_saved_file_keeps_every_setting(backend: str, tmp_path: Any) -> None:
    buffer = make(
        backend,
        n_sampled_goal=2,
        goal_selection_strategy="episode",
        handle_timeout_termination=False,
        prioritized=True,
        alpha=0.5,
        beta=0.3,
        priority_eps=1e-4,
    )
    buffer.beta = 0.55  # the live value is saved, not the constructor's
    add_steps(buffer, backend, 4)
    path = tmp_path / ("buffer.npz" if backend == "numpy" else "buffer.pt")
    buffer.save(path)
    loaded = type(buffer).load(path, reward)
    for name in (
        "buffer_size",
        "n_envs",
        "rows_per_env",
        "n_sampled_goal",
        "goal_selection_strategy",
        "handle_timeout_termination",
        "info_keys",
        "her_ratio",
        "prioritized",
        "alpha",
        "beta",
        "priority_eps",
        "observation_space",
        "action_space",
    ):
        assert getattr(loaded, name) == getattr(buffer, name), name
    assert loaded.beta == 0.55


# ---------------------------------------------------------------------- copies, pickles, state


def snapshot(batch: Any) -> list[np.ndarray]:
    """Every field of a batch as numpy copies, in a fixed order."""

    def plain(value: Any) -> np.ndarray:
        return value.cpu().numpy().copy() if isinstance(value, torch.Tensor) else value.copy()

    fields = [plain(batch.observations[k]) for k in sorted(batch.observations)]
    fields += [plain(batch.next_observations[k]) for k in sorted(batch.next_observations)]
    return fields + [plain(v) for v in (batch.actions, batch.rewards, batch.dones, batch.indices)]


def assert_same_batches(a: Any, b: Any, rounds: int = 3) -> None:
    """``a`` and ``b`` draw the same batches (same data, same generator state)."""
    for _ in range(rounds):
        for x, y in zip(snapshot(a.sample(16)), snapshot(b.sample(16)), strict=True):
            np.testing.assert_array_equal(x, y)


def storage_arrays(buffer: Any) -> dict[str, np.ndarray]:
    """Copies of every array of a buffer's state, by name (numpy)."""
    state = buffer.state()
    out = {"steps_added": np.array(state.steps_added)}
    for name in state.storage._fields:
        value = getattr(state.storage, name)
        items = value.items() if isinstance(value, dict) else [("", value)]
        for key, item in items:
            if item is not None:
                plain = item.cpu().numpy() if isinstance(item, torch.Tensor) else item
                out[f"{name}{key}"] = np.array(plain, copy=True)
    return out


def assert_same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for name, value in a.items():
        np.testing.assert_array_equal(value, b[name], err_msg=name)


def filled(backend: str, **kwargs: Any) -> Any:
    """A buffer with two complete episodes and one in progress (2 steps)."""
    buffer = make(backend, **kwargs)
    add_steps(buffer, backend, 10)
    assert buffer.episodes_in_progress == 1
    return buffer


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_a_copy_or_unpickled_buffer_samples_alike_and_goes_on_alone(backend: str, how: str) -> None:
    buffer = filled(backend, prioritized=True)
    before = storage_arrays(buffer)
    twin = {
        "copy": copy.copy,
        "deepcopy": copy.deepcopy,
        "pickle": lambda b: pickle.loads(pickle.dumps(b)),
    }[how](buffer)
    assert type(twin) is type(buffer)
    assert twin.episodes_in_progress == 1  # episodes in progress stay in progress
    assert twin.n_transitions == buffer.n_transitions == 8
    assert twin.compute_reward is buffer.compute_reward or how != "copy"
    assert_same_arrays(storage_arrays(twin), before)
    assert_same_batches(buffer, twin)
    # The twin keeps writing into its own storage; the original is left as it was.
    after_sampling = storage_arrays(buffer)
    add_steps(twin, backend, 6, start=10)  # episodes end after steps 11 and 15
    assert twin.n_transitions == 16 and twin.episodes_in_progress == 0
    assert_same_arrays(storage_arrays(buffer), after_sampling)
    assert buffer.n_transitions == 8 and buffer.episodes_in_progress == 1


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_a_buffer_rebuilt_from_its_state_is_the_same_buffer(backend: str) -> None:
    buffer = filled(backend, info_keys=())
    state = buffer.state()
    assert state.steps_added == 10
    assert state.settings == buffer.settings
    rebuilt = type(buffer).from_state(state.copy(), reward)
    assert rebuilt.episodes_in_progress == 1 and rebuilt.n_transitions == 8
    assert_same_arrays(storage_arrays(rebuilt), storage_arrays(buffer))
    assert_same_batches(buffer, rebuilt)
    # Without copy() the rebuilt buffer works on the state's own arrays.
    shared = type(buffer).from_state(buffer.state(), reward)
    assert shared.state().storage.records is buffer.state().storage.records


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_getstate_and_setstate_round_trip_on_a_bare_object(backend: str) -> None:
    # What a caller that copies by hand does (object.__new__ and the two hooks); the
    # state in between shares the buffer's arrays (a pickle copies them).
    buffer = filled(backend)
    before = buffer.n_transitions
    bare = type(buffer).__new__(type(buffer))
    bare.__setstate__(buffer.__getstate__())
    assert bare.episodes_in_progress == 1
    bare.truncate_last_trajectory()
    assert bare.n_transitions - before == 2  # the open episode's two steps


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_saving_leaves_episodes_in_progress_alone(backend: str, tmp_path: Any) -> None:
    buffer = filled(backend, prioritized=True)
    before = storage_arrays(buffer)
    closed = buffer.state(truncate_in_progress=True)
    assert closed.storage.records is buffer.state().storage.records  # shared, not copied
    path = tmp_path / ("buffer.npz" if backend == "numpy" else "buffer.pt")
    buffer.save(path)
    assert_same_arrays(storage_arrays(buffer), before)  # the live buffer is as it was
    assert buffer.episodes_in_progress == 1
    loaded = type(buffer).load(path, reward)
    assert loaded.episodes_in_progress == 0
    assert loaded.n_transitions == buffer.n_transitions + 2
    # Collection goes on in the live buffer: the open episode ends where it would have.
    add_steps(buffer, backend, 2, start=10)
    assert buffer.n_transitions == 12 and buffer.episodes_in_progress == 0


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_a_state_that_does_not_match_its_settings_is_a_clear_error(backend: str) -> None:
    buffer = filled(backend)
    state = buffer.state()
    short = state.storage.episode_start[:-1] if backend != "numpy" else np.zeros(0, np.int64)
    bad = dataclasses.replace(state, storage=state.storage._replace(episode_start=short))
    with pytest.raises(ValueError, match=r"episode_start has shape \(0,\)"):
        type(buffer).from_state(bad, reward)
    with pytest.raises(TypeError, match="state must be a"):
        type(buffer).from_state({"records": None}, reward)


def test_a_device_buffer_pickled_by_an_earlier_goalenvs_is_a_clear_error() -> None:
    # goalenvs 0.1.0 pickled a device buffer as its __dict__ (a "_state" dict of tensors).
    legacy = {"_state": {"records": torch.zeros(2, 1, 3)}, "compute_reward": reward, "_t": 2}
    bare = DeviceHerReplayBuffer.__new__(DeviceHerReplayBuffer)
    with pytest.raises(ValueError, match=r"pickled by an earlier goalenvs.*DeviceHerReplayBuffer"):
        bare.__setstate__(legacy)
