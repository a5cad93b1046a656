import asyncio

from pysched.api.builders import pod_dict
from pysched.api.containers import cpu_resize
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock


def test_a_resize_decided_for_a_pod_since_recreated_under_its_name_is_not_applied() -> None:
    """As the live cluster's uid precondition: the new pod keeps its own requests."""

    async def run() -> None:
        cluster = SimulatedCluster(VirtualClock(0.0))
        stale = cluster.create_pod(pod_dict("worker-0", cpu="2", memory="1Gi", uid="first"))
        assert stale is not None
        cluster.delete_pod(stale.key)
        fresh = cluster.create_pod(pod_dict("worker-0", cpu="2", memory="1Gi", uid="second"))
        assert fresh is not None
        status = await cluster.resize(stale, {"main": cpu_resize(stale, "main", 4000)})
        assert not status.ok and "no longer exists" in status.message()
        assert cluster.pods[fresh.key].requests["cpu"] == 2000
        assert (await cluster.resize(fresh, {"main": cpu_resize(fresh, "main", 4000)})).ok
        assert cluster.pods[fresh.key].requests["cpu"] == 4000

    asyncio.run(run())
