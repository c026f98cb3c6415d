"""A user's env module that fails to import: ``check``, ``train`` and ``play`` each report
it as one line naming the module and the exception (with its cause), and, when MuJoCo's
OpenGL backend is what failed under ``MUJOCO_GL``, the setting to change."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

from goalenvs import envspec
from goalenvs.cli import main

# Each module name is the test's own, so no import of one test is cached for another.
PYOPENGL_EGL_ERROR = (
    'raise ImportError("Unable to load EGL library", '
    '"EGL: cannot open shared object file: No such file or directory", "EGL", None)'
)
MODULES = {
    # A package whose env module imports a native solver that is missing (as a C
    # extension's shared library may be), three imports deep.
    "deep_pkg/__init__.py": "from deep_pkg.envs import Reach\n",
    "deep_pkg/envs.py": "from deep_pkg import solver\n\n\nclass Reach:\n    pass\n",
    "deep_pkg/solver.py": (
        'raise ImportError("libsolver.so.2: cannot open shared object file: No such file or '
        'directory")\n'
    ),
    # Another exception type: configuration read at import time.
    "config_env.py": 'import os\n\nSCALE = float(os.environ["REACH_SCALE_XYZ"])\n\n\nclass Reach:\n'
    "    pass\n",
    # PyOpenGL's error when MUJOCO_GL=egl and libEGL is missing, raised where PyOpenGL
    # raises it, and as gymnasium's mujoco_env re-raises it ("MuJoCo is not installed").
    "gl_platform.py": PYOPENGL_EGL_ERROR + "\n",
    "gl_env.py": "import gl_platform\n\n\nclass Reach:\n    pass\n",
    "wrapped_gl_env.py": textwrap.dedent(
        """
        from gymnasium import error

        try:
            import gl_platform
        except ImportError as e:
            raise error.DependencyNotInstalled(
                'MuJoCo is not installed, run `pip install "gymnasium[mujoco]"`'
            ) from e


        class Reach:
            pass
        """
    ),
    # An env whose constructor imports the OpenGL platform when it is built.
    "builds_gl.py": "class Reach:\n    def __init__(self, **kwargs):\n        import gl_platform\n",
    # A module that registers an id whose entry point is a failing module, imported only
    # when the env is built (as gymnasium-robotics registers its envs).
    "lazy_register.py": 'import gymnasium as gym\n\nif "lazy/Reach-v0" not in gym.registry:\n'
    '    gym.register("lazy/Reach-v0", entry_point="deep_pkg.envs:Reach")\n',
}
DEEP = "ImportError: libsolver.so.2: cannot open shared object file: No such file or directory"
EGL = (
    "ImportError: Unable to load EGL library: EGL: cannot open shared object file: No such "
    "file or directory: EGL"
)
GL_HINT = (
    "MUJOCO_GL=egl is set and MuJoCo could not load that rendering backend here: unset "
    "MUJOCO_GL, or set MUJOCO_GL=osmesa (needs libOSMesa) or MUJOCO_GL=glfw (needs a display)"
)
COMMANDS = {
    "check": (["check"], [], "goalenvs check: cannot load {spec}: "),
    "train": (["train"], ["--quiet"], "goalenvs train: error: "),
    "play": (["play"], [], "goalenvs play: error: "),
}


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    """The user's folder, made the current one, with the import path, the imported
    modules and the registry restored afterwards."""
    for name, text in MODULES.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.delenv("REACH_SCALE_XYZ", raising=False)
    yield tmp_path
    # Only the user's modules: dropping a library imported on the way (torch) can crash.
    users = {Path(name).parts[0].removesuffix(".py") for name in MODULES}
    for name in [name for name in sys.modules if name.split(".")[0] in users]:
        del sys.modules[name]
    gym.envs.registry.pop("lazy/Reach-v0", None)
    gym.envs.registry.pop("lazy_id/Reach-v0", None)


def run(command: str, spec: str, capsys) -> str:
    """The one line ``command`` printed for ``spec``, after checking it exited 2 with no
    traceback; the prefix every line of that command starts with is removed."""
    head, tail, prefix = COMMANDS[command]
    assert main([*head, spec, *tail]) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out
    assert err.count("\n") == 1, err
    prefix = prefix.format(spec=spec)
    assert err.startswith(prefix), err
    return err[len(prefix) :].rstrip("\n")


WRAPPED = (
    'DependencyNotInstalled: MuJoCo is not installed, run `pip install "gymnasium[mujoco]"` '
    f"(caused by {EGL})"
)
ALL = list(COMMANDS)
# (spec, MUJOCO_GL, the commands run, the line each prints after "env {spec!r}: ")
IMPORT_FAILURES = [
    ("deep_pkg:Reach", None, ALL, f"importing deep_pkg failed: {DEEP}"),
    ("deep_pkg/solver.py:Reach", None, ALL, f"importing deep_pkg/solver.py failed: {DEEP}"),
    # a module that registers an id whose entry point fails, and an id registered so
    ("lazy_register:lazy/Reach-v0", None, ALL, f"importing deep_pkg.envs failed: {DEEP}"),
    ("lazy_id/Reach-v0", None, ALL, f"importing deep_pkg.envs failed: {DEEP}"),
    # another exception type is one line too
    ("config_env:Reach", None, ALL, "importing config_env failed: KeyError: 'REACH_SCALE_XYZ'"),
    # a failed OpenGL import under MUJOCO_GL says what to set; without it, nothing to change
    ("gl_env:Reach", "egl", ALL, f"importing gl_env failed: {EGL}; {GL_HINT}"),
    ("wrapped_gl_env:Reach", "egl", ALL, f"importing wrapped_gl_env failed: {WRAPPED}; {GL_HINT}"),
    ("gl_env:Reach", None, ["check"], f"importing gl_env failed: {EGL}"),
    # MUJOCO_GL is not blamed for a failure that is not OpenGL's
    ("deep_pkg:Reach", "egl", ["train"], f"importing deep_pkg failed: {DEEP}"),
]


@pytest.mark.parametrize(
    ("command", "spec", "mujoco_gl", "line"),
    [(c, spec, gl, line) for spec, gl, commands, line in IMPORT_FAILURES for c in commands],
)
def test_a_failed_import_names_the_module_and_the_exception(
    command, spec, mujoco_gl, line, user_folder, monkeypatch, capsys
):
    if mujoco_gl:
        monkeypatch.setenv("MUJOCO_GL", mujoco_gl)
    if spec == "lazy_id/Reach-v0":
        gym.register(spec, entry_point="deep_pkg.envs:Reach")
    assert run(command, spec, capsys) == f"env {spec!r}: {line}"


@pytest.mark.parametrize(
    ("command", "where"),
    [
        ("check", "building builds_gl:Reach failed: "),
        ("train", ""),
        ("play", "building builds_gl:Reach failed: "),
    ],
)
def test_a_failed_import_while_the_env_is_built_is_one_line_with_the_setting(
    command, where, user_folder, monkeypatch, capsys
):
    monkeypatch.setenv("MUJOCO_GL", "egl")
    assert run(command, "builds_gl:Reach", capsys) == f"{where}{EGL}; {GL_HINT}"


@pytest.mark.parametrize(
    ("value", "others"),
    [
        ("osmesa", "MUJOCO_GL=egl (needs libEGL) or MUJOCO_GL=glfw (needs a display)"),
        (
            "bogus",
            "MUJOCO_GL=egl (needs libEGL) or MUJOCO_GL=osmesa (needs libOSMesa) or "
            "MUJOCO_GL=glfw (needs a display)",
        ),
    ],
)
def test_the_gl_hint_offers_the_backends_not_set(value, others, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", value)
    error = RuntimeError(f"invalid value for environment variable MUJOCO_GL: {value}")
    assert envspec.describe_error(error) == (
        f"RuntimeError: invalid value for environment variable MUJOCO_GL: {value}; "
        f"MUJOCO_GL={value} is set and MuJoCo could not load that rendering backend here: "
        f"unset MUJOCO_GL, or set {others}"
    )


def test_an_error_raised_inside_opengls_code_is_recognised_by_where_it_was_raised(monkeypatch):
    # The error MUJOCO_GL=osmesa gives without libOSMesa names no library, only what PyOpenGL
    # tried: it is recognised by the file that raised it.
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    code = compile("None.glGetError", "/site-packages/OpenGL/raw/GL/_errors.py", "exec")
    with pytest.raises(AttributeError) as info:
        exec(code, {})
    described = envspec.describe_error(info.value)
    assert described.startswith(
        "AttributeError: 'NoneType' object has no attribute 'glGetError'; MUJOCO_GL=osmesa is set"
    )
