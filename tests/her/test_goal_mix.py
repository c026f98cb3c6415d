"""Relabelling mixes (goalenvs.her.goal_mix) in both HER buffers, with prioritized replay,
in saved files, in the training config, presets and command line, and under the
stable-baselines3 adapter (with its refusal of a ``compute_reward`` that returns one value
for a batch).

The buffers are filled with the tagged transitions of test_buffer_backends.py: env ``e``,
episode ``m``, step ``i`` carries ``(e, m, i)`` in its observation and achieved goal, and
its episode's desired goal is ``(-1, e, m)``. So a sampled goal says where it came from:
its own episode's desired goal (original), another episode's desired goal (desired), or
the next achieved goal ``(e', m', j)`` of some transition.
"""

from __future__ import annotations

import functools
import json
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.agents.registry import config_from_dict
from goalenvs.cli import main
from goalenvs.her import GoalMix
from goalenvs.her.goal_mix import COMPONENTS
from tests.checker.broken_envs import ToyReach
from tests.her.test_buffer_backends import (
    CUDA,
    Writer,
    make_buffer,
    numpy_batch,
    tag_reward,
)

torch.set_num_threads(1)

BACKENDS = ["numpy", "cpu"]
ALL_BACKENDS = [*BACKENDS, pytest.param("cuda", marks=CUDA)]
N = 100_000  # sampled transitions per fraction test
Z = 4.5  # a fraction off by more than 4.5 standard deviations fails (about 7e-6 per check)
FUTURELIKE = ("future", "final", "episode", "achieved")
# Episode lengths per env: varied, so that the in-episode draws and the skipping of the
# own episode are exercised on episodes of every size.
LENGTHS = [[5, 7, 3, 9, 4, 6] * 10, [8, 2, 6, 5] * 15, [4, 9, 3, 7, 5] * 12]


def filled(backend: str, mix: Any, steps: int = 100, **kwargs: Any) -> tuple[Any, Writer]:
    """A 3-env buffer of 3 x 60 rows holding tagged episodes; ``steps`` adds wrap the
    ring, so the oldest episodes have been retired."""
    buffer = make_buffer(backend, 3 * 60, 3, goal_mix=mix, seed=5, **kwargs)
    writer = Writer(buffer, LENGTHS)
    for _ in range(steps):
        writer.add_step()
    return buffer, writer


def intact_lengths(writer: Writer) -> np.ndarray:
    """``L[e, m]``: the length of env e's episode m when it is complete and intact, else 0."""
    intact = writer.intact_episodes()
    table = np.zeros((writer.buffer.n_envs, max(m for _, m in intact) + 2), np.int64)
    for (e, m), length in intact.items():
        table[e, m] = length
    return table


