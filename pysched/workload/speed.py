"""Hidden true speed models: how many seconds one training step takes on given resources.

The scheduler never reads these; the simulated cluster turns allocated resources into steps with
them. CPU models are Amdahl curves, GPU models measured throughput tables.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Protocol

STEP_NOISE = 0.05  # every step time carries 5% noise


class SpeedModel(Protocol):
    def step_seconds(self, cpu: float, gpus: int) -> float:
        """Mean seconds per step on `cpu` CPUs and `gpus` GPUs; inf when the job cannot run so."""
        ...

    def cpu_seconds_per_step(self) -> float | None:
        """CPU-seconds one step actually uses; None when the model has no CPU usage model."""
        ...


@dataclass(frozen=True, slots=True)
class Amdahl:
    """`t(c) = a + b / min(c, p_max)`: a serial part and `b` parallel CPU-seconds per step."""

    a: float
    b: float
    p_max: int

    def step_seconds(self, cpu: float, gpus: int) -> float:
        if cpu <= 0:
            return math.inf
        if cpu < 1:
            # Below one CPU the whole step is throttled (CFS quota), serial part included.
            return (self.a + self.b) / cpu
        return self.a + self.b / min(cpu, self.p_max)

    def cpu_seconds_per_step(self) -> float | None:
        return self.a + self.b

    @staticmethod
    def from_t1(t1: float, f: float, p_max: int) -> Amdahl:
        """From the single-CPU step time `t1 = a + b` and the serial fraction `f = a / t1`."""
        return Amdahl(a=f * t1, b=(1 - f) * t1, p_max=max(1, p_max))


@dataclass(frozen=True, slots=True)
class Throughput:
    """Measured steps/s by GPU count, linear between offered counts; other counts are not offered."""

    gpus: tuple[int, ...]  # offered counts, ascending
    steps_per_s: tuple[float, ...]

    def rate(self, gpus: int) -> float | None:
        if not self.gpus or gpus < self.gpus[0] or gpus > self.gpus[-1]:
            return None
        i = bisect.bisect_left(self.gpus, gpus)
        if self.gpus[i] == gpus:
            return self.steps_per_s[i]
        lo, hi = self.gpus[i - 1], self.gpus[i]
        w = (gpus - lo) / (hi - lo)
        return self.steps_per_s[i - 1] * (1 - w) + self.steps_per_s[i] * w

    def step_seconds(self, cpu: float, gpus: int) -> float:
        rate = self.rate(gpus)
        return math.inf if rate is None or rate <= 0 else 1.0 / rate

    def cpu_seconds_per_step(self) -> float | None:
        return None
