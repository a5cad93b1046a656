from pysched.api.builders import make_node, node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.api.objects import pod_from_dict
from pysched.api.storage_builders import claim_volume, pv_dict, pvc_dict, with_volumes
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle
from pysched.framework.placed import PlacedPods
from pysched.framework.status import Code
from pysched.plugins import default_registry
from pysched.plugins.volume_restrictions import REASON_DISK, REASON_RWOP, factory
from pysched.scheduler.cache import Cache
from pysched.scheduler.scheduler import Scheduler
from pysched.testing.simulated import settle

VOLUME_FILTERS = [{"name": n} for n in ("VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone")]


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
    state = CycleState()
    assert plugin.pre_filter(state, pod, nodes).code is Code.SUCCESS
    result = plugin.filter_batch(state, pod, nodes)
    assert not result.feasible[: nodes.size].any() and not result.unresolvable  # preemption may evict the user
    assert result.reasons[REASON_RWOP][: nodes.size].all()
    placed.removed(user, 1)  # as a preemption dry run takes it off its node
    assert plugin.filter_batch(state, pod, nodes).feasible[: nodes.size].all()


PREEMPTING = {
    "profiles": [
        {
            "schedulerName": "pysched",
            "plugins": {
                "queueSort": [{"name": "PrioritySort"}],
                # every volume filter: a profile without one refuses pods with claims
                "preFilter": VOLUME_FILTERS,
                "filter": [{"name": "NodeResourcesFit"}, *VOLUME_FILTERS],
                "postFilter": [{"name": "DefaultPreemption"}],
                "score": [{"name": "LeastAllocated", "weight": 1}],
                "bind": [{"name": "DefaultBinder"}],
            },
        }
    ]
}


def _claim_user(name: str, priority: int, node: str | None = None) -> dict[str, object]:
    return with_volumes(pod_dict(name, priority=priority, cpu="1", node_name=node), [claim_volume("solo")])


def _preempting_world() -> tuple[SimulatedCluster, Scheduler]:
    """Two nodes; a ReadWriteOncePod claim, bound, used by a priority-10 pod on a."""
    clock = VirtualClock(1_000_000.0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    scheduler = Scheduler(parse_config(PREEMPTING, "t", registry), cluster, clock, registry)
    for name in "ab":
        cluster.add_node(node_dict(name, cpu="4", memory="8Gi"))
    cluster.add_pv(pv_dict("pv-solo", access_modes=["ReadWriteOncePod"], claim=("default", "solo")))
    cluster.add_pvc(pvc_dict("solo", access_modes=["ReadWriteOncePod"], volume_name="pv-solo", bound=True))
    cluster.create_pod(_claim_user("holder", 10, node="a"))
    return cluster, scheduler


def test_a_higher_priority_pod_evicts_the_pod_that_holds_its_read_write_once_pod_claim() -> None:
    cluster, scheduler = _preempting_world()
    cluster.create_pod(_claim_user("urgent", 100))
    settle(scheduler)
    assert PodKey("default/holder") not in cluster.pods
    assert cluster.pods[PodKey("default/urgent")].node_name == "a"  # its victim's node, the only candidate
    scheduler.cache.check_consistency()


def test_an_equal_priority_pod_waits_for_the_claim_with_kubes_message() -> None:
    cluster, scheduler = _preempting_world()
    cluster.create_pod(_claim_user("peer", 10))
    settle(scheduler)
    assert PodKey("default/holder") in cluster.pods
    assert cluster.pods[PodKey("default/peer")].node_name is None
    note = next(e.note for e in reversed(cluster.events) if e.pod == "default/peer")
    assert note.startswith(f"0/2 nodes are available: 2 {REASON_RWOP}."), note
