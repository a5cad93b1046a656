from pysched.api.builders import make_node, pod_dict
from pysched.api.objects import pod_from_dict
from pysched.api.storage_builders import claim_volume, pvc_dict, with_volumes
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle
from pysched.framework.placed import PlacedPods
from pysched.framework.status import Code
from pysched.plugins.volume_restrictions import REASON_DISK, REASON_RWOP, factory
from pysched.scheduler.cache import Cache


def gce(name: str, pd: str, read_only: bool = False) -> dict[str, object]:
    return with_volumes(pod_dict(name), [{"name": "d", "gcePersistentDisk": {"pdName": pd, "readOnly": read_only}}])


def test_disk_conflicts_and_read_write_once_pod() -> None:
    cluster = SimulatedCluster(VirtualClock())
    cache = Cache()
    nodes = cache.nodes
    cache.add_node(make_node("a"))
    cache.add_node(make_node("b"))
    placed = PlacedPods()
    plugin = factory(None, Handle(cluster, cluster.clock, nodes, pods=placed))  # type: ignore[arg-type]
    on_a = pod_from_dict(gce("x", "disk1", read_only=True))
    placed.placed(on_a, 0)

    def verdict(raw: dict[str, object]) -> tuple[Code, list[bool]]:
        pod = pod_from_dict(raw)
        state = CycleState()
        status = plugin.pre_filter(state, pod, nodes)
        if status.code is Code.SKIP or not status.ok:
            return status.code, []
        return status.code, [bool(v) for v in plugin.filter_batch(state, pod, nodes).feasible[: nodes.size]]

    assert verdict(gce("rw", "disk1")) == (Code.SUCCESS, [False, True])
    assert verdict(gce("ro", "disk1", read_only=True)) == (Code.SUCCESS, [True, True])
    assert verdict(pod_dict("plain"))[0] is Code.SKIP
    placed.removed(on_a, 0)
    assert verdict(gce("rw", "disk1")) == (Code.SUCCESS, [True, True])
    assert plugin.filter_batch(CycleState(), pod_from_dict(gce("rw", "disk1")), nodes).reasons.keys() == {REASON_DISK}

    cluster.add_pvc(pvc_dict("solo", access_modes=["ReadWriteOncePod"]))
    user = pod_from_dict(with_volumes(pod_dict("u"), [claim_volume("solo")]))
    assert verdict(with_volumes(pod_dict("v"), [claim_volume("solo")]))[0] is Code.SKIP  # nobody uses it yet
    placed.placed(user, 1)
    pod = pod_from_dict(with_volumes(pod_dict("v"), [claim_volume("solo")]))
    status = plugin.pre_filter(CycleState(), pod, nodes)
    assert status.code is Code.UNSCHEDULABLE and status.message() == REASON_RWOP
