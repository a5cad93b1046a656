"""What the learning environments share: each episode replays a generated workload with the
production scheduler on the simulated cluster (`episodes.Episode`), pausing at every decision of
the learned side; rewards count deadline jobs met and missed as they are judged; seeds are split
into disjoint train, validation and test ranges; `reset(seed=s)` makes a whole episode
reproducible."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from pysched.api.limits import MAX_SEED, clip
from pysched.deadline.scorer import ALLOCATION, QUEUE, PolicyKind
from pysched.learn.episodes import ALLOCATION_ENV, ORDERING_ENV, Decision, Episode, Kind, Outcomes
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.sim.scenario import SCENARIOS, Scenario, builtin_scenario

TRAIN_SEEDS = range(0, 900)
VALIDATION_SEEDS = range(900, 1000)  # training keeps the checkpoint that does best on some of these
TEST_SEEDS = range(1000, 1100)  # never used in training: the README's held-out evaluation
FEATURE_BOUND = 50.0  # rows are squashed well inside this; the box says so
MAX_EMPTY_EPISODES = 100  # reset() skips workloads that need no decision, up to this many


def workload_of(scenario: str | Callable[[int], Scenario], seed: int) -> Scenario:
    """The workload of `seed`: a built-in generator's by name, or the given generator's."""
    return builtin_scenario(seed, scenario) if isinstance(scenario, str) else scenario(seed)


def allocation_has_jobs(scenario: str | Callable[[int], Scenario], seeds: Iterable[int]) -> bool:
    """Whether a workload of `seeds` holds a CPU job with a deadline: the allocation environment
    decides only for those (Autoscale scales CPUs in place), and a scenario without any would
    have every reset skip workload after workload."""
    return any(job.deadline is not None and not job.gpu for seed in seeds for job in workload_of(scenario, seed).jobs)


@dataclass(frozen=True, slots=True)
class Rewards:
    met: float = 1.0
    missed: float = -1.0
    jct_per_hour: float = 0.0

    def __post_init__(self) -> None:
        for name in ("met", "missed", "jct_per_hour"):
            value: object = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise ValueError(f"rewards.{name}: a finite number, got {clip(repr(value))}")

    def of(self, before: Outcomes, after: Outcomes) -> float:
        return (
            self.met * (after.met - before.met)
            + self.missed * (after.missed - before.missed)
            - self.jct_per_hour * (after.finished_hours - before.finished_hours)
        )


DEFAULT_REWARDS = Rewards()


def _rows(window: object) -> int:
    """The window, a whole number of rows from 2 to 256 (a numpy integer too, never a bool)."""
    if isinstance(window, bool) or not isinstance(window, numbers.Integral) or not 2 <= int(window) <= 256:
        raise ValueError(f"window: a whole number of rows from 2 to 256, got {clip(repr(window))}")
    return int(window)


def policy_kind(env: Kind) -> PolicyKind:
    """The weights file an environment's policy is exported to."""
    return ALLOCATION if env == ALLOCATION_ENV else QUEUE


class SimulatedEnv(gym.Env[np.ndarray, Any]):
    """The episode loop; a subclass gives the action space, `_answer` (the action as the episode
    takes it), `action_masks`, the observation's width and the profile an episode runs by default."""

    metadata = {"render_modes": []}  # noqa: RUF012 (Gymnasium declares it an instance attribute)
    kind: Kind = ORDERING_ENV
    width: int = 0
    default_profile: str = ""

    def __init__(
        self,
        window: int = 16,
        scenario: str | Callable[[int], Scenario] = "seed-insufficient",
        seeds: range = TRAIN_SEEDS,
        rewards: Rewards = DEFAULT_REWARDS,
        profile: str | None = None,
    ) -> None:
        profile = self.default_profile if profile is None else profile
        if isinstance(scenario, str) and scenario not in SCENARIOS:
            raise ValueError(f"scenario: one of {', '.join(SCENARIOS)}, got {scenario!r}")
        window = _rows(window)
        given: object = seeds  # as called from Python: anything
        ends = (seeds[0], seeds[-1]) if isinstance(given, range) and len(seeds) else (-1, -1)
        if min(ends) < 0 or max(ends) > MAX_SEED:
            # A negative seed draws the workload of its absolute value: a held-out one.
            raise ValueError(f"seeds: a range of workload seeds from 0 to {MAX_SEED}, got {clip(repr(seeds))}")
        self.window, self.scenario, self.seeds, self.rewards, self.profile = window, scenario, seeds, rewards, profile
        self._registry = default_registry()
        self._config = builtin_config(self._registry)
        if self._config.profile(profile) is None:
            raise ValueError(f"profile: no built-in profile {profile!r}")
        self.observation_space = gym.spaces.Box(-FEATURE_BOUND, FEATURE_BOUND, (window, self.width), np.float32)
        self.action_space = self._action_space(window)
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

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._episode is None or self._decision is None:
            raise RuntimeError("step() before reset(), or after the episode ended")
        self._episode.answer(self._answer(action, self._decision))
        self._decision = self._episode.next()
        done = self._decision is None
        outcomes = self._episode.outcomes(final=done)
        reward = self.rewards.of(self._outcomes, outcomes)
        self._outcomes = outcomes
        info: dict[str, Any] = {"workload_seed": self.workload_seed}
        if done and self._episode.result is not None:
            info["deadline_met_ratio"] = self._episode.result.deadline_met_ratio
        return self._observation(), float(reward), done, False, info

    def close(self) -> None:
        if self._episode is not None:
            self._episode.close()
            self._episode = None

    def episode(self, workload_seed: int) -> Episode:
        """A fresh run of the workload of `workload_seed`, outside the Gymnasium loop (warm-start
        data, evaluation)."""
        scenario = workload_of(self.scenario, workload_seed)
        return Episode(scenario, self._config, self.profile, self._registry, workload_seed, self.window, kind=self.kind)

    # ----- for subclasses
    def _action_space(self, window: int) -> gym.Space[Any]:
        raise NotImplementedError

    def _answer(self, action: Any, decision: Decision) -> int | np.ndarray:
        raise NotImplementedError

    def action_masks(self) -> np.ndarray:
        raise NotImplementedError

    # ----- internals
    def _start(self, workload_seed: int) -> None:
        self.close()
        self._episode = self.episode(workload_seed)
        self._outcomes = Outcomes()
        self._decision = self._episode.next()

    def _observation(self) -> np.ndarray:
        obs = np.zeros((self.window, self.width), dtype=np.float32)
        if self._decision is not None:
            rows = self._decision.features[: self.window]
            obs[: rows.shape[0]] = np.clip(rows, -FEATURE_BOUND, FEATURE_BOUND)
        return obs
