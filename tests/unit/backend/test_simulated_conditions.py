import asyncio
import dataclasses

from pysched.api.builders import pod_dict
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.cluster import PodCondition


def test_a_condition_the_pod_already_shows_is_not_written_again() -> None:
    """As the live cluster: a pod retried while nothing changed costs no update."""

    async def run() -> None:
        cluster = SimulatedCluster(VirtualClock(0.0))
        pod = cluster.create_pod(pod_dict("p", cpu="1", memory="1Gi"))
        assert pod is not None
        condition = PodCondition("PodScheduled", "False", "Unschedulable", "0/1 nodes are available")
        await cluster.patch_pod_conditions(pod, condition)
        written = cluster.pods[pod.key]
        await cluster.patch_pod_conditions(written, condition)
        assert cluster.pods[pod.key] is written
        await cluster.patch_pod_conditions(written, dataclasses.replace(condition, message="1/1"))
        shown = cluster.pods[pod.key].raw["status"]["conditions"]
        assert [c["message"] for c in shown] == ["1/1"]

    asyncio.run(run())
