"""Numpy reference of LeastAllocated (kube-scheduler's `leastRequestedScore`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from pysched.plugins.resource_allocation import MAX, weighted_mean


def least_requested(used: npt.NDArray[np.int64], cap: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Free share after placing the pod, in 0..100; 0 when the node would be overcommitted."""
    return np.where(used > cap, 0, (cap - used) * MAX // cap)


def least_allocated(
    nonzero_cpu: int,
    nonzero_memory: int,
    allocatable: npt.NDArray[np.int64],
    nonzero_requested: npt.NDArray[np.int64],
    cpu_weight: int = 1,
    memory_weight: int = 1,
) -> npt.NDArray[np.int64]:
    return weighted_mean(
        least_requested, nonzero_cpu, nonzero_memory, allocatable, nonzero_requested, cpu_weight, memory_weight
    )
