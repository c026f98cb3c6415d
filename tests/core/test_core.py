"""The goal-env helpers shared by every env: goal batches, info normalisation, checks."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gymnasium import spaces

from goalenvs.core import check_action, check_actions, check_goal_option, goal_arrays, info_values


def test_goal_arrays_broadcasts_leading_dimensions_of_the_right_goal_size():
    shape, a, d = goal_arrays(np.zeros((4, 1, 3)), np.ones((5, 3)), goal_size=3)
    assert shape == (4, 5) and a.shape == (4, 1, 3) and d.shape == (5, 3)
    with pytest.raises(ValueError, match="goal size 2"):
        goal_arrays(np.zeros((4, 3)), np.zeros((4, 3)), goal_size=2)


@pytest.mark.parametrize(
    "info, expected",
    [
        (None, [False, False, False]),
        ({"crashed": True}, [True, True, True]),
        ({"crashed": np.array([True, False, True])}, [True, False, True]),
        ([{"crashed": True}, {}, {"crashed": False}], [True, False, False]),
        (np.array([{}, {"crashed": 1}, {}], dtype=object), [False, True, False]),
        ([{}] * 3, [False, False, False]),
    ],
)
def test_info_values_accepts_every_info_form(info, expected):
    values = info_values(info, "crashed", (3,), False, bool)
    assert values.dtype == bool
    np.testing.assert_array_equal(values, expected)


def test_info_values_rejects_wrong_count():
    with pytest.raises(ValueError, match="holds 2 dicts"):
        info_values([{}, {}], "crashed", (3,), False, bool)


def test_check_action_clips_finite_and_rejects_nan_and_shape():
    box = spaces.Box(-1, 1, (2,), np.float32)
    np.testing.assert_array_equal(check_action([2.0, -0.5], box), [1.0, -0.5])
    with pytest.raises(ValueError, match="finite"):
        check_action([np.nan, 0.0], box)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        check_action([0.0, 0.0, 0.0], box)
    with pytest.raises(TypeError, match="dtype"):
        check_action(np.array(["a", "b"]), box)


def test_check_action_discrete_bounds_and_type():
    d = spaces.Discrete(4)
    assert check_action(np.int64(3), d) == 3
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        check_action(4, d)
    with pytest.raises(TypeError, match="integer"):
        check_action(1.5, d)


def test_check_actions_names_bad_sub_env():
    box = spaces.Box(-1, 1, (2,), np.float32)
    actions = np.zeros((4, 2))
    actions[2, 1] = np.inf
    with pytest.raises(ValueError, match=r"sub-envs \[2\]"):
        check_actions(actions, box, 4)


def test_check_goal_option_rejects_goal_outside_space_or_a_space_not_a_box():
    box = spaces.Box(-1, 1, (2,), np.float32)
    with pytest.raises(ValueError, match="outside the goal space"):
        check_goal_option([0.0, 1.5], box)
    np.testing.assert_array_equal(check_goal_option([0.5, 0.5], box), [0.5, 0.5])
    with pytest.raises(TypeError, match=r"Box goal space, got MultiBinary\(3\)"):
        check_goal_option([0, 1, 0], spaces.MultiBinary(3))


def test_autoreset_mode_accepts_enum_values_and_snake_case_and_lists_them_else():
    from goalenvs.core import parse_autoreset_mode

    values = {"next_step": "NextStep", "NextStep": "NextStep", "same_step": "SameStep"}
    for name, value in {**values, "disabled": "Disabled"}.items():
        assert parse_autoreset_mode(name).value == value, name
    with pytest.raises(ValueError, match=r"autoreset_mode='sometimes'.*next_step"):
        parse_autoreset_mode("sometimes")


# --------------------------------------------------------------------------- spaces as JSON

# JSON exactly as the two older writers produced it: checkpoints (train.checkpoint's
# space_to_dict: flat float64 bounds, MultiBinary by shape) and replay-buffer saves
# (her.buffer's _space_to_json: nested bounds, MultiBinary by n, Dict).
_OLD_BOX = spaces.Box(
    np.array([[-1, -2, -3], [0, 0, 0]], np.float32),
    np.array([[1, 2, 3], [4, 5, np.inf]], np.float32),
    dtype=np.float32,
)
OLD_CHECKPOINT_JSON = [
    (
        '{"type": "Box", "shape": [2, 3], "low": [-1.0, -2.0, -3.0, 0.0, 0.0, 0.0], '
        '"high": [1.0, 2.0, 3.0, 4.0, 5.0, Infinity], "dtype": "float32"}',
        _OLD_BOX,
    ),
    ('{"type": "Discrete", "n": 5, "start": 2}', spaces.Discrete(5, start=2)),
    ('{"type": "MultiBinary", "shape": [4]}', spaces.MultiBinary([4])),
    ('{"type": "MultiBinary", "shape": [2, 3]}', spaces.MultiBinary([2, 3])),
    (
        '{"type": "Box", "shape": [2], "low": [-1.5, -1.5], "high": [1.5, 1.5], '
        '"dtype": "float64"}',
        spaces.Box(-1.5, 1.5, (2,), np.float64),
    ),
]
OLD_BUFFER_JSON = [
    (
        '{"type": "Box", "low": [[-1.0, -2.0, -3.0], [0.0, 0.0, 0.0]], "high": [[1.0, 2.0, '
        '3.0], [4.0, 5.0, Infinity]], "shape": [2, 3], "dtype": "float32"}',
        _OLD_BOX,
    ),
    ('{"type": "Discrete", "n": 5, "start": 2}', spaces.Discrete(5, start=2)),
    ('{"type": "MultiBinary", "n": 4}', spaces.MultiBinary(4)),
    ('{"type": "MultiBinary", "n": [2, 3]}', spaces.MultiBinary([2, 3])),
    (
        '{"type": "Dict", "spaces": {"a": {"type": "MultiBinary", "n": 3}, "b": {"type": '
        '"Box", "low": [[-1.0, -2.0, -3.0], [0.0, 0.0, 0.0]], "high": [[1.0, 2.0, 3.0], '
        '[4.0, 5.0, Infinity]], "shape": [2, 3], "dtype": "float32"}}}',
        spaces.Dict(a=spaces.MultiBinary(3), b=_OLD_BOX),
    ),
]


def _same_space(a, b):
    assert type(a) is type(b) and a == b
    if isinstance(a, spaces.Box):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.low, b.low)
        np.testing.assert_array_equal(a.high, b.high)
    if isinstance(a, spaces.MultiBinary):
        assert np.array_equal(np.asarray(a.n), np.asarray(b.n))
    if isinstance(a, spaces.Dict):
        for key in a.spaces:
            _same_space(a[key], b[key])


@pytest.mark.parametrize("text, space", OLD_CHECKPOINT_JSON + OLD_BUFFER_JSON)
def test_space_from_json_reads_what_was_written_before_and_round_trips_the_space(text, space):
    from goalenvs.core.io import space_from_json, space_to_json

    _same_space(space_from_json(json.loads(text)), space)
    _same_space(space_from_json(json.loads(json.dumps(space_to_json(space)))), space)


@pytest.mark.parametrize("text, space", OLD_CHECKPOINT_JSON)
def test_checkpoint_space_from_dict_reads_old_checkpoints(text, space):
    from goalenvs.train.checkpoint import space_from_dict

    _same_space(space_from_dict(json.loads(text)), space)


def test_unknown_space_type_names_it_and_where_it_was_found():
    from goalenvs.core.io import space_from_json, space_to_json
    from goalenvs.train.checkpoint import CheckpointError, space_from_dict

    with pytest.raises(ValueError, match="unknown space type 'Tuple' in a HER buffer file"):
        space_from_json({"type": "Tuple"}, "a HER buffer file")
    with pytest.raises(CheckpointError, match="unknown space type 'Tuple' in checkpoint"):
        space_from_dict({"type": "Tuple"})
    with pytest.raises(TypeError, match=r"cannot describe Tuple.* in a checkpoint"):
        space_to_json(spaces.Tuple((spaces.Discrete(2),)), "a checkpoint")


@pytest.mark.parametrize(
    ("kwargs", "value", "error", "message"),
    [
        ({}, 1.5, ValueError, r"x must be in \[0, 1\], got 1.5"),
        ({}, "a", TypeError, r"x must be a float in \[0, 1\], got 'a'"),
        ({}, True, TypeError, r"x must be a float in \[0, 1\], got True"),
        ({"open_low": True}, 0.0, ValueError, r"x must be in \(0, 1\], got 0.0"),
        ({"open_high": True, "high": 2}, 2, ValueError, r"x must be in \[0, 2\), got 2"),
        ({"none_ok": True, "open_low": True, "open_high": True}, 1.0, ValueError,
         r"x must be in \(0, 1\) or None, got 1.0"),
        ({}, None, TypeError, r"x must be a float in \[0, 1\], got None"),
    ],
)  # fmt: skip
def test_check_in_range_names_the_interval_it_expected(kwargs, value, error, message):
    from goalenvs.core import check_in_range

    with pytest.raises(error, match=message):
        check_in_range("x", value, **kwargs)


def test_check_in_range_and_check_int_pass_good_values_through():
    from goalenvs.core import check_in_range, check_int

    assert check_in_range("x", 0.0) == 0.0 and check_in_range("x", 1) == 1
    assert check_in_range("x", None, none_ok=True) is None
    assert check_in_range("x", np.float32(0.5), open_low=True, open_high=True) == 0.5
    assert check_int("n", 0, minimum=0) == 0 and check_int("n", np.int64(3), minimum=1) == 3
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        check_int("n", 0, minimum=1)
    with pytest.raises(TypeError, match=r"n must be an int, got 1.0 \(float\)"):
        check_int("n", 1.0, minimum=0)