def sources_of(batch: Any, writer: Writer, mix: GoalMix) -> dict[str, np.ndarray]:
    """Which transitions of ``batch`` took their goal from which source, asserting the
    provenance rules of each (the mix has at most one of future, final, episode and
    achieved: their goals are all achieved goals)."""
    futurelike = [name for name in FUTURELIKE if getattr(mix, name) > 0]
    assert len(futurelike) <= 1
    batch = numpy_batch(batch)
    lengths = intact_lengths(writer)
    tags = batch.observations["observation"].astype(np.int64)
    e, m, i = tags.T
    own = lengths[e, m]
    assert (own > 0).all() and (i < own).all(), "a sampled transition of no intact episode"
    goal = batch.observations["desired_goal"]
    np.testing.assert_array_equal(batch.next_observations["desired_goal"], goal)
    tagged = goal.astype(np.int64)
    is_desired_goal = goal[:, 0] == -1
    original = is_desired_goal & (tagged[:, 1] == e) & (tagged[:, 2] == m)
    desired = is_desired_goal & ~original
    achieved = ~is_desired_goal
    # Other episodes' desired goals: of a complete, intact episode, never the own one.
    assert (lengths[tagged[desired, 1], tagged[desired, 2]] > 0).all()
    # Achieved goals, as the source says.
    ge, gm, gj = tagged[achieved].T
    ae, am, ai, a_len = e[achieved], m[achieved], i[achieved], own[achieved]
    if futurelike == ["achieved"]:
        assert ((gj >= 1) & (gj <= lengths[ge, gm])).all()
    elif futurelike:
        assert ((ge == ae) & (gm == am)).all(), "an in-episode goal from another episode"
        low = {"future": ai + 1, "final": a_len, "episode": np.ones_like(ai)}[futurelike[0]]
        assert ((low <= gj) & (gj <= a_len)).all(), futurelike[0]
    # Rewards: the stored one for original goals, compute_reward's for the others.
    relabeled = ~original
    np.testing.assert_allclose(
        batch.rewards[relabeled],
        tag_reward(batch.next_observations["achieved_goal"][relabeled], goal[relabeled], None),
        rtol=1e-6,
    )
    found = {"original": original, "desired": desired}
    if futurelike:
        found[futurelike[0]] = achieved
    else:
        assert not achieved.any()
    for name, chosen in found.items():
        if getattr(mix, name) == 0:
            assert not chosen.any(), f"{name} goals from a mix without them"
    return {name: chosen for name, chosen in found.items() if getattr(mix, name) > 0}


def assert_fractions(sources: dict[str, np.ndarray], mix: GoalMix) -> None:
    """Each source's share of the batch within Z binomial standard deviations of its
    fraction."""
    for name, chosen in sources.items():
        p, n = getattr(mix, name), chosen.size
        sigma = np.sqrt(p * (1 - p) / n)
        assert abs(chosen.mean() - p) <= Z * sigma + 1e-12, (name, chosen.mean(), p)


MIXES = [
    GoalMix(future=0.4, desired=0.4, original=0.2),  # mrl's futureactual
    GoalMix(final=0.25, desired=0.5, original=0.25),
    GoalMix(episode=0.6, desired=0.1, original=0.3),
    GoalMix(achieved=0.2, desired=0.2, original=0.6),
    GoalMix(future=0.8, original=0.2),  # what future k=4 is
]


