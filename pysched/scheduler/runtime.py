"""A profile brought to life: its plugins, built once, listed per extension point, and run in order.

The scheduling cycle's node choice is `pysched.scheduler.algorithm`; this module runs everything
around it (PreEnqueue and queueing hints, Reserve, Permit, PreBind, Bind, PostBind).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pysched.api.features import PodFeatures
from pysched.api.ids import NodeName
from pysched.api.objects import PodInfo
from pysched.framework.config import ConfigError, ProfileConfig
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import ClusterEvent, EventKind, EventRegistration, QueueingHint
from pysched.framework.gates import acts_on
from pysched.framework.interfaces import (
    BindPlugin,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreBindPreFlight,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReconcilePlugin,
    RejectionCheckPlugin,
    ReservePlugin,
)
from pysched.framework.registry import ArgsError, Registry
from pysched.framework.status import SKIP, SUCCESS, Code, Status, error
from pysched.scheduler.algorithm import ScheduleResult, SchedulingAlgorithm, WeightedScore
from pysched.scheduler.unchecked import UncheckedConstraints

P = TypeVar("P")


class PreFlightedPlugin(PreBindPlugin, PreBindPreFlight, Protocol):
    """A PreBind plugin that also says, before PreBind, whether it will have work to do."""


def _acting_on(plugins: list[P], features: PodFeatures) -> tuple[P, ...]:
    """A gated plugin that says it does nothing for such pods is not called, as at PreFilter."""
    return tuple(p for p in plugins if acts_on(p) & features)


@dataclass(frozen=True, slots=True)
class ActingPlugins:
    """The plugins of the gated points outside the node choice (PreFilter and PreScore are the
    algorithm's plan) that act on pods of one feature set: the scheduler skips a point whose
    tuple is empty without calling into it (most pods: all of them)."""

    pre_enqueue: tuple[PreEnqueuePlugin, ...]
    reserve: tuple[ReservePlugin, ...]
    permit: tuple[PermitPlugin, ...]
    pre_flights: tuple[PreFlightedPlugin, ...]
    pre_bind: tuple[PreBindPlugin, ...]


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

        # Protocol checks are slow: made once here, not at each retry of each pod.
        self._checkers = {n: p for n, p in self.plugins.items() if isinstance(p, RejectionCheckPlugin)}
        self._retry_checkers = {n: p for n, p in self._checkers.items() if getattr(p, "LEAVES_WAITING", False)}
        self.pre_enqueue: list[PreEnqueuePlugin] = at("preEnqueue")
        self.queue_sort: QueueSortPlugin = at("queueSort")[0]
        self.pre_filter: list[PreFilterPlugin] = at("preFilter")
        unchecked = UncheckedConstraints.of(profile, registry)
        if unchecked is not None:  # first, so that its words are the ones a refused pod is told
            self.pre_filter.insert(0, unchecked)
        self.filters: list[FilterPlugin] = at("filter")
        self.post_filter: list[PostFilterPlugin] = at("postFilter")
        self.pre_score: list[PreScorePlugin] = at("preScore")
        self.reserve: list[ReservePlugin] = at("reserve")
        self.permit: list[PermitPlugin] = at("permit")
        self.pre_bind: list[PreBindPlugin] = at("preBind")
        self._pre_flights: list[PreFlightedPlugin] = [p for p in self.pre_bind if isinstance(p, PreBindPreFlight)]
        self.bind_plugins: list[BindPlugin] = at("bind")
        self.post_bind: list[PostBindPlugin] = at("postBind")
        self.reconcile: list[ReconcilePlugin] = at("reconcile")
        # Each plugin's event registrations, read once (a Protocol isinstance per requeue is slow).
        self._registered = {
            name: tuple(plugin.events_to_register())
            for name, plugin in self.plugins.items()
            if isinstance(plugin, EnqueueExtensions)
        }
        # Plugins that name no events: any event may help a pod they rejected (kube-scheduler's rule).
        self._unregistered = frozenset(name for name in self.plugins if name not in self._registered)
        # Per set of rejecting plugins: their registrations and the event kinds those name.
        self._gathered: dict[frozenset[str], tuple[tuple[EventRegistration, ...], frozenset[EventKind]]] = {}
        self._acting: dict[PodFeatures, ActingPlugins] = {}
        self._acting_version = -1
        scores = [WeightedScore(self.plugins[ref.name], ref.weight) for ref in profile.enabled("score")]  # type: ignore[arg-type]
        self.algorithm = SchedulingAlgorithm(
            self.name,
            handle.nodes,
            self.pre_filter,
            self.filters,
            self.post_filter,
            self.pre_score,
            scores,
            handle.gates,
        )

    # ----- queue side
    def run_pre_enqueue(self, pod: PodInfo) -> Status:
        for plugin in self.acting(pod.features).pre_enqueue:
            status = plugin.pre_enqueue(pod)
            if not status.ok:
                return status.with_plugin(plugin.NAME)
        return SUCCESS

    def _gather(self, plugin_names: frozenset[str]) -> tuple[tuple[EventRegistration, ...], frozenset[EventKind]]:
        """Once per set of plugins: a refused pod is parked and asked about again at every event
        and every refusal."""
        known = self._gathered.get(plugin_names)
        if known is None:
            found = tuple(r for name in plugin_names for r in self._registered.get(name, ()))
            known = self._gathered[plugin_names] = (found, frozenset(r.kind for r in found))
        return known

    def registrations(self, plugin_names: frozenset[str]) -> tuple[EventRegistration, ...]:
        return self._gather(plugin_names)[0]

    def requeue_kinds(self, rejectors: frozenset[str]) -> frozenset[EventKind] | None:
        """The kinds of event `requeue_hint` may queue a pod for (None: any)."""
        if not rejectors or not rejectors.isdisjoint(self._unregistered):
            return None
        return self._gather(rejectors)[1]

    def still_rejected(self, pod: PodInfo, rejectors: frozenset[str], at_retry: bool = False) -> bool:
        """Every plugin that rejected the pod can tell, on the cluster as it is now, that it would
        reject it again (`still_rejects`): popped after an event, it is refused without a cycle.
        `at_retry`: the periodic retry asks, and only plugins that may leave a pod waiting there
        answer."""
        if not rejectors:
            return False
        checkers = self._retry_checkers if at_retry else self._checkers
        for name in rejectors:
            plugin = checkers.get(name)
            if plugin is None or plugin.still_rejects(pod) is not True:
                return False
        return True

    def requeue_hint(self, pod: PodInfo, rejectors: frozenset[str], event: ClusterEvent) -> QueueingHint:
        """Queue only if a plugin that rejected the pod says the event may help (kube-scheduler's rule).

        A rejection by no plugin in particular (an error), or by one that names no events, is
        retried on any event.
        """
        if not rejectors or not rejectors.isdisjoint(self._unregistered):
            return QueueingHint.QUEUE
        for registration in self.registrations(rejectors):
            if registration.decide(pod, event) is QueueingHint.QUEUE:
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    # ----- scheduling cycle
    def find_node(self, state: CycleState, pod: PodInfo) -> ScheduleResult:
        return self.algorithm.find_node(state, pod)

    # ----- the gated points around the node choice
    def acting(self, features: PodFeatures) -> ActingPlugins:
        """The PreEnqueue, Reserve, Permit, PreBind pre-flight and PreBind plugins that act on a
        pod with `features` (`pysched.framework.gates`), kept until a gate changes. The scheduler
        looks them up at the pod's scheduling cycle and keeps them for its binding cycle, so a gate
        that opens in between cannot PreBind with a plugin that did not Reserve."""
        version = self.handle.gates.version
        if version != self._acting_version:
            self._acting.clear()
            self._acting_version = version
        found = self._acting.get(features)
        if found is None:
            found = self._acting[features] = ActingPlugins(
                _acting_on(self.pre_enqueue, features),
                _acting_on(self.reserve, features),
                _acting_on(self.permit, features),
                _acting_on(self._pre_flights, features),
                _acting_on(self.pre_bind, features),
            )
        return found

    # ----- timing (kube-scheduler's scheduler_framework_extension_point_duration_seconds and,
    # in sampled cycles, scheduler_plugin_execution_duration_seconds): the algorithm's timers
    def _started(self) -> float:
        return time.perf_counter() if self.algorithm.timed is not None else 0.0

    def _took(self, point: str, started: float, status: Status) -> Status:
        timed = self.algorithm.timed
        if timed is not None:
            timed(self.name, point, status.code, time.perf_counter() - started)
        return status

    def run_reserve(self, state: CycleState, pod: PodInfo, node: NodeName, acting: ActingPlugins) -> Status:
        return self._took("Reserve", self._started(), self._reserve(state, pod, node, acting))

    def _reserve(self, state: CycleState, pod: PodInfo, node: NodeName, acting: ActingPlugins) -> Status:
        reserve = acting.reserve
        state.reserved = reserve
        for i, plugin in enumerate(reserve):
            started = time.perf_counter() if state.plugins_timed else 0.0
            status = plugin.reserve(state, pod, node)
            if state.plugins_timed:
                self.algorithm.plugin_took(plugin.NAME, "Reserve", status.code, started)
            if not status.ok:
                for done in reversed(reserve[: i + 1]):
                    done.unreserve(state, pod, node)
                return status.with_plugin(plugin.NAME)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        """Undo what the pod's Reserve plugins did (every one, when Reserve was not reached)."""
        for plugin in reversed(self.reserve if state.reserved is None else state.reserved):
            plugin.unreserve(state, pod, node)

    def run_permit(
        self, state: CycleState, pod: PodInfo, node: NodeName, acting: ActingPlugins
    ) -> tuple[Status, dict[str, float]]:
        """Success, a rejection, or Wait with the seconds each waiting plugin gives the pod."""
        started = self._started()
        waits: dict[str, float] = {}
        for plugin in acting.permit:
            began = time.perf_counter() if state.plugins_timed else 0.0
            status, timeout = plugin.permit(state, pod, node)
            if state.plugins_timed:
                self.algorithm.plugin_took(plugin.NAME, "Permit", status.code, began)
            if status.code is Code.WAIT:
                waits[plugin.NAME] = timeout
            elif not status.ok:
                return self._took("Permit", started, status.with_plugin(plugin.NAME)), {}
        return self._took("Permit", started, Status(Code.WAIT) if waits else SUCCESS), waits

    # ----- binding cycle
    def run_pre_bind_pre_flights(
        self, state: CycleState, pod: PodInfo, node: NodeName, acting: ActingPlugins
    ) -> Status:
        """Success when some PreBind plugin will work on the pod, Skip when none will, or the
        first error (a pre-flight cannot reject: kube treats a rejection as an error too, in its
        own words)."""
        result = SKIP
        for plugin in acting.pre_flights:
            status = plugin.pre_bind_pre_flight(state, pod, node)
            if status.code is Code.SKIP:
                continue
            if status.code is Code.ERROR:
                return Status(Code.ERROR, status.reasons, plugin.NAME)
            if not status.ok:
                said = "".join(word.capitalize() for word in status.code.name.split("_"))  # kube's code name
                return error(
                    f'PreBindPreFlight {plugin.NAME} returned "{said}", which is unsupported. '
                    "It is supposed to return Success, Skip, or Error status"
                )
            result = SUCCESS
        return result

    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node: NodeName, acting: ActingPlugins) -> Status:
        started = self._started()
        for plugin in acting.pre_bind:
            began = time.perf_counter() if state.plugins_timed else 0.0
            status = await plugin.pre_bind(state, pod, node)
            if state.plugins_timed:
                self.algorithm.plugin_took(plugin.NAME, "PreBind", status.code, began)
            if not status.ok:
                return self._took("PreBind", started, status.with_plugin(plugin.NAME))
        return self._took("PreBind", started, SUCCESS)

    async def run_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        started = self._started()
        for plugin in self.bind_plugins:
            began = time.perf_counter() if state.plugins_timed else 0.0
            status = await plugin.bind(state, pod, node)
            if state.plugins_timed:
                self.algorithm.plugin_took(plugin.NAME, "Bind", status.code, began)
            if status.code is not Code.SKIP:
                return self._took("Bind", started, status.with_plugin(plugin.NAME))
        return self._took("Bind", started, error("every bind plugin skipped the pod"))

    def run_post_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        started = self._started()
        for plugin in self.post_bind:
            began = time.perf_counter() if state.plugins_timed else 0.0
            plugin.post_bind(state, pod, node)
            if state.plugins_timed:
                self.algorithm.plugin_took(plugin.NAME, "PostBind", Code.SUCCESS, began)
        self._took("PostBind", started, SUCCESS)
