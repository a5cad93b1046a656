"""`pysched/Ordering-v0`: which of the first K waiting jobs goes next.

Each episode replays a generated workload on the simulated cluster with the production
scheduler and the `learned` profile; its LearnedQueueSort hands every choice among two pods or
more to the agent. Observation: the window's feature rows (`pysched.deadline.features`), padded
with zero rows to K. Action: a row; `action_masks()` marks the rows that may be picked (real pods
of the head's priority). A masked action is read as row 0, the queue's own order.

Reward, per step: `met` for each deadline job that finished by its deadline since the last step,
`missed` for each that finished late or whose deadline passed unfinished, minus `jct_per_hour`
times the completion time of each deadline job that finished. The episode ends with the run.
Episodes draw their workload seed from `seeds` with the environment's generator, so
`reset(seed=s)` makes the whole episode reproducible; train and test seeds are disjoint ranges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from pysched.deadline.features import WIDTH
from pysched.learn.episodes import Decision, Episode, Outcomes
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.sim.scenario import SCENARIOS, Scenario, builtin_scenario

TRAIN_SEEDS = range(0, 900)
VALIDATION_SEEDS = range(900, 1000)  # training keeps the checkpoint that does best on some of these
TEST_SEEDS = range(1000, 1100)  # never used in training: the README's held-out evaluation
LEARNED_PROFILE = "learned"
FEATURE_BOUND = 50.0  # rows are squashed well inside this; the box says so
MAX_EMPTY_EPISODES = 100  # reset() skips workloads that need no decision, up to this many


@dataclass(frozen=True, slots=True)
class Rewards:
    met: float = 1.0
    missed: float = -1.0
    jct_per_hour: float = 0.0

    def of(self, before: Outcomes, after: Outcomes) -> float:
        return (
            self.met * (after.met - before.met)
            + self.missed * (after.missed - before.missed)
            - self.jct_per_hour * (after.finished_hours - before.finished_hours)
        )


class OrderingEnv(gym.Env[np.ndarray, np.int64]):
    metadata = {"render_modes": []}  # noqa: RUF012 (Gymnasium declares it an instance attribute)

    def __init__(
        self,
        window: int = 16,
        scenario: str | Callable[[int], Scenario] = "seed-insufficient",
        seeds: range = TRAIN_SEEDS,
        rewards: Rewards = Rewards(),
        profile: str = LEARNED_PROFILE,
    ) -> None:
        if isinstance(scenario, str) and scenario not in SCENARIOS:
            raise ValueError(f"scenario: one of {', '.join(SCENARIOS)}, got {scenario!r}")
        if not 2 <= window <= 256:
            raise ValueError(f"window: 2 to 256 pods, got {window}")
        if len(seeds) == 0:
            raise ValueError("seeds: an empty range")
        self.window, self.scenario, self.seeds, self.rewards, self.profile = window, scenario, seeds, rewards, profile
        self.observation_space = gym.spaces.Box(-FEATURE_BOUND, FEATURE_BOUND, (window, WIDTH), np.float32)
        self.action_space = gym.spaces.Discrete(window)
        self._registry = default_registry()
        self._config = builtin_config(self._registry)
        if self._config.profile(profile) is None:
            raise ValueError(f"profile: no built-in profile {profile!r}")
        self._episode: Episode | None = None
        self._decision: Decision | None = None
        self._outcomes = Outcomes()
        self.workload_seed = -1

    # ----- Gymnasium
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        for _ in range(MAX_EMPTY_EPISODES):
            self.workload_seed = int(self.seeds[int(self.np_random.integers(len(self.seeds)))])
            self._start(self.workload_seed)
            if self._decision is not None:
                return self._observation(), {"workload_seed": self.workload_seed}
        raise RuntimeError(f"{MAX_EMPTY_EPISODES} workloads in a row needed no decision")

    def step(self, action: np.int64 | int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._episode is None or self._decision is None:
            raise RuntimeError("step() before reset(), or after the episode ended")
        index = int(action)
        allowed = self._decision.allowed
        if not (0 <= index < allowed.shape[0] and allowed[index]):
            index = 0
        self._episode.answer(index)
        self._decision = self._episode.next()
        done = self._decision is None
        outcomes = self._episode.outcomes(final=done)
        reward = self.rewards.of(self._outcomes, outcomes)
        self._outcomes = outcomes
        info: dict[str, Any] = {"workload_seed": self.workload_seed}
        if done and self._episode.result is not None:
            info["deadline_met_ratio"] = self._episode.result.deadline_met_ratio
        return self._observation(), float(reward), done, False, info

    def action_masks(self) -> np.ndarray:
        mask = np.zeros(self.window, dtype=np.bool_)
        if self._decision is not None:
            allowed = self._decision.allowed[: self.window]
            mask[: allowed.shape[0]] = allowed
        if not mask.any():
            mask[0] = True  # the episode ended: any action, read as row 0
        return mask

    def close(self) -> None:
        if self._episode is not None:
            self._episode.close()
            self._episode = None

    def episode(self, workload_seed: int) -> Episode:
        """A fresh run of the workload of `workload_seed`, outside the Gymnasium loop (warm-start
        data, evaluation)."""
        scenario = (
            builtin_scenario(workload_seed, self.scenario)
            if isinstance(self.scenario, str)
            else self.scenario(workload_seed)
        )
        return Episode(scenario, self._config, self.profile, self._registry, workload_seed, self.window)

    # ----- internals
    def _start(self, workload_seed: int) -> None:
        self.close()
        self._episode = self.episode(workload_seed)
        self._outcomes = Outcomes()
        self._decision = self._episode.next()

    def _observation(self) -> np.ndarray:
        obs = np.zeros((self.window, WIDTH), dtype=np.float32)
        if self._decision is not None:
            rows = self._decision.features[: self.window]
            obs[: rows.shape[0]] = np.clip(rows, -FEATURE_BOUND, FEATURE_BOUND)
        return obs