@pytest.mark.parametrize("mix", MIXES, ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
def test_each_fraction_of_100k_samples_holds_to_its_binomial_interval(
    backend: str, mix: GoalMix
) -> None:
    buffer, writer = filled(backend, mix)
    sources = sources_of(buffer.sample(N), writer, mix)
    assert set(sources) == {name for name in COMPONENTS if getattr(mix, name) > 0}
    assert_fractions(sources, mix)


@pytest.mark.parametrize("backend", BACKENDS)
def test_other_episodes_desired_goals_are_drawn_uniformly_over_their_transitions(
    backend: str,
) -> None:
    # Given its own episode X, a desired goal comes from episode Y != X with probability
    # length(Y) / (transitions - length(X)): the draw skips X and nothing else.
    mix = GoalMix(desired=1.0)
    buffer, writer = filled(backend, mix)
    batch = numpy_batch(buffer.sample(N))
    lengths = intact_lengths(writer)
    total = lengths.sum()
    tags = batch.observations["observation"].astype(np.int64)
    goal = batch.observations["desired_goal"].astype(np.int64)
    assert (goal[:, 0] == -1).all(), "a desired-goal draw returned an achieved goal"
    own = (tags[:, 0], tags[:, 1])
    assert not ((goal[:, 1] == own[0]) & (goal[:, 2] == own[1])).any()
    drawn = np.zeros_like(lengths)
    np.add.at(drawn, (goal[:, 1], goal[:, 2]), 1)
    own_length = lengths[own]
    for e, m in zip(*np.nonzero(lengths), strict=True):
        p = np.where((own[0] == e) & (own[1] == m), 0.0, lengths[e, m] / (total - own_length))
        expected, sigma = p.sum(), np.sqrt((p * (1 - p)).sum())
        assert abs(drawn[e, m] - expected) <= Z * sigma, ((e, m), drawn[e, m], expected)
    assert drawn[lengths == 0].sum() == 0


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_during_the_warm_up_every_goal_is_a_future_one(backend: str) -> None:
    mix = GoalMix(desired=0.5, original=0.5)
    # 2 envs: the warm-up of 30 env steps ends with the 15th add.
    buffer = make_buffer(backend, 2 * 40, 2, goal_mix=mix, goal_mix_warmup=30, seed=1)
    writer = Writer(buffer, [[4] * 20, [3] * 20])
    for _ in range(14):
        writer.add_step()
    batch = numpy_batch(buffer.sample(5000))
    sources = sources_of(batch, writer, GoalMix(future=1.0))
    assert sources["future"].all()
    writer.add_step()
    sources = sources_of(buffer.sample(5000), writer, mix)
    assert "future" not in sources
    assert_fractions(sources, mix)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_a_desired_draw_needs_a_second_intact_episode(backend: str) -> None:
    mix = GoalMix(future=0.5, desired=0.5)
    message = (
        r"goal_mix desired=0\.5 draws the desired goals of other episodes, but the buffer "
        r"holds a single complete episode \(6 transitions\)"
    )
    # One env, 10 rows: an episode of 6 fits, but the second one retires the first.
    buffer = make_buffer(backend, 10, 1, goal_mix=mix, seed=0)
    writer = Writer(buffer, [[6] * 10])
    for _ in range(6):
        writer.add_step()
    assert not buffer.can_sample()  # a trainer waits instead of failing
    with pytest.raises(RuntimeError, match=message):
        buffer.sample(8)
    for _ in range(6):
        writer.add_step()
    assert len(writer.intact_episodes()) == 1
    assert not buffer.can_sample()
    with pytest.raises(RuntimeError, match=message):
        buffer.sample(8)
    # With room for two episodes, the draw works once the second one is stored.
    roomy = make_buffer(backend, 20, 1, goal_mix=mix, seed=0)
    writer = Writer(roomy, [[6] * 10])
    for _ in range(11):
        writer.add_step()
    assert not roomy.can_sample()
    writer.add_step()
    assert roomy.can_sample()
    sources = sources_of(roomy.sample(2000), writer, mix)
    assert sources["desired"].any()
    # A warm-up leaves the draw unused: no error with one episode stored.
    warm = make_buffer(backend, 20, 1, goal_mix=mix, goal_mix_warmup=12, seed=0)
    writer = Writer(warm, [[6] * 10])
    for _ in range(6):
        writer.add_step()
    assert warm.can_sample()
    assert sources_of(warm.sample(500), writer, GoalMix(future=1.0))["future"].all()
    # Two streams with an episode each hold two episodes.
    pair = make_buffer(backend, 40, 2, goal_mix=mix, seed=0)
    writer = Writer(pair, [[6] * 10, [3] * 10])
    for _ in range(5):
        writer.add_step()
    assert not pair.can_sample()  # env 1's episode alone
    writer.add_step()
    assert pair.can_sample()


@pytest.mark.parametrize("backend", BACKENDS)
def test_prioritized_replay_draws_goals_from_the_mix(backend: str) -> None:
    mix = GoalMix(future=0.4, desired=0.4, original=0.2)
    buffer, writer = filled(backend, mix, prioritized=True)
    batch = buffer.sample(N)
    assert_fractions(sources_of(batch, writer, mix), mix)
    # Skewed priorities change which transitions are drawn, not where their goals come from.
    indices = numpy_batch(batch).indices[:2000]
    buffer.update_priorities(indices, np.linspace(0.0, 50.0, indices.size))
    skewed = buffer.sample(N)
    assert not np.allclose(numpy_batch(skewed).weights, 1.0)
    assert_fractions(sources_of(skewed, writer, mix), mix)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_saved_buffer_restores_its_mix_and_samples_on(backend: str, tmp_path: Path) -> None:
    mix = GoalMix(future=0.4, desired=0.4, original=0.2)
    buffer = make_buffer(backend, 3 * 60, 3, goal_mix=mix, goal_mix_warmup=90, seed=5)
    writer = Writer(buffer, [[5] * 40] * 3)
    for _ in range(40):  # 120 env steps, the warm-up over; every episode complete
        writer.add_step()
    path = tmp_path / ("buffer.npz" if backend == "numpy" else "buffer.pt")
    buffer.save(path)
    loaded = type(buffer).load(path, tag_reward)
    assert loaded.goal_mix == mix and loaded.goal_mix_warmup == 90
    assert "goal_mix='future=0.4,desired=0.4,original=0.2', goal_mix_warmup=90" in repr(loaded)
    for a, b in zip(numpy_batch(loaded.sample(64)), numpy_batch(buffer.sample(64)), strict=True):
        if isinstance(a, dict):
            assert all((a[k] == b[k]).all() for k in a)
        else:
            np.testing.assert_array_equal(a, b)
    again = pickle.loads(pickle.dumps(buffer))
    assert again.goal_mix == mix and again.goal_mix_warmup == 90


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_strategy_is_its_mix_and_a_file_without_a_mix_samples_by_its_strategy(
    backend: str, tmp_path: Path
) -> None:
    buffer = make_buffer(backend, 60, 1, goal_selection_strategy="final", n_sampled_goal=3)
    assert buffer.goal_mix == GoalMix(final=0.75, original=0.25)
    assert buffer.her_ratio == 0.75
    meta = buffer.settings.to_meta()
    assert meta["goal_mix"] is None and meta["goal_mix_warmup"] == 0
    del meta["goal_mix"], meta["goal_mix_warmup"]  # as files written before goal mixes
    settings = type(buffer.settings).from_meta(meta)
    assert settings.relabel_mix == GoalMix(final=0.75, original=0.25)
    assert settings.goal_selection_strategy.value == "final"
    random = make_buffer(backend, 60, 1, goal_selection_strategy="random", n_sampled_goal=1)
    assert random.goal_mix == GoalMix(achieved=0.5, original=0.5)


def both(**kwargs: Any) -> list[BaseException]:
    """The exception each backend raises when built with ``kwargs``; both of one type."""
    errors = []
    for backend in BACKENDS:
        with pytest.raises((TypeError, ValueError)) as caught:
            make_buffer(backend, 20, 1, **kwargs)
        errors.append(caught.value)
    assert type(errors[0]) is type(errors[1]), errors
    assert str(errors[0]) == str(errors[1])
    return errors


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"goal_mix": {"future": -0.2, "original": 1.2}},
            r"^goal_mix: future=-0\.2 is negative; expected fractions >= 0 that sum to 1",
        ),
        (
            {"goal_mix": {"future": 0.5, "original": 0.4}},
            r"^goal_mix: the fractions sum to 0\.9 \(future=0\.5,original=0\.4\); expected them "
            r"to sum to 1",
        ),
        (
            {"goal_mix": "future=0.5,original=0.6"},
            r"^goal_mix: the fractions sum to 1\.1 ",
        ),
        ({"goal_mix": {"futur": 1.0}}, r"^goal_mix: 'futur' is not a goal source; expected"),
        ({"goal_mix": "future:1"}, r"^goal_mix='future:1': expected COMPONENT=FRACTION pairs"),
        ({"goal_mix": "future=x"}, r"^goal_mix='future=x': future='x' is not a number"),
        ({"goal_mix": {"future": "x", "original": 1}}, r"^goal_mix: future='x' is not a number"),
        ({"goal_mix": {"future": float("nan")}}, r"^goal_mix: future=nan is not finite"),
        ({"goal_mix": 0.8}, r"^goal_mix must be a mapping of components to fractions"),
        (
            {"goal_mix": {"future": 1.0}, "goal_selection_strategy": "final"},
            r"^goal_mix='future=1' replaces goal_selection_strategy and n_sampled_goal, got "
            r"goal_selection_strategy='final' and n_sampled_goal=4 too",
        ),
        ({"goal_mix_warmup": -1}, r"^goal_mix_warmup must be >= 0, got -1"),
    ],
)
def test_both_buffers_reject_a_bad_mix_naming_the_field_and_value(
    kwargs: dict[str, Any], message: str
) -> None:
    for error in both(**kwargs):
        assert re.search(message, str(error)), (message, str(error))


