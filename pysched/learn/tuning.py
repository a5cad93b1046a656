"""Online tuning (RLConfig's idea, with a bandit instead of a deep network): while one run of the
`pysched` profile goes on, a UCB1 bandit chooses which of a few sets of Autoscale args is in force,
one set per period of simulated time, and is rewarded with the share of deadline jobs judged met
in that period.

The args are swapped on Autoscale's own controllers between two reconciles, so nothing but their
values changes: a tuner with one arm equal to the profile's args replays the profile exactly. The
reward arrives late (a job is judged when it ends or its deadline passes, long after the args
that shaped it), which is the bandit's handicap here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import statistics
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pysched.api.objects import PodInfo
from pysched.framework.config import SchedulerConfig
from pysched.framework.registry import ArgsError, Registry
from pysched.learn.episodes import Verdicts
from pysched.plugins import default_registry
from pysched.plugins.autoscale import Autoscale
from pysched.plugins.autoscale.args import AutoscaleArgs
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler
from pysched.sim.runner import EPOCH, PolicyResult, Replay, run_policy
from pysched.sim.scenario import Scenario, builtin_scenario

PROFILE = "pysched"  # the profile a tuned run plays
# The args a tuner may set (profile spelling -> AutoscaleArgs field): how readily Autoscale acts.
TUNABLE = {
    "safetyMargin": "safety_margin",
    "bandZ": "band_z",
    "downSlack": "down_slack",
    "cooldownSeconds": "cooldown_seconds",
    "maxStepFactor": "max_step_factor",
}
MAX_ARMS = 16
# Autoscale's default margin, none, and a wide one: the arg that moves results most on the
# generated workloads (seeds 0-9 of small and seed-ps, one value per run).
DEFAULT_ARMS: tuple[Arm, ...] = ({"safetyMargin": 0.05}, {"safetyMargin": 0.0}, {"safetyMargin": 0.3})
Arm = Mapping[str, float]  # tunable arg (profile spelling) -> value
Reconcile = Callable[[Sequence[PodInfo]], Coroutine[Any, Any, None]]


def parse_arm(text: str) -> dict[str, float] | str:
    """`safetyMargin=0.1,bandZ=2` as an arm, or the problem (one line)."""
    arm: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in TUNABLE:
            return f"--arm: NAME=VALUE[,NAME=VALUE] with NAME one of {', '.join(TUNABLE)}, got {text[:60]!r}"
        try:
            number = float(value)
        except ValueError:
            return f"--arm: {name}: a number, got {value[:20]!r}"
        if not math.isfinite(number) or name in arm:
            return f"--arm: {name}: a finite number, given once, in {text[:60]!r}"
        arm[name] = number
    try:
        with_arm(AutoscaleArgs(), arm).validate()
    except ArgsError as err:
        return f"--arm: {err}"
    return arm


def with_arm(args: AutoscaleArgs, arm: Arm) -> AutoscaleArgs:
    changes: dict[str, Any] = {TUNABLE[name]: value for name, value in arm.items()}
    return dataclasses.replace(args, **changes)


@dataclass(slots=True)
class Ucb1:
    """UCB1 over `arms` arms with rewards in [0, 1]: every arm once, in order, then the best mean
    plus `explore` x sqrt(ln(pulls) / its pulls); ties go to the first."""

    arms: int
    explore: float = math.sqrt(2.0)
    pulls: list[int] = field(default_factory=list)
    totals: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pulls = [0] * self.arms
        self.totals = [0.0] * self.arms

    def choose(self) -> int:
        for arm, pulled in enumerate(self.pulls):
            if pulled == 0:
                return arm
        log_n = math.log(sum(self.pulls))
        bounds = [t / n + self.explore * math.sqrt(log_n / n) for t, n in zip(self.totals, self.pulls, strict=True)]
        return max(range(self.arms), key=lambda a: (bounds[a], -a))

    def reward(self, arm: int, value: float) -> None:
        self.pulls[arm] += 1
        self.totals[arm] += min(1.0, max(0.0, value))


@dataclass(frozen=True, slots=True)
class Period:
    start: float  # simulated seconds since the simulator's epoch
    arm: int
    met: int
    missed: int


class OnlineTuner:
    """Plays `arms` on the Autoscale plugins of a run, `period_s` simulated seconds at a time; a
    period in which no deadline job was judged is extended (its reward is not known yet)."""

    def __init__(self, arms: Sequence[Arm], period_s: float) -> None:
        if not 1 <= len(arms) <= MAX_ARMS or period_s <= 0:
            raise ValueError(f"1 to {MAX_ARMS} arms and a positive period are needed")
        self.arms = [dict(a) for a in arms]
        self.period_s = period_s
        self.bandit = Ucb1(len(arms))
        self.periods: list[Period] = []
        self._verdicts = Verdicts()
        self._scalers: list[tuple[Autoscale, AutoscaleArgs]] = []
        self._replay: Replay | None = None
        self._arm = 0
        self._began = 0.0
        self._at = (0, 0)  # met, missed when the period began

    def attach(self, scheduler: Scheduler, replay: Replay) -> None:
        """`run_policy`'s prepare hook: take over the Autoscale plugins' args."""
        scalers = [p for f in scheduler.frameworks.values() for p in f.reconcile if isinstance(p, Autoscale)]
        if not scalers:
            raise ValueError("the run's profile has no Autoscale to tune")
        self._replay = replay
        self._scalers = [(s, s.controller.args) for s in scalers]
        self._began = replay.clock.now()
        self._play(self.bandit.choose())
        for scaler, _ in self._scalers:
            # The plugin object itself, so its other extension points stay as they are.
            scaler.reconcile = self._before(scaler.reconcile)  # type: ignore[method-assign,assignment]

    def _before(self, reconcile: Reconcile) -> Reconcile:
        async def tuned(pods: Sequence[PodInfo]) -> None:
            self._maybe_switch()
            await reconcile(pods)

        return tuned

    def _maybe_switch(self) -> None:
        replay = self._replay
        assert replay is not None
        now = replay.clock.now()
        if now - self._began < self.period_s:
            return
        outcomes = self._verdicts.count(replay)
        met, missed = outcomes.met - self._at[0], outcomes.missed - self._at[1]
        if met + missed == 0:
            return  # nothing judged yet: the period goes on
        self.periods.append(Period(self._began - EPOCH, self._arm, met, missed))
        self.bandit.reward(self._arm, met / (met + missed))
        self._at = (outcomes.met, outcomes.missed)
        self._began = now
        self._play(self.bandit.choose())

    def _play(self, arm: int) -> None:
        self._arm = arm
        for scaler, base in self._scalers:
            scaler.controller.args = with_arm(base, self.arms[arm])


async def tuned_run(
    scenario: Scenario, config: SchedulerConfig, registry: Registry, seed: int, arms: Sequence[Arm], period_s: float
) -> tuple[PolicyResult, OnlineTuner]:
    """One run of the `pysched` profile with its Autoscale args chosen online."""
    tuner = OnlineTuner(arms, period_s)
    result = await run_policy(scenario, config, PROFILE, registry, seed=seed, prepare=tuner.attach)
    return result, tuner


@dataclass(frozen=True, slots=True)
class SeedResult:
    seed: int
    configured: float  # the profile's deadline-met ratio with its args as configured
    tuned: float
    pulls: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TuningReport:
    scenario: str
    arms: tuple[dict[str, float], ...]
    period_s: float
    seeds: tuple[SeedResult, ...]

    def summary(self) -> dict[str, Any]:
        configured = [s.configured for s in self.seeds]
        tuned = [s.tuned for s in self.seeds]
        return {
            "scenario": self.scenario,
            "seeds": len(self.seeds),
            "median_configured": round(statistics.median(configured), 4),
            "median_tuned": round(statistics.median(tuned), 4),
            "tuned_better": sum(s.tuned > s.configured for s in self.seeds),
            "tuned_worse": sum(s.tuned < s.configured for s in self.seeds),
            "pulls": [sum(s.pulls[a] for s in self.seeds) for a in range(len(self.arms))],
        }

    def as_json(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "arms": list(self.arms),
            "period_s": self.period_s,
            "per_seed": [dataclasses.asdict(s) for s in self.seeds],
        }


def compare(
    scenario: str, seeds: range, arms: Sequence[Arm], period_s: float, report: Callable[[str], None]
) -> TuningReport:
    """Seed by seed, the `pysched` profile as configured and tuned online (each on its own run)."""
    registry = default_registry()
    config = builtin_config(registry)
    results = []
    for seed in seeds:
        plain = asyncio.run(run_policy(builtin_scenario(seed, scenario), config, PROFILE, registry, seed=seed))
        tuned, tuner = asyncio.run(tuned_run(builtin_scenario(seed, scenario), config, registry, seed, arms, period_s))
        result = SeedResult(seed, plain.deadline_met_ratio, tuned.deadline_met_ratio, tuple(tuner.bandit.pulls))
        report(f"seed {seed}: configured {result.configured:.3f}  tuned {result.tuned:.3f}  pulls {list(result.pulls)}")
        results.append(result)
    return TuningReport(scenario, tuple(dict(a) for a in arms), period_s, tuple(results))
