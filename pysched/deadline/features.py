"""What a learned queue policy sees of a waiting job: one row of numbers per job, the same in the
training environment and in the plugin that deploys the policy, so a policy never meets features
computed another way than those it learned on.

Times are squashed (`sign(x) * log1p(|x| / 10 min)`) so that minutes and days stay in one small
range; counts are scaled by a typical size. A schema change (a feature added, removed or computed
otherwise) bumps `SCHEMA`, and a weights file of another schema is refused at load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pysched.compiled import compiled
from pysched.deadline.predictor import PRIOR_SERIAL_FRACTION, PRIOR_SERIAL_RANGE, prior_step_ratio

SCHEMA = 1
FEATURES = (
    "waiting",  # time since the pod was created
    "to_deadline",  # time left to the deadline (0: none)
    "steps",  # log of the job's total steps (0: unknown)
    "remaining_requested",  # predicted run time at the requested CPUs under the prior (0: unknown)
    "remaining_max",  # the same at pysched.io/cpu-max
    "band",  # width of the prior's band around remaining_requested
    "laxity",  # to_deadline - remaining_requested (0: no deadline)
    "cpus",  # CPUs a worker requests, per 16
    "gpus",  # GPUs a worker requests, per 8
    "workers",  # log2 of the job's workers, per 4
    "best_effort",  # 1: no deadline, or it is demoted or not allowed
    "position",  # place in the window (the queue's order), per window size
    "free_cpu",  # share of the cluster's CPUs not requested
    "free_gpu",  # share of the cluster's GPUs not requested (0: none)
    "queue",  # pods in the window, squashed
)
WIDTH = len(FEATURES)
# What the pod itself fixes: the columns whose range over its training workloads a weights file
# records, so that a pod outside it (a GPU job for a policy that only saw CPU jobs) is known.
POD_FEATURES = ("steps", "cpus", "gpus", "workers")
TIME_SCALE_S = 600.0
CPU_SCALE = 16.0  # CPUs are given per this many (a typical node's)


def squash(seconds: float, scale: float = TIME_SCALE_S) -> float:
    return math.copysign(math.log1p(abs(seconds) / scale), seconds)


@dataclass(frozen=True, slots=True)
class ClusterView:
    free_cpu: float  # shares in [0, 1]
    free_gpu: float


def remaining(total_steps: int | None, cpus: float, workers: int, prior_step_s: float, serial: float) -> float:
    """Predicted run time under the generic prior; 0 when the prior or the steps are unknown."""
    if total_steps is None or prior_step_s <= 0 or cpus <= 0:
        return 0.0
    return total_steps * prior_step_s * prior_step_ratio(cpus, serial) / max(1, workers)


COLUMN = {name: i for i, name in enumerate(FEATURES)}
# A waiting job's fixed facts: its row's fixed columns, then what the per-decision columns and the
# room check need. One float64 row per job, so a window is one `np.array` of rows.
CREATED, DEADLINE, AT_REQUEST, CPU_MILLI, GPUS, PRIORITY = range(WIDTH, WIDTH + 6)
STATIC_WIDTH = WIDTH + 6
_STEPS, _REMAINING_REQUESTED, _REMAINING_MAX, _BAND = (
    COLUMN[name] for name in ("steps", "remaining_requested", "remaining_max", "band")
)
_CPUS, _GPUS, _WORKERS, _BEST_EFFORT = (COLUMN[name] for name in ("cpus", "gpus", "workers", "best_effort"))


@dataclass(frozen=True, slots=True)
class Waiting:
    """The facts of one waiting job, as the plugin reads them off its pod."""

    created: float
    deadline: float | None  # None: best-effort (no deadline, demoted or not allowed)
    total_steps: int | None
    cpus: float  # a worker's request
    cpus_max: float  # pysched.io/cpu-max, else the request
    gpus: int
    workers: int
    priority: int = 0


def static(job: Waiting, prior_step_seconds: float) -> np.ndarray:
    """The job's fixed row (STATIC_WIDTH float64)."""
    return np.array(static_values(job, prior_step_seconds))


