"""``goalenvs play``: keyboard control (of the registered envs too), watching a policy,
recording, human windows and bad input."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from goalenvs import ENV_IDS, play
from goalenvs.cli import main as cli_main
from goalenvs.core import GoalEnv, goal_dict_space
from goalenvs.envs.bit_flipping import BitFlippingEnv
from goalenvs.envs.canvas import Canvas, Window
from goalenvs.play.keyboard import (
    RESET,
    KeyboardController,
    drive,
    keyboard_controller,
    normalize_keys_to_action,
)
from goalenvs.play.screen import EpisodeStats, PlayError, Recorder
from goalenvs.play.watch import watch
from tests.console import refused
from tests.train.runs import TINY

pygame = pytest.importorskip("pygame")
Image = pytest.importorskip("PIL.Image")
ImageSequence = pytest.importorskip("PIL.ImageSequence")

DOT_ID = "playtest/Dot-v0"
NO_RGB_ID = "playtest/NoRgb-v0"


class DotEnv(GoalEnv):
    """A point that moves 0.1 per step in the direction of its action; goal radius 0.05."""

    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 30}

    def __init__(self, render_mode: str | None = None) -> None:
        box = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = goal_dict_space(box, box)
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.render_mode = render_mode
        self.canvas: Canvas | None = None
        self.position, self.goal, self.steps = np.zeros(2), np.zeros(2), 0

    def _obs(self) -> dict[str, np.ndarray]:
        p, goal = self.position.astype(np.float32), self.goal.copy()
        return {"observation": p.copy(), "achieved_goal": p.copy(), "desired_goal": goal}

    def compute_reward(self, achieved_goal, desired_goal, info):
        return self.compute_terminated(achieved_goal, desired_goal, info).astype(np.float32) - 1

    def compute_terminated(self, achieved_goal, desired_goal, info):
        return np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1) <= 0.05

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = np.zeros(2)
        goal = (options or {}).get("goal", self.np_random.uniform(-0.8, 0.8, 2))
        self.goal = np.asarray(goal, np.float32)
        self.steps = 0
        return self._obs(), {"is_success": False}

    def step(self, action):
        self.position = np.clip(self.position + 0.1 * np.asarray(action), -1, 1)
        self.steps += 1
        obs = self._obs()
        done = bool(self.compute_terminated(obs["achieved_goal"], obs["desired_goal"], None))
        if self.render_mode == "human":
            self.render()
        return obs, float(done) - 1.0, done, False, {"is_success": done}  # -1 until reached

    def render(self):
        if self.canvas is None:
            self.canvas = Canvas((100, 100), (-1, 1, -1, 1))
        self.canvas.clear()
        self.canvas.circle(self.goal, 0.05, (0, 200, 0))
        self.canvas.circle(self.position, 0.05, (200, 0, 0))
        self.canvas.text(f"step {self.steps}", (2, 2), size=14)
        if self.render_mode == "human":
            self.canvas.show(self.metadata["render_fps"])
            return None
        return self.canvas.rgb_array()

    def close(self):
        if self.canvas is not None:
            self.canvas.close()

    def get_keys_to_action(self) -> dict[tuple[int, ...], np.ndarray]:
        arrows = {"LEFT": [-1, 0], "RIGHT": [1, 0], "UP": [0, 1], "DOWN": [0, -1]}
        return {(getattr(pygame, f"K_{k}"),): np.array(a, np.float32) for k, a in arrows.items()}


class NoRgbEnv(DotEnv):
    metadata = {"render_modes": ["human"], "render_fps": 30}


for env_id, entry_point in ((DOT_ID, DotEnv), (NO_RGB_ID, NoRgbEnv)):
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=entry_point, max_episode_steps=20)


def key(kind: int, code: int) -> Any:
    return pygame.event.Event(kind, key=code)


def click(pos: tuple[int, int], button: int = 1) -> Any:
    return pygame.event.Event(pygame.MOUSEBUTTONDOWN, button=button, pos=pos)


def post(*events: Any) -> None:
    for event in events:
        pygame.event.post(event)


@pytest.fixture
def dot_controller():
    env = DotEnv()
    return KeyboardController(env.action_space, env.get_keys_to_action())


@pytest.fixture
def window():
    win = Window((100, 100), "test")
    win.open()
    pygame.event.clear()
    yield win
    win.close()


# --------------------------------------------------------------------------- key mapping


def test_keys_to_action_accepts_gymnasium_play_formats():
    mapping = normalize_keys_to_action({"a": 0, (pygame.K_UP, "w"): 1, "sd": 2, pygame.K_x: 3})
    assert mapping == {
        (ord("a"),): 0,
        tuple(sorted((pygame.K_UP, ord("w")))): 1,
        (ord("d"), ord("s")): 2,
        (pygame.K_x,): 3,
    }
    with pytest.raises(TypeError, match="one-character strings"):
        normalize_keys_to_action({("up",): 0})
    with pytest.raises(TypeError, match="non-empty dict"):
        normalize_keys_to_action({})


def test_held_keys_set_the_continuous_action_and_combine(dot_controller):
    controller = dot_controller
    assert not controller.turn_based
    down, up = pygame.KEYDOWN, pygame.KEYUP
    for events, expected in [
        ([], [0.0, 0.0]),
        ([(down, pygame.K_UP)], [0.0, 1.0]),
        ([], [0.0, 1.0]),  # still held
        ([(down, pygame.K_LEFT)], [-1.0, 1.0]),  # no combo entry: summed
        ([(down, pygame.K_RIGHT)], [0.0, 1.0]),  # left and right cancel
        ([(up, pygame.K_UP), (up, pygame.K_LEFT), (down, pygame.K_a)], [1.0, 0.0]),  # a: unmapped
    ]:
        (action,) = controller.process([key(*event) for event in events]).actions
        np.testing.assert_array_equal(action, expected)
        assert action.dtype == np.float32


def test_losing_focus_releases_the_held_keys(dot_controller):
    dot_controller.process([key(pygame.KEYDOWN, pygame.K_UP)])
    (action,) = dot_controller.process([pygame.event.Event(pygame.WINDOWFOCUSLOST)]).actions
    np.testing.assert_array_equal(action, [0.0, 0.0])


def test_reset_and_quit_keys(dot_controller):
    controller = dot_controller
    command = controller.process([key(pygame.KEYDOWN, pygame.K_r)])
    assert command.reset and not command.quit
    assert command.actions[0] == RESET and len(command.actions) == 2
    assert controller.process([key(pygame.KEYDOWN, pygame.K_ESCAPE)]).quit
    quit_command = controller.process([pygame.event.Event(pygame.QUIT)])
    assert quit_command.quit and quit_command.actions == []


def test_reset_key_r_yields_to_an_env_that_maps_r():
    controller = KeyboardController(spaces.Discrete(2), {"q": 0, "r": 1})
    command = controller.process([key(pygame.KEYDOWN, pygame.K_r)])
    assert command.actions == [1] and not command.reset
    assert controller.process([key(pygame.KEYDOWN, pygame.K_BACKSPACE)]).reset
    assert "Backspace: reset" in controller.controls()


def test_turn_based_keys_and_clicks_send_one_action_each():
    env = BitFlippingEnv(n_bits=4, render_mode="rgb_array")
    controller = keyboard_controller(env)
    assert controller.turn_based
    assert controller.process([]).actions == []
    events = [
        key(pygame.KEYDOWN, pygame.K_3),
        key(pygame.KEYUP, pygame.K_3),
        click(env.cell_pixel(3)),
        click((0, 0)),  # off the bits
        click(env.cell_pixel(1), button=3),  # the right button
    ]
    assert controller.process(events).actions == [2, 3]
    assert controller.process([]).actions == []  # a held key does not repeat


def test_click_sends_the_envs_action_at_that_pixel_and_makes_box_envs_turn_based():
    env = gym.make("goalenvs/BitFlippingContinuous-v0", n_bits=4, render_mode="rgb_array")
    controller = keyboard_controller(env)
    assert controller.turn_based and "click" in controller.controls()
    on_bit = click(env.unwrapped.cell_pixel(2, goal=True))
    (action,) = controller.process([on_bit, click((0, 0))]).actions  # the second off the bits
    np.testing.assert_array_equal(action, [-1, -1, 1, -1])
    assert action.dtype == np.float32
    # An env without the hook: clicks do nothing and Box actions follow held keys.
    plain = KeyboardController(spaces.Box(-1, 1, (4,), np.float32), {"1": np.ones(4, np.float32)})
    assert not plain.turn_based and "click" not in plain.controls()
    (held,) = plain.process([on_bit]).actions
    np.testing.assert_array_equal(held, np.zeros(4))


# --------------------------------------------------------------------------- scripted play


def test_posted_arrow_key_moves_the_point_in_the_pressed_direction(window):
    env = gym.make(DOT_ID, render_mode="rgb_array")
    post(key(pygame.KEYDOWN, pygame.K_RIGHT))
    drive(env, window=window, frames=5, fps=1000, seed=0, verbose=False)
    np.testing.assert_allclose(env.unwrapped.position, [0.5, 0.0])
    post(key(pygame.KEYUP, pygame.K_RIGHT), key(pygame.KEYDOWN, pygame.K_DOWN))
    drive(env, window=window, frames=3, fps=1000, seed=0, verbose=False)
    np.testing.assert_allclose(env.unwrapped.position, [0.0, -0.3])
    env.close()


def test_drive_counts_finished_episodes_and_resets(window):
    # drive's resets replayed on a second env: seeded, then unseeded after an episode or R.
    ref = BitFlippingEnv(n_bits=4)
    first, second, third = ref.reset(seed=0)[0], ref.reset()[0], ref.reset()[0]
    wrong = np.flatnonzero(first["achieved_goal"] != first["desired_goal"])
    right = np.flatnonzero(second["achieved_goal"] == second["desired_goal"])
    post(*[key(pygame.KEYDOWN, pygame.K_1 + int(bit)) for bit in wrong])  # solves the first
    post(key(pygame.KEYDOWN, pygame.K_1 + int(right[0])), key(pygame.KEYDOWN, pygame.K_r))
    env = gym.make("goalenvs/BitFlipping-v0", n_bits=4, render_mode="rgb_array")
    stats = drive(env, window=window, frames=3, fps=1000, seed=0, verbose=False)
    assert stats.lengths == [len(wrong)] and stats.successes == [True]
    assert stats.returns == [1.0 - len(wrong)]  # -1 a step, 0 for the one that succeeds
    # The second episode, one step in, was not counted: R reset it to the third.
    np.testing.assert_array_equal(env.unwrapped._state[0], third["observation"])
    env.close()


def test_drive_ends_an_episode_at_the_declared_length_the_env_ignores(window, capsys):
    class Declares(DotEnv):
        max_episode_steps = 6  # declared, but step() never truncates

    env = Declares(render_mode="rgb_array")
    stats = drive(env, window=window, frames=8, fps=1000, seed=0)
    assert stats.lengths == [6] and stats.successes == [False]
    out = capsys.readouterr().out
    assert "episode 1 stopped after 6 steps: the episode length 6 passed" in out
    env.close()


def test_escape_ends_drive_and_its_own_window_closes():
    env = gym.make(DOT_ID, render_mode="rgb_array")
    win = Window((100, 100))
    win.open()
    post(key(pygame.KEYDOWN, pygame.K_UP))
    drive(env, window=win, frames=2, fps=1000, verbose=False)
    post(key(pygame.KEYDOWN, pygame.K_ESCAPE))
    frames = []
    recorder = SimpleNamespace(add=frames.append)  # keeps the frames it is handed
    drive(env, window=win, frames=50, fps=1000, recorder=recorder, verbose=False)
    np.testing.assert_allclose(env.unwrapped.position, [0.0, 0.0])  # reset, then quit
    assert len(frames) == 1  # the reset's frame only: Esc stopped it before a step
    assert win.is_open  # a window passed in stays open
    # With no window given, drive makes its own and closes it when Esc ends the loop.
    post(key(pygame.KEYDOWN, pygame.K_DOWN), key(pygame.KEYDOWN, pygame.K_ESCAPE))
    frames.clear()
    drive(env, frames=50, fps=1000, recorder=recorder, verbose=False)
    assert len(frames) == 1
    assert Window._owner is None and not pygame.display.get_init()
    assert not win.is_open  # the one display went with it
    win.close()
    env.close()


# --------------------------------------------------------------------------- the registered envs


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


@pytest.mark.parametrize("env_id", ENV_IDS)
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


# --------------------------------------------------------------------------- watch


def toward_goal(obs: dict[str, np.ndarray]) -> np.ndarray:
    delta = obs["desired_goal"] - obs["achieved_goal"]
    return np.clip(delta / 0.1, -1, 1).astype(np.float32)


def test_watch_reports_success_return_and_lengths(capsys):
    env = gym.make(DOT_ID, render_mode="rgb_array")
    env.unwrapped.reset(options={"goal": [0.3, 0.0]})
    real_reset = env.unwrapped.reset
    env.unwrapped.reset = lambda seed=None, options=None: real_reset(
        seed=seed, options={"goal": [0.3, 0.0]}
    )
    stats = watch(env, toward_goal, episodes=2, show=False)
    # 0.0 -> 0.1 -> 0.2 -> 0.3: three steps, rewards -1, -1, 0.
    assert stats.lengths == [3, 3]
    assert stats.returns == [-2.0, -2.0]
    assert stats.success_rate == 1.0 and stats.mean_return == -2.0
    stats = watch(env, lambda obs: np.zeros(2, np.float32), episodes=3, show=False)
    assert stats.lengths == [20, 20, 20]  # the registered time limit
    assert stats.success_rate == 0.0 and stats.mean_return == -20.0
    out = capsys.readouterr().out
    assert "episode 3: return -20.00, length 20, success False" in out
    assert "success rate 0.0% (0/3), mean return -20.00 +/- 0.00" in out
    assert "success rate 100.0% (2/2)" in out


def test_watch_shows_frames_in_a_window_and_stops_on_escape(window):
    env = gym.make(DOT_ID, render_mode="rgb_array")
    post(key(pygame.KEYDOWN, pygame.K_ESCAPE))
    stats = watch(env, lambda obs: np.zeros(2, np.float32), episodes=5, window=window, fps=1000)
    assert stats.episodes == 0  # stopped inside the first episode
    assert window.is_open  # a window passed in stays open
    env.close()


def test_watch_leaves_a_human_mode_env_to_draw_its_own_window():
    env = gym.make(DOT_ID, render_mode="human")
    stats = watch(env, toward_goal, episodes=1, seed=0, fps=1000, verbose=False)
    assert stats.episodes == 1
    assert env.unwrapped.canvas.window.is_open  # the env's own window, not one of ours
    env.close()
    assert not pygame.display.get_init()


def test_watch_refuses_bad_episodes_and_recording_an_env_without_frames(tmp_path):
    with pytest.raises(PlayError, match="recording needs the env made with render_mode='rgb_a"):
        watch(gym.make(DOT_ID), toward_goal, record=tmp_path / "x.gif")
    with pytest.raises(ValueError, match="episodes must be a positive integer, got 0"):
        watch(gym.make(DOT_ID), toward_goal, episodes=0)


def test_recorder_rejects_frames_that_are_not_rgb_uint8(tmp_path):
    recorder = Recorder(tmp_path / "x.gif", 10)
    with pytest.raises(ValueError, match=r"\(H, W, 3\) uint8 arrays, got shape \(4, 4\) uint8"):
        recorder.add(np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="float64"):
        recorder.add(np.zeros((4, 4, 3)))
    assert recorder.close() == 0 and not (tmp_path / "x.gif").exists()


def test_episode_stats_of_no_episode_are_nan():
    stats = EpisodeStats()
    assert np.isnan(stats.success_rate) and np.isnan(stats.mean_return)
    assert stats.summary() == "no episode finished"


# --------------------------------------------------------------------------- recording


def gif_frames(path) -> list[np.ndarray]:
    with Image.open(path) as gif:
        return [np.asarray(frame.convert("RGB")) for frame in ImageSequence.Iterator(gif)]


def test_watch_records_one_gif_frame_per_reset_and_step(tmp_path):
    env = gym.make(DOT_ID, render_mode="rgb_array")
    out = tmp_path / "dot.gif"
    # Seeded: an unseeded goal lands on the dot's straight path (x ~ 0) about 6% of the time.
    stats = watch(env, lambda obs: np.array([0, 1], np.float32), 2, record=out, show=False, seed=0)
    assert stats.lengths == [20, 20]
    frames = gif_frames(out)
    assert len(frames) == 2 * (20 + 1)
    assert frames[0].shape == (100, 100, 3)
    # The point (red) climbs 5 pixels per step from the centre.
    red = [np.argwhere((f == (200, 0, 0)).all(-1))[:, 0].mean() for f in frames[:3]]
    np.testing.assert_allclose(np.diff(red), [-5, -5], atol=0.5)


def test_cli_keyboard_play_records_a_gif(tmp_path, capsys):
    out = tmp_path / "drive.gif"
    pygame.display.init()
    pygame.display.set_mode((10, 10))
    post(key(pygame.KEYDOWN, pygame.K_UP))
    # Seeded: an unseeded goal can land on the dot's path and end the episode early.
    argv = ["play", DOT_ID, "--record", str(out), "--episodes", "1", "--fps", "1000", "--seed", "0"]
    rc = cli_main(argv)
    assert rc == 0
    captured = capsys.readouterr().out
    assert "keys: left, right, up, down (hold to act); R or Backspace: reset; Esc: quit" in captured
    assert f"recorded 21 frames to {out}" in captured
    assert len(gif_frames(out)) == 21
    assert not pygame.display.get_init()


def test_recorder_rejects_bad_paths_before_playing(tmp_path):
    with pytest.raises(PlayError, match=r"expected a file ending in \.gif or \.mp4"):
        Recorder(tmp_path / "out.avi", 30)
    with pytest.raises(PlayError, match="cannot be written"):
        Recorder(tmp_path / "missing" / "out.gif", 30)
    (tmp_path / "taken.gif").mkdir()
    with pytest.raises(PlayError, match="is a directory"):
        Recorder(tmp_path / "taken.gif", 30)
    Recorder(tmp_path / "fine.gif", 30)
    # The writability probe leaves nothing behind.
    assert [p.name for p in tmp_path.iterdir()] == ["taken.gif"]


def test_mp4_needs_an_encoder_or_records(tmp_path):
    import importlib.util

    if importlib.util.find_spec("imageio_ffmpeg") is None:
        with pytest.raises(PlayError, match="pip install imageio imageio-ffmpeg"):
            Recorder(tmp_path / "out.mp4", 30)
    else:
        recorder = Recorder(tmp_path / "out.mp4", 30)
        for i in range(3):
            recorder.add(np.full((16, 16, 3), 80 * i, np.uint8))
        assert recorder.close() == 3 and (tmp_path / "out.mp4").stat().st_size > 0


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["goalenvs/NoSuchEnv-v0"], "unknown env id 'goalenvs/NoSuchEnv-v0'"),
        ([NO_RGB_ID], f"{NO_RGB_ID} has no 'rgb_array' render mode (it offers ['human'])"),
        ([DOT_ID, "--record", "/nonexistent-dir/out.gif"], "cannot be written"),
        ([DOT_ID, "--record", "out.webm"], "expected a file ending in .gif or .mp4"),
        ([DOT_ID, "--env-kwargs", "{bad"], "--env-kwargs '{bad' is not valid JSON"),
        ([DOT_ID, "--env-kwargs", "[1]"], "must be a JSON object"),
        ([DOT_ID, "--env-kwargs", '{"size": 3}'], 'rejected --env-kwargs {"size": 3}'),
        ([DOT_ID, "--headless"], "--headless needs --policy PATH"),
        ([DOT_ID, "--fps", "0"], "--fps must be a positive integer, got 0"),
        (["--policy", "/nonexistent/policy.pt"], "--policy '/nonexistent/policy.pt': no such file"),
        ([], "give an ENV_ID to drive, or --policy PATH to watch"),
    ],
)
def test_bad_input_prints_one_error_line_and_exits_2(capsys, argv, message):
    assert message in refused(capsys, "play", *argv)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, str]:
    """Real policies from one-epoch training runs (a second each): DDPG on the Dot env and
    on PointReach, DQN on BitFlipping with 2 bits (Dot's observation sizes, discrete
    actions)."""
    pytest.importorskip("torch")
    from goalenvs.agents.ddpg import DDPGConfig
    from goalenvs.agents.dqn import DQNConfig
    from goalenvs.train.trainer import Trainer

    def tiny(config_class: Any, env_id: str, **kwargs: Any) -> str:
        out = str(tmp_path_factory.mktemp("run"))
        config = config_class(env_id=env_id, out=out, **{**TINY, **kwargs})
        return str(Trainer(config).run().latest_policy)

    return {
        "dot": tiny(DDPGConfig, DOT_ID),
        "point_reach": tiny(DDPGConfig, "goalenvs/PointReach-v0"),
        "bits": tiny(DQNConfig, "goalenvs/BitFlipping-v0", env_kwargs={"n_bits": 2}),
    }


def test_policy_of_other_spaces_is_refused_with_one_line(capsys, checkpoints):
    err = refused(capsys, "play", DOT_ID, "--policy", checkpoints["bits"], "--headless")
    assert "does not match playtest/Dot-v0: it was trained on goalenvs/BitFlipping-v0" in err
    assert "whose action_space is Discrete(2); this env's is Box(-1.0, 1.0, (2,), float32)" in err


def test_policy_spaces_are_compared_key_by_key(capsys, checkpoints):
    err = refused(capsys, "play", DOT_ID, "--policy", checkpoints["point_reach"], "--headless")
    assert "trained on goalenvs/PointReach-v0, " in err
    assert "whose observation_space['observation'] is Box(-1.0, 1.0, (4,), float32); " in err
    assert "this env's is Box(-1.0, 1.0, (2,), float32)" in err


@pytest.mark.parametrize(("name", "longest"), [("dot", 20), ("bits", 2)])
def test_cli_watches_a_policy_named_by_its_checkpoint(name, longest, capsys, checkpoints, tmp_path):
    # The checkpoint names its env, its env kwargs and its time limit: Dot's 20-step limit,
    # and BitFlipping's n_bits=2 (the default 10 bits would not fit the policy) bound them.
    out = tmp_path / "watch.gif"
    argv = ["play", checkpoints[name], "--headless", "--episodes", "2", "--record", str(out)]
    assert cli_main([*argv, "--seed", "0"]) == 0
    printed = capsys.readouterr().out
    lengths = [int(n) for n in re.findall(r"^episode \d+: .*length (\d+),", printed, re.M)]
    assert len(lengths) == 2 and all(1 <= n <= longest for n in lengths)
    assert "2 episodes: success rate" in printed
    assert f"recorded {sum(lengths) + 2} frames" in printed
    assert len(gif_frames(out)) == sum(lengths) + 2


def test_a_checkpoint_for_other_env_kwargs_is_refused_in_one_line(checkpoints, capsys):
    argv = ["goalenvs/BitFlipping-v0", "--policy", checkpoints["bits"], "--headless"]
    err = refused(capsys, "play", *argv, "--env-kwargs", '{"n_bits": 6}')
    assert "does not match goalenvs/BitFlipping-v0" in err
    assert 'trained on goalenvs/BitFlipping-v0 (env kwargs {"n_bits": 2})' in err


def test_a_policy_without_spaces_is_probed_with_one_prediction(capsys, monkeypatch, checkpoints):
    # A policy object that carries no spaces (as other libraries' may not): the real
    # PointReach policy with its spaces taken away, so one predict() on a reset
    # observation is what refuses it.
    from goalenvs.train.policy import load_policy

    policy = load_policy(checkpoints["point_reach"])
    monkeypatch.setattr(policy, "observation_space", None, raising=False)
    monkeypatch.setattr(policy, "action_space", None, raising=False)
    monkeypatch.setattr(play, "_load_policy", lambda path: policy)
    err = refused(capsys, "play", DOT_ID, "--policy", checkpoints["point_reach"], "--headless")
    assert "does not match playtest/Dot-v0 (trained on goalenvs/PointReach-v0): " in err


_NO_GL_ENV = '''
import numpy as np
from goalenvs.envs.point_reach import PointReachEnv


class NoGLEnv(PointReachEnv):
    """PointReach whose frames fail as MuJoCo's do on a machine without an OpenGL context."""

    def render(self):
        raise RuntimeError(
            "an OpenGL platform library has not been loaded into this process, this most "
            "likely means that a valid OpenGL context has not been created"
        )
'''


def test_a_frame_mujoco_cannot_draw_is_one_line_naming_mujoco_gl(tmp_path, monkeypatch, capsys):
    (tmp_path / "nogl_env.py").write_text(_NO_GL_ENV)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    out = tmp_path / "x.gif"
    err = refused(capsys, "play", "nogl_env.py:NoGLEnv", "--episodes", "1", "--record", str(out))
    assert err.startswith("goalenvs play: error: nogl_env.py:NoGLEnv"), err
    assert "MUJOCO_GL=egl (needs libEGL) or MUJOCO_GL=osmesa (needs libOSMesa)" in err
    assert not out.exists()


def test_other_errors_from_rendering_are_not_taken_for_opengl():
    from goalenvs import envspec

    assert envspec.rendering_error(ValueError("frame of shape (3,)")) is None
    line = envspec.rendering_error(RuntimeError("GLFW: no display"))
    assert line is not None and line.startswith("RuntimeError: GLFW: no display; set MUJOCO_GL=egl")
