"""NodeDeclaredFeatures: a pod that needs a kubelet feature goes only to nodes declaring it
(kube-scheduler v1.36's plugin of that name, in its default set while its gate is on by default).
What a pod needs and what a node declares are read once, into `PodInfo.required_features` and
`NodeInfo.declared_features` (pysched/api/node_features.py); plain pods never reach it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pysched.api.features import NODE_FEATURES, PodFeatures
from pysched.api.objects import NodeInfo, PodInfo
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import ClusterEvent, EventKind, EventRegistration, QueueingHint
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.masks import mask_result
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SKIP, SUCCESS, Status

NAME = "NodeDeclaredFeatures"
REASON = "node(s) didn't match Pod's required features"


def declared_change(pod: PodInfo, event: ClusterEvent) -> QueueingHint:
    """A node update helps only when the node's declared features changed (kube's hint)."""
    old, new = event.old, event.new
    if isinstance(old, NodeInfo) and isinstance(new, NodeInfo) and old.declared_features == new.declared_features:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


@dataclass(frozen=True, slots=True)
class NodeDeclaredFeatures:
    NAME: ClassVar[str] = NAME

    def acts_on(self) -> PodFeatures:
        return NODE_FEATURES

    @staticmethod
    def stated_constraint(pod: PodInfo) -> str | None:
        if not pod.required_features:
            return None
        return "node features " + ", ".join(sorted(pod.required_features))

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        return SUCCESS if pod.required_features else SKIP

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        needed = pod.required_features
        declares = np.fromiter(
            (info is not None and needed <= info.declared_features for info in nodes.infos[: nodes.size]),
            np.bool_,
            nodes.size,
        )
        return mask_result(declares, REASON, unresolvable=True)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (EventRegistration(EventKind.NODE_ADD), EventRegistration(EventKind.NODE_UPDATE, declared_change))


def factory(args: NoArgs, handle: Handle) -> NodeDeclaredFeatures:
    return NodeDeclaredFeatures()


SPEC = PluginSpec(NAME, NoArgs, factory, NodeDeclaredFeatures)
