"""The scheduler's view of the cluster: the node table plus the pods placed on each node.

The node table's arrays are what the kernel reads; they are updated in place by informer events
and by assume/forget, so a scheduling cycle reads them directly without copying (the cycle is
synchronous, so nothing changes under it). Assumed pods never expire (no timers on assumptions): the
informer confirms them, a failed bind forgets them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysched.api.ids import NodeName, PodKey, PodUID
from pysched.api.objects import NodeInfo, PodInfo
from pysched.framework.nodetable import POD_COLUMN, NodeTable, RequestShape
from pysched.framework.placed import PlacedPods
from pysched.scheduler.kernel import charge_row


@dataclass(slots=True)
class _PodEntry:
    pod: PodInfo
    node: NodeName
    assumed: bool
    shape: RequestShape
    nominated: bool = False  # a preemptor's held room on its nominated node, not a placed pod


class Cache:
    """Nodes plus the pods placed on them, bound or assumed."""

    def __init__(self) -> None:
        self.nodes = NodeTable()
        self.placed = PlacedPods()  # what plugins see of the pods below, with change notices
        self._pods: dict[PodKey, _PodEntry] = {}
        # Pods seen bound to a node we do not know yet; replayed when the node arrives.
        self._orphans: dict[NodeName, dict[PodKey, PodInfo]] = {}
        # Pods assumed on a node that left before their bind was confirmed or forgotten: the bind
        # can still succeed (the API does not check that the node exists), so they count again if
        # the node comes back under its name, as kube-scheduler's cache keeps them.
        self._assumed_orphans: dict[NodeName, dict[PodKey, PodInfo]] = {}

    # ----- accounting
    def _charge(self, entry: _PodEntry, sign: int) -> None:
        table = self.nodes
        row = table.row[entry.node]
        charge_row(table.requested, table.nonzero_requested, row, entry.shape.charge, entry.shape.nonzero, sign)
        table.touch(row)

    def _place(self, pod: PodInfo, node: NodeName, assumed: bool, request: RequestShape | None = None) -> None:
        if node not in self.nodes.row:  # counted when the node arrives
            (self._assumed_orphans if assumed else self._orphans).setdefault(node, {})[pod.key] = pod
            return
        entry = _PodEntry(pod, node, assumed, request or self.nodes.request_shape(pod.requests, pod.nonzero))
        self._pods[pod.key] = entry
        self._charge(entry, +1)
        self.placed.placed(pod, self.nodes.row[node])

    def _unplace(self, key: PodKey) -> _PodEntry | None:
        entry = self._pods.pop(key, None)
        if entry is not None:
            self._charge(entry, -1)
            self.placed.removed(entry.pod, self.nodes.row[entry.node])
        return entry

    # ----- scheduler side
    def assume(self, pod: PodInfo, node: NodeName, request: RequestShape | None = None) -> None:
        """Count the pod on the node before its bind completes, so the next cycle sees it.
        `request` saves a lookup when the caller already has the pod's request shape."""
        if pod.key in self._pods:
            raise ValueError(f"pod {pod.key} is already in the cache")
        self._place(pod, node, assumed=True, request=request)

    def forget(self, pod: PodInfo) -> None:
        """Undo an assumption after a failed bind: that pod's, not one recreated under its name
        since (assumed by a cycle of its own)."""
        entry = self._pods.get(pod.key)
        if entry is not None and entry.assumed and entry.pod.uid == pod.uid:
            self._unplace(pod.key)
        self._drop_assumed_orphan(pod)

    def reassume(self, pod: PodInfo) -> bool:
        """The assumed pod's requests changed before its bind (a resize during its binding
        cycle): count the new requests on the same node if they fit there, else forget it.
        True when it is still assumed with the new requests."""
        entry = self._pods.get(pod.key)
        if entry is None or not entry.assumed:
            return False
        node = entry.node
        self._unplace(pod.key)
        table = self.nodes
        shape = table.request_shape(pod.requests, pod.nonzero)
        row = table.row[node]
        free = table.allocatable[row] - table.requested[row]
        if (shape.charge > free).any():
            return False
        self._place(pod, node, assumed=True, request=shape)
        return True

    # ----- preemption: nominated pods' room and dry runs
    def hold(self, pod: PodInfo, node: NodeName) -> bool:
        """Count a nominated (still pending) pod's requests on its node, so that others do not
        take the room its preemption made. False when the pod is placed already or the node unknown."""
        if pod.key in self._pods or node not in self.nodes.row:
            return False
        entry = _PodEntry(pod, node, True, self.nodes.request_shape(pod.requests, pod.nonzero), nominated=True)
        self._pods[pod.key] = entry
        self._charge(entry, +1)
        self.placed.placed(pod, self.nodes.row[node], held=True)
        return True

    def release(self, key: PodKey) -> None:
        """Drop a nominated pod's held room (it is being scheduled, bound or gone)."""
        entry = self._pods.get(key)
        if entry is not None and entry.nominated:
            self._unplace(key)

    def lift(self, key: PodKey) -> object | None:
        """Take a placed pod off its node for a dry run; `put_back` undoes it exactly."""
        return self._unplace(key)

    def put_back(self, token: object) -> None:
        assert isinstance(token, _PodEntry)
        self._pods[token.pod.key] = token
        self._charge(token, +1)
        self.placed.placed(token.pod, self.nodes.row[token.node], held=token.nominated)

    def is_nominated(self, key: PodKey) -> bool:
        entry = self._pods.get(key)
        return entry is not None and entry.nominated

    def is_assumed(self, key: PodKey, uid: PodUID | None = None) -> bool:
        """Assumed (and, given `uid`, as that very pod: not a pod recreated under its name)."""
        entry = self._pods.get(key)
        return entry is not None and entry.assumed and (uid is None or entry.pod.uid == uid)

    # ----- informer side
    def add_pod(self, pod: PodInfo) -> None:
        """A bound, non-terminated pod from the informer: confirms an assumption or adds it."""
        if pod.node_name is None or pod.terminated:
            return
        entry = self._pods.get(pod.key)
        if (
            entry is not None
            and not entry.nominated  # a nomination bound: placed now, which listeners must hear
            and entry.node == pod.node_name
            and (entry.pod.requests is pod.requests or entry.pod.requests == pod.requests)
        ):
            # The informer confirms what we assumed, or a change that costs nothing.
            self.placed.replaced(entry.pod, pod, self.nodes.row[entry.node])
            entry.pod = pod
            entry.assumed = False
            return
        self._unplace(pod.key)
        self._orphans.get(pod.node_name, {}).pop(pod.key, None)
        self._drop_assumed_orphan(pod)
        self._place(pod, pod.node_name, assumed=False)

    def update_pod(self, pod: PodInfo) -> None:
        if pod.node_name is None:
            return
        if pod.terminated:
            self.remove_pod(pod)
        else:
            self.add_pod(pod)

    def remove_pod(self, pod: PodInfo) -> None:
        """The pod ended or was deleted: that very pod (not one recreated under its name since),
        placed or waiting for its node to come back."""
        entry = self._pods.get(pod.key)
        if entry is not None and entry.pod.uid == pod.uid:
            self._unplace(pod.key)
        orphans = self._orphans.get(pod.node_name) if pod.node_name is not None else None
        if orphans is not None:
            orphan = orphans.get(pod.key)
            if orphan is not None and orphan.uid == pod.uid:
                del orphans[pod.key]
        self._drop_assumed_orphan(pod)

    def _drop_assumed_orphan(self, pod: PodInfo) -> None:
        """That very pod's assumption on a node that left (bound, ended or gone since; a pod
        deleted before its bind names no node)."""
        nodes = [pod.node_name] if pod.node_name is not None else list(self._assumed_orphans)
        for node in nodes:
            pods = self._assumed_orphans.get(node)
            if pods is not None:
                _drop(self._assumed_orphans, node, pods, pod)

    def add_node(self, node: NodeInfo) -> None:
        self.nodes.add(node)
        for pod in self._orphans.pop(node.name, {}).values():
            self._place(pod, node.name, assumed=False)
        for pod in self._assumed_orphans.pop(node.name, {}).values():
            if pod.key not in self._pods:  # not placed meanwhile (a bind seen before the node)
                self._place(pod, node.name, assumed=True)

    def update_node(self, node: NodeInfo) -> None:
        if node.name in self.nodes.row:
            self.nodes.update(node)
        else:
            self.add_node(node)

    def remove_node(self, node: NodeInfo) -> None:
        if node.name not in self.nodes.row:
            return
        row = self.nodes.row[node.name]
        for pod in list(self.placed.on_row(row)):
            entry = self._pods.pop(pod.key)
            self.placed.removed(entry.pod, row)
            # A bound or assumed pod stays known so it is counted if the node comes back.
            if not entry.nominated:
                orphans = self._assumed_orphans if entry.assumed else self._orphans
                orphans.setdefault(node.name, {})[pod.key] = entry.pod
        self.nodes.remove(node.name)

    # ----- reads
    def pods_on(self, node: NodeName) -> list[PodInfo]:
        row = self.nodes.row.get(node)
        return [] if row is None else list(self.placed.on_row(row))

    def bound_pods(self) -> list[PodInfo]:
        """Pods the informer has confirmed on a node (assumed ones excluded)."""
        return [entry.pod for entry in self._pods.values() if not entry.assumed]

    def pod_node(self, key: PodKey) -> NodeName | None:
        entry = self._pods.get(key)
        return entry.node if entry else None

    def __len__(self) -> int:
        return len(self._pods)

    def check_consistency(self) -> None:
        """Recompute every node's requests from its pods; raises if the arrays drifted (tests)."""
        table = self.nodes
        expected = np.zeros_like(table.requested)
        nonzero = np.zeros_like(table.nonzero_requested)
        for entry in self._pods.values():
            row = table.row[entry.node]
            for name, value in entry.pod.requests.items():
                expected[row, table.column[name]] += value
            expected[row, POD_COLUMN] += 1
            nonzero[row] += entry.pod.nonzero_cpu_memory
        if not np.array_equal(expected[: table.size], table.requested[: table.size]):
            raise AssertionError("requested arrays drifted from the pods in the cache")
        if not np.array_equal(nonzero[: table.size], table.nonzero_requested[: table.size]):
            raise AssertionError("non-zero requested arrays drifted from the pods in the cache")


def _drop(
    orphans: dict[NodeName, dict[PodKey, PodInfo]], node: NodeName, pods: dict[PodKey, PodInfo], pod: PodInfo
) -> None:
    """Remove that very pod (not one recreated under its name) from a node's orphans."""
    orphan = pods.get(pod.key)
    if orphan is not None and orphan.uid == pod.uid:
        del pods[pod.key]
        if not pods:
            del orphans[node]
