"""NodeVolumeLimits: a node takes at most its CSINode's `allocatable.count` volumes of each CSI
driver (kube-scheduler's NodeVolumeLimits, CSI part, v1.36).

A volume counts once per node however many pods mount it. The counts per node and driver are
kept incrementally from the placed pods' notices; a pod's volumes are read again when one of
its claims or their PVs changes (a WaitForFirstConsumer claim gets its PV after the pod is placed).
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pysched.api.features import VOLUMES, PodFeatures
from pysched.api.ids import PodKey
from pysched.api.objects import PodInfo
from pysched.api.volumes import PersistentVolume, PersistentVolumeClaim, Storage
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import EventKind, EventRegistration
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.masks import mask_result
from pysched.framework.nodetable import I64, NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SKIP, SUCCESS, Status
from pysched.framework.storage import StorageView

NAME = "NodeVolumeLimits"
REASON = "node(s) exceed max volume count"
_STATE = "NodeVolumeLimits/volumes"
NO_LIMIT = np.iinfo(np.int64).max


def csi_volumes(pod: PodInfo, storage: StorageView) -> dict[str, str]:
    """The pod's CSI volumes: unique volume name -> driver. A bound claim is its PV's handle, an
    unbound one counts under its StorageClass's provisioner."""
    found: dict[str, str] = {}
    volumes = pod.volumes
    if volumes is None:
        return found
    for name in volumes.claims:
        claim = storage.pvc(pod.namespace, name)
        if claim is None:
            continue
        if claim.volume_name:
            pv = storage.pv(claim.volume_name)
            if pv is not None and pv.csi_driver:
                found[f"{pv.csi_driver}/{pv.csi_handle}"] = pv.csi_driver
            continue
        storage_class = storage.storage_class(claim.storage_class) if claim.storage_class else None
        if storage_class is not None and storage_class.provisioner:
            found[f"{storage_class.provisioner}/{claim.key}"] = storage_class.provisioner
    return found


@dataclass(frozen=True, slots=True)
class NewVolumes:
    by_name: Mapping[str, str]  # unique name -> driver


