"""goalenvs' HER buffer as a stable-baselines3 ``replay_buffer_class``.

::

    from stable_baselines3 import SAC
    from goalenvs.her.sb3 import HerReplayBuffer

    model = SAC(
        "MultiInputPolicy",
        env,
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"),
    )

Its arguments and hooks are stable-baselines3's (``add`` with the list of infos,
``sample(batch_size, env=VecNormalize)``, ``set_env``, ``truncate_last_trajectory``); its
data lives in :class:`goalenvs.her.buffer.HerReplayBuffer` (:attr:`HerReplayBuffer.core`).
How it differs from SB3's buffer, its public arrays included: docs/buffer.md. ``info``
reaches ``compute_reward`` as one dict of batched arrays (the values of ``info_keys``; with
``copy_info_dict=True`` and no ``info_keys``, the numeric keys of the first ``add``'s info).
This is the only goalenvs module that imports stable-baselines3 (the ``sb3`` extra).
"""

from __future__ import annotations

import enum
import warnings
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.preprocessing import get_action_dim, get_obs_shape
from stable_baselines3.common.type_aliases import DictReplayBufferSamples
from stable_baselines3.common.utils import get_device
from stable_baselines3.common.vec_env import VecNormalize
from stable_baselines3.her.her_replay_buffer import HerReplayBuffer as _SB3HerReplayBuffer

from goalenvs.her.buffer import HerReplayBuffer as CoreBuffer
from goalenvs.her.settings import GoalSelectionStrategy, resolve_goal_function

__all__ = ["HerReplayBuffer"]

# Keys stable-baselines3 and gymnasium add to infos; never goal information.
_BOOKKEEPING_KEYS = ("terminal_observation", "TimeLimit.truncated", "episode", "final_obs")


class _PublicArray:
    """One of SB3's public buffer arrays: reads ``buffer._public(name)``, refuses writes."""

    def __init__(self, doc: str) -> None:
        self.__doc__, self.name = doc, ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, buffer: Any, owner: type | None = None) -> Any:
        return self if buffer is None else buffer._public(self.name)

    def __set__(self, buffer: object, value: object) -> None:
        raise AttributeError(
            f"{self.name} of the HER buffer is a read-only value assembled from its storage; "
            "change the data with add(), truncate_last_trajectory() or reset()"
        )


