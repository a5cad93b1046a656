"""`pysched run`'s scraped metrics: the sizes of what the scheduler keeps (a soak reads them)."""

from __future__ import annotations

import collections
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from pysched.api.builders import make_pod, node_dict, pod_dict
from pysched.api.ids import NodeName
from pysched.backend.live.cluster import LiveCluster
from pysched.backend.live.eventsink import EventRecord
from pysched.cmd.metrics import SchedulerMetrics
from pysched.cmd.run import RunState, add_sources
from pysched.framework.clock import VirtualClock
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler
from pysched.testing.scheduler import parse_metrics
from pysched.testing.scripted import ScriptedApi

if TYPE_CHECKING:
    from pysched.backend.live.client import AsyncKubeClient

NODES, PODS = "/api/v1/nodes", "/api/v1/pods"


async def test_cache_informer_permit_and_event_sizes_follow_the_pods() -> None:
    api = ScriptedApi()
    backend = LiveCluster(api)
    registry = default_registry()
    builtin = builtin_config(registry)
    config = type(builtin)(tuple(p for p in builtin.profiles if p.scheduler_name == "pysched"), builtin.source)
    scheduler = Scheduler(config, backend, VirtualClock(), registry)
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
