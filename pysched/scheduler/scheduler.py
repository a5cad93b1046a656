"""The scheduler loop: one synchronous scheduling cycle per pod, binding cycles in parallel.

It is the same object whatever the backend: the simulator calls `run_until_idle` between
virtual-time steps, the live process calls `run` (one scheduler, two backends).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec

import structlog

from pysched.api.disruption import nominated_node
from pysched.api.ids import JobKey, NodeName, PodUID, pod_key
from pysched.api.limits import truncate_note
from pysched.api.objects import NodeInfo, PodInfo
from pysched.api.times import parse_rfc3339
from pysched.api.volumes import Storage
from pysched.framework.clock import Clock
from pysched.framework.cluster import FAILED_SCHEDULING, ClusterBackend, PodCondition
from pysched.framework.config import ConfigError, SchedulerConfig
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import ClusterEvent, EventKind, QueueingHint
from pysched.framework.incidents import REASON as INCIDENT_REASON
from pysched.framework.incidents import Incidents
from pysched.framework.interfaces import (
    MIN_RECONCILE_INTERVAL_S,
    Diagnosis,
    Handle,
    QueuedPod,
    QueuePickPlugin,
    ReconcilePlugin,
)
from pysched.framework.jobs import JobBook
from pysched.framework.lifecycle import PodLifecycle
from pysched.framework.preemption import PreemptionSupport
from pysched.framework.registry import Registry
from pysched.framework.resizes import ResizeLog
from pysched.framework.status import SUCCESS, Code, Status
from pysched.framework.tasks import BackgroundTasks
from pysched.framework.waiting import WaitingPods
from pysched.scheduler.algorithm import SchedulingAlgorithm
from pysched.scheduler.binding import BindPipeline
from pysched.scheduler.cache import Cache
from pysched.scheduler.nominator import Nominator
from pysched.scheduler.observer import NullObserver, SchedulingObserver
from pysched.scheduler.queue import DEFAULT_TIMINGS, QueueTimings, SchedulingQueue
from pysched.scheduler.runtime import ActingPlugins, Framework

log = structlog.get_logger("pysched.scheduler.scheduler")

_P = ParamSpec("_P")
_RESERVING = "pysched/reserving"  # CycleState key: the node Reserve ran for
PARKED_UNTIL = "it is parked until it changes or for the unschedulable timeout"


def _contained(
    stage: str,
) -> Callable[[Callable[Concatenate[Scheduler, _P], None]], Callable[Concatenate[Scheduler, _P], None]]:
    """An informer handler whose bug is reported against the object it was handed, so one pod's
    update cannot stop the informer's stream for everyone else."""

    def wrap(handler: Callable[Concatenate[Scheduler, _P], None]) -> Callable[Concatenate[Scheduler, _P], None]:
        def guarded(self: Scheduler, /, *args: _P.args, **kwargs: _P.kwargs) -> None:
            try:
                handler(self, *args, **kwargs)
            except Exception as err:
                pod = next((a for a in reversed(args) if isinstance(a, PodInfo)), None)
                self.incidents.report(stage, pod, err)

        guarded.__name__, guarded.__doc__ = handler.__name__, handler.__doc__
        return guarded

    return wrap


@dataclass(slots=True)
class SchedulerStats:
    scheduled: int = 0
    unschedulable: int = 0
    errors: int = 0
    bind_failures: int = 0
    cycle_seconds: list[float] = field(default_factory=list)


@dataclass(slots=True)
class _Reconciler:
    """A profile's reconcile plugin, its interval and when it next runs."""

    framework: Framework
    plugin: ReconcilePlugin
    interval: float
    due: float


# How long a stopping scheduler lets its binding cycles finish: an API bind takes milliseconds;
# what takes longer is a PreBind waiting for volumes (up to its bindTimeoutSeconds), which a new
# leader takes over from the claims' state.
STOP_GRACE_S = 5.0


@dataclass(slots=True)
class _BindJob:
    framework: Framework
    state: CycleState
    queued: QueuedPod
    node: NodeName
    acting: ActingPlugins  # what acts on the pod after the node choice, looked up once
    started: float = 0.0  # timer() at the start of the scheduling cycle (attempt duration)
    # nominatedNodeName written for it (held at Permit, or a PreBind that takes time): cleared
    # again if the pod does not bind, as kube-scheduler's failure handler does.
    nominated: bool = False


def _shrank(old: PodInfo, new: PodInfo) -> bool:
    if old.requests is new.requests:  # most updates (a progress report) share the requests
        return False
    return any(new.requests.get(name, 0) < value for name, value in old.requests.items())


