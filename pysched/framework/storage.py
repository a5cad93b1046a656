"""The storage objects a backend knows (PVCs, PVs, StorageClasses, CSINodes, CSIDrivers and
CSIStorageCapacities), kept in memory
with the lookups the volume plugins make: by namespace/name, PVs by storage class.

Both backends own one `StorageView` and feed it (the live one from informers, the simulator from
its records); plugins only read it and may subscribe to its changes (NodeVolumeLimits re-counts
the placed pods whose claims changed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from pysched.api.selectors import SelectorTerm
from pysched.api.volumes import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    Storage,
    StorageClass,
    terms_match,
)
from pysched.framework.events import EventKind
from pysched.framework.nodetable import Bools, NodeTable

StorageListener = Callable[[EventKind, Storage | None, Storage | None], None]


def storage_kind(obj: Storage) -> EventKind:
    if isinstance(obj, PersistentVolumeClaim):
        return EventKind.PVC_CHANGE
    if isinstance(obj, PersistentVolume):
        return EventKind.PV_CHANGE
    if isinstance(obj, StorageClass):
        return EventKind.STORAGE_CLASS_CHANGE
    if isinstance(obj, CSIDriver):
        return EventKind.CSI_DRIVER_CHANGE
    if isinstance(obj, CSIStorageCapacity):
        return EventKind.CSI_STORAGE_CAPACITY_CHANGE
    return EventKind.CSI_NODE_CHANGE


class StorageView:
    def __init__(self) -> None:
        self.pvcs: dict[str, PersistentVolumeClaim] = {}  # "ns/name"
        self.pvs: dict[str, PersistentVolume] = {}
        self.classes: dict[str, StorageClass] = {}
        self.csi_nodes: dict[str, CSINode] = {}
        self.csi_drivers: dict[str, CSIDriver] = {}
        self.capacities: dict[str, CSIStorageCapacity] = {}  # "ns/name"
        self._by_class: dict[str, dict[str, PersistentVolume]] = {}
        self._listeners: list[StorageListener] = []

    # ----- reads
    def pvc(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.pvcs.get(f"{namespace}/{name}")

    def pv(self, name: str) -> PersistentVolume | None:
        return self.pvs.get(name)

    def storage_class(self, name: str) -> StorageClass | None:
        return self.classes.get(name)

    def csi_node(self, name: str) -> CSINode | None:
        return self.csi_nodes.get(name)

    def csi_driver(self, name: str) -> CSIDriver | None:
        return self.csi_drivers.get(name)

    def capacities_of_class(self, storage_class: str) -> Iterable[CSIStorageCapacity]:
        """Every CSIStorageCapacity of the class, in any namespace (kube lists them all)."""
        return (c for c in self.capacities.values() if c.storage_class == storage_class)

    def pvs_of_class(self, storage_class: str) -> Iterable[PersistentVolume]:
        return self._by_class.get(storage_class, {}).values()

    def subscribe(self, listener: StorageListener) -> None:
        """`listener(kind, old, new)` after every change (new None: deleted)."""
        self._listeners.append(listener)

    # ----- the backend's side
    def _table(self, obj: Storage) -> tuple[dict[str, Storage], str]:
        if isinstance(obj, PersistentVolumeClaim):
            return self.pvcs, obj.key  # type: ignore[return-value]
        if isinstance(obj, PersistentVolume):
            return self.pvs, obj.name  # type: ignore[return-value]
        if isinstance(obj, StorageClass):
            return self.classes, obj.name  # type: ignore[return-value]
        if isinstance(obj, CSIDriver):
            return self.csi_drivers, obj.name  # type: ignore[return-value]
        if isinstance(obj, CSIStorageCapacity):
            return self.capacities, obj.key  # type: ignore[return-value]
        return self.csi_nodes, obj.name  # type: ignore[return-value]

    def upsert(self, obj: Storage) -> Storage | None:
        """Store `obj`; the object it replaced (None: new)."""
        table, key = self._table(obj)
        old = table.get(key)
        table[key] = obj
        if isinstance(obj, PersistentVolume):
            if isinstance(old, PersistentVolume):
                self._by_class.get(old.storage_class, {}).pop(old.name, None)
            self._by_class.setdefault(obj.storage_class, {})[obj.name] = obj
        self._notify(storage_kind(obj), old, obj)
        return old

    def remove(self, obj: Storage) -> Storage | None:
        table, key = self._table(obj)
        old = table.pop(key, None)
        if isinstance(old, PersistentVolume):
            self._by_class.get(old.storage_class, {}).pop(old.name, None)
        if old is not None:
            self._notify(storage_kind(obj), old, None)
        return old

    def _notify(self, kind: EventKind, old: Storage | None, new: Storage | None) -> None:
        for listener in self._listeners:
            listener(kind, old, new)


def terms_mask(terms: tuple[SelectorTerm, ...], nodes: NodeTable) -> Bools:
    """Rows whose labels match any of the terms (a PV's node affinity, a StorageClass's allowed
    topologies). One `In` requirement (a local PV's hostname, a zone) is one vectorised pass;
    anything else is read per node (callers cache the mask per node-table generation)."""
    if len(terms) == 1 and len(terms[0].match_expressions) == 1 and not terms[0].match_fields:
        req = terms[0].match_expressions[0]
        if req.operator == "In":
            ids = [nodes.label_value_id(req.key, value) for value in req.values]
            return np.isin(nodes.label_column(req.key), ids)
    mask = np.zeros(nodes.size, np.bool_)
    for row in range(nodes.size):
        info = nodes.infos[row]
        if info is not None:
            mask[row] = terms_match(terms, info.labels)
    return mask
