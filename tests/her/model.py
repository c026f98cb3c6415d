"""The reference model of the one HER buffer, which the tests of tests/her check it against
on numpy (device None) and torch (on the CPU, and on CUDA where there is one).

Every value written names its origin: env ``e``'s episode ``m`` (counted per env), step
``i`` carries ``(e, m, i)`` in its observation, achieved goal, action and ``tag`` info, its
desired goal is ``(-1, e, m)``, and the stored reward is a function of the three that no
:func:`goal_reward` value equals. :class:`Model` keeps every episode every env wrote and
decides which ones the buffer holds: each env's ring keeps its last ``rows`` transitions,
and an episode leaves whole when its first row is overwritten (it is intact while
``start >= adds - rows``). :func:`check_batch` checks a batch against it field by field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

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
TORCH = ["cpu", pytest.param("cuda", marks=CUDA)]


def to_numpy(value: Any) -> np.ndarray:
    return value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def goal_reward(achieved_goal: Any, desired_goal: Any, info: Any = None) -> Any:
    """Differs for every (achieved, desired) pair of tags (numpy or torch)."""
    a, d = achieved_goal, desired_goal
    return sum(
        w * a[..., k] - v * d[..., k] for k, (w, v) in enumerate([(1, 3), (10, 7), (100, 11)])
    )


def reached(achieved_goal: Any, desired_goal: Any, info: Any = None) -> Any:
    return (achieved_goal == desired_goal).all(-1)


def step_reached(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
    return achieved_goal[..., 2] == desired_goal[..., 2]  # the goal's step index


def stored_reward(env: Any, episode: Any, step: Any) -> np.ndarray:
    """What add() is given: never a goal_reward value (those are integers)."""
    return np.asarray(
        0.25 + np.asarray(env) + 100.0 * np.asarray(episode) + 0.001 * np.asarray(step), np.float32
    )


class Recorder:
    """A compute_reward that keeps every call's arguments, as numpy."""

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]] = []

    def __call__(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        # The info values are arrays of the buffer's own module, as the goals are.
        assert all(type(v) is type(achieved_goal) for v in info.values()), info
        info_np = {k: to_numpy(v) for k, v in info.items()}
        self.calls.append((to_numpy(achieved_goal), to_numpy(desired_goal), info_np))
        return goal_reward(achieved_goal, desired_goal)


def make(device: Any, buffer_size: int, compute_reward: Any = goal_reward, **kwargs: Any) -> Any:
    """The numpy face (device None) or the torch face on ``device``, of the tagged spaces
    unless ``observation_space`` or ``action_space`` say otherwise."""
    observation_space = kwargs.pop("observation_space", SPACE)
    action_space = kwargs.pop("action_space", ACTIONS)
    args = (buffer_size, observation_space, action_space, compute_reward)
    if device is None:
        return HerReplayBuffer(*args, **kwargs)
    return DeviceHerReplayBuffer(*args, device=device, **kwargs)


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
    """Every episode of every env: env e runs ``plans[e]``, cycled, each entry a length
    (a truncated episode) or ``(length, "terminated" | "truncated" | "both")``."""

    def __init__(self, rows: int, plans: list[list[Any]]) -> None:
        self.n, self.rows, self.t = len(plans), rows, 0
        self.plans = [[p if isinstance(p, tuple) else (p, "truncated") for p in e] for e in plans]
        self.episodes: list[list[Episode]] = [[] for _ in plans]

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

    def open(self) -> list[Episode]:
        """The episodes in progress."""
        return [eps[-1] for eps in self.episodes if eps and not eps[-1].complete]


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


#: Speeds of an achieved goal per step, exact in float32; (0, 0, 0): nothing moved.
SPEEDS = [(0.0, 0.0, 0.0), (0.25, 0.0, 0.0), (0.0, 0.5, 0.5), (1.0, 2.0, 2.0)]


class Feeder:
    """Feeds ``buffer`` the model's truncated episodes (``lengths`` cycled, env e starting
    e entries in) and keeps each transition's priority as prioritized replay sets it: the
    largest seen when it is added, ``|td| + eps`` after :meth:`update`. With ``speeds``,
    an episode's achieved goal starts at ``(env, episode, 0)`` and moves by
    ``SPEEDS[speed(env, episode)]`` each step."""

    def __init__(self, buffer: Any, lengths: list[int], speeds: list[int] | None = None) -> None:
        k = len(lengths)
        plans = [lengths[e % k :] + lengths[: e % k] for e in range(buffer.n_envs)]
        self.buffer, self.lengths, self.speeds = buffer, lengths, speeds
        self.model = Model(buffer.rows_per_env, plans)
        self.priority: dict[tuple[int, ...], float] = {}
        self.max_priority = 1.0

    def speed(self, env: int, episode: int) -> int:
        assert self.speeds is not None
        return self.speeds[(episode + 2 * env) % len(self.speeds)]

    def motion(self, env: int, episode: int, clip: float | None, weights: Any = None) -> float:
        """The episode's clipped, weighted path."""
        velocity = np.array(SPEEDS[self.speed(env, episode)]) * (1 if weights is None else weights)
        step = float(np.linalg.norm(velocity))
        length = self.lengths[(episode + env) % len(self.lengths)]
        return length * (step if clip is None else min(step, clip))

    def add(self, steps: int = 1) -> None:
        for _ in range(steps):
            obs, nxt, *rest = self.model.step()
            for o in (obs, nxt) if self.speeds else ():
                tags = o["observation"]
                v = np.array([SPEEDS[self.speed(e, m)] for e, m, _ in tags.astype(int)], np.float32)
                o["achieved_goal"] = tags * np.float32([1, 1, 0]) + tags[:, 2:] * v
            self.buffer.add(*[on(self.buffer, a) for a in (obs, nxt, *rest)])
            for tag in obs["observation"].astype(int).tolist():
                self.priority[tuple(tag)] = self.max_priority

    def live(self) -> dict[tuple[int, ...], float]:
        """The priority of every transition of a complete intact episode."""
        eps = self.model.live().items()
        return {(e, m, i): self.priority[(e, m, i)] for (e, m), ep in eps for i in range(ep.length)}

    def update(self, tags: np.ndarray, td_errors: np.ndarray, eps: float = 1e-6) -> None:
        for tag, td in zip(tags.astype(int).tolist(), td_errors, strict=True):
            self.priority[tuple(tag)] = abs(float(td)) + eps
        self.max_priority = max(self.max_priority, float(np.abs(td_errors).max()) + eps)


def tagged(device: Any, size: int, plans: list[list[Any]], steps: int, **kwargs: Any) -> Any:
    """A buffer of ``len(plans)`` envs fed ``steps`` steps of the model, and the model."""
    buffer = make(device, size, n_envs=len(plans), **kwargs)
    model = Model(buffer.rows_per_env, plans)
    feed([buffer], model, steps)
    return buffer, model


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
    sources: Any = "future",
    recorder: Recorder | None = None,
    handle_timeout: bool = True,
    recompute: Any = None,
) -> np.ndarray:
    """Every provenance rule on one batch; returns the relabeled mask. ``sources``: where
    relabeled goals may come from (a strategy, or goal-mix sources); ``recorder``: the
    buffer's compute_reward, whose one call it checks; ``recompute``: the buffer's
    compute_terminated, for the relabeled transitions' dones."""
    names = [getattr(s, "value", s) for s in ([sources] if isinstance(sources, str) else sources)]
    sources = {"achieved" if s == "random" else s for s in names}
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
    want = np.where(relabeled, goal_reward(b["next/achieved_goal"], goal), stored_reward(*tags.T))
    np.testing.assert_array_equal(b["rewards"], want.astype(np.float32))
    if recorder is not None:  # one call for the whole batch, with the info of each step
        achieved, desired, info = recorder.calls.pop()
        assert not recorder.calls
        np.testing.assert_array_equal(achieved, b["next/achieved_goal"])
        np.testing.assert_array_equal(desired, goal)
        assert set(info) == {"tag", "odd"} and info["odd"].dtype == bool
        np.testing.assert_array_equal(info["tag"], b["obs/observation"])
        np.testing.assert_array_equal(info["odd"], tags[:, 2] % 2 == 1)
    assert b["rewards"].dtype == np.float32 and b["dones"].dtype == np.float32
    last = np.array([i == live[(e, m)].length - 1 for e, m, i in tags], bool)
    term = last & np.array([live[(e, m)].terminated for e, m, _ in tags], bool)
    trunc = last & np.array([live[(e, m)].truncated for e, m, _ in tags], bool)
    if recompute is not None:
        hit = to_numpy(recompute(b["next/achieved_goal"], goal, None)).astype(bool)
        term = np.where(relabeled, hit, term)
    np.testing.assert_array_equal(b["dones"], term | (trunc & (not handle_timeout)))
    np.testing.assert_array_equal(b["weights"], 1.0)
    return relabeled


def assert_same_batch(a: HerBatch, b: HerBatch) -> None:
    x, y = batch_arrays(a), batch_arrays(b)
    assert x.keys() == y.keys()
    for key, value in x.items():
        np.testing.assert_array_equal(value, y[key], err_msg=key)


def assert_same_draws(a: Any, b: Any, rounds: int = 3) -> None:
    """Buffers ``a`` and ``b`` draw the same batches (same data, same generator state)."""
    for _ in range(rounds):
        assert_same_batch(a.sample(16), b.sample(16))


def host_state(buffer: Any) -> dict[str, np.ndarray]:
    """Copies of every field, counter, priority and the steps of a buffer's state (numpy)."""
    state = buffer.state()
    out = {"steps_added": np.array(state.steps_added)}
    out.update({name: to_numpy(value).copy() for name, value in state.fields.items()})
    out.update({f"counter/{k}": to_numpy(v).copy() for k, v in state.counters.items()})
    if state.priorities is not None:
        out["priorities"] = to_numpy(state.priorities).copy()
    return out


def assert_same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for name, value in a.items():
        np.testing.assert_array_equal(value, b[name], err_msg=name)
