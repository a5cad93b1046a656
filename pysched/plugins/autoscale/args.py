"""Autoscale's typed args (`pluginConfig` of a profile), checked when the profile loads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pysched.api.labels import selector_problem
from pysched.api.limits import clip
from pysched.deadline.predictor import BAND_Z
from pysched.framework.interfaces import MAX_RECONCILE_INTERVAL_S, MIN_RECONCILE_INTERVAL_S
from pysched.framework.registry import MAX_ARGS_SECONDS, ArgsError, check_range

MEMORY_MODES = ("fixed", "withCpu")


@dataclass(frozen=True, slots=True)
class AutoscaleArgs:
    interval_seconds: float = 60.0
    cooldown_seconds: float = 120.0
    safety_margin: float = 0.05  # on top of the prediction band's upper edge
    down_slack: float = 0.3  # scale down only if the smaller count leaves this share of the time left
    max_step_factor: float = 2.0  # at most this times the current CPUs per scale-up
    cpu_min: float = 1.0  # CPUs, when the pod has no pysched.io/cpu-min
    restart_seconds: float = 30.0  # assumed cost of a container restart before steps resume
    band_z: float = 1.0  # standard deviations of the prediction band planned for (predictor: 2 = ~95%)
    # Generic prior for a job never observed: seconds per step on one CPU (0: unknown, the pod
    # binds with its request) and the relative uncertainty of that guess.
    prior_step_seconds: float = 0.0
    prior_uncertainty: float = 0.5
    memory: str = "fixed"  # or "withCpu": memory requests grow with CPUs on scale-up
    # DeadlineLaxity's namespace selector, repeated here (plugins never read each other): a pod whose
    # namespace may not use deadlines is not scaled toward one. None: every namespace may.
    deadline_namespaces: Mapping[str, Any] | None = None
    # Per-pod slack series exported, the tightest first (a series per job costs the metrics
    # pipeline memory at 10,000 jobs); 0: none. The count by state is always complete.
    slack_series_limit: int = 1000
    # A job on track is looked at again after half its predicted slack, at most this long after
    # (a job no count saves: this long); 0: every job at every reconcile. A job that wants CPUs,
    # and every job on its node (they may have to give them), is looked at every reconcile.
    review_max_seconds: float = 600.0

    def validate(self) -> None:
        check_range(self, "interval_seconds", MIN_RECONCILE_INTERVAL_S, MAX_RECONCILE_INTERVAL_S)
        check_range(self, "cooldown_seconds", 0, MAX_ARGS_SECONDS)
        check_range(self, "safety_margin", 0, 10)
        check_range(self, "down_slack", 0, 1, below=True)
        check_range(self, "max_step_factor", 1, 1000, above=True)
        check_range(self, "cpu_min", 0, 1_000_000, above=True)
        check_range(self, "restart_seconds", 0, MAX_ARGS_SECONDS)
        check_range(self, "band_z", 0, BAND_Z)
        check_range(self, "prior_step_seconds", 0, MAX_ARGS_SECONDS)
        check_range(self, "prior_uncertainty", 0, 10, above=True)
        check_range(self, "slack_series_limit", 0, 1_000_000)
        check_range(self, "review_max_seconds", 0, MAX_ARGS_SECONDS)
        if self.memory not in MEMORY_MODES:
            raise ArgsError("memory", f"must be one of {', '.join(MEMORY_MODES)}, got {clip(self.memory)}")
        if self.deadline_namespaces is not None:
            problem = selector_problem(self.deadline_namespaces)
            if problem is not None:
                raise ArgsError("deadlineNamespaces", problem)
