"""pysched/Allocation-v0: a valid Gymnasium environment in which answering Autoscale's own choice
replays the `pysched` profile exactly, other answers change what happens, a seed replays the same
episode, rewards add up to the run's outcomes, and runs can be cut short."""

import asyncio
import threading

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import pysched.learn
from pysched.deadline.allocation import ACTIONS, DOWN, KEEP, UP, WIDTH
from pysched.learn.allocation import AllocationEnv, heuristic_answers
from pysched.learn.episodes import Decision, play
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.sim.runner import PolicyResult, run_policy

from .toy import toy


def _rollout(env: AllocationEnv, seed: int, answer: str) -> tuple[list[float], list[np.ndarray], dict[str, object]]:
    obs, info = env.reset(seed=seed)
    rewards, observations = [], [obs]
    rng = np.random.default_rng(0)
    while True:
        if answer == "random":
            action = rng.integers(0, len(ACTIONS), env.window)
        else:
            action = np.full(env.window, KEEP)
            rows = obs[np.any(obs != 0, axis=1)]
            action[: rows.shape[0]] = heuristic_answers(rows)
        obs, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        observations.append(obs)
        if terminated or truncated:
            return rewards, observations, info


def _profile_run(workload_seed: int) -> PolicyResult:
    registry = default_registry()
    return asyncio.run(
        run_policy(toy(workload_seed), builtin_config(registry), "pysched", registry, seed=workload_seed)
    )


def _played(env: AllocationEnv, workload_seed: int, answer: int | None) -> PolicyResult:
    """A whole episode, every job answered `answer` (None: Autoscale's own answer)."""

    def agent(decision: Decision) -> np.ndarray:
        own = heuristic_answers(decision.features)
        return own if answer is None else np.full_like(own, answer)

    return play(env.episode(workload_seed), agent)


def test_registered_and_passes_the_gymnasium_checker() -> None:
    assert pysched.learn.ALLOCATION_ID in gym.registry
    env = gym.make(pysched.learn.ALLOCATION_ID, scenario=toy, window=4)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_answering_autoscales_own_choice_replays_the_profile_exactly_in_groups_of_any_size() -> None:
    for window in (8, 2):  # 2: a reconcile's jobs come in several groups
        env = AllocationEnv(window=window, scenario=toy)
        assert _played(env, 425, None) == _profile_run(425)
        env.close()


def test_answers_reach_every_job_whatever_the_group_size() -> None:
    results, decisions = [], []
    for window in (8, 2):  # the same answer for every job, in groups of up to 8 or of 2
        env = AllocationEnv(window=window, scenario="seed-insufficient")
        episode = env.episode(3)
        results.append(play(episode, lambda d: np.full(d.features.shape[0], KEEP)))
        decisions.append(episode.decisions)
        env.close()
    assert decisions[1] > decisions[0]  # some reconciles' jobs came in several groups of 2
    assert results[0] == results[1] and results[0].rescales == 0


def test_other_answers_change_the_run() -> None:
    env = AllocationEnv(window=8, scenario=toy)
    own = _played(env, 425, None)
    up, down, keep = _played(env, 425, UP), _played(env, 425, DOWN), _played(env, 425, KEEP)
    env.close()
    assert own.rescales == 2 and keep.rescales == 0  # "keep" overrides Autoscale's two resizes
    assert down.rescales > own.rescales and down.makespan_s > own.makespan_s  # every job shrinks
    assert up != own and keep != own


def test_the_same_seed_replays_the_same_episode_and_rewards_add_up() -> None:
    env = AllocationEnv(window=8, scenario=toy)
    a = _rollout(env, seed=5, answer="random")
    b = _rollout(env, seed=5, answer="random")
    c = _rollout(env, seed=1, answer="heuristic")
    env.close()
    assert a[0] == b[0] and all(np.array_equal(x, y) for x, y in zip(a[1], b[1], strict=True))
    met = round(float(c[2]["deadline_met_ratio"]) * 12)  # type: ignore[arg-type]
    assert sum(c[0]) == met - (12 - met)
    assert c[1][0].shape == (8, WIDTH) and env.observation_space.contains(c[1][0])


def test_masks_allow_only_keep_on_padding_and_an_action_outside_the_space_is_refused() -> None:
    env = AllocationEnv(window=8, scenario=toy)
    obs, _ = env.reset(seed=1)
    mask = env.action_masks().reshape(8, len(ACTIONS))
    real = np.any(obs != 0, axis=1)
    assert mask[real].all() and mask[~real, KEEP].all() and not mask[~real][:, [DOWN, UP]].any()
    assert env._decision is not None
    # Each refused in the caller's thread: in the run, Autoscale would contain it as a policy's
    # bug and act on its own answers (a short action did, logging a traceback).
    for bad in ([7, -1, 3, 99, -5, 3, 4, 8], [1], 1, np.ones(8) * 1.9, np.full(8, np.nan), np.ones(9, np.int64)):
        with pytest.raises(ValueError, match=r"action: 8 whole numbers, each 0 \(down\), 1 \(keep\) or 2 \(up\)"):
            env.step(np.asarray(bad) if isinstance(bad, list) else bad)
    answers = env._answer(np.array([UP, DOWN, UP, DOWN, UP, DOWN, UP, DOWN]), env._decision)
    assert answers.tolist() == [UP, DOWN, UP, DOWN, UP, DOWN, UP, DOWN][: int(real.sum())]
    env.close()


def test_closing_mid_episode_ends_its_run() -> None:
    before = threading.active_count()
    env = AllocationEnv(window=8, scenario=toy)
    env.reset(seed=3)
    assert threading.active_count() == before + 1
    env.close()
    assert threading.active_count() == before
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(np.zeros(8, np.int64))
