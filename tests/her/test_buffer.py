"""Goal functions from envs, native vector envs' steps (numpy and torch) and the buffer's
file (written atomically, and refused with the file's name when it is not one).

The rules both faces share are test_buffer_model.py (against the reference model of
model.py, used here too) and test_buffer_backends.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import goalenvs  # noqa: F401  (registers the env ids)
from goalenvs.core import GoalEnv
from goalenvs.her import HerReplayBuffer
from tests.her.model import (
    ACTIONS,
    DEVICES,
    SPACE,
    Model,
    assert_same_arrays,
    check_batch,
    feed,
    goal_reward,
    host_state,
    make,
    on,
    tagged,
    to_numpy,
)


class TinyGoalEnv(GoalEnv):
    """A goal env of the tagged spaces, enough to hand the buffer a real compute_reward."""

    def __init__(self) -> None:
        self.observation_space, self.action_space = SPACE, ACTIONS

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        return goal_reward(achieved_goal, desired_goal, info)

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        zero = np.zeros(3, np.float32)
        return {"observation": zero, "achieved_goal": zero, "desired_goal": zero}, {}

    def step(self, action: Any) -> Any:
        return self.reset()[0], 0.0, False, False, {}


@pytest.mark.parametrize(
    "source",
    [
        lambda: gym.wrappers.TimeLimit(TinyGoalEnv(), 10),
        lambda: gym.vector.SyncVectorEnv([lambda: gym.wrappers.TimeLimit(TinyGoalEnv(), 10)]),
        lambda: TinyGoalEnv().compute_reward,
    ],
    ids=["wrapped-env", "sync-vector-env", "callable"],
)
def test_compute_reward_from_env_vector_env_or_callable(source: Any) -> None:
    buffer = HerReplayBuffer(200, SPACE, ACTIONS, source(), seed=0)
    model = Model(200, [[5]])
    feed([buffer], model, 12)
    relabeled = check_batch(buffer.sample(300), model)
    assert relabeled.any()


@pytest.mark.parametrize("env_id", ["goalenvs/PointReach-v0", "goalenvs/BitFlipping-v0"])
@pytest.mark.parametrize("device", DEVICES)
def test_a_vector_env_fills_the_buffer_lends_its_goal_functions_and_saves_its_infos(
    device: Any, env_id: str, tmp_path: Path
) -> None:
    # A native vector env (numpy, or torch on the buffer's device) hands the buffer its
    # compute_reward and compute_terminated; the ended episodes' last observations and
    # infos are the final ones, as the trainer passes them.
    bits = {"n_bits": 3} if "BitFlipping" in env_id else {}
    env = gym.make_vec(env_id, num_envs=8, device=device, autoreset_mode="same_step", **bits)
    space, actions = env.single_observation_space, env.single_action_space
    discrete = isinstance(actions, spaces.Discrete)
    buffer = make(device, 8 * 100, env, n_envs=8, observation_space=space, action_space=actions,
                  info_keys=("is_success",), compute_terminated=env, seed=4)  # fmt: skip
    rng, ends = np.random.default_rng(0), np.zeros(2, int)
    obs, _ = env.reset(seed=0)
    for _ in range(150):
        action = on(
            buffer, rng.integers(0, 3, 8) if discrete else np.float32(rng.uniform(-1, 1, (8, 2)))
        )
        next_obs, reward, terminated, truncated, info = env.step(action)
        real_next = {key: to_numpy(value).copy() for key, value in next_obs.items()}
        success = to_numpy(info["is_success"]).copy()
        for i in np.flatnonzero(to_numpy(terminated | truncated)):
            for key in real_next:
                real_next[key][i] = to_numpy(info["final_obs"][i][key])
            success[i] = to_numpy(info["final_info"]["is_success"][i])
        infos = {"is_success": on(buffer, success)}
        buffer.add(obs, on(buffer, real_next), action, reward, terminated, truncated, infos)
        ends += [int(terminated.sum()), int(truncated.sum())]
        obs = next_obs
    assert ends[1] > 0 and (ends[0] > 0 or not bits)  # random flips also end in success
    batch = buffer.sample(1000)
    values = (*batch.observations.values(), batch.rewards, batch.dones, batch.indices)
    assert all(type(value) is type(batch.rewards) for value in values)
    assert device is None or all(value.device == buffer.device for value in values)
    achieved, goal = batch.next_observations["achieved_goal"], batch.observations["desired_goal"]
    expected = env.unwrapped.compute_reward(achieved, goal, {})
    np.testing.assert_array_equal(to_numpy(batch.rewards), to_numpy(expected))
    # Terminated (success) recomputed for relabeled goals, stored for the others: either
    # way a sample is done exactly when the env says its next achieved goal reached it.
    success = to_numpy(env.unwrapped.compute_terminated(achieved, goal, {}))
    np.testing.assert_array_equal(to_numpy(batch.dones), success)
    assert 0 < success.mean() < 1
    assert to_numpy(batch.actions).dtype == (np.int64 if discrete else np.float32)
    assert to_numpy(batch.indices).dtype == np.int64
    stored = to_numpy(buffer.state().fields["info/is_success"])
    assert stored.dtype == bool and stored.shape == (100, 8)


RETIRED = [("n_step_until", 0, 200), ("motion_threshold", None, 0.001),
           ("motion_scope", "episode", "ahead")]  # fmt: skip


def saved(tmp_path: Path) -> Path:
    buffer, _ = tagged(None, 20, [[3]], 6, seed=0, prioritized=True)
    buffer.save(tmp_path / "buffer.npz")
    return tmp_path / "buffer.npz"


def test_a_failed_save_leaves_the_previous_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = saved(tmp_path)
    before = path.read_bytes()
    buffer = HerReplayBuffer.load(path, goal_reward)
    feed([buffer], Model(20, [[3]]))

    def broken_savez(file: Any, **arrays: Any) -> None:
        file.write(b"PK\x03\x04 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        buffer.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["buffer.npz"]  # no temporary file left
    with np.load(path, allow_pickle=False) as data:  # the file needs no pickle to read
        meta = json.loads(str(data["meta"]))
    assert (meta["format"], meta["version"]) == ("goalenvs.her.buffer", 3)


@pytest.mark.parametrize("device", [None, "cpu"])
def test_load_of_a_truncated_corrupt_or_foreign_file_names_the_file(
    tmp_path: Path, device: Any
) -> None:
    torch = pytest.importorskip("torch")
    path = saved(tmp_path)
    whole = path.read_bytes()
    with np.load(path) as data:
        arrays = dict(data)
    meta = json.loads(str(arrays["meta"]))
    flipped = whole[:200] + bytes(b ^ 0xFF for b in whole[200:400]) + whole[400:]
    broken = {"truncated.npz": whole[: len(whole) // 2], "empty.npz": b"",
              "garbage.npz": bytes(range(256)) * 8, "flipped.npz": flipped}  # fmt: skip
    for name, content in broken.items():
        (tmp_path / name).write_bytes(content)
    np.savez(tmp_path / "other.npz", observations=np.zeros((4, 3)))
    torch.save({"weights": torch.zeros(3)}, tmp_path / "weights.pt")
    np.savez(tmp_path / "future.npz", **{**arrays, "meta": json.dumps({**meta, "version": 99})})
    short = {**arrays, "field__reward": np.zeros((3, 1), np.float32)}
    np.savez(tmp_path / "short.npz", **short)
    missing = {k: v for k, v in arrays.items() if k != "field__truncated"}
    np.savez(tmp_path / "missing.npz", **missing)
    np.save(tmp_path / "one_array.npy", np.zeros(3))
    for bad, name in ((-1.0, "negative.npz"), (np.nan, "nan.npz"), (np.inf, "inf.npz")):
        priorities = arrays["priorities"].copy()
        priorities[0] = bad
        np.savez(tmp_path / name, **{**arrays, "priorities": priorities})
    # Settings of files before their retirement: at the value that meant "off" such a file
    # loads as it was, at another the load is one line naming the file, setting and fix.
    plain = HerReplayBuffer.load(path, goal_reward, device=device)
    for entry, off, value in RETIRED:
        for setting, name in ((off, "off.npz"), (value, "on.npz")):
            np.savez(tmp_path / name, **{**arrays, "meta": json.dumps({**meta, entry: setting})})
        as_off = HerReplayBuffer.load(tmp_path / "off.npz", goal_reward, device=device)
        assert as_off.settings == plain.settings
        assert_same_arrays(host_state(as_off), host_state(plain))
        with pytest.raises(ValueError) as caught:
            HerReplayBuffer.load(tmp_path / "on.npz", goal_reward, device=device)
        assert str(caught.value) == (
            f"{tmp_path / 'on.npz'}: written with {entry}={value!r}, a setting this version no "
            "longer has: sample it with goalenvs 148f048 or earlier, or start a new buffer"
        )
    for name, message in [
        *[(name, "cannot be read as a HER buffer file") for name in list(broken)[:3]],
        ("flipped.npz", "HER buffer file"),
        ("other.npz", "is not a HER buffer file"),
        ("weights.pt", "is not a HER buffer file"),
        ("future.npz", r"\(format 'goalenvs.her.buffer', version 99; expected .* version 3\)"),
        ("short.npz", "the field 'reward' is missing or of another shape"),
        ("missing.npz", "the field 'truncated' is missing or of another shape"),
        ("one_array.npy", "is not a HER buffer file: it holds one array"),
        *[(n, "priorities hold negative or NaN") for n in ("negative.npz", "nan.npz", "inf.npz")],
    ]:
        with pytest.raises(ValueError, match=rf"{re.escape(name)}.*{message}"):
            HerReplayBuffer.load(tmp_path / name, goal_reward, device=device)
    with pytest.raises(FileNotFoundError):
        HerReplayBuffer.load(tmp_path / "absent.npz", goal_reward, device=device)
    assert HerReplayBuffer.load(path, goal_reward, device=device).n_transitions == 6
