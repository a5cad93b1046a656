"""What ElasticScale knows of each GPU job: its range, its speed model by GPU count, its verdict,
and how it turns into a planner `Demand`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from pysched.api.annotations import PROGRESS, PROGRESS_FORMS, ProgressReport, ProgressStamp
from pysched.api.ids import JobKey, PodKey
from pysched.api.jobs import JobRef
from pysched.api.limits import clip
from pysched.api.objects import PodInfo
from pysched.deadline.planner import Demand
from pysched.deadline.predictor import CountStats, JobModel

PRIOR_SPREAD = 0.1  # relative uncertainty of an owner's expected duration


@dataclass(slots=True)
class GpuJob:
    key: JobKey
    ref: JobRef | None  # the owner to scale through; None: a rigid job
    total_steps: int
    deadline: float | None
    gpus_per_worker: int
    workers_min: int
    workers_max: int
    workers: int  # the count asked of the owner (its parallelism)
    model: JobModel
    # A rigid gang whose pods ask unlike GPU counts: all of them (`gpus_per_worker` is the largest).
    units: int | None = None
    admitted: bool | None = None  # None: not judged yet (nothing known of its speed)
    # Not admitted and held back until it can be (`notAdmitted: Wait`): its pods seen gated.
    waiting: bool = False
    gated: dict[PodKey, PodInfo] = field(default_factory=dict)
    last_scale: float = -math.inf
    settled: bool = True  # every worker asked for has run since the last scale up
    incomplete: bool = False  # judged only once all its members, or its Indexed Job, are known
    sized: bool = False  # its worker count and range are known (`ElasticScale._size`)
    hopeless: bool = False  # refused admission because it could not meet its deadline even alone
    failed_scales: int = 0  # transient failures in a row (an API error): retried with a backoff
    retry_at: float = -math.inf
    held: int = 0  # GPUs of its running members, as of the last reconcile
    running_since: float | None = None
    progress: ProgressStamp | None = None  # the last progress observed
    # Steps it had done by that report: a new worker set resumes from a checkpoint, so they are
    # still done while the model waits for the new set's first report.
    steps_done: float = 0.0
    unread: ProgressReport | None = None  # rank 0's progress annotation as of the last reconcile
    warned: str = ""  # the progress text last told to be unusable
    pods: set[PodKey] = field(default_factory=set)  # its pods not yet ended or deleted

    @property
    def elastic(self) -> bool:
        return self.ref is not None and self.workers_max > self.workers_min

    def expect(self, seconds: float) -> None:
        """The owner's expected run time at the submitted size: the model's first speed."""
        units = float(self.size())
        step = seconds / self.total_steps
        self.model.restore([CountStats(units, step, PRIOR_SPREAD, seconds, float(self.total_steps), 1)])

    def size(self) -> int:
        """The GPUs it holds at its current worker count."""
        return self.units if self.units is not None and not self.elastic else self.workers * self.gpus_per_worker

    def counts(self, capacity: int) -> list[int]:
        """GPU counts it may hold (rigid: its own). A wide range is planned on the counts at most
        a third apart (1, 2, 3, 4, 6, 8, 12, 16, ...), so a plan costs the same for a range of 64
        or 10,000, plus its ends and the current count."""
        if not self.elastic:
            return [self.size()]
        top = min(self.workers_max, max(1, capacity // self.gpus_per_worker))
        if top < self.workers_min:
            return [self.workers_min * self.gpus_per_worker]
        chosen = {self.workers_min, top, min(max(self.workers, self.workers_min), top)}
        w = 1
        while w <= top:
            for candidate in (w, w * 3 // 2):
                if self.workers_min <= candidate <= top:
                    chosen.add(candidate)
            w *= 2
        return [c * self.gpus_per_worker for c in sorted(chosen)]

    def catch_up(self, now: float) -> None:
        """Feed the model rank 0's last progress, once, if the current worker set wrote it."""
        report = self.unread
        if report is None or self.held <= 0:
            return
        stamp = report.stamp
        if stamp is None or stamp == self.progress:
            return  # malformed (`progress_problem` tells it), or observed already
        if self.running_since is not None and stamp.middle < self.running_since:
            return  # written before the current worker set ran
        self.progress = stamp
        self.model.observe(stamp.steps, stamp.middle, float(self.held), now, resolution=stamp.resolution)
        if self.model.last is not None:
            self.steps_done = float(self.model.last.steps)

    def progress_problem(self, now: float) -> str:
        """What to tell of rank 0's progress, once per text, when no model could use it
        (malformed, more steps than the job has, a time to come); "" otherwise. Checked at each
        reconcile: the model reads progress only when a plan needs it."""
        report = self.unread
        if report is None or report.text == self.warned:
            return ""
        stamp = report.stamp
        if stamp is None:
            why = f"is not {PROGRESS_FORMS}; ignored"
        else:
            refused = self.model.out_of_bounds(stamp.steps, stamp.middle, now)
            if refused is None:
                return ""
            why = f"ignored: {refused.message}"
        self.warned = report.text
        return f"{PROGRESS}: {clip(report.text)} {why}"

    def demand(self, capacity: int, now: float, band_z: float, pause_s: float, held: int) -> Demand | None:
        """Seconds left at each count at the band's upper edge, holding `held` GPUs now; None
        while nothing is known."""
        self.catch_up(now)
        done = self.model.steps_at(now)
        if done is None:
            done = float(self.model.last.steps) if self.model.last is not None else self.steps_done
            if self.model.last is None and self.running_since is not None and 0 < self.size() <= self.held:
                # Running whole, no report yet: the steps its expected speed made since it started
                # (counted from none, it needed its whole run time again at every plan; a gang
                # still short of members trains not at all).
                est = self.model.step_estimate(float(self.held))
                if est is not None and est.step_seconds > 0:
                    done += max(0.0, now - self.running_since) / est.step_seconds
        left = max(0.0, self.total_steps - done)
        seconds: dict[int, float] = {}
        for units in self.counts(capacity):
            est = self.model.step_estimate(float(units))
            if est is None:
                return None
            seconds[units] = left * est.step_seconds * (1 + band_z * est.rel_sigma)
        return Demand(self.key, seconds, held, pause_s, self.deadline if self.admitted is not False else None)


@dataclass(slots=True)
class FreeGpus:
    """The GPUs free now on each node row, as a replan hands them out: a worker's GPUs must all
    be on one node, so 1 + 1 free on two nodes holds no 2-GPU worker."""

    by_row: np.ndarray  # int64, one entry per node row (0 for rows without a present node)

    @property
    def total(self) -> int:
        return int(self.by_row.sum())

    def workers(self, gpus_per_worker: int) -> int:
        """How many workers of `gpus_per_worker` GPUs the free GPUs hold."""
        return int((self.by_row // gpus_per_worker).sum())

    def take(self, workers: int, gpus_per_worker: int) -> None:
        """Workers placed as the scheduler would pack them: each on the tightest node it fits."""
        for _ in range(workers):
            fits = np.flatnonzero(self.by_row >= gpus_per_worker)
            if fits.size == 0:
                return
            row = fits[np.argmin(self.by_row[fits])]
            self.by_row[row] -= gpus_per_worker

    def give(self, rows: Mapping[int, int], gpus: int) -> None:
        """`gpus` a job gives back from the rows it holds GPUs on (the most held first)."""
        for row, held in sorted(rows.items(), key=lambda item: (-item[1], item[0])):
            back = min(held, gpus)
            if back <= 0 or row >= self.by_row.shape[0]:
                continue
            self.by_row[row] += back
            gpus -= back
