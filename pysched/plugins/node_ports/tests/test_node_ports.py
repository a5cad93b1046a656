import asyncio
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.builders import make_pod, node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.api.objects import NodeInfo, PodInfo, node_from_dict, pod_from_dict
from pysched.api.ports import HostPort, host_ports
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import ClusterEvent, EventKind, QueueingHint
from pysched.framework.interfaces import Handle
from pysched.framework.nodetable import NodeTable
from pysched.framework.placed import PlacedPods
from pysched.framework.status import Code
from pysched.plugins import default_registry
from pysched.plugins.node_ports import REASON, NodePorts, freed_a_wanted_port
from pysched.plugins.node_ports import reference as ref
from pysched.scheduler.scheduler import Scheduler


def ported(name: str, *ports: dict[str, Any], sidecar: list[dict[str, Any]] | None = None, **kw: Any) -> dict[str, Any]:
    raw = pod_dict(name, **kw)
    raw["spec"]["containers"][0]["ports"] = list(ports)
    if sidecar is not None:
        raw["spec"]["initContainers"] = [{"name": "side", "image": "s", "restartPolicy": "Always", "ports": sidecar}]
    return raw


def test_host_ports_are_read_with_kube_defaults_and_sidecars_only_among_init_containers() -> None:
    raw = ported(
        "p", {"containerPort": 80}, {"hostPort": 8080}, {"hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}
    )
    raw["spec"]["initContainers"] = [
        {"name": "once", "image": "i", "ports": [{"hostPort": 9000}]},
        {"name": "side", "image": "s", "restartPolicy": "Always", "ports": [{"hostPort": 9001}]},
    ]
    assert host_ports(raw["spec"]) == (
        HostPort("0.0.0.0", "TCP", 9001),
        HostPort("0.0.0.0", "TCP", 8080),
        HostPort("10.0.0.1", "UDP", 53),
    )
    assert make_pod("plain").host_ports == ()


@pytest.mark.parametrize(
    "bad", [{"hostPort": "80"}, {"hostPort": 70000}, {"hostPort": True}, {"hostPort": 80, "hostIP": 7}]
)
def test_malformed_host_ports_are_refused_where_read(bad: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError)):
        pod_from_dict(ported("p", bad))


@pytest.mark.parametrize(
    ("placed", "wanted", "conflict"),
    [
        (("0.0.0.0", "TCP", 80), ("0.0.0.0", "TCP", 80), True),
        (("0.0.0.0", "TCP", 80), ("10.0.0.1", "TCP", 80), True),  # the wildcard holds every address
        (("10.0.0.1", "TCP", 80), ("0.0.0.0", "TCP", 80), True),  # the wildcard wants every address
        (("10.0.0.1", "TCP", 80), ("10.0.0.2", "TCP", 80), False),
        (("10.0.0.1", "TCP", 80), ("10.0.0.1", "UDP", 80), False),
        (("0.0.0.0", "TCP", 80), ("0.0.0.0", "TCP", 81), False),
    ],
)
def test_conflict_rule(placed: tuple[str, str, int], wanted: tuple[str, str, int], conflict: bool) -> None:
    pods = PlacedPods()
    plugin = NodePorts(Handle(None, None, NodeTable(), pods=pods))  # type: ignore[arg-type]
    table = NodeTable()
    table.add(_node("a"))
    ip, proto, port = placed
    pods.placed(pod_from_dict(ported("old", {"hostPort": port, "hostIP": ip, "protocol": proto})), 0)
    ip, proto, port = wanted
    pod = pod_from_dict(ported("new", {"hostPort": port, "hostIP": ip, "protocol": proto}))
    result = plugin.filter_batch(CycleState(), pod, table)
    assert bool(result.feasible[0]) is not conflict
    assert bool(result.reasons[REASON][0]) is conflict and not result.unresolvable


def _node(name: str) -> NodeInfo:
    return node_from_dict(node_dict(name))


def test_pods_without_host_ports_skip_the_filter() -> None:
    plugin = NodePorts(Handle(None, None, NodeTable()))  # type: ignore[arg-type]
    assert plugin.pre_filter(CycleState(), make_pod("plain"), NodeTable()).code is Code.SKIP
    assert plugin.pre_filter(CycleState(), pod_from_dict(ported("p", {"hostPort": 1})), NodeTable()).ok


