"""The fused filter-and-score kernel: one pod against every node, compiled with numba.

Filters and scores that depend only on resources and precomputed node masks are fused into
one pass over the node arrays (DESIGN §4 rule 4). The meaning of each term is defined by the
numpy reference of the plugin that owns it (plugins/*/reference.py); hypothesis tests hold the
kernel to those references. Integer arithmetic follows kube-scheduler's so that scores agree to
the unit. Every feasible node is scored: there is no sampling.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numba
import numpy as np
import numpy.typing as npt

MAX_NODE_SCORE = 100

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

# Compiled code is cached on disk where NUMBA_CACHE_DIR points (a writable folder in the image).
_CACHE = os.environ.get("PYSCHED_NUMBA_CACHE", "1") != "0"


@dataclass(frozen=True, slots=True)
class KernelWeights:
    """What a profile asks of the fused kernel: which filter runs and each score's weight."""

    resource_fit: bool = True
    least_allocated: int = 0
    most_allocated: int = 0
    balanced_allocation: int = 0
    cpu_weight: int = 1  # resource weights of Least/MostAllocated (kube-scheduler default 1:1)
    memory_weight: int = 1

    @property
    def scores(self) -> bool:
        return bool(self.least_allocated or self.most_allocated or self.balanced_allocation)


@numba.njit(cache=_CACHE, nogil=True, inline="always")
def _floor_div(num: int, den: int) -> int:  # pragma: no cover - compiled
    # A float division corrected to the exact integer floor: much cheaper than an int64 division.
    q = np.int64(num / den)
    if q * den > num:
        q -= 1
    elif (q + 1) * den <= num:
        q += 1
    return q


@numba.njit(cache=_CACHE, nogil=True, boundscheck=False)
def filter_and_score(  # pragma: no cover - compiled; covered through the parity tests
    request: I64,
    request_columns: I64,
    nonzero_cpu: int,
    nonzero_memory: int,
    allocatable: I64,
    requested: I64,
    nonzero_requested: I64,
    mask: Bools,
    resource_fit: bool,
    w_least: int,
    w_most: int,
    w_balanced: int,
    cpu_weight: int,
    memory_weight: int,
    scores_out: I64,
) -> tuple[int, int]:
    """Score every node that passes; returns (best row or -1, number of feasible nodes).

    `scores_out[i]` is the weighted score of row i, or -1 when the row is infeasible.
    Ties go to the lowest row, which keeps runs reproducible.
    """
    n = mask.shape[0]
    pod_column = 2
    best = -1
    best_score = np.int64(-1)
    feasible = 0
    balanced_on = w_balanced != 0 and (request[0] != 0 or request[1] != 0)
    for i in range(n):
        if not mask[i]:
            scores_out[i] = -1
            continue
        if resource_fit:
            if requested[i, pod_column] + 1 > allocatable[i, pod_column]:
                scores_out[i] = -1
                continue
            fits = True
            for k in range(request_columns.shape[0]):
                c = request_columns[k]
                if request[c] > allocatable[i, c] - requested[i, c]:
                    fits = False
                    break
            if not fits:
                scores_out[i] = -1
                continue
        feasible += 1
        total = np.int64(0)
        if w_least != 0 or w_most != 0:
            cap_cpu = allocatable[i, 0]
            cap_mem = allocatable[i, 1]
            used_cpu = nonzero_requested[i, 0] + nonzero_cpu
            used_mem = nonzero_requested[i, 1] + nonzero_memory
            least = np.int64(0)
            most = np.int64(0)
            weight_sum = np.int64(0)
            if cap_cpu != 0:
                weight_sum += cpu_weight
                if used_cpu <= cap_cpu:
                    least += _floor_div((cap_cpu - used_cpu) * MAX_NODE_SCORE, cap_cpu) * cpu_weight
                    most += _floor_div(used_cpu * MAX_NODE_SCORE, cap_cpu) * cpu_weight
                else:
                    most += MAX_NODE_SCORE * cpu_weight
            if cap_mem != 0:
                weight_sum += memory_weight
                if used_mem <= cap_mem:
                    least += _floor_div((cap_mem - used_mem) * MAX_NODE_SCORE, cap_mem) * memory_weight
                    most += _floor_div(used_mem * MAX_NODE_SCORE, cap_mem) * memory_weight
                else:
                    most += MAX_NODE_SCORE * memory_weight
            if weight_sum != 0:
                total += w_least * _floor_div(least, weight_sum) + w_most * _floor_div(most, weight_sum)
        if balanced_on:
            fractions = 0
            f0 = 0.0
            f1 = 0.0
            if allocatable[i, 0] != 0:
                f0 = min((requested[i, 0] + request[0]) / allocatable[i, 0], 1.0)
                fractions += 1
            if allocatable[i, 1] != 0:
                f1 = min((requested[i, 1] + request[1]) / allocatable[i, 1], 1.0)
                fractions += 1
            std = abs(f0 - f1) / 2.0 if fractions == 2 else 0.0
            total += w_balanced * np.int64((1.0 - std) * MAX_NODE_SCORE)
        scores_out[i] = total
        if total > best_score:
            best_score = total
            best = i
    return best, feasible


def run_kernel(
    weights: KernelWeights,
    request: I64,
    nonzero_cpu: int,
    nonzero_memory: int,
    allocatable: I64,
    requested: I64,
    nonzero_requested: I64,
    mask: Bools,
    scores_out: I64,
) -> tuple[int, int]:
    """Typed entry point; the request columns checked are those the pod asks for (pods aside)."""
    columns = np.flatnonzero(request).astype(np.int64)
    columns = columns[columns != 2]
    return filter_and_score(  # type: ignore[no-any-return]
        request,
        columns,
        nonzero_cpu,
        nonzero_memory,
        allocatable,
        requested,
        nonzero_requested,
        mask,
        weights.resource_fit,
        weights.least_allocated,
        weights.most_allocated,
        weights.balanced_allocation,
        weights.cpu_weight,
        weights.memory_weight,
        scores_out,
    )


def warm_up() -> None:
    """Compile (or load from the numba cache) before the scheduler says it is ready."""
    allocatable = np.array([[1000, 1 << 30, 10, 0]], np.int64)
    zeros = np.zeros_like(allocatable)
    run_kernel(
        KernelWeights(least_allocated=1, balanced_allocation=1),
        np.array([100, 1 << 20, 0, 0], np.int64),
        100,
        1 << 20,
        allocatable,
        zeros,
        np.zeros((1, 2), np.int64),
        np.ones(1, np.bool_),
        np.zeros(1, np.int64),
    )
