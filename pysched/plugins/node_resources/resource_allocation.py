"""What LeastAllocated and MostAllocated share: args, the weighted mean over cpu and memory, and
the plugin shape. Each plugin supplies only its per-resource formula."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from pysched.api.objects import PodInfo
from pysched.framework.cycle_state import CycleState
from pysched.framework.fused import ResourceWeights
from pysched.framework.nodetable import I64, Bools, NodeTable
from pysched.framework.registry import ArgsError

PerResource = Callable[[npt.NDArray[np.int64], npt.NDArray[np.int64]], npt.NDArray[np.int64]]


@dataclass(frozen=True, slots=True)
class ResourceWeightArgs:
    cpu_weight: int = 1
    memory_weight: int = 1

    def validate(self) -> None:
        for key, value in (("cpuWeight", self.cpu_weight), ("memoryWeight", self.memory_weight)):
            if not 0 <= value <= 100:
                raise ArgsError(key, f"must be an integer from 0 to 100, got {value}")
        if self.cpu_weight == 0 and self.memory_weight == 0:
            raise ArgsError("cpuWeight", "cpuWeight and memoryWeight cannot both be 0")


def weighted_mean(
    per_resource: PerResource,
    nonzero_cpu: int,
    nonzero_memory: int,
    allocatable: npt.NDArray[np.int64],
    nonzero_requested: npt.NDArray[np.int64],
    cpu_weight: int = 1,
    memory_weight: int = 1,
) -> npt.NDArray[np.int64]:
    """kube-scheduler's resource-allocation scorer: the weighted integer mean over cpu and memory
    of `per_resource(used after placing the pod, allocatable)`, leaving out resources the node
    does not have (allocatable 0). Pods without requests count as 100m / 200Mi."""
    total = np.zeros(allocatable.shape[0], np.int64)
    weight_sum = np.zeros(allocatable.shape[0], np.int64)
    for column, request, weight in ((0, nonzero_cpu, cpu_weight), (1, nonzero_memory, memory_weight)):
        cap = allocatable[:, column]
        has = cap != 0
        score = per_resource(nonzero_requested[:, column] + request, np.where(has, cap, 1))
        total += np.where(has, score * weight, 0)
        weight_sum += np.where(has, weight, 0)
    return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0)


@dataclass(frozen=True, slots=True)
class AllocationScore:
    """A fused score (`fused_term`); `score_batch` is its numpy reference."""

    per_resource: ClassVar[PerResource]
    weights: ResourceWeights = field(default_factory=ResourceWeights)

    def fused_params(self) -> ResourceWeights:
        return self.weights

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        cpu, memory = pod.nonzero_cpu_memory
        size = nodes.size
        return weighted_mean(
            type(self).per_resource,
            cpu,
            memory,
            nodes.allocatable[:size],
            nodes.nonzero_requested[:size],
            self.weights.cpu,
            self.weights.memory,
        )
