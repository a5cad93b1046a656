"""ElasticScale: deadline planning for GPU jobs; admission, and worker counts set through the owner.

GPUs cannot be resized in place, so a GPU job meets its deadline by the number of workers it runs
on. An elastic job declares its range (`pysched.io/workers-min` / `workers-max` on its pods,
GPUs per worker from the pod) and belongs to an Indexed batch/v1 Job: pysched sets its worker
count through the owner (`ClusterBackend.scale_job`), and the training side restarts from a
checkpoint on every change (torchrun `--nnodes=MIN:MAX`). Every other GPU job is rigid: planned
at its size, never scaled.

- preEnqueue (a job's first pod): the job is judged for admission (`pysched.deadline.planner`):
  admitted when the plan with it still finds every admitted job a count that meets its deadline.
  A job refused gets a `DeadlineRejected` Warning event naming the earliest deadline it would have
  been admitted with, and a `pysched.io/Deadline` condition that orders it as best-effort (DeadlineLaxity reads
  it); it still runs on what the plan leaves. With `notAdmitted: Wait` its pods are held back
  instead (gated, as a scheduling gate holds a pod) and the job is judged again whenever the plan
  changes, earliest deadline first: admitted once it fits (a `DeadlineAdmitted` event and
  condition), or released as best-effort once it could not meet its deadline even alone.
  A job's speed comes from `pysched.io/expected-duration` (the run time at the submitted size)
  until progress is measured; a job that gives none is judged at its first measured progress.
  An admitted elastic job is scaled to its planned count before its pods are placed.
- reconcile (every `intervalSeconds`): progress of each running job feeds its model (by GPU
  count); every `replanSeconds`, or when a job arrived or ended, the plan is made again: each
  admitted job's minimum satisfactory share, then the free GPUs by marginal gain (only where a
  GPU adds `leftoverEfficiency` of the rate per GPU a job has), and elastic jobs are scaled toward
  their targets: up only into GPUs free now; down only when other jobs' targets need more than is
  free, best-effort and at-risk jobs first, admitted ones after `cooldownSeconds`. A scale whose
  new members are still not all running after `scaleTimeoutSeconds` is taken back to the members
  that run. With no elastic job there is nothing to plan, and no plan is made.
- preScore / score (topology): a GPU job's GPUs on the fewest nodes. A member scores highest on
  a node that holds its job's other members (tightest fit first), next on a node where the
  whole rest of its job fits (best fit: the smallest hole that holds it, so that large holes stay
  whole for large jobs), last on the node with the most free GPUs (the fewest nodes overall).
- Metrics: `pysched_elastic_scales_total`, `pysched_deadline_rejected_total`.
- Bad input: a range that contradicts itself, GPUs per worker above every node's, or an owner
  that cannot be scaled gets one `ElasticIgnored` Warning event per job, and the job is rigid.
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pysched.api.annotations import (
    deadline_of,
    expected_duration_of,
    total_steps_of,
    worker_range_of,
)
from pysched.api.ids import JobKey, PodKey
from pysched.api.jobs import COMPLETION_INDEX, JobSource
from pysched.api.objects import PodInfo
from pysched.api.resources import GPU
from pysched.deadline.condition import (
    ADMITTED_REASON,
    CONDITION,
    INVALID_PROGRESS_REASON,
    REJECTED_REASON,
    condition_of,
    earliest_finish_words,
)
from pysched.deadline.planner import Demand, Plan, admit, earliest_deadline, plan
from pysched.deadline.predictor import JobModel
from pysched.framework.cluster import PodCondition
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import MAX_RECONCILE_INTERVAL_S, MIN_RECONCILE_INTERVAL_S, Handle, MetricFamily
from pysched.framework.jobs import Job
from pysched.framework.nodetable import I64, MAX_NODE_SCORE, Bools, NodeTable
from pysched.framework.registry import MAX_ARGS_SECONDS, ArgsError, PluginSpec, check_range
from pysched.framework.status import SKIP, SUCCESS, Code, Status, unschedulable
from pysched.plugins.elastic_scale.jobs import FreeGpus, GpuJob

NAME = "ElasticScale"
BEST_EFFORT, WAIT = "BestEffort", "Wait"  # what a job not admitted does
IGNORED_REASON = "ElasticIgnored"
SCALED_REASON = "Scaled"
SCALE_FAILED_REASON = "ScaleFailed"
MAX_SCALE_RETRY_S = 600.0  # the longest wait before a failed scale is asked again
# A job whose last pod failed or was deleted is remembered this long for the replacement its
# owner creates (the Job controller's backoff reaches 6 minutes), so that it keeps its admission,
# its speed model and its one event; at most this many such jobs are remembered.
RETURN_WINDOW_S = 600.0
MAX_ENDED_JOBS = 1024


@dataclass(frozen=True, slots=True)
class ElasticScaleArgs:
    interval_seconds: float = 60.0
    replan_seconds: float = 300.0  # plan again at least this often
    cooldown_seconds: float = 600.0  # between two changes of one job, unless the plan needs its GPUs
    scale_pause_seconds: float = 60.0  # what a change of count costs the job, as planned
    scale_timeout_seconds: float = 300.0  # new members not all running by then: the scale is undone
    band_z: float = 1.0  # standard deviations of the prediction band planned for
    min_gain: float = 0.1  # a voluntary change must cut the job's remaining time by this share
    # Spare GPUs go to a job only where each adds at least this share of the rate per GPU it has.
    leftover_efficiency: float = 0.5
    admission: bool = True  # False: every deadline job counts as admitted
    not_admitted: str = BEST_EFFORT  # or WAIT: held back until the plan can admit it

    def validate(self) -> None:
        check_range(self, "interval_seconds", MIN_RECONCILE_INTERVAL_S, MAX_RECONCILE_INTERVAL_S)
        for name in ("replan_seconds", "cooldown_seconds", "scale_pause_seconds", "scale_timeout_seconds"):
            check_range(self, name, 0, MAX_ARGS_SECONDS)
        check_range(self, "band_z", 0, 4)
        check_range(self, "min_gain", 0, 1, below=True)
        check_range(self, "leftover_efficiency", 0, 1)
        if self.not_admitted not in (BEST_EFFORT, WAIT):
            raise ArgsError("notAdmitted", f"expected {BEST_EFFORT} or {WAIT}, got {self.not_admitted[:40]!r}")


@dataclass(slots=True)
class ElasticScale:
    NAME: ClassVar[str] = NAME
    CLUSTER_PLAN: ClassVar[str] = "GPUs"  # admits against a plan of its profile's jobs: one profile only
    args: ElasticScaleArgs
    handle: Handle
    jobs: dict[JobKey, GpuJob] = field(default_factory=dict)
    scales: int = 0
    rejected: int = 0
    _job_of: dict[PodKey, JobKey] = field(default_factory=dict)
    _rows: dict[JobKey, dict[int, int]] = field(default_factory=dict)  # GPUs placed per node row
    _dirty: bool = True
    # The admitted jobs' demands as of the last reconcile (and the jobs admitted since): what
    # admission plans against; None until first asked for after a reconcile.
    _admitted: dict[JobKey, Demand] | None = None
    _last_plan: float = -math.inf
    _capacity: int | None = None  # the cluster's GPUs as of the last reconcile; None until asked
    _told: set[PodKey] = field(default_factory=set)  # pods whose refusal condition was written
    _told_range: set[PodKey] = field(default_factory=set)  # pods without GPUs told their range is ignored
    # Jobs whose pods all ended without succeeding: when they ended, their owner's uid, the job.
    _ended: OrderedDict[JobKey, tuple[float, str | None, GpuJob]] = field(default_factory=OrderedDict)

    @property
    def reconcile_interval(self) -> float:
        return self.args.interval_seconds

    # ----- what the cluster holds
    def capacity(self) -> int:
        """The GPUs the plan disposes of, once per reconcile: every node's, but those GPU pods
        outside it hold (inference servers, other schedulers' pods, jobs reporting no steps),
        which no scale of a job of its can take back."""
        if self._capacity is None:
            allocatable, requested = self._gpu_columns()
            outside = int(requested.sum()) - sum(sum(rows.values()) for rows in self._rows.values())
            self._capacity = max(0, int(allocatable.sum()) - max(0, outside))
        return self._capacity

    def _free_gpus(self) -> FreeGpus:
        """GPUs no pod holds or is about to (assumed), per node row (0 on rows of no present node)."""
        nodes = self.handle.nodes
        column = nodes.column.get(GPU)
        if column is None:
            return FreeGpus(np.zeros(0, np.int64))
        size = nodes.size
        free = nodes.allocatable[:size, column] - nodes.requested[:size, column]
        return FreeGpus(np.where(nodes.present[:size], np.maximum(free, 0), 0).astype(np.int64))

    def largest_node(self) -> int:
        allocatable, _ = self._gpu_columns()
        return int(allocatable.max()) if allocatable.size else 0

    def _gpu_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """The present nodes' allocatable and requested GPUs (empty when no node has any)."""
        nodes = self.handle.nodes
        column = nodes.column.get(GPU)
        if column is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        present = nodes.present[: nodes.size]
        return nodes.allocatable[: nodes.size, column][present], nodes.requested[: nodes.size, column][present]

    def _demand(self, job: GpuJob, now: float, capacity: int) -> Demand | None:
        """The job as the planner sees it, holding the GPUs its pods are placed on now: a job
        that started since the last reconcile is running, and is not moved behind a newcomer."""
        return job.demand(capacity, now, self.args.band_z, self.args.scale_pause_seconds, self._placed_gpus(job.key))

    def _placed_gpus(self, key: JobKey) -> int:
        return sum(self._rows.get(key, {}).values())

    def job_key(self, pod: PodInfo) -> JobKey:
        job = self.handle.jobs.of(pod.key)
        return job.key if job is not None else JobKey(pod.key)

    # ----- admission
    def pre_enqueue(self, pod: PodInfo) -> Status:
        gpus = pod.requests.get(GPU, 0)
        total = total_steps_of(pod)
        if gpus <= 0:
            self._recount(pod)
            self._tell_range_without_gpus(pod)
            return SUCCESS
        if total is None:
            return SUCCESS
        key = self.job_key(pod)
        self._job_of[pod.key] = key
        known = self.jobs.get(key) or self._returning(key, pod) or self._adopt_running(key, pod)
        if known is None:
            known = self._learn(key, pod, gpus, total)
            self._dirty = True
        known.pods.add(pod.key)
        if known.incomplete:
            self._judge_once_complete(known, pod)
        if known.admitted is False:
            self._tell_rejected(pod, "")  # a member created later is ordered like the others
        if known.waiting:
            known.gated[pod.key] = pod
            return unschedulable("not admitted yet: waits until its deadline can be planned", plugin=NAME)
        return SUCCESS

    def _returning(self, key: JobKey, pod: PodInfo) -> GpuJob | None:
        """The job of a pod its owner created in place of ended ones, as it was judged."""
        ended = self._ended.pop(key, None)
        if ended is None:
            return None
        when, owner, job = ended
        if self.handle.clock.now() - when > RETURN_WINDOW_S or owner != _owner_uid(pod):
            return None
        job.held, job.running_since = 0, None
        job.gated.clear()
        self.jobs[key] = job
        self._dirty = True
        return job

    def _adopt_running(self, key: JobKey, pod: PodInfo) -> GpuJob | None:
        """The job of a pending pod whose other members already run here (this scheduler
        restarted, or took over, and a member was replaced before its first reconcile): taken
        over as reconcile takes it, with the verdict it was told, rather than judged as an
        arrival against a cluster its own running members seem to fill."""
        book = self.handle.jobs.of(pod.key)
        if book is None:
            return None
        for member in book.members.values():
            if member.key != pod.key and member.node_name is not None and member.requests.get(GPU, 0) > 0:
                self._adopt(key, member)
        job = self.jobs.get(key)
        if job is not None:
            self._capacity = None  # its members' GPUs are the plan's now, not held outside it
            self._admitted = None
        return job

    def _tell_range_without_gpus(self, pod: PodInfo) -> None:
        """A worker range on a pod of an Indexed Job that asks for no GPUs: the Job's pods share
        one template, so the whole job is CPU-only, and only GPU workers are scaled here."""
        if pod.key in self._told_range or worker_range_of(pod, 1) is None:
            return
        book = self.handle.jobs.of(pod.key)
        if book is None or book.ref.source is not JobSource.BATCH:
            return
        self._told_range.add(pod.key)
        note = "elastic range ignored: the job's workers ask for no GPUs (a CPU job's CPUs are sized in place)"
        self.handle.tasks.spawn(self.handle.cluster.emit_event(pod, "Warning", IGNORED_REASON, note))

    def _recount(self, pod: PodInfo) -> None:
        """A member without GPUs (a launcher, a parameter server) of a rigid job already known
        holds none of its GPU workers' share: the job's workers are counted again."""
        book = self.handle.jobs.of(pod.key)
        known = self.jobs.get(book.key) if book is not None else None
        if book is not None and known is not None and known.ref is None:
            workers = _gpu_workers(book)
            if workers != known.workers:
                known.workers = known.workers_min = known.workers_max = workers
                self._dirty = True
            if known.incomplete:
                self._judge_once_complete(known, pod)

    def _learn(self, key: JobKey, pod: PodInfo, gpus: int, total: int) -> GpuJob:
        job = self.handle.jobs.of(pod.key)
        state = GpuJob(key, None, total, deadline_of(pod), gpus, 1, 1, 1, JobModel(total))
        self.jobs[key] = state
        if state.deadline is None:
            state.admitted = False
        if _owner_unseen(job, pod):
            # Its worker count is its Indexed Job's parallelism: sized and judged once the Job is seen.
            state.incomplete = True
            return state
        if job is not None and job.ref.source is not JobSource.BATCH and len(job.members) < job.minimum:
            # Sized and judged once its members are known: its GPU workers are those of them that
            # hold GPUs (a launcher or a parameter server holds none), and they may ask unlike
            # counts; an Indexed Job's pods all come from one template.
            state.incomplete = True
            return state
        self._size(state, job, pod)
        if state.deadline is not None:
            self._judge(state, pod, self.handle.clock.now())
        return state

    def _size(self, state: GpuJob, job: Job | None, pod: PodInfo) -> None:
        """The job's worker count, its range (a declared one that cannot hold is told and
        ignored) and its first speed, from the owner's expected duration at that count."""
        ref = job.ref if job is not None else None
        gpus = state.gpus_per_worker
        workers = _gpu_workers(job) if job is not None else 1
        lo = hi = workers
        declared = worker_range_of(pod, workers)
        problem = ""
        if isinstance(declared, str):
            problem = declared
        elif declared is not None:
            if ref is not None and ref.source is JobSource.WORKLOAD:
                # Made by the Job controller (WorkloadWithJob), the apiserver refuses any change
                # of the Job's parallelism; made by hand, its size is the PodGroup's.
                problem = "its pods are in a Workload API gang, whose size is its PodGroup's, not its owner's"
            elif ref is None or ref.source is not JobSource.BATCH:
                problem = "its owner is not an Indexed batch/v1 Job, the one pysched can scale"
            elif gpus > self.largest_node():
                problem = f"{gpus} GPUs per worker is more than any node has"
            elif declared[0] * gpus > (cluster_gpus := int(self._gpu_columns()[0].sum())):
                problem = (
                    f"workers-min {declared[0]} x {gpus} GPUs per worker is more than the cluster's {cluster_gpus} GPUs"
                )
            elif not declared[0] <= workers <= declared[1]:
                problem = (
                    f"its Job runs {workers} workers, outside workers-min {declared[0]} to workers-max {declared[1]}"
                )
            else:
                lo, hi = declared
        if problem:
            note = f"elastic range ignored: {problem}; the job runs at its submitted size"
            self.handle.tasks.spawn(self.handle.cluster.emit_event(pod, "Warning", IGNORED_REASON, note))
        state.ref = ref if hi > lo else None
        state.workers_min, state.workers_max, state.workers = lo, hi, workers
        sizes = [g for m in job.members.values() if (g := m.requests.get(GPU, 0)) > 0] if job is not None else []
        if state.ref is None and len(set(sizes)) > 1:  # a gang of unlike pods (a JobSet's driver and workers)
            state.gpus_per_worker, state.units = max(sizes), sum(sizes)
        state.sized = True
        expected = expected_duration_of(pod)
        if expected is not None:
            state.expect(expected)

    def _sync_workers(self, job: GpuJob, now: float) -> None:
        """An Indexed Job's workers are its parallelism as the owner states it now: its Job may
        have been seen after its pods (counted 1 until then) or changed by someone else; not
        while a scale of its own may not have reached the Job's informer yet."""
        book = self.handle.jobs.get(job.key)
        if book is None or book.ref.source is not JobSource.BATCH:
            return
        if now - job.last_scale < self.args.scale_timeout_seconds:
            return
        if book.lookup(book.ref) is None:
            return  # its Job is not known (not seen yet, or gone): no parallelism to read
        asked = book.minimum
        if asked != job.workers:
            if job.ref is not None and not job.workers_min <= asked <= job.workers_max:
                # Set by hand outside its range: rigid from here, as a Job submitted so is (told once).
                member = self._member_of(job)
                if member is not None:
                    note = (
                        f"elastic range ignored: its Job now runs {asked} workers, outside workers-min "
                        f"{job.workers_min} to workers-max {job.workers_max}; the job runs at that size"
                    )
                    self.handle.tasks.spawn(self.handle.cluster.emit_event(member, "Warning", IGNORED_REASON, note))
                job.ref = None
            job.workers = asked
            if job.ref is None:  # rigid: its size is its count
                job.workers_min = job.workers_max = asked
            self._dirty = True

    def _judge_once_complete(self, known: GpuJob, pod: PodInfo) -> None:
        book = self.handle.jobs.of(pod.key)
        if _owner_unseen(book, pod) or (book is not None and len(book.members) < book.minimum):
            return  # sized from all its members
        if not known.sized:
            self._size(known, book, pod)
        known.incomplete = False
        if known.deadline is not None:
            gpu_pod = pod if pod.requests.get(GPU, 0) > 0 else self._member_of(known)
            self._judge(known, gpu_pod or pod, self.handle.clock.now())

    def _demands(
        self, now: float, exclude: JobKey | None = None, *, admitted_only: bool = False
    ) -> tuple[list[Demand], list[Demand]]:
        """The admitted deadline jobs' demands and the others'; with `admitted_only` the others
        are only caught up (their models fed as a plan would feed them), not priced."""
        capacity = self.capacity()
        admitted: list[Demand] = []
        others: list[Demand] = []
        for job in self.jobs.values():
            if job.key == exclude:
                continue
            # Admitted, or placed before it could be judged (it holds GPUs, and is judged once its
            # speed is known); a job not judged and not placed (a gang still missing members)
            # holds nothing yet and has no verdict to keep.
            judged = job.admitted or (job.admitted is None and bool(self._rows.get(job.key)))
            counted = bool(judged) and job.deadline is not None
            if job.waiting and not counted:
                continue  # held back at PreEnqueue: no GPUs are planned for it while it waits
            if admitted_only and not counted:
                job.catch_up(now)
                continue
            demand = self._demand(job, now, capacity)
            if demand is None:
                continue
            (admitted if counted else others).append(demand)
        return admitted, others

    def _judge(self, job: GpuJob, pod: PodInfo, now: float) -> None:
        """Admit or refuse a deadline job whose speed is known; left undecided while it is not."""
        demand = self._demand(job, now, self.capacity())
        if demand is None:
            return
        if not self.args.admission:
            job.admitted = True
            return
        if job.gpus_per_worker > self.largest_node():
            # Never placed while no node is that large: planning it would hold GPUs for nothing.
            job.admitted, job.hopeless = False, True
            self.rejected += 1
            self._tell_rejected(pod, f"its pods ask for {job.gpus_per_worker} GPUs each, more than any node has")
            return
        if self._admitted is None:  # one pass over the jobs per reconcile, not one per arrival
            self._admitted = {d.key: d for d in self._demands(now, exclude=job.key, admitted_only=True)[0]}
        admitted = [d for k, d in self._admitted.items() if k != job.key]
        verdict = admit(demand, admitted, self.capacity(), now)
        job.admitted = verdict.admitted
        if verdict.admitted:
            self._admitted[job.key] = demand
        if not verdict.admitted:
            self.rejected += 1
            # Only a job with nothing placed yet can wait: one judged at its first progress runs.
            placed = bool(self._rows.get(job.key))
            job.hopeless = not self._could_meet_alone(demand, now)
            job.waiting = self.args.not_admitted == WAIT and not placed and not job.hopeless
            earliest = earliest_deadline(demand, admitted, self.capacity(), now, verdict.finish)
            self._tell_rejected(pod, earliest_finish_words(earliest, now))

    def _could_meet_alone(self, demand: Demand, now: float) -> bool:
        return admit(demand, [], self.capacity(), now).admitted

    def _admit_waiting(self, now: float) -> None:
        """Judge the waiting jobs again, earliest deadline first, against the jobs admitted now;
        release those admitted, and those that could no longer meet their deadline even alone
        (as best-effort: a job is never held back for good)."""
        waiting = sorted((j for j in self.jobs.values() if j.waiting), key=lambda j: (j.deadline or 0.0, j.key))
        if not waiting:
            return
        admitted = self._demands(now)[0]
        capacity = self.capacity()
        for job in waiting:
            planned = self._demand(job, now, capacity)
            if planned is None:
                continue
            demand = dataclasses.replace(planned, deadline=job.deadline)  # judged as a candidate again
            if admit(demand, admitted, capacity, now).admitted:
                job.admitted = True
                admitted.append(demand)
                self._admitted = None  # what later arrivals are judged against has grown
                self._tell_admitted(job, now)
            elif not self._could_meet_alone(demand, now):
                first = min(job.gated.values(), key=lambda p: p.key, default=None)
                if first is not None:
                    note = "the deadline can no longer be met even on an empty cluster: runs as best-effort"
                    self.handle.tasks.spawn(self.handle.cluster.emit_event(first, "Warning", REJECTED_REASON, note))
            else:
                continue
            job.waiting = False
            gated, job.gated = job.gated, {}
            self.handle.activator.activate(sorted(gated))

    def _tell_admitted(self, job: GpuJob, now: float) -> None:
        """Every gated pod's condition says so (DeadlineLaxity orders it as a deadline job again);
        one event per job."""
        for i, pod in enumerate(sorted(job.gated.values(), key=lambda p: p.key)):
            deadline = deadline_of(pod)
            if deadline is None:
                continue
            self._told.discard(pod.key)
            note = f"admitted after waiting: deadline {deadline - now:+.0f}s from now can now be planned"
            if i == 0:
                self.handle.tasks.spawn(self.handle.cluster.emit_event(pod, "Normal", ADMITTED_REASON, note))
            condition = PodCondition(CONDITION, "True", ADMITTED_REASON, note)
            self.handle.tasks.spawn(self.handle.cluster.patch_pod_conditions(pod, condition))

    def _tell_rejected(self, pod: PodInfo, why: str) -> None:
        """Once per pod: the pod passes preEnqueue again after every failed attempt, and each
        condition written is an update that would bring it back once more."""
        deadline = deadline_of(pod)
        if deadline is None or pod.key in self._told:
            return
        self._told.add(pod.key)
        job = self._job_of_pod(pod)
        then = "waits until it can be admitted" if job is not None and job.waiting else "runs as best-effort"
        hopeless = job is not None and job.hopeless
        because = "even with every GPU" if hopeless else "without making an admitted job miss its own"
        note = (
            f"deadline {deadline - self.handle.clock.now():+.0f}s from now cannot be planned {because}"
            f"{'; ' + why if why else ''}: {then}"
        )
        if why:
            self.handle.tasks.spawn(self.handle.cluster.emit_event(pod, "Warning", REJECTED_REASON, note))
        self.handle.tasks.spawn(
            self.handle.cluster.patch_pod_conditions(pod, PodCondition(CONDITION, "False", REJECTED_REASON, note))
        )

    def _adopt(self, key: JobKey, pod: PodInfo) -> None:
        """A placed GPU pod this scheduler never saw pending (another replica led, or this one
        restarted): its job is known from here, and planned and scaled as before. Its verdict is
        read back from what it was told: a job refused admission has the condition saying so, one
        admitted was told nothing. Sized once its owner is seen."""
        total = total_steps_of(pod)
        if total is None:
            return
        job = self.jobs.get(key)
        if job is None:
            book = self.handle.jobs.of(pod.key)
            if _owner_unseen(book, pod):
                return  # its worker count is its Job's: taken at a later reconcile
            job = GpuJob(key, None, total, deadline_of(pod), pod.requests.get(GPU, 0), 1, 1, 1, JobModel(total))
            self._size(job, book, pod)
            running = sum(1 for m in book.members.values() if m.node_name is not None) if book is not None else 1
            if job.elastic and running < job.workers:
                # A scale the old leader made whose new members do not all run yet: they get the
                # scale timeout from here to run, or the scale is taken back.
                job.settled, job.last_scale = False, self.handle.clock.now()
            told = condition_of(pod, CONDITION)
            refused = told is not None and told.get("reason") == REJECTED_REASON
            job.admitted = job.deadline is not None and not refused
            self.jobs[key] = job
            self._dirty = True
        self._job_of[pod.key] = key
        job.pods.add(pod.key)
        row = self.handle.nodes.row.get(pod.node_name) if pod.node_name is not None else None
        if row is not None:  # as `pod_placed` would have counted it
            self._count_gpus(key, pod, row)

    def _job_of_pod(self, pod: PodInfo) -> GpuJob | None:
        key = self._job_of.get(pod.key)
        return self.jobs.get(key) if key is not None else None

    # ----- running jobs
    async def reconcile(self, pods: Sequence[PodInfo]) -> None:
        now = self.handle.clock.now()
        self._admitted = None
        self._capacity = None
        running: dict[JobKey, list[PodInfo]] = {}
        for pod in pods:
            if pod.requests.get(GPU, 0) > 0:
                key = self.job_key(pod)
                if pod.key not in self._job_of and pod.node_name is not None:
                    self._adopt(key, pod)  # placed before this scheduler led: never through PreEnqueue here
                if key in self.jobs:
                    running.setdefault(key, []).append(pod)
        for key, job in self.jobs.items():
            self._sync_workers(job, now)
            members = running.get(key, [])
            held = sum(p.requests.get(GPU, 0) for p in members)
            if held != job.held:
                job.model.restarted()  # a new worker set: the next report starts a new interval
                job.held = held
                job.running_since = now if held else None
                self._dirty = True
            # Read when a plan needs it (`GpuJob.demand`): a rigid job is rarely planned.
            found = next(((p, v) for p in members if (v := self.handle.cluster.progress(p)) is not None), None)
            job.unread = None if found is None else found[1]
            problem = job.progress_problem(now)
            if problem and found is not None:
                self.handle.tasks.spawn(
                    self.handle.cluster.emit_event(found[0], "Warning", INVALID_PROGRESS_REASON, problem)
                )
            if job.incomplete:  # its pods may all have passed PreEnqueue before its Job was seen
                member = members[0] if members else self._member_of(job)
                if member is not None:
                    self._judge_once_complete(job, member)
            if job.admitted is None and job.deadline is not None and members and not job.incomplete:
                self._judge(job, members[0], now)
        retry = any(job.failed_scales and job.retry_at <= now for job in self.jobs.values())
        if not (self._dirty or retry or now - self._last_plan >= self.args.replan_seconds):
            return
        self._admit_waiting(now)
        if any(job.elastic and job.ref is not None for job in self.jobs.values()):
            await self._replan(now, running)  # only elastic jobs act on a plan
        self._dirty = False
        self._last_plan = now

    async def _replan(self, now: float, running: dict[JobKey, list[PodInfo]]) -> None:
        capacity = self.capacity()
        admitted, others = self._demands(now)
        result = plan(admitted, others, capacity, now, self.args.leftover_efficiency)
        free = self._free_gpus()  # GPU pods outside the plan (inference, other schedulers') hold theirs
        # GPUs the plan gives jobs beyond what they hold: only these make a running job give any back.
        wanted = sum(max(0, result.targets.get(k, 0) - j.held) for k, j in self.jobs.items())
        # Those that give GPUs back first (best-effort and at-risk ones before admitted ones),
        # then those that grow into them.
        elastic = [j for j in self.jobs.values() if j.elastic and j.ref is not None]
        elastic.sort(key=lambda j: (result.targets.get(j.key, 0) >= j.held, j.key in result.reserved, j.key))
        for job in elastic:
            members = running.get(job.key, [])
            try:
                wanted = await self._steer(job, members, result, free, wanted, now)
            except Exception as err:  # one job's bug must not stop the others' plan
                pod = members[0] if members else None
                self.handle.incidents.report("ElasticScale reconcile", pod, err, then="its workers stay as they are")

    async def _steer(
        self, job: GpuJob, members: Sequence[PodInfo], result: Plan, free: FreeGpus, wanted: int, now: float
    ) -> int:
        """Scale one elastic job toward its target; the GPUs wanted after it (it takes from `free` as it grows)."""
        if job.waiting:
            return wanted  # held back: its worker count is left as its owner asked until it is admitted
        bound = len(members)
        if bound >= job.workers:
            job.settled = True
        target_units = result.targets.get(job.key, 0)
        target = max(job.workers_min, min(job.workers_max, target_units // job.gpus_per_worker))
        why = "toward the deadline plan"
        if (
            not job.settled
            and bound
            and bound < job.workers
            and now - job.last_scale >= self.args.scale_timeout_seconds
        ):
            target = max(job.workers_min, bound)  # the new members of its last scale never all ran
            why = f"back: its new workers did not all run within {self.args.scale_timeout_seconds:g}s"
        elif target > job.workers:
            if bound:  # up only into GPUs free now, within its range, and only when it pays for its pause
                target = min(target, job.workers + free.workers(job.gpus_per_worker))
                if target <= job.workers or target < job.workers_min or not self._worth(job, target, now):
                    return wanted
        elif target < job.workers and bound:
            if wanted <= free.total:
                return wanted  # nobody needs its GPUs: it keeps them
            if now - job.last_scale < self.args.cooldown_seconds and job.key in result.reserved:
                return wanted  # an admitted job gives GPUs back only after its cooldown
            short = wanted - free.total
            target = max(target, job.workers - (short + job.gpus_per_worker - 1) // job.gpus_per_worker)
        if target == job.workers or now < job.retry_at:
            return wanted
        change = (target - job.workers) * job.gpus_per_worker
        await self._scale(job, target, members, now, why)
        if bound and job.workers == target:  # the scale was accepted
            if change > 0:
                free.take(change // job.gpus_per_worker, job.gpus_per_worker)
            else:
                free.give(self._rows.get(job.key, {}), -change)
            wanted -= max(0, change)
        return wanted

    def _worth(self, job: GpuJob, target: int, now: float) -> bool:
        """A voluntary scale-up must cut the remaining time by `min_gain`, pause included, and
        wait for the cooldown."""
        if now - job.last_scale < self.args.cooldown_seconds:
            return False
        demand = self._demand(job, now, self.capacity())
        if demand is None:
            return False
        before, after = demand.duration(job.held), demand.duration(target * job.gpus_per_worker)
        return after <= before * (1 - self.args.min_gain)

    async def _scale(
        self, job: GpuJob, workers: int, members: Sequence[PodInfo], now: float, why: str = "toward the deadline plan"
    ) -> None:
        if job.ref is None:
            return
        speaker = members[0] if members else self._member_of(job)  # who the job's events are told on
        status = await self.handle.cluster.scale_job(job.ref, workers)
        if status.code is Code.ERROR:  # the API failed, not refused: the plan asks again later
            job.failed_scales += 1
            wait = min(MAX_SCALE_RETRY_S, self.args.interval_seconds * 2.0 ** min(job.failed_scales - 1, 8))
            job.retry_at = now + wait
            if speaker is not None:
                note = f"workers {job.workers} -> {workers} failed: {status.message()}; retried in {wait:.0f}s"
                failed = self.handle.cluster.emit_event(speaker, "Warning", SCALE_FAILED_REASON, note)
                self.handle.tasks.spawn(failed)
            return
        job.failed_scales, job.retry_at = 0, -math.inf
        if not status.ok:
            job.ref = None  # cannot be scaled: rigid from now on, told once
            # Rigid at the workers that run: an owner gone reads as a parallelism of 1.
            job.workers = job.workers_min = job.workers_max = len(members) or job.workers
            if speaker is not None:
                kept = f"{job.workers} worker{'' if job.workers == 1 else 's'}"
                note = f"elastic scaling stopped: {status.message()}; the job keeps {kept}"
                self.handle.tasks.spawn(self.handle.cluster.emit_event(speaker, "Warning", IGNORED_REASON, note))
            return
        self.scales += 1
        if speaker is not None:
            note = f"workers {job.workers} -> {workers} {why}"
            self.handle.tasks.spawn(self.handle.cluster.emit_event(speaker, "Normal", SCALED_REASON, note))
        job.settled = job.settled and workers < job.workers
        job.workers = workers
        job.last_scale = now

    def _member_of(self, job: GpuJob) -> PodInfo | None:
        """A pod of a job none of whose pods runs (the first the job book knows)."""
        book = self.handle.jobs.get(job.key)
        return next(iter(book.members.values()), None) if book is not None else None

    # ----- topology
    def pod_placed(self, pod: PodInfo, row: int) -> None:
        key = self._job_of.get(pod.key)
        if key is not None:
            self._count_gpus(key, pod, row)
            self._held_changed(key)

    def _count_gpus(self, key: JobKey, pod: PodInfo, row: int) -> None:
        rows = self._rows.setdefault(key, {})
        rows[row] = rows.get(row, 0) + pod.requests.get(GPU, 0)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        key = self._job_of.get(pod.key)
        rows = self._rows.get(key) if key is not None else None
        if rows is None or key is None:
            return
        rows[row] = rows.get(row, 0) - pod.requests.get(GPU, 0)
        if rows[row] <= 0:
            del rows[row]
        if not rows:
            del self._rows[key]
        self._held_changed(key)

    def _held_changed(self, key: JobKey) -> None:
        """An admitted job started or stopped since the last reconcile: admission sees it as
        running (it is not moved behind a newcomer that arrives before the next reconcile)."""
        admitted = self._admitted
        demand = admitted.get(key) if admitted is not None else None
        if admitted is not None and demand is not None:
            admitted[key] = dataclasses.replace(demand, held=self._placed_gpus(key))

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> Status:
        if pod.requests.get(GPU, 0) <= 0 or GPU not in nodes.column:
            return SKIP
        job = self.handle.jobs.of(pod.key)
        return SUCCESS if job is not None and len(job.members) > 1 else SKIP

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        size = nodes.size
        scores = np.zeros(size, np.int64)
        column = nodes.column.get(GPU)
        job = self.handle.jobs.of(pod.key)
        if column is None or job is None:
            return scores
        allocatable = nodes.allocatable[:size, column].astype(np.float64)
        free = allocatable - nodes.requested[:size, column]
        need = sum(m.requests.get(GPU, 0) for k, m in job.members.items() if k not in job.placed)
        need = max(need, pod.requests.get(GPU, 0))
        same = np.zeros(size, np.float64)
        for row, gpus in self._rows.get(job.key, {}).items():
            if row < size:
                same[row] = gpus
        scale = np.maximum(allocatable, 1.0)
        tight = 1.0 - np.clip(free - pod.requests.get(GPU, 0), 0, None) / scale
        whole = free >= need
        fit = 0.3 + 0.3 * (1.0 - (free - need) / scale)  # the tightest node that holds the rest
        partial = 0.3 * np.clip(free, 0, None) / scale
        reach = self._reach(job.key, need, allocatable)
        if reach > need:  # a new elastic job: first where it can grow in place, then where it fits
            fit = np.where(free >= reach, 0.3 + 0.3 * (1.0 - (free - reach) / scale), fit / 2)
            partial = partial / 2
        value = np.where(same > 0, 0.6 + 0.4 * tight, np.where(whole, fit, partial))
        scores[:] = np.round(value * MAX_NODE_SCORE).astype(np.int64)
        return scores

    def _reach(self, key: JobKey, need: float, allocatable: np.ndarray) -> float:
        """The GPUs an elastic job with nothing placed yet may grow to on one node (its largest
        size, at most a node's): its first workers go where that much is free, so that a scale-up
        later stays on their node (another node costs it throughput). `need` for any other job."""
        job = self.jobs.get(key)
        if job is None or not job.elastic or self._rows.get(key) or allocatable.shape[0] == 0:
            return need
        return max(need, min(float(allocatable.max()), float(job.workers_max * job.gpus_per_worker)))

    def metric_families(self) -> list[MetricFamily]:
        return [
            MetricFamily(
                "pysched_elastic_scales",
                "Worker-count changes of elastic jobs accepted by their owners.",
                "counter",
                (),
                {(): float(self.scales)},
            ),
            MetricFamily(
                "pysched_deadline_rejected",
                "Deadline GPU jobs refused admission (DeadlineRejected), run as best-effort.",
                "counter",
                (),
                {(): float(self.rejected)},
            ),
        ]

    def pod_ended(self, pod: PodInfo) -> None:
        """Forget a job once every pod of it ended or was deleted (a pod the scale removed
        leaves the others)."""
        key = self._job_of.pop(pod.key, None)
        self._told.discard(pod.key)
        self._told_range.discard(pod.key)
        job = self.jobs.get(key) if key is not None else None
        if job is None:
            return
        job.pods.discard(pod.key)
        job.gated.pop(pod.key, None)  # a waiting job's admission is told on its pods that exist
        self._dirty = True
        if not job.pods:
            del self.jobs[job.key]
            if self._admitted is not None:  # what arrivals until the next reconcile are judged against
                self._admitted.pop(job.key, None)
            if pod.phase != "Succeeded" and pod.controller is not None:  # its owner may make another
                self._ended[job.key] = (self.handle.clock.now(), _owner_uid(pod), job)
                if len(self._ended) > MAX_ENDED_JOBS:
                    self._ended.popitem(last=False)


def _gpu_workers(job: Job) -> int:
    """The members of `job` that share its GPU work: its minimum, less the members seen without
    GPUs (an MPI launcher, parameter servers)."""
    return max(1, job.minimum - sum(1 for m in job.members.values() if m.requests.get(GPU, 0) <= 0))


def _owner_unseen(job: Job | None, pod: PodInfo) -> bool:
    """A pod of an Indexed Job whose parallelism (its worker count) the backend does not know
    yet: its Job is seen after its pods."""
    return (
        job is not None
        and job.ref.source is JobSource.BATCH
        and COMPLETION_INDEX in pod.labels
        and job.lookup(job.ref) is None
    )


def _owner_uid(pod: PodInfo) -> str | None:
    return None if pod.controller is None else str(pod.controller.uid)


def factory(args: ElasticScaleArgs, handle: Handle) -> ElasticScale:
    plugin = ElasticScale(args, handle)
    handle.pods.subscribe(plugin)
    handle.pod_lifecycle.on_terminated(plugin.pod_ended)
    handle.pod_lifecycle.on_deleted(plugin.pod_ended)
    return plugin


SPEC = PluginSpec(NAME, ElasticScaleArgs, factory, ElasticScale)
