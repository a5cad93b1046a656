"""One small Protocol per extension point, as in kube-scheduler's framework.

A plugin implements the protocols of the points it serves; the framework checks at start-up
that every plugin a profile enables at a point implements that point's protocol.
Filters and scores take a batch signature: one pod against the node table.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from pysched.api.ids import NodeName
from pysched.api.objects import PodInfo
from pysched.framework.activation import PodActivator
from pysched.framework.clock import Clock
from pysched.framework.cluster import ClusterBackend
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import EventRegistration
from pysched.framework.gates import PodGates
from pysched.framework.incidents import Incidents
from pysched.framework.jobs import JobBook
from pysched.framework.lifecycle import PodLifecycle
from pysched.framework.nodetable import I64, Bools, NodeTable
from pysched.framework.placed import PlacedPods
from pysched.framework.preemption import PreemptionSupport
from pysched.framework.resizes import ResizeLog
from pysched.framework.status import Status
from pysched.framework.tasks import BackgroundTasks
from pysched.framework.waiting import WaitingPods


@dataclass(slots=True)
class QueuedPod:
    """A pod in the scheduling queue with its attempt history."""

    pod: PodInfo
    added: float  # first time it entered the queue
    # First time it passed PreEnqueue into the active queue (kube's InitialAttemptTimestamp, which
    # the scheduling SLI is measured from: a gated pod's wait is not scheduling latency).
    first_active: float = math.nan
    attempts: int = 0  # times popped
    backoff_until: float = 0.0
    # When it last came into the queue: added, or after a failed attempt (kube's queue
    # timestamp, which PrioritySort orders a priority by and a backoff runs from); `added` when
    # not given.
    timestamp: float = math.nan
    # Attempts refused by plugins, and failed by errors since the last refusal: kube backs off by
    # the errors while there are any, else by the refusals.
    refusals: int = 0
    errors_in_a_row: int = 0
    unschedulable_plugins: frozenset[str] = frozenset()
    gated_by: str = ""
    sort_key: tuple[Any, ...] = field(default=())
    # When its last whole cycle failed: the FailedScheduling reasons it shows are from then.
    diagnosed: float = -math.inf
    # Let out by the periodic retry with reasons that old: its next pop gets a whole cycle,
    # rejection checks or not, and its reasons are brought up to date.
    retried: bool = False

    def __post_init__(self) -> None:
        if math.isnan(self.timestamp):
            self.timestamp = self.added


@dataclass(frozen=True, slots=True)
class Handle:
    """What a profile's plugins may reach of the running scheduler (kube-scheduler's
    framework.Handle): the cluster, the clock, the node table, the pods waiting at Permit (shared
    by every profile), the profile's pod lifecycle notices, where a plugin reports a bug it
    contained to one pod (shared by every profile), the pods placed on nodes, what the engine
    lends a preempting PostFilter (dry runs, the nominator), where a plugin starts API work from
    synchronous code (the scheduler's side tasks, joined by its drivers), where a gated
    plugin says that the pods it acts on may have changed, the jobs pods belong to, where a
    plugin asks for pods it gated to be looked at again, and when bound pods' CPUs changed."""

    cluster: ClusterBackend
    clock: Clock
    nodes: NodeTable
    waiting_pods: WaitingPods = field(default_factory=WaitingPods)
    pod_lifecycle: PodLifecycle = field(default_factory=PodLifecycle)
    incidents: Incidents = field(default_factory=Incidents)
    pods: PlacedPods = field(default_factory=PlacedPods)
    preemption: PreemptionSupport = field(default_factory=PreemptionSupport)
    tasks: BackgroundTasks = field(default_factory=BackgroundTasks)
    gates: PodGates = field(default_factory=PodGates)
    # The scheduler's jobs (shared by every profile); a Handle made alone gets a book of its own.
    jobs: JobBook = field(default_factory=lambda: JobBook(PlacedPods(), lambda _: None))
    activator: PodActivator = field(default_factory=PodActivator)
    # When each bound pod's CPUs last changed (shared by every profile; its own when made alone).
    resizes: ResizeLog = field(default_factory=ResizeLog)
    # The profile's scheduler name ("" for a Handle made alone): profiles run together share the
    # first one's QueueSort, which orders the other profiles' pods too.
    profile: str = ""


@runtime_checkable
class Plugin(Protocol):
    NAME: ClassVar[str]


@runtime_checkable
class EnqueueExtensions(Protocol):
    def events_to_register(self) -> Sequence[EventRegistration]:
        """Cluster events that may make a pod this plugin rejected schedulable."""
        ...


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: PodInfo) -> Status: ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def sort_key(self, queued: QueuedPod) -> tuple[Any, ...]:
        """Smaller keys pop first (the `Less` of kube-scheduler as a key function)."""
        ...


