"""Numpy reference of MostAllocated (kube-scheduler's `mostRequestedScore`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from pysched.plugins.resource_allocation import MAX, weighted_mean


def most_requested(used: npt.NDArray[np.int64], cap: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Used share after placing the pod, in 0..100, capped at the node's capacity."""
    return np.minimum(used, cap) * MAX // cap


def most_allocated(
    nonzero_cpu: int,
    nonzero_memory: int,
    allocatable: npt.NDArray[np.int64],
    nonzero_requested: npt.NDArray[np.int64],
    cpu_weight: int = 1,
    memory_weight: int = 1,
) -> npt.NDArray[np.int64]:
    return weighted_mean(
        most_requested, nonzero_cpu, nonzero_memory, allocatable, nonzero_requested, cpu_weight, memory_weight
    )
