"""The jobs the scheduler knows: each job's members (and so what its unplaced ones ask for), which
are placed and bound, and its minimum.

The engine feeds it from the informer (every pod added, updated or deleted, `observe` / `forget`)
and from the placed pods (assumed or bound, `PlacedPods` notices); plugins read it through
`Handle.jobs`. Pods in no job cost one lookup each and are never stored. A job's minimum is the
one its pods give (`pysched.io/min-members`), else what the backend knows of the object that
holds it (`ClusterBackend.job_minimum`: a PodGroup, an Indexed Job's parallelism), else 1: the
job's pods are scheduled one by one, as pods in no job are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pysched.api.features import EVERY_POD
from pysched.api.ids import JobKey, PodKey
from pysched.api.jobs import GROUP_SOURCES, MIN_MEMBERS, NO_ORDER, JobRef, job_of
from pysched.api.objects import PodInfo
from pysched.framework.placed import PlacedPods


class _Queued(Protocol):
    @property
    def pod(self) -> PodInfo: ...


Q = TypeVar("Q", bound=_Queued)  # the queue's entry (`QueuedPod`)

Minimum = Callable[[JobRef], "int | None"]


def _same_job(old: PodInfo, new: PodInfo) -> bool:
    """Nothing `job_of` reads changed (identity first: most updates share these objects)."""
    if old.labels is not new.labels and old.labels != new.labels:
        return False
    if old.controller != new.controller:
        return False
    if old.annotations is not new.annotations and old.annotations.get(MIN_MEMBERS) != new.annotations.get(MIN_MEMBERS):
        return False
    old_spec, new_spec = old.raw.get("spec"), new.raw.get("spec")
    return old_spec is new_spec or (old_spec or {}).get("schedulingGroup") == (new_spec or {}).get("schedulingGroup")


@dataclass(slots=True)
class Job:
    """One job as last seen. `ref` is its first member's statement of it (`ref_pod`; when that
    member leaves, the next member's, in the order they were seen)."""

    ref: JobRef
    ref_pod: PodKey | None = None
    members: dict[PodKey, PodInfo] = field(default_factory=dict)  # not terminated, not deleted
    placed: set[PodKey] = field(default_factory=set)  # assumed or bound
    bound: set[PodKey] = field(default_factory=set)  # bound in the API
    lookup: Minimum = field(default=lambda _: None, repr=False)  # the backend's minimum for it
    orders: dict[PodKey, tuple[str, int, int]] = field(default_factory=dict)  # each member's place
    # The queue key the job sorts by (its earliest member's, see `JobBook.sort_key`).
    anchor: tuple[Any, ...] | None = None
    anchor_pod: PodKey | None = None

    @property
    def key(self) -> JobKey:
        return self.ref.key

    @property
    def minimum(self) -> int:
        if self.ref.min_members is not None:
            return self.ref.min_members
        found = self.lookup(self.ref)
        return found if found is not None else 1

    @property
    def awaits_group(self) -> bool:
        """It names a PodGroup that the backend does not know (yet): its pods wait for it, as
        scheduler-plugins' do, rather than being placed one by one against the user's intent."""
        return self.ref.source in GROUP_SOURCES and self.lookup(self.ref) is None

    @property
    def is_gang(self) -> bool:
        return self.minimum > 1 or self.awaits_group

    def unplaced(self) -> Iterator[PodInfo]:
        return (pod for key, pod in self.members.items() if key not in self.placed)


