"""Side-by-side evaluation of learned policies on held-out workloads: every policy on the same
seeds, one simulation each, and the medians of their deadline-met ratios. A learned queue order
runs as the `learned` profile; a learned allocation policy as `pysched-allocation`, the `pysched`
profile with LearnedAutoscale in place of Autoscale."""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pysched.deadline.scorer import PolicyFileError, policy_at
from pysched.framework.config import SchedulerConfig, merge, parse_config
from pysched.framework.registry import Registry
from pysched.learn.ordering import LEARNED_PROFILE
from pysched.plugins.autoscale import LEARNED_NAME as LEARNED_AUTOSCALE
from pysched.plugins.autoscale import NAME as AUTOSCALE
from pysched.plugins.builtin import builtin_config, builtin_profiles
from pysched.plugins.learned_queue_sort import NAME as LEARNED_QUEUE_SORT
from pysched.sim.runner import simulate
from pysched.sim.scenario import builtin_scenario

POLICIES = ("default", "edf", "seed", "pysched-noscale", "pysched", LEARNED_PROFILE)
LEARNED_ALLOCATION_PROFILE = "pysched-allocation"
ALLOCATION_POLICIES = ("pysched", LEARNED_ALLOCATION_PROFILE)
MARGIN = 0.03  # what the learned order must add to the better of edf and pysched-noscale


def learned_config(registry: Registry, weights: str | None) -> SchedulerConfig:
    """The built-in profiles, the `learned` one reading `weights` (None: the shipped policy) with
    its window, at most what the file supports."""
    config = builtin_config(registry)
    if weights is None:
        return config
    raw = copy.deepcopy(next(p for p in builtin_profiles() if p["schedulerName"] == LEARNED_PROFILE))
    configs = raw.setdefault("pluginConfig", [])
    entry = next((c for c in configs if c.get("name") == LEARNED_QUEUE_SORT), None)
    if entry is None:
        entry = {"name": LEARNED_QUEUE_SORT, "args": {}}
        configs.append(entry)
    args = entry.setdefault("args", {})
    args["weights"] = weights  # the profile's other args stay
    window = args.get("window", 0)
    supported = _supported_window(weights)
    if window and supported is not None and supported < window:  # a file trained with a smaller --window
        args["window"] = supported
    return merge(config, parse_config({"profiles": [raw]}, f"--weights {weights}", registry))


def _supported_window(weights: str) -> int | None:
    """The largest window the weights file supports; None when it cannot be read (the profile's
    check then names the problem)."""
    try:
        return policy_at(weights).window
    except PolicyFileError:
        return None


def allocation_config(registry: Registry, weights: str) -> SchedulerConfig:
    """The built-in profiles and `pysched-allocation`: `pysched` with LearnedAutoscale reading
    `weights` in place of Autoscale (its args kept)."""
    raw = copy.deepcopy(next(p for p in builtin_profiles() if p["schedulerName"] == "pysched"))
    raw["schedulerName"] = LEARNED_ALLOCATION_PROFILE
    for point, entries in raw.get("plugins", {}).items():
        raw["plugins"][point] = [
            {**e, "name": LEARNED_AUTOSCALE} if e.get("name") == AUTOSCALE else e for e in entries or ()
        ]
    configs = raw.setdefault("pluginConfig", [])
    entry = next((c for c in configs if c.get("name") == AUTOSCALE), None)
    if entry is None:
        entry = {"name": AUTOSCALE, "args": {}}
        configs.append(entry)
    entry["name"] = LEARNED_AUTOSCALE
    entry["args"] = {**entry.get("args", {}), "weights": weights}
    return merge(builtin_config(registry), parse_config({"profiles": [raw]}, f"--weights {weights}", registry))


@dataclass(frozen=True, slots=True)
class Evaluation:
    scenario: str
    seeds: tuple[int, ...]
    ratios: dict[str, tuple[float, ...]]  # policy -> deadline-met ratio per seed

    def median(self, policy: str) -> float:
        return statistics.median(self.ratios[policy])

    def baseline(self) -> tuple[float, ...]:
        """Per seed, the better of edf and pysched-noscale."""
        return tuple(max(a, b) for a, b in zip(self.ratios["edf"], self.ratios["pysched-noscale"], strict=True))

    def seeds_at_bar(self) -> int:
        """Seeds on which the learned order reaches the baseline plus the margin."""
        return sum(
            1 for mine, base in zip(self.ratios[LEARNED_PROFILE], self.baseline(), strict=True) if mine >= base + MARGIN
        )

    def as_json(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "seeds": [self.seeds[0], self.seeds[-1]] if self.seeds else [],
            "median": {p: self.median(p) for p in self.ratios},
            **(
                {"baseline_median": statistics.median(self.baseline()), "seeds_at_bar": self.seeds_at_bar()}
                if self.seeds and {LEARNED_PROFILE, "edf", "pysched-noscale"} <= set(self.ratios)
                else {}
            ),
            "ratios": {p: list(r) for p, r in self.ratios.items()},
        }


def evaluate(
    registry: Registry,
    config: SchedulerConfig,
    scenario: str,
    seeds: Sequence[int],
    policies: Sequence[str] = POLICIES,
    on_seed: Callable[[int], None] | None = None,
) -> Evaluation:
    ratios: dict[str, list[float]] = {p: [] for p in policies}
    for seed in seeds:
        results = simulate(builtin_scenario(seed, scenario), config, list(policies), registry, seed=seed)
        for policy, result in results.items():
            ratios[policy].append(result.deadline_met_ratio)
        if on_seed is not None:
            on_seed(seed)
    return Evaluation(scenario, tuple(seeds), {p: tuple(r) for p, r in ratios.items()})
