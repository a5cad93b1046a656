"""A running training job as segments of constant resources: progress and finish are computed.

Within a segment the step time is constant (noise drawn once per segment), so the steps done at
any moment and the finish time are arithmetic, never stepped through. A change of CPUs closes the
segment: in place it keeps the steps; a container restart (`resizePolicy: RestartContainer`) loses
them and pays RESTART_SECONDS before steps resume. A scale of an elastic job's worker set keeps
them and pays `scale_pause_seconds`. The simulator (`pysched.sim.runner`, on virtual
time) and the kubelet emulator (`pysched.testing.emulator`, on scaled wall time) both use this.
"""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass

from pysched.api.annotations import ProgressReport
from pysched.workload.job import Job
from pysched.workload.speed import STEP_NOISE

RESTART_SECONDS = 30.0  # a stop-and-restart pays this before steps resume
CHECKPOINT_SECONDS = 300.0  # multi-pod jobs save their steps every 300 s of training
# An elastic job's worker set changed (torchrun --nnodes=MIN:MAX, c10d rendezvous): it checkpoints,
# meets again and restarts from that checkpoint; steps resume after a pause of U(lo, hi) seconds.
SCALE_PAUSE_CPU_S = (20.0, 40.0)
SCALE_PAUSE_GPU_S = (30.0, 90.0)  # GPU jobs also rebuild their communicators and reload to device


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
    progress: ProgressReport | None = None  # the last progress annotation written

    def steps_at(self, t: float) -> int:
        if t <= self.seg_start or math.isinf(self.step_s):
            return self.seg_steps
        if t >= self.finish_time():  # not by division: on the epoch clock it may fall a step short
            return self.job.steps
        return min(self.job.steps, self.seg_steps + int((t - self.seg_start) / self.step_s))

    def finish_time(self) -> float:
        return self.seg_start + (self.job.steps - self.seg_steps) * self.step_s


def noise_rng(seed: int, job: Job) -> random.Random:
    return random.Random(zlib.crc32(f"{seed}/{job.name}".encode()))


def segment_step_seconds(job: Job, cpu: float, steps_left: int, rng: random.Random, noise: float = STEP_NOISE) -> float:
    """Seconds per step for the rest of the job at `cpu`: each step carries independent 5% noise,
    so the segment's mean step time carries 5% / sqrt(steps) (a normal sum, drawn once)."""
    return noisy_step_seconds(job.truth.step_seconds(cpu, job.gpu), steps_left, rng, noise)


def noisy_step_seconds(mean: float, steps_left: int, rng: random.Random, noise: float = STEP_NOISE) -> float:
    """A segment's step time around `mean` (see `segment_step_seconds`)."""
    if math.isinf(mean) or steps_left <= 0:
        return mean
    factor = 1.0 + noise * rng.gauss(0.0, 1.0) / math.sqrt(steps_left)
    return mean * max(factor, 0.5)


def scale_pause_seconds(job: Job, rng: random.Random) -> float:
    """One worker-set change's pause (drawn per change) before the job trains again."""
    lo, hi = SCALE_PAUSE_GPU_S if job.gpu > 0 else SCALE_PAUSE_CPU_S
    return rng.uniform(lo, hi)


def start_run(job: Job, cpu: float, now: float, rng: random.Random, noise: float = STEP_NOISE) -> Run:
    return Run(job, cpu, job.gpu, now, 0, segment_step_seconds(job, cpu, job.steps, rng, noise), now)


def retime(run: Run, cpu: float, now: float, rng: random.Random, noise: float = STEP_NOISE) -> None:
    """The running job's CPUs changed at `now`: in place keeps progress, a restart loses it and waits."""
    if run.job.restart_on_resize:
        run.seg_steps, run.seg_start = 0, now + RESTART_SECONDS
    else:
        run.seg_steps, run.seg_start = run.steps_at(now), now
    run.cpu = cpu
    run.step_s = segment_step_seconds(run.job, cpu, run.job.steps - run.seg_steps, rng, noise)
    run.version += 1
    run.progress = None