def _told(stage: str, status: Status) -> Status:
    """A failure at `stage` ("Reserve plugin", "Permit plugin", "PreBind plugin", ...) as
    kube-scheduler words it: a Reserve or Permit rejection as a fit error over the one node the
    pod was meant for, a later rejection in its plugin's words, an error of a plugin as
    `running <stage> "<plugin>": ...`."""
    if status.rejected:
        return _on_its_node(status) if stage in ("Reserve plugin", "Permit plugin") else status
    if status.plugin:
        return Status(status.code, (f'running {stage} "{status.plugin}": {status.message()}',), status.plugin)
    return status


def _on_its_node(status: Status) -> Status:
    """A rejection of the pod on the one node it was meant for, as kube's fit error words it
    (`0/1 nodes are available: 1 <reason>.`)."""
    reasons = collections.Counter(status.reasons)
    unresolvable = status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    words = Diagnosis(1, reasons, frozenset({status.plugin}), unresolvable).message()
    return Status(status.code, (words,), status.plugin)


def _created_or_zero(value: object) -> float:
    return (parse_rfc3339(value) if isinstance(value, str) else None) or 0.0


class Scheduler:
    def __init__(
        self,
        config: SchedulerConfig,
        backend: ClusterBackend,
        clock: Clock,
        registry: Registry,
        *,
        max_binds_in_flight: int = 64,
        timings: QueueTimings = DEFAULT_TIMINGS,
        timer: Callable[[], float] = time.perf_counter,
        record_cycle_times: bool = False,
        observer: SchedulingObserver | None = None,
        stop_grace: float = STOP_GRACE_S,
        log_decisions: bool = False,
        standby: bool = False,
    ) -> None:
        self.config = config
        # One log line per scheduling cycle (debug) and per Permit verdict (info): what `pysched
        # run` logs; off for the simulator and for embedders, whose structlog may print every level.
        self._log_decisions = log_decisions
        self.backend = backend
        self.clock = clock
        self.cache = Cache()
        self.jobs = JobBook(self.cache.placed, backend.job_minimum)
        self.resizes = ResizeLog()
        self.jobs.on_minimum_changed(self._job_minimum_restated)
        self.waiting_pods = WaitingPods()
        self.incidents = Incidents()
        self.incidents.install(self._notify_incident)
        self._side_tasks = BackgroundTasks()  # events and conditions, never awaited by a cycle
        self.frameworks = {
            profile.scheduler_name: Framework(
                profile,
                registry,
                Handle(
                    backend,
                    clock,
                    self.cache.nodes,
                    self.waiting_pods,
                    # A standby (`pysched run` until `take_over`) gives no verdicts.
                    PodLifecycle(leading=not standby),
                    self.incidents,
                    self.cache.placed,
                    PreemptionSupport(),
                    self._side_tasks,
                    jobs=self.jobs,
                    resizes=self.resizes,
                    profile=profile.scheduler_name,
                ),
            )
            for profile in config.profiles
        }
        self.nominator = Nominator(self.cache, self._algorithm_of)
        # Bound once: the configured logger, whose disabled levels are no-op methods (a lazy
        # proxy would look its configuration up on every call of the hot path).
        self._log = log.bind()
        self._nominations = self.nominator.holding
        for framework in self.frameworks.values():
            framework.handle.preemption.install(self.nominator)
            framework.algorithm.nominations = self.nominator
        sorts = {f.profile.queue_sort for f in self.frameworks.values()}
        if len(sorts) != 1:
            # One queue for every profile: it cannot be ordered two ways (kube-scheduler's rule).
            raise ConfigError(
                config.source, "profiles", f"profiles run together must share one queueSort plugin, got {sorted(sorts)}"
            )
        self._sorting = next(iter(self.frameworks.values()))  # whose QueueSort orders the queue
        queue_sort = self._sorting.queue_sort
        self.queue = SchedulingQueue(
            clock,
            self.jobs.sort_key(queue_sort.sort_key),
            self._pre_enqueue,
            self._hint,
            timings,
            self._queue_contained,
            self._interest,
            queue_sort if isinstance(queue_sort, QueuePickPlugin) else None,
            functools.partial(self._still_rejected, at_retry=True),
            dormant=standby,
        )
        for framework in self.frameworks.values():
            framework.handle.activator.install(self.queue.activate)
        self.stats = SchedulerStats()
        self._timer = timer
        self._record = record_cycle_times
        self.observer: SchedulingObserver = observer or NullObserver()
        for framework in self.frameworks.values():
            framework.algorithm.timed = self.observer.extension_points
            framework.algorithm.plugin_timed = self.observer.plugin_executions
        self._binds: BindPipeline[_BindJob] = BindPipeline(self._run_binding_cycle, max_binds_in_flight)
        self._stopping = False
        self._stop_grace = stop_grace
        # Each reconcile plugin at its own interval, clamped so that a plugin outside pysched
        # cannot make the clock stand still (args are checked), and when it is next due.
        self._reconcilers = [
            _Reconciler(f, p, max(p.reconcile_interval, MIN_RECONCILE_INTERVAL_S), clock.now())
            for f in self.frameworks.values()
            for p in f.reconcile
        ]
        for reconciler in self._reconcilers:
            reconciler.due += reconciler.interval
        self.last_tick = clock.now()  # the live loop's heartbeat (liveness)

    # ----- wiring
    async def start(self) -> None:
        self._binds.start()
        await self.backend.start(self)

    def take_over(self, ended: Sequence[PodInfo]) -> None:
        """This replica leads from now: each profile is told of its pods in `ended` (bound pods
        that ended while no replica led, or before, as the backend listed them once)."""
        for name, framework in self.frameworks.items():
            framework.handle.pod_lifecycle.taken_over([p for p in ended if p.scheduler_name == name])
        self.queue.wake()  # what PreEnqueue plugins tell of pending pods goes out from now

    async def stop(self) -> None:
        """Give back the room of pods waiting at Permit (quietly: the next leader schedules them),
        finish in-flight binds (cancelling, after `stop_grace` seconds, a PreBind that still waits, as
        kube-scheduler's cancelled context does), then stop the workers."""
        self._stopping = True
        for waiting in self.waiting_pods:
            waiting.reject("", "the scheduler is stopping")
        await self._binds.stop(self._stop_grace)
        await self._side_tasks.join()

    def _algorithm_of(self, scheduler_name: str) -> SchedulingAlgorithm | None:
        framework = self.frameworks.get(scheduler_name)
        return None if framework is None else framework.algorithm

    def _observe_nomination(self, old: PodInfo | None, new: PodInfo) -> None:
        """A pending pod's `status.nominatedNodeName` as the API has it (a nomination made by an
        earlier leader, or cleared by someone): the nominator follows it."""
        node = nominated_node(new)
        if node is not None:
            if self.nominator.nominated(new.key) is None:
                self.nominator.nominate(new, NodeName(node))
        elif old is not None and nominated_node(old) is not None:
            self.nominator.drop(new.key)

    def _ours(self, pod: PodInfo) -> bool:
        return pod.scheduler_name in self.frameworks

    def _pre_enqueue(self, pod: PodInfo) -> Status:
        return self.frameworks[pod.scheduler_name].run_pre_enqueue(pod)

    def _hint(self, queued: QueuedPod, event: ClusterEvent) -> QueueingHint:
        framework = self.frameworks.get(queued.pod.scheduler_name)
        if framework is None:
            return QueueingHint.SKIP
        return framework.requeue_hint(queued.pod, queued.unschedulable_plugins, event)

    def _still_rejected(self, queued: QueuedPod, at_retry: bool = False) -> bool:
        framework = self.frameworks.get(queued.pod.scheduler_name)
        try:
            return framework is not None and framework.still_rejected(
                queued.pod, queued.unschedulable_plugins, at_retry
            )
        except Exception as err:  # a plugin's bug: retry the pod as any other, with a whole cycle
            self.incidents.report("still_rejects", queued.pod, err, then="it is retried as any other")
            queued.retried = True
            return False

    def _interest(self, queued: QueuedPod) -> frozenset[EventKind] | None:
        framework = self.frameworks.get(queued.pod.scheduler_name)
        if framework is None:
            return frozenset()
        try:
            return framework.requeue_kinds(queued.unschedulable_plugins)
        except Exception as err:  # a plugin's events_to_register raised: any event may help then
            self.incidents.report("QueueingHint", queued.pod, err)
            return None

    # ----- contained bugs
    def _notify_incident(self, pod: PodInfo, message: str) -> None:
        if pod.node_name is not None:  # running (a reconcile's bug): its scheduling did not fail
            self._side_tasks.spawn(self.backend.emit_event(pod, "Warning", INCIDENT_REASON, truncate_note(message)))
            return
        self._side_tasks.spawn(self._report_failure(pod, INCIDENT_REASON, message))

    def _queue_contained(self, queued: QueuedPod, stage: str, err: Exception) -> None:
        then = "the pod is scheduled in the queue's own order" if stage == "QueuePick" else PARKED_UNTIL
        self.incidents.report(stage, queued.pod, err, then=then)

    # ----- ClusterListener: the informer stream
    @_contained("NodeAdd")
    def on_node_added(self, node: NodeInfo) -> None:
        self.cache.add_node(node)
        self.queue.on_event(ClusterEvent(EventKind.NODE_ADD, None, node))

    @_contained("NodeUpdate")
    def on_node_updated(self, old: NodeInfo, new: NodeInfo) -> None:
        self.cache.update_node(new)
        self.queue.on_event(ClusterEvent(EventKind.NODE_UPDATE, old, new))

    @_contained("NodeDelete")
    def on_node_deleted(self, node: NodeInfo) -> None:
        # A pod held at Permit on it could only be bound to a node that is gone: it gives its
        # room back and is tried again, rather than wait out its Permit timeout.
        for waiting in [w for w in self.waiting_pods if w.node == node.name]:
            waiting.reject("", f"node {node.name} was deleted while the pod waited at permit")
        self.cache.remove_node(node)
        self.queue.on_event(ClusterEvent(EventKind.NODE_DELETE, node, None))

    @_contained("PodAdd")
    def on_pod_added(self, pod: PodInfo) -> None:
        job = None
        if self._ours(pod):
            job = self.jobs.observe(pod)  # before the cache tells it of placements
        else:
            self.jobs.observe_elsewhere(pod)
        if pod.node_name is not None:
            self.cache.add_pod(pod)
            self.queue.delete(pod.key)
            if not pod.terminated:
                self.queue.on_event(ClusterEvent(EventKind.ASSIGNED_POD_ADD, None, pod))
        elif self._ours(pod) and not pod.deleting and not pod.terminated and not self._bound_unseen(pod):
            self.queue.add(pod)
            self._observe_nomination(None, pod)
            if job is not None and job.is_gang:  # its siblings may have waited for it
                self.queue.on_event(ClusterEvent(EventKind.UNSCHEDULED_POD_ADD, None, pod))

    @_contained("PodUpdate")
    def on_pod_updated(self, old: PodInfo, new: PodInfo) -> None:
        ours = new.scheduler_name in self.frameworks
        if ours:
            self.jobs.observe(new, old)
        else:
            self.jobs.observe_elsewhere(new, old)
        if new.node_name is None:
            if self._bound_unseen(new):
                return  # our bind went through; the informer has not seen it yet
            if ours and not new.deleting and not new.terminated:
                self.queue.update(new)
                self._observe_nomination(old, new)
                return
            self.nominator.drop(new.key)
            if new.key in self.queue:
                self.queue.delete(new.key)
                self._release_waiting(new, "the pod is being deleted")
            return
        if new.key in self._nominations:
            self.nominator.drop(new.key)
        if old.node_name is not None:
            self.resizes.observe(old, new, self.clock.now())
        self.cache.update_pod(new)
        # Bound (by us or by anyone else): it leaves the queue, even mid-binding-cycle.
        self.queue.delete(new.key)
        self._release_waiting(new, f"the pod was bound to {new.node_name} while waiting at permit")
        if new.terminated and not old.terminated:
            self.queue.on_event(ClusterEvent(EventKind.POD_DELETE, old, new))
            self._pod_terminated(new)
        elif old.node_name is None:
            self.queue.on_event(ClusterEvent(EventKind.ASSIGNED_POD_ADD, old, new))
        else:
            if _shrank(old, new):
                self.queue.on_event(ClusterEvent(EventKind.POD_RESIZE_DOWN, old, new))
            if old.labels != new.labels:
                self.queue.on_event(ClusterEvent(EventKind.ASSIGNED_POD_UPDATE, old, new))

    def _bound_unseen(self, pod: PodInfo) -> bool:
        """Assumed and already handed out of the queue: its bind was sent, and a pending update
        (a condition, a label) raced ahead of the informer's view of the binding. Queueing it
        again would schedule the same pod twice, as kube-scheduler's assumed-pod check prevents."""
        return pod.key not in self.queue and self.cache.is_assumed(pod.key, pod.uid)

    def _pod_terminated(self, pod: PodInfo) -> None:
        framework = self.frameworks.get(pod.scheduler_name)
        if framework is not None:
            framework.handle.pod_lifecycle.terminated(pod)
            self._sorted_gone(framework, pod)

    def _sorted_gone(self, framework: Framework, pod: PodInfo) -> None:
        """The queue's order is the first profile's QueueSort: tell it of another profile's pod."""
        if framework is not self._sorting:
            self._sorting.handle.pod_lifecycle.sorted_gone(pod)

    @_contained("PodDelete")
    def on_pod_deleted(self, pod: PodInfo) -> None:
        self.jobs.forget(pod)
        self.resizes.forget(pod)
        held = self.nominator.nominated(pod.key)
        self.nominator.drop(pod.key)
        placed = self.cache.pod_node(pod.key) is not None
        self.cache.remove_pod(pod)  # also one bound to a node that is gone: it must not count if the node returns
        if placed and pod.node_name is not None:
            self.queue.on_event(ClusterEvent(EventKind.POD_DELETE, pod, None))
        elif held is not None:
            # Room its nomination held is free: the pods it kept out may fit (kube-scheduler
            # sends an assigned pod's deletion for a deleted pod that had a nominated node).
            self.queue.on_event(ClusterEvent(EventKind.POD_DELETE, pod.evolve(node_name=held), None))
        self.queue.delete(pod.key)
        self._release_waiting(pod, "the pod was deleted while waiting at permit")
        framework = self.frameworks.get(pod.scheduler_name)
        if framework is not None:
            framework.handle.pod_lifecycle.deleted(pod)
            self._sorted_gone(framework, pod)

    @_contained("StorageChange")
    def on_storage_changed(self, kind: EventKind, old: Storage | None, new: Storage | None) -> None:
        self.queue.on_event(ClusterEvent(kind, old, new))

    @_contained("JobMinimumChange")
    def on_job_minimum_changed(self, job: JobKey) -> None:
        if self.jobs.minimum_changed(job) is not None:
            self.queue.on_event(ClusterEvent(EventKind.JOB_MINIMUM_CHANGE))

    def _job_minimum_restated(self, job: JobKey) -> None:
        """A job's pods now state another minimum (the pod speaking for it changed it, or left)."""
        self.queue.on_event(ClusterEvent(EventKind.JOB_MINIMUM_CHANGE))

    @_contained("InvalidPod")
    def on_invalid_pod(self, raw: Mapping[str, object], problem: str) -> None:
        meta: Any = raw.get("metadata") or {}
        log.warning("invalid pod", pod=f"{meta.get('namespace')}/{meta.get('name')}", problem=problem)
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        stub = PodInfo(
            key=pod_key(namespace, name),
            uid=PodUID(str(meta.get("uid") or "")),
            namespace=namespace,
            name=name,
            scheduler_name="",
            priority=0,
            created=_created_or_zero(meta.get("creationTimestamp")),  # the stub of a pod that may lack a readable one
            requests={},
            raw=raw,
        )
        self._side_tasks.spawn(
            self.backend.emit_event(stub, "Warning", FAILED_SCHEDULING, f"pod cannot be scheduled: {problem}")
        )

    # ----- scheduling cycle
    def schedule_one(self) -> bool:
        """Run one scheduling cycle; False when no pod was ready. A bug in the cycle is the
        last-resort guard's: the pod is parked with an event, the assumption undone, and the loop
        goes on with the next pod."""
        queued = self.queue.pop()
        if queued is None:
            return False
        framework = self.frameworks[queued.pod.scheduler_name]
        key = queued.pod.key
        retried, queued.retried = queued.retried, False
        started = self._timer()
        if (
            queued.unschedulable_plugins
            and not retried
            and key not in self._nominations
            and not self.waiting_pods
            and self.jobs.gang_of(key) is None
            and self._still_rejected(queued)
        ):
            # Let out by an event (room came back, then went to a pod ahead of it) or by the
            # periodic retry, but every plugin that refused it would again: refused as a failed
            # cycle would refuse it, without the cycle, its diagnosis and a repeated
            # FailedScheduling (the retry brings its reasons up to date once they are an hour
            # old). A failed cycle's PostFilter acts by preemption (the checks rule it out) or on
            # pods held at Permit (a gang's): with none held it would change nothing else. A gang's members still go
            # through the cycle: they tie in the queue, and the FailedScheduling it writes re-sorts
            # them, which decides the order its members are placed in.
            self.queue.requeue_unschedulable(queued, queued.unschedulable_plugins)
            self.observer.attempt(queued.pod.scheduler_name, "unschedulable", self._timer() - started)
            if self._log_decisions:
                self._log.debug("still refused", pod=key, by=sorted(queued.unschedulable_plugins))
            return True
        state = CycleState()
        if key in self._nominations:
            self.nominator.release_for_cycle(key)  # its own held room is free to it
        lifted = self.nominator.lift_below(queued.pod) if self._nominations else ()
        try:
            self._scheduling_cycle(framework, state, queued, started)
        except Exception as err:
            self._cycle_crashed(framework, state, queued, err)
        if key in self._nominations:  # kept, or made by this cycle's preemption
            self.nominator.hold_after_failure(key)
        if lifted:
            self.nominator.put_back_lifted(lifted)
        return True

    def _cycle_crashed(self, framework: Framework, state: CycleState, queued: QueuedPod, err: Exception) -> None:
        pod = queued.pod
        node = state.read(_RESERVING, str)
        if node is not None and self.waiting_pods.get(pod.key) is None:
            try:
                framework.run_unreserve(state, pod, NodeName(node))
            except Exception as unreserve_err:  # keep undoing: the room must come back
                self.incidents.report("Unreserve", pod, unreserve_err)
            if self.cache.is_assumed(pod.key):
                self.cache.forget(pod)
        self.observer.attempt(pod.scheduler_name, "error", 0.0)
        self.queue.park(queued)
        self.incidents.report("scheduling cycle", pod, err, then=PARKED_UNTIL)

    def _scheduling_cycle(self, framework: Framework, state: CycleState, queued: QueuedPod, started: float) -> None:
        """`started`: when the pod was popped (the attempt's duration runs from there)."""
        pod = queued.pod
        result = framework.find_node(state, pod)
        if result.node is None:
            self._fail(queued, result.status, result.diagnosis.rejectors if result.diagnosis else frozenset(), started)
            return
        node = result.node
        if pod.key in self._nominations:
            self.nominator.drop(pod.key)
        state.write(_RESERVING, node)  # from here a crash must unreserve
        acting = framework.acting(pod.features)
        if acting.reserve:
            status = framework.run_reserve(state, pod, node, acting)
            if not status.ok:
                self._clear_nomination(pod)
                self._fail(queued, _told("Reserve plugin", status), frozenset({status.plugin}), started)
                return
        else:
            state.reserved = ()  # none to undo
        self.cache.assume(pod, node, result.request)
        waits = None
        if acting.permit:
            status, waits = framework.run_permit(state, pod, node, acting)
            if status.rejected or status.code is Code.ERROR:
                framework.run_unreserve(state, pod, node)
                self.cache.forget(pod)
                self._clear_nomination(pod)
                self._fail(queued, _told("Permit plugin", status), frozenset({status.plugin}), started)
                return
        if self._record:
            self.stats.cycle_seconds.append(self._timer() - started)
        if self._log_decisions:
            outcome = "waits" if waits else "assumed"
            self._log.debug("scheduling cycle", pod=pod.key, profile=framework.name, node=node, result=outcome)
        job = _BindJob(framework, state, queued, node, acting, started)
        if waits:
            # Held, assumed, until its plugins allow it; no bind worker waits for it meanwhile.
            # Others (a cluster autoscaler, a new leader) learn where it goes from its nomination.
            job.nominated = True
            self._side_tasks.spawn(self._nominate(pod, node))
            self.waiting_pods.hold(pod, node, waits, self.clock.now(), lambda _, status: self._permitted(job, status))
        else:
            self._binds.submit(job)

    def _permitted(self, job: _BindJob, status: Status) -> None:
        pod = job.queued.pod
        if self._log_decisions and status.ok:
            self._log.info("allowed at permit", pod=pod.key, node=job.node, job=self._job_key(pod))
        elif self._log_decisions:
            self._log.info("rejected at permit", pod=pod.key, job=self._job_key(pod), why=status.message())
        if status.ok:
            self._binds.submit(job)
        elif self._stopping or job.queued.pod.key not in self.queue:
            self._release(job)  # gone, bound elsewhere, or we stop: nothing to retry or to report
        elif status.rejected:
            # A Permit plugin's rejection (a gang released, a wait timed out): unschedulable for
            # now, as kube-scheduler has it, not a failed bind.
            self._release(job)
            rejectors = frozenset({status.plugin} if status.plugin else ())
            self._fail(job.queued, _told("Permit plugin", status), rejectors, job.started)
        else:
            self._undo(job, status)

    def _job_key(self, pod: PodInfo) -> str | None:
        job = self.jobs.of(pod.key)
        return None if job is None else str(job.key)

    def _release_waiting(self, pod: PodInfo, why: str) -> None:
        """The pod left the queue while a Permit plugin held it: give its room back (the queue no
        longer has it, so nothing is retried or reported)."""
        waiting = self.waiting_pods.get(pod.key)
        if waiting is not None and waiting.pod.uid == pod.uid:
            waiting.reject("", why)

    def _fail(self, queued: QueuedPod, status: Status, rejectors: frozenset[str], started: float | None = None) -> None:
        pod = queued.pod
        result = "error" if status.code is Code.ERROR else "unschedulable"
        elapsed = 0.0 if started is None else self._timer() - started
        self.observer.attempt(pod.scheduler_name, result, elapsed)
        if status.code is Code.ERROR:
            self.stats.errors += 1
            self.queue.requeue_backoff(queued)
            reason = "SchedulerError"
        else:
            self.stats.unschedulable += 1
            self.queue.requeue_unschedulable(queued, rejectors)
            reason = "Unschedulable"
        message = status.message()
        queued.diagnosed = self.clock.now()  # the reasons the pod shows are from now
        if self._log_decisions:
            self._log.debug("scheduling cycle", pod=pod.key, profile=pod.scheduler_name, result=result, why=message)
        self._side_tasks.spawn(self._report_failure(pod, reason, message))

    async def _report_failure(self, pod: PodInfo, reason: str, message: str) -> None:
        await self.backend.emit_event(pod, "Warning", FAILED_SCHEDULING, truncate_note(message))
        await self.backend.patch_pod_conditions(pod, PodCondition("PodScheduled", "False", reason, message))

    # ----- binding cycle
    async def _run_binding_cycle(self, job: _BindJob) -> None:
        try:
            await self._binding_cycle(job)
        except Exception as err:  # a bug in a plugin or backend must not stop the binders
            self.incidents.report("binding cycle", job.queued.pod, err, then="it is retried after a backoff")
            self._undo(job, Status(Code.ERROR, ("internal error while binding",)))

    async def _binding_cycle(self, job: _BindJob) -> None:
        framework, state, pod, node, acting = job.framework, job.state, job.queued.pod, job.node, job.acting
        status = SUCCESS
        if acting.pre_flights:
            status = framework.run_pre_bind_pre_flights(state, pod, node, acting)
            if not status.ok:
                self._undo(job, status, "PreBindPreFlight")
                return
            if status.code is Code.SUCCESS and not job.nominated:
                # PreBind will take time (volumes to bind): say where the pod goes before it starts.
                job.nominated = True
                await self._nominate(pod, node)
        stage = "PreBind plugin"
        if acting.pre_bind:
            status = await framework.run_pre_bind(state, pod, node, acting)
        if status.ok:
            pod, status = self._reread(job, pod)
        if status.ok:
            stage = "Bind plugin"
            status = await framework.run_bind(state, pod, node)
        if not status.ok:
            self._undo(job, status, stage)
            return
        self.stats.scheduled += 1
        self.observer.attempt(pod.scheduler_name, "scheduled", self._timer() - job.started)
        self.observer.bound(job.queued, self.clock.now())
        self.queue.done(pod.key)
        framework.run_post_bind(state, pod, node)
        await self.backend.emit_event(
            pod, "Normal", "Scheduled", f"Successfully assigned {pod.namespace}/{pod.name} to {node}"
        )

    def _reread(self, job: _BindJob, pod: PodInfo) -> tuple[PodInfo, Status]:
        """The pod as the informer has it now, right before the bind: a resize during the
        binding cycle (preBind's own, or anyone's) must not bind stale requests. New requests
        that still fit the node are assumed there instead; otherwise the cycle fails and retries."""
        queued = self.queue.get(pod.key)
        latest = queued.pod if queued is not None else pod
        if latest is pod or latest.uid != pod.uid or latest.requests == pod.requests:
            return pod, SUCCESS
        job.queued.pod = latest  # a retry starts from what the pod asks for now
        if self.cache.reassume(latest):
            return latest, SUCCESS
        return latest, Status(Code.ERROR, (f"resized to requests that no longer fit node {job.node}",))

    def _undo(self, job: _BindJob, status: Status, stage: str = "") -> None:
        """A failed binding cycle: forget the assumption at once and retry after backoff. Told as
        kube-scheduler tells it (`_told`): a rejection with reason Unschedulable, an error with
        reason SchedulerError. No rejector is recorded either way (none ruled out a node), so both
        back off as errors do."""
        pod = job.queued.pod
        rejected = status.rejected
        self.stats.bind_failures += 1
        self.observer.attempt(pod.scheduler_name, "unschedulable" if rejected else "error", self._timer() - job.started)
        self._release(job)
        if not self._queued_still(pod):
            return  # bound elsewhere, deleted, or recreated under its name: nothing to retry or to report
        self.queue.requeue_backoff(job.queued)
        message = (_told(stage, status) if stage else status).message()
        reason = "Unschedulable" if rejected else "SchedulerError"
        self._side_tasks.spawn(self._report_failure(pod, reason, message))

    async def _nominate(self, pod: PodInfo, node: NodeName | None) -> None:
        """Write (or clear) the nomination of a pod on its way to `node`; a failure is logged and
        does not stop the binding, as in kube-scheduler."""
        status = await self.backend.set_nominated_node(pod, node)
        if not status.ok:
            log.debug("nomination not written", pod=pod.key, node=node, why=status.message())

    def _release(self, job: _BindJob) -> None:
        """Unreserve, forget the assumption at once, tell the queue its room is free again, and
        clear the pod's nomination (made for the binding, or by an earlier preemption)."""
        pod = job.queued.pod
        job.framework.run_unreserve(job.state, pod, job.node)
        self.cache.forget(pod)
        self.queue.on_event(ClusterEvent(EventKind.POD_DELETE, pod, None))
        written, job.nominated = job.nominated, False
        if self._queued_still(pod):  # else its nomination, if any, is another pod's
            self._clear_nomination(pod, written)

    def _queued_still(self, pod: PodInfo) -> bool:
        """The queue still has this very pod (not one recreated under its name since)."""
        queued = self.queue.get(pod.key)
        return queued is not None and queued.pod.uid == pod.uid

    def _clear_nomination(self, pod: PodInfo, written: bool = False) -> None:
        """A cycle or binding that failed past the filters clears the pod's nomination, as
        kube-scheduler's does: its nominatedNodeName (`written`: this scheduler wrote one since
        `pod` was read) would otherwise hold that room again at the pod's next update."""
        self.nominator.drop(pod.key)
        if (written or nominated_node(pod) is not None) and not self._stopping and pod.key in self.queue:
            self._side_tasks.spawn(self._nominate(pod, None))

    # ----- reconcile: plugins acting on running pods on a clock interval
    def next_reconcile(self) -> float | None:
        """When reconcile plugins next run; None when no profile has any."""
        return min((r.due for r in self._reconcilers), default=None)

    async def reconcile_if_due(self) -> None:
        now = self.clock.now()
        due = [r for r in self._reconcilers if now >= r.due]
        if not due:
            return
        running: dict[str, list[PodInfo]] = {}
        for pod in self.cache.bound_pods():
            running.setdefault(pod.scheduler_name, []).append(pod)
        for reconciler in due:
            reconciler.due = now + reconciler.interval
            plugin = reconciler.plugin
            try:
                await plugin.reconcile(running.get(reconciler.framework.name, []))
            except Exception as err:  # the plugin should contain it per pod; the loop goes on regardless
                self.incidents.report(f"{plugin.NAME} reconcile", None, err)

    def skip_reconciles_before(self, until: float) -> None:
        """Move each plugin's next reconcile to the last time of its grid at or before `until`:
        the simulator skips the reconciles of a stretch with no pod placed or pending."""
        for reconciler in self._reconcilers:
            if reconciler.due < until:
                reconciler.due += math.floor((until - reconciler.due) / reconciler.interval) * reconciler.interval

    def next_wakeup(self) -> float | None:
        """When the scheduler next has work without any new event: a backoff expiring, the
        unschedulable flush, a reconcile, or a Permit wait running out (the simulator moves its
        clock there)."""
        times = [
            t
            for t in (self.queue.next_wakeup(), self.next_reconcile(), self.waiting_pods.next_deadline())
            if t is not None
        ]
        return min(times, default=None)

    # ----- drivers
    async def run_until_idle(self) -> None:
        """Schedule every ready pod and let their binds finish (simulation and tests)."""
        await self.reconcile_if_due()
        self.waiting_pods.expire(self.clock.now())
        while True:
            while self.schedule_one():
                pass
            await self._binds.join()
            await self._side_tasks.join()
            if not self.queue.has_active():
                return

    async def run(self, stop: asyncio.Event, idle_poll: float = 1.0) -> None:
        """The live loop: schedule while there is work, otherwise wait for the queue."""
        while not stop.is_set():
            self.last_tick = self.clock.now()
            await self.reconcile_if_due()
            now = self.clock.now()
            self.waiting_pods.expire(now)
            if not self.schedule_one():
                deadline = self.waiting_pods.next_deadline()
                await self.queue.wait(idle_poll if deadline is None else max(0.0, min(idle_poll, deadline - now)))
            else:
                await asyncio.sleep(0)  # let binds and informer events in
