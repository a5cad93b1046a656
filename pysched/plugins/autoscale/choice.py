"""The CPU count a deadline job should run on, from its speed model."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pysched.api.objects import PodInfo
from pysched.api.resources import CPU, to_scheduler_units
from pysched.deadline.predictor import BAND_Z, JobModel, candidate_counts


@dataclass(frozen=True, slots=True)
class Choice:
    """The smallest count that makes the deadline, with its predicted finish (None: none does)."""

    cpus: float | None
    finish: float  # predicted finish at `cpus`, or at the largest count tried when None


def choose(
    model: JobModel,
    deadline: float,
    now: float,
    current: float,
    lo: float,
    hi: float,
    margin: float,
    restart: bool,
    restart_s: float,
    band_z: float = BAND_Z,
) -> Choice | None:
    """Smallest count in [lo, hi] predicted to finish by the deadline; None when nothing is known
    yet. Moving a restarting container to another count starts its run again."""
    done = model.steps_at(now)
    if done is None:
        return None
    finish = math.inf
    for cpus in candidate_counts(lo, hi):
        est = model.step_estimate(cpus)
        if est is None:
            return None
        moves = cpus != current
        steps = model.total_steps - (0.0 if restart and moves else done)
        remaining = max(0.0, steps) * est.step_seconds * (1 + band_z * est.rel_sigma) * (1 + margin)
        finish = now + remaining + (restart_s if restart and moves else 0.0)
        if finish <= deadline:
            return Choice(cpus, finish)
    return Choice(None, finish)


def central_finish(model: JobModel, now: float, current: float, cpus: float, restart: bool, restart_s: float) -> float:
    """The predicted finish at `cpus` without band or margin (what users are told); inf when
    nothing is known yet."""
    choice = choose(model, -math.inf, now, current, cpus, cpus, 0.0, restart, restart_s, 0.0)
    return math.inf if choice is None else choice.finish


def restarts_on_resize(pod: PodInfo, container: str) -> bool:
    for c in pod.raw.get("spec", {}).get("containers") or ():
        if c.get("name", "") == container:
            return any(
                p.get("resourceName") == CPU and p.get("restartPolicy") == "RestartContainer"
                for p in c.get("resizePolicy") or ()
            )
    return False


def container_request(pod: PodInfo, container: str, resource: str) -> str | int | float | None:
    """The container's own request for `resource` as written (None when it has none)."""
    for c in pod.raw.get("spec", {}).get("containers") or ():
        if c.get("name", "") == container:
            value = ((c.get("resources") or {}).get("requests") or {}).get(resource)
            return value if isinstance(value, str | int | float) else None
    return None


def container_cpus(pod: PodInfo, container: str) -> float:
    """The container's desired CPU request (spec), in CPUs; the pod's total when it names none."""
    value = container_request(pod, container, CPU)
    milli = to_scheduler_units(CPU, value) if value is not None else pod.requests.get(CPU, 0)
    return milli / 1000


def actual_cpus(pod: PodInfo, container: str) -> float | None:
    """The CPUs the kubelet reports the container running with (`containerStatuses[].resources`);
    None when it reports none (no kubelet support for resize, or not running yet)."""
    milli = actual_request(pod, container, CPU)
    return None if milli is None else milli / 1000


def actual_request(pod: PodInfo, container: str, resource: str) -> int | None:
    """The container's actuated request for `resource` (scheduler units), as the kubelet reports it."""
    for status in (pod.raw.get("status") or {}).get("containerStatuses") or ():
        if status.get("name") == container:
            value = ((status.get("resources") or {}).get("requests") or {}).get(resource)
            return to_scheduler_units(resource, value) if isinstance(value, str | int | float) else None
    return None


def resize_infeasible(pod: PodInfo) -> str | None:
    """The kubelet's message when it refuses the pending resize for good (`PodResizePending`,
    reason `Infeasible`: more than the node could ever give); None otherwise."""
    for cond in (pod.raw.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodResizePending" and cond.get("reason") == "Infeasible":
            return str(cond.get("message") or "the node cannot fit it")
    return None
