"""The Shadow Hand's in-hand manipulation envs with a goal distance that takes any batch.

gymnasium-robotics' ``HandManipulate*`` envs (1.4) compare goals (a position and a
quaternion) in a ``_goal_distance`` that is wrong on a batch with ``ignore_z_target_rotation``
(``reward.batch``), takes at most one leading dimension (``reward.leading_dims``) and reads
``q`` and ``-q`` a full turn apart (``reward.success_at_goal``): docs/checks.md.
:class:`HandGoalDistance` writes the comparison over the last axis (the angle as
``2 arccos(|w|)`` of normalized quaternions) and reads each step's reward and
``info["is_success"]`` from it.

Importing this module registers ``<Name>Batched-v1`` for every ``HandManipulate<Name>-v1``
id of gymnasium-robotics, so ``goalenvs train
goalenvs.wrappers.hand_goals:HandManipulatePenRotateBatched-v1`` trains on the fixed env.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

SUFFIX = "Batched"


def quat_mul(q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """The Hamilton product of quaternions ``(w, x, y, z)`` over the last axis."""
    w0, x0, y0, z0 = np.moveaxis(q0, -1, 0)
    w1, x1, y1, z1 = np.moveaxis(q1, -1, 0)
    return np.stack(
        [
            w0 * w1 - x0 * x1 - y0 * y1 - z0 * z1,
            w0 * x1 + x0 * w1 + y0 * z1 - z0 * y1,
            w0 * y1 + y0 * w1 + z0 * x1 - x0 * z1,
            w0 * z1 + z0 * w1 + x0 * y1 - y0 * x1,
        ],
        axis=-1,
    )


def _unit(q: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    return q / np.where(norm > 0, norm, 1.0)


def _euler_of(w: float, x: float, y: float, z: float) -> tuple[float, float, float]:
    """gymnasium-robotics' ``quat2euler`` of one quaternion, in plain floats."""
    n = w * w + x * x + y * y + z * z
    if n <= np.finfo(np.float64).eps:  # its quat2mat's identity
        return 0.0, 0.0, 0.0
    s = 2.0 / n  # its quat2mat, term by term
    big_x, big_y, big_z = x * s, y * s, z * s
    m00, m01, m02 = 1.0 - (y * big_y + z * big_z), x * big_y - w * big_z, x * big_z + w * big_y
    m10, m11 = x * big_y + w * big_z, 1.0 - (x * big_x + z * big_z)
    m12, m22 = y * big_z - w * big_x, 1.0 - (x * big_x + y * big_y)
    cy = math.sqrt(m22 * m22 + m12 * m12)
    if cy > 4.0 * np.finfo(np.float64).eps:
        return -math.atan2(m12, m22), -math.atan2(-m02, cy), -math.atan2(m01, m00)
    return 0.0, -math.atan2(-m02, cy), -math.atan2(-m10, m11)


def _quat_of(e0: float, e1: float, e2: float) -> tuple[float, float, float, float]:
    """gymnasium-robotics' ``euler2quat`` of one set of angles, in plain floats."""
    si, sj, sk = math.sin(e2 / 2), math.sin(-e1 / 2), math.sin(e0 / 2)
    ci, cj, ck = math.cos(e2 / 2), math.cos(-e1 / 2), math.cos(e0 / 2)
    cc, cs, sc, ss = ci * ck, ci * sk, si * ck, si * sk
    return cj * cc + sj * ss, cj * cs - sj * sc, -(cj * ss + sj * cc), cj * sc - sj * cs


