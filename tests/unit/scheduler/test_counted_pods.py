"""The filters that count placed pods (InterPodAffinity, PodTopologySpread) on the views of the
cluster other than the cycle's own.

Nominated pods (still pending, their room held on a node) are counted and also left out: a node
must pass both, as kube-scheduler filters with nominated pods and without them, so a pod that is
only nominated never meets another pod's required affinity or evens a spread. Preemption's dry
runs count again with the victims taken off (kube's RemovePod), so evicting lower-priority pods
makes room for an anti-affinity or a spread."""

from __future__ import annotations

from typing import Any

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.plugins import default_registry
from pysched.scheduler.scheduler import Scheduler
from pysched.testing.simulated import settle

T0 = 1_000_000.0
COUNTING = [{"name": "InterPodAffinity"}, {"name": "PodTopologySpread"}]
PROFILE = {
    "profiles": [
        {
            "schedulerName": "pysched",
            "plugins": {
                "queueSort": [{"name": "PrioritySort"}],
                "preFilter": COUNTING,
                "filter": [{"name": "NodeResourcesFit"}, *COUNTING],
                "postFilter": [{"name": "DefaultPreemption"}],
                "score": [{"name": "LeastAllocated", "weight": 1}],
                "bind": [{"name": "DefaultBinder"}],
            },
        }
    ]
}
HOSTNAME = "kubernetes.io/hostname"
APP_X = {"matchLabels": {"app": "x"}}


