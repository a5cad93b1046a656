"""Incremental selection over the fused kernel: score arrays per score shape, arg-max trees per key.

Every feasible node is scored: there is no sampling. What makes it cheap is that a node's
score depends only on that node's state and on the few numbers of the pod that the score terms
read (its "score shape"). `ScoreCache` keeps one score array per shape and, between pods,
rescores only the rows that changed (usually the one node the previous pod landed on); the
per-pod pass is then just the fit check and the arg-max over all nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from pysched.framework.fused import BalanceParams, FusedParams, FusedTerm, ResourceWeights, UrgencyParams
from pysched.framework.nodetable import I64, Bools, NodeTable, ScoreShape
from pysched.scheduler.kernel import (
    build_tree,
    charge_row,
    refresh_tree,
    score_rows,
    select_node,
    update_tree,
)


@dataclass(frozen=True, slots=True)
class KernelWeights:
    """What a profile asks of the fused kernel: whether the fit filter runs and each score's weight."""

    resource_fit: bool = True
    least_allocated: int = 0
    most_allocated: int = 0
    balanced_allocation: int = 0
    cpu_weight: int = 1  # resource weights of LEAST_ / MOST_ALLOCATED (kube-scheduler default 1:1)
    memory_weight: int = 1
    urgency_placement: int = 0  # URGENCY_PLACEMENT's profile weight, then its own term weights
    grow_headroom_weight: int = 1
    pack_weight: int = 1
    gpu_fragment_weight: int = 1
    headroom_factor: int = 2
    balance_after: bool = False  # BALANCED_ALLOCATION scores the balance after the pod, not its improvement

    @classmethod
    def from_terms(cls, resource_fit: bool, terms: Mapping[FusedTerm, tuple[int, FusedParams]]) -> KernelWeights:
        """The kernel's parameters from a profile's fused terms (term -> profile weight, params).
        Raises ValueError when LEAST_ALLOCATED and MOST_ALLOCATED disagree on resource weights:
        the kernel has one pair."""

        def weight(term: FusedTerm) -> int:
            return terms[term][0] if term in terms else 0

        pairs = {
            params
            for term, (_, params) in terms.items()
            if term in (FusedTerm.LEAST_ALLOCATED, FusedTerm.MOST_ALLOCATED) and isinstance(params, ResourceWeights)
        }
        if len(pairs) > 1:
            raise ValueError("must use the same resource weights")
        resource = next(iter(pairs), ResourceWeights())
        _, urgency = terms.get(FusedTerm.URGENCY_PLACEMENT, (0, None))
        if not isinstance(urgency, UrgencyParams):
            urgency = UrgencyParams()
        _, balance = terms.get(FusedTerm.BALANCED_ALLOCATION, (0, None))
        return cls(
            resource_fit=resource_fit,
            least_allocated=weight(FusedTerm.LEAST_ALLOCATED),
            most_allocated=weight(FusedTerm.MOST_ALLOCATED),
            balanced_allocation=weight(FusedTerm.BALANCED_ALLOCATION),
            cpu_weight=resource.cpu,
            memory_weight=resource.memory,
            urgency_placement=weight(FusedTerm.URGENCY_PLACEMENT),
            grow_headroom_weight=urgency.grow_headroom,
            pack_weight=urgency.pack,
            gpu_fragment_weight=urgency.gpu_fragment,
            headroom_factor=urgency.headroom_factor,
            balance_after=isinstance(balance, BalanceParams) and balance.after,
        )

    def params(self) -> I64:
        return np.array(
            [
                self.least_allocated,
                self.most_allocated,
                self.balanced_allocation,
                self.cpu_weight,
                self.memory_weight,
                self.urgency_placement,
                self.grow_headroom_weight,
                self.pack_weight,
                self.gpu_fragment_weight,
                self.headroom_factor,
                int(self.balance_after),
            ],
            np.int64,
        )


def score_all(shape: I64, params: I64, allocatable: I64, requested: I64, nonzero_requested: I64, scores: I64) -> None:
    score_rows(
        np.arange(scores.shape[0], dtype=np.int64), shape, params, allocatable, requested, nonzero_requested, scores
    )


@dataclass(slots=True)
class _Scores:
    scores: I64
    shape: I64
    seq: int
    size: int


@dataclass(slots=True)
class ScoreCache:
    """Fused score arrays per score shape, kept current by rescoring only the rows that changed."""

    weights: KernelWeights
    capacity: int = 256
    params: I64 = field(init=False)
    _entries: dict[ScoreShape, _Scores] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.params = self.weights.params()

    def scores(self, shape: ScoreShape, nodes: NodeTable) -> I64:
        size = nodes.size
        allocatable, requested, nonzero = (
            nodes.allocatable[:size],
            nodes.requested[:size],
            nodes.nonzero_requested[:size],
        )
        entry = self._entries.get(shape)
        seq = nodes.change_seq
        if entry is not None and entry.size == size:
            if entry.seq == seq:
                return entry.scores
            rows = nodes.changed_since(entry.seq)
            if rows is not None:
                score_rows(rows, entry.shape, self.params, allocatable, requested, nonzero, entry.scores)
                entry.seq = seq
                return entry.scores
        if entry is None and len(self._entries) >= self.capacity:
            self._entries.clear()  # many shapes: start over rather than grow without bound
        entry = _Scores(np.empty(size, np.int64), np.array(shape, np.int64), seq, size)
        self._entries[shape] = entry
        score_all(entry.shape, self.params, allocatable, requested, nonzero, entry.scores)
        return entry.scores


