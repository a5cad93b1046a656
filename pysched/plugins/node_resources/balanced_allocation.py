"""BalancedAllocation: prefer nodes where cpu and memory would be used in equal proportion."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pysched.api.objects import PodInfo
from pysched.api.resources import CPU, MEMORY
from pysched.framework.cycle_state import CycleState
from pysched.framework.fused import FusedTerm
from pysched.framework.interfaces import Handle
from pysched.framework.nodetable import I64, Bools, NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.plugins.node_resources.reference import balanced_allocation

NAME = "BalancedAllocation"


@dataclass(frozen=True, slots=True)
class BalancedAllocation:
    """Fused into the kernel (`fused_term`); `score_batch` is the numpy reference."""

    NAME: ClassVar[str] = NAME
    fused_term: ClassVar[FusedTerm] = FusedTerm.BALANCED_ALLOCATION

    def fused_params(self) -> None:
        return None

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        size = nodes.size
        return balanced_allocation(
            pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0), nodes.allocatable[:size], nodes.requested[:size]
        )


def factory(args: NoArgs, handle: Handle) -> BalancedAllocation:
    return BalancedAllocation()


SPEC = PluginSpec(NAME, NoArgs, factory, BalancedAllocation)