class HandGoalDistance(gym.Wrapper):
    """A ``HandManipulate*`` env whose ``compute_reward`` takes goals of any leading shape.

    Args:
        env: a gymnasium-robotics hand manipulation env (``target_position``,
            ``target_rotation``, ``ignore_z_target_rotation``, ``distance_threshold``,
            ``rotation_threshold`` and ``reward_type`` on its unwrapped env).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        base = env.unwrapped
        needed = ("target_position", "target_rotation", "ignore_z_target_rotation",
                  "distance_threshold", "rotation_threshold", "reward_type")  # fmt: skip
        missing = [name for name in needed if not hasattr(base, name)]
        if missing:
            raise TypeError(
                f"env={base!r} lacks {missing}: HandGoalDistance wraps gymnasium-robotics' "
                "HandManipulate* envs"
            )

    def goal_distance(self, goal_a: Any, goal_b: Any) -> tuple[np.ndarray, np.ndarray]:
        """The position distance and the rotation angle between two goals (or batches of
        goals, shape ``(..., 7)``), as gymnasium-robotics defines them."""
        from gymnasium_robotics.utils import rotations

        base: Any = self.env.unwrapped
        a, b = np.asarray(goal_a, np.float64), np.asarray(goal_b, np.float64)
        if a.shape != b.shape or a.shape[-1:] != (7,):
            raise ValueError(
                f"achieved_goal and desired_goal must have one shape (..., 7), got {a.shape} "
                f"and {b.shape}"
            )
        d_pos = d_rot = np.zeros(a.shape[:-1])
        if base.target_position != "ignore":
            d_pos = np.linalg.norm(a[..., :3] - b[..., :3], axis=-1)
        if base.target_rotation != "ignore":
            quat_a, quat_b = _unit(a[..., 3:]), _unit(b[..., 3:])
            if base.ignore_z_target_rotation:
                euler_a = rotations.quat2euler(quat_a)
                euler_b = rotations.quat2euler(quat_b)
                euler_a[..., 2] = euler_b[..., 2]  # each goal's z angle, not the third goal
                quat_a = rotations.euler2quat(euler_a)
            quat_diff = quat_mul(quat_a, quat_b * np.array([1.0, -1.0, -1.0, -1.0]))
            d_rot = 2 * np.arccos(np.clip(np.abs(quat_diff[..., 0]), 0.0, 1.0))
        return d_pos, d_rot

    def one_distance(self, goal_a: np.ndarray, goal_b: np.ndarray) -> tuple[float, float]:
        """:meth:`goal_distance` of one pair of goals (shape ``(7,)``) in plain floats: a
        step's own comparison, without numpy's cost per call on seven numbers."""
        base: Any = self.env.unwrapped
        a, b = goal_a.tolist(), goal_b.tolist()
        d_pos = d_rot = 0.0
        if base.target_position != "ignore":
            d_pos = math.dist(a[:3], b[:3])
        if base.target_rotation != "ignore":
            qa, qb = a[3:], b[3:]
            na, nb = math.hypot(*qa) or 1.0, math.hypot(*qb) or 1.0
            qa, qb = [q / na for q in qa], [q / nb for q in qb]
            if base.ignore_z_target_rotation:
                ea, eb = _euler_of(*qa), _euler_of(*qb)
                qa = list(_quat_of(ea[0], ea[1], eb[2]))
            w = sum(p * q for p, q in zip(qa, qb, strict=True))  # w of qa times qb's conjugate
            d_rot = 2 * math.acos(min(abs(w), 1.0))
        return d_pos, d_rot

    def is_success(self, achieved_goal: Any, desired_goal: Any) -> np.ndarray:
        """Both distances under the env's thresholds, for goals of any leading shape."""
        base: Any = self.env.unwrapped
        d_pos, d_rot = self.goal_distance(achieved_goal, desired_goal)
        return (d_pos < base.distance_threshold) & (d_rot < base.rotation_threshold)

    def step(self, action: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """The env's step, its reward and ``is_success`` read from :meth:`compute_reward`."""
        obs, _, terminated, truncated, info = self.env.step(action)
        base: Any = self.env.unwrapped
        d_pos, d_rot = self.one_distance(obs["achieved_goal"], obs["desired_goal"])
        success = d_pos < base.distance_threshold and d_rot < base.rotation_threshold
        info = {**info, "is_success": success}
        if base.reward_type == "sparse":  # the success above, measured once
            reward = float(np.float32(success) - np.float32(1.0))
        else:
            reward = self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info)
        return obs, reward, terminated, truncated, info

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        """The env's reward for any batch of goal pairs: sparse ``0`` on success (both
        distances under their thresholds) and ``-1`` otherwise, or the dense
        ``-(10 * position distance + angle)``; float32, of the goals' leading shape."""
        base: Any = self.env.unwrapped
        if base.reward_type == "sparse":
            success = self.is_success(achieved_goal, desired_goal)
            reward = success.astype(np.float32) - np.float32(1.0)
        else:
            d_pos, d_rot = self.goal_distance(achieved_goal, desired_goal)
            reward = (-(10.0 * d_pos + d_rot)).astype(np.float32)
        return reward if reward.ndim else reward.item()


def _make(hand_id: str) -> Any:
    def make(**kwargs: Any) -> gym.Env:
        return HandGoalDistance(gym.make(hand_id, **kwargs).unwrapped)

    make.__doc__ = f"gymnasium-robotics' {hand_id} with :class:`HandGoalDistance`."
    return make


def _register() -> None:
    try:
        import gymnasium_robotics
    except ImportError:
        return  # nothing to fix; a spec naming one of the ids says what to install
    gym.register_envs(gymnasium_robotics)
    for hand_id, spec in list(gym.registry.items()):
        if not hand_id.startswith("HandManipulate") or spec.version is None:
            continue
        name = f"{spec.name}{SUFFIX}-v{spec.version}"
        if name not in gym.registry:
            gym.register(
                name,
                entry_point=_make(hand_id),
                max_episode_steps=spec.max_episode_steps,
                kwargs=dict(spec.kwargs),
            )


_register()
