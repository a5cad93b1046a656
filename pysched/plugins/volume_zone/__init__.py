"""VolumeZone: a pod whose bound PersistentVolumes carry zone/region labels runs only on nodes
of those zones/regions (kube-scheduler's VolumeZone, v1.36)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pysched.api.features import VOLUMES, PodFeatures
from pysched.api.labels import ZONE_LABEL
from pysched.api.objects import PodInfo
from pysched.api.volumes import WAIT_FOR_FIRST_CONSUMER
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import PLACEMENT_EVENTS, EventKind, EventRegistration
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.masks import mask_result
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SKIP, SUCCESS, Status, unresolvable

NAME = "VolumeZone"
REASON = "node(s) had no available volume zone"
ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
REGION_BETA = "failure-domain.beta.kubernetes.io/region"
ZONE = ZONE_LABEL
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (ZONE_BETA, REGION_BETA, ZONE, REGION)
GA_OF = {ZONE_BETA: ZONE, REGION_BETA: REGION}
_STATE = "VolumeZone/topologies"


@dataclass(frozen=True, slots=True)
class Topologies:
    """(label key, allowed values) of the pod's bound PVs."""

    items: tuple[tuple[str, frozenset[str]], ...]


def zone_values(value: str) -> frozenset[str] | None:
    """A PV zone label may list several zones joined by `__` (LabelZonesToSet); None when a part
    is empty, a label kube-scheduler ignores."""
    parts = [part.strip() for part in value.split("__")]
    return None if not all(parts) else frozenset(parts)


@dataclass(frozen=True, slots=True)
class VolumeZone:
    handle: Handle
    NAME: ClassVar[str] = NAME

    def acts_on(self) -> PodFeatures:
        return VOLUMES  # a pod without volumes is skipped at PreFilter

    @staticmethod
    def stated_constraint(pod: PodInfo) -> str | None:
        return "persistent volume claims" if pod.volumes is not None and pod.volumes.claims else None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        if pod.volumes is None or not pod.volumes.claims:
            return SKIP
        storage = self.handle.cluster.storage
        items: list[tuple[str, frozenset[str]]] = []
        for name in pod.volumes.claims:
            if not name:
                return unresolvable("PersistentVolumeClaim had no name")
            claim = storage.pvc(pod.namespace, name)
            if claim is None:
                return unresolvable(f'persistentvolumeclaim "{name}" not found')
            if not claim.volume_name:
                if not claim.storage_class:
                    return unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
                storage_class = storage.storage_class(claim.storage_class)
                if storage_class is None:
                    return unresolvable(f'storageclass.storage.k8s.io "{claim.storage_class}" not found')
                if storage_class.binding_mode == WAIT_FOR_FIRST_CONSUMER:
                    continue  # not bound yet: VolumeBinding places it
                return unresolvable("PersistentVolume had no name")
            pv = storage.pv(claim.volume_name)
            if pv is None:
                return unresolvable(f'persistentvolume "{claim.volume_name}" not found')
            for key in TOPOLOGY_LABELS:
                if key in pv.labels and (zones := zone_values(pv.labels[key])) is not None:
                    items.append((key, zones))
        if not items:
            return SKIP
        state.write(_STATE, Topologies(tuple(items)))
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        size = nodes.size
        topologies = state.read(_STATE, Topologies)
        if topologies is None:
            return FilterResult(np.ones(size, np.bool_))
        constrained = np.zeros(size, np.bool_)
        for key in TOPOLOGY_LABELS:
            constrained |= nodes.label_column(key) >= 0
        fits = np.ones(size, np.bool_)
        for key, values in topologies.items:
            ids = [nodes.label_value_id(key, v) for v in values]
            column = nodes.label_column(key)
            here = np.isin(column, ids)
            ga = GA_OF.get(key)
            if ga is not None:  # no beta label on the node: its GA label stands in
                here |= (column < 0) & np.isin(nodes.label_column(ga), [nodes.label_value_id(ga, v) for v in values])
            fits &= here
        return mask_result(fits | ~constrained, REASON, unresolvable=True)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (
            *PLACEMENT_EVENTS,
            EventRegistration(EventKind.PVC_CHANGE),
            EventRegistration(EventKind.PV_CHANGE),
            EventRegistration(EventKind.STORAGE_CLASS_CHANGE),
        )


def factory(args: NoArgs, handle: Handle) -> VolumeZone:
    return VolumeZone(handle)


SPEC = PluginSpec(NAME, NoArgs, factory, VolumeZone)
