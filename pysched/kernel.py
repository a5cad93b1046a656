"""The fused filter-and-score kernel: one pod against every node, compiled with numba.

Filters and scores that depend only on resources and precomputed node masks are fused
(DESIGN §4 rule 4). The meaning of each term is defined by the numpy reference of the plugin
that owns it (plugins/*/reference.py); hypothesis tests hold the kernel to those references.
Integer results follow kube-scheduler's arithmetic so that scores agree to the unit.

Every feasible node is scored: there is no sampling. What makes it cheap is that a node's
score depends only on that node's state and on the few numbers of the pod that the score terms
read (its "score shape"). `ScoreCache` keeps one score array per shape and, between pods,
rescores only the rows that changed (usually the one node the previous pod landed on); the
per-pod pass is then just the fit check and the arg-max over all nodes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numba
import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from pysched.cache import NodeTable

MAX_NODE_SCORE = 100
POD_COLUMN = 2

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

# Compiled code is cached on disk (NUMBA_CACHE_DIR picks the folder; a read-only image sets it).
_CACHE = os.environ.get("PYSCHED_NUMBA_CACHE", "1") != "0"


@dataclass(frozen=True, slots=True)
class KernelWeights:
    """What a profile asks of the fused kernel: whether the fit filter runs and each score's weight."""

    resource_fit: bool = True
    least_allocated: int = 0
    most_allocated: int = 0
    balanced_allocation: int = 0
    cpu_weight: int = 1  # resource weights of Least/MostAllocated (kube-scheduler default 1:1)
    memory_weight: int = 1

    def params(self) -> I64:
        return np.array(
            [self.least_allocated, self.most_allocated, self.balanced_allocation, self.cpu_weight, self.memory_weight],
            np.int64,
        )


@numba.njit(cache=_CACHE, nogil=True, inline="always")
def _floor_div(num: np.int64, den: np.int64) -> np.int64:  # pragma: no cover - compiled
    # A float division corrected to the exact integer floor: cheaper than an int64 division.
    q = np.int64(num / den)
    if q * den > num:
        q -= 1
    elif (q + 1) * den <= num:
        q += 1
    return q


@numba.njit(cache=_CACHE, nogil=True, inline="always")
def _node_score(  # pragma: no cover - compiled
    i: int, shape: I64, params: I64, allocatable: I64, requested: I64, nonzero_requested: I64
) -> np.int64:
    """Weighted sum of the fused score terms for row i. shape = (nz_cpu, nz_mem, cpu, mem)."""
    w_least, w_most, w_balanced, cpu_weight, memory_weight = params[0], params[1], params[2], params[3], params[4]
    total = np.int64(0)
    cap_cpu = allocatable[i, 0]
    cap_mem = allocatable[i, 1]
    if w_least != 0 or w_most != 0:
        used_cpu = nonzero_requested[i, 0] + shape[0]
        used_mem = nonzero_requested[i, 1] + shape[1]
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
    if w_balanced != 0 and (shape[2] != 0 or shape[3] != 0):
        if cap_cpu != 0 and cap_mem != 0:
            f_cpu = min((requested[i, 0] + shape[2]) / cap_cpu, 1.0)
            f_mem = min((requested[i, 1] + shape[3]) / cap_mem, 1.0)
            std = abs(f_cpu - f_mem) / 2.0
        else:
            std = 0.0
        total += w_balanced * np.int64((1.0 - std) * MAX_NODE_SCORE)
    return total


@numba.njit(cache=_CACHE, nogil=True, boundscheck=False)
def score_rows(  # pragma: no cover - compiled
    rows: I64, shape: I64, params: I64, allocatable: I64, requested: I64, nonzero_requested: I64, scores: I64
) -> None:
    """Rescore the given rows (all rows when `rows` is empty is NOT implied: pass them)."""
    for k in range(rows.shape[0]):
        i = rows[k]
        scores[i] = _node_score(i, shape, params, allocatable, requested, nonzero_requested)


@numba.njit(cache=_CACHE, nogil=True, boundscheck=False)
def score_all(  # pragma: no cover - compiled
    shape: I64, params: I64, allocatable: I64, requested: I64, nonzero_requested: I64, scores: I64
) -> None:
    for i in range(scores.shape[0]):
        scores[i] = _node_score(i, shape, params, allocatable, requested, nonzero_requested)


