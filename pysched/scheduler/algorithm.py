"""The scheduling algorithm of one profile: from a pod to the best node, or to why there is none.

The hot path is `find_node`: PreFilter, the node mask (cached), then the fused kernel through the
incremental selection caches. Plugins with logic the kernel does not know add their own batch
filters and scores around it (a slower path: every row's score is written out). When no node
fits, `diagnose` runs every filter's numpy `filter_batch` for kube-scheduler's message, and the
PostFilter plugins run.

What the kernel computes is declared by the plugins (`pysched.framework.fused`); nothing here
names a plugin.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pysched.api.disruption import nominated_node
from pysched.api.features import PodFeatures
from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import PodInfo
from pysched.framework.config import ConfigError
from pysched.framework.cycle_state import CycleState
from pysched.framework.fused import FusedParams, FusedPlugin, FusedTerm, PodClassifier
from pysched.framework.gates import PodGates, acts_on
from pysched.framework.interfaces import (
    Diagnosis,
    FilterPlugin,
    FilterResult,
    MaskFilterPlugin,
    PostFilterPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ScoreNormalizer,
    ScorePlugin,
)
from pysched.framework.nodetable import I64, POD_COLUMN, Bools, NodeTable, RequestShape
from pysched.framework.status import SUCCESS, Code, Status
from pysched.scheduler.kernel import select_node
from pysched.scheduler.observer import ExtensionPointTimer, PluginTimer
from pysched.scheduler.selection import KernelWeights, ScoreCache, SelectionCache

SIGNATURES_KEPT = 4096  # distinct mask keys remembered before starting over
# One cycle in this many has its plugins timed one by one (kube-scheduler samples 10%).
PLUGIN_SAMPLE_EVERY = 10
_WITHOUT_NOMINATED = "engine/without-nominated"  # {filter name: its verdict without nominated pods}
# kube-scheduler's words when the cluster has no node: before any plugin, and no PostFilter runs.
NO_NODES_MESSAGE = "no nodes available to schedule pods"


class HeldNominations(Protocol):
    """Nominated (still pending) pods whose room the cache holds on their nodes."""

    def held_besides(self, key: PodKey) -> bool:
        """Some pod other than `key` is held."""
        ...

    def nominated(self, key: PodKey) -> NodeName | None:
        """The node `key` is nominated to, if any."""
        ...

    def without_others(self, key: PodKey) -> AbstractContextManager[None]:
        """The cache without every held pod but `key`, for the block's length (the filters' pass
        without nominated pods, and the scores)."""
        ...


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    node: NodeName | None
    status: Status
    feasible_nodes: int = 0
    diagnosis: Diagnosis | None = None
    request: RequestShape | None = None  # the pod's request in array form, reused by assume


@dataclass(frozen=True, slots=True)
class WeightedScore:
    plugin: ScorePlugin
    weight: int


@dataclass(frozen=True, slots=True)
class KernelPlan:
    """What the profile's plugins ask of the kernel, and what it leaves to them."""

    weights: KernelWeights
    batch_filters: tuple[FilterPlugin, ...]  # filters neither masked nor fused
    extra_scores: tuple[WeightedScore, ...]  # scores the kernel does not compute
    classify: Callable[[PodInfo], int] | None  # the pod class a fused term reads


@dataclass(frozen=True, slots=True)
class PodPlan:
    """The PreFilter and PreScore plugins a pod with some features meets: the others say they
    act on none of its features (`pysched.framework.gates`), so they count as having returned Skip
    without being called; and the batch filters and extra scores that are left."""

    pre_filter: tuple[PreFilterPlugin, ...]
    skip_filter: frozenset[str]
    pre_score: tuple[PreScorePlugin, ...]
    skip_score: frozenset[str]
    batch_filters: tuple[FilterPlugin, ...]
    extra_score: bool  # some score the kernel does not compute is left


