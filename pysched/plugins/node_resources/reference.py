"""Numpy references of the NodeResources family: the meaning the fused kernel is held to.

The fit check is kube-scheduler's `fitsRequest`; LeastAllocated and MostAllocated are its
`leastRequestedScore` / `mostRequestedScore` under the shared weighted mean
(`resource_allocation.weighted_mean`); BalancedAllocation is its `balancedResourceScorer`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pysched.framework.nodetable import MAX_NODE_SCORE, POD_COLUMN
from pysched.plugins.node_resources.resource_allocation import weighted_mean


def insufficient(
    request: npt.NDArray[np.int64],
    allocatable: npt.NDArray[np.int64],
    requested: npt.NDArray[np.int64],
    names: Sequence[str],
) -> dict[str, npt.NDArray[np.bool_]]:
    """Reason -> rows failing for it. The pod count is always checked; any other resource only
    when the pod asks for it, against allocatable minus what is already requested."""
    out = {"Too many pods": requested[:, POD_COLUMN] + 1 > allocatable[:, POD_COLUMN]}
    for column, name in enumerate(names):
        if column == POD_COLUMN or request[column] == 0:
            continue
        out[f"Insufficient {name}"] = request[column] > allocatable[:, column] - requested[:, column]
    return out


def fits(
    request: npt.NDArray[np.int64],
    allocatable: npt.NDArray[np.int64],
    requested: npt.NDArray[np.int64],
    names: Sequence[str],
) -> npt.NDArray[np.bool_]:
    ok = np.ones(allocatable.shape[0], np.bool_)
    for rows in insufficient(request, allocatable, requested, names).values():
        ok &= ~rows
    return ok


def least_requested(used: npt.NDArray[np.int64], cap: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Free share after placing the pod, in 0..100; 0 when the node would be overcommitted."""
    return np.where(used > cap, 0, (cap - used) * MAX_NODE_SCORE // cap)


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


def most_requested(used: npt.NDArray[np.int64], cap: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Used share after placing the pod, in 0..100, capped at the node's capacity."""
    return np.minimum(used, cap) * MAX_NODE_SCORE // cap


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


def balanced_allocation(
    cpu: int, memory: int, allocatable: npt.NDArray[np.int64], requested: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Per node: (1 - spread of the cpu and memory fractions after placing the pod) * 100.

    Uses the pod's actual requests (not the non-zero defaults); fractions are capped at 1; with
    two resources the spread is |f_cpu - f_mem| / 2; a resource the node lacks is left out.
    A pod that requests neither cpu nor memory is skipped (every node scores 0).
    """
    n = allocatable.shape[0]
    if cpu == 0 and memory == 0:
        return np.zeros(n, np.int64)
    fractions = []
    present = []
    for column, request in ((0, cpu), (1, memory)):
        cap = allocatable[:, column]
        has = cap != 0
        fractions.append(np.where(has, np.minimum((requested[:, column] + request) / np.where(has, cap, 1), 1.0), 0.0))
        present.append(has)
    both = present[0] & present[1]
    std = np.where(both, np.abs(fractions[0] - fractions[1]) / 2.0, 0.0)
    return ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)
