"""Replays a scenario on the simulated cluster with the real scheduler, one policy at a time.

Discrete events on a virtual clock (arrivals, finishes, the queue's wake-ups, reconcile ticks);
between events the scheduler runs until idle. Jobs run steps at the speed their allocation gives
(`pysched.workload.segment`, `pysched.workload.accounting`). Metric definitions: docs/architecture.md, "Simulation".
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import heapq
import itertools
import math
import random
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from pysched.api.annotations import PROGRESS_INTERVAL, ProgressReport
from pysched.api.ids import NodeName, PodKey
from pysched.api.jobs import JobRef, JobSource, job_key
from pysched.api.objects import NodeInfo, PodInfo, node_from_dict
from pysched.api.resources import CPU, GPU, MEMORY, format_resource, to_scheduler_units
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import ConfigError, SchedulerConfig
from pysched.framework.registry import Registry
from pysched.scheduler.queue import GATED
from pysched.scheduler.scheduler import Scheduler
from pysched.sim.scenario import Scenario
from pysched.workload.accounting import Accounting, Usage, close_segment, resize_run
from pysched.workload.gang import Held, Member
from pysched.workload.gang_jobs import elastic_gpu_job, gpu_gang, worker
from pysched.workload.gang_run import GangRun
from pysched.workload.job import Job
from pysched.workload.progress import last_write
from pysched.workload.segment import Run, noise_rng, start_run
from pysched.workload.speed import STEP_NOISE, Throughput

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: virtual time starts here
# With nothing left to arrive or finish, this long without a bind or an event ends the run: where
# nothing runs the cluster cannot change, and the scheduler's retries (backoff up to 10 s, Permit
# timeouts of 60 s, the flush of unschedulable pods every 5 minutes) would have placed what could
# be placed well within it; what is left can never run (counted unfinished).
QUIET_LIMIT = 3600.0


def key_of(job: Job) -> PodKey:
    """The job's key: its pod's for a one-pod job (a gang's members have their own, `member_key`)."""
    return PodKey(f"sim/{job.name}")


def member_key(member: Member) -> PodKey:
    return PodKey(f"sim/{member.name}")


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """One job of a run, for `--jobs-csv`: its name and the trace's id for it, times in seconds on
    the workload's clock (a trace's own; None: it never got there), its request, its resource
    changes and its CPU allocation segments."""

    job: str
    trace_id: str
    submitted: float
    started: float | None
    finished: float | None
    deadline: float | None
    met: bool | None  # None: no deadline
    cpu: float
    gpu: int
    members: int
    rescales: int
    cpu_segments: tuple[tuple[float, float, float], ...]  # (start, end, CPUs held), member by member

    CSV_FIELDS: ClassVar[tuple[str, ...]] = (
        "job", "trace_id", "submitted_s", "started_s", "finished_s", "deadline_s", "met", "cpu", "gpu", "members",
        "rescales", "cpu_segments",
    )  # fmt: skip

    def csv_row(self) -> list[str]:
        def t(value: float | None) -> str:
            return "" if value is None else f"{value:.1f}"

        segments = ";".join(f"{a:.0f}-{b:.0f}:{c:g}" for a, b, c in self.cpu_segments)
        met = "" if self.met is None else str(self.met).lower()
        return [
            self.job, self.trace_id, t(self.submitted), t(self.started), t(self.finished), t(self.deadline), met,
            f"{self.cpu:g}", str(self.gpu), str(self.members), str(self.rescales), segments,
        ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class PolicyResult:
    jobs: int
    deadline_jobs: int
    deadline_met: int
    deadline_met_ratio: float
    cpu_utilization: float
    mean_jct_s: float
    mean_queue_s: float
    makespan_s: float
    rescales: int
    skipped: int
    unfinished: int
    usage: tuple[Usage, ...] = field(default=(), repr=False, compare=False)  # for the CPU chart
    jct: tuple[float, ...] = field(default=(), repr=False, compare=False)  # for the JCT CDF
    outcomes: tuple[JobOutcome, ...] = field(default=(), repr=False, compare=False)  # for --jobs-csv
    # Bugs the scheduler contained during the run (logged each): its figures are not to be trusted.
    internal_errors: int = field(default=0, compare=False)

    def as_json(self) -> dict[str, float | int]:
        """The simulate JSON fields (docs/architecture.md, "Simulation")."""
        return {
            "jobs": self.jobs,
            "deadline_jobs": self.deadline_jobs,
            "deadline_met": self.deadline_met,
            "deadline_met_ratio": self.deadline_met_ratio,
            "cpu_utilization": self.cpu_utilization,
            "mean_jct_s": self.mean_jct_s,
            "mean_queue_s": self.mean_queue_s,
            "makespan_s": self.makespan_s,
            "rescales": self.rescales,
            "skipped": self.skipped,
            "unfinished": self.unfinished,
        }


def split_fitting(
    jobs: Sequence[Job], nodes: Sequence[dict[str, object]], seed: int = 7, *, elastic: bool = False
) -> tuple[list[Job], list[Job], list[str]]:
    """(kept, skipped, problems): a one-pod job needing more GPUs than the largest node holds
    becomes a gang of node-sized members (with `elastic`, every GPU job becomes an elastic job of
    one-GPU workers); with no GPU node it cannot run, nor can a job with a pod that no node holds
    (CPUs, memory and GPUs together) or a gang asking more than the whole cluster has: each is
    reported with its trace position and skipped."""
    room = ClusterCapacity.of([node_from_dict(n) for n in nodes])
    most_gpus, all_gpus = room.most[GPU], room.total[GPU]
    kept: list[Job] = []
    skipped: list[Job] = []
    problems: list[str] = []
    for job in jobs:
        rng = random.Random(zlib.crc32(f"{seed}/{job.name}/gang".encode()))
        if elastic and job.gang is None and 0 < job.gpu <= all_gpus and most_gpus > 0:
            offered = job.truth.gpus if isinstance(job.truth, Throughput) and job.truth.gpus else (job.gpu,)
            job = elastic_gpu_job(job, most_gpus, min(offered[-1], all_gpus), rng, least_workers=offered[0])
        elif job.gang is None and job.gpu > most_gpus > 0:
            job = gpu_gang(job, most_gpus, rng)
        elif job.gpu > most_gpus:
            skipped.append(job)
            problems.append(f"{job.source}: needs {job.gpu} GPUs and no node holds any: skipped")
            continue
        why = room.never_fits(job)
        if why is not None:
            skipped.append(job)
            problems.append(f"{job.source}: {why}: skipped")
            continue
        kept.append(job)
    return kept, skipped, problems


_SHOWN_RESOURCES = ((CPU, "CPUs"), (MEMORY, "memory"), (GPU, "GPUs"))


def _amount(resource: str, units: int) -> str:
    """As a message says it: GPUs counted, memory that is no whole Ki in the largest binary unit
    it fills (two decimals, truncated: a node never seems to hold more than it does), CPUs as
    quantities."""
    if resource == GPU:
        return str(units)
    if resource == MEMORY and units % 2**10:
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if units >= size:
                return f"{math.floor(100 * units / size) / 100:.2f}{suffix}"
    return format_resource(resource, units)


@dataclass(frozen=True, slots=True)
class ClusterCapacity:
    """What a cluster's nodes can ever hold, in the resources a simulated pod requests."""

    shapes: frozenset[tuple[int, int, int]]  # each node's allocatable (CPU, memory, GPU), once
    most: Mapping[str, int]
    total: Mapping[str, int]
    counted: Mapping[tuple[int, int, int], int]  # how many nodes have each shape

    @classmethod
    def of(cls, nodes: Sequence[NodeInfo]) -> ClusterCapacity:
        alloc = [(n.allocatable.get(CPU, 0), n.allocatable.get(MEMORY, 0), n.allocatable.get(GPU, 0)) for n in nodes]
        most = {r: max((a[i] for a in alloc), default=0) for i, (r, _) in enumerate(_SHOWN_RESOURCES)}
        total = {r: sum(a[i] for a in alloc) for i, (r, _) in enumerate(_SHOWN_RESOURCES)}
        return cls(frozenset(alloc), most, total, collections.Counter(alloc))

    def holds(self, pod: tuple[int, int, int]) -> int:
        """How many pods of this shape (asking for something) the nodes hold at once."""
        return sum(
            count * min(have // want for have, want in zip(shape, pod, strict=True) if want > 0)
            for shape, count in self.counted.items()
        )

    def never_fits(self, job: Job) -> str | None:
        """Why the job's pods can never all be placed, or None: a pod no node holds (every
        resource at once, as NodeResourcesFit checks), or pods asking more in total than the
        nodes have, or more than they hold at once."""
        members = job.gang.members if job.gang is not None else (job,)
        pods = [(m.cpu_milli, to_scheduler_units(MEMORY, m.memory), m.gpu) for m in members]
        for pod in set(pods):
            if any(all(have >= want for have, want in zip(shape, pod, strict=True)) for shape in self.shapes):
                continue
            for (resource, words), want in zip(_SHOWN_RESOURCES, pod, strict=True):
                if want > self.most[resource]:
                    return (
                        f"a pod of it needs {_amount(resource, want)} {words} and the largest node has"
                        f" {_amount(resource, self.most[resource])}"
                    )
            wanted = ", ".join(f"{_amount(r, v)} {w}" for (r, w), v in zip(_SHOWN_RESOURCES, pod, strict=True))
            return f"a pod of it needs {wanted} and no node has all of them"
        # All at once (an elastic job too starts with all its first workers): in total, and each
        # pod of a shape on a node with room for it beside the others.
        for i, (resource, words) in enumerate(_SHOWN_RESOURCES):
            needed = sum(pod[i] for pod in pods)
            if needed > self.total[resource]:
                return (
                    f"its {len(pods)} pods need {_amount(resource, needed)} {words} together and the"
                    f" cluster has {_amount(resource, self.total[resource])}"
                )
        if len(pods) > 1:
            for pod, count in sorted(collections.Counter(p for p in pods if any(p)).items()):
                room = self.holds(pod)
                if count > room:
                    wanted = ", ".join(f"{_amount(r, v)} {w}" for (r, w), v in zip(_SHOWN_RESOURCES, pod, strict=True))
                    return f"{count} of its pods need {wanted} each and the nodes hold {room} at once"
        return None


class Replay:
    """One policy's run: the event loop and the jobs' books."""

    def __init__(
        self,
        policy: str,
        scheduler: Scheduler,
        cluster: SimulatedCluster,
        clock: VirtualClock,
        jobs: Sequence[Job],
        seed: int,
        progress_interval: float,
        step_noise: float,
    ) -> None:
        self.policy, self.scheduler, self.cluster, self.clock = policy, scheduler, cluster, clock
        self.jobs: dict[PodKey, Job] = {key_of(j): j for j in jobs}
        self.rngs = {key: noise_rng(seed, job) for key, job in self.jobs.items()}
        self.running: dict[PodKey, Run] = {}
        self.gangs: dict[PodKey, GangRun] = {key: GangRun(j, j.gang) for key, j in self.jobs.items() if j.gang}
        self.members: dict[PodKey, tuple[PodKey, int]] = {
            member_key(m): (key, i) for key, g in self.gangs.items() for i, m in enumerate(g.gang.members)
        }
        self.recreated = itertools.count(1)
        self.started: dict[PodKey, float] = {}
        self.finished: dict[PodKey, float] = {}
        self.books = Accounting()
        self.last_change = EPOCH  # the last bind or event
        self.horizon: float | None = None  # virtual time at which the run is cut off
        self.interval = progress_interval
        self.noise = step_noise
        self.events: list[tuple[float, int, str, PodKey, int]] = []
        self.seq = itertools.count()
        cluster.bind_hooks.append(self.on_bind)
        cluster.resize_hooks.append(self.on_resize)
        cluster.delete_hooks.append(self.on_delete)
        cluster.scale_hooks.append(self.on_scale)

    def push(self, when: float, kind: str, key: PodKey, version: int = 0) -> None:
        heapq.heappush(self.events, (when, next(self.seq), kind, key, version))

    def push_finish(self, key: PodKey, run: Run) -> None:
        finish = run.finish_time()
        if finish != float("inf"):
            self.push(finish, "finish", key, run.version)

    def on_bind(self, pod: PodInfo, node: NodeName) -> None:
        now = self.last_change = self.clock.now()
        if pod.key in self.members:
            key, index = self.members[pod.key]
            gang = self.gangs[key]
            held = Held(gang.gang.members[index].role, pod.requests.get(CPU, 0) / 1000, pod.requests.get(GPU, 0), node)
            if gang.bind(index, held, now, self.rngs[key], self.noise) and gang.run is not None:
                self.started.setdefault(key, now)  # queued until every member runs
                self.push_finish(key, gang.run)
            return
        self.started.setdefault(pod.key, now)
        run = start_run(self.jobs[pod.key], pod.requests.get(CPU, 0) / 1000, now, self.rngs[pod.key], self.noise)
        self.running[pod.key] = run
        self.push_finish(pod.key, run)

    def on_resize(self, old: PodInfo, new: PodInfo) -> None:
        cpu = new.requests.get(CPU, 0) / 1000
        if new.key in self.members:
            key, index = self.members[new.key]
            gang = self.gangs[key]
            held = gang.held.get(index)
            if held is not None and cpu != held.cpu and key not in self.finished:
                gang.resize(index, cpu, self.clock.now(), self.books, self.rngs[key], self.noise)
                if gang.run is not None:
                    self.push_finish(key, gang.run)
            return
        run = self.running.get(new.key)
        if run is None or cpu == run.cpu:
            return
        resize_run(run, cpu, self.clock.now(), self.books, self.rngs[new.key], self.noise)
        self.push_finish(new.key, run)

    def on_delete(self, pod: PodInfo) -> None:
        """A member gone before its job finished (preempted): the job goes back to its checkpoint,
        and the member's controller creates it again."""
        if pod.key not in self.members:
            return
        key, index = self.members[pod.key]
        if key in self.finished:
            return
        self.gangs[key].leave(index, self.clock.now(), self.books)
        self.push(self.clock.now(), "recreate", pod.key)

    def on_scale(self, ref: JobRef, workers: int) -> None:
        """Play the Job controller of an elastic job: members above the new count are deleted,
        new ones created; the job keeps its steps and pauses (`GangRun.scale`)."""
        key = PodKey(f"{ref.namespace}/{ref.name}")
        job, gang = self.jobs.get(key), self.gangs.get(key)
        if job is None or gang is None or job.elastic is None or key in self.finished:
            return
        before = gang.gang.members
        members = tuple(before[i] if i < len(before) else worker(job, i) for i in range(workers))
        now = self.clock.now()
        gang.scale(dataclasses.replace(gang.gang, members=members), now, self.books, self.rngs[key], self.noise)
        if gang.run is not None:
            self.push_finish(key, gang.run)
        for member in before[workers:]:
            pod = member_key(member)
            del self.members[pod]  # deleted by the scale, not failed: never recreated
            if pod in self.cluster.pods:
                self.cluster.delete_pod(pod)
        for index in range(len(before), workers):
            self.members[member_key(members[index])] = (key, index)
            self.cluster.create_pod(job.manifest(self.policy, EPOCH, members[index]))

    def _reporting(self) -> Iterator[tuple[PodKey, Run]]:
        """Each running job's segment with the pod that reports its progress (rank 0 of a gang)."""
        yield from self.running.items()
        for gang in self.gangs.values():
            if gang.run is not None:
                yield member_key(gang.gang.members[0]), gang.run

    def publish_progress(self) -> None:
        """What the training helpers wrote by now, for the reconcile plugins about to read it."""
        now = self.clock.now()
        for key, run in self._reporting():
            when = last_write(run.seg_start, now, self.interval)
            if when is None:
                continue
            report = ProgressReport.written(run.steps_at(when), when)
            if run.progress is None or report.stamp != run.progress.stamp:
                run.progress = report
                self.cluster.write_progress(key, report)

    def _held_for_reconcile(self) -> bool:
        """Pods a PreEnqueue plugin holds back while a reconcile, which may release them (an
        admission that waits for room in the plan), is still to come."""
        return self.scheduler.next_reconcile() is not None and self.scheduler.queue.counts()[GATED] > 0

    def _idle(self) -> bool:
        """No pod placed, pending or waiting at Permit: nothing for a reconcile to look at."""
        scheduler = self.scheduler
        return len(scheduler.cache) == 0 and len(scheduler.queue) == 0 and len(scheduler.waiting_pods) == 0

    async def run(
        self, on_tick: Callable[[float], None] | None, horizon: float | None = None, first: float | None = None
    ) -> None:
        """Until every job has finished or can never run; `horizon`: seconds after the first
        submission (`first`, the workload's, skipped jobs included; by default the first of the
        jobs run) at which the run is cut off (what is left counts unfinished)."""
        if first is None:
            first = min((job.submit for job in self.jobs.values()), default=0.0)
        self.horizon = None if horizon is None else EPOCH + first + horizon
        for key, job in self.jobs.items():
            self.push(EPOCH + job.submit, "arrive", key)
        end: float | None = None
        while True:
            due = self.scheduler.next_reconcile()
            if due is not None and due <= self.clock.now():
                self.publish_progress()
            await self.scheduler.run_until_idle()
            retrying = len(self.scheduler.waiting_pods) > 0 or self.scheduler.queue.has_backoff()
            if not self.events and not retrying and not self._held_for_reconcile():
                break  # nothing runs, arrives, waits at Permit or backs off: pending pods can never fit
            wakeup = self.scheduler.next_wakeup()
            if wakeup is not None and self.events and self.events[0][0] > wakeup and self._idle():
                # An empty cluster until the next arrival (a trace whose clock starts late, a quiet
                # night): its reconciles have nothing to look at, so they are skipped on their grid.
                self.scheduler.skip_reconciles_before(self.events[0][0])
                wakeup = self.scheduler.next_wakeup()
            when = min(t for t in (self.events[0][0] if self.events else None, wakeup) if t is not None)
            if self.horizon is not None and when > self.horizon:
                end = max(self.horizon, self.clock.now())  # what runs is charged up to the cut
                break
            if not self.events and when - self.last_change > QUIET_LIMIT:
                break
            self.clock.advance_to(max(when, self.clock.now()))
            if on_tick is not None:
                on_tick(self.clock.now() - EPOCH)
            while self.events and self.events[0][0] <= self.clock.now():
                _, _, kind, key, version = heapq.heappop(self.events)
                self.last_change = self.clock.now()
                if kind == "arrive":
                    job = self.jobs[key]
                    if job.elastic is not None and job.gang is not None:  # its Indexed Job first
                        self.cluster.add_owner(job.owner_uid, EPOCH + job.submit)
                        self.cluster.set_job_minimum(job_key("sim", JobSource.BATCH, job.name), len(job.gang.members))
                    for manifest in job.manifests(self.policy, EPOCH):
                        self.cluster.create_pod(manifest)
                    continue
                if kind == "recreate":
                    self.recreate(key)
                    continue
                if key in self.gangs:
                    self.finish_gang(key, version)
                    continue
                run = self.running.get(key)
                if run is None or run.version != version:
                    continue  # superseded by a resize
                close_segment(run, self.clock.now(), self.books)
                del self.running[key]
                self.finished[key] = self.clock.now()
                self.cluster.finish_pod(key)
        end = self.clock.now() if end is None else end
        for run in self.running.values():  # cut off at the horizon: charge what ran
            close_segment(run, end, self.books)
        for key, gang in self.gangs.items():
            if key not in self.finished:
                gang.close(end, self.books)

    def recreate(self, member: PodKey) -> None:
        if member not in self.members:
            return  # removed by a scale meanwhile
        key, index = self.members[member]
        if key in self.finished or member in self.cluster.pods:
            return
        raw = self.jobs[key].manifest(self.policy, EPOCH, self.gangs[key].gang.members[index])
        raw["metadata"]["uid"] += f"-{next(self.recreated)}"  # a new pod of the same name
        self.cluster.create_pod(raw)

    def finish_gang(self, key: PodKey, version: int) -> None:
        """Every member ends together when the job's steps are done."""
        gang = self.gangs[key]
        if gang.run is None or gang.run.version != version:
            return  # superseded by a resize or a member leaving
        gang.close(self.clock.now(), self.books)
        self.finished[key] = self.clock.now()
        for member in gang.gang.members:
            pod = self.cluster.pods.get(member_key(member))
            if pod is not None and pod.node_name is not None:
                self.cluster.finish_pod(pod.key)


def metrics(
    replay: Replay, skipped: int, never_run: Sequence[Job] = (), bad_rows: int = 0, bad_row_deadlines: int = 0
) -> PolicyResult:
    """Per job; `never_run` (skipped before the run) and the trace's `bad_rows` count as jobs,
    and as missed deadlines (`bad_row_deadlines` of the rows had one)."""
    jobs, finished, started = replay.jobs, replay.finished, replay.started
    with_deadline = [k for k, j in jobs.items() if j.deadline is not None]
    deadline_jobs = len(with_deadline) + sum(1 for j in never_run if j.deadline is not None) + bad_row_deadlines
    met = sum(1 for k in with_deadline if k in finished and finished[k] - EPOCH <= (jobs[k].deadline or 0.0))
    jct = [max(0.0, finished[k] - EPOCH - jobs[k].submit) for k in finished]
    queue = [max(0.0, started[k] - EPOCH - jobs[k].submit) for k in started]
    first_submit = min((j.submit for j in jobs.values()), default=0.0)
    segments: dict[str, list[tuple[float, float, float]]] = collections.defaultdict(list)
    for use in replay.books.usage:
        segments[use.job].append((use.start - EPOCH, use.end - EPOCH, use.cpu))
    outcomes = [
        JobOutcome(
            job=job.name,
            trace_id=job.trace_id or job.name,
            submitted=job.submit,
            started=started[k] - EPOCH if k in started else None,
            finished=finished[k] - EPOCH if k in finished else None,
            deadline=job.deadline,
            met=None if job.deadline is None else k in finished and finished[k] - EPOCH <= job.deadline,
            cpu=job.cpu_milli / 1000,
            gpu=job.gpu,
            members=len(job.gang.members) if job.gang is not None else 1,
            rescales=replay.books.job_rescales[job.name],
            cpu_segments=tuple(segments[job.name]),
        )
        for k, job in jobs.items()
    ]
    outcomes += [
        JobOutcome(j.name, j.trace_id or j.name, j.submit, None, None, j.deadline,
                   None if j.deadline is None else False, j.cpu_milli / 1000,
                   j.gpu, len(j.gang.members) if j.gang is not None else 1, 0, ())
        for j in never_run
    ]  # fmt: skip
    return PolicyResult(
        jobs=len(jobs) + len(never_run) + bad_rows,
        deadline_jobs=deadline_jobs,
        deadline_met=met,
        deadline_met_ratio=round(met / deadline_jobs, 4) if deadline_jobs else 0.0,
        cpu_utilization=round(replay.books.cpu_utilization, 4),
        mean_jct_s=round(sum(jct) / len(jct), 1) if jct else 0.0,
        mean_queue_s=round(sum(queue) / len(queue), 1) if queue else 0.0,
        makespan_s=round(max(finished.values()) - EPOCH - first_submit, 1) if finished else 0.0,
        rescales=replay.books.rescales,
        skipped=skipped,
        unfinished=len(jobs) - len(finished),
        usage=tuple(replay.books.usage),
        jct=tuple(jct),
        outcomes=tuple(outcomes),
    )


def profile_scheduler(
    config: SchedulerConfig, policy: str, cluster: SimulatedCluster, clock: VirtualClock, registry: Registry
) -> Scheduler:
    """A scheduler running the one profile `policy` of `config` (a replay runs one at a time:
    profiles run together must share a queue sort); KeyError when there is none."""
    profile = config.profile(policy)
    if profile is None:
        raise KeyError(policy)
    return Scheduler(SchedulerConfig((profile,), config.source), cluster, clock, registry)


async def run_policy(
    scenario: Scenario,
    config: SchedulerConfig,
    policy: str,
    registry: Registry,
    *,
    seed: int = 7,
    progress_interval: float = PROGRESS_INTERVAL,
    step_noise: float = STEP_NOISE,
    on_tick: Callable[[float], None] | None = None,
    horizon: float | None = None,
    elastic: bool = False,
    prepare: Callable[[Scheduler, Replay], None] | None = None,
) -> PolicyResult:
    """One policy's run. `prepare` sees the scheduler and the replay before the first job
    arrives (the learning environments attach their agent and read the jobs' books there)."""
    clock = VirtualClock(EPOCH)
    cluster = SimulatedCluster(clock, record_events=False)
    for node in scenario.nodes:
        cluster.add_node(node)
    scheduler = profile_scheduler(config, policy, cluster, clock, registry)
    await scheduler.start()
    jobs, skipped, problems = split_fitting(scenario.jobs, scenario.nodes, seed, elastic=elastic)
    replay = Replay(policy, scheduler, cluster, clock, jobs, seed, progress_interval, step_noise)
    if prepare is not None:
        prepare(scheduler, replay)
    await replay.run(on_tick, horizon, min((job.submit for job in scenario.jobs), default=None))
    await scheduler.stop()
    bad_rows = len(scenario.problems)
    result = metrics(replay, len(problems) + bad_rows, skipped, bad_rows, scenario.skipped_deadlines)
    return dataclasses.replace(result, internal_errors=scheduler.incidents.total)


class PolicyStartError(Exception):
    """A policy whose plugins could not be built when its turn came, though its profile was
    checked before the first run (a file they read, a weights file, changed meanwhile).
    `finished` holds the results of the policies run before it."""

    def __init__(self, policy: str, problem: str, finished: Mapping[str, PolicyResult]) -> None:
        super().__init__(f"policy {policy} could not start: {problem}")
        self.policy = policy
        self.finished = dict(finished)


def simulate(
    scenario: Scenario,
    config: SchedulerConfig,
    policies: list[str],
    registry: Registry,
    *,
    seed: int = 7,
    progress_interval: float = PROGRESS_INTERVAL,
    step_noise: float = STEP_NOISE,
    on_tick: Callable[[str, float], None] | None = None,
    horizon: float | None = None,
    elastic: bool = False,
) -> dict[str, PolicyResult]:
    """Each policy in turn; PolicyStartError when one cannot build its plugins (each run builds
    its own, and reads their files again)."""
    results: dict[str, PolicyResult] = {}
    for policy in policies:
        tick = None if on_tick is None else (lambda t, p=policy: on_tick(p, t))
        try:
            results[policy] = asyncio.run(
                run_policy(
                    scenario,
                    config,
                    policy,
                    registry,
                    seed=seed,
                    progress_interval=progress_interval,
                    step_noise=step_noise,
                    on_tick=tick,
                    horizon=horizon,
                    elastic=elastic,
                )
            )
        except ConfigError as err:
            raise PolicyStartError(policy, str(err), results) from None
    return results