def plan_kernel(profile: str, filters: Sequence[FilterPlugin], scores: Sequence[WeightedScore]) -> KernelPlan:
    """Read the fused-term declarations of a profile's filters and scores (ConfigError when they
    contradict each other: a term twice, a filter term at score, parameters of the wrong type)."""
    fit = False
    batch: list[FilterPlugin] = []
    for filter_plugin in filters:
        if isinstance(filter_plugin, FusedPlugin):
            if not filter_plugin.fused_term.is_filter:
                raise ConfigError(profile, "plugins.filter", f"{filter_plugin.NAME} fuses a score term, not a filter")
            fit = True
        elif not isinstance(filter_plugin, MaskFilterPlugin):
            batch.append(filter_plugin)
    terms: dict[FusedTerm, tuple[int, FusedParams]] = {}
    by_term: dict[FusedTerm, str] = {}
    extra: list[WeightedScore] = []
    classify: Callable[[PodInfo], int] | None = None
    for score in scores:
        plugin = score.plugin
        if not isinstance(plugin, FusedPlugin):
            extra.append(score)
            continue
        term = plugin.fused_term
        if term.is_filter:
            raise ConfigError(profile, "plugins.score", f"{plugin.NAME} fuses a filter term, not a score")
        if term in by_term:
            raise ConfigError(profile, "plugins.score", f"{plugin.NAME} and {by_term[term]} fuse the same term")
        params = plugin.fused_params()
        wanted = term.params_type
        if (params is None) != (wanted is None) or (wanted is not None and not isinstance(params, wanted)):
            raise ConfigError(profile, "plugins.score", f"{plugin.NAME} gives {params!r} for {term.value}")
        if term.reads_pod_class:
            if not isinstance(plugin, PodClassifier):
                raise ConfigError(profile, "plugins.score", f"{plugin.NAME} fuses {term.value} but has no score_class")
            classify = plugin.score_class
        terms[term] = (score.weight, params)
        by_term[term] = plugin.NAME
    try:
        weights = KernelWeights.from_terms(fit, terms)
    except ValueError as err:
        names = " and ".join(sorted(by_term[t] for t in (FusedTerm.LEAST_ALLOCATED, FusedTerm.MOST_ALLOCATED)))
        raise ConfigError(profile, "pluginConfig", f"{names}: {err}") from None
    return KernelPlan(weights, tuple(batch), tuple(extra), classify)


