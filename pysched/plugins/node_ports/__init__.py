"""NodePorts: a pod's host ports must be free on the node (kube-scheduler's nodeports plugin).

Used ports are counted per node row from the `Handle.pods` subscription, indexed both by the
exact bind (hostIP, protocol, port) and by (protocol, port), so a filter costs what the pod's
own ports touch, never a scan of the placed pods."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from pysched.api.features import HOST_PORTS, PodFeatures
from pysched.api.objects import PodInfo
from pysched.api.ports import WILDCARD_IP, HostPort
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import ClusterEvent, EventKind, EventRegistration, QueueingHint
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SKIP, SUCCESS, Status

NAME = "NodePorts"
REASON = "node(s) didn't have free ports for the requested pod ports"

_Counts = dict[int, int]  # row -> how many placed binds


def _count(index: dict[object, _Counts], key: object, row: int, delta: int) -> None:
    rows = index.setdefault(key, {})
    left = rows.get(row, 0) + delta
    if left > 0:
        rows[row] = left
        return
    rows.pop(row, None)
    if not rows:
        del index[key]


class NodePorts:
    """PreFilter (Skip without host ports), Filter, and requeueing on freed ports or new nodes."""

    NAME: ClassVar[str] = NAME
    __slots__ = ("_by_bind", "_by_port")

    def __init__(self, handle: Handle) -> None:
        self._by_bind: dict[object, _Counts] = {}  # HostPort -> rows binding exactly it
        self._by_port: dict[object, _Counts] = {}  # (protocol, port) -> rows binding it on any IP
        handle.pods.subscribe(self, HOST_PORTS)  # only pods with host ports hold any

    # ----- PlacementListener
    def pod_placed(self, pod: PodInfo, row: int) -> None:
        for bind in pod.host_ports:
            _count(self._by_bind, bind, row, 1)
            _count(self._by_port, (bind.protocol, bind.port), row, 1)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        for bind in pod.host_ports:
            _count(self._by_bind, bind, row, -1)
            _count(self._by_port, (bind.protocol, bind.port), row, -1)

    # ----- what is used
    def conflicting_rows(self, want: HostPort) -> list[int]:
        """Rows where `want` collides with a placed bind (kube's HostPortInfo.CheckConflict)."""
        if want.ip == WILDCARD_IP:
            return list(self._by_port.get((want.protocol, want.port), ()))
        rows = list(self._by_bind.get(want, ()))
        rows.extend(self._by_bind.get(HostPort(WILDCARD_IP, want.protocol, want.port), ()))
        return rows

    def used_binds(self) -> dict[int, set[HostPort]]:
        """Every row's placed binds (for tests against a recomputation)."""
        out: dict[int, set[HostPort]] = {}
        for bind, rows in self._by_bind.items():
            assert isinstance(bind, HostPort)
            for row in rows:
                out.setdefault(row, set()).add(bind)
        return out

    # ----- extension points
    def acts_on(self) -> PodFeatures:
        return HOST_PORTS

    @staticmethod
    def stated_constraint(pod: PodInfo) -> str | None:
        return "host ports" if pod.host_ports else None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        return SUCCESS if pod.host_ports else SKIP

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        taken = np.zeros(nodes.size, np.bool_)
        for want in pod.host_ports:
            rows = self.conflicting_rows(want)
            if rows:
                taken[np.asarray(rows, np.int64)] = True
        return FilterResult(~taken, {REASON: taken})

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (
            EventRegistration(EventKind.POD_DELETE, freed_a_wanted_port),
            EventRegistration(EventKind.NODE_ADD),
        )


def freed_a_wanted_port(pod: PodInfo, event: ClusterEvent) -> QueueingHint:
    """A deleted (or finished) pod helps only when one of its host ports collides with one the
    waiting pod wants."""
    gone = event.old
    if not isinstance(gone, PodInfo):
        return QueueingHint.QUEUE
    for had in gone.host_ports:
        if any(had.conflicts(want) for want in pod.host_ports):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def factory(args: NoArgs, handle: Handle) -> NodePorts:
    return NodePorts(handle)


SPEC = PluginSpec(NAME, NoArgs, factory, NodePorts)
