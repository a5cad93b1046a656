"""Nodes that go and come back, as kube-scheduler's cache follows them."""

from __future__ import annotations

import asyncio

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler


def _world() -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    return clock, cluster, Scheduler(builtin_config(registry).only("default"), cluster, clock, registry)


def test_a_pod_deleted_while_its_node_was_gone_does_not_count_when_the_node_returns() -> None:
    """A node replaced under its name (a new VM, PodGC deleting its pods meanwhile) comes back
    empty: the deleted pod's room was charged to it for good, and nothing fitted there again."""

    async def run() -> tuple[SimulatedCluster, Scheduler]:
        clock, cluster, scheduler = _world()
        cluster.add_node(node_dict("n1", cpu="4", memory="8Gi"))
        await scheduler.start()
        cluster.create_pod(pod_dict("old", cpu="3", memory="1Gi", scheduler_name="default"))
        await scheduler.run_until_idle()
        cluster.delete_node(NodeName("n1"))
        cluster.delete_pod(PodKey("default/old"))
        cluster.add_node(node_dict("n1", cpu="4", memory="8Gi"))
        cluster.create_pod(pod_dict("new", cpu="3", memory="1Gi", scheduler_name="default"))
        clock.advance(1.0)
        await scheduler.run_until_idle()
        await scheduler.stop()
        return cluster, scheduler

    cluster, scheduler = asyncio.run(run())
    assert [p.key for p in scheduler.cache.pods_on(NodeName("n1"))] == [PodKey("default/new")]
    assert cluster.pods[PodKey("default/new")].node_name == "n1"
    scheduler.cache.check_consistency()


ZONE = "topology.kubernetes.io/zone"


def test_a_pod_kept_out_by_its_anti_affinity_is_woken_by_a_node_outside_every_zone() -> None:
    """Every zone holds a pod it must not share one with. A node that loses its zone label, or a
    new node without one, passes that term (kube-scheduler's filter and queueing hint): the pod
    goes there at once, not at the retry five minutes later."""

    async def run(change: str) -> str | None:
        clock, cluster, scheduler = _world()
        cluster.add_node(node_dict("n1", cpu="4", labels={ZONE: "a"}))
        cluster.add_node(node_dict("n2", cpu="4", labels={ZONE: "b"}))
        await scheduler.start()
        for name, node in (("web1", "n1"), ("web2", "n2")):
            cluster.create_pod(pod_dict(name, cpu="1", scheduler_name="default", labels={"app": "web"}, node_name=node))
        x = pod_dict("x", cpu="1", scheduler_name="default", labels={"app": "x"})
        term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}
        x["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        cluster.create_pod(x)
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/x")].node_name is None
        if change == "label removed":
            cluster.add_node(node_dict("n1", cpu="4"))  # n1 as it is now: no zone label
        else:
            cluster.add_node(node_dict("n3", cpu="4"))
        clock.advance(11.0)  # past any backoff, far from the periodic retry
        await scheduler.run_until_idle()
        await scheduler.stop()
        return cluster.pods[PodKey("default/x")].node_name

    assert asyncio.run(run("label removed")) == "n1"
    assert asyncio.run(run("node added")) == "n3"


def test_node_updates_that_change_no_label_taint_or_cordon_wake_no_pod_a_placement_filter_refused() -> None:
    """Kubelets rewrite status.images and allocatable often: each such update sent every pod a
    node selector kept out through a whole cycle and a new FailedScheduling event."""

    async def run() -> tuple[list[int], SimulatedCluster]:
        clock, cluster, scheduler = _world()
        for i in range(3):
            cluster.add_node(node_dict(f"n{i}", cpu="8"))
        await scheduler.start()
        for i in range(20):
            cluster.create_pod(pod_dict(f"p{i}", cpu="1", scheduler_name="default", node_selector={"gpu": "true"}))
        await scheduler.run_until_idle()
        cycles = [scheduler.stats.unschedulable]
        for version in range(5):
            raw = node_dict("n0", cpu="8")
            raw["status"]["images"] = [
                {"names": [f"registry.example/app:{v}"], "sizeBytes": 1000} for v in range(version + 1)
            ]
            cluster.add_node(raw)  # only its images changed
            cluster.add_node(node_dict("n1", cpu="8", memory=f"{120 + version}Gi"))  # only its allocatable
            clock.advance(11.0)
            await scheduler.run_until_idle()
        cycles.append(scheduler.stats.unschedulable)
        cluster.add_node(node_dict("n2", cpu="32", labels={"gpu": "true"}))  # a label that helps
        clock.advance(11.0)
        await scheduler.run_until_idle()
        await scheduler.stop()
        return cycles, cluster

    cycles, cluster = asyncio.run(run())
    assert cycles == [20, 20]
    assert {p.node_name for p in cluster.pods.values()} == {"n2"}


def test_a_pending_pod_relabelled_out_of_an_anti_affinity_is_tried_again_at_once() -> None:
    """Its own labels decide whether a placed pod's anti-affinity keeps it out: kube-scheduler
    retries it on the label change (UpdatePodLabel), not at the retry five minutes later."""

    async def run() -> str | None:
        clock, cluster, scheduler = _world()
        cluster.add_node(node_dict("a", cpu="4", memory="8Gi"))
        guard = pod_dict("q", cpu="1", scheduler_name="default", labels={"app": "q"}, node_name="a")
        term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
        guard["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        cluster.create_pod(guard)
        await scheduler.start()
        cluster.create_pod(pod_dict("p", cpu="1", scheduler_name="default", labels={"app": "x"}))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p")].node_name is None
        clock.advance(2.0)
        cluster.set_labels(PodKey("default/p"), {"app": "y"})
        clock.advance(1.0)
        await scheduler.run_until_idle()
        await scheduler.stop()
        return cluster.pods[PodKey("default/p")].node_name

    assert asyncio.run(run()) == "a"


def test_deleting_a_nominated_pod_frees_its_held_room_for_the_pods_it_kept_out() -> None:
    async def run() -> str | None:
        clock, cluster, scheduler = _world()
        cluster.add_node(node_dict("a", cpu="4", memory="8Gi"))
        cluster.create_pod(pod_dict("v", cpu="3", scheduler_name="other", node_name="a"))
        await scheduler.start()
        cluster.create_pod(pod_dict("h", cpu="3", scheduler_name="default", priority=10))
        await scheduler.run_until_idle()  # v is preempted, h nominated to a: its room held there
        assert scheduler.nominator.nominated(PodKey("default/h")) == "a"
        clock.advance(0.2)
        cluster.create_pod(pod_dict("l", cpu="2", scheduler_name="default"))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/l")].node_name is None  # kept out by h's held room
        cluster.delete_pod(PodKey("default/h"))
        clock.advance(11.0)  # past any backoff, far from the periodic retry
        await scheduler.run_until_idle()
        await scheduler.stop()
        return cluster.pods[PodKey("default/l")].node_name

    assert asyncio.run(run()) == "a"