# ---------------------------------------------------------------------- the SB3 adapter


def test_the_sb3_adapter_takes_a_mix_and_refuses_one_reward_for_the_batch() -> None:
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv

    from goalenvs.her.sb3 import HerReplayBuffer as SB3Adapter

    def collect(buffer: Any, venv: Any, steps: int) -> None:
        rng = np.random.default_rng(0)
        obs = venv.reset()
        for _ in range(steps):
            action = rng.uniform(-1, 1, (1, 2)).astype(np.float32)
            new_obs, reward, done, infos = venv.step(action)
            next_obs = {k: v.copy() for k, v in new_obs.items()}
            if done[0]:
                next_obs = {k: v[None] for k, v in infos[0]["terminal_observation"].items()}
            buffer.add(obs, next_obs, action, reward, done, infos)
            obs = new_obs

    mix = {"future": 0.4, "desired": 0.4, "original": 0.2}
    venv = DummyVecEnv([ToyReach])
    venv.seed(0)
    buffer = SB3Adapter(
        2000,
        venv.observation_space,
        venv.action_space,
        venv,
        device="cpu",
        n_sampled_goal=4,  # SB3's usual arguments, left at their defaults beside the mix
        goal_selection_strategy="future",
        goal_mix=mix,
        goal_mix_warmup=40,
        seed=0,
    )
    assert buffer.core.goal_mix == GoalMix(**mix) and buffer.core.goal_mix_warmup == 40
    collect(buffer, venv, 300)
    batch = buffer.sample(4000)
    desired = batch.observations["desired_goal"].numpy()
    next_achieved = batch.next_observations["achieved_goal"].numpy()
    env = venv.envs[0].unwrapped
    expected = env.compute_reward(next_achieved, desired, None)
    np.testing.assert_array_equal(batch.rewards.numpy()[:, 0], expected)
    with pytest.raises(ValueError, match="replaces goal_selection_strategy"):
        SB3Adapter(
            2000, venv.observation_space, venv.action_space, venv, goal_mix=mix, n_sampled_goal=2
        )

    broken = DummyVecEnv([functools.partial(ToyReach, defect="not_vectorized")])
    broken.seed(0)
    buffer = SB3Adapter(2000, broken.observation_space, broken.action_space, broken, seed=0)
    collect(buffer, broken, 100)
    with pytest.raises(
        ValueError,
        match=r"^ToyReach\.compute_reward returned shape \(\) for a batch of 32 goal pairs",
    ):
        buffer.sample(32)


