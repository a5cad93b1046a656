"""Numpy reference of MostAllocated (kube-scheduler's `mostRequestedScore`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

MAX = 100


def most_allocated(
    nonzero_cpu: int,
    nonzero_memory: int,
    allocatable: npt.NDArray[np.int64],
    nonzero_requested: npt.NDArray[np.int64],
    cpu_weight: int = 1,
    memory_weight: int = 1,
) -> npt.NDArray[np.int64]:
    """Per node: weighted mean over cpu and memory of (requested after placing the pod) * 100 /
    allocatable, capped at 100 (non-zero requests; resources the node lacks are left out)."""
    total = np.zeros(allocatable.shape[0], np.int64)
    weight_sum = np.zeros(allocatable.shape[0], np.int64)
    for column, request, weight in ((0, nonzero_cpu, cpu_weight), (1, nonzero_memory, memory_weight)):
        cap = allocatable[:, column]
        used = np.minimum(nonzero_requested[:, column] + request, cap)
        has = cap != 0
        score = used * MAX // np.where(has, cap, 1)
        total += np.where(has, score * weight, 0)
        weight_sum += np.where(has, weight, 0)
    return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0)