def static_values(job: Waiting, prior_step_seconds: float) -> list[float]:
    """`static` as a list (a row of a matrix takes it without an array in between)."""
    at_request = at_max = band = 0.0
    if job.total_steps is not None and prior_step_seconds > 0:
        low, high = PRIOR_SERIAL_RANGE
        p, steps, cpus, workers = prior_step_seconds, job.total_steps, job.cpus, job.workers
        at_request = remaining(steps, cpus, workers, p, PRIOR_SERIAL_FRACTION)
        at_max = remaining(steps, max(cpus, job.cpus_max), workers, p, PRIOR_SERIAL_FRACTION)
        band = remaining(steps, cpus, workers, p, high) - remaining(steps, cpus, workers, p, low)
    row = [0.0] * STATIC_WIDTH  # a list: item writes into an array cost more
    row[_STEPS] = 0.0 if job.total_steps is None else math.log1p(job.total_steps) / 10.0
    row[_REMAINING_REQUESTED] = squash(at_request)
    row[_REMAINING_MAX] = squash(at_max)
    row[_BAND] = squash(band)
    row[_CPUS] = job.cpus / CPU_SCALE
    row[_GPUS] = job.gpus / 8.0
    row[_WORKERS] = math.log2(max(1, job.workers)) / 4.0
    row[_BEST_EFFORT] = 1.0 if job.deadline is None else 0.0
    row[CREATED] = job.created
    row[DEADLINE] = math.nan if job.deadline is None else job.deadline
    row[AT_REQUEST] = at_request
    row[CPU_MILLI] = round(job.cpus * 1000)
    row[GPUS] = job.gpus
    row[PRIORITY] = job.priority
    return row


@compiled(inline="always")
def _squash(seconds: float, scale: float) -> float:  # pragma: no cover - compiled
    if seconds < 0:
        return -math.log1p(-seconds / scale)
    return math.log1p(seconds / scale)


_WAITING, _TO_DEADLINE, _LAXITY, _POSITION = (
    COLUMN["waiting"],
    COLUMN["to_deadline"],
    COLUMN["laxity"],
    COLUMN["position"],
)
_FREE_CPU, _FREE_GPU, _QUEUE = COLUMN["free_cpu"], COLUMN["free_gpu"], COLUMN["queue"]


@compiled()
def fill_window(
    fixed: np.ndarray, index: np.ndarray, now: float, free_cpu: float, free_gpu: float, cpu_room: float,
    gpu_room: float, out: np.ndarray, allowed: np.ndarray,
) -> int:  # fmt: skip  # pragma: no cover - compiled
    """Fill the first n rows of `out` (float32, WIDTH columns) from the window's fixed rows
    (`fixed[index[r]]` for the window's r-th job, n = len(index)), and of `allowed`: rows of the
    first row's priority that fit the most room of one node (CPU, GPU). Returns how many are allowed."""
    n = index.shape[0]
    count = 0
    queued = _squash(float(n), 16.0)
    first = fixed[index[0], PRIORITY] if n else 0.0
    for r in range(n):
        row = fixed[index[r]]
        for c in range(WIDTH):
            out[r, c] = row[c]
        out[r, _WAITING] = _squash(now - row[CREATED], TIME_SCALE_S)
        deadline = row[DEADLINE]
        if deadline == deadline:  # not NaN: a deadline job
            out[r, _TO_DEADLINE] = _squash(deadline - now, TIME_SCALE_S)
            out[r, _LAXITY] = _squash(deadline - now - row[AT_REQUEST], TIME_SCALE_S)
        else:
            out[r, _TO_DEADLINE] = 0.0
            out[r, _LAXITY] = 0.0
        out[r, _POSITION] = r / n
        out[r, _FREE_CPU] = free_cpu
        out[r, _FREE_GPU] = free_gpu
        out[r, _QUEUE] = queued
        ok = row[PRIORITY] == first and row[CPU_MILLI] <= cpu_room and row[GPUS] <= gpu_room
        allowed[r] = ok
        count += ok
    return count


def window_rows(
    fixed: np.ndarray,
    index: np.ndarray,
    cluster: ClusterView,
    now: float,
    room: tuple[float, float] = (math.inf, math.inf),
) -> tuple[np.ndarray, np.ndarray, int]:
    """From the window's fixed rows (`static`; the window's r-th pod's is `fixed[index[r]]`): its
    feature matrix ((n, WIDTH) float32, window order), which rows may be picked (the first row's
    priority, within `room`: the most free CPU millicores and GPUs on one node), and how many may."""
    n = index.shape[0]
    out = np.empty((n, WIDTH), np.float32)
    allowed = np.empty(n, np.bool_)
    count = fill_window(fixed, index, now, cluster.free_cpu, cluster.free_gpu, room[0], room[1], out, allowed)
    return out, allowed, int(count)
