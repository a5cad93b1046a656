"""Numpy reference of UrgencyPlacement: the meaning the fused kernel term is held to."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pysched.framework.nodetable import MAX_NODE_SCORE


def headroom(
    nonzero_cpu: int, cpu: int, allocatable: npt.NDArray[np.int64], requested: npt.NDArray[np.int64], factor: int
) -> npt.NDArray[np.int64]:
    """Urgent pods: room to grow in place. The free cpu left once the pod is placed, as a share of
    `factor` times the pod's (non-zero) cpu request, capped at 100: more room than that does not
    help the pod, so such nodes tie and other scores decide."""
    free = np.maximum(allocatable[:, 0] - requested[:, 0] - cpu, 0)
    want = nonzero_cpu * factor
    if want <= 0:
        return np.zeros(allocatable.shape[0], np.int64)
    score: npt.NDArray[np.int64] = np.minimum(free, want) * MAX_NODE_SCORE // want
    return score


def best_fit(
    nonzero_cpu: int, cpu: int, allocatable: npt.NDArray[np.int64], requested: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Relaxed pods: pack. The share of the node's free cpu hole the pod fills,
    `request * 100 // (request + free after placing it)`: 100 for an exact fit, low on a big hole."""
    free = np.maximum(allocatable[:, 0] - requested[:, 0] - cpu, 0)
    score: npt.NDArray[np.int64] = nonzero_cpu * MAX_NODE_SCORE // (nonzero_cpu + free)
    return score


def gpu_fit(
    gpu: int, gpu_column: int, allocatable: npt.NDArray[np.int64], requested: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """GPU pods: the same best fit over GPUs, so a partly used GPU node is filled before an empty one
    is broken into. 0 on nodes without GPUs (the fit check rejects them anyway)."""
    cap = allocatable[:, gpu_column]
    free = np.maximum(cap - requested[:, gpu_column] - gpu, 0)
    return np.where(cap != 0, gpu * MAX_NODE_SCORE // (gpu + free), 0)


def urgency_placement(
    urgent: bool,
    nonzero_cpu: int,
    cpu: int,
    gpu: int,
    gpu_column: int,
    allocatable: npt.NDArray[np.int64],
    requested: npt.NDArray[np.int64],
    grow_headroom_weight: int = 1,
    pack_weight: int = 1,
    gpu_fragment_weight: int = 1,
    headroom_factor: int = 2,
) -> npt.NDArray[np.int64]:
    """Per node, 0..100: the integer weighted mean of the terms that apply to the pod:
    `headroom` (urgent) or `best_fit` (relaxed) with their weight, plus `gpu_fit` when the pod
    requests GPUs. A cpu term scores 0 on a node without cpu. 0 when no term applies."""
    n = allocatable.shape[0]
    cpu_weight = grow_headroom_weight if urgent else pack_weight
    gpu_weight = gpu_fragment_weight if gpu > 0 and gpu_column >= 0 else 0
    if cpu_weight + gpu_weight == 0:
        return np.zeros(n, np.int64)
    total = np.zeros(n, np.int64)
    if cpu_weight:
        term = (
            headroom(nonzero_cpu, cpu, allocatable, requested, headroom_factor)
            if urgent
            else best_fit(nonzero_cpu, cpu, allocatable, requested)
        )
        total += cpu_weight * np.where(allocatable[:, 0] != 0, term, 0)
    if gpu_weight:
        total += gpu_weight * gpu_fit(gpu, gpu_column, allocatable, requested)
    return total // (cpu_weight + gpu_weight)