@runtime_checkable
class QueuePickPlugin(QueueSortPlugin, Protocol):
    """A QueueSort that, when the queue pops, picks one of the first `window` pods in its order
    (an order that must not change while pods wait) rather than always the first one. Returns
    the index of the pod to schedule; the others keep their places."""

    window: int

    def pick(self, candidates: Sequence[QueuedPod]) -> int: ...


@runtime_checkable
class StatedConstraintCheck(Protocol):
    """A plugin that checks a constraint a pod states in its own spec (host ports, pod affinity,
    claims, ...). Asked of the class: profile lists are the whole of a profile, so a profile that
    leaves such a plugin out refuses the pods that state what it checks, rather than place them
    unchecked (`pysched.scheduler.unchecked`)."""

    @staticmethod
    def stated_constraint(pod: PodInfo) -> str | None:
        """What the pod states that this plugin checks ("host ports"), None when nothing."""
        ...


@runtime_checkable
class RejectionCheckPlugin(Plugin, Protocol):
    """A plugin that can tell, on the cluster as it is now, that it would reject a pod it rejected
    before, on every node. When every rejector of a pod says so, the pod popped after an event let
    it out (the room it brought may already be taken) is refused again without a cycle, unless it
    is a gang's member or a pod waits at Permit. A plugin whose class sets `LEAVES_WAITING = True`
    is also asked by the periodic retry of unschedulable pods, which then leaves the pod waiting
    instead of sending it to the queue; a pod that retry lets out is checked at its pop as after
    an event, and gets a whole cycle once its FailedScheduling reasons are an hour old
    (`QueueTimings.rediagnose_interval`). Must be exact when it says True, preemption included,
    and cheaper than a cycle."""

    def still_rejects(self, pod: PodInfo) -> bool: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status: ...


@dataclass(frozen=True, slots=True)
class FilterResult:
    """Batch verdict: which rows pass, and for the failing ones why (for FailedScheduling).
    `unresolvable`: the failing rows whose rejection no preemption can undo (kube's
    UnschedulableAndUnresolvable), all of them (True), none (False), or per row (a mask)."""

    feasible: Bools
    reasons: Mapping[str, Bools] = field(default_factory=dict)
    unresolvable: bool | Bools = False
    # kube's PreFilterResult, for the diagnosis (`feasible` already excludes these rows): the rows
    # the plugin's PreFilter leaves out of filtering altogether, told "didn't satisfy plugin(s)"
    # whatever any filter says of them; or, when it would leave out every node, why (a PreFilter
    # rejection that speaks for every node).
    left_out: Bools | None = None
    pre_filter_refusal: str = ""

    def unresolvable_rows(self, failing: Bools) -> Bools:
        """Which of the `failing` rows are unresolvable."""
        flag = self.unresolvable
        if isinstance(flag, np.ndarray):
            return failing & flag[: failing.shape[0]]
        return failing if flag else np.zeros(failing.shape[0], np.bool_)


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult: ...


