import asyncio

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import pod_from_dict
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.status import Code
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.plugins.scheduling_gates import SchedulingGates
from pysched.scheduler.scheduler import Scheduler


def _gated(name: str, *gates: str) -> dict[str, object]:
    raw = pod_dict(name, scheduler_name="default")
    raw["spec"]["schedulingGates"] = [{"name": gate} for gate in gates]
    return raw


def test_a_gated_pod_waits_untried_until_its_last_gate_is_removed() -> None:
    async def run() -> None:
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        cluster.add_node(node_dict("a"))
        registry = default_registry()
        scheduler = Scheduler(builtin_config(registry).only("default"), cluster, clock, registry)
        await scheduler.start()
        raw = _gated("p", "example.com/quota", "example.com/data")
        cluster.create_pod(raw)
        await scheduler.run_until_idle()
        key = PodKey("default/p")
        assert cluster.pods[key].node_name is None
        assert scheduler.queue.where(key) == "gated"
        assert scheduler.stats.unschedulable == 0  # never tried
        assert not [e for e in cluster.events if e.pod == "default/p"]  # no FailedScheduling for a gate
        cluster.set_scheduling_gates(key, ["example.com/data"])
        await scheduler.run_until_idle()
        assert cluster.pods[key].node_name is None  # one gate left
        cluster.set_scheduling_gates(key, [])
        await scheduler.run_until_idle()
        assert cluster.pods[key].node_name == "a"

    asyncio.run(run())


def test_the_simulated_api_refuses_to_bind_a_gated_pod_as_the_real_one_does() -> None:
    """A profile without SchedulingGates tries a gated pod; the bind fails, nothing is placed."""

    async def run() -> None:
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        cluster.add_node(node_dict("a"))
        pod = cluster.create_pod(_gated("p", "example.com/quota"))
        assert pod is not None
        status = await cluster.bind(pod, NodeName("a"))
        assert status.code is Code.ERROR and "schedulingGates" in status.message()
        assert cluster.pods[pod.key].node_name is None

    asyncio.run(run())


def test_the_status_names_the_gates() -> None:
    plugin = SchedulingGates()
    assert plugin.pre_enqueue(pod_from_dict(pod_dict("free"))).ok
    status = plugin.pre_enqueue(pod_from_dict(_gated("p", "a", "b")))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == "waiting for scheduling gates: [a b]"
    odd = pod_dict("r")
    odd["spec"]["schedulingGates"] = ["not-a-map"]
    assert not plugin.pre_enqueue(pod_from_dict(odd)).ok  # still a gate
    for value in ({"name": "a"}, "a", 7):  # no list, which the API server would have refused
        odd["spec"]["schedulingGates"] = value
        status = plugin.pre_enqueue(pod_from_dict(odd))
        assert not status.ok and "not a list" in status.message()
    empties: tuple[object, ...] = (None, [], {}, "")
    for empty in empties:
        odd["spec"]["schedulingGates"] = empty
        assert plugin.pre_enqueue(pod_from_dict(odd)).ok
