import asyncio

from pysched.api.builders import make_node, make_pod_dict
from pysched.api.ids import NodeName
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle
from pysched.framework.nodetable import NodeTable
from pysched.framework.status import Code
from pysched.plugins.default_binder import DefaultBinder


def test_binds_through_the_backend_and_reports_conflicts() -> None:
    clock = VirtualClock()
    cluster = SimulatedCluster(clock)
    cluster.add_node(make_node("n1"))
    pod = cluster.create_pod(make_pod_dict("p"))
    assert pod is not None
    binder = DefaultBinder(Handle(cluster, clock, NodeTable()))
    first = asyncio.run(binder.bind(CycleState(), pod, NodeName("n1")))
    assert first.ok and cluster.pods[pod.key].node_name == "n1"
    again = asyncio.run(binder.bind(CycleState(), pod, NodeName("n1")))
    assert not again.ok and "already assigned" in again.message()


def test_every_failed_bind_is_an_error_as_in_kube() -> None:
    """The simulator answers a bind to a node it does not have as a rejection; kube's
    DefaultBinder makes any failed API call an error, so the pod backs off, never reads as
    not fitting."""
    clock = VirtualClock()
    cluster = SimulatedCluster(clock)
    pod = cluster.create_pod(make_pod_dict("p"))
    assert pod is not None
    binder = DefaultBinder(Handle(cluster, clock, NodeTable()))
    refused = asyncio.run(cluster.bind(pod, NodeName("gone")))
    assert refused.rejected  # what the backend says
    status = asyncio.run(binder.bind(CycleState(), pod, NodeName("gone")))
    assert status.code is Code.ERROR and "node gone not found" in status.message()
