"""What an allocation policy sees of a running deadline job when Autoscale looks at it, and what
it may answer: one row of numbers per job, the same in the training environment and in the
scheduler, so a policy never meets features computed another way than those it learned on.

The answer per job is one of `ACTIONS`: a step down, keep, or a step up. Autoscale's own choice
is one of the features (`heuristic`), so a policy can start from it and learn where to depart.
Times are squashed as the queue policy's are (`features.squash`). A schema change bumps `SCHEMA`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pysched.deadline.features import CPU_SCALE, squash

SCHEMA = 1
DOWN, KEEP, UP = 0, 1, 2
ACTIONS = ("down", "keep", "up")
FEATURES = (
    "to_deadline",  # time left to the deadline
    "remaining",  # predicted time left at the current CPUs (central; capped at 30 days)
    "slack",  # to_deadline - remaining
    "need",  # the smallest count that makes the deadline, per current count (0: none does)
    "infeasible",  # 1: no count in its bounds makes the deadline
    "cpus",  # the CPUs it runs on, per 16
    "room",  # CPUs free on its node, per 16
    "headroom",  # its upper bound minus its CPUs, per 16
    "floor",  # its CPUs minus its lower bound, per 16
    "done",  # share of its steps done
    "in_place",  # 1: a CPU resize keeps its progress; 0: it restarts the container
    "heuristic",  # Autoscale's own answer: -1 down, 0 keep, +1 up
)
WIDTH = len(FEATURES)
MAX_REMAINING_S = 30 * 86400.0

# Given the rows ((n, WIDTH) float32) of the jobs looked at together and Autoscale's own answers
# ((n,) int), an answer per job.
AllocationAgent = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True, slots=True)
class Running:
    """One running job as Autoscale sees it when it looks at it."""

    now: float
    deadline: float
    finish: float  # central predicted finish at its current CPUs (inf: unknown)
    need: float | None  # Autoscale's chosen count (None: no count saves it)
    cpus: float
    lo: float  # its bounds
    hi: float
    room: float  # CPUs free on its node
    done: float  # share of its steps done, 0 to 1
    in_place: bool
    heuristic: int  # DOWN, KEEP or UP


def row(job: Running) -> np.ndarray:
    """The job's feature row (WIDTH float32)."""
    remaining = min(MAX_REMAINING_S, max(0.0, job.finish - job.now)) if not math.isnan(job.finish) else MAX_REMAINING_S
    to_deadline = job.deadline - job.now
    need = 0.0 if job.need is None or job.cpus <= 0 else min(8.0, job.need / job.cpus)
    values = (
        squash(to_deadline),
        squash(remaining),
        squash(to_deadline - remaining),
        need,
        1.0 if job.need is None else 0.0,
        job.cpus / CPU_SCALE,
        job.room / CPU_SCALE,
        max(0.0, job.hi - job.cpus) / CPU_SCALE,
        max(0.0, job.cpus - job.lo) / CPU_SCALE,
        min(1.0, max(0.0, job.done)),
        1.0 if job.in_place else 0.0,
        float(job.heuristic - KEEP),
    )
    return np.array(values, dtype=np.float32)