@runtime_checkable
class MaskFilterPlugin(FilterPlugin, Protocol):
    """A filter whose verdict depends only on node labels, taints and flags (what bumps the node
    table's generation) and on what `mask_key` reads of the pod. The engine caches the combined
    mask of a profile's mask filters per (the tuple of their keys, generation), so each filter
    names its own part of the key: a filter reading something new of the pod can never share a
    mask with a pod that differs in it."""

    def mask_key(self, pod: PodInfo) -> Hashable:
        """Everything `node_mask` reads of the pod: pods with equal keys get the same mask."""
        ...

    def node_mask(self, pod: PodInfo, nodes: NodeTable) -> Bools: ...


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """Why no node fits: reason -> node count, and which plugins rejected."""

    total_nodes: int
    reasons: Mapping[str, int]
    rejectors: frozenset[str]
    unresolvable: bool
    pre_filter_message: str = ""  # a PreFilter rejection speaks for every node at once
    # Rows whose failure a change of pods may fix (every filter that rejected them said
    # Unschedulable, none UnschedulableAndUnresolvable): preemption's potential nodes.
    resolvable_rows: Bools | None = None
    post_filter_message: str = ""  # what a PostFilter that could not help said, appended

    def message(self) -> str:
        """kube-scheduler's FailedScheduling text, whole (the pod's condition keeps it; the event's
        note is cut: `api.limits.truncate_note`)."""
        text = f"0/{self.total_nodes} nodes are available"
        after = f" {self.post_filter_message}" if self.post_filter_message else ""
        if self.pre_filter_message:
            return f"{text}: {self.pre_filter_message}.{after}"
        parts = sorted(f"{count} {reason}" for reason, count in self.reasons.items())
        return (f"{text}: {', '.join(parts)}." if parts else f"{text}:") + after  # kube's, even with no reason


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> Status:
        """No node fits: try to make room (preemption, a smaller size...). Success stops the
        PostFilter plugins; the pod is unschedulable this cycle either way and is tried again
        when the room made shows up as cluster events."""
        ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> Status:
        """Before scoring. `feasible` holds the rows every filter passed except the resource fit,
        which the kernel checks together with the scores; a plugin that returns Skip has its
        score left out for this pod, and a profile whose extra scores are all skipped keeps the
        kernel's incremental selection. NormalizeScore sees the exact feasible rows."""
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        """Scores (0..100 once normalized) for every row; rows not feasible are ignored."""
        ...


@runtime_checkable
class ScoreNormalizer(Protocol):
    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: I64, feasible: Bools) -> None:
        """Rescale scores in place to 0..100 (NormalizeScore)."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status: ...
    def unreserve(self, state: CycleState, pod: PodInfo, node: NodeName) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node: NodeName) -> tuple[Status, float]:
        """Success, Wait (with a timeout in seconds) or a rejection."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status: ...


@runtime_checkable
class PreBindPreFlight(Protocol):
    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        """Success when this PreBind will do work that takes time (the engine then writes the
        pod's nominatedNodeName first, as kube-scheduler does); Skip when it has nothing to do.
        A PreBind plugin without it counts as Skip."""
        ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        """Skip hands the pod to the next bind plugin."""
        ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> None: ...


# The range of a reconcile interval (seconds): the simulator moves its clock by it, so a tiny one
# never ends a run; 0.1 s still lets tests against a real API server reconcile quickly.
MIN_RECONCILE_INTERVAL_S = 0.1
MAX_RECONCILE_INTERVAL_S = 86_400.0


@runtime_checkable
class ReconcilePlugin(Plugin, Protocol):
    """Acts on the profile's running pods on a clock interval (restarts, autoscaling): the
    scheduler calls it every `reconcile_interval` seconds with the bound, running pods.
    An interval below MIN_RECONCILE_INTERVAL_S is taken as that minimum."""

    @property
    def reconcile_interval(self) -> float: ...

    async def reconcile(self, pods: Sequence[PodInfo]) -> None: ...


@dataclass(frozen=True, slots=True)
class MetricFamily:
    """A plugin's metric, exposed by `pysched run` on /metrics with a `profile` label added.
    Plugins never import prometheus_client: they hand over plain values."""

    name: str  # without `_total`: counters get it on exposition
    documentation: str
    kind: str  # "gauge" or "counter"
    labels: tuple[str, ...]
    values: Mapping[tuple[str, ...], float]


@runtime_checkable
class MetricsPlugin(Plugin, Protocol):
    def metric_families(self) -> Sequence[MetricFamily]: ...
