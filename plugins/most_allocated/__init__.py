"""MostAllocated: prefer the fullest nodes (bin packing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pysched.plugins.most_allocated.reference import most_allocated
from pysched.plugins.resource_weights import ResourceWeightArgs

from pysched.cache import NodeTable
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import I64, Bools, Handle
from pysched.framework.registry import PluginSpec
from pysched.objects import PodInfo

NAME = "MostAllocated"


@dataclass(frozen=True, slots=True)
class MostAllocated:
    """Fused into the kernel (`kernel_score`); `score_batch` is the numpy reference."""

    NAME: ClassVar[str] = NAME
    kernel_score: ClassVar[str] = NAME
    resource_weights: tuple[int, int] = (1, 1)

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        cpu, memory = pod.nonzero_cpu_memory
        size = nodes.size
        return most_allocated(
            cpu, memory, nodes.allocatable[:size], nodes.nonzero_requested[:size], *self.resource_weights
        )


def factory(args: ResourceWeightArgs, handle: Handle) -> MostAllocated:
    return MostAllocated((args.cpu_weight, args.memory_weight))


SPEC = PluginSpec(NAME, ResourceWeightArgs, factory, MostAllocated)
