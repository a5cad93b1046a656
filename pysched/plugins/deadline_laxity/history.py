"""Run times of finished jobs by kind: the remaining-time estimate of a job that has not run yet.

Training jobs recur: the same image with the same total steps comes back with other data,
hyperparameters or seeds, and a rerun takes about as long as the runs before it. A one-pod job this
scheduler bound and that ended `Succeeded` at the CPUs it was bound with adds its seconds per step
(bind to end, scaled to one CPU by the generic prior's Amdahl ratio) to its kind's recent runs; a
waiting job of a kind seen before is predicted from their median. A pod resized while it ran is no
clean sample (only the sizes at bind and at the end are compared), nor is a pod that was being
deleted when it ended (a cancelled or preempted run may still exit 0); pods bound before this
scheduler started are not timed; a job of a kind never seen keeps the generic prior.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict, deque

from pysched.api.annotations import total_steps_of
from pysched.api.ids import PodUID
from pysched.api.images import container_images
from pysched.api.objects import PodInfo
from pysched.api.resources import CPU
from pysched.deadline.predictor import prior_step_ratio
from pysched.framework.clock import Clock

JobKind = tuple[tuple[str, ...], int]  # (container images, total steps)
MAX_KINDS = 4096  # kinds remembered; the least recently finished is forgotten first
# Timers of pods reported gone, kept for their end: a live informer watching only pods that have
# not ended reports an ending pod as deleted first, and its end after reading it back.
MAX_LEAVING = 1024


def kind_of(pod: PodInfo) -> JobKind | None:
    """The pod's kind, None for a pod without total steps (not a training job)."""
    steps = total_steps_of(pod)
    return None if steps is None else _kind(pod, steps)


def _kind(pod: PodInfo, steps: int) -> JobKind:
    found = container_images(pod.raw)
    return (tuple(found[0]) if found is not None else (), steps)


class RunHistory:
    """Recent seconds per step (at one CPU) of each kind; `samples` runs kept per kind."""

    def __init__(self, clock: Clock, samples: int) -> None:
        self._clock = clock
        self._samples = samples
        self._bound: dict[PodUID, tuple[float, int]] = {}  # when it was bound, at how many millicores
        self._leaving: OrderedDict[PodUID, tuple[float, int]] = OrderedDict()
        self._runs: OrderedDict[JobKind, deque[float]] = OrderedDict()
        self._median: dict[JobKind, float] = {}
        # Kinds known per total steps: a job whose steps no kind has is answered before its images
        # are read (most jobs, where total steps are drawn per job).
        self._steps: dict[int, int] = {}
        self.version = 0  # counts changes to what `step_seconds` answers

    def bound(self, pod: PodInfo) -> None:
        cpu_milli = pod.requests.get(CPU, 0)
        if cpu_milli > 0 and total_steps_of(pod) is not None:
            self._bound[pod.uid] = (self._clock.now(), cpu_milli)

    def ended(self, pod: PodInfo) -> None:
        start = self._bound.pop(pod.uid, None) or self._leaving.pop(pod.uid, None)
        if start is None or pod.phase != "Succeeded" or pod.deleting:
            return
        kind = kind_of(pod)
        if kind is None:
            return
        bound_at, cpu_milli = start
        seconds = self._clock.now() - bound_at
        if pod.requests.get(CPU, 0) != cpu_milli or seconds <= 0:
            return  # resized while it ran: its pace was not that of one size
        runs = self._runs.get(kind)
        if runs is None:
            runs = self._runs[kind] = deque(maxlen=self._samples)
            self._steps[kind[1]] = self._steps.get(kind[1], 0) + 1
            if len(self._runs) > MAX_KINDS:
                gone, _ = self._runs.popitem(last=False)
                self._median.pop(gone, None)
                left = self._steps.pop(gone[1]) - 1
                if left:
                    self._steps[gone[1]] = left
        else:
            self._runs.move_to_end(kind)
        runs.append(seconds / kind[1] / prior_step_ratio(cpu_milli / 1000))
        self._median[kind] = statistics.median(runs)
        self.version += 1

    def forget(self, pod: PodInfo) -> None:
        """The pod was reported gone: deleted, or (live) ended and read back later."""
        start = self._bound.pop(pod.uid, None)
        if start is not None:
            self._leaving[pod.uid] = start
            if len(self._leaving) > MAX_LEAVING:
                self._leaving.popitem(last=False)

    def step_seconds(self, pod: PodInfo) -> float | None:
        """Seconds per step on one CPU of the pod's kind (median of its recent runs); None: unseen."""
        steps = total_steps_of(pod)
        if steps is None or steps not in self._steps:
            return None
        return self._median.get(_kind(pod, steps))

    def __len__(self) -> int:
        """Pods being timed."""
        return len(self._bound)
