"""The range each recorded feature a pod fixes takes over a queue policy's training workloads. The
weights file carries it (`trained_on`), so that the deployed plugin never scores a pod unlike any
the policy was trained on (such a pod keeps its place in the window's order)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from pysched.deadline.features import COLUMN, Waiting, static_values
from pysched.learn.base import workload_of
from pysched.sim.scenario import Scenario
from pysched.workload.job import Job

# GPUs alone: a GPU job, to a policy that saw only CPU jobs, is a kind of job it cannot read (its
# steps say nothing of its run time). Steps, CPUs and workers are left out: a policy trained on
# one-pod CPU jobs carries over to parameter-server jobs of other sizes (seed-ps).
RECORDED = ("gpus",)
RANGE_SEEDS = 20  # the first training workloads whose pods the ranges are taken over

Ranges = dict[str, tuple[float, float]]


def pod_ranges(
    scenario: str | Callable[[int], Scenario], seeds: Iterable[int], names: Iterable[str] = RECORDED
) -> Ranges:
    """Each named feature's lowest and highest value over the pods of the workloads of `seeds`."""
    low = {name: math.inf for name in names}
    high = {name: -math.inf for name in names}
    for seed in seeds:
        for job in workload_of(scenario, seed).jobs:
            for pod in _pods(job):
                row = static_values(pod, 0.0)
                for name in low:
                    value = row[COLUMN[name]]
                    low[name], high[name] = min(low[name], value), max(high[name], value)
    return {name: (low[name], high[name]) for name in low if low[name] <= high[name]}


def widened(ranges: Ranges, other: Mapping[str, tuple[float, float]]) -> Ranges:
    """Both ranges of each feature taken together (a policy fine-tuned on another workload knows both)."""
    out = dict(ranges)
    for name, (low, high) in other.items():
        was = out.get(name, (low, high))
        out[name] = (min(was[0], low), max(was[1], high))
    return out


def _pods(job: Job) -> list[Waiting]:
    """What the plugin reads off each of the job's pods."""
    if job.gang is None:
        return [Waiting(0.0, None, job.steps, job.cpu, job.cpu, job.gpu, 1)]
    workers = len(job.gang.members)
    return [
        Waiting(0.0, None, job.steps, m.cpu_milli / 1000, m.cpu_milli / 1000, m.gpu, workers) for m in job.gang.members
    ]
