"""Prometheus metrics of a running scheduler, under kube-scheduler's names where one exists.

Counters and histograms are fed by the scheduler's observer hooks; queue sizes, API calls and
leadership are read when scraped, so the hot path pays nothing for them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pysched.framework.interfaces import MetricFamily, MetricsPlugin, QueuedPod
from pysched.framework.status import Code
from pysched.scheduler.observer import ExtensionPointTimer, PluginTimer

if TYPE_CHECKING:
    from pysched.scheduler.scheduler import Scheduler

ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))  # kube-scheduler: ExponentialBuckets(0.001, 2, 15)
SLI_BUCKETS = tuple(0.01 * 2**i for i in range(20))  # kube-scheduler: ExponentialBuckets(0.01, 2, 20)
POINT_BUCKETS = tuple(0.0001 * 2**i for i in range(12))  # kube-scheduler: ExponentialBuckets(0.0001, 2, 12)
PLUGIN_BUCKETS = tuple(0.00001 * 1.5**i for i in range(20))  # kube-scheduler: ExponentialBuckets(0.00001, 1.5, 20)
ATTEMPTS_BUCKETS = (1.0, 2.0, 4.0, 8.0, 16.0)  # kube-scheduler: ExponentialBuckets(1, 2, 5)
MAX_ATTEMPTS_LABEL = 15  # the SLI's attempts label stops at "15+" (kube-scheduler's getAttemptsLabel)
# The `status` label as kube-scheduler's framework writes a code.
CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
}

MetricSource = Callable[[], Iterable[Metric]]


class _Scraped(Collector):
    def __init__(self) -> None:
        self.sources: list[MetricSource] = []

    def collect(self) -> Iterator[Metric]:
        for source in self.sources:
            yield from source()


class SchedulerMetrics:
    """A SchedulingObserver that records into its own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result and profile.",
            ["result", "profile"],
            registry=self.registry,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            ["result", "profile"],
            buckets=ATTEMPT_BUCKETS,
            registry=self.registry,
        )
        self.sli = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time it first passed PreEnqueue.",
            ["attempts"],
            buckets=SLI_BUCKETS,
            registry=self.registry,
        )
        self.attempts_needed = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=ATTEMPTS_BUCKETS,
            registry=self.registry,
        )
        self.point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["profile", "extension_point", "status"],
            buckets=POINT_BUCKETS,
            registry=self.registry,
        )
        self.plugin_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=PLUGIN_BUCKETS,
            registry=self.registry,
        )
        self._point_timer = _ByCode(self.point_duration)
        self._plugin_timer = _ByCode(self.plugin_duration)
        self._scraped = _Scraped()
        self.registry.register(self._scraped)

    @property
    def extension_points(self) -> ExtensionPointTimer:
        return self._point_timer

    @property
    def plugin_executions(self) -> PluginTimer:
        return self._plugin_timer

    def attempt(self, profile: str, result: str, seconds: float) -> None:
        self.attempts.labels(result, profile).inc()
        self.attempt_duration.labels(result, profile).observe(seconds)

    def bound(self, queued: QueuedPod, now: float) -> None:
        start = queued.added if math.isnan(queued.first_active) else queued.first_active
        attempts = "15+" if queued.attempts >= MAX_ATTEMPTS_LABEL else str(queued.attempts)  # kube's cap
        self.sli.labels(attempts).observe(max(now - start, 0.0))
        self.attempts_needed.observe(queued.attempts)

    def add_source(self, source: MetricSource) -> None:
        self._scraped.sources.append(source)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def gauge(name: str, documentation: str, values: dict[tuple[str, ...], float], labels: list[str]) -> Metric:
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for key, value in values.items():
        family.add_metric(list(key), value)
    return family


def counter(name: str, documentation: str, values: dict[tuple[str, ...], float], labels: list[str]) -> Metric:
    family = CounterMetricFamily(name, documentation, labels=labels)
    for key, value in values.items():
        family.add_metric(list(key), value)
    return family


class _ByCode:
    """A duration histogram labelled (who, extension point, status), its children looked up once:
    it is observed several times per scheduling cycle."""

    __slots__ = ("children", "histogram")

    def __init__(self, histogram: Histogram) -> None:
        self.histogram = histogram
        self.children: dict[tuple[str, str, Code], Histogram] = {}

    def __call__(self, who: str, point: str, code: Code, seconds: float) -> None:
        key = (who, point, code)
        child = self.children.get(key)
        if child is None:
            child = self.children[key] = self.histogram.labels(who, point, CODE_NAMES[code])
        child.observe(seconds)


def queue_metrics(scheduler: Scheduler) -> list[Metric]:
    """The scheduling queue under kube-scheduler's names: what waits where, why pods came in, and
    which plugins keep them out."""
    counts = scheduler.queue.counts()
    return [
        gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type.",
            {(name,): float(n) for name, n in counts.items() if name != "in-flight"},
            ["queue"],
        ),
        counter(
            "scheduler_queue_incoming_pods",
            "Number of pods added to scheduling queues by event and queue type.",
            {(queue, event): float(n) for (queue, event), n in scheduler.queue.incoming.items()},
            ["queue", "event"],
        ),
        gauge(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge "
            "for all plugins that caused it to not schedule.",
            {key: float(n) for key, n in scheduler.queue.unschedulable_by_plugin().items()},
            ["plugin", "profile"],
        ),
    ]


def plugin_metrics(scheduler: Scheduler) -> list[Metric]:
    """Metrics plugins keep (`MetricsPlugin`, e.g. Autoscale's), one family per name with a
    `profile` label: profiles share a name when they enable the same plugin."""
    merged: dict[str, tuple[MetricFamily, dict[tuple[str, ...], float]]] = {}
    for name, framework in scheduler.frameworks.items():
        for plugin in framework.plugins.values():
            if not isinstance(plugin, MetricsPlugin):
                continue
            for family in plugin.metric_families():
                _, values = merged.setdefault(family.name, (family, {}))
                values.update({(name, *key): value for key, value in family.values.items()})
    out: list[Metric] = []
    for family, values in merged.values():
        make = counter if family.kind == "counter" else gauge
        out.append(make(family.name, family.documentation, values, ["profile", *family.labels]))
    return out