class JobBook:
    """Jobs by key, and each member pod's job."""

    def __init__(self, placed: PlacedPods, minimum: Minimum) -> None:
        self._placed = placed
        self._minimum = minimum
        self._jobs: dict[JobKey, Job] = {}
        self._job_of: dict[PodKey, JobKey] = {}
        self._gangs: set[JobKey] = set()  # gangs, and jobs whose keys have a problem to tell
        # Pods of a job that another scheduler places (no profile of this process): by job, each
        # with its schedulerName, so that a gang that waits for them is told why.
        self._elsewhere: dict[JobKey, dict[PodKey, str]] = {}
        self._elsewhere_of: dict[PodKey, JobKey] = {}
        self._gangs_changed: list[Callable[[], None]] = []
        self._minimum_changed: list[Callable[[JobKey], None]] = []
        self._listening = False

    def on_gangs_changed(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the book goes from no gang to some, or back (gated plugins; a job
        whose keys have a problem counts as one, so that it is told)."""
        self._gangs_changed.append(callback)

    def on_minimum_changed(self, callback: Callable[[JobKey], None]) -> None:
        """Call `callback` with a job's key when the pod its keys are read from changed them or
        left (the minimum its pods give may have changed)."""
        self._minimum_changed.append(callback)

    @property
    def has_gangs(self) -> bool:
        return bool(self._gangs)

    def _mark(self, job: Job | None, key: JobKey) -> None:
        before = bool(self._gangs)
        if job is not None and (job.is_gang or job.ref.problem):
            self._gangs.add(key)
        else:
            self._gangs.discard(key)
        if bool(self._gangs) != before:
            for callback in self._gangs_changed:
                callback()

    def observe(self, pod: PodInfo, old: PodInfo | None = None) -> Job | None:
        """A pod as the API has it now (`old`: as it was last observed); its job (None: in no job)."""
        if old is not None and not (pod.terminated or pod.deleting) and _same_job(old, pod):
            job_key = self._job_of.get(pod.key)
            if job_key is None:
                return None  # most updates: a pod in no job stays in none
            job = self._jobs[job_key]
            job.members[pod.key] = pod
            if pod.node_name is not None:
                job.bound.add(pod.key)
            return job
        ref = job_of(pod)
        was = self._job_of.get(pod.key)
        if was is not None and (ref is None or ref.key != was or pod.terminated or pod.deleting):
            self._leave(pod.key, was)
        if ref is None or pod.terminated or pod.deleting:
            return None
        found = self._jobs.get(ref.key)
        job = found if found is not None else self._jobs.setdefault(ref.key, Job(ref, pod.key, lookup=self._minimum))
        if found is not None and found.ref_pod == pod.key and found.ref != ref:
            self._restate(found, ref)
        elif found is not None and found.ref.min_members is None and ref.min_members is not None and not ref.problem:
            # The pod spoken for the job states no minimum and this one does: its keys count (a
            # gang must not become a job of one because a member without them was seen first).
            found.ref_pod = pod.key
            self._restate(found, ref)
        job.members[pod.key] = pod
        job.orders[pod.key] = ref.order
        self._job_of[pod.key] = ref.key
        if pod.node_name is not None:
            job.bound.add(pod.key)
        self._mark(job, ref.key)
        if not self._listening:
            self._placed.subscribe(self, EVERY_POD)  # replays what is placed already
            self._listening = True
        return job

    def minimum_changed(self, key: JobKey) -> Job | None:
        """The backend's minimum for `key` changed: the job may have become a gang, or stopped being one."""
        job = self._jobs.get(key)
        if job is not None:
            self._mark(job, key)
        return job

    def forget(self, pod: PodInfo) -> None:
        """The pod was deleted."""
        old = self._job_of.get(pod.key)
        if old is not None:
            self._leave(pod.key, old)
        self._leave_elsewhere(pod.key)

    def observe_elsewhere(self, pod: PodInfo, old: PodInfo | None = None) -> None:
        """A pod another scheduler places (`old`: as it was last observed): kept by its job."""
        if old is not None and not (pod.terminated or pod.deleting) and _same_job(old, pod):
            return  # most updates: its job, if any, is as it was
        self._leave_elsewhere(pod.key)
        ref = None if pod.terminated or pod.deleting else job_of(pod)
        if ref is not None:
            self._elsewhere.setdefault(ref.key, {})[pod.key] = pod.scheduler_name
            self._elsewhere_of[pod.key] = ref.key

    def _leave_elsewhere(self, key: PodKey) -> None:
        job_key = self._elsewhere_of.pop(key, None)
        if job_key is not None:
            pods = self._elsewhere[job_key]
            del pods[key]
            if not pods:
                del self._elsewhere[job_key]

    def elsewhere(self, key: JobKey) -> Mapping[PodKey, str]:
        """The job's pods that another scheduler places, with their schedulerName."""
        return self._elsewhere.get(key, {})

    def _leave(self, key: PodKey, job_key: JobKey) -> None:
        del self._job_of[key]
        job = self._jobs[job_key]
        job.members.pop(key, None)
        job.orders.pop(key, None)
        job.bound.discard(key)
        job.placed.discard(key)
        if not job.members:
            del self._jobs[job_key]
            self._mark(None, job_key)
        elif job.ref_pod == key:
            # A member stating a minimum speaks for the job before one that states none, as when
            # the job's members were first seen: the gang must not become a job of one.
            stating = ((member, ref) for member in job.members.values() if (ref := job_of(member)) and ref.min_members)
            first = next(iter(job.members.values()))
            heir, ref = next(stating, (first, job_of(first)))
            job.ref_pod = heir.key
            if ref is not None:
                self._restate(job, ref)

    def _restate(self, job: Job, ref: JobRef) -> None:
        before, job.ref = job.ref, ref
        if (before.min_members, before.problem) != (ref.min_members, ref.problem):
            self._mark(job, ref.key)
            if before.min_members != ref.min_members:
                for callback in self._minimum_changed:
                    callback(ref.key)

    def of(self, key: PodKey) -> Job | None:
        job_key = self._job_of.get(key)
        return None if job_key is None else self._jobs[job_key]

    def get(self, key: JobKey) -> Job | None:
        return self._jobs.get(key)

    def gang_of(self, key: PodKey) -> Job | None:
        """The pod's job when it is a gang (minimum above 1, or an awaited PodGroup)."""
        job = self.of(key)
        return job if job is not None and job.is_gang else None

    def __iter__(self) -> Iterator[Job]:
        return iter(list(self._jobs.values()))

    def __len__(self) -> int:
        return len(self._jobs)

    def sort_key(self, base: Callable[[Q], tuple[Any, ...]]) -> Callable[[Q], tuple[Any, ...]]:
        """The queue order with a gang's members kept together: each member sorts by its job's
        anchor (the smallest key `base` gave a member while the job was queued, refreshed when
        that member is queued again), then by its place in the job. Pods in no gang keep `base`."""

        job_of_pod, jobs = self._job_of, self._jobs

        def key(queued: Q) -> tuple[Any, ...]:
            found = base(queued)
            pod = queued.pod
            job_key = job_of_pod.get(pod.key)
            if job_key is None:
                return found
            job = jobs[job_key]
            if not job.is_gang:
                return found
            if job.anchor is None or job.anchor_pod == pod.key or found < job.anchor:
                job.anchor, job.anchor_pod = found, pod.key
            kind, group, index = job.orders.get(pod.key, NO_ORDER)
            return (*job.anchor, job.key, kind, group, index, pod.name)

        return key

    # ----- placement notices
    def pod_placed(self, pod: PodInfo, row: int) -> None:
        job = self.of(pod.key)
        if job is not None and not self._placed.held(pod.key):  # a nomination holds room, no place
            job.placed.add(pod.key)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        job = self.of(pod.key)
        if job is not None:
            job.placed.discard(pod.key)
