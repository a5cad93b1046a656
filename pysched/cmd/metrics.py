"""Prometheus metrics of a running scheduler, under kube-scheduler's names where one exists.

Counters and histograms are fed by the scheduler's observer hooks; queue sizes, API calls and
leadership are read when scraped, so the hot path pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pysched.framework.interfaces import MetricFamily, MetricsPlugin, QueuedPod

if TYPE_CHECKING:
    from pysched.scheduler.scheduler import Scheduler

ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))  # kube-scheduler: ExponentialBuckets(0.001, 2, 15)
SLI_BUCKETS = tuple(0.01 * 2**i for i in range(20))  # kube-scheduler: ExponentialBuckets(0.01, 2, 20)

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
            "E2e latency for a pod being scheduled, from the time the pod enters the queue.",
            ["attempts"],
            buckets=SLI_BUCKETS,
            registry=self.registry,
        )
        self._scraped = _Scraped()
        self.registry.register(self._scraped)

    def attempt(self, profile: str, result: str, seconds: float) -> None:
        self.attempts.labels(result, profile).inc()
        self.attempt_duration.labels(result, profile).observe(seconds)

    def bound(self, queued: QueuedPod, now: float) -> None:
        self.sli.labels(str(min(queued.attempts, 15))).observe(max(now - queued.added, 0.0))

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