@dataclass(slots=True)
class NodeVolumeLimits:
    handle: Handle
    NAME: ClassVar[str] = NAME
    # unique volume -> row -> pods mounting it there
    mounts: dict[str, collections.Counter[int]] = field(default_factory=dict)
    # driver -> distinct volumes per row
    counts: dict[str, I64] = field(default_factory=dict)
    placed: dict[PodKey, tuple[PodInfo, int, dict[str, str]]] = field(default_factory=dict)
    by_claim: dict[str, set[PodKey]] = field(default_factory=dict)  # "ns/claim" -> placed pods
    _limits: dict[str, I64] = field(default_factory=dict)
    _limits_generation: int = -1

    # ----- counting
    def _count(self, driver: str, row: int, delta: int) -> None:
        array = self.counts.get(driver)
        if array is None or array.shape[0] <= row:
            grown = np.zeros(max(64, 2 * (row + 1)), np.int64)
            if array is not None:
                grown[: array.shape[0]] = array
            array = self.counts[driver] = grown
        array[row] += delta

    def _add(self, row: int, volumes: Mapping[str, str]) -> None:
        for name, driver in volumes.items():
            rows = self.mounts.setdefault(name, collections.Counter())
            rows[row] += 1
            if rows[row] == 1:
                self._count(driver, row, 1)

    def _drop(self, row: int, volumes: Mapping[str, str]) -> None:
        for name, driver in volumes.items():
            rows = self.mounts.get(name)
            if rows is None or rows[row] <= 0:
                continue
            rows[row] -= 1
            if rows[row] == 0:
                del rows[row]
                self._count(driver, row, -1)
            if not rows:
                del self.mounts[name]

    def pod_placed(self, pod: PodInfo, row: int) -> None:
        if pod.volumes is None:
            return
        volumes = csi_volumes(pod, self.handle.cluster.storage)
        self.placed[pod.key] = (pod, row, volumes)
        for claim in pod.volumes.claims:
            self.by_claim.setdefault(f"{pod.namespace}/{claim}", set()).add(pod.key)
        self._add(row, volumes)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        entry = self.placed.pop(pod.key, None)
        if entry is None:
            return
        self._drop(entry[1], entry[2])
        for claim in pod.volumes.claims if pod.volumes is not None else ():
            users = self.by_claim.get(f"{pod.namespace}/{claim}")
            if users is not None:
                users.discard(pod.key)
                if not users:
                    del self.by_claim[f"{pod.namespace}/{claim}"]

    def storage_changed(self, kind: EventKind, old: Storage | None, new: Storage | None) -> None:
        """A claim or PV changed: read the volumes of the placed pods that mount it again."""
        if kind is EventKind.CSI_NODE_CHANGE:
            self._limits.clear()
            return
        obj = new if new is not None else old
        claim = None
        if isinstance(obj, PersistentVolumeClaim):
            claim = obj.key
        elif isinstance(obj, PersistentVolume) and obj.claim_ref is not None:
            claim = f"{obj.claim_ref.namespace}/{obj.claim_ref.name}"
        for key in list(self.by_claim.get(claim, ())) if claim is not None else ():
            pod, row, volumes = self.placed[key]
            fresh = csi_volumes(pod, self.handle.cluster.storage)
            if fresh != volumes:
                self._drop(row, volumes)
                self._add(row, fresh)
                self.placed[key] = (pod, row, fresh)

    # ----- scheduling
    def acts_on(self) -> PodFeatures:
        return VOLUMES  # a pod without volumes is skipped at PreFilter

    @staticmethod
    def stated_constraint(pod: PodInfo) -> str | None:
        volumes = pod.volumes
        return "persistent volume claims" if volumes is not None and volumes.claims else None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        if pod.volumes is None or not pod.volumes.claims:
            return SKIP
        volumes = csi_volumes(pod, self.handle.cluster.storage)
        if not volumes:
            return SKIP
        state.write(_STATE, NewVolumes(volumes))
        return SUCCESS

    def limits(self, driver: str, nodes: NodeTable) -> I64:
        """Per row, the node's CSINode allocatable count for the driver (no CSINode or no count:
        no limit)."""
        if self._limits_generation != nodes.generation:
            self._limits.clear()
            self._limits_generation = nodes.generation
        found = self._limits.get(driver)
        if found is None:
            found = np.full(nodes.size, NO_LIMIT, np.int64)
            for name, csi_node in self.handle.cluster.storage.csi_nodes.items():
                row = nodes.row.get(name)  # type: ignore[call-overload]
                if row is not None and driver in csi_node.limits:
                    found[row] = csi_node.limits[driver]
            self._limits[driver] = found
        return found

    def attached(self, driver: str, size: int) -> I64:
        array = self.counts.get(driver)
        out = np.zeros(size, np.int64)
        if array is not None:
            n = min(size, array.shape[0])
            out[:n] = array[:n]
        return out

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        size = nodes.size
        new = state.read(_STATE, NewVolumes)
        fits = np.ones(size, np.bool_)
        if new is None:
            return FilterResult(fits)
        by_driver: dict[str, list[str]] = {}
        for name, driver in new.by_name.items():
            by_driver.setdefault(driver, []).append(name)
        for driver, names in by_driver.items():
            adding = np.full(size, len(names), np.int64)
            for name in names:  # already on a node: counted there once
                for row in self.mounts.get(name, {}):
                    if row < size:
                        adding[row] -= 1
            fits &= (adding == 0) | (self.attached(driver, size) + adding <= self.limits(driver, nodes))
        return mask_result(fits, REASON, unresolvable=False)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (
            EventRegistration(EventKind.NODE_ADD),
            EventRegistration(EventKind.CSI_NODE_CHANGE),
            EventRegistration(EventKind.POD_DELETE),
            EventRegistration(EventKind.PVC_CHANGE),
            EventRegistration(EventKind.PV_CHANGE),
        )


def factory(args: NoArgs, handle: Handle) -> NodeVolumeLimits:
    plugin = NodeVolumeLimits(handle)
    handle.cluster.storage.subscribe(plugin.storage_changed)
    handle.pods.subscribe(plugin, VOLUMES)  # only pods with volumes use any
    return plugin


SPEC = PluginSpec(NAME, NoArgs, factory, NodeVolumeLimits)
