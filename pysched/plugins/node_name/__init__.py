"""NodeName: a pod that names a node (`spec.nodeName`) fits only that node."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pysched.api.ids import NodeName as NodeNameId
from pysched.api.objects import PodInfo
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import EventKind, EventRegistration
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.masks import mask_result
from pysched.framework.nodetable import Bools, NodeTable
from pysched.framework.registry import NoArgs, PluginSpec

NAME = "NodeName"
REASON = "node(s) didn't match the requested node name"


@dataclass(frozen=True, slots=True)
class NodeName:
    NAME: ClassVar[str] = NAME

    def mask_key(self, pod: PodInfo) -> NodeNameId | None:
        return pod.node_name

    def node_mask(self, pod: PodInfo, nodes: NodeTable) -> Bools:
        if pod.node_name is None:
            return np.ones(nodes.size, np.bool_)
        mask = np.zeros(nodes.size, np.bool_)
        row = nodes.row.get(pod.node_name)
        if row is not None:
            mask[row] = True
        return mask

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        return mask_result(self.node_mask(pod, nodes), REASON, unresolvable=True)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (EventRegistration(EventKind.NODE_ADD),)


def factory(args: NoArgs, handle: Handle) -> NodeName:
    return NodeName()


SPEC = PluginSpec(NAME, NoArgs, factory, NodeName)
