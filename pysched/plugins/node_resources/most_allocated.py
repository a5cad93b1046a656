"""MostAllocated: prefer the fullest nodes (bin packing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pysched.framework.fused import FusedTerm, ResourceWeights
from pysched.framework.interfaces import Handle
from pysched.framework.registry import PluginSpec
from pysched.plugins.node_resources.reference import most_requested
from pysched.plugins.node_resources.resource_allocation import AllocationScore, PerResource, ResourceWeightArgs

NAME = "MostAllocated"


@dataclass(frozen=True, slots=True)
class MostAllocated(AllocationScore):
    NAME: ClassVar[str] = NAME
    fused_term: ClassVar[FusedTerm] = FusedTerm.MOST_ALLOCATED
    per_resource: ClassVar[PerResource] = staticmethod(most_requested)


def factory(args: ResourceWeightArgs, handle: Handle) -> MostAllocated:
    return MostAllocated(ResourceWeights(args.cpu_weight, args.memory_weight))


SPEC = PluginSpec(NAME, ResourceWeightArgs, factory, MostAllocated)
