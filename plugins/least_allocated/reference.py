"""Numpy reference of LeastAllocated (kube-scheduler's `leastRequestedScore`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

MAX = 100


def least_allocated(
    nonzero_cpu: int,
    nonzero_memory: int,
    allocatable: npt.NDArray[np.int64],
    nonzero_requested: npt.NDArray[np.int64],
    cpu_weight: int = 1,
    memory_weight: int = 1,
) -> npt.NDArray[np.int64]:
    """Per node: weighted mean over cpu and memory of (free after placing the pod) * 100 / allocatable.

    Pods without requests count as 100m / 200Mi (non-zero requests); a resource the node does not
    have (allocatable 0) is left out of the mean; a node that would be overcommitted scores 0 for it.
    """
    total = np.zeros(allocatable.shape[0], np.int64)
    weight_sum = np.zeros(allocatable.shape[0], np.int64)
    for column, request, weight in ((0, nonzero_cpu, cpu_weight), (1, nonzero_memory, memory_weight)):
        cap = allocatable[:, column]
        used = nonzero_requested[:, column] + request
        has = cap != 0
        safe = np.where(has, cap, 1)
        score = np.where(used > cap, 0, (cap - used) * MAX // safe)
        total += np.where(has, score * weight, 0)
        weight_sum += np.where(has, weight, 0)
    return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0)
