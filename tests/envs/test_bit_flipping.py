"""BitFlipping: the HER paper's task, its episode length, goals, actions and drawing."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import goalenvs  # noqa: F401  (registers the ids)
from goalenvs.envs.bit_flipping import (
    BitFlippingEnv,
    BitFlippingParams,
    BitFlippingVectorEnv,
    bits_match,
    draw_episodes,
    random_patterns,
)


def _episode_length(env: gym.Env, action) -> tuple[int, bool, bool]:
    steps = 0
    while True:
        steps += 1
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return steps, terminated, truncated


@pytest.mark.parametrize("n_bits", [1, 3, 10, 50])
def test_episode_lasts_n_bits_steps_whatever_n_bits_is(n_bits):
    env = gym.make("goalenvs/BitFlipping-v0", n_bits=n_bits)
    obs, _ = env.reset(seed=0)
    assert obs["observation"].shape == (n_bits,)
    # Flipping bit 0 twice restores it: with a goal differing elsewhere, no success.
    goal = obs["achieved_goal"].copy()
    goal[-1] = 1.0 - goal[-1]
    if n_bits > 1:
        env.reset(seed=0, options={"goal": goal})
        steps, terminated, truncated = _episode_length(env, 0)
        assert (steps, terminated, truncated) == (n_bits, False, True)

    envs = gym.make_vec("goalenvs/BitFlipping-v0", num_envs=2, n_bits=n_bits)
    assert envs.max_episode_steps == n_bits


def test_max_episode_steps_argument_overrides_n_bits():
    # gym.make consumes max_episode_steps itself (a TimeLimit); the env takes it directly
    # and gym.make_vec passes it through.
    env = BitFlippingEnv(n_bits=4, max_episode_steps=7)
    env.reset(seed=0, options={"goal": [1.0, 1.0, 1.0, 1.0]})
    env._state[0] = [0.0, 0.0, 0.0, 0.0]  # flipping bit 0 alone never succeeds
    assert _episode_length(env, 0) == (7, False, True)
    envs = gym.make_vec("goalenvs/BitFlipping-v0", num_envs=2, n_bits=4, max_episode_steps=7)
    assert envs.max_episode_steps == 7


def test_random_goal_differs_from_start_and_fixed_goal_is_all_ones():
    env = BitFlippingEnv(n_bits=2)
    goals = set()
    for seed in range(200):
        obs, _ = env.reset(seed=seed)
        assert not np.array_equal(obs["achieved_goal"], obs["desired_goal"])
        goals.add(tuple(obs["desired_goal"]))
    assert len(goals) == 4  # every pattern is a goal for some start

    env = BitFlippingEnv(n_bits=1)
    for seed in range(20):
        obs, _ = env.reset(seed=seed)
        assert obs["achieved_goal"][0] == 1.0 - obs["desired_goal"][0]

    env = BitFlippingEnv(n_bits=5, fixed_goal=True)
    for seed in range(50):
        obs, _ = env.reset(seed=seed)
        np.testing.assert_array_equal(obs["desired_goal"], np.ones(5))
        assert obs["achieved_goal"].sum() < 5


@pytest.mark.parametrize("fixed_goal", [False, True])
def test_draw_episodes_is_the_same_batched_or_one_at_a_time(fixed_goal):
    # Three bits: an eighth of the starts equal their goal, so some episodes redraw.
    params = BitFlippingParams(n_bits=3, fixed_goal=fixed_goal)
    batched = draw_episodes([np.random.default_rng(s) for s in range(40)], params, None)
    for i in range(40):
        alone = draw_episodes([np.random.default_rng(i)], params, None)
        np.testing.assert_array_equal(batched[0][i], alone[0][0])
        np.testing.assert_array_equal(batched[1][i], alone[1][0])
    assert not bits_match(*batched, np).any()
    # The draws come straight from each generator: what a redraw-free episode reads.
    first = random_patterns([np.random.default_rng(0)], 3, 2)[0]
    if not fixed_goal and not np.array_equal(first[0], first[1]):
        np.testing.assert_array_equal(np.stack([batched[0][0], batched[1][0]]), first)


class _Words:
    """A stand-in generator whose raw 64-bit words are given."""

    def __init__(self, words: list[int]) -> None:
        self.bit_generator = self
        self.words = np.array(words, np.uint64)

    def random_raw(self, size: int) -> np.ndarray:
        out, self.words = self.words[:size], self.words[size:]
        return out


def test_random_patterns_read_low_bits_first_across_words():
    np.testing.assert_array_equal(random_patterns([_Words([0b1011])], 4, 1), [[[1, 1, 0, 1]]])
    wide = random_patterns([_Words([1 << 63, 1])], 65, 1)
    assert wide.shape == (1, 1, 65) and wide.dtype == np.float32
    np.testing.assert_array_equal(np.flatnonzero(wide[0, 0]), [63, 64])


def test_discrete_action_flips_exactly_that_bit_and_success_pays_zero():
    env = BitFlippingEnv(n_bits=4)
    obs, _ = env.reset(seed=0, options={"goal": [1.0, 0.0, 1.0, 0.0]})
    state = obs["observation"].copy()
    wrong = int(np.flatnonzero(state != obs["desired_goal"])[0])
    obs, reward, terminated, _, info = env.step(wrong)
    state[wrong] = 1.0 - state[wrong]
    np.testing.assert_array_equal(obs["observation"], state)
    while not terminated:
        wrong = int(np.flatnonzero(obs["achieved_goal"] != obs["desired_goal"])[0])
        obs, reward, terminated, _, info = env.step(np.int64(wrong))
        assert reward == (0.0 if terminated else -1.0)
    assert info["is_success"] is True and reward == 0.0
    np.testing.assert_array_equal(obs["achieved_goal"], [1.0, 0.0, 1.0, 0.0])


def test_continuous_action_flips_every_positive_bit_and_clips_finite_overshoot():
    env = BitFlippingEnv(n_bits=4, continuous=True)
    obs, _ = env.reset(seed=0)
    state = obs["observation"]
    action = np.array([0.5, -0.5, 7.0, 0.0], np.float32)  # 7.0 clips to 1.0: still a flip
    obs, *_ = env.step(action)
    np.testing.assert_array_equal(
        obs["observation"], [1 - state[0], state[1], 1 - state[2], state[3]]
    )
    obs2, *_ = env.step(np.full(4, -3.0, np.float32))
    np.testing.assert_array_equal(obs2["observation"], obs["observation"])


def test_compute_reward_matches_sb3_semantics_on_a_batch():
    env = BitFlippingEnv(n_bits=3)
    achieved = np.array([[0, 1, 1], [1, 1, 1], [0, 0, 0]], np.float32)
    desired = np.array([[0, 1, 1], [1, 0, 1], [0, 0, 0]], np.float32)
    np.testing.assert_array_equal(env.compute_reward(achieved, desired, [{}] * 3), [0, -1, 0])
    np.testing.assert_array_equal(env.compute_terminated(achieved, desired, None), [1, 0, 1])
    # integer goals (MultiBinary-style input) are accepted
    assert env.compute_reward(np.array([1, 0, 1]), np.array([1, 0, 1]), {}) == 0.0


def test_reset_goal_must_be_bits():
    env = BitFlippingEnv(n_bits=3)
    with pytest.raises(ValueError, match=r"only bits \(0 or 1\)"):
        env.reset(options={"goal": [0.5, 1.0, 0.0]})


def test_vector_explicit_resets_follow_single_envs():
    # Explicit resets (a pinned goal, a partial reseed, a masked reset) draw from each
    # sub-env's own generator exactly what the single envs draw.
    n, n_bits = 3, 4
    envs = BitFlippingVectorEnv(num_envs=n, n_bits=n_bits, autoreset_mode="disabled")
    singles = [BitFlippingEnv(n_bits=n_bits) for _ in range(n)]
    goal = np.array([1.0, 0.0, 1.0, 0.0], np.float32)
    rng = np.random.default_rng(0)

    def check(vector_obs, single_obs):
        np.testing.assert_equal(
            vector_obs, {k: np.stack([o[k] for o in single_obs]) for k in vector_obs}
        )

    check(envs.reset(seed=9)[0], [env.reset(seed=9 + i)[0] for i, env in enumerate(singles)])
    for _ in range(3):
        actions = rng.integers(0, n_bits, n)
        vector_obs, *_ = envs.step(actions)
        check(vector_obs, [env.step(int(a))[0] for env, a in zip(singles, actions, strict=True)])
        check(
            envs.reset(options={"goal": goal})[0],
            [env.reset(options={"goal": goal})[0] for env in singles],
        )
        check(
            envs.reset(seed=[None, 4, None])[0],
            [env.reset(seed=4 if i == 1 else None)[0] for i, env in enumerate(singles)],
        )
        mask = np.array([True, False, True])
        vector_obs, _ = envs.reset(options={"reset_mask": mask})
        for i in np.flatnonzero(mask):
            np.testing.assert_equal({k: v[i] for k, v in vector_obs.items()}, singles[i].reset()[0])


# --------------------------------------------------------------------------- rendering


def test_frame_shows_state_over_goal_with_mismatches_outlined():
    env = BitFlippingEnv(n_bits=6, render_mode="rgb_array")
    goal = np.array([1, 1, 0, 0, 1, 0], np.float32)
    obs, _ = env.reset(seed=0, options={"goal": goal})
    frame = env.render()
    state = obs["observation"]
    colours = {}
    for bit in range(6):
        for kind, value in (("state", state[bit]), ("goal", goal[bit])):
            column, row = env.cell_pixel(bit, goal=kind == "goal")
            seen = tuple(frame[row, column])
            assert colours.setdefault((kind, value), seen) == seen  # one colour per kind/value
        # The cell's edge (just inside its left border) is red exactly where bits differ.
        left = env.cell_pixel(bit)[0] - env._layout.cell // 2 + 1
        red = tuple(frame[env.cell_pixel(bit)[1], left]) == (220, 40, 40)
        assert red == (state[bit] != goal[bit])
    assert len(set(colours.values())) == len(colours)  # on/off, state/goal all distinct


def test_bit_at_pixel_inverts_cell_pixel_and_is_none_elsewhere():
    env = BitFlippingEnv(n_bits=12, render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    for bit in range(12):
        assert env.bit_at_pixel(*env.cell_pixel(bit)) == bit
        assert env.bit_at_pixel(*env.cell_pixel(bit, goal=True)) == bit
        assert env.action_at_pixel(*env.cell_pixel(bit)) == bit
    assert env.bit_at_pixel(0, 0) is None  # heads-up text
    assert env.bit_at_pixel(frame.shape[1] - 1, frame.shape[0] - 1) is None
    assert env.action_at_pixel(0, 0) is None


def test_keys_flip_bits_one_to_nine_zero_then_letters():
    import pygame

    env = BitFlippingEnv(n_bits=12)
    keys = env.get_keys_to_action()
    assert keys[(pygame.K_1,)] == 0 and keys[(pygame.K_9,)] == 8
    assert keys[(pygame.K_0,)] == 9 and keys[(pygame.K_a,)] == 10 and keys[(pygame.K_b,)] == 11
    assert len(keys) == 12
