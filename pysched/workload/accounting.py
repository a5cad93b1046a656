"""What running training jobs use of what they are allocated, and their segments' changes.

A running job is a sequence of segments with constant resources (`pysched.workload.segment`,
shared by the simulator and the kubelet emulator); closing a segment charges its allocation and the
CPU-seconds its steps used, for utilisation and the CPU-over-time chart.
"""

from __future__ import annotations

import collections
import random
from dataclasses import dataclass, field

from pysched.workload.segment import Run, retime
from pysched.workload.speed import STEP_NOISE


@dataclass(frozen=True, slots=True)
class Usage:
    """One allocation segment of a CPU-model job: for utilisation and the CPU-over-time chart."""

    start: float
    end: float
    cpu: float
    used_cpu_s: float
    job: str = ""  # the job's name (`pysched simulate --jobs-csv`)


@dataclass(slots=True)
class Accounting:
    allocated_cpu_s: float = 0.0
    used_cpu_s: float = 0.0
    rescales: int = 0
    usage: list[Usage] = field(default_factory=list)
    job_rescales: collections.Counter[str] = field(default_factory=collections.Counter)

    def rescaled(self, job: str) -> None:
        """A running job's resources changed (CPUs in place or by a restart, its worker set)."""
        self.rescales += 1
        self.job_rescales[job] += 1

    @property
    def cpu_utilization(self) -> float:
        return self.used_cpu_s / self.allocated_cpu_s if self.allocated_cpu_s > 0 else 0.0


def close_segment(run: Run, now: float, books: Accounting) -> None:
    """Charge the allocation since `alloc_from` (CPU models only: GPU tables carry no CPU use)."""
    per_step = run.job.truth.cpu_seconds_per_step()
    if per_step is not None and now > run.alloc_from:
        allocated = run.cpu * (now - run.alloc_from)
        # A step's noise may make it shorter than its a + b CPU-seconds need on one CPU or less:
        # the CPUs held are all it can have used.
        used = min(allocated, (run.steps_at(now) - run.steps_at(run.alloc_from)) * per_step)
        books.allocated_cpu_s += allocated
        books.used_cpu_s += used
        books.usage.append(Usage(run.alloc_from, now, run.cpu, used, run.job.name))
    run.alloc_from = now


def resize_run(
    run: Run, cpu: float, now: float, books: Accounting, rng: random.Random, noise: float = STEP_NOISE
) -> None:
    """A change of the running job's CPUs: in place keeps progress, a restart loses it and waits."""
    close_segment(run, now, books)
    books.rescaled(run.job.name)
    retime(run, cpu, now, rng, noise)