def _world(*placed: tuple[str, str]) -> tuple[SimulatedCluster, Scheduler]:
    """Nodes a and b (4 CPUs each), with `placed` pods (name, node) labelled app=x."""
    clock = VirtualClock(T0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    scheduler = Scheduler(parse_config(PROFILE, "t", registry), cluster, clock, registry)
    for name in "ab":
        cluster.add_node(node_dict(name, cpu="4", memory="64Gi", labels={HOSTNAME: name}))
    for name, node in placed:
        cluster.create_pod(pod_dict(name, cpu="1", memory="1Gi", node_name=node, labels={"app": "x"}))
    settle(scheduler)
    return cluster, scheduler


def _nominate(cluster: SimulatedCluster, scheduler: Scheduler, node: str, cpu: str = "1") -> None:
    """A pending app=x pod of another scheduler, nominated to `node` (its room held there)."""
    pod = cluster.create_pod(pod_dict("nom", cpu=cpu, memory="1Gi", scheduler_name="other", labels={"app": "x"}))
    assert pod is not None
    scheduler.nominator.nominate(pod, NodeName(node))


def _with_affinity(name: str) -> dict[str, Any]:
    raw = pod_dict(name, cpu="1", memory="1Gi")
    term = {"labelSelector": APP_X, "topologyKey": HOSTNAME}
    raw["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return raw


def _spread(name: str) -> dict[str, Any]:
    raw = pod_dict(name, cpu="1", memory="1Gi", labels={"app": "x"})
    constraint = {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": APP_X}
    raw["spec"]["topologySpreadConstraints"] = [constraint]
    return raw


def _last_event(cluster: SimulatedCluster, name: str) -> tuple[str, str]:
    return next((e.reason, e.note) for e in reversed(cluster.events) if e.pod == f"default/{name}")


def test_a_required_affinity_is_not_met_by_a_pod_only_nominated_there() -> None:
    cluster, scheduler = _world()
    _nominate(cluster, scheduler, "a")
    cluster.create_pod(_with_affinity("q"))
    settle(scheduler)
    assert cluster.pods[PodKey("default/q")].node_name is None
    reason, note = _last_event(cluster, "q")
    assert reason == "FailedScheduling"
    assert note.startswith("0/2 nodes are available: 2 node(s) didn't match pod affinity rules."), note
    assert "Preemption is not helpful" in note
    scheduler.cache.check_consistency()
    # Once the pod is placed, the affinity is met where it runs.
    cluster.delete_pod(PodKey("default/nom"))
    cluster.create_pod(pod_dict("real", cpu="1", memory="1Gi", node_name="b", labels={"app": "x"}))
    settle(scheduler)
    assert cluster.pods[PodKey("default/q")].node_name == "b"


def test_a_placed_pod_still_meets_the_affinity_beside_a_nominated_one() -> None:
    cluster, scheduler = _world(("placed", "a"))
    _nominate(cluster, scheduler, "a")
    cluster.create_pod(_with_affinity("q"))
    settle(scheduler)
    assert cluster.pods[PodKey("default/q")].node_name == "a"


def test_the_pass_without_nominated_pods_runs_beside_a_lower_nomination_lifted() -> None:
    # A nomination of lower priority does not count for the pod at all (lifted for its cycle);
    # one of its own priority still needs the second pass, which must not be skipped for it.
    cluster, scheduler = _world()
    low = cluster.create_pod(pod_dict("low", cpu="1", memory="1Gi", scheduler_name="other"))
    assert low is not None
    scheduler.nominator.nominate(low, NodeName("b"))
    peer = pod_dict("nom", priority=10, cpu="1", memory="1Gi", scheduler_name="other", labels={"app": "x"})
    nominated = cluster.create_pod(peer)
    assert nominated is not None
    scheduler.nominator.nominate(nominated, NodeName("a"))
    q = _with_affinity("q")
    q["spec"]["priority"] = 10
    cluster.create_pod(q)
    settle(scheduler)
    assert cluster.pods[PodKey("default/q")].node_name is None
    assert scheduler.cache.is_nominated(PodKey("default/low"))  # held again after q's cycle
    scheduler.cache.check_consistency()


def test_a_spread_is_not_evened_by_a_pod_only_nominated() -> None:
    # a runs one app=x pod, b holds a nominated one (3 CPUs, so LeastAllocated prefers a). With
    # the nominated pod counted both nodes are even and a is fine; without it a would be 2 to 0.
    cluster, scheduler = _world(("placed", "a"))
    _nominate(cluster, scheduler, "b", cpu="3")
    cluster.create_pod(_spread("s"))
    settle(scheduler)
    assert cluster.pods[PodKey("default/s")].node_name == "b"
    scheduler.cache.check_consistency()
    assert scheduler.cache.is_nominated(PodKey("default/nom"))  # held again after the pass without it


def test_a_higher_priority_pod_evicts_the_pod_its_anti_affinity_avoids() -> None:
    cluster, scheduler = _world()
    cluster.create_pod(pod_dict("low", cpu="1", memory="1Gi", node_name="a", labels={"app": "x"}))
    cluster.create_pod(pod_dict("full", priority=1000, cpu="4", memory="1Gi", node_name="b"))
    settle(scheduler)
    raw = pod_dict("hi", priority=100, cpu="1", memory="1Gi")
    term = {"labelSelector": APP_X, "topologyKey": HOSTNAME}
    raw["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    cluster.create_pod(raw)
    settle(scheduler)
    assert PodKey("default/low") not in cluster.pods
    assert cluster.pods[PodKey("default/hi")].node_name == "a"
    assert _last_event(cluster, "hi")[0] == "Scheduled"
    scheduler.cache.check_consistency()


def test_a_higher_priority_pod_evicts_what_its_spread_needs_and_no_more() -> None:
    # a runs three app=x pods of priority 0, b one beside a pod of higher priority than the
    # preemptor that leaves no room: on a the spread allows two app=x pods (skew 1 against b's
    # one), so one of a's three stays beside the preemptor.
    cluster, scheduler = _world()
    for i in range(3):
        cluster.create_pod(pod_dict(f"low{i}", cpu="500m", memory="1Gi", node_name="a", labels={"app": "x"}))
    cluster.create_pod(pod_dict("low-b", cpu="500m", memory="1Gi", node_name="b", labels={"app": "x"}))
    cluster.create_pod(pod_dict("full", priority=1000, cpu="3500m", memory="1Gi", node_name="b"))
    settle(scheduler)
    raw = _spread("s")
    raw["spec"]["priority"] = 100
    cluster.create_pod(raw)
    settle(scheduler)
    assert cluster.pods[PodKey("default/s")].node_name == "a"
    assert sum(PodKey(f"default/low{i}") in cluster.pods for i in range(3)) == 1
    assert PodKey("default/low-b") in cluster.pods
    scheduler.cache.check_consistency()
