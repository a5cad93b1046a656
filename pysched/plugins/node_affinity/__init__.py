"""NodeAffinity: nodeSelector and required node affinity (matchExpressions / matchFields)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from pysched.api.objects import PodInfo
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import PLACEMENT_EVENTS, EventRegistration
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.masks import affinity_mask, mask_result
from pysched.framework.nodetable import Bools, NodeTable
from pysched.framework.registry import NoArgs, PluginSpec

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    NAME: ClassVar[str] = NAME

    def mask_key(self, pod: PodInfo) -> Hashable:
        return (pod.node_selector, pod.required_terms)

    def node_mask(self, pod: PodInfo, nodes: NodeTable) -> Bools:
        return affinity_mask(pod, nodes)

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        return mask_result(self.node_mask(pod, nodes), REASON, unresolvable=True)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return PLACEMENT_EVENTS


def factory(args: NoArgs, handle: Handle) -> NodeAffinity:
    return NodeAffinity()


SPEC = PluginSpec(NAME, NoArgs, factory, NodeAffinity)
