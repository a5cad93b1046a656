"""`pysched run`'s scraped metrics: the sizes of what the scheduler keeps (a soak reads them)."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from pysched.api.builders import make_pod, node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.backend.live.cluster import LiveCluster
from pysched.backend.live.eventsink import EventRecord
from pysched.backend.simulated import SimulatedCluster
from pysched.cmd.metrics import SchedulerMetrics, queue_metrics
from pysched.cmd.run import RunState, add_sources
from pysched.framework.clock import VirtualClock
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler
from pysched.testing.scheduler import parse_metrics
from pysched.testing.scripted import ScriptedApi

if TYPE_CHECKING:
    from pysched.backend.live.client import AsyncKubeClient
    from pysched.framework.interfaces import QueuedPod

NODES, PODS = "/api/v1/nodes", "/api/v1/pods"


def _pysched(api: ScriptedApi, standby: bool = False) -> tuple[LiveCluster, Scheduler]:
    """The built-in `pysched` profile on a live backend over a scripted API."""
    backend = LiveCluster(api)
    registry = default_registry()
    builtin = builtin_config(registry)
    config = type(builtin)(tuple(p for p in builtin.profiles if p.scheduler_name == "pysched"), builtin.source)
    return backend, Scheduler(config, backend, VirtualClock(), registry, standby=standby)


async def test_cache_informer_permit_and_event_sizes_follow_the_pods() -> None:
    api = ScriptedApi()
    backend, scheduler = _pysched(api)
    metrics = SchedulerMetrics()
    client = cast("AsyncKubeClient", SimpleNamespace(calls=collections.Counter()))
    add_sources(metrics, scheduler, backend, client, RunState(leader=True))

    def scrape() -> dict[str, float]:
        return parse_metrics(metrics.render().decode())

    await scheduler.start()
    await api.send(NODES, "ADDED", node_dict("n1"))
    await api.send(PODS, "ADDED", pod_dict("running", node_name="n1") | {"status": {"phase": "Running"}})
    await api.send(PODS, "ADDED", pod_dict("pending"))
    scheduler.cache.assume(make_pod("assumed"), NodeName("n1"))
    scheduler.waiting_pods.hold(make_pod("held"), NodeName("n1"), {"Gate": 60.0}, 0.0, lambda *_: None)
    backend.events.record(EventRecord("default", "pending", "uid", "Normal", "Scheduled", "Binding", "note", "pysched"))
    values = scrape()  # the event workers have not run yet: the event is still queued
    assert values['scheduler_cache_size{type="nodes"}'] == 1.0
    assert values['scheduler_cache_size{type="pods"}'] == 2.0  # the running one and the assumed one
    assert values['scheduler_cache_size{type="assumed_pods"}'] == 1.0
    assert values['scheduler_pending_pods{queue="active"}'] == 1.0
    assert values['pysched_informer_objects{resource="pods"}'] == 2.0
    assert values['pysched_informer_objects{resource="nodes"}'] == 1.0
    assert values["pysched_waiting_pods"] == 1.0
    assert values["pysched_event_backlog"] == 1.0 and values["pysched_event_series"] == 1.0

    await api.send(PODS, "DELETED", pod_dict("running", node_name="n1") | {"status": {"phase": "Running"}})
    await api.send(PODS, "DELETED", pod_dict("pending"))
    scheduler.cache.forget(make_pod("assumed"))
    for waiting in scheduler.waiting_pods:
        waiting.reject("Gate", "no")
    await scheduler.stop()
    await backend.stop()  # drains the event backlog first
    values = scrape()
    assert values['scheduler_cache_size{type="pods"}'] == 0.0
    assert values['scheduler_cache_size{type="assumed_pods"}'] == 0.0
    assert values['scheduler_pending_pods{queue="active"}'] == 0.0
    assert values['pysched_informer_objects{resource="pods"}'] == 0.0
    assert values["pysched_waiting_pods"] == 0.0
    assert values["pysched_event_backlog"] == 0.0


async def test_a_standby_exports_no_queue_permit_or_plugin_families_and_says_it_does_not_lead() -> None:
    backend, scheduler = _pysched(ScriptedApi(), standby=True)
    client = cast("AsyncKubeClient", SimpleNamespace(calls=collections.Counter({("GET", 200): 3})))
    scraped: dict[bool, dict[str, float]] = {}
    declared: dict[bool, str] = {}
    for leader in (False, True):
        metrics = SchedulerMetrics()
        add_sources(metrics, scheduler, backend, client, RunState(leader=leader), lease_name="train-sched")
        declared[leader] = metrics.render().decode()
        scraped[leader] = parse_metrics(declared[leader])
    standby, leading = scraped[False], scraped[True]
    for family in ("scheduler_queue_incoming_pods", "scheduler_unschedulable_pods"):  # no samples yet
        assert f"# HELP {family}" not in declared[False], family
        assert f"# HELP {family}" in declared[True], family
    assert standby['leader_election_master_status{name="train-sched"}'] == 0.0
    assert leading['leader_election_master_status{name="train-sched"}'] == 1.0
    for family in ("scheduler_pending_pods", "pysched_waiting_pods", "pysched_deadlines_total", "pysched_autoscale_"):
        assert not any(k.startswith(family) for k in standby), family
        assert any(k.startswith(family) for k in leading), family
    assert standby['rest_client_requests_total{code="200",method="GET"}'] == 3.0
    assert [v for k, v in standby.items() if k.startswith("pysched_build_info{")] == [1.0]


DASHBOARD = Path(__file__).resolve().parents[3] / "manifests" / "monitoring" / "grafana-dashboard.json"
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count")}


def test_every_metric_the_grafana_dashboard_queries_is_one_pysched_run_exports() -> None:
    backend, scheduler = _pysched(ScriptedApi())
    metrics = SchedulerMetrics()
    client = cast("AsyncKubeClient", SimpleNamespace(calls=collections.Counter()))
    add_sources(metrics, scheduler, backend, client, RunState(leader=True))
    # Every family is declared (# TYPE) even before it has a sample.
    declared = re.findall(r"^# TYPE (\S+) (\S+)$", metrics.render().decode(), flags=re.MULTILINE)
    # A counter's samples end in _total, whether its TYPE line names it with the suffix or not.
    samples = {name.removesuffix("_total") + "_total" for name, kind in declared if kind == "counter"}
    samples |= {name + suffix for name, kind in declared if kind != "counter" for suffix in SUFFIXES.get(kind, ("",))}
    dashboard = json.loads(DASHBOARD.read_text())
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\b((?:scheduler|pysched|rest_client|leader_election)_[a-z_]+)", target["expr"])
    }
    assert len(queried) >= 10, queried
    assert queried <= samples, sorted(queried - samples)
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


async def test_kube_scheduler_families_follow_the_queue_the_extension_points_and_the_attempts() -> None:
    from pysched.backend.simulated import SimulatedCluster

    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    metrics = SchedulerMetrics()
    scheduler = Scheduler(builtin_config(registry).only("default"), cluster, clock, registry, observer=metrics)
    metrics.add_source(lambda: queue_metrics(scheduler))

    def scrape() -> dict[str, float]:
        return parse_metrics(metrics.render().decode())

    cluster.add_node(node_dict("a", cpu="4", memory="8Gi"))
    await scheduler.start()
    for name in ("p1", "p2", "big"):
        cluster.create_pod(pod_dict(name, cpu="3" if name == "big" else "1", memory="1Gi", scheduler_name="default"))
    await scheduler.run_until_idle()
    values = scrape()
    assert values['scheduler_queue_incoming_pods_total{event="UnschedulablePodAdd",queue="active"}'] == 3.0
    assert values['scheduler_queue_incoming_pods_total{event="ScheduleAttemptFailure",queue="unschedulable"}'] == 1.0
    assert values['scheduler_unschedulable_pods{plugin="NodeResourcesFit",profile="default"}'] == 1.0
    point = (
        'scheduler_framework_extension_point_duration_seconds_count{extension_point="%s",profile="default",status="%s"}'
    )
    assert values[point % ("Bind", "Success")] == 2.0
    assert values[point % ("PreFilter", "Success")] == 3.0
    assert values[point % ("PostFilter", "Unschedulable")] == 1.0
    assert values["scheduler_pod_scheduling_attempts_count"] == 2.0
    assert values['scheduler_pod_scheduling_attempts_bucket{le="1.0"}'] == 2.0
    # One cycle in ten has its plugins timed one by one: the first here (p1's), not p2's.
    plugin = 'scheduler_plugin_execution_duration_seconds_count{extension_point="%s",plugin="%s",status="Success"}'
    assert values[plugin % ("Bind", "DefaultBinder")] == 1.0

    cluster.add_node(node_dict("b", cpu="4", memory="8Gi"))  # room for the big one: a NodeAdd moves it
    clock.advance(10.0)
    await scheduler.run_until_idle()
    values = scrape()
    moved = {k: v for k, v in values.items() if k.startswith("scheduler_queue_incoming_pods_total") and "NodeAdd" in k}
    assert sum(moved.values()) == 1.0, moved
    assert not any(k.startswith("scheduler_unschedulable_pods{") and v for k, v in values.items())
    assert values[point % ("Bind", "Success")] == 3.0
    assert values['scheduler_pod_scheduling_attempts_bucket{le="1.0"}'] == 2.0  # the big one took two
    assert values['scheduler_pod_scheduling_attempts_bucket{le="2.0"}'] == 3.0
    await scheduler.stop()


async def test_a_pod_refused_without_a_cycle_counts_as_an_unschedulable_attempt() -> None:
    """Let out by nodes too small to help, the pod is refused at the pop (no cycle): each such
    refusal is an attempt in scheduler_schedule_attempts_total, as the queue and the SLI count it."""
    clock = VirtualClock(1_767_225_600.0)
    cluster = SimulatedCluster(clock)
    cluster.add_node(node_dict("n0", cpu="4"))
    registry = default_registry()
    config = builtin_config(registry)
    metrics = SchedulerMetrics()
    scheduler = Scheduler(config.only("default"), cluster, clock, registry, observer=metrics)
    await scheduler.start()
    cluster.create_pod(pod_dict("filler", cpu="3", scheduler_name="default"))
    await scheduler.run_until_idle()
    cluster.create_pod(pod_dict("big", cpu="2", scheduler_name="default"))
    await scheduler.run_until_idle()
    for i in range(4):
        cluster.add_node(node_dict(f"tiny{i}", cpu="1"))
        clock.advance(11)
        await scheduler.run_until_idle()
    cluster.delete_pod(PodKey("default/filler"))
    clock.advance(11)
    await scheduler.run_until_idle()
    await scheduler.stop()
    found = parse_metrics(metrics.render().decode())
    attempts = {k: v for k, v in found.items() if k.startswith("scheduler_schedule_attempts_total")}
    total = sum(attempts.values())
    assert found["scheduler_pod_scheduling_attempts_sum"] == total == 7.0, attempts  # 2 scheduled, 5 refused


async def test_the_sli_runs_from_the_first_pass_of_pre_enqueue_and_caps_attempts_at_15_plus() -> None:
    """A pod held an hour behind a scheduling gate is scheduled at once when the gate goes: its
    SLI is that instant, not the hour (kube measures from InitialAttemptTimestamp); a pod bound
    at its 15th attempt or later is labelled "15+", as kube's getAttemptsLabel labels it."""
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    cluster.add_node(node_dict("a", cpu="4", memory="8Gi"))
    registry = default_registry()
    metrics = SchedulerMetrics()
    scheduler = Scheduler(builtin_config(registry).only("default"), cluster, clock, registry, observer=metrics)
    await scheduler.start()
    gated = pod_dict("gated", scheduler_name="default")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    cluster.create_pod(gated)
    await scheduler.run_until_idle()
    clock.advance(3600.0)
    cluster.set_scheduling_gates(PodKey("default/gated"), [])
    await scheduler.run_until_idle()
    assert cluster.pods[PodKey("default/gated")].node_name == "a"
    values = parse_metrics(metrics.render().decode())
    assert values['scheduler_pod_scheduling_sli_duration_seconds_sum{attempts="1"}'] == 0.0
    queued = SimpleNamespace(attempts=15, added=0.0, first_active=5.0)
    metrics.bound(cast("QueuedPod", queued), 10.0)
    values = parse_metrics(metrics.render().decode())
    assert values['scheduler_pod_scheduling_sli_duration_seconds_sum{attempts="15+"}'] == 5.0
    await scheduler.stop()