# ---------------------------------------------------------------------- config, presets, CLI


def test_the_config_takes_a_mix_as_a_table_or_as_text_and_hands_it_to_the_buffer() -> None:
    fractions = {"future": 0.4, "desired": 0.4, "original": 0.2}
    config = DDPGConfig(goal_mix="future=0.4, desired=0.4, original=0.2", goal_mix_warmup=25_000)
    assert config.goal_mix == fractions
    assert DDPGConfig(goal_mix={"original": 0.2, "future": 0.4, "desired": 0.4}) == DDPGConfig(
        goal_mix=fractions
    )
    settings = config.her_settings()
    assert settings["goal_mix"] == GoalMix(**fractions)
    assert settings["goal_mix_warmup"] == 25_000
    assert "goal_selection_strategy" not in settings and "n_sampled_goal" not in settings
    again = config_from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config
    plain = DDPGConfig().her_settings()
    assert (plain["goal_selection_strategy"], plain["n_sampled_goal"]) == ("future", 4)
    with pytest.raises(ValueError, match=r"^goal_mix: future=-0\.4 is negative"):
        DDPGConfig(goal_mix={"future": -0.4, "original": 1.4})
    with pytest.raises(ValueError, match=r"^goal_mix_warmup must be >= 0, got -5"):
        DDPGConfig(goal_mix_warmup=-5)


