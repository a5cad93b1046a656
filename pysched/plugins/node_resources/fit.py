"""NodeResourcesFit: the node must have room for every resource the pod requests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pysched.api.objects import PodInfo
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import EventKind, EventRegistration
from pysched.framework.fused import FusedTerm
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.plugins.node_resources.reference import beyond_allocatable, fits, insufficient

NAME = "NodeResourcesFit"
MAX_REFUSED_SHAPES = 8  # each a comparison per check: a few shapes cover the crowds met in practice


@dataclass(slots=True)
class _Refused:
    """Requests found to fit no node as of one state of the node table (`seq`): a request at least
    as large in every resource fits none either. A pod refused and retried in a crowd of others
    is then refused without looking at the nodes again."""

    seq: int = -1
    requests: list[np.ndarray] = field(default_factory=list)

    def covers(self, seq: int, request: np.ndarray) -> bool:
        # A new resource name widens the table without a change of rows: older vectors are shorter.
        if seq != self.seq or (self.requests and self.requests[0].shape != request.shape):
            self.seq, self.requests = seq, []
            return False
        return any(request is r or bool((request >= r).all()) for r in self.requests)

    def add(self, request: np.ndarray) -> None:
        if len(self.requests) < MAX_REFUSED_SHAPES:
            self.requests.append(request)


@dataclass(frozen=True, slots=True)
class NodeResourcesFit:
    """Fused into the kernel (`fused_term`); `filter_batch` is the reference and the diagnosis.
    With the scheduler's `handle`, it can tell that a pod it refused still fits nowhere."""

    NAME: ClassVar[str] = NAME
    fused_term: ClassVar[FusedTerm] = FusedTerm.RESOURCE_FIT
    handle: Handle | None = None
    _refused: _Refused = field(default_factory=_Refused, compare=False, repr=False)

    def fused_params(self) -> None:
        return None

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        request = nodes.vector(pod.requests)
        size = nodes.size
        allocatable = nodes.allocatable[:size]
        reasons = insufficient(request, allocatable, nodes.requested[:size], nodes.resources.names)
        feasible = np.ones(size, np.bool_)
        for rows in reasons.values():
            feasible &= ~rows
        # A node whose whole allocatable is short of the request: no preemption can make room
        # there (kube-scheduler v1.36's InsufficientResource.Unresolvable).
        return FilterResult(feasible, reasons, beyond_allocatable(request, allocatable))

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (
            EventRegistration(EventKind.NODE_ADD),
            EventRegistration(EventKind.NODE_UPDATE),
            EventRegistration(EventKind.POD_DELETE),
            EventRegistration(EventKind.POD_RESIZE_DOWN),
        )

    def still_rejects(self, pod: PodInfo) -> bool:
        """No node has room for the pod now, and no lower-priority pod is placed that a
        preemption could take room from: a cycle would end as the last one did."""
        handle = self.handle
        if handle is None or handle.pods.any_below(pod.priority):
            return False
        nodes = handle.nodes
        request, seq = nodes.vector(pod.requests), nodes.change_seq
        if self._refused.covers(seq, request):
            return True
        size = nodes.size
        if fits(request, nodes.allocatable[:size], nodes.requested[:size], nodes.resources.names).any():
            return False
        self._refused.add(request)
        return True


def factory(args: NoArgs, handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit(handle)


SPEC = PluginSpec(NAME, NoArgs, factory, NodeResourcesFit)
