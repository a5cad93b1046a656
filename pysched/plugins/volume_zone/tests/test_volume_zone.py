import numpy as np

from pysched.api.builders import make_node, pod_dict
from pysched.api.objects import pod_from_dict
from pysched.api.storage_builders import claim_volume, pv_dict, pvc_dict, with_volumes
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle
from pysched.plugins.volume_zone import REASON, VolumeZone
from pysched.scheduler.cache import Cache


def test_bound_pv_zone_must_match_the_node() -> None:
    cluster = SimulatedCluster(VirtualClock())
    cache = Cache()
    nodes = cache.nodes
    for name, zone in (("a", "z1"), ("b", "z2"), ("c", None)):
        cache.add_node(make_node(name, labels={"topology.kubernetes.io/zone": zone} if zone else {}))
    cluster.add_pv(pv_dict("pv", labels={"topology.kubernetes.io/zone": "z1__z3"}, claim=("default", "c")))
    cluster.add_pvc(pvc_dict("c", volume_name="pv", bound=True))
    plugin = VolumeZone(Handle(cluster, cluster.clock, nodes))
    pod = pod_from_dict(with_volumes(pod_dict("p"), [claim_volume("c")]))
    state = CycleState()
    assert plugin.pre_filter(state, pod, nodes).ok
    result = plugin.filter_batch(state, pod, nodes)
    assert list(result.feasible[: nodes.size]) == [True, False, True]  # c has no zone label at all
    assert result.unresolvable and bool(result.reasons[REASON][1])
    assert plugin.pre_filter(CycleState(), pod_from_dict(pod_dict("plain")), nodes).code.name == "SKIP"
    missing = pod_from_dict(with_volumes(pod_dict("m"), [claim_volume("gone")]))
    assert plugin.pre_filter(CycleState(), missing, nodes).message() == 'persistentvolumeclaim "gone" not found'
    assert np.all(result.feasible[:1])


def test_a_zone_label_with_an_empty_part_is_ignored_as_kube_scheduler_does() -> None:
    cluster = SimulatedCluster(VirtualClock())
    cache = Cache()
    nodes = cache.nodes
    for name, zone in (("a", "z1"), ("b", "z2")):
        cache.add_node(make_node(name, labels={"topology.kubernetes.io/zone": zone}))
    plugin = VolumeZone(Handle(cluster, cluster.clock, nodes))
    pod = pod_from_dict(with_volumes(pod_dict("p"), [claim_volume("c")]))
    cluster.add_pvc(pvc_dict("c", volume_name="pv", bound=True))
    for value in ("", "z1__", "__z1", "z1__ __z3"):
        cluster.add_pv(pv_dict("pv", labels={"topology.kubernetes.io/zone": value}, claim=("default", "c")))
        assert plugin.pre_filter(CycleState(), pod, nodes).code.name == "SKIP", value  # no zone to match
