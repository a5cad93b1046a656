"""pysched/Ordering-v0: a valid Gymnasium environment, reproducible under a seed, whose rewards
add up to the run's deadline outcomes, and whose runs can be cut short."""

import math
import threading

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import pysched.learn
from pysched.deadline.features import WIDTH
from pysched.learn.base import TEST_SEEDS, TRAIN_SEEDS, VALIDATION_SEEDS, Rewards
from pysched.learn.heuristic import least_laxity_known
from pysched.learn.ordering import OrderingEnv

from .toy import toy


def _rollout(
    env: OrderingEnv, seed: int, pick: str = "first"
) -> tuple[list[float], list[np.ndarray], dict[str, object]]:
    obs, info = env.reset(seed=seed)
    rewards, observations = [], [obs]
    rng = np.random.default_rng(0)
    while True:
        mask = env.action_masks()
        if pick == "first":
            action = 0
        elif pick == "random":
            action = int(rng.choice(np.flatnonzero(mask)))
        else:
            action = least_laxity_known(obs, mask, np.zeros(mask.shape[0]))  # run times unknown: EDF
        obs, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        observations.append(obs)
        if terminated or truncated:
            return rewards, observations, info


def test_registered_and_passes_the_gymnasium_checker() -> None:
    assert pysched.learn.ORDERING_ID in gym.registry
    env = gym.make(pysched.learn.ORDERING_ID, scenario=toy, window=8)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_the_same_seed_replays_the_same_episode() -> None:
    env = OrderingEnv(window=8, scenario=toy)
    a = _rollout(env, seed=5, pick="random")
    b = _rollout(env, seed=5, pick="random")
    c = _rollout(env, seed=6, pick="random")
    env.close()
    assert a[0] == b[0] and all(np.array_equal(x, y) for x, y in zip(a[1], b[1], strict=True))
    assert a[2]["workload_seed"] == b[2]["workload_seed"] != c[2]["workload_seed"]


def test_rewards_add_up_to_met_minus_missed() -> None:
    env = OrderingEnv(window=8, scenario=toy)
    rewards, observations, info = _rollout(env, seed=1, pick="laxity")
    env.close()
    ratio = float(info["deadline_met_ratio"])  # type: ignore[arg-type]
    met = round(ratio * 12)
    assert sum(rewards) == met - (12 - met)
    assert observations[0].shape == (8, WIDTH)
    assert env.observation_space.contains(observations[0])


def test_masks_mark_real_rows_and_a_masked_action_reads_as_the_first() -> None:
    env = OrderingEnv(window=16, scenario=toy)
    obs, _ = env.reset(seed=2)
    mask = env.action_masks()
    real = np.any(obs != 0, axis=1)
    assert mask.any() and not np.any(mask & ~real)  # never a padding row
    twin = OrderingEnv(window=16, scenario=toy)
    twin.reset(seed=2)
    masked = int(np.flatnonzero(~mask)[0])
    after_masked = env.step(masked)
    after_first = twin.step(0)
    assert np.array_equal(after_masked[0], after_first[0]) and after_masked[1] == after_first[1]
    env.close()
    twin.close()


def test_an_action_outside_the_space_and_bad_arguments_are_refused() -> None:
    env = OrderingEnv(window=8, scenario=toy)
    env.reset(seed=2)
    for bad in (8, -1, 3.7, "1", True, np.array([1, 2])):
        with pytest.raises(ValueError, match=r"action: a row number from 0 to 7"):
            env.step(bad)
    env.step(np.int64(7))  # within the space (masked or not)
    env.close()
    for window in (2.5, "16", True, 1):
        with pytest.raises(ValueError, match=r"window: a whole number of rows from 2 to 256"):
            OrderingEnv(window=window, scenario=toy)  # type: ignore[arg-type]
    # A negative seed would draw the workload of its absolute value: a held-out one.
    for seeds in (range(-1100, -1000), range(0), range(2**32 - 1, 2**32 + 1), [1, 2]):
        with pytest.raises(ValueError, match=r"seeds: a range of workload seeds from 0 to 4294967295"):
            OrderingEnv(seeds=seeds, scenario=toy)  # type: ignore[arg-type]
    for value in (math.nan, math.inf, "1"):
        with pytest.raises(ValueError, match=r"rewards.met: a finite number"):
            Rewards(met=value)  # type: ignore[arg-type]


def test_closing_mid_episode_ends_its_run() -> None:
    before = threading.active_count()
    env = OrderingEnv(window=8, scenario=toy)
    env.reset(seed=3)
    assert threading.active_count() == before + 1
    env.close()
    assert threading.active_count() == before
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(0)


def test_vectorised_with_gymnasium() -> None:
    envs = gym.vector.SyncVectorEnv([lambda: OrderingEnv(window=8, scenario=toy) for _ in range(2)])
    obs, _ = envs.reset(seed=[1, 2])
    assert obs.shape == (2, 8, WIDTH)
    obs, rewards, *_ = envs.step(np.zeros(2, dtype=np.int64))
    assert rewards.shape == (2,)
    envs.close()


def test_train_and_test_seeds_are_disjoint_and_bad_settings_are_refused() -> None:
    assert set(TRAIN_SEEDS).isdisjoint(TEST_SEEDS) and range(1000, 1100) == TEST_SEEDS
    assert set(VALIDATION_SEEDS).isdisjoint(TRAIN_SEEDS) and set(VALIDATION_SEEDS).isdisjoint(TEST_SEEDS)
    with pytest.raises(ValueError, match="scenario"):
        OrderingEnv(scenario="nope")
    with pytest.raises(ValueError, match="window"):
        OrderingEnv(window=1)
