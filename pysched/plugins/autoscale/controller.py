"""Autoscale's domain logic: per job, from its progress to a CPU count, a resize and its condition.

The plugin face (`__init__.py`) hands its extension points to a `Controller`. Each reconcile of a
running job reads one `Tick` (the pod, its main container, what the controller remembers of it,
its speed model, the CPUs it runs on, its deadline, the time and what a restart costs), and every
decision of that reconcile reads only the tick.
"""

from __future__ import annotations

import collections
import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pysched.api.annotations import (
    CPU_MIN,
    PROGRESS,
    PROGRESS_FORMS,
    autoscale_enabled,
    cpu_max_of,
    cpu_milli_of,
    deadline_of,
    main_container,
    total_steps_of,
)
from pysched.api.containers import (
    ContainerResize,
    actual_request,
    container_cpus,
    container_request,
    container_resize,
    finished_at,
    resize_infeasible,
    restarts_on_resize,
    running_cpus,
)
from pysched.api.ids import JobKey, NodeName, PodKey, PodUID
from pysched.api.jobs import NO_ORDER, ROLE_LABEL, JobSource, job_of, run_uid
from pysched.api.limits import clip
from pysched.api.objects import PodInfo
from pysched.api.resources import CPU, GPU, MEMORY, to_scheduler_units
from pysched.deadline.allocation import DOWN, KEEP, UP, AllocationAgent, Running, row
from pysched.deadline.condition import (
    AT_RISK_REASON,
    CONDITION,
    DEMOTED_REASON,
    INVALID_PROGRESS_REASON,
    MET_REASON,
    MISSED_REASON,
    ON_TRACK_REASON,
    RESCALED_REASON,
    STATE_CONDITION,
    JobRecord,
    condition_of,
    forecast_words,
    message_time,
    saved_job,
    state_message,
    verdict_words,
)
from pysched.deadline.predictor import (
    Choice,
    CountStats,
    JobModel,
    Predictor,
    Verdict,
    central_finish,
    choose,
    predicted_finish,
)
from pysched.deadline.shares import CpuClaim, Grants, share_room
from pysched.framework.cluster import PodCondition, namespace_selected
from pysched.framework.interfaces import Handle, MetricFamily
from pysched.framework.jobs import Job
from pysched.plugins.autoscale.args import AutoscaleArgs

# One run of a gang: its job and its owner's uid (`run_uid`), so that a job recreated under the same
# name is judged again. Bare pods have no controller: their runs are told apart by creation (`_resubmitted`).
GangIncarnation = tuple[JobKey, str]


def incarnation(pod: PodInfo, job: JobKey) -> GangIncarnation:
    return job, run_uid(pod)


REFRESH_FINISH_SHARE = 0.05  # rewrite the condition when the finish moves by this share of the time left
REFRESH_FINISH_MIN_S = 60.0  # ... and by at least this much
REVIEW_SLACK_SHARE = 0.5  # a job on track is looked at again after this share of its predicted slack
ON_TRACK, AT_RISK, INFEASIBLE = "on_track", "at_risk", "infeasible"
SLACK_STATES = (ON_TRACK, AT_RISK, INFEASIBLE)
MAX_SLACK_S = 30 * 86400.0  # the slack gauge's range: past it, "very late" or "very early" is all it can say
GANG_MEMORY_S = 600.0  # how long a gang that left the job book is remembered (its verdict counted once)


@dataclass(slots=True)
class JobState:
    """What the controller remembers of a running job between reconciles."""

    cpus: float  # the count the job has run on since the last observation
    last_rescale: float = -math.inf
    restarted_at: float = -math.inf  # observations older than this belong to a lost run
    at_risk: bool = False
    reason: str = ""  # the condition's reason, and the human part of its message
    what: str = ""
    warned: str = ""  # the last progress value warned about (one event per bad value)
    abandoned: float = math.nan  # the CPUs of the last resize put back after the kubelet refused it
    # Counts the kubelet refused for good (Infeasible: e.g. beyond what its node could ever give,
    # or any change of a pod under the static CPU manager): never asked for again, nor any count
    # beyond them, while the pod runs.
    refused_up: float = math.inf
    refused_down: float = 0.0
    # Steps per count and whether they are only an estimate, as last written.
    written_steps: dict[tuple[float, bool], float] = field(default_factory=dict)
    written_finish: float = math.nan
    written_deadline: float = math.nan  # the deadline the conditions say (the user may change it)
    # Memory per CPU when first resized with `memory: withCpu`: memory is never taken back, so
    # after a step down the spec's own ratio is inflated, and growing by it would ratchet up.
    memory_per_cpu: float = math.nan


@dataclass(frozen=True, slots=True)
class Judged:
    """A job's verdict, given when its first pod ended; the later members of a gang take it."""

    when: float  # when it was given (how long it is remembered)
    met: bool
    ended_at: float
    succeeded: bool


def _resubmitted(pod: PodInfo, verdict: Judged) -> bool:
    """A bare pod created after its gang's verdict was given (when the run's first member ended)
    belongs to a later run under the same names: every member of a run existed by then."""
    return pod.controller is None and pod.created > verdict.ended_at


@dataclass(frozen=True, slots=True)
class Review:
    """When a job is next looked at, and what it was then: a recreated pod, or a deadline edited
    meanwhile, is looked at at once."""

    at: float
    uid: PodUID
    deadline: float

    def still(self, pod: PodInfo) -> bool:
        return pod.uid == self.uid and deadline_of(pod) == self.deadline


@dataclass(frozen=True, slots=True)
class Tick:
    """One running job at one reconcile."""

    pod: PodInfo
    container: str  # the main container, the one resized
    job: JobState
    model: JobModel
    current: float  # the CPUs it runs on, as the kubelet actuated them
    deadline: float
    now: float
    restart_s: float | None  # None: a CPU resize is in place; else a restart, its progress lost, costing this
    # The other workers of its gang (the pod is the gang's leader): resized with it to the same count.
    followers: tuple[tuple[PodInfo, str], ...] = ()
    gang: bool = False  # its workers may span nodes: it takes room as it finds it, never shares its own

    @property
    def in_place(self) -> bool:
        return self.restart_s is None