class SchedulingAlgorithm:
    """PreFilter, filters and scores of one profile over the node table, with their caches."""

    def __init__(
        self,
        profile: str,
        nodes: NodeTable,
        pre_filter: Sequence[PreFilterPlugin],
        filters: Sequence[FilterPlugin],
        post_filter: Sequence[PostFilterPlugin],
        pre_score: Sequence[PreScorePlugin],
        scores: Sequence[WeightedScore],
        gates: PodGates | None = None,
    ) -> None:
        self.nodes = nodes
        self.gates = gates or PodGates()
        self.pre_filter = tuple(pre_filter)
        self.filters = tuple(filters)
        self.post_filter = tuple(post_filter)
        self.pre_score = tuple(pre_score)
        self.mask_filters = tuple(p for p in filters if isinstance(p, MaskFilterPlugin))
        self._filter_names = frozenset(p.NAME for p in filters)
        self._mask_keys = tuple(p.mask_key for p in self.mask_filters)  # bound once: called per pod
        # Mask keys interned as ints, never reused: the caches below hash a small int, not the key.
        self._signatures: dict[Hashable, int] = {}
        self._next_signature = itertools.count()
        plan = plan_kernel(profile, filters, scores)
        self.weights = plan.weights
        self.batch_filters = plan.batch_filters
        self.extra_scores = plan.extra_scores
        self._extra_names = tuple(score.plugin.NAME for score in plan.extra_scores)  # read per cycle
        self._classify = plan.classify
        self._masks: dict[int, tuple[Bools, I64]] = {}  # signature -> (mask, candidate rows)
        self._mask_generation = -1
        self._scores: I64 = np.zeros(0, np.int64)
        self._score_cache = ScoreCache(self.weights)
        self.selection = SelectionCache(self._score_cache)
        self._plans: dict[PodFeatures, PodPlan] = {}
        self._plans_version = self._plans_generation = -1  # what they were made for
        self.profile = profile
        self.timed: ExtensionPointTimer | None = None  # set by a scheduler whose metrics time points
        self.plugin_timed: PluginTimer | None = None  # and plugins, in the sampled cycles
        self._cycles_timed = 0
        # Filters whose PreFilter counts placed pods (pod affinity, spread): run again on other views.
        self._counted = tuple(f for f in self.batch_filters if getattr(f, "COUNTS_PLACED_PODS", False))
        self._counted_names = frozenset(f.NAME for f in self._counted)
        # Set by the scheduler: the nominated pods the cache holds, for the second filter pass.
        self.nominations: HeldNominations | None = None

    def plan(self, features: PodFeatures) -> PodPlan:
        """What a pod with `features` meets, kept until a gate or the nodes may have changed."""
        version, generation = self.gates.version, self.nodes.generation
        if version != self._plans_version or generation != self._plans_generation:
            self._plans.clear()
            self._plans_version, self._plans_generation = version, generation
        found = self._plans.get(features)
        if found is None:
            found = self._plans[features] = self._make_plan(features)
        return found

    def _make_plan(self, features: PodFeatures) -> PodPlan:
        pre_filter = tuple(p for p in self.pre_filter if acts_on(p) & features)
        pre_score = tuple(p for p in self.pre_score if acts_on(p) & features)
        skip_filter = frozenset(p.NAME for p in self.pre_filter if p not in pre_filter)
        skip_score = frozenset(p.NAME for p in self.pre_score if p not in pre_score)
        return PodPlan(
            pre_filter,
            skip_filter,
            pre_score,
            skip_score,
            tuple(f for f in self.batch_filters if f.NAME not in skip_filter),
            any(name not in skip_score for name in self._extra_names),
        )

    def _signature(self, pod: PodInfo) -> int:
        """The pod's mask key (the tuple of every mask filter's own key), as an interned int."""
        key = tuple([mask_key(pod) for mask_key in self._mask_keys])
        found = self._signatures.get(key)
        if found is None:
            if len(self._signatures) >= SIGNATURES_KEPT:
                # Fresh ids follow: nothing cached under an old one is hit again, so let it go.
                self._signatures.clear()
                self._masks.clear()
            found = self._signatures[key] = next(self._next_signature)
        return found

    def _node_mask(self, pod: PodInfo, signature: int) -> tuple[Bools, I64]:
        """The combined verdict of the mask filters, and the rows it lets through."""
        nodes = self.nodes
        if self._mask_generation != nodes.generation:
            self._masks.clear()
            self._mask_generation = nodes.generation
        found = self._masks.get(signature)
        if found is None:
            mask = nodes.present[: nodes.size].copy()
            for plugin in self.mask_filters:
                mask &= plugin.node_mask(pod, nodes)
            found = self._masks[signature] = (mask, np.flatnonzero(mask).astype(np.int64))
        return found

    def find_node(self, state: CycleState, pod: PodInfo) -> ScheduleResult:
        timed = self.timed
        if timed is None:
            return self._find_node(state, pod, None)
        # kube-scheduler's scheduler_framework_extension_point_duration_seconds: PreFilter,
        # Filter, PreScore, Score and PostFilter each timed (laps of one clock).
        laps = _Laps(timed, self.profile)
        if self.plugin_timed is not None:
            state.plugins_timed = self._cycles_timed % PLUGIN_SAMPLE_EVERY == 0
            self._cycles_timed += 1
        result = self._find_node(state, pod, laps)
        laps.lap(laps.point, result.status.code)
        return result

    def plugin_took(self, plugin: str, point: str, code: Code, started: float) -> None:
        """kube-scheduler's scheduler_plugin_execution_duration_seconds, in a sampled cycle."""
        if self.plugin_timed is not None:
            self.plugin_timed(plugin, point, code, time.perf_counter() - started)

    def _find_node(self, state: CycleState, pod: PodInfo, laps: _Laps | None) -> ScheduleResult:
        nodes = self.nodes
        if nodes.count == 0:
            # No plugin said anything: no preemption is tried, and the queue backs it off (no
            # event is known to help).
            return ScheduleResult(None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_NODES_MESSAGE,)))
        plan = self.plan(pod.features)
        state.skip_filter = plan.skip_filter
        state.skip_score = plan.skip_score
        if laps is not None:
            laps.point = "PreFilter"
        refused: list[str] = []  # the plugins that said Unschedulable, the last one's status kept
        last_refusal = SUCCESS
        for plugin in plan.pre_filter:
            started = time.perf_counter() if state.plugins_timed else 0.0
            status = plugin.pre_filter(state, pod, nodes)
            if state.plugins_timed:
                self.plugin_took(plugin.NAME, "PreFilter", status.code, started)
            if status.code is Code.SKIP:
                state.skip("filter", plugin.NAME)
            elif status.code is Code.UNSCHEDULABLE:
                # kube-scheduler runs the other PreFilter plugins all the same: preemption's dry
                # runs filter with their state.
                refused.append(plugin.NAME)
                last_refusal = status
            elif not status.ok:
                return self._pre_filter_failed(state, pod, laps, plugin.NAME, status, refused)
        if refused:
            return self._pre_filter_failed(state, pod, laps, refused[-1], last_refusal, refused)
        if laps is not None:
            laps.lap("PreFilter", Code.SUCCESS, then="Filter")
        signature = self._signature(pod)
        mask, candidates = self._node_mask(pod, signature)
        req = nodes.request_shape(pod.requests, pod.nonzero)
        request, columns, shape = req.vector, req.columns, req.score_shape
        key: Hashable = (signature, req.key)
        if self._classify is not None:
            score_class = self._classify(pod)
            shape = (*shape, *req.gpu_shape, score_class)
            key = (signature, req.key, score_class)
        batch_filters = plan.batch_filters
        if state.skip_filter is not plan.skip_filter:  # a plugin that was called skipped
            batch_filters = tuple(f for f in batch_filters if f.NAME not in state.skip_filter)
        if batch_filters:
            mask = mask.copy()
            for batch_filter in batch_filters:
                started = time.perf_counter() if state.plugins_timed else 0.0
                mask &= batch_filter.filter_batch(state, pod, nodes).feasible
                if state.plugins_timed:
                    self.plugin_took(batch_filter.NAME, "Filter", Code.SUCCESS, started)
            candidates = np.flatnonzero(mask).astype(np.int64)
        narrowed = False
        held = self.nominations
        others_held = held is not None and held.held_besides(pod.key)
        if self._counted and others_held:
            assert held is not None
            without = self._without_nominated(state, pod, plan, held)
            if without:
                mask = mask.copy()
                for result in without.values():
                    mask &= result.feasible
                candidates = np.flatnonzero(mask).astype(np.int64)
                narrowed = True
        nominated = self._nominated_row(pod, held, mask, req) if held is not None else None
        if nominated is not None:
            # kube-scheduler tries a nominated pod's node first and takes it when it fits: the
            # room its preemption made is there (scored alone, so every Score plugin still runs).
            mask = np.zeros(nodes.size, np.bool_)
            mask[nominated] = True
            candidates = np.array([nominated], np.int64)
            narrowed = True
        rows = (key, mask, candidates, req, shape)
        if others_held:
            # kube-scheduler filters with the nominated pods and scores without them: the fit
            # is checked here with their room held, and PreScore and Score run with it lifted
            # (on the rows that fit: lifting only frees room).
            assert held is not None
            if self.weights.resource_fit:
                size, scores = nodes.size, self._score_buffer()
                table = self._score_cache.scores(shape, nodes)
                select_node(request, columns, True, nodes.allocatable[:size], nodes.requested[:size], candidates,
                            table, scores, True)  # fmt: skip
                candidates = candidates[scores[candidates] >= 0]
                mask = np.zeros(size, np.bool_)
                mask[candidates] = True
                rows = (key, mask, candidates, req, shape)
            with held.without_others(pod.key):
                best, feasible, failed = self._score(state, pod, plan, laps, rows, True)
        else:
            best, feasible, failed = self._score(state, pod, plan, laps, rows, bool(batch_filters) or narrowed)
        if failed is not None:
            return failed
        if feasible == 0:
            if laps is not None:
                laps.lap("Score", Code.SUCCESS, then="PostFilter")
            return self._unschedulable(state, pod)
        name = nodes.names[best]
        assert name is not None
        return ScheduleResult(name, SUCCESS, feasible, None, req)

    def _score(
        self,
        state: CycleState,
        pod: PodInfo,
        plan: PodPlan,
        laps: _Laps | None,
        rows: tuple[Hashable, Bools, I64, RequestShape, tuple[int, ...]],
        slow: bool,
    ) -> tuple[int, int, ScheduleResult | None]:
        """PreScore, then the fused fit and scores (and the other Score plugins) over the
        candidate rows (`slow`: not through the incremental arg-max): (the best row, how many
        fit, a PreScore failure's result)."""
        nodes = self.nodes
        key, mask, candidates, req, shape = rows
        if laps is not None and plan.pre_score:
            # Filter here is the node masks and batch filters; the fused fit runs in the
            # selection kernel with the fused scores, timed as Score.
            laps.lap("Filter", Code.SUCCESS, then="PreScore")
        for pre in plan.pre_score:
            started = time.perf_counter() if state.plugins_timed else 0.0
            status = pre.pre_score(state, pod, nodes, mask)
            if state.plugins_timed:
                self.plugin_took(pre.NAME, "PreScore", status.code, started)
            if status.code is Code.SKIP:
                state.skip("score", pre.NAME)
            elif not status.ok:
                return -1, 0, ScheduleResult(None, status.with_plugin(pre.NAME), 0)
        if laps is not None:
            laps.lap(laps.point, Code.SUCCESS, then="Score")
        extra = plan.extra_score
        if extra and state.skip_score is not plan.skip_score:
            skipped = state.skip_score
            extra = any(name not in skipped for name in self._extra_names)
        if not slow and not extra:
            # Only mask filters, the fused fit and fused scores: the incremental arg-max answers.
            best, feasible = self.selection.select(
                key, nodes, mask, candidates, req.vector, req.columns, self.weights.resource_fit, shape
            )
            return best, feasible, None
        size, scores = nodes.size, self._score_buffer()
        best, feasible = select_node(
            req.vector,
            req.columns,
            self.weights.resource_fit,
            nodes.allocatable[:size],
            nodes.requested[:size],
            candidates,
            self._score_cache.scores(shape, nodes),
            scores,
            extra,
        )
        if feasible and extra:
            best = self._score_extra(state, pod, scores)
        return best, feasible, None

    def _score_buffer(self) -> I64:
        """Each row's score (the slow path's), grown with the table."""
        size = self.nodes.size
        if self._scores.shape[0] < size:
            self._scores = np.zeros(max(size, 2 * self._scores.shape[0]), np.int64)
        return self._scores[:size]

    def _without_nominated(
        self, state: CycleState, pod: PodInfo, plan: PodPlan, held: HeldNominations
    ) -> dict[str, FilterResult]:
        """The verdicts of the filters other pods can make pass, on the cluster without the
        nominated pods held on their nodes (which may yet go elsewhere, or never bind). The
        cycle's own pass counts them; a node must pass both (kube-scheduler filters with
        nominated pods and without them), so a required pod affinity is never met by a pod that
        is only nominated. Kept in the state for the diagnosis."""
        if all(f.NAME in state.skip_filter for f in self._counted):
            return {}
        with held.without_others(pod.key):
            results = self._recounted(state, pod, plan)
        state.write(_WITHOUT_NOMINATED, results)
        return results

    def _recounted(self, state: CycleState, pod: PodInfo, plan: PodPlan) -> dict[str, FilterResult]:
        """The verdicts of the filters that count placed pods (`_counted`), their PreFilter run
        again on the table as it holds the pods now; a filter missing from the answer passes
        every node (its PreFilter skipped)."""
        counted = {f.NAME: f for f in self._counted if f.NAME not in state.skip_filter}
        nodes = self.nodes
        again = CycleState()
        results: dict[str, FilterResult] = {}
        for pre in plan.pre_filter:
            if pre.NAME not in counted:
                continue
            status = pre.pre_filter(again, pod, nodes)
            if status.code is Code.SKIP:
                again.skip("filter", pre.NAME)
            elif not status.ok:
                nowhere = np.zeros(nodes.size, np.bool_)
                reason = status.message() or f"{pre.NAME} rejected the pod"
                results[pre.NAME] = FilterResult(nowhere, {reason: ~nowhere}, True)
        for name, counted_filter in counted.items():
            if name not in results and name not in again.skip_filter:
                results[name] = counted_filter.filter_batch(again, pod, nodes)
        return results

    def _score_extra(self, state: CycleState, pod: PodInfo, scores: I64) -> int:
        nodes = self.nodes
        feasible = scores >= 0
        total = scores.copy()
        for score in self.extra_scores:
            plugin = score.plugin
            if plugin.NAME in state.skip_score:
                continue
            started = time.perf_counter() if state.plugins_timed else 0.0
            extra = plugin.score_batch(state, pod, nodes, feasible)
            if isinstance(plugin, ScoreNormalizer):
                extra = extra.copy()
                plugin.normalize_scores(state, pod, extra, feasible)
            if state.plugins_timed:
                self.plugin_took(plugin.NAME, "Score", Code.SUCCESS, started)
            total += score.weight * extra
        total[~feasible] = -1
        return int(np.argmax(total))

    def diagnose(self, state: CycleState, pod: PodInfo) -> Diagnosis:
        """The slow path after no node fit: per-node reasons from the first filter that failed."""
        nodes = self.nodes
        alive = nodes.present[: nodes.size].copy()
        total = int(alive.sum())
        reasons: dict[str, int] = {}
        rejectors: set[str] = set()
        unresolvable_nodes = 0
        resolvable = np.zeros(alive.shape[0], np.bool_)
        without = state.read(_WITHOUT_NOMINATED, dict) or {}
        results: list[tuple[str, FilterResult]] = []
        for filter_plugin in self.filters:
            if filter_plugin.NAME in state.skip_filter:
                continue
            result = filter_plugin.filter_batch(state, pod, nodes)
            if filter_plugin.NAME in without:
                result = _both_passes(result, without[filter_plugin.NAME])
            results.append((filter_plugin.NAME, result))
        # kube's PreFilterResult comes first: the nodes a PreFilter left out are never filtered.
        for name, result in results:
            if result.pre_filter_refusal:
                refusal, none = result.pre_filter_refusal, np.zeros(alive.shape[0], np.bool_)
                return Diagnosis(total, {}, frozenset({name}), True, pre_filter_message=refusal, resolvable_rows=none)
        narrowing = sorted(name for name, result in results if result.left_out is not None)
        if narrowing:
            outside = np.zeros(alive.shape[0], np.bool_)
            for _, result in results:
                if result.left_out is not None:
                    outside |= result.left_out[: alive.shape[0]]
            outside &= alive
            nominated = nominated_node(pod)  # kube filters it first, so it keeps its own filter's words
            row = nodes.row.get(NodeName(nominated)) if nominated is not None else None
            if row is not None and row < outside.shape[0]:
                outside[row] = False
            left = int(outside.sum())
            if left:
                reasons[f"node(s) didn't satisfy plugin(s) [{' '.join(narrowing)}]"] = left
                unresolvable_nodes += left
                alive &= ~outside
            rejectors.update(narrowing)  # as kube's unscheduled plugins: named even when every node is in
        for name, result in results:
            failing = alive & ~result.feasible
            if not failing.any():
                continue
            rejectors.add(name)
            hard = result.unresolvable_rows(failing)
            unresolvable_nodes += int(hard.sum())
            resolvable |= failing & ~hard
            for reason, where in result.reasons.items():
                count = int((failing & where).sum())
                if count:
                    reasons[reason] = reasons.get(reason, 0) + count
            alive &= result.feasible
        return Diagnosis(
            total, reasons, frozenset(rejectors), total > 0 and unresolvable_nodes == total, resolvable_rows=resolvable
        )

    def fits_on_row(self, state: CycleState, pod: PodInfo, row: int) -> bool:
        """Every filter of the profile passes the pod on one node as the table holds it now (the
        mask filters from their cached mask, the fused fit on the row, batch filters at the row):
        preemption's dry runs change the row's pods and ask again. The filters that count placed
        pods run their PreFilter again (the cycle's state counted the pods a dry run takes off,
        kube's RemovePod), so evicting pods can make room for an anti-affinity or a spread."""
        nodes = self.nodes
        mask, _ = self._node_mask(pod, self._signature(pod))
        if row >= mask.shape[0] or not mask[row]:
            return False
        if not self._fits_row(row, nodes.request_shape(pod.requests, pod.nonzero)):
            return False
        return all(result.feasible[row] for result in self._verdicts_now(state, pod, self.batch_filters))

    def refusal_on_row(self, state: CycleState, pod: PodInfo, row: int) -> tuple[str, ...]:
        """The reasons of the first filter, in the profile's order, that refuses the pod on one
        node as the table holds it now (the filters that count placed pods counted again, as in
        `fits_on_row`); () when every filter passes. The slow path: every filter runs on every
        row, for the one message a preemption that found no candidate writes."""
        for result in self._verdicts_now(state, pod, self.filters):
            if not result.feasible[row]:
                return tuple(reason for reason, where in result.reasons.items() if where[row])
        return ()

    def _verdicts_now(self, state: CycleState, pod: PodInfo, filters: Sequence[FilterPlugin]) -> Iterator[FilterResult]:
        """`filters`' verdicts, one at a time, on the table as it holds the pods now: those that
        count placed pods run their PreFilter again (`_recounted`; one its PreFilter now skips
        gives none), the others filter with the cycle's state."""
        counted = self._counted_names
        recounted = self._recounted(state, pod, self.plan(pod.features)) if counted else {}
        for plugin in filters:
            name = plugin.NAME
            if name in state.skip_filter:
                continue
            result = recounted.get(name) if name in counted else plugin.filter_batch(state, pod, self.nodes)
            if result is not None:
                yield result

    def _fits_row(self, row: int, req: RequestShape) -> bool:
        """The fused fit on one row as the table holds it now (always, without NodeResourcesFit)."""
        if not self.weights.resource_fit:
            return True
        nodes = self.nodes
        if nodes.requested[row, POD_COLUMN] + 1 > nodes.allocatable[row, POD_COLUMN]:
            return False
        free = nodes.allocatable[row] - nodes.requested[row]
        return not (req.vector[req.columns] > free[req.columns]).any()

    def _nominated_row(self, pod: PodInfo, held: HeldNominations, mask: Bools, req: RequestShape) -> int | None:
        """The row of the node `pod` is nominated to, when every filter passes it there."""
        name = held.nominated(pod.key)
        row = None if name is None else self.nodes.row.get(name)
        if row is None or row >= mask.shape[0] or not mask[row] or not self._fits_row(row, req):
            return None
        return row

    def _pre_filter_failed(
        self, state: CycleState, pod: PodInfo, laps: _Laps | None, name: str, status: Status, refused: Sequence[str]
    ) -> ScheduleResult:
        """Plugin `name`'s PreFilter verdict speaks for every node. A rejection goes on to
        PostFilter, as kube-scheduler's FitError does (a gang's siblings held at Permit are
        released there); an error ends the cycle. `refused`: the plugins that said Unschedulable."""
        nodes = self.nodes
        rejectors = frozenset({*refused, name})
        reason = status.message() or f"{name} rejected the pod"
        if not status.rejected:
            diagnosis = Diagnosis(nodes.count, {}, rejectors, False, pre_filter_message=reason)
            return ScheduleResult(None, Status(status.code, (diagnosis.message(),), name), 0, diagnosis)
        unresolvable = status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        # kube gives every node the PreFilter status, and preemption tries the Unschedulable
        # ones. A dry run judges a node again by the Filters alone: only a rejecting plugin's own
        # Filter can see evictions lift its verdict. Without one every dry run would pass, and
        # victims would go for a pod its PreFilter refuses again (Coscheduling's gang short of
        # members or of room even with every lower-priority pod gone).
        again = not unresolvable and all(refuser in self._filter_names for refuser in refused)
        resolvable = nodes.present[: nodes.size].copy() if again else np.zeros(nodes.size, np.bool_)
        diagnosis = Diagnosis(
            nodes.count, {}, rejectors, unresolvable, pre_filter_message=reason, resolvable_rows=resolvable
        )
        if laps is not None and self.post_filter:
            laps.lap("PreFilter", status.code, then="PostFilter")
        return self._post_filter(state, pod, diagnosis, name)

    def _unschedulable(self, state: CycleState, pod: PodInfo) -> ScheduleResult:
        return self._post_filter(state, pod, self.diagnose(state, pod))

    def _post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis, by: str = "") -> ScheduleResult:
        """No node fits: PostFilter plugins run until one succeeds; the pod stays unschedulable
        (`by`: the PreFilter plugin that refused it, named in the status)."""
        said: list[str] = []
        for plugin in self.post_filter:
            started = time.perf_counter() if state.plugins_timed else 0.0
            status = plugin.post_filter(state, pod, diagnosis)
            if state.plugins_timed:
                self.plugin_took(plugin.NAME, "PostFilter", status.code, started)
            if status.ok:
                break
            if status.message():
                said.append(status.message())
        if said:
            diagnosis = dataclasses.replace(diagnosis, post_filter_message=" ".join(said))
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if diagnosis.unresolvable else Code.UNSCHEDULABLE
        return ScheduleResult(None, Status(code, (diagnosis.message(),), by), 0, diagnosis)


class _Laps:
    """One scheduling cycle's extension points, each timed from where the last one ended."""

    __slots__ = ("point", "profile", "started", "timed")

    def __init__(self, timed: ExtensionPointTimer, profile: str) -> None:
        self.timed, self.profile = timed, profile
        self.point = "PreFilter"
        self.started = time.perf_counter()

    def lap(self, point: str, code: Code, then: str = "") -> None:
        now = time.perf_counter()
        self.timed(self.profile, point, code, now - self.started)
        self.started, self.point = now, then or point


def _both_passes(counted: FilterResult, apart: FilterResult) -> FilterResult:
    """A filter's verdict with nominated pods counted and without them: a node fails if either
    pass fails it. A node failed only without them is unresolvable: evicting lower-priority pods
    cannot place a pod that is only nominated."""
    only = counted.feasible & ~apart.feasible
    if not only.any():
        return counted
    reasons = dict(counted.reasons)
    for reason, where in apart.reasons.items():
        reasons[reason] = (reasons[reason] | (where & only)) if reason in reasons else where & only
    hard = counted.unresolvable_rows(~counted.feasible) | only
    return FilterResult(counted.feasible & apart.feasible, reasons, hard, counted.left_out, counted.pre_filter_refusal)
