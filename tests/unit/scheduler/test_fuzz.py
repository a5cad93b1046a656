"""Hostile input through the whole scheduler on the simulated backend: nothing escapes.

Each example is a small cluster (some nodes broken) and a batch of pods, half valid and half
hostile, scheduled by the full `pysched` profile (DeadlineLaxity, UrgencyPlacement, Autoscale);
running pods then report hostile progress and hostile annotation updates arrive while pods wait.
The test command runs FUZZ_EXAMPLES (2,000 pods, 400 nodes); `PYSCHED_FUZZ_EXAMPLES=260` runs the
full corpus (10,400 pods, 2,080 nodes; perf/README.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pysched.api.annotations import PROGRESS, TOTAL_STEPS
from pysched.api.ids import PodKey
from pysched.api.objects import MALFORMED
from pysched.api.resources import pod_requests
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler
from pysched.testing.hostile import NOW, PROGRESS_VALUES, STEPS, hostile_node, hostile_pod

FUZZ_EXAMPLES = int(os.environ.get("PYSCHED_FUZZ_EXAMPLES", "50"))
NODES = 8
PODS = 40  # 20 valid, 20 hostile (larger examples overrun hypothesis' buffer and slow it down)

REGISTRY = default_registry()
CONFIG = builtin_config(REGISTRY).only("pysched")


@st.composite
def batch(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [draw(hostile_node(i)) for i in range(NODES)]
    valid = [
        draw(hostile_pod(i, draw(st.sampled_from(["pysched", "pysched", "other"])), hostile=False))
        for i in range(PODS // 2)
    ]
    hostile = [draw(hostile_pod(PODS + i)) for i in range(PODS // 2)]
    return nodes, valid, hostile


def _readable(raw: dict[str, Any]) -> bool:
    try:
        pod_requests(raw)
    except MALFORMED:
        return False
    return True


async def _exercise(
    nodes: list[dict[str, Any]], valid: list[dict[str, Any]], hostile: list[dict[str, Any]], later: list[str]
) -> None:
    clock = VirtualClock(NOW)
    cluster = SimulatedCluster(clock)
    scheduler = Scheduler(CONFIG, cluster, clock, REGISTRY)
    for raw in nodes:
        with contextlib.suppress(*MALFORMED):  # the simulator refuses an unreadable node, as validation would
            cluster.add_node(raw)
    await scheduler.start()
    for raw in [*valid, *hostile]:
        cluster.create_pod(raw)
    await scheduler.run_until_idle()

    # Hostile updates: progress on running pods, total steps on waiting ones, then reconciles.
    for i, pod in enumerate(list(cluster.pods.values())):
        value = later[i % len(later)]
        cluster.set_annotations(pod.key, {PROGRESS if pod.node_name else TOTAL_STEPS: value})
    for _ in range(3):
        clock.advance(65.0)
        await scheduler.run_until_idle()

    assert scheduler.incidents.total == 0, dict(scheduler.incidents.counts)
    scheduler.cache.check_consistency()
    events: dict[str, set[str]] = {}
    for event in cluster.events:
        events.setdefault(event.pod, set()).add(event.reason)
    for raw in valid:
        meta = raw["metadata"]
        key = PodKey(f"{meta['namespace']}/{meta['name']}")
        pod = cluster.pods[key]
        assert pod is not None, f"valid pod {key} was refused as unreadable"
        if raw["spec"]["schedulerName"] != "pysched":
            assert pod.node_name is None and key not in events
        elif pod.node_name is None:
            assert "FailedScheduling" in events.get(key, set()), f"{key} left pending with no event"
    for raw in hostile:
        meta = raw["metadata"]
        key = PodKey(f"{meta['namespace']}/{meta['name']}")
        if key not in cluster.pods:
            assert "FailedScheduling" in events.get(key, set()), f"unreadable {key} got no event"
        elif cluster.pods[key].node_name is None:
            assert "FailedScheduling" in events.get(key, set()), f"{key} left pending with no event"
    for name, node in cluster.nodes.items():
        used: dict[str, int] = {}
        for bound in cluster.pods.values():
            if bound.node_name == name:
                for resource, units in bound.requests.items():
                    used[resource] = used.get(resource, 0) + units
        for resource, units in used.items():
            assert units <= node.allocatable.get(resource, 0), f"{name} overcommitted in {resource}"

    # Everything deleted: nothing is left behind in the queue, the cache or at Permit.
    for key in list(cluster.pods):
        cluster.delete_pod(key)
    await scheduler.run_until_idle()
    assert len(scheduler.queue) == 0
    assert scheduler.cache.bound_pods() == []
    assert len(scheduler.waiting_pods) == 0
    await scheduler.stop()


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: a failure is printed as drawn
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(batch(), st.lists(st.one_of(PROGRESS_VALUES, STEPS), min_size=1, max_size=8))
def test_hostile_clusters_never_escape_the_scheduler(
    cluster: tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]], later: list[str]
) -> None:
    nodes, valid, hostile = cluster
    assert all(_readable(raw) for raw in valid)  # the valid half really is valid
    asyncio.run(_exercise(nodes, valid, hostile, later))