def test_a_preset_and_the_command_line_set_the_mix(tmp_path: Path, capsys: Any) -> None:
    preset = tmp_path / "futureactual.toml"
    preset.write_text(
        'description = "mrl futureactual"\n'
        "[config]\n"
        "goal_mix = {future = 0.4, desired = 0.4, original = 0.2}\n"
        "goal_mix_warmup = 25000\n"
    )
    base = ["train", "--show-config", "goalenvs/PointReach-v0", "--device", "cpu"]
    assert main([*base, "--preset", str(preset)]) == 0
    config = json.loads(capsys.readouterr().out)
    assert config["goal_mix"] == {"future": 0.4, "desired": 0.4, "original": 0.2}
    assert config["goal_mix_warmup"] == 25000
    argv = [*base, "--goal-mix", "future=0.5,achieved=0.3,original=0.2", "--goal-mix-warmup", "7"]
    assert main(argv) == 0
    config = json.loads(capsys.readouterr().out)
    assert config["goal_mix"] == {"future": 0.5, "achieved": 0.3, "original": 0.2}
    assert config["goal_mix_warmup"] == 7
    assert main([*base, "--goal-mix", "future=0.5"]) == 2
    assert "goal_mix: the fractions sum to 0.5 (future=0.5)" in capsys.readouterr().err


TINY = ["--epochs", "1", "--cycles", "2", "--batches", "2", "--batch-size", "16", "--quiet"]
BITS = ["goalenvs/BitFlipping-v0", "--env-kwargs", '{"n_bits": 4}', "--num-envs", "2"]


def test_training_runs_with_a_mix_and_refuses_a_warm_up_longer_than_the_run(
    tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "run"
    mix = ["--goal-mix", "future=0.4,desired=0.4,original=0.2", "--goal-mix-warmup", "8"]
    assert main(["train", *BITS, *TINY, *mix, "--out", str(out), "--device", "cpu"]) == 0
    assert json.loads((out / "config.json").read_text())["goal_mix"]["desired"] == 0.4
    # 1 epoch x 2 cycles x 4 steps (an episode of BitFlipping with 4 bits) x 2 envs = 16.
    long = ["--goal-mix-warmup", "17", "--out", str(tmp_path / "long"), "--device", "cpu"]
    assert main(["train", *BITS, *TINY, *long]) == 2
    err = capsys.readouterr().err
    assert (
        "goal_mix_warmup 17 is longer than the run: each replay buffer stores 16 env steps "
        "(epochs 1 x n_cycles 2 x 4 steps x num_envs 2)"
    ) in err


def test_a_mix_covers_every_component_in_order() -> None:
    assert COMPONENTS == ("future", "final", "episode", "achieved", "desired", "original")
    mix = GoalMix.parse("future=0.4,desired=0.4,original=0.2")
    assert mix.thresholds() == (0.4, 0.4, 0.4, 0.4, 0.8)
    assert mix.sources == ("future", "desired")
    assert str(mix) == "future=0.4,desired=0.4,original=0.2"
    assert GoalMix.from_strategy("future", 4) == GoalMix(future=0.8, original=0.2)
    assert GoalMix.from_strategy("episode", 0) == GoalMix(original=1.0)