class Controller:
    """Autoscale's state and decisions for one profile."""

    def __init__(self, args: AutoscaleArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.predictor = Predictor()
        self._jobs: dict[PodKey, JobState] = {}
        self._planned: dict[PodKey, float] = {}  # CPUs chosen before binding
        self._slack: dict[PodKey, float] = {}  # seconds, per running deadline job
        self._rescales: collections.Counter[tuple[str, str]] = collections.Counter()
        self._deadlines: collections.Counter[str] = collections.Counter()
        # A gang's deadline is judged once, when its first member ends: the gangs seen running and
        # those judged, each with when (kept a while after the job leaves: a member's end can be
        # learnt after its deletion, once the backend has read how it ended).
        self._gangs_seen: dict[GangIncarnation, float] = {}
        self._judged: dict[GangIncarnation, Judged] = {}
        # A batch Job's failed pod, not judged while the Job may replace it (`_settle_retries`).
        self._retrying: dict[JobKey, PodInfo] = {}
        # Batch Jobs that run in waves, by their last pod ended: judged once, at their last completion.
        self._waves: dict[JobKey, PodInfo] = {}
        self._review_at: dict[PodKey, Review] = {}  # when each running job is next looked at (absent: now)
        # Answers for the jobs looked at, in place of the heuristic's direction (a learning
        # environment's agent); None: the heuristic decides.
        self.agent: AllocationAgent | None = None

    # ----- bounds and node room
    def _bounds(self, pod: PodInfo, node: NodeName | None) -> tuple[float, float]:
        """The pod's CPU range, capped by its node's allocatable CPUs before any search: the
        annotations are the user's, and `choose` considers every whole count in the range."""
        allocatable = self.handle.nodes.allocatable_and_free(node, CPU)[0]
        lo = cpu_milli_of(pod, CPU_MIN) or int(self.args.cpu_min * 1000)
        hi = cpu_max_of(pod) or allocatable
        if allocatable > 0:
            lo, hi = min(lo, allocatable), min(hi, allocatable)
        job = self._jobs.get(pod.key)
        if job is not None:  # a whole CPU short of what the kubelet refused, keeping the count it runs on
            runs = round(job.cpus * 1000)  # (a gang's rank 0 may run on the count a worker was refused)
            if math.isfinite(job.refused_up):
                refused = round(job.refused_up * 1000)
                hi = min(hi, max(refused - 1000, runs if runs < refused else 0))
            if job.refused_down > 0:
                refused = round(job.refused_down * 1000)
                lo = max(lo, min(refused + 1000, runs if runs > refused else refused + 1000))
        return lo / 1000, max(lo, hi) / 1000

    def _memory_bytes(self, pod: PodInfo, container: str) -> int:
        """The main container's memory request when memory grows with CPUs (0: it does not)."""
        if self.args.memory != "withCpu":
            return 0
        value = container_request(pod, container, MEMORY)
        return 0 if value is None else to_scheduler_units(MEMORY, value)

    def _memory_per_cpu(self, pod: PodInfo, memory: int, current: float) -> float:
        """The memory a CPU brings when memory grows with CPUs: the job's ratio when first resized,
        never more (memory is never taken back, so the spec's own ratio grows on a step down)."""
        ratio = memory / current
        job = self._jobs.get(pod.key)
        if job is None:
            return ratio
        if math.isnan(job.memory_per_cpu):
            job.memory_per_cpu = ratio
        return min(ratio, job.memory_per_cpu)

    def _room(self, pod: PodInfo, container: str, node: NodeName | None, current: float) -> float:
        """The most CPUs the pod could hold on its node now (memory too, when it grows with CPUs)."""
        nodes = self.handle.nodes
        room = current + nodes.allocatable_and_free(node, CPU)[1] / 1000
        memory = self._memory_bytes(pod, container)
        if memory > 0 and current > 0:
            per_cpu = self._memory_per_cpu(pod, memory, current)
            room = min(room, max(current, (memory + nodes.allocatable_and_free(node, MEMORY)[1]) / per_cpu))
        return room

    def _change(self, pod: PodInfo, container: str, current: float, target: float) -> ContainerResize:
        wanted = {CPU: round(target * 1000)}
        memory = self._memory_bytes(pod, container)
        if memory > 0 and current > 0 and target > current:
            grown = math.ceil(self._memory_per_cpu(pod, memory, current) * target)
            if grown > memory:
                wanted[MEMORY] = grown
        return container_resize(pod, container, wanted)

    def eligible(self, pod: PodInfo) -> str | None:
        """The main container when the pod is ours to scale, else None (a pod that is leaving
        gives its room back: none is taken from saveable jobs for it)."""
        if pod.deleting or pod.terminated or pod.requests.get(GPU, 0) or not autoscale_enabled(pod):
            return None
        if total_steps_of(pod) is None or deadline_of(pod) is None:
            return None
        if not namespace_selected(self.handle.cluster, self.args.deadline_namespaces, pod.namespace):
            return None
        if _pod_level_cpu(pod):
            return None  # a container resize must stay within the pod-level resources, which are not ours
        return main_container(pod)

    # ----- gangs: the job is the unit
    def leader(self, job: Job) -> PodKey:
        """The member whose progress speaks for the job: the first (in the job's order, parameter
        servers last) that reports `pysched.io/progress` (rank 0, by convention), else the first."""
        members = sorted(
            job.members,
            key=lambda key: (job.members[key].labels.get(ROLE_LABEL) == "ps", job.orders.get(key, NO_ORDER), key),
        )
        reporting = [key for key in members if self.handle.cluster.progress(job.members[key]) is not None]
        return (reporting or members)[0]

    def _followers(self, pod: PodInfo, job: Job) -> tuple[tuple[PodInfo, str], ...]:
        """The gang's other bound workers autoscaling may resize (parameter servers keep their CPUs)."""
        found: list[tuple[PodInfo, str]] = []
        for key, member in job.members.items():
            if key == pod.key or member.node_name is None or member.labels.get(ROLE_LABEL) == "ps":
                continue
            container = self.eligible(member)
            if container is not None:
                found.append((member, container))
        return tuple(found)

    # ----- before and at binding
    def _prior(self, total: int, now: float) -> JobModel | None:
        """A throwaway model of a never-observed job under the profile's prior (kept out of the
        predictor: a guess must never be pooled with what the job really measures)."""
        step = self.args.prior_step_seconds
        if step <= 0:
            return None
        model = JobModel(total)
        model.restore([CountStats(1.0, step, self.args.prior_uncertainty, step * 1000, 1000, 1)])
        model.observe(0, now, 1.0, now)
        return model

    async def size_before_bind(self, pod: PodInfo, node: NodeName) -> None:
        """Resize a pending deadline job to the smallest count that meets its deadline on `node`."""
        container = self.eligible(pod)
        deadline, total = deadline_of(pod), total_steps_of(pod)
        if container is None or deadline is None or total is None or self.handle.jobs.gang_of(pod.key) is not None:
            return  # a gang's members keep their requests until the job runs: they are sized together
        now = self.handle.clock.now()
        model = self.predictor.get(pod.key) or self._prior(total, now)
        if model is None:
            return
        current = container_cpus(pod, container)
        if current <= 0:
            return  # no CPU request: adding one would change the pod's QoS class, which the API refuses
        lo, hi = self._bounds(pod, node)
        hi = min(hi, self._room(pod, container, node, current))
        choice = choose(
            model, deadline, now, lo, hi, current=current, margin=self.args.safety_margin, band_z=self.args.band_z
        )
        if choice is None or choice.cpus is None or choice.cpus == current:
            return
        status = await self.handle.cluster.resize(pod, {container: self._change(pod, container, current, choice.cpus)})
        self._count_rescale(current, choice.cpus, status.ok)
        if status.ok:  # a refused resize binds the pod as submitted: never worse than no autoscaling
            self._planned[pod.key] = choice.cpus
            finish = central_finish(model, now, choice.cpus, current=current)
            basis = "its measured speed" if self.predictor.get(pod.key) is model else "the profile's prior"
            await self.handle.cluster.emit_event(
                pod, "Normal", "Rescaled",
                f"cpu {current:g} -> {choice.cpus:g} before binding, from {basis}: "
                f"{forecast_words(finish, deadline, choice.cpus, now)}",
            )  # fmt: skip

    def started(self, pod: PodInfo) -> None:
        """The pod is bound: its run starts now (0 steps), on the CPUs planned for it."""
        now = self.handle.clock.now()
        gang = self.handle.jobs.gang_of(pod.key)
        if gang is not None:
            self._gangs_seen[incarnation(pod, gang.key)] = now
        total = total_steps_of(pod)
        if total is None:
            return
        container = main_container(pod)
        requested = container_cpus(pod, container) if container is not None else pod.requests.get(CPU, 0) / 1000
        cpus = self._planned.pop(pod.key, requested)
        if cpus <= 0:
            return
        self.predictor.job(pod.key, total).started(now, cpus)  # a new run, from step 0 as far as we know
        self._jobs[pod.key] = JobState(cpus)
        self._review_at.pop(pod.key, None)

    # ----- reconcile
    async def reconcile(self, pods: Sequence[PodInfo]) -> None:
        now = self.handle.clock.now()
        if self._retrying:
            self._settle_retries(now)
        if self._waves:
            self._settle_waves()
        alive = {pod.key for pod in pods}
        for key in [k for k in self._jobs if k not in alive]:
            del self._jobs[key]
            self.predictor.forget(key)
        for key in [k for k in self._slack if k not in alive]:
            del self._slack[key]
        for key in [k for k in self._review_at if k not in alive]:
            del self._review_at[key]
        self._prune_gangs(now)
        deferred: dict[NodeName | None, list[PodInfo]] = collections.defaultdict(list)
        due: list[PodInfo] = []
        for pod in pods:
            review = self._review_at.get(pod.key)
            if review is not None and review.at > now and review.still(pod):
                deferred[pod.node_name].append(pod)  # on track, or beyond saving, when last looked at
            else:
                due.append(pod)
        await self._act(await self._ticks(due, now), deferred, now)

    async def _ticks(self, pods: Sequence[PodInfo], now: float) -> list[tuple[Tick, float]]:
        """The jobs among `pods` with a decision due now, each with its central finish."""
        ready: list[tuple[Tick, float]] = []
        for pod in pods:
            try:
                gang = self.handle.jobs.gang_of(pod.key)
                if gang is not None:  # any member, scaled or not (GPU pods are not): judged once
                    self._gangs_seen[incarnation(pod, gang.key)] = now
                container = self.eligible(pod)
                if container is None:
                    self._slack.pop(pod.key, None)  # no longer ours to predict (its opt-out, its namespace)
                    continue
                prepared: tuple[Tick, float] | None = None
                if gang is None:
                    prepared = await self._prepare(pod, container, now)
                elif self.leader(gang) == pod.key:
                    prepared = await self._prepare(pod, container, now, self._followers(pod, gang), gang=True)
                if prepared is not None:
                    ready.append(prepared)
            except Exception as err:  # one pod's bug must not stop the others' scaling
                self.handle.incidents.report("Autoscale reconcile", pod, err, then="its CPUs are left as they are")
        return ready

    def _resume(self, pod: PodInfo, total: int, deadline: float, current: float) -> JobState:
        """A running job this scheduler did not bind (a new leader): take back what the
        `pysched.io/Deadline` condition kept: cooldown, speed per count, predicted finish."""
        job = self._jobs[pod.key] = JobState(current)
        saved = saved_job(pod)
        if saved is None:
            return job
        job.last_rescale = saved.last_rescale
        job.reason = saved.reason
        job.what = saved.what
        model = self.predictor.job(pod.key, total)
        if not model.intervals:
            model.restore(saved.counts)
        job.written_steps = {(s.cpus, s.estimate): s.steps for s in model.count_stats()}
        job.written_deadline = math.nan if saved.deadline is None else saved.deadline
        if saved.finish is not None:
            job.written_finish = saved.finish
            self._slack[pod.key] = deadline - saved.finish
        return job

    def _observe(self, pod: PodInfo, job: JobState, total: int, now: float) -> tuple[JobModel, str]:
        """Feed the progress annotation to the model; the problem to warn about, or ""."""
        model = self.predictor.job(pod.key, total)
        report = self.handle.cluster.progress(pod)
        if report is None:
            return model, ""
        stamp = report.stamp
        if stamp is None:
            if report.text == job.warned:
                return model, ""
            # DeadlineLaxity warns of pending pods' annotations; progress arrives once the pod runs.
            job.warned = report.text
            return model, f"{PROGRESS}: {clip(report.text)} is not {PROGRESS_FORMS}; ignored"
        at = stamp.middle
        if at < job.restarted_at:
            return model, ""  # from a lost run
        result = model.observe(stamp.steps, at, job.cpus, now, resolution=stamp.resolution)
        if result.verdict is Verdict.BACKWARDS:
            # A container restart without checkpoints starts again from 0 (TF 1.x jobs do): a new
            # run, not a lie. The model keeps the speed it measured.
            model.restarted()
            result = model.observe(stamp.steps, at, job.cpus, now, resolution=stamp.resolution)
        if result.verdict in (Verdict.FUTURE, Verdict.BEFORE_START, Verdict.BEYOND_TOTAL) and report.text != job.warned:
            job.warned = report.text
            return model, f"{PROGRESS}: {clip(report.text)} ignored: {result.message}"
        return model, ""

    async def _prepare(
        self,
        pod: PodInfo,
        container: str,
        now: float,
        followers: tuple[tuple[PodInfo, str], ...] = (),
        gang: bool = False,
    ) -> tuple[Tick, float] | None:
        """Observe the job; the tick and its central finish when a decision is due now."""
        total, deadline = total_steps_of(pod), deadline_of(pod)
        if total is None or deadline is None:
            self._slack.pop(pod.key, None)  # its deadline or steps were taken away: no slack to show
            return None
        # The job runs on what the kubelet actuated; the spec may be ahead of it while a resize
        # is pending (Deferred, or on its way).
        current = running_cpus(pod, container)
        if followers:  # a gang goes at its slowest worker's pace (one may still wait for its resize)
            current = min(current, *(running_cpus(m, c) for m, c in followers))
        job = self._jobs.get(pod.key) or self._resume(pod, total, deadline, current)
        model = self.predictor.job(pod.key, total)
        # Progress written before a member's CPUs last changed (a resize the kubelet deferred takes
        # effect between two looks) was not made on the count the job runs on now.
        members = ((pod, container), *followers)
        changed = max((t for m, _ in members if (t := self.handle.resizes.last(m)) is not None), default=None)
        if changed is not None and changed > job.restarted_at:
            job.restarted_at = changed
            if model.last is not None and model.last.at < changed:
                model.restarted()
        if current != job.cpus:  # a resize took effect (ours or anyone's): measure the new count from here
            job.cpus = current
            model.restarted()
        model, problem = self._observe(pod, job, total, now)
        if problem:
            await self.handle.cluster.emit_event(pod, "Warning", INVALID_PROGRESS_REASON, problem)
        if current <= 0:
            return None
        # Memory grown with the CPUs restarts the container too when its policy says so (priced
        # for every move: a step down, which keeps the memory, is then counted dearer than it is).
        in_place = not restarts_on_resize(pod, container, memory_too=self.args.memory == "withCpu")
        restart_s = None if in_place else self.args.restart_seconds
        tick = Tick(pod, container, job, model, current, deadline, now, restart_s, followers, gang)
        pending = [(m, c) for m, c in ((pod, container), *followers) if container_cpus(m, c) != running_cpus(m, c)]
        if pending:
            # What the kubelet refuses for good is put back at once (a worker's too: its gang would
            # wait for it for ever); a put-back the apiserver refused is tried again after the cooldown.
            cooled = now - job.last_rescale >= self.args.cooldown_seconds
            refused = [(m, c, container_cpus(m, c), why) for m, c in pending if (why := resize_infeasible(m))]
            retried = [r for r in refused if r[2] != job.abandoned or cooled]  # decided before any put-back
            for member, member_container, wanted, why in retried:
                await self._abandon(tick, member, member_container, wanted, why)
            if not retried:
                # Meanwhile (a Deferred resize may wait for long) its slack and conditions say what
                # the count it runs on gives, not what the resize promised.
                waiting = central_finish(model, now, current, current=current)
                if math.isfinite(waiting):
                    self._slack[pod.key] = deadline - waiting
                    await self._save(tick, waiting)
            return None  # a resize is in flight: decide again once the whole job runs on what it got
        here = central_finish(model, now, current, current=current)
        if not math.isfinite(here):
            return None  # nothing known yet
        self._slack[pod.key] = deadline - here
        if now - job.last_rescale < self.args.cooldown_seconds:
            await self._save(tick, here)
            return None
        return tick, here

    def _schedule_review(self, tick: Tick, choice: Choice | None, resized: bool, wants: bool) -> None:
        """When to look at the job again, from Autoscale's own `choice`. One that wants CPUs (by
        that choice or an allocation policy's answer) at every reconcile, with its node's other
        jobs (`_act`); one on track after half its predicted slack (its prediction moves far less
        than that meanwhile); one no count saves after `reviewMaxSeconds` (it can only give CPUs,
        and it is looked at whenever a neighbour wants some). A rescaled job once its cooldown is
        over. One whose speed at its count is only estimated from its start, at every reconcile
        until it is measured."""
        key, limit = tick.pod.key, self.args.review_max_seconds
        if wants or choice is None or limit <= 0 or not tick.model.is_measured(tick.current):
            self._review_at.pop(key, None)
        else:
            if resized:
                wait = self.args.cooldown_seconds
            elif choice.cpus is None:
                wait = limit
            else:
                wait = REVIEW_SLACK_SHARE * max(0.0, tick.deadline - choice.finish)
            self._review_at[key] = Review(tick.now + min(limit, wait), tick.pod.uid, tick.deadline)

    def _choice(
        self, tick: Tick, deadline: float | None = None, lo: float | None = None, hi: float | None = None
    ) -> Choice | None:
        """`choose` for the tick's job, within its bounds unless others are given."""
        low, high = self._bounds(tick.pod, tick.pod.node_name)
        return choose(
            tick.model,
            tick.deadline if deadline is None else deadline,
            tick.now,
            low if lo is None else lo,
            high if hi is None else hi,
            current=tick.current,
            margin=self.args.safety_margin,
            band_z=self.args.band_z,
            restart_s=tick.restart_s,
        )

    async def _act(
        self, ready: list[tuple[Tick, float]], deferred: Mapping[NodeName | None, Sequence[PodInfo]], now: float
    ) -> None:
        """Decide every due job, its node's room shared in deadline order (`deadline.shares`): the
        jobs that give CPUs back act first, so the room they free is there for the others; the rest
        keep the order they came in, in which gangs take the room they find. On a node where a job
        wants CPUs, the jobs not due yet are decided too: they may have some to give. With an
        allocation `agent`, its answers replace Autoscale's choices before the room is shared."""
        choices = {tick.pod.key: self._choice(tick) for tick, _ in ready}
        woken: set[NodeName] = set()
        ready = [*ready, *await self._wake(ready, choices, deferred, woken, now)]
        downs = {tick.pod.key for tick, _ in ready if self._goes_down(tick, choices[tick.pod.key])}
        own = dict(choices)  # Autoscale's own, whatever the agent answers
        learned: set[PodKey] = set()
        if self.agent is not None:
            learned = self._ask_agent(ready, choices, downs)
            more = await self._wake(ready, choices, deferred, woken, now)  # a job the agent sent up wants room
            if more:
                own.update({tick.pod.key: choices[tick.pod.key] for tick, _ in more})
                downs |= {tick.pod.key for tick, _ in more if self._goes_down(tick, choices[tick.pod.key])}
                learned |= self._ask_agent(more, choices, downs)
                ready = [*ready, *more]
        grants = self._share(ready, choices, downs)
        ordered = sorted(ready, key=lambda r: r[0].pod.key not in grants.taken and r[0].pod.key not in downs)  # stable
        for tick, here in ordered:
            key = tick.pod.key
            try:
                mine = own[key] if key in learned else None
                decided = await self._decide(tick, choices[key], key in downs, grants, mine)
                wants = _wants_more(tick, choices[key]) or _wants_more(tick, own[key])
                self._schedule_review(tick, own[key], decided, wants)
                if not decided:
                    await self._save(tick, here)
            except Exception as err:  # one pod's bug must not stop the others' scaling
                self.handle.incidents.report("Autoscale reconcile", tick.pod, err, then="its CPUs are left as they are")

    async def _wake(
        self,
        ready: Sequence[tuple[Tick, float]],
        choices: dict[PodKey, Choice | None],
        deferred: Mapping[NodeName | None, Sequence[PodInfo]],
        woken: set[NodeName],
        now: float,
    ) -> list[tuple[Tick, float]]:
        """The jobs not due yet on the nodes where a job wants CPUs, not woken before, with their
        choices added (a gang's node too: what they give back is room its workers find)."""
        nodes = {
            tick.pod.node_name
            for tick, _ in ready
            if tick.pod.node_name is not None and _wants_more(tick, choices[tick.pod.key])
        } - woken
        woken |= nodes
        # Node by node in name order: a set's order follows the per-process string hash.
        extra = await self._ticks([pod for node in sorted(nodes) for pod in deferred.get(node, ())], now)
        choices.update({tick.pod.key: self._choice(tick) for tick, _ in extra})
        return extra

    def _ask_agent(
        self, ready: Sequence[tuple[Tick, float]], choices: dict[PodKey, Choice | None], downs: set[PodKey]
    ) -> set[PodKey]:
        """The agent's answer for each job in place of Autoscale's: where they differ, a step down
        (to the chosen count when it is lower, else one CPU less), keep, or a step up (to the chosen
        count when it is higher, else one CPU more), within the job's bounds. The same answer
        leaves Autoscale's decision exactly as it was. The jobs whose choice was replaced; none
        when the agent fails (reported; Autoscale's choices stand)."""
        agent = self.agent
        offered = [(tick, here) for tick, here in ready if choices[tick.pod.key] is not None]
        if agent is None or not offered:
            return set()
        rows, facts_of = [], []
        for tick, here in offered:
            key, choice = tick.pod.key, choices[tick.pod.key]
            assert choice is not None
            lo, hi = self._bounds(tick.pod, tick.pod.node_name)
            mine = UP if _wants_more(tick, choice) else DOWN if key in downs else KEEP
            room = self._room(tick.pod, tick.container, tick.pod.node_name, tick.current) - tick.current
            done = (tick.model.steps_at(tick.now) or 0.0) / tick.model.total_steps
            facts = Running(
                tick.now, tick.deadline, here, choice.cpus, tick.current, lo, hi, room, done, tick.in_place, mine
            )
            rows.append(row(facts))
            facts_of.append(facts)
        try:
            answers = np.asarray(agent(np.stack(rows), np.array([f.heuristic for f in facts_of], np.int64)))
            if answers.shape != (len(offered),) or not np.isin(answers, (DOWN, KEEP, UP)).all():
                raise ValueError(f"answers {answers.tolist()[:8]} for {len(offered)} jobs: one of 0, 1, 2 each")
        except Exception as err:  # a policy's bug must not stop scaling: Autoscale's own choices stand
            self.handle.incidents.report("Autoscale allocation policy", None, err, then="Autoscale's choices stand")
            return set()
        replaced: set[PodKey] = set()
        for (tick, _), answer, facts in zip(offered, answers, facts_of, strict=True):
            if int(answer) == facts.heuristic:
                continue
            key, current, need = tick.pod.key, tick.current, facts.need
            downs.discard(key)
            target = current
            if int(answer) == UP:
                target = max(current, min(facts.hi, need if need is not None and need > current else current + 1))
            elif int(answer) == DOWN:
                target = min(current, max(facts.lo, need if need is not None and need < current else current - 1))
                if target < current:
                    downs.add(key)
            steps = tick.model.steps_at(tick.now)
            finish = math.inf if steps is None else predicted_finish(
                tick.model, tick.now, steps, target, current=current, margin=self.args.safety_margin,
                band_z=self.args.band_z, restart_s=tick.restart_s,
            )  # fmt: skip
            choices[key] = Choice(target, finish)
            replaced.add(key)
        return replaced

    def _goes_down(self, tick: Tick, choice: Choice | None) -> bool:
        """A smaller count that still leaves `downSlack` of the time left (hysteresis)."""
        need = None if choice is None else choice.cpus
        if need is None or need >= tick.current or not tick.model.is_measured(tick.current):
            return False  # from its start alone a job resumed from a checkpoint looks far faster than it is
        slack_deadline = tick.deadline - self.args.down_slack * (tick.deadline - tick.now)
        lower = self._choice(tick, deadline=slack_deadline, lo=need, hi=need)
        return lower is not None and lower.cpus is not None

    def _step(self, tick: Tick, need: float) -> float:
        """The count a job below its share asks for now. In place it steps up gradually (the
        predictor extrapolates badly far beyond measured counts); a restarting container loses its
        progress on every step, so it moves straight to its share."""
        if tick.restart_s is not None:
            return need
        # Whole steps, but never past the share: a share of 2.5 CPUs (a cpu-max) floored was 2, not
        # above the count it had, and the job never got there.
        return min(need, float(math.floor(max(tick.current * self.args.max_step_factor, tick.current + 1))))

    def _share(
        self, ready: Sequence[tuple[Tick, float]], choices: dict[PodKey, Choice | None], downs: set[PodKey]
    ) -> Grants:
        """Each node's claims (gangs take room as they find it), shared in deadline order."""
        by_node: dict[NodeName, list[CpuClaim]] = collections.defaultdict(list)
        freed: dict[NodeName, float] = collections.defaultdict(float)
        for tick, _ in ready:
            node, choice = tick.pod.node_name, choices[tick.pod.key]
            if tick.gang or node is None or choice is None:
                continue
            key, current, need = tick.pod.key, tick.current, choice.cpus
            # A restarting container would lose its progress; a speed only estimated from the bind
            # may be a resumed run's, far faster than the job is.
            gives = tick.in_place and tick.model.is_measured(current)
            if need is None:
                lo = self._bounds(tick.pod, node)[0]
                claim = CpuClaim(key, tick.deadline, spare=max(0.0, current - lo) if gives else 0.0, at_risk=True)
            elif key in downs:
                freed[node] += current - need  # it goes down anyway: what it frees is free
                continue
            elif need < current:
                claim = CpuClaim(key, tick.deadline, spare=current - need if gives else 0.0)
            else:
                claim = CpuClaim(
                    key, tick.deadline, want=max(0.0, self._step(tick, need) - current), short=need - current
                )
            by_node[node].append(claim)
        given: dict[PodKey, float] = {}
        taken: dict[PodKey, float] = {}
        for node, claims in by_node.items():
            free = self.handle.nodes.allocatable_and_free(node, CPU)[1] / 1000 + freed[node]
            grants = share_room(claims, free)
            given.update(grants.given)
            taken.update(grants.taken)
        return Grants(given, taken)

    async def _decide(
        self, tick: Tick, choice: Choice | None, goes_down: bool, grants: Grants, own: Choice | None = None
    ) -> bool:
        """Act on the job's choice (`own`: Autoscale's, when an allocation policy replaced it);
        True when a resize was accepted (it wrote the condition)."""
        if choice is None:
            return False
        key = tick.pod.key
        if own is not None:
            return await self._decide_learned(tick, choice, own, goes_down, grants)
        if choice.cpus is None:
            hi = self._bounds(tick.pod, tick.pod.node_name)[1]
            await self._verdict(tick, DEMOTED_REASON, f"cannot meet the deadline even at {hi:g} CPUs")
            if key not in grants.taken:
                return False
            down = tick.current - grants.taken[key]
            return await self._resize(tick, down, "for jobs its CPUs can still save", DEMOTED_REASON)
        need = choice.cpus
        target = self._target(tick, need, goes_down, grants)
        # Below its floor (a cpu-min above the count it runs on) but on time where it is: raised
        # to the floor as its bounds say, not at risk.
        floor_only = need > tick.current and self._on_time_as_it_runs(tick)
        if target is None and need > tick.current and not floor_only:
            # A whole CPU more would help (`_step` asks for at least one), and its node has none to spare.
            await self._warn_at_risk(tick, f"{need:g} CPUs needed, none to spare on its node now")
            await self._verdict(tick, AT_RISK_REASON, f"needs {need:g} CPUs, none to spare on its node")
            return False
        if target is None:
            await self._verdict(tick, ON_TRACK_REASON, "on track")
            return False
        if target > tick.current and not floor_only:
            await self._warn_at_risk(tick, f"{need:g} CPUs needed")
        why = "for a job with an earlier deadline" if key in grants.taken and not goes_down else ""
        return await self._resize(tick, target, why or ("up to its cpu-min" if floor_only else ""))

    def _on_time_as_it_runs(self, tick: Tick) -> bool:
        """The job ends by its deadline on the count it runs on (`choose` over that one count)."""
        here = self._choice(tick, lo=tick.current, hi=tick.current)
        return here is not None and here.cpus is not None

    async def _decide_learned(self, tick: Tick, choice: Choice, own: Choice, goes_down: bool, grants: Grants) -> bool:
        """Act on an allocation policy's target. The condition keeps Autoscale's own verdict (a
        job no count saves stays demoted); resizes say they are the policy's; no DeadlineAtRisk
        warning unless Autoscale itself finds the job at risk."""
        key, need = tick.pod.key, choice.cpus
        assert need is not None
        target = self._target(tick, need, goes_down, grants)
        hopeless = own.cpus is None
        reason = DEMOTED_REASON if hopeless else RESCALED_REASON
        if target is None:
            if hopeless:
                hi = self._bounds(tick.pod, tick.pod.node_name)[1]
                await self._verdict(tick, DEMOTED_REASON, f"cannot meet the deadline even at {hi:g} CPUs")
            else:
                await self._verdict(tick, ON_TRACK_REASON, f"kept at {tick.current:g} CPUs by the allocation policy")
            return False
        if target > tick.current and _wants_more(tick, own):
            await self._warn_at_risk(tick)
        why = "for a job with an earlier deadline" if key in grants.taken and not goes_down else ""
        return await self._resize(tick, target, why or "by the allocation policy", reason)

    async def _warn_at_risk(self, tick: Tick, needed: str = "") -> None:
        """The `DeadlineAtRisk` Warning event, once until the job is on track again."""
        if tick.job.at_risk:
            return
        tick.job.at_risk = True
        note = f"at {tick.current:g} CPUs the job would miss its deadline {message_time(tick.deadline)}"
        note = f"{note}; {needed}" if needed else note
        await self.handle.cluster.emit_event(tick.pod, "Warning", AT_RISK_REASON, note)

    def _target(self, tick: Tick, need: float, goes_down: bool, grants: Grants) -> float | None:
        """The count to move to now for a job whose choice is `need` (None: stay)."""
        key = tick.pod.key
        if goes_down:
            return need
        if key in grants.taken:
            return tick.current - grants.taken[key]
        if need > tick.current:
            return self._grow(tick, need, grants.given.get(key))
        return None

    def _grow(self, tick: Tick, need: float, given: float | None) -> float | None:
        """The count to grow to now (None: no room). A job on one node grows by what its node's
        share gave it; a gang's workers all move to the same count, so the tightest node bounds it."""
        current = tick.current
        room = min(
            self._room(p, c, p.node_name, running_cpus(p, c)) - running_cpus(p, c) + current
            for p, c in ((tick.pod, tick.container), *tick.followers)
        )
        if not tick.gang:
            room = min(room, current + (given or 0.0))
        target = min(self._step(tick, need), room)
        if target < need:  # whole CPUs on the way; the share itself may be a fraction (a cpu-max)
            target = float(math.floor(target))
        return target if target > current else None

    async def _abandon(self, tick: Tick, pod: PodInfo, container: str, desired: float, why: str) -> None:
        """The kubelet refuses the pending resize of `pod` (the tick's job's, or one of its
        workers) for good: ask for what the container has again, so the spec says the truth, and
        say so. Decisions resume after the cooldown, never again up to (or down to) that count."""
        job, current = tick.job, running_cpus(pod, container)
        job.last_rescale, job.abandoned = tick.now, desired
        if desired > current:
            job.refused_up = min(job.refused_up, desired)
        elif desired < current:
            job.refused_down = max(job.refused_down, desired)
        back = {CPU: round(current * 1000)}
        memory = actual_request(pod, container, MEMORY)  # memory grown with the CPUs goes back too
        if memory is not None and container_request(pod, container, MEMORY) is not None:
            back[MEMORY] = memory
        status = await self.handle.cluster.resize(pod, {container: container_resize(pod, container, back)})
        # The refused resize was counted when the API took it; putting it back is a request of its own.
        self._count_rescale(desired, current, status.ok)
        outcome = f"back to {current:g} CPUs" if status.ok else f"reverting failed too: {status.message()}"
        await self.handle.cluster.emit_event(
            pod, "Warning", "RescaleFailed", f"cpu {current:g} -> {desired:g} refused by the kubelet ({why}); {outcome}"
        )

    async def _resize(self, tick: Tick, target: float, why: str = "", reason: str = RESCALED_REASON) -> bool:
        """Resize (`why`: for whom, when it is for another job); True when it was accepted (and
        the condition says so)."""
        pod, job, current = tick.pod, tick.job, tick.current
        change = self._change(pod, tick.container, running_cpus(pod, tick.container), target)
        status = await self.handle.cluster.resize(pod, {tick.container: change})
        for follower, container in tick.followers if status.ok else ():
            running = running_cpus(follower, container)
            moved = await self.handle.cluster.resize(
                follower, {container: self._change(follower, container, running, target)}
            )
            if not moved.ok:
                note = f"cpu {running:g} -> {target:g} with its job: {moved.message()}"
                await self.handle.cluster.emit_event(follower, "Warning", "RescaleFailed", note)
        self._count_rescale(current, target, status.ok)
        job.last_rescale = tick.now  # a refused resize also waits the cooldown: no hammering
        if not status.ok:
            await self.handle.cluster.emit_event(
                pod, "Warning", "RescaleFailed", f"cpu {current:g} -> {target:g}: {status.message()}"
            )
            return False
        finish = central_finish(tick.model, tick.now, target, current=current, restart_s=tick.restart_s)
        if tick.restart_s is not None:
            job.restarted_at = tick.now
            tick.model.restarted()
        if target < current:
            job.at_risk = False
        what = f"cpu {current:g} -> {target:g}"
        if MEMORY in change.requests:
            what += f", memory -> {change.requests[MEMORY]}"
        if why:
            what += f" {why}"
        self._slack[pod.key] = tick.deadline - finish
        note = f"{what}: {forecast_words(finish, tick.deadline, target, tick.now)}"
        await self.handle.cluster.emit_event(pod, "Normal", "Rescaled", note)
        job.reason, job.what = reason, what
        await self._save(tick, finish, cpus=target, force=True)
        return True

    async def _verdict(self, tick: Tick, reason: str, what: str) -> None:
        """A new reason for the condition; a demotion is also told as a Warning event, unless
        the pod's condition already says it was demoted (DeadlineLaxity told it at submission)."""
        job = tick.job
        if reason == ON_TRACK_REASON:
            job.at_risk = False  # the episode is over: a later one is warned of again
        if reason == job.reason and what == job.what:
            return
        told = (condition_of(tick.pod, CONDITION) or {}).get("reason") == DEMOTED_REASON
        if reason == DEMOTED_REASON and job.reason != reason and not told:
            await self.handle.cluster.emit_event(tick.pod, "Warning", reason, what)
        job.reason, job.what = reason, what
        job.written_finish = math.nan  # the message changes: write it with the next save

    async def _save(self, tick: Tick, finish: float, cpus: float | None = None, force: bool = False) -> None:
        """Write the conditions when what they say has changed enough (see the plugin's doc);
        `cpus`: the count the job runs on from now (the tick's unless it was just resized)."""
        job = tick.job
        if not job.reason:
            return
        # By count as measured (unsorted): sorted only when the condition is written. A count
        # measured where it was only estimated is written again (a new leader would restore the
        # estimate).
        measured = {(cpus, stats.estimate): stats.steps for cpus, stats in tick.model.measured().items()}
        grown = measured.keys() != job.written_steps.keys() or any(
            steps >= 2 * job.written_steps[c] for c, steps in measured.items()
        )
        moved = not math.isfinite(job.written_finish) or abs(finish - job.written_finish) > max(
            REFRESH_FINISH_MIN_S, REFRESH_FINISH_SHARE * max(0.0, tick.deadline - tick.now)
        )
        if not (force or grown or moved or tick.deadline != job.written_deadline):
            return
        job.written_steps, job.written_finish, job.written_deadline = measured, finish, tick.deadline
        count = tick.current if cpus is None else cpus
        known = finish if math.isfinite(finish) else None
        estimate = tick.model.step_and_sigma(count)
        sigma = (known - tick.now) * estimate[1] if known is not None and estimate is not None else None
        record = JobRecord(
            job.reason, job.what, tick.deadline, known, count, job.last_rescale, tick.model.count_stats(),
            finish_sigma=sigma,
        )  # fmt: skip
        words = f"{job.what}: {forecast_words(known, tick.deadline, count, tick.now)}"
        late = job.reason == DEMOTED_REASON or (known is not None and known > tick.deadline)
        await self.handle.cluster.patch_pod_conditions(
            tick.pod,
            PodCondition(STATE_CONDITION, "True", job.reason, state_message(record)),
            PodCondition(CONDITION, "False" if late else "True", job.reason, words),
        )

    def _count_rescale(self, current: float, target: float, ok: bool) -> None:
        self._rescales["up" if target > current else "down", "ok" if ok else "failed"] += 1

    # ----- pod end and metrics
    def _prune_gangs(self, now: float) -> None:
        """Forget gangs gone from the job book for a while."""
        if not self._gangs_seen and not self._judged:
            return
        live = {job.key for job in self.handle.jobs}
        for key in [k for k, when in self._gangs_seen.items() if k[0] not in live and now - when > GANG_MEMORY_S]:
            del self._gangs_seen[key]
        for key in [k for k, j in self._judged.items() if k[0] not in live and now - j.when > GANG_MEMORY_S]:
            del self._judged[key]

    def forget(self, pod: PodInfo) -> None:
        """Deleted (pending or bound)."""
        self._planned.pop(pod.key, None)
        self._jobs.pop(pod.key, None)
        self._slack.pop(pod.key, None)
        self._review_at.pop(pod.key, None)
        self.predictor.forget(pod.key)

    def ended(self, pod: PodInfo) -> None:
        """A deadline job ended: met if it Succeeded by its deadline, else missed. A gang is
        judged once, by the first member to end (members end one by one, and rank 0 need not be
        first); its other members carry the same verdict. A batch Job that runs in waves is
        judged by its last pod to end, once it completed. A standby judges nothing."""
        self._jobs.pop(pod.key, None)
        self._slack.pop(pod.key, None)
        self._review_at.pop(pod.key, None)
        self.predictor.forget(pod.key)
        if self.handle.pod_lifecycle.leading:
            self._judge_or_wait(pod)

    def _judge_or_wait(self, pod: PodInfo) -> None:
        """Judge the job of an ended pod, unless the pod failed and its batch Job may replace it
        (its backoff limit): the job ends when the pod that replaces it ends, or with this one
        when the Job gives up or the deadline passes with none of its pods left."""
        ref = job_of(pod)
        if (
            pod.phase == "Failed"
            and ref is not None
            and ref.source is JobSource.BATCH
            and self._gang_run(pod) is None
            and not self.handle.cluster.job_failed(ref)
        ):
            self._retrying[ref.key] = pod
            return
        if ref is not None:
            self._retrying.pop(ref.key, None)  # the job ended with this pod
            cluster = self.handle.cluster
            if ref.source is JobSource.BATCH and cluster.job_completions_left(ref) and not cluster.job_failed(ref):
                # A Job of several waves ends with its last completion (the Job's status may not
                # count this pod yet): judged then, once, by the last of its pods to end.
                self._waves[ref.key] = pod
                return
            self._waves.pop(ref.key, None)
        self._judge(pod)

    def _settle_waves(self) -> None:
        """Jobs of several waves: judged once their owner says every completion is made, or gave
        up, or is gone."""
        for key, last in list(self._waves.items()):
            ref = job_of(last)
            if ref is None or not self.handle.cluster.job_completions_left(ref) or self.handle.cluster.job_failed(ref):
                del self._waves[key]
                self._judge(last)

    def _settle_retries(self, now: float) -> None:
        """Failed pods of batch Jobs: forgotten once the Job made another pod (whose end is the
        job's), judged once the Job gave up or the deadline passed with none."""
        for key, failed in list(self._retrying.items()):
            job = self.handle.jobs.get(key)
            ref, deadline = job_of(failed), deadline_of(failed)
            if job is not None and job.members:
                del self._retrying[key]
            elif (ref is not None and self.handle.cluster.job_failed(ref)) or deadline is None or now > deadline:
                del self._retrying[key]
                self._judge(failed)

    def taken_over(self, ended: Sequence[PodInfo]) -> None:
        """A new leader: the verdicts its predecessors wrote count again, and a job that ended
        while no one led is judged now, from when the kubelet says it finished."""
        unjudged: list[PodInfo] = []
        for pod in ended:
            record = saved_job(pod)
            if record is None or record.verdict is None:
                unjudged.append(pod)
                continue
            if record.counted:
                self._deadlines[record.verdict] += 1
            run = self._gang_run(pod)
            if run is not None and record.ended_at is not None:
                self._gangs_seen[run] = self.handle.clock.now()
                met = record.verdict == "met"
                self._judged.setdefault(run, Judged(self.handle.clock.now(), met, record.ended_at, met))
        # In the order they ended: a gang's first member to end judges the job.
        for pod in sorted(unjudged, key=lambda p: finished_at(p) or self.handle.clock.now()):
            run = self._gang_run(pod)
            if run is not None:
                self._gangs_seen.setdefault(run, self.handle.clock.now())
            self._judge_or_wait(pod)

    def _gang_run(self, pod: PodInfo) -> GangIncarnation | None:
        """The run of the gang an ended pod was a member of (None: a job of one pod at a time),
        from what the pod and the backend say of its minimum."""
        ref = job_of(pod)
        if ref is None or (ref.min_members or self.handle.cluster.job_minimum(ref) or 1) <= 1:
            return None
        return incarnation(pod, ref.key)

    def _judge(self, pod: PodInfo) -> None:
        deadline = deadline_of(pod)
        if deadline is None or not namespace_selected(
            self.handle.cluster, self.args.deadline_namespaces, pod.namespace
        ):
            return  # no deadline job (its namespace's deadlines are ignored: it ran as best-effort)
        now = self.handle.clock.now()
        ref = job_of(pod)
        run = incarnation(pod, ref.key) if ref is not None else None
        verdict = self._judged.get(run) if run is not None else None
        if verdict is not None and _resubmitted(pod, verdict):
            verdict = None
        counted = verdict is None
        if verdict is None:
            ended_at = finished_at(pod) or now
            succeeded = pod.phase == "Succeeded"
            verdict = Judged(now, succeeded and ended_at <= deadline, ended_at, succeeded)
            self._deadlines["met" if verdict.met else "missed"] += 1
            # A gang no reconcile saw yet (a new leader's, ended before its first) is one by its keys.
            if run is not None and (run in self._gangs_seen or self._gang_run(pod) is not None):
                self._judged[run] = verdict
        self.handle.tasks.spawn(self._write_verdict(pod, deadline, verdict, counted))

    async def _write_verdict(self, pod: PodInfo, deadline: float, verdict: Judged, counted: bool) -> None:
        """The final conditions and an event: the verdict outlives this leader and the events."""
        reason = MET_REASON if verdict.met else MISSED_REASON
        now = self.handle.clock.now()
        words = verdict_words(verdict.met, verdict.ended_at, deadline, verdict.succeeded, now)
        saved = saved_job(pod)
        record = JobRecord(
            reason,
            "met" if verdict.met else "missed",
            deadline,
            cpus=saved.cpus if saved is not None else None,
            last_rescale=saved.last_rescale if saved is not None else -math.inf,
            counts=saved.counts if saved is not None else (),
            verdict="met" if verdict.met else "missed",
            ended_at=verdict.ended_at,
            counted=counted,
        )
        await self.handle.cluster.patch_pod_conditions(
            pod,
            PodCondition(STATE_CONDITION, "True", reason, state_message(record)),
            PodCondition(CONDITION, "True" if verdict.met else "False", reason, words),
        )
        await self.handle.cluster.emit_event(pod, "Normal" if verdict.met else "Warning", reason, words)

    def _slack_state(self, key: PodKey, seconds: float) -> str:
        """One of SLACK_STATES."""
        job = self._jobs.get(key)
        if job is not None and job.reason == DEMOTED_REASON:
            return INFEASIBLE
        return AT_RISK if seconds < 0 else ON_TRACK

    def metric_families(self) -> list[MetricFamily]:
        rescales: dict[tuple[str, ...], float] = {(d, r): 0.0 for d in ("up", "down") for r in ("ok", "failed")}
        rescales.update({key: float(n) for key, n in self._rescales.items()})
        deadlines: dict[tuple[str, ...], float] = {("met",): 0.0, ("missed",): 0.0}
        deadlines.update({(key,): float(n) for key, n in self._deadlines.items()})
        states = {key: self._slack_state(key, seconds) for key, seconds in self._slack.items()}
        jobs: dict[tuple[str, ...], float] = {(state,): 0.0 for state in SLACK_STATES}
        for state in states.values():
            jobs[(state,)] += 1.0
        tightest = heapq.nsmallest(self.args.slack_series_limit, self._slack.items(), key=lambda kv: kv[1])
        slack = {(*key.split("/", 1), states[key]): max(-MAX_SLACK_S, min(MAX_SLACK_S, seconds))
                 for key, seconds in tightest}  # fmt: skip
        return [
            MetricFamily(
                "pysched_autoscale_deadline_jobs",
                "Running deadline jobs, by state: on_track, at_risk (predicted late) or infeasible (demoted).",
                "gauge",
                ("state",),
                jobs,
            ),
            MetricFamily(
                "pysched_autoscale_predicted_slack_seconds",
                "Deadline minus predicted finish at the current CPUs, per running deadline job (as of its last look or "
                "rescale), within 30 days either way; state: on_track, at_risk (negative) or infeasible (demoted). "
                "Only the tightest slackSeriesLimit jobs.",
                "gauge",
                ("namespace", "pod", "state"),
                slack,
            ),
            MetricFamily(
                "pysched_autoscale_rescales",
                "In-place CPU resizes requested by the autoscaler, by direction and result.",
                "counter",
                ("direction", "result"),
                rescales,
            ),
            MetricFamily(
                "pysched_deadlines",
                "Deadline jobs that ended, by whether they met their deadline.",
                "counter",
                ("result",),
                deadlines,
            ),
        ]


def _wants_more(tick: Tick, choice: Choice | None) -> bool:
    return choice is not None and choice.cpus is not None and choice.cpus > tick.current


def _pod_level_cpu(pod: PodInfo) -> bool:
    """The pod states pod-level CPU resources (`spec.resources`): its containers' requests must
    stay within them, so a container resize alone is refused by the API."""
    resources = pod.raw.get("spec", {}).get("resources")
    if not isinstance(resources, Mapping):
        return False
    parts = (resources.get("requests"), resources.get("limits"))
    return any(isinstance(part, Mapping) and CPU in part for part in parts)
