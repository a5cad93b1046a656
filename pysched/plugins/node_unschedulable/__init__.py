"""NodeUnschedulable: cordoned nodes (`spec.unschedulable`) take only pods that tolerate it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pysched.api.objects import PodInfo, Taint
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import PLACEMENT_EVENTS, EventRegistration
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.masks import mask_result
from pysched.framework.nodetable import Bools, NodeTable
from pysched.framework.registry import NoArgs, PluginSpec

NAME = "NodeUnschedulable"
REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def tolerates_unschedulable(pod: PodInfo) -> bool:
    if not pod.tolerations:  # most pods: no generator per cycle
        return False
    return any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations)


@dataclass(frozen=True, slots=True)
class NodeUnschedulable:
    NAME: ClassVar[str] = NAME

    def mask_key(self, pod: PodInfo) -> bool:
        return tolerates_unschedulable(pod)

    def node_mask(self, pod: PodInfo, nodes: NodeTable) -> Bools:
        if tolerates_unschedulable(pod):
            return np.ones(nodes.size, np.bool_)
        return ~nodes.unschedulable[: nodes.size]

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        return mask_result(self.node_mask(pod, nodes), REASON, unresolvable=True)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return PLACEMENT_EVENTS


def factory(args: NoArgs, handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()


SPEC = PluginSpec(NAME, NoArgs, factory, NodeUnschedulable)
