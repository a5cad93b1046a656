"""VolumeRestrictions: inline disks that cannot be mounted twice on one node (GCE PD, AWS EBS,
RBD, ISCSI) and ReadWriteOncePod claims already used by another pod (kube-scheduler's
VolumeRestrictions, v1.36). Both are kept incrementally from the placed pods' notices."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pysched.api.features import VOLUMES, PodFeatures
from pysched.api.objects import PodInfo
from pysched.api.volumes import READ_WRITE_ONCE_POD, InlineDisk
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import PLACEMENT_EVENTS, EventKind, EventRegistration
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.masks import mask_result
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SKIP, SUCCESS, Status, unresolvable

NAME = "VolumeRestrictions"
REASON_DISK = "node(s) had no available disk"
REASON_RWOP = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)
_EXCLUSIVE_KEY = f"{NAME}/in-use"  # the pod's ReadWriteOncePod claims other pods used at PreFilter


@dataclass(slots=True)
class VolumeRestrictions:
    handle: Handle
    NAME: ClassVar[str] = NAME
    # (kind, ident) -> row -> the disks of that identity mounted there (one entry per pod)
    disks: dict[tuple[str, str], dict[int, list[InlineDisk]]] = field(default_factory=dict)
    # "ns/claim" -> placed pods using it (kube's PVCRefCounts)
    claim_users: collections.Counter[str] = field(default_factory=collections.Counter)

    # ----- PlacementListener
    def pod_placed(self, pod: PodInfo, row: int) -> None:
        volumes = pod.volumes
        if volumes is None:
            return
        for disk in volumes.disks:
            self.disks.setdefault((disk.kind, disk.ident), {}).setdefault(row, []).append(disk)
        for claim in volumes.claims:
            self.claim_users[f"{pod.namespace}/{claim}"] += 1

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        volumes = pod.volumes
        if volumes is None:
            return
        for disk in volumes.disks:
            rows = self.disks.get((disk.kind, disk.ident), {})
            mounted = rows.get(row, [])
            if disk in mounted:
                mounted.remove(disk)
            if not mounted:
                rows.pop(row, None)
            if not rows:
                self.disks.pop((disk.kind, disk.ident), None)
        for claim in volumes.claims:
            key = f"{pod.namespace}/{claim}"
            self.claim_users[key] -= 1
            if self.claim_users[key] <= 0:
                del self.claim_users[key]

    # ----- PreFilter: the pod's ReadWriteOncePod claims in use, and whether Filter has anything to check
    def acts_on(self) -> PodFeatures:
        return VOLUMES  # a pod without volumes is skipped at PreFilter

    @staticmethod
    def stated_constraint(pod: PodInfo) -> str | None:
        volumes = pod.volumes
        return "volumes" if volumes is not None and (volumes.claims or volumes.disks) else None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        volumes = pod.volumes
        if volumes is None:
            return SKIP
        storage = self.handle.cluster.storage
        exclusive = []
        for name in volumes.claims:
            claim = storage.pvc(pod.namespace, name)
            if claim is None:
                return unresolvable(f'persistentvolumeclaim "{name}" not found')
            if READ_WRITE_ONCE_POD in claim.access_modes:
                exclusive.append(claim.key)
        in_use = tuple(key for key in exclusive if self.claim_users.get(key, 0) > 0)
        if not volumes.disks and not in_use:
            return SKIP
        # Filter reads the users again: a preemption dry run takes them off their nodes (kube
        # refuses at Filter, so evicting the pod that holds the claim can make room).
        state.write(_EXCLUSIVE_KEY, in_use)
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        fits = np.ones(nodes.size, np.bool_)
        for disk in pod.volumes.disks if pod.volumes is not None else ():
            for row, mounted in self.disks.get((disk.kind, disk.ident), {}).items():
                if row < nodes.size and any(disk.conflicts(other) for other in mounted):
                    fits[row] = False
        exclusive = state.read(_EXCLUSIVE_KEY, tuple) or ()
        if not any(self.claim_users.get(key, 0) > 0 for key in exclusive):
            return mask_result(fits, REASON_DISK, unresolvable=False)
        # Disks first, as kube's Filter checks them: every node still fitting fails on the claim.
        return FilterResult(np.zeros(nodes.size, np.bool_), {REASON_DISK: ~fits, REASON_RWOP: fits}, False)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (
            *PLACEMENT_EVENTS,
            EventRegistration(EventKind.POD_DELETE),
            EventRegistration(EventKind.PVC_CHANGE),
        )


def factory(args: NoArgs, handle: Handle) -> VolumeRestrictions:
    plugin = VolumeRestrictions(handle)
    handle.pods.subscribe(plugin, VOLUMES)  # only pods with volumes use any
    return plugin


SPEC = PluginSpec(NAME, NoArgs, factory, VolumeRestrictions)
