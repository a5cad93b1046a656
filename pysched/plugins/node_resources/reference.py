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


def beyond_allocatable(request: npt.NDArray[np.int64], allocatable: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Rows where some resource the pod asks for (the pod count aside) exceeds the node's whole
    allocatable: refused there whatever runs on it."""
    asked = request.copy()
    asked[POD_COLUMN] = 0
    beyond = np.zeros(allocatable.shape[0], np.bool_)
    for column in np.flatnonzero(asked):
        beyond |= allocatable[:, column] < asked[column]
    return beyond


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


def balance_score(
    cpu_fraction: npt.NDArray[np.float64], memory_fraction: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """kube's balancedResourceScore for two resources: `(1 - |f_cpu - f_mem| / 2) * 100`, truncated."""
    return ((1.0 - np.abs(cpu_fraction - memory_fraction) / 2.0) * MAX_NODE_SCORE).astype(np.int64)


def balanced_allocation(
    cpu: int,
    memory: int,
    allocatable: npt.NDArray[np.int64],
    requested: npt.NDArray[np.int64],
    after: bool = False,
) -> npt.NDArray[np.int64]:
    """Per node, how much placing the pod improves the balance of cpu and memory use (kube-scheduler
    v1.36's balancedResourceScorer): `50 + (50 + with - without) // 2`, where `with` and `without`
    are the balance scores (`balance_score`, 50..100) with and without the pod, so 75 when the pod
    changes nothing, towards 100 when it evens the node out, towards 50 when it skews it. With
    `after`, the balance score with the pod alone (kube-scheduler up to v1.35).

    Uses the pod's actual requests (not the non-zero defaults); fractions are capped at 1; a node
    lacking cpu or memory has nothing to balance (both scores 100). A pod that requests neither cpu
    nor memory is skipped (every node scores 0).
    """
    n = allocatable.shape[0]
    if cpu == 0 and memory == 0:
        return np.zeros(n, np.int64)
    both = (allocatable[:, 0] != 0) & (allocatable[:, 1] != 0)
    caps = np.where(both[:, None], allocatable[:, :2], 1)

    def score(cpu_used: npt.NDArray[np.int64], memory_used: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        cpu_fraction = np.minimum(cpu_used / caps[:, 0], 1.0)
        memory_fraction = np.minimum(memory_used / caps[:, 1], 1.0)
        return np.where(both, balance_score(cpu_fraction, memory_fraction), MAX_NODE_SCORE)

    with_pod = score(requested[:, 0] + cpu, requested[:, 1] + memory)
    if after:
        return with_pod.astype(np.int64)
    without_pod = score(requested[:, 0], requested[:, 1])
    half = MAX_NODE_SCORE // 2
    return (half + (half + with_pod - without_pod) // 2).astype(np.int64)