@dataclass(slots=True)
class _Selection:
    tree: I64
    scores: I64  # this key's own copy, kept current with the tree
    shape: I64
    seq: int
    size: int
    count: int


@dataclass(slots=True)
class SelectionCache:
    """The best feasible node per (placement signature, request), kept current incrementally.

    Between two pods only a few rows change (the node the last pod landed on, a finished pod's
    node). For a key in frequent use, a tournament tree holds every row's score (or -1 when the
    row cannot take the pod), so the arg-max over all nodes is the root and a changed row costs
    O(log nodes). A key seen rarely gets a plain scan of its candidate rows instead, since its
    tree would be mostly stale by its next use. Either way the answer is exactly that of
    `select_node` scanning every row, ties included.
    """

    score_cache: ScoreCache
    capacity: int = 512
    min_rows: int = 64  # below this a scan is as cheap as a tree
    _trees: dict[object, _Selection] = field(default_factory=dict)
    _last_scan: dict[object, int] = field(default_factory=dict)
    _generation: int = -1

    @property
    def trees(self) -> int:
        """How many keys are answered by a tournament tree now (the rest are scanned)."""
        return len(self._trees)

    def select(
        self,
        key: object,
        nodes: NodeTable,
        mask: Bools,
        candidates: I64,
        request: I64,
        columns: I64,
        resource_fit: bool,
        shape: ScoreShape,
    ) -> tuple[int, int]:
        """(best row or -1, feasible count), as `select_node` would answer. The key must
        determine the mask, the request and the score shape (a score class included)."""
        if nodes.generation != self._generation:
            self._trees.clear()  # masks changed: every tree is stale
            self._last_scan.clear()
            self._generation = nodes.generation
        size = nodes.size
        seq = nodes.change_seq
        allocatable, requested = nodes.allocatable[:size], nodes.requested[:size]
        fresh_limit = max(size // 16, 8)
        entry = self._trees.get(key)
        if entry is not None and entry.size == size:
            rows = nodes.changed_since(entry.seq, fresh_limit) if entry.seq != seq else None
            if entry.seq == seq or rows is not None:
                if rows is not None and rows.shape[0]:
                    entry.count += refresh_tree(
                        rows,
                        entry.shape,
                        self.score_cache.params,
                        nodes.nonzero_requested[:size],
                        request,
                        columns,
                        resource_fit,
                        allocatable,
                        requested,
                        mask,
                        entry.scores,
                        entry.tree,
                    )
                    entry.seq = seq
                top = int(entry.tree[1])
                if top < 0:
                    return -1, 0
                scale = entry.tree.shape[0] // 2
                return scale - 1 - top % scale, entry.count
            del self._trees[key]
        scores = self.score_cache.scores(shape, nodes)
        last = self._last_scan.get(key)
        self._last_scan[key] = seq
        if last is None or seq - last > fresh_limit or size < self.min_rows:
            out = np.empty(0, np.int64)
            best, count = select_node(
                request, columns, resource_fit, allocatable, requested, candidates, scores, out, False
            )
            return best, count
        # Used again soon after its last scan: worth a tree.
        if len(self._trees) >= self.capacity:
            self._trees.clear()
        if len(self._last_scan) >= 8 * self.capacity:
            self._last_scan.clear()
        scale = 1 << max(size - 1, 0).bit_length()
        tree = np.empty(2 * scale, np.int64)
        count = build_tree(request, columns, resource_fit, allocatable, requested, mask, scores, tree)
        self._trees[key] = _Selection(tree, scores.copy(), np.array(shape, np.int64), seq, size, count)
        top = int(tree[1])
        return (-1, 0) if top < 0 else (scale - 1 - top % scale, count)


def reference_scores(weights: KernelWeights, shape: ScoreShape, nodes: NodeTable) -> I64:
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
    """Compile (or load from the numba cache) every kernel before the scheduler says it is ready."""
    allocatable = np.array([[1000, 1 << 30, 10, 0]], np.int64)
    zeros = np.zeros_like(allocatable)
    scores = np.zeros(1, np.int64)
    params = KernelWeights(least_allocated=1, balanced_allocation=1).params()
    shape = np.array([100, 1 << 20, 100, 1 << 20, 0, -1, 0], np.int64)
    rows = np.zeros(1, np.int64)
    score_rows(rows, shape, params, allocatable, zeros, np.zeros((1, 2), np.int64), scores)
    request = np.array([100, 0, 0, 0], np.int64)
    mask = np.ones(1, np.bool_)
    select_node(request, rows, True, allocatable, zeros, rows, scores, np.zeros(1, np.int64), True)
    charge_row(zeros, np.zeros((1, 2), np.int64), 0, allocatable[0], np.zeros(2, np.int64), 1)
    tree = np.empty(2, np.int64)
    build_tree(request, rows, True, allocatable, zeros, mask, scores, tree)
    update_tree(rows, request, rows, True, allocatable, zeros, mask, scores, tree)
    nonzero = np.zeros((1, 2), np.int64)
    refresh_tree(rows, shape, params, nonzero, request, rows, True, allocatable, zeros, mask, scores, tree)
