"""Keyboard play, recording and human windows on the registered goalenvs envs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import goalenvs
from goalenvs.envs.canvas import Window
from goalenvs.play.keyboard import drive

pygame = pytest.importorskip("pygame")


class LastObs(gym.Wrapper):
    """Keeps the first observation of the last reset and the latest observation."""

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        self.start = self.last = obs
        return obs, info

    def step(self, action: Any):
        out = self.env.step(action)
        self.last = out[0]
        return out


def key(kind: int, code: int) -> Any:
    return pygame.event.Event(kind, key=code)


@pytest.fixture
def window():
    win = Window((64, 64), "test")
    win.open()
    pygame.event.clear()
    yield win
    win.close()


@pytest.mark.parametrize(
    ("arrow", "direction"),
    [("K_RIGHT", (1, 0)), ("K_LEFT", (-1, 0)), ("K_UP", (0, 1)), ("K_DOWN", (0, -1))],
)
def test_arrow_key_accelerates_the_point_reach_point_that_way(window, arrow, direction):
    env = LastObs(gym.make("goalenvs/PointReach-v0", render_mode="rgb_array"))
    pygame.event.post(key(pygame.KEYDOWN, getattr(pygame, arrow)))
    drive(env, window=window, frames=3, fps=1000, seed=3, verbose=False)
    moved = env.last["achieved_goal"] - env.start["achieved_goal"]
    velocity = env.last["observation"][2:] - env.start["observation"][2:]
    assert np.dot(moved, direction) > 0.01
    assert np.dot(velocity, direction) > 0.1
    assert abs(velocity[0] * direction[1] - velocity[1] * direction[0]) < 1e-6  # none across
    env.close()


@pytest.mark.parametrize("env_id", ["goalenvs/BitFlipping-v0", "goalenvs/BitFlippingContinuous-v0"])
def test_number_key_and_click_flip_the_chosen_bits_and_the_window_shows_them(env_id):
    env = LastObs(gym.make(env_id, render_mode="rgb_array", n_bits=12))
    env.reset(seed=0)
    window = Window(env.render().shape[1::-1], "test")  # the frame's (width, height)
    window.open()
    pygame.event.clear()
    column, row = env.unwrapped.cell_pixel(10)
    pygame.event.post(key(pygame.KEYDOWN, pygame.K_3))
    pygame.event.post(key(pygame.KEYUP, pygame.K_3))
    pygame.event.post(key(pygame.KEYDOWN, pygame.K_b))  # the 12th key: 1..9, 0, a, b
    pygame.event.post(pygame.event.Event(pygame.MOUSEBUTTONDOWN, button=1, pos=(column, row)))
    drive(env, window=window, frames=2, fps=1000, seed=0, verbose=False)
    flipped = np.flatnonzero(env.last["achieved_goal"] != env.start["achieved_goal"])
    assert flipped.tolist() == [2, 10, 11]
    shown = np.transpose(pygame.surfarray.array3d(pygame.display.get_surface()), (1, 0, 2))
    np.testing.assert_array_equal(shown, env.render())  # the frame after the last step
    window.close()
    env.close()


def test_up_arrow_drives_the_parking_car_forward(window):
    env = LastObs(gym.make("goalenvs/Parking-v0", render_mode="rgb_array"))
    pygame.event.post(key(pygame.KEYDOWN, pygame.K_UP))
    drive(env, window=window, frames=4, fps=1000, seed=0, verbose=False)
    start, last = env.start["achieved_goal"], env.last["achieved_goal"]
    heading = start[4:6]  # (cos, sin) of the heading
    assert np.dot(last[:2] - start[:2], heading) > 0
    env.close()


@pytest.mark.parametrize("env_id", goalenvs.ENV_IDS)
def test_human_mode_opens_and_closes_a_window(env_id):
    env = gym.make(env_id, render_mode="human")
    env.reset(seed=0)
    env.step(env.action_space.sample())
    assert pygame.display.get_init()
    shown = pygame.display.get_surface()
    assert shown is not None
    pixels = pygame.surfarray.array3d(shown)
    assert pixels.std() > 0  # the env's frame, not an empty window
    assert env.render() is None  # human mode shows the frame, returns nothing
    env.close()
    assert not pygame.display.get_init()
