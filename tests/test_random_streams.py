"""Per-sub-env uniform streams: the numbers equal the generators' own, however read."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import goalenvs  # noqa: F401  (registers the ids)
from goalenvs.envs.random_streams import UniformStreams


def test_streams_hand_out_each_generators_sequence_across_refills_and_growth():
    rngs = [np.random.default_rng(s) for s in range(5)]
    streams = UniformStreams(5)
    read = [[] for _ in range(5)]
    rng = np.random.default_rng(99)
    for count in [3, 3, 1, 40, 2, 700, 5, 5, 300]:  # 700 forces the buffer to grow
        index = np.flatnonzero(rng.random(5) < 0.7)
        out = streams.take(rngs, index, count)
        assert out.shape == (len(index), count)
        for row, i in enumerate(index):
            read[i].extend(out[row])
    for i in range(5):
        np.testing.assert_array_equal(read[i], np.random.default_rng(i).random(len(read[i])))


def test_replaced_generator_restarts_its_stream_only():
    rngs = [np.random.default_rng(s) for s in range(3)]
    streams = UniformStreams(3)
    streams.take(rngs, np.arange(3), 4)
    rngs[1] = np.random.default_rng(7)
    streams.generators_changed()
    out = streams.take(rngs, np.arange(3), 2)
    np.testing.assert_array_equal(out[1], np.random.default_rng(7).random(2))
    np.testing.assert_array_equal(out[0], np.random.default_rng(0).random(6)[4:])


def test_vector_reseed_after_steps_reproduces_the_first_reset():
    envs = gym.make_vec("goalenvs/BitFlipping-v0", num_envs=8)
    first, _ = envs.reset(seed=5)
    envs.action_space.seed(0)
    for _ in range(30):
        envs.step(envs.action_space.sample())
    again, _ = envs.reset(seed=5)
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])