def test_requeue_only_when_a_deleted_pod_held_a_wanted_port() -> None:
    waiting = pod_from_dict(ported("w", {"hostPort": 80}))
    holder = pod_from_dict(ported("h", {"hostPort": 80, "hostIP": "10.0.0.1"}))
    other = pod_from_dict(ported("o", {"hostPort": 81}))
    assert freed_a_wanted_port(waiting, ClusterEvent(EventKind.POD_DELETE, holder)) is QueueingHint.QUEUE
    assert freed_a_wanted_port(waiting, ClusterEvent(EventKind.POD_DELETE, other)) is QueueingHint.SKIP
    assert freed_a_wanted_port(waiting, ClusterEvent(EventKind.POD_DELETE, make_pod("x"))) is QueueingHint.SKIP
    kinds = {r.kind for r in NodePorts(Handle(None, None, NodeTable())).events_to_register()}  # type: ignore[arg-type]
    assert kinds == {EventKind.POD_DELETE, EventKind.NODE_ADD}


PROFILE = {
    "profiles": [
        {
            "schedulerName": "ports",
            "plugins": {
                "queueSort": [{"name": "PrioritySort"}],
                "preFilter": [{"name": "NodePorts"}],
                "filter": [{"name": "NodeName"}, {"name": "NodePorts"}, {"name": "NodeResourcesFit"}],
                "score": [{"name": "LeastAllocated", "weight": 1}],
                "bind": [{"name": "DefaultBinder"}],
            },
        }
    ]
}


def test_second_pod_on_a_taken_port_stays_pending_until_the_first_goes() -> None:
    async def run() -> None:
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        scheduler = Scheduler(parse_config(PROFILE, "t", registry), cluster, clock, registry)
        cluster.add_node(node_dict("a"))
        await scheduler.start()
        cluster.create_pod(ported("p1", {"containerPort": 80, "hostPort": 8080}, scheduler_name="ports"))
        cluster.create_pod(ported("p2", {"containerPort": 80, "hostPort": 8080}, scheduler_name="ports"))
        cluster.create_pod(ported("p3", {"containerPort": 80, "hostPort": 8081}, scheduler_name="ports"))
        await scheduler.run_until_idle()
        bound = {k: p.node_name for k, p in cluster.pods.items()}
        assert bound == {"default/p1": "a", "default/p2": None, "default/p3": "a"}
        note = [e.note for e in cluster.events if e.pod == "default/p2"][-1]
        assert note == f"0/1 nodes are available: 1 {REASON}."
        cluster.delete_pod(PodKey("default/p3"))  # no port p2 wants: stays parked
        clock.advance(11.0)
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p2")].node_name is None
        cluster.delete_pod(PodKey("default/p1"))
        clock.advance(11.0)
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p2")].node_name == "a"
        await scheduler.stop()

    asyncio.run(run())


IPS = ["", "0.0.0.0", "10.0.0.1", "10.0.0.2"]
port_entry = st.fixed_dictionaries(
    {
        "hostPort": st.sampled_from([80, 81, 0]),
        "hostIP": st.sampled_from(IPS),
        "protocol": st.sampled_from(["", "TCP", "UDP"]),
    }
)
ops = st.lists(
    st.tuples(st.booleans(), st.integers(0, 9), st.integers(0, 3), st.lists(port_entry, max_size=3)), max_size=40
)


@settings(max_examples=150, deadline=None)
@given(ops, st.lists(port_entry, min_size=1, max_size=3))
def test_incremental_counts_equal_recomputation_from_all_pods(
    steps: list[tuple[bool, int, int, list[dict[str, Any]]]], wanted: list[dict[str, Any]]
) -> None:
    table = NodeTable()
    for i in range(4):
        table.add(_node(f"n{i}"))
    pods = PlacedPods()
    early = pod_from_dict(ported("early", {"hostPort": 80}))
    pods.placed(early, 0)  # placed before the plugin subscribed: replayed
    plugin = NodePorts(Handle(None, None, table, pods=pods))  # type: ignore[arg-type]
    where: dict[str, tuple[PodInfo, int]] = {"early": (early, 0)}
    for add, ident, row, entries in steps:
        name = f"p{ident}"
        if name in where:
            pod, at = where.pop(name)
            pods.removed(pod, at)
        if add:
            pod = pod_from_dict(ported(name, *entries))
            pods.placed(pod, row)
            where[name] = (pod, row)
    assert plugin.used_binds() == ref.used_binds(pods)
    pod = pod_from_dict(ported("want", *wanted))
    if pod.host_ports:
        np.testing.assert_array_equal(
            plugin.filter_batch(CycleState(), pod, table).feasible, ref.feasible(pod, pods, 4)
        )