@numba.njit(cache=_CACHE, nogil=True, boundscheck=False)
def select_node(  # pragma: no cover - compiled
    request: I64, columns: I64, resource_fit: bool, allocatable: I64, requested: I64, mask: Bools, scores: I64, out: I64
) -> tuple[int, int]:
    """Fit check and arg-max in one pass; returns (best row or -1, feasible count).

    `out[i]` is row i's score, or -1 when the row is infeasible. Ties go to the lowest row,
    which keeps runs reproducible.
    """
    best = -1
    best_score = np.int64(-1)
    feasible = 0
    for i in range(mask.shape[0]):
        ok = mask[i]
        if ok and resource_fit:
            if requested[i, POD_COLUMN] + 1 > allocatable[i, POD_COLUMN]:
                ok = False
            else:
                for k in range(columns.shape[0]):
                    c = columns[k]
                    if request[c] > allocatable[i, c] - requested[i, c]:
                        ok = False
                        break
        if ok:
            feasible += 1
            s = scores[i]
            out[i] = s
            if s > best_score:
                best_score = s
                best = i
        else:
            out[i] = -1
    return best, feasible


def score_shape(request: I64, nonzero_cpu: int, nonzero_memory: int) -> tuple[int, int, int, int]:
    """The pod numbers the fused scores read: non-zero cpu/memory, actual cpu/memory."""
    return (nonzero_cpu, nonzero_memory, int(request[0]), int(request[1]))


@dataclass(slots=True)
class _Scores:
    scores: I64
    seq: int
    size: int


@dataclass(slots=True)
class ScoreCache:
    """Fused score arrays per score shape, kept current by rescoring only the rows that changed."""

    weights: KernelWeights
    capacity: int = 256
    params: I64 = field(init=False)
    _entries: dict[tuple[int, int, int, int], _Scores] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.params = self.weights.params()

    def scores(self, shape: tuple[int, int, int, int], nodes: NodeTable) -> I64:
        size = nodes.size
        allocatable, requested, nonzero = (
            nodes.allocatable[:size],
            nodes.requested[:size],
            nodes.nonzero_requested[:size],
        )
        entry = self._entries.get(shape)
        seq = nodes.change_seq
        if entry is not None and entry.size == size and entry.seq == seq:
            return entry.scores
        shape_array = np.array(shape, np.int64)
        rows = nodes.changed_since(entry.seq) if entry is not None and entry.size == size else None
        if entry is None or rows is None:
            if entry is None and len(self._entries) >= self.capacity:
                self._entries.clear()  # many shapes: start over rather than grow without bound
            entry = _Scores(np.empty(size, np.int64), seq, size)
            self._entries[shape] = entry
            score_all(shape_array, self.params, allocatable, requested, nonzero, entry.scores)
        else:
            score_rows(rows, shape_array, self.params, allocatable, requested, nonzero, entry.scores)
            entry.seq = seq
        return entry.scores


def reference_scores(weights: KernelWeights, shape: tuple[int, int, int, int], nodes: NodeTable) -> I64:
    """Scores of every row computed from scratch (tests compare the cache against this)."""
    size = nodes.size
    out = np.empty(size, np.int64)
    score_all(
        np.array(shape, np.int64),
        weights.params(),
        nodes.allocatable[:size],
        nodes.requested[:size],
        nodes.nonzero_requested[:size],
        out,
    )
    return out


def warm_up() -> None:
    """Compile (or load from the numba cache) before the scheduler says it is ready."""
    allocatable = np.array([[1000, 1 << 30, 10, 0]], np.int64)
    zeros = np.zeros_like(allocatable)
    scores = np.zeros(1, np.int64)
    params = KernelWeights(least_allocated=1, balanced_allocation=1).params()
    shape = np.array([100, 1 << 20, 100, 1 << 20], np.int64)
    score_all(shape, params, allocatable, zeros, np.zeros((1, 2), np.int64), scores)
    score_rows(np.zeros(1, np.int64), shape, params, allocatable, zeros, np.zeros((1, 2), np.int64), scores)
    select_node(
        np.array([100, 0, 0, 0], np.int64),
        np.zeros(1, np.int64),
        True,
        allocatable,
        zeros,
        np.ones(1, np.bool_),
        scores,
        np.zeros(1, np.int64),
    )
