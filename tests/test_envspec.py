"""goalenvs.envspec: one resolver for every command's env spec, and its one-line errors."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

from goalenvs import envspec
from goalenvs.envs.point_reach import PointReachEnv
from goalenvs.envspec import EnvSpecError, resolve
from goalenvs.wrappers.crash_penalty import make_parking_crash

USER_MODULE = textwrap.dedent(
    """
    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces


    class Reach2D(gym.Env):
        def __init__(self, size=1.0):
            self.size = size
            box = spaces.Box(-1, 1, (2,), np.float32)
            self.observation_space = spaces.Dict(
                observation=box, achieved_goal=box, desired_goal=box
            )
            self.action_space = box


    def make_reach(size=2.0):
        return Reach2D(size)


    NOT_AN_ENV = 3
    gym.register("{env_id}", entry_point=Reach2D, max_episode_steps=7)
    """
)


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    """A folder holding a user's module (as a file beside them), made the current folder,
    with the import path and the registry restored afterwards."""
    name = f"userenv_{tmp_path.name.replace('-', '_')}"
    env_id = f"UserReach{abs(hash(name)) % 10_000}-v0"
    (tmp_path / f"{name}.py").write_text(USER_MODULE.format(env_id=env_id))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    yield name, env_id
    sys.modules.pop(name, None)
    gym.envs.registry.pop(env_id, None)


def test_a_registered_id_resolves_to_its_registered_spec():
    resolved = resolve("goalenvs/PointReach-v0")
    assert resolved.spec is gym.spec("goalenvs/PointReach-v0")
    assert (resolved.name, resolved.factory) == ("goalenvs/PointReach-v0", None)
    # its "module:Class" entry point is imported: the class gym.make calls
    assert resolved.creator is PointReachEnv


def test_module_env_id_imports_the_module_that_registers_it():
    resolved = resolve("goalenvs.wrappers.crash_penalty:parking-crash-v0")
    assert resolved.spec.id == "parking-crash-v0" and resolved.name == "parking-crash-v0"
    assert resolved.creator is make_parking_crash


def test_a_module_in_the_current_folder_imports_as_with_python_dash_m(user_folder):
    name, env_id = user_folder
    assert importlib.util.find_spec(name) is None  # not importable before
    by_id = resolve(f"{name}:{env_id}")
    assert by_id.spec.id == env_id and by_id.spec.max_episode_steps == 7
    by_class = resolve(f"{name}:Reach2D")
    assert by_class.factory.__name__ == "Reach2D" and by_class.name == f"{name}:Reach2D"
    assert by_class.creator is by_class.factory is by_id.creator
    env = gym.make(by_class.spec, size=3.0)
    assert env.unwrapped.size == 3.0


def test_a_file_spec_builds_with_gym_make_and_make_vec(user_folder):
    name, _ = user_folder
    resolved = resolve(f"./{name}.py:make_reach")
    assert resolved.spec.id == f"{name}.py:make_reach"
    assert gym.make(resolved.spec).unwrapped.size == 2.0
    envs = gym.make_vec(resolved.spec, num_envs=3, vectorization_mode="sync")
    assert envs.num_envs == 3 and envs.unwrapped.envs[0].unwrapped.size == 2.0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("PointMaze-v0", "unknown env id 'PointMaze-v0'; did you mean goalenvs/PointMaze-v0?"),
        ("NoSuchThing-v3", "unknown env id 'NoSuchThing-v3'.*`goalenvs list`"),
        ("nopkg_xyz:Foo-v0", "needs the package 'nopkg_xyz', which is not installed: install"),
        ("gymnasium_robotics_nope.x:Y", "needs the package 'gymnasium_robotics_nope'"),
        ("goalenvs.no_such_module:Env", "there is no module 'goalenvs.no_such_module'"),
        ("goalenvs.envspec:NoSuchName", "goalenvs.envspec defines no 'NoSuchName'"),
        ("goalenvs.envspec:FORMS", "FORMS is a str, not a class or function that returns an env"),
        ("missing_dir/env.py:Env", "no such file: missing_dir/env.py"),
        ("", "must be a non-empty string"),
        ("goalenvs/PointReach-v0:", "empty side of ':'"),
    ],
)
def test_a_spec_that_names_no_env_is_one_line_with_the_fix(spec, message):
    with pytest.raises(EnvSpecError, match=message) as info:
        resolve(spec)
    assert "\n" not in str(info.value)


def test_a_file_without_a_name_says_what_to_add(user_folder):
    name, _ = user_folder
    with pytest.raises(EnvSpecError) as info:
        resolve(f"{name}.py")
    assert str(info.value) == (
        f"env '{name}.py' names a file but not the env in it: add ':' and the env class or "
        f"factory, e.g. {name}.py:Reach2D ({name}.py defines Reach2D)"
    )
    with pytest.raises(EnvSpecError, match=rf"{name}.py defines no 'Reach3D'; it defines Reach2D"):
        resolve(f"{name}.py:Reach3D")


def test_a_missing_robotics_package_names_the_goalenvs_extra(monkeypatch):
    def missing(name, *args):
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(EnvSpecError, match=r"pip install 'goalenvs\[robotics\]'"):
        resolve("gymnasium_robotics:FetchReach-v4")
    with pytest.raises(EnvSpecError, match=r"pip install highway-env"):
        resolve("highway_env:parking-v0")


def test_an_import_error_inside_the_users_module_is_reported_as_such(tmp_path, monkeypatch):
    (tmp_path / "broken_user_env.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EnvSpecError, match="importing broken_user_env failed: ModuleNotFound"):
        resolve("broken_user_env:Env")
    sys.modules.pop("broken_user_env", None)


def test_the_goalenvs_suggestion_only_for_ids_that_exist_there():
    assert envspec.suggestion("Push-v0") == "goalenvs/Push-v0"
    assert envspec.suggestion("CartPole-v1") is None
    assert envspec.suggestion("goalenvs/Push-v0") is None


def test_a_file_spec_is_recorded_absolute_and_located_from_any_folder(tmp_path, monkeypatch):
    user = tmp_path / "user"
    (user / "envs").mkdir(parents=True)
    (user / "envs" / "reach.py").write_text("class Reach: pass\n")
    monkeypatch.chdir(user)
    spec = "envs/reach.py:Reach"
    recorded = str((user / "envs" / "reach.py").resolve())
    assert envspec.env_file(spec) == Path("envs/reach.py")
    assert envspec.recorded_file(spec) == recorded
    for other in ("goalenvs/PointReach-v0", "highway_env:parking-v0", "pkg.module:Env"):
        assert envspec.env_file(other) is None and envspec.recorded_file(other) is None
        assert envspec.locate(other, recorded) == other
    assert envspec.locate(spec, recorded) == spec  # found from here: kept as given
    monkeypatch.chdir(tmp_path)
    assert envspec.locate(spec, recorded) == f"{recorded}:Reach"
    assert envspec.locate(spec, None) == spec  # nothing recorded: resolve says what is missing
    (user / "envs" / "reach.py").unlink()
    with pytest.raises(EnvSpecError) as caught:
        envspec.locate(spec, recorded)
    assert str(caught.value) == (
        f"env {spec!r}: its file is neither at {recorded} (where the run recorded it) nor at "
        f"{Path('envs/reach.py')} from the current folder {tmp_path}"
    )


def test_renders_frames_reads_the_declared_render_modes(tmp_path):
    (tmp_path / "frames.py").write_text(
        "import gymnasium as gym\n\n"
        "class Drawn(gym.Env):\n    metadata = {'render_modes': ['human', 'rgb_array']}\n\n"
        "class Blind(gym.Env):\n    metadata = {'render_modes': []}\n\n"
        "def factory():\n    return Blind()\n"
    )
    frames = tmp_path / "frames.py"
    assert envspec.renders_frames("goalenvs/PointReach-v0")
    assert envspec.renders_frames(f"{frames}:Drawn") and not envspec.renders_frames(
        f"{frames}:Blind"
    )
    assert envspec.renders_frames(f"{frames}:factory")  # declares none
