"""LeastAllocated: prefer nodes with the most free cpu and memory (spreading)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pysched.framework.fused import FusedTerm, ResourceWeights
from pysched.framework.interfaces import Handle
from pysched.framework.registry import PluginSpec
from pysched.plugins.node_resources.reference import least_requested
from pysched.plugins.node_resources.resource_allocation import AllocationScore, PerResource, ResourceWeightArgs

NAME = "LeastAllocated"


@dataclass(frozen=True, slots=True)
class LeastAllocated(AllocationScore):
    NAME: ClassVar[str] = NAME
    fused_term: ClassVar[FusedTerm] = FusedTerm.LEAST_ALLOCATED
    per_resource: ClassVar[PerResource] = staticmethod(least_requested)


def factory(args: ResourceWeightArgs, handle: Handle) -> LeastAllocated:
    return LeastAllocated(ResourceWeights(args.cpu_weight, args.memory_weight))


SPEC = PluginSpec(NAME, ResourceWeightArgs, factory, LeastAllocated)
