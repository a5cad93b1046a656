"""Training jobs on the simulated cluster: allocated resources become steps at the hidden speed.

A running job is a sequence of segments with constant resources; within a segment the step time
is constant, so progress and the finish time are computed, never stepped through. Progress
annotations are coalesced: written only when a reconcile plugin is about to read them.
"""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass, field

from pysched.ids import PodKey
from pysched.workload.job import Job
from pysched.workload.speed import STEP_NOISE

RESTART_SECONDS = 30.0  # a stop-and-restart pays this before steps resume (DESIGN §5)


@dataclass(slots=True)
class Run:
    """One running incarnation of a job, in its current segment."""

    job: Job
    cpu: float
    gpu: int
    seg_start: float  # steps count from here (after a restart's delay)
    seg_steps: int  # steps done at seg_start
    step_s: float  # this segment's seconds per step, noise included
    alloc_from: float  # accounting: when the current allocation began
    version: int = 0
    progress: str = ""  # the last progress annotation written

    def steps_at(self, t: float) -> int:
        if t <= self.seg_start or math.isinf(self.step_s):
            return self.seg_steps
        return min(self.job.steps, self.seg_steps + int((t - self.seg_start) / self.step_s))

    def finish_time(self) -> float:
        return self.seg_start + (self.job.steps - self.seg_steps) * self.step_s


@dataclass(frozen=True, slots=True)
class Usage:
    """One allocation segment of a CPU-model job: for utilisation and the CPU-over-time chart."""

    start: float
    end: float
    cpu: float
    used_cpu_s: float


@dataclass(slots=True)
class Accounting:
    allocated_cpu_s: float = 0.0
    used_cpu_s: float = 0.0
    rescales: int = 0
    usage: list[Usage] = field(default_factory=list)

    @property
    def cpu_utilization(self) -> float:
        return self.used_cpu_s / self.allocated_cpu_s if self.allocated_cpu_s > 0 else 0.0


def noise_rng(seed: int, job: Job) -> random.Random:
    return random.Random(zlib.crc32(f"{seed}/{job.name}".encode()))


def segment_step_seconds(job: Job, cpu: float, steps_left: int, rng: random.Random, noise: float = STEP_NOISE) -> float:
    """Seconds per step for the rest of the job at `cpu`: each step carries independent 5% noise,
    so the segment's mean step time carries 5% / sqrt(steps) (a normal sum, drawn once)."""
    mean = job.truth.step_seconds(cpu, job.gpu)
    if math.isinf(mean) or steps_left <= 0:
        return mean
    factor = 1.0 + noise * rng.gauss(0.0, 1.0) / math.sqrt(steps_left)
    return mean * max(factor, 0.5)


def close_segment(run: Run, now: float, books: Accounting) -> None:
    """Charge the allocation since `alloc_from` (CPU models only: GPU tables carry no CPU use)."""
    per_step = run.job.truth.cpu_seconds_per_step()
    if per_step is not None and now > run.alloc_from:
        used = (run.steps_at(now) - run.steps_at(run.alloc_from)) * per_step
        books.allocated_cpu_s += run.cpu * (now - run.alloc_from)
        books.used_cpu_s += used
        books.usage.append(Usage(run.alloc_from, now, run.cpu, used))
    run.alloc_from = now


def start_run(job: Job, cpu: float, now: float, rng: random.Random, noise: float = STEP_NOISE) -> Run:
    return Run(job, cpu, job.gpu, now, 0, segment_step_seconds(job, cpu, job.steps, rng, noise), now)


def resize_run(
    run: Run, cpu: float, now: float, books: Accounting, rng: random.Random, noise: float = STEP_NOISE
) -> None:
    """A change of the running job's CPUs: in place keeps progress, a restart loses it and waits."""
    close_segment(run, now, books)
    books.rescales += 1
    if run.job.restart_on_resize:
        run.seg_steps, run.seg_start = 0, now + RESTART_SECONDS
    else:
        run.seg_steps, run.seg_start = run.steps_at(now), now
    run.cpu = cpu
    run.step_s = segment_step_seconds(run.job, cpu, run.job.steps - run.seg_steps, rng, noise)
    run.version += 1
    run.progress = ""


def key_of(job: Job) -> PodKey:
    return PodKey(f"sim/{job.name}")
