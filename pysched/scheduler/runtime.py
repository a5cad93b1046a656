"""A profile brought to life: its plugins per extension point and the scheduling algorithm.

The hot path is `find_node`: cached node masks, then one fused kernel call. Plugins with logic
the kernel does not know add their own batch filters and scores around it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pysched.api.ids import NodeName
from pysched.api.objects import PodInfo
from pysched.framework.config import ConfigError, ProfileConfig
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import ClusterEvent, EventRegistration, QueueingHint
from pysched.framework.interfaces import (
    I64,
    BindPlugin,
    Bools,
    Diagnosis,
    EnqueueExtensions,
    FilterPlugin,
    FusedFilter,
    FusedScore,
    Handle,
    MaskFilterPlugin,
    PermitPlugin,
    PodDeletedPlugin,
    PodTerminatedPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReconcilePlugin,
    ReservePlugin,
    ScoreNormalizer,
    ScorePlugin,
)
from pysched.framework.nodetable import RequestShape
from pysched.framework.registry import ArgsError, Registry
from pysched.framework.status import SUCCESS, Code, Status, error, unresolvable
from pysched.scheduler.kernel import select_node
from pysched.scheduler.selection import KernelWeights, ScoreCache, SelectionCache

KERNEL_FILTERS = frozenset({"NodeResourcesFit"})
KERNEL_SCORES = frozenset({"LeastAllocated", "MostAllocated", "BalancedAllocation", "UrgencyPlacement"})


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    node: NodeName | None
    status: Status
    feasible_nodes: int = 0
    diagnosis: Diagnosis | None = None
    request: RequestShape | None = None  # the pod's request in array form, reused by assume


class Framework:
    """One profile's plugins, built once at start-up."""

    def __init__(self, profile: ProfileConfig, registry: Registry, handle: Handle) -> None:
        self.profile = profile
        self.name = profile.scheduler_name
        self.handle = handle
        self.plugins: dict[str, object] = {}
        for point in profile.plugins:
            for ref in profile.enabled(point):
                if ref.name not in self.plugins:
                    spec = registry.get(ref.name)
                    assert spec is not None, "validated by the config loader"
                    try:
                        self.plugins[ref.name] = spec.build(profile.plugin_args.get(ref.name), handle)
                    except ArgsError as err:
                        raise ConfigError(
                            profile.scheduler_name, f"pluginConfig.{ref.name}.args.{err.field}", err.message
                        ) from None

        def at(point: str) -> list[Any]:
            return [self.plugins[ref.name] for ref in profile.enabled(point)]

        self.pre_enqueue: list[PreEnqueuePlugin] = at("preEnqueue")
        self.queue_sort: QueueSortPlugin = at("queueSort")[0]
        self.pre_filter: list[PreFilterPlugin] = at("preFilter")
        self.filters: list[FilterPlugin] = at("filter")
        self.post_filter: list[PostFilterPlugin] = at("postFilter")
        self.pre_score: list[PreScorePlugin] = at("preScore")
        self.reserve: list[ReservePlugin] = at("reserve")
        self.permit: list[PermitPlugin] = at("permit")
        self.pre_bind: list[PreBindPlugin] = at("preBind")
        self.bind_plugins: list[BindPlugin] = at("bind")
        self.post_bind: list[PostBindPlugin] = at("postBind")
        self.reconcile: list[ReconcilePlugin] = at("reconcile")
        # Not extension points of the profile: every plugin of it that has the method is told.
        self.pod_terminated = [p for p in self.plugins.values() if isinstance(p, PodTerminatedPlugin)]
        self.pod_deleted = [p for p in self.plugins.values() if isinstance(p, PodDeletedPlugin)]

        self.mask_filters = [p for p in self.filters if isinstance(p, MaskFilterPlugin)]
        self.batch_filters = [
            p
            for p in self.filters
            if not isinstance(p, MaskFilterPlugin) and getattr(p, "kernel_filter", None) not in KERNEL_FILTERS
        ]
        fused_fit = any(isinstance(p, FusedFilter) and p.kernel_filter in KERNEL_FILTERS for p in self.filters)
        # A fused score that reads a per-pod class (UrgencyPlacement's urgency) supplies it here;
        # the class joins the score shape and the selection key.
        self._score_class: Callable[[PodInfo], int] | None = None
        self.weights, self.extra_scores = self._kernel_weights(fused_fit)
        self._masks: dict[Hashable, tuple[Bools, I64]] = {}  # signature -> (mask, candidate rows)
        self._mask_generation = -1
        self._scores: I64 = np.zeros(0, np.int64)
        self._score_cache = ScoreCache(self.weights)
        self._selection = SelectionCache(self._score_cache)
        self._waiting: dict[str, asyncio.Future[Status]] = {}

    def _kernel_weights(self, fused_fit: bool) -> tuple[KernelWeights, list[tuple[ScorePlugin, int]]]:
        weights: dict[str, int] = {}
        resource_weights: tuple[int, int] | None = None
        urgency_params: tuple[int, int, int, int] = (1, 1, 1, 2)
        extra: list[tuple[ScorePlugin, int]] = []
        for ref in self.profile.enabled("score"):
            plugin = self.plugins[ref.name]
            term = getattr(plugin, "kernel_score", None)
            if isinstance(plugin, FusedScore) and term in KERNEL_SCORES:
                weights[term] = ref.weight
                if term in ("LeastAllocated", "MostAllocated"):
                    pair: tuple[int, int] = getattr(plugin, "resource_weights", (1, 1))
                    if resource_weights is not None and pair != resource_weights:
                        raise ConfigError(
                            self.name,
                            "pluginConfig",
                            "LeastAllocated and MostAllocated must use the same resource weights",
                        )
                    resource_weights = pair
                elif term == "UrgencyPlacement":
                    urgency_params = plugin.kernel_params()  # type: ignore[attr-defined]
                    self._score_class = plugin.score_class  # type: ignore[attr-defined]
            else:
                extra.append((plugin, ref.weight))  # type: ignore[arg-type]
        cpu_w, mem_w = resource_weights or (1, 1)
        return (
            KernelWeights(
                resource_fit=fused_fit,
                least_allocated=weights.get("LeastAllocated", 0),
                most_allocated=weights.get("MostAllocated", 0),
                balanced_allocation=weights.get("BalancedAllocation", 0),
                cpu_weight=cpu_w,
                memory_weight=mem_w,
                urgency_placement=weights.get("UrgencyPlacement", 0),
                grow_headroom_weight=urgency_params[0],
                pack_weight=urgency_params[1],
                gpu_fragment_weight=urgency_params[2],
                headroom_factor=urgency_params[3],
            ),
            extra,
        )

    # ----- queue side
    def run_pre_enqueue(self, pod: PodInfo) -> Status:
        for plugin in self.pre_enqueue:
            status = plugin.pre_enqueue(pod)
            if not status.ok:
                return status.with_plugin(plugin.NAME)
        return SUCCESS

    def registrations(self, plugin_names: frozenset[str]) -> list[EventRegistration]:
        out: list[EventRegistration] = []
        for name in plugin_names:
            plugin = self.plugins.get(name)
            if isinstance(plugin, EnqueueExtensions):
                out.extend(plugin.events_to_register())
        return out

    def requeue_hint(self, pod: PodInfo, rejectors: frozenset[str], event: ClusterEvent) -> QueueingHint:
        """Queue only if a plugin that rejected the pod says the event may help (kube-scheduler's rule).

        A rejection by no plugin in particular (an error) is retried on any event.
        """
        if not rejectors:
            return QueueingHint.QUEUE
        for registration in self.registrations(rejectors):
            if registration.decide(pod, event) is QueueingHint.QUEUE:
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    # ----- scheduling cycle
    def _node_mask(self, pod: PodInfo, signature: Hashable) -> tuple[Bools, I64]:
        """The combined verdict of the mask filters, and the rows it lets through."""
        nodes = self.handle.nodes
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
        nodes = self.handle.nodes
        for plugin in self.pre_filter:
            status = plugin.pre_filter(state, pod, nodes)
            if status.code is Code.SKIP:
                state.skip("filter", plugin.NAME)
            elif not status.ok:
                reason = status.message() or f"{plugin.NAME} rejected the pod"
                diagnosis = Diagnosis(
                    nodes.count,
                    {},
                    frozenset({plugin.NAME}),
                    status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    pre_filter_message=reason,
                )
                status = Status(status.code, (diagnosis.message(),), plugin.NAME)
                return ScheduleResult(None, status, 0, diagnosis)

        signature = pod.placement_signature()
        mask, candidates = self._node_mask(pod, signature)
        req = nodes.request_shape(pod.requests)
        request, columns, shape = req.vector, req.columns, req.score_shape
        key: Hashable = (signature, req.key)
        if self._score_class is not None:
            score_class = self._score_class(pod)
            shape = (*shape, *req.gpu_shape, score_class)
            key = (signature, req.key, score_class)
        extra = bool(self.extra_scores or self.pre_score)
        if not self.batch_filters and not extra:
            # Only mask filters, the fused fit and fused scores: the incremental arg-max answers.
            best, feasible = self._selection.select(
                key, nodes, mask, candidates, request, columns, self.weights.resource_fit, shape
            )
        else:
            if self.batch_filters:
                mask = mask.copy()
                for batch_filter in self.batch_filters:
                    if batch_filter.NAME not in state.skip_filter:
                        mask &= batch_filter.filter_batch(state, pod, nodes).feasible
                candidates = np.flatnonzero(mask).astype(np.int64)
            size = nodes.size
            if self._scores.shape[0] < size:
                self._scores = np.zeros(max(size, 2 * self._scores.shape[0]), np.int64)
            scores = self._scores[:size]
            best, feasible = select_node(
                request,
                columns,
                self.weights.resource_fit,
                nodes.allocatable[:size],
                nodes.requested[:size],
                candidates,
                self._score_cache.scores(shape, nodes),
                scores,
                extra,
            )
        if feasible == 0:
            return self._unschedulable(state, pod)
        if extra:
            best = self._score_extra(state, pod, scores)
            if best < 0:
                return ScheduleResult(None, error("pre-score failed"), feasible)
        name = nodes.names[best]
        assert name is not None
        return ScheduleResult(name, SUCCESS, feasible, None, req)

    def _score_extra(self, state: CycleState, pod: PodInfo, scores: I64) -> int:
        nodes = self.handle.nodes
        feasible = scores >= 0
        for pre in self.pre_score:
            status = pre.pre_score(state, pod, nodes, feasible)
            if status.code is Code.SKIP:
                state.skip("score", pre.NAME)
            elif not status.ok:
                return -1
        total = scores.copy()
        for plugin, weight in self.extra_scores:
            if plugin.NAME in state.skip_score:
                continue
            extra = plugin.score_batch(state, pod, nodes, feasible)
            if isinstance(plugin, ScoreNormalizer):
                extra = extra.copy()
                plugin.normalize_scores(state, pod, extra, feasible)
            total += weight * extra
        total[~feasible] = -1
        return int(np.argmax(total))

    def diagnose(self, state: CycleState, pod: PodInfo) -> Diagnosis:
        """The slow path after no node fit: per-node reasons from the first filter that failed."""
        nodes = self.handle.nodes
        alive = nodes.present[: nodes.size].copy()
        total = int(alive.sum())
        reasons: dict[str, int] = {}
        rejectors: set[str] = set()
        unresolvable_nodes = 0
        for filter_plugin in self.filters:
            if filter_plugin.NAME in state.skip_filter:
                continue
            result = filter_plugin.filter_batch(state, pod, nodes)
            failing = alive & ~result.feasible
            if not failing.any():
                continue
            rejectors.add(filter_plugin.NAME)
            if result.unresolvable:
                unresolvable_nodes += int(failing.sum())
            for reason, where in result.reasons.items():
                count = int((failing & where).sum())
                if count:
                    reasons[reason] = reasons.get(reason, 0) + count
            alive &= result.feasible
        return Diagnosis(total, reasons, frozenset(rejectors), total > 0 and unresolvable_nodes == total)

    def _unschedulable(self, state: CycleState, pod: PodInfo) -> ScheduleResult:
        diagnosis = self.diagnose(state, pod)
        for plugin in self.post_filter:
            status, _nominated = plugin.post_filter(state, pod, diagnosis)
            if status.ok:
                break
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if diagnosis.unresolvable else Code.UNSCHEDULABLE
        return ScheduleResult(None, Status(code, (diagnosis.message(),)), 0, diagnosis)

    # ----- reserve / permit (end of the scheduling cycle)
    def run_reserve(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        for i, plugin in enumerate(self.reserve):
            status = plugin.reserve(state, pod, node)
            if not status.ok:
                for done in reversed(self.reserve[: i + 1]):
                    done.unreserve(state, pod, node)
                return status.with_plugin(plugin.NAME)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        for plugin in reversed(self.reserve):
            plugin.unreserve(state, pod, node)

    def run_permit(self, state: CycleState, pod: PodInfo, node: NodeName) -> tuple[Status, float]:
        wait = 0.0
        for plugin in self.permit:
            status, timeout = plugin.permit(state, pod, node)
            if status.code is Code.WAIT:
                wait = max(wait, timeout)
            elif not status.ok:
                return status.with_plugin(plugin.NAME), 0.0
        return (Status(Code.WAIT) if wait else SUCCESS), wait

    # ----- waiting pods (Permit returned Wait)
    def allow(self, pod: PodInfo) -> None:
        future = self._waiting.get(pod.key)
        if future is not None and not future.done():
            future.set_result(SUCCESS)

    def reject(self, pod: PodInfo, reason: str) -> None:
        future = self._waiting.get(pod.key)
        if future is not None and not future.done():
            future.set_result(unresolvable(reason))

    async def wait_on_permit(self, pod: PodInfo, timeout: float) -> Status:
        future: asyncio.Future[Status] = asyncio.get_running_loop().create_future()
        self._waiting[pod.key] = future
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return Status(Code.UNSCHEDULABLE, ("rejected due to timeout after waiting at permit",))
        finally:
            self._waiting.pop(pod.key, None)

    # ----- binding cycle
    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        for plugin in self.pre_bind:
            status = await plugin.pre_bind(state, pod, node)
            if not status.ok:
                return status.with_plugin(plugin.NAME)
        return SUCCESS

    async def run_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        for plugin in self.bind_plugins:
            status = await plugin.bind(state, pod, node)
            if status.code is not Code.SKIP:
                return status.with_plugin(plugin.NAME)
        return error("every bind plugin skipped the pod")

    def run_post_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        for plugin in self.post_bind:
            plugin.post_bind(state, pod, node)


def build_frameworks(profiles: Sequence[ProfileConfig], registry: Registry, handle: Handle) -> dict[str, Framework]:
    return {p.scheduler_name: Framework(p, registry, handle) for p in profiles}