class HerReplayBuffer(_SB3HerReplayBuffer):
    """stable-baselines3 HER replay buffer backed by :class:`goalenvs.her.HerReplayBuffer`
    (a subclass of SB3's only so that its algorithms pass it the env; none of the parent's
    storage is allocated). The arguments are SB3's and mean what they mean for
    :class:`goalenvs.her.HerReplayBuffer`, except:

    - ``buffer_size``: transitions kept over all envs; the ``buffer_size`` attribute is
      SB3's, ``buffer_size // n_envs``, the positions per env of the public arrays;
    - ``env``: the training VecEnv; its first sub-env's ``compute_reward`` rewards goals;
    - ``recompute_terminated``: recompute ``terminated`` for relabeled goals with the env's
      ``compute_terminated`` (stable-baselines3 keeps the original, its issue #627);
    - ``seed``: None draws one from numpy's global generator, which SB3 seeds;
    - ``optimize_memory_usage`` and ``prioritized`` must be False and ``n_step`` 1: SB3's
      algorithms take no importance weights, report no TD errors and bootstrap with their
      own gamma.
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        env: object,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        n_sampled_goal: int = 4,
        goal_selection_strategy: Any = "future",
        copy_info_dict: bool = False,
        info_keys: tuple[str, ...] = (),
        recompute_terminated: bool = False,
        seed: int | None = None,
        prioritized: bool = False,
        goal_mix: Any = None,
        goal_mix_warmup: int = 0,
        n_step: int = 1,
    ) -> None:
        if n_step != 1:
            raise ValueError(
                f"n_step={n_step!r} is not supported under stable-baselines3 (its algorithms "
                "bootstrap every transition with their own gamma and read no per-transition "
                "discounts); use goalenvs' own trainers (`goalenvs train ENV --n-step 3`) or "
                "pass n_step=1"
            )
        if prioritized:
            raise ValueError(
                "prioritized=True is not supported under stable-baselines3 (its algorithms "
                "take no importance weights and report no TD errors); use goalenvs' own "
                "trainers (`goalenvs train ENV --prioritized`) or pass prioritized=False"
            )
        if optimize_memory_usage:
            raise ValueError(
                "optimize_memory_usage=True is not supported by the HER buffer (the next "
                "observation is already stored once); pass False"
            )
        # Not the parents' __init__ (it would allocate the storage): BaseBuffer's attributes.
        self.observation_space = observation_space
        self.action_space = action_space
        self.device = get_device(device)
        self.n_envs = n_envs
        self._total_size = buffer_size
        self._public_cache: dict[str, Any] | None = None
        strategy = goal_selection_strategy
        if isinstance(strategy, enum.Enum) and not isinstance(strategy, str):
            strategy = strategy.name.lower()  # stable-baselines3's own enum: by name
        self.handle_timeout_termination = handle_timeout_termination
        self.n_sampled_goal = n_sampled_goal
        # goalenvs' strategy (it has "random"), apart from the parent's attribute (SB3's enum).
        self._strategy = GoalSelectionStrategy.parse(strategy)
        self._goal_mix = goal_mix
        self._goal_mix_warmup = goal_mix_warmup
        self.copy_info_dict = bool(copy_info_dict or info_keys)
        self.recompute_terminated = bool(recompute_terminated)
        self._infer_info_keys = self.copy_info_dict and not info_keys
        # The global generator on purpose: stable-baselines3 seeds it from its own seed.
        self._seed = int(np.random.randint(2**31 - 1)) if seed is None else seed  # noqa: NPY002
        self.env = None
        # Validates the arguments now; rebuilt at the first add when info keys are inferred.
        self._core = self._make_core(tuple(info_keys))
        self.buffer_size = self.core.rows_per_env
        obs_shape = get_obs_shape(observation_space)
        assert isinstance(obs_shape, dict)  # a Dict space: the core buffer checked it
        self.obs_shape = obs_shape
        self.action_dim = get_action_dim(action_space)
        if env is not None:
            self.set_env(env)

    def _make_core(self, info_keys: tuple[str, ...]) -> CoreBuffer:
        """An empty goalenvs buffer of these settings; :meth:`set_env` gives it the env."""
        return CoreBuffer(
            self._total_size,
            self.observation_space,
            self.action_space,
            compute_reward=_missing_env,
            n_envs=self.n_envs,
            n_sampled_goal=self.n_sampled_goal,
            goal_selection_strategy=self._strategy,
            goal_mix=self._goal_mix,
            goal_mix_warmup=self._goal_mix_warmup,
            handle_timeout_termination=self.handle_timeout_termination,
            info_keys=info_keys,
            seed=self._seed,
        )

    def _rebuild(self, info_keys: tuple[str, ...]) -> None:
        """A new, empty goalenvs buffer with ``info_keys``, rewarded by the same env."""
        env, self.env = self.env, None
        self._core = self._make_core(info_keys)
        if env is not None:
            self.set_env(env)

    @property
    def core(self) -> CoreBuffer:
        """The goalenvs buffer that holds the data."""
        return self._core

    def set_env(self, env: Any) -> None:
        """Sets the env whose ``compute_reward`` rewards relabeled goals (after unpickling)."""
        if self.env is not None:
            raise ValueError("Trying to set env of already initialized environment.")
        self.env = env
        self.core.compute_reward = resolve_goal_function(env, "compute_reward")
        if self.recompute_terminated:
            self.core.compute_terminated = resolve_goal_function(env, "compute_terminated")

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        del state["env"]
        state["_public_cache"] = None  # copies of the storage: rebuilt on demand
        # The env is not pickled: the core is pickled with goal functions that ask for it.
        state["_core"] = CoreBuffer.from_state(self._core.state(), _missing_env)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "_total_size" not in state:
            # Pickled before buffer_size took SB3's per-env meaning.
            state["_total_size"] = state["buffer_size"]
            state["buffer_size"] = state["_core"].rows_per_env
        state.setdefault("_public_cache", None)
        # Pickled before goal mixes: the strategy's own mix.
        state.setdefault("_goal_mix", None)
        state.setdefault("_goal_mix_warmup", 0)
        if "_strategy" not in state:
            # Pickled while the strategy was kept as goal_selection_strategy.
            state["_strategy"] = GoalSelectionStrategy.parse(state.pop("goal_selection_strategy"))
        self.__dict__.update(state)
        self.env = None

    def size(self) -> int:
        """Transitions that can be sampled."""
        return self.core.n_transitions

    def reset(self) -> None:
        """Empties the buffer."""
        self._rebuild(self.core.info_keys)

    def add(  # type: ignore[override]
        self,
        obs: dict[str, np.ndarray],
        next_obs: dict[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, object]],
    ) -> None:
        """Stores one step of every env, as stable-baselines3 calls it."""
        done = np.asarray(done, dtype=bool).reshape(self.n_envs)
        timeout = np.fromiter(
            (info.get("TimeLimit.truncated", False) for info in infos), bool, self.n_envs
        )
        truncated = done & timeout
        if self._infer_info_keys:
            self._adopt_info_keys(infos[0])
        action = np.asarray(action).reshape((self.n_envs, *self.core.action_shape))
        self.core.add(obs, next_obs, action, reward, done & ~truncated, truncated, infos)

    def _adopt_info_keys(self, info: dict[str, object]) -> None:
        # copy_info_dict without info_keys: store the numeric values of the first info.
        self._infer_info_keys = False
        keys = tuple(
            key
            for key, value in info.items()
            if key not in _BOOKKEEPING_KEYS
            and not key.startswith("_")
            and np.asarray(value).dtype.kind in "biuf"
        )
        self._rebuild(keys)

    def sample(  # type: ignore[override]
        self, batch_size: int, env: VecNormalize | None = None
    ) -> DictReplayBufferSamples:
        """Samples a relabeled batch as torch tensors on ``self.device``."""
        if self.env is None:
            raise RuntimeError(
                "the HER buffer has no env to compute rewards: call set_env(env) after loading"
            )
        batch = self.core.sample(batch_size)
        sides: list[Any] = [batch.observations, batch.next_observations]
        rewards = batch.rewards.reshape(-1, 1)
        if env is not None:
            sides = [env.normalize_obs(side) for side in sides]
            assert all(isinstance(side, dict) for side in sides)  # VecNormalize: key by key
            rewards = env.normalize_reward(rewards).astype(np.float32, copy=False)
        obs, next_obs = ({k: self._tensor(v) for k, v in side.items()} for side in sides)
        return DictReplayBufferSamples(
            observations=obs,
            actions=self._tensor(batch.actions.reshape(batch_size, self.action_dim)),
            next_observations=next_obs,
            dones=self._tensor(batch.dones.reshape(-1, 1)),
            rewards=self._tensor(rewards),
        )

    def _tensor(self, array: np.ndarray) -> th.Tensor:
        return th.from_numpy(array).to(self.device)

    # ------------------------------------------------------------------ SB3's public arrays
    # Transition t of env e at position t % buffer_size of (buffer_size, n_envs, ...)
    # arrays: the goalenvs ring's layout, masked where it no longer holds the transition.
    pos = _PublicArray("Position the next transition goes to: transitions added % buffer_size.")
    full = _PublicArray("Whether buffer_size transitions per env have been added (it wrapped).")
    _current_ep_start = _PublicArray("Position of each env's episode in progress (or pos).")
    observations = _PublicArray("``observations[key][pos, env]`` (a read-only cached copy).")
    next_observations = _PublicArray("``next_observations[key][pos, env]`` (a cached copy).")
    actions = _PublicArray("``(buffer_size, n_envs, action_dim)`` (a cached copy).")
    rewards = _PublicArray("Stored rewards ``(buffer_size, n_envs)`` float32 (a cached copy).")
    dones = _PublicArray("``terminated or truncated`` float32 (a cached copy).")
    timeouts = _PublicArray("Truncations (zeros without ``handle_timeout_termination``).")
    ep_start = _PublicArray("Position of the first transition of each one's episode.")
    ep_length = _PublicArray("Length of each transition's episode; 0 while in progress.")

    def _public(self, name: str) -> object:
        if name == "pos":
            return self.core.steps_added % self.buffer_size
        if name == "full":
            return self.core.steps_added >= self.buffer_size
        if name == "_current_ep_start":
            return self.core.counters["current_start"] % self.buffer_size
        cache = self._cache()
        if name not in cache:
            cache[name] = self._assemble(name, cache["held"], cache["closed"])
        return cache[name]

    def _cache(self) -> dict[str, Any]:
        """``held`` (positions the ring still holds) and ``closed`` (of them, those in a
        complete episode), then each array assembled, until the counters change."""
        c = self.core.counters
        key = (self.core, self.core.steps_added, *(c[k].tobytes() for k in sorted(c)))
        cache = self._public_cache
        if cache is None or cache["key"] != key:
            t = self.core.counter_of_rows()[:, None]  # negative: never written
            held = (t >= 0) & (t >= c["sampleable_from"])  # not retired by the ring
            closed = held & (t < c["sampleable_to"])  # in a complete episode
            cache = self._public_cache = {"key": key, "held": held, "closed": closed}
        return cache

    def _assemble(self, name: str, held: np.ndarray, closed: np.ndarray) -> object:
        f = self.core.fields

        def masked(value: np.ndarray, where: np.ndarray = held) -> np.ndarray:
            mask = where.reshape(*where.shape, *[1] * (value.ndim - 2))
            out = np.where(mask, value, np.zeros((), value.dtype))
            out.flags.writeable = False
            return out

        if name in ("observations", "next_observations"):
            side = "obs" if name == "observations" else "next_obs"
            return {key: masked(f[f"{side}/{key}"]) for key in self.core.observation_space.spaces}
        if name == "actions":
            actions = f["action"].reshape(*f["action"].shape[:2], self.action_dim)
            return masked(actions)
        if name == "rewards":
            return masked(f["reward"])
        if name == "dones":
            return masked((f["terminated"] | f["truncated"]).astype(np.float32))
        if name == "timeouts":
            flags = f["truncated"] if self.handle_timeout_termination else f["truncated"] & False
            return masked(flags.astype(np.float32))
        if name == "ep_start":
            return masked(f["episode_start"] % self.buffer_size)
        start = f["episode_start"]
        end = np.take_along_axis(f["episode_end"], start % self.buffer_size, 0)
        return masked(end - start, closed)

    def truncate_last_trajectory(self) -> None:
        """Ends the episodes in progress (stable-baselines3 calls it after loading)."""
        if self.core.episodes_in_progress:
            warnings.warn(
                "The last trajectory in the replay buffer will be truncated.\n"
                "If you are in the same episode as when the replay buffer was saved,\n"
                "you should use `truncate_last_trajectory=False` to avoid that issue.",
                stacklevel=2,
            )
        self.core.truncate_last_trajectory()


def _missing_env(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: object) -> np.ndarray:
    raise RuntimeError("the HER buffer has no env to compute rewards: call set_env(env)")
