import asyncio

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.api.objects import pod_from_dict
from pysched.api.storage_builders import (
    claim_volume,
    csi_node_dict,
    pv_dict,
    pvc_dict,
    storage_class_dict,
    with_volumes,
)
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.framework.cycle_state import CycleState
from pysched.plugins import default_registry
from pysched.plugins.node_volume_limits import REASON, NodeVolumeLimits
from pysched.plugins.node_volume_limits.reference import reference_fits
from pysched.scheduler.scheduler import Scheduler

PROFILE = """
profiles:
  - schedulerName: vol
    plugins:
      queueSort: [{name: PrioritySort}]
      # every volume filter: a profile without one refuses pods with claims
      preFilter: [{name: VolumeRestrictions}, {name: NodeVolumeLimits}, {name: VolumeBinding}, {name: VolumeZone}]
      filter:
        [{name: NodeResourcesFit}, {name: VolumeRestrictions}, {name: NodeVolumeLimits}, {name: VolumeBinding},
         {name: VolumeZone}]
      bind: [{name: DefaultBinder}]
"""
DRIVERS = ("a.csi", "b.csi")


def build(nodes: int, limits: dict[int, dict[str, int]]) -> tuple[SimulatedCluster, Scheduler, NodeVolumeLimits]:
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    scheduler = Scheduler(parse_config(yaml.safe_load(PROFILE), "t", registry), cluster, clock, registry)
    for i in range(nodes):
        cluster.add_node(node_dict(f"n{i}"))
    for i, by_driver in limits.items():
        cluster.add_csi_node(csi_node_dict(f"n{i}", by_driver))
    for driver in DRIVERS:
        cluster.add_storage_class(storage_class_dict(driver, provisioner=driver))
    asyncio.run(scheduler.start())
    plugin = scheduler.frameworks["vol"].plugins["NodeVolumeLimits"]
    assert isinstance(plugin, NodeVolumeLimits)
    return cluster, scheduler, plugin


def add_volume(cluster: SimulatedCluster, name: str, driver: str, bound: bool) -> None:
    if bound:
        cluster.add_pv(pv_dict(f"pv-{name}", storage_class=driver, claim=("default", name), csi_driver=driver))
        cluster.add_pvc(pvc_dict(name, storage_class=driver, volume_name=f"pv-{name}", bound=True))
    else:
        cluster.add_pvc(pvc_dict(name, storage_class=driver))


def test_limit_counts_shared_volumes_once_and_frees_on_delete() -> None:
    cluster, scheduler, plugin = build(2, {0: {"a.csi": 2}, 1: {"a.csi": 0}})
    for name in ("v1", "v2", "v3"):
        add_volume(cluster, name, "a.csi", bound=True)
    cluster.create_pod(with_volumes(pod_dict("x", node_name="n0"), [claim_volume("v1"), claim_volume("v2")]))
    nodes = scheduler.cache.nodes

    def fits(*claims: str) -> list[bool]:
        pod = pod_from_dict(with_volumes(pod_dict("new", scheduler_name="vol"), [claim_volume(c) for c in claims]))
        state = CycleState()
        assert plugin.pre_filter(state, pod, nodes).ok
        result = plugin.filter_batch(state, pod, nodes)
        return [bool(v) for v in result.feasible[: nodes.size]]

    assert fits("v1") == [True, False]  # v1 is already on n0: no new volume there
    assert fits("v3") == [False, False]
    cluster.delete_pod(PodKey("default/x"))
    assert fits("v3") == [True, False]
    plain = pod_from_dict(pod_dict("plain", scheduler_name="vol"))
    assert plugin.pre_filter(CycleState(), plain, nodes).code.name == "SKIP"


def test_a_claim_bound_after_placement_is_recounted() -> None:
    cluster, _scheduler, plugin = build(1, {0: {"a.csi": 1}})
    add_volume(cluster, "late", "a.csi", bound=False)
    cluster.create_pod(with_volumes(pod_dict("x", node_name="n0"), [claim_volume("late")]))
    add_volume(cluster, "late", "a.csi", bound=True)  # the PV controller bound it meanwhile
    assert set(plugin.mounts) == {"a.csi/pv-late"}
    assert int(plugin.attached("a.csi", 1)[0]) == 1


def test_rejection_message_through_the_scheduler() -> None:
    cluster, scheduler, _ = build(2, {0: {"a.csi": 0}, 1: {"a.csi": 0}})
    add_volume(cluster, "v", "a.csi", bound=True)
    cluster.create_pod(with_volumes(pod_dict("p", scheduler_name="vol"), [claim_volume("v")]))
    asyncio.run(scheduler.run_until_idle())
    note = [e for e in cluster.events if e.pod == "default/p"][-1].note
    assert note == f"0/2 nodes are available: 2 {REASON}."


def test_inline_csi_volumes_are_not_counted() -> None:
    """An inline CSI volume is published on the node, never attached: kube-scheduler counts only
    claims (and migrated in-tree disks), so a driver's limit of 0 does not keep such pods off."""
    cluster, scheduler, plugin = build(1, {0: {"a.csi": 0}})
    volume = {"name": "secrets", "csi": {"driver": "a.csi", "readOnly": True}}
    cluster.create_pod(with_volumes(pod_dict("placed", node_name="n0"), [volume]))
    assert not plugin.mounts
    pod = pod_from_dict(with_volumes(pod_dict("new", scheduler_name="vol"), [volume]))
    assert plugin.pre_filter(CycleState(), pod, scheduler.cache.nodes).code.name == "SKIP"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 4),
    st.dictionaries(st.integers(0, 3), st.dictionaries(st.sampled_from(DRIVERS), st.integers(0, 3)), max_size=4),
    st.lists(st.tuples(st.sampled_from(DRIVERS), st.booleans()), min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 3), st.lists(st.integers(0, 5), max_size=3)), max_size=6),
    st.lists(st.integers(0, 5), min_size=1, max_size=3),
    st.lists(st.integers(0, 5), max_size=3),
)
def test_incremental_counts_equal_the_reference(
    nodes: int,
    limits: dict[int, dict[str, int]],
    volumes: list[tuple[str, bool]],
    placed: list[tuple[int, list[int]]],
    wanted: list[int],
    bind_later: list[int],
) -> None:
    cluster, scheduler, plugin = build(nodes, {i: v for i, v in limits.items() if i < nodes})
    names = [f"v{i}" for i in range(len(volumes))]
    for name, (driver, bound) in zip(names, volumes, strict=True):
        add_volume(cluster, name, driver, bound)
    for i, (node, claims) in enumerate(placed):
        mounts = [claim_volume(names[c % len(names)], f"m{j}") for j, c in enumerate(claims)]
        cluster.create_pod(with_volumes(pod_dict(f"x{i}", node_name=f"n{node % nodes}"), mounts))
    for c in bind_later:  # claims bound after their pods were placed
        name = names[c % len(names)]
        add_volume(cluster, name, volumes[c % len(names)][0], bound=True)
    pod = pod_from_dict(
        with_volumes(
            pod_dict("new", scheduler_name="vol"),
            [claim_volume(names[c % len(names)], f"m{j}") for j, c in enumerate(wanted)],
        )
    )
    table = scheduler.cache.nodes
    state = CycleState()
    status = plugin.pre_filter(state, pod, table)
    got = plugin.filter_batch(state, pod, table).feasible[: table.size]
    want = reference_fits(pod, scheduler.cache.placed, cluster.storage, table)
    assert status.ok
    assert np.array_equal(got, want)
