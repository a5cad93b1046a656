"""Autoscale's typed args (`pluginConfig` of a profile), checked when the profile loads."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pysched.api.labels import selector_problem
from pysched.deadline.predictor import BAND_Z
from pysched.framework.registry import ArgsError, camel_case

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

    def validate(self) -> None:
        checks = {
            "interval_seconds": self.interval_seconds > 0,
            "cooldown_seconds": self.cooldown_seconds >= 0,
            "safety_margin": self.safety_margin >= 0,
            "down_slack": 0 <= self.down_slack < 1,
            "max_step_factor": self.max_step_factor > 1,
            "cpu_min": self.cpu_min > 0,
            "restart_seconds": self.restart_seconds >= 0,
            "band_z": 0 <= self.band_z <= BAND_Z,
            "prior_step_seconds": 0 <= self.prior_step_seconds < math.inf,
            "prior_uncertainty": 0 < self.prior_uncertainty <= 10,
        }
        for name, ok in checks.items():
            if not ok:
                raise ArgsError(camel_case(name), f"out of range: {getattr(self, name)}")
        if self.memory not in MEMORY_MODES:
            raise ArgsError("memory", f"must be one of {', '.join(MEMORY_MODES)}, got {self.memory!r}")
        if self.deadline_namespaces is not None:
            problem = selector_problem(self.deadline_namespaces)
            if problem is not None:
                raise ArgsError("deadlineNamespaces", problem)
