"""Cluster events and queueing hints: which changes may make a rejected pod schedulable."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from pysched.api.objects import NodeInfo, PodInfo
from pysched.api.volumes import Storage


class EventKind(enum.Enum):
    NODE_ADD = "NodeAdd"
    NODE_UPDATE = "NodeUpdate"  # labels, taints, cordon or resources changed (not a heartbeat)
    NODE_DELETE = "NodeDelete"  # a node left: a spread constraint may have a domain fewer
    POD_DELETE = "PodDelete"  # a bound pod was deleted or finished, or a bind failed: room is free
    POD_RESIZE_DOWN = "PodResizeDown"  # a bound pod now asks for less
    ASSIGNED_POD_ADD = "AssignedPodAdd"  # a pod is now bound to a node (by anyone)
    ASSIGNED_POD_UPDATE = "AssignedPodUpdate"  # a bound pod's labels changed
    UNSCHEDULED_POD_ADD = "UnscheduledPodAdd"  # a pending member of a gang appeared
    JOB_MINIMUM_CHANGE = "JobMinimumChange"  # a PodGroup (or an Indexed Job) holding a gang's minimum changed
    PVC_CHANGE = "PersistentVolumeClaimChange"  # a PVC was added, updated or deleted
    PV_CHANGE = "PersistentVolumeChange"
    STORAGE_CLASS_CHANGE = "StorageClassChange"
    CSI_NODE_CHANGE = "CSINodeChange"
    CSI_DRIVER_CHANGE = "CSIDriverChange"
    CSI_STORAGE_CAPACITY_CHANGE = "CSIStorageCapacityChange"

    # Members are singletons compared by identity: hash them as such, in C (Enum's own hash is a
    # Python call, paid on every queue lookup by kind).
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    kind: EventKind
    old: NodeInfo | PodInfo | Storage | None = None
    new: NodeInfo | PodInfo | Storage | None = None


class QueueingHint(enum.Enum):
    QUEUE = "Queue"
    SKIP = "Skip"


HintFn = Callable[[PodInfo, ClusterEvent], QueueingHint]


@dataclass(frozen=True, slots=True)
class EventRegistration:
    """A plugin's interest in one kind of event, with an optional finer hint."""

    kind: EventKind
    hint: HintFn | None = None

    def decide(self, pod: PodInfo, event: ClusterEvent) -> QueueingHint:
        if event.kind is not self.kind:
            return QueueingHint.SKIP
        return self.hint(pod, event) if self.hint is not None else QueueingHint.QUEUE


def placement_changed(pod: PodInfo, event: ClusterEvent) -> QueueingHint:
    """A node update that may change a verdict that depends only on its labels, taints or
    cordon: kubelets rewrite `status.images` and allocatable far more often, and those help no
    pod such a filter refused (kube-scheduler's NodeSchedulingPropertiesChange)."""
    old, new = event.old, event.new
    if not isinstance(old, NodeInfo) or not isinstance(new, NodeInfo):
        return QueueingHint.QUEUE
    same = old.labels == new.labels and old.taints == new.taints and old.unschedulable == new.unschedulable
    return QueueingHint.SKIP if same else QueueingHint.QUEUE


# Events that can change a verdict depending only on node labels/taints/flags (the mask filters).
# A change of the unschedulable pod itself always sends it back to be tried (the queue sees it).
PLACEMENT_EVENTS = (
    EventRegistration(EventKind.NODE_ADD),
    EventRegistration(EventKind.NODE_UPDATE, placement_changed),
)
