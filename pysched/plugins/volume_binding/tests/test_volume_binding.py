import asyncio
from collections.abc import Iterator

import pytest
import yaml

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.api.resources import QuantityError
from pysched.api.storage_builders import (
    claim_volume,
    csi_driver_dict,
    pv_dict,
    pvc_dict,
    storage_capacity_dict,
    storage_class_dict,
    with_volumes,
)
from pysched.api.volumes import csi_storage_capacity_from_dict
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.framework.cycle_state import CycleState
from pysched.plugins import default_registry
from pysched.plugins.volume_binding import VolumeBinding
from pysched.scheduler.scheduler import Scheduler

PROFILE = """
profiles:
  - schedulerName: vol
    plugins:
      queueSort: [{name: PrioritySort}]
      preFilter: [{name: VolumeBinding}, {name: VolumeZone}, {name: VolumeRestrictions}, {name: NodeVolumeLimits}]
      filter:
        - {name: NodeUnschedulable}
        - {name: NodeResourcesFit}
        - {name: VolumeBinding}
        - {name: VolumeZone}
        - {name: VolumeRestrictions}
        - {name: NodeVolumeLimits}
      score: [{name: LeastAllocated, weight: 1}]
      reserve: [{name: VolumeBinding}]
      preBind: [{name: VolumeBinding}]
      bind: [{name: DefaultBinder}]
    pluginConfig:
      - name: VolumeBinding
        args: {bindTimeoutSeconds: 0.3}
"""


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A loop of its own; the schedulers the tests started are stopped with it (their binding
    workers would otherwise be destroyed pending when it is collected)."""
    loop = asyncio.new_event_loop()
    yield loop
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()


def setup(nodes: int = 3) -> tuple[SimulatedCluster, Scheduler]:
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    scheduler = Scheduler(parse_config(yaml.safe_load(PROFILE), "t", registry), cluster, clock, registry)
    for i in range(nodes):
        cluster.add_node(node_dict(f"n{i}", labels={"topology.kubernetes.io/zone": f"z{i % 2}"}))
    cluster.add_storage_class(storage_class_dict("local"))
    return cluster, scheduler


def volume_pod(name: str, *claims: str) -> dict[str, object]:
    return with_volumes(pod_dict(name, scheduler_name="vol"), [claim_volume(c) for c in claims])


def last_note(cluster: SimulatedCluster, pod: str) -> str:
    return [e for e in cluster.events if e.pod == f"default/{pod}"][-1].note


def test_missing_claim_is_unresolvable_with_kubes_message(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        cluster, scheduler = setup()
        await scheduler.start()
        cluster.create_pod(volume_pod("p", "nope"))
        cluster.create_pod(pod_dict("plain", scheduler_name="vol"))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p")].node_name is None
        assert last_note(cluster, "p") == '0/3 nodes are available: persistentvolumeclaim "nope" not found.'
        assert cluster.pods[PodKey("default/plain")].node_name is not None  # others unaffected
        # The claim appears: the pod is tried again and binds (PVC_CHANGE wakes it).
        cluster.add_pv(pv_dict("pv1", node="n2"))
        cluster.add_pvc(pvc_dict("nope"))
        scheduler.clock.advance(2.0)  # type: ignore[attr-defined]
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p")].node_name == "n2"

    loop.run_until_complete(run())


def test_wait_for_first_consumer_picks_the_pvs_node_and_binds_the_claim(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        cluster, scheduler = setup()
        cluster.add_pv(pv_dict("small", node="n1", size="1Gi"))
        cluster.add_pv(pv_dict("big", node="n2", size="10Gi"))
        cluster.add_pvc(pvc_dict("data", size="5Gi"))
        await scheduler.start()
        cluster.create_pod(volume_pod("p", "data"))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p")].node_name == "n2"
        claim = cluster.storage.pvc("default", "data")
        assert claim is not None and claim.fully_bound and claim.volume_name == "big"
        pv = cluster.storage.pv("big")
        assert pv is not None and pv.claim_ref is not None and pv.claim_ref.name == "data"
        # PreBind had claims to bind: the pod's node was written as its nomination first (kube's
        # NominatedNodeNameForExpectation), a pod without claims gets none.
        cluster.create_pod(pod_dict("plain", scheduler_name="vol"))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/plain")].node_name is not None
        assert cluster.nominations == [(PodKey("default/p"), "n2")]

    loop.run_until_complete(run())


def test_two_pods_do_not_take_one_pv(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        cluster, scheduler = setup()
        cluster.pv_controller = False  # the claims stay unbound: the PV is only assumed
        cluster.add_pv(pv_dict("only", node="n0"))
        cluster.add_pvc(pvc_dict("a"))
        cluster.add_pvc(pvc_dict("b"))
        await scheduler.start()
        cluster.create_pod(volume_pod("pa", "a"))
        cluster.create_pod(volume_pod("pb", "b"))
        scheduler.schedule_one()
        scheduler.schedule_one()  # pa is still in PreBind: its PV is assumed
        note = last_note(cluster, "pb") if any(e.pod == "default/pb" for e in cluster.events) else ""
        await scheduler.run_until_idle()
        assert "didn't find available persistent volumes to bind" in (note or last_note(cluster, "pb"))
        # pa's binding timed out (no PV controller): its failure event says so, the PV is free again.
        assert "binding volumes: context deadline exceeded" in last_note(cluster, "pa")
        plugin = scheduler.frameworks["vol"].plugins["VolumeBinding"]
        assert isinstance(plugin, VolumeBinding) and plugin.assumed == {}

    loop.run_until_complete(run())


def test_bound_pv_node_affinity_and_immediate_claims(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        cluster, scheduler = setup()
        cluster.add_pv(pv_dict("pinned", node="n1", claim=("default", "bound")))
        cluster.add_pvc(pvc_dict("bound", volume_name="pinned", bound=True))
        cluster.add_storage_class(storage_class_dict("fast", provisioner="csi.example", mode="Immediate"))
        cluster.add_pvc(pvc_dict("later", storage_class="fast"))
        cluster.add_pvc(pvc_dict("noclass", storage_class="missing"))
        await scheduler.start()
        cluster.create_pod(volume_pod("p", "bound"))
        cluster.create_pod(volume_pod("q", "later"))
        cluster.create_pod(volume_pod("r", "noclass"))
        cluster.add_node(node_dict("n9", cpu="0"))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p")].node_name == "n1"
        assert last_note(cluster, "q") == "0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims."
        assert last_note(cluster, "r") == '0/4 nodes are available: storageclass.storage.k8s.io "missing" not found.'

    loop.run_until_complete(run())


def test_a_claim_that_names_its_volume_waits_for_the_pv_controller(loop: asyncio.AbstractEventLoop) -> None:
    # kube-scheduler treats a prebound claim not yet bound as an unbound immediate one: the pod
    # waits, and no other PV is ever bound to the claim.
    async def run() -> None:
        cluster, scheduler = setup(2)
        cluster.add_pv(pv_dict("named", node="n0"))
        cluster.add_pv(pv_dict("other", node="n1"))
        cluster.add_pvc(pvc_dict("c", volume_name="named"))
        await scheduler.start()
        cluster.create_pod(volume_pod("p", "c"))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p")].node_name is None
        assert last_note(cluster, "p") == "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."
        assert all(pv.claim_ref is None for pv in cluster.storage.pvs.values())

    loop.run_until_complete(run())


def test_node_affinity_conflict_message(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        cluster, scheduler = setup()
        cluster.add_pv(pv_dict("pinned", node="elsewhere", claim=("default", "bound")))
        cluster.add_pvc(pvc_dict("bound", volume_name="pinned", bound=True))
        await scheduler.start()
        cluster.create_pod(volume_pod("p", "bound"))
        await scheduler.run_until_idle()
        expected = "0/3 nodes are available: 3 node(s) didn't match PersistentVolume's node affinity."
        assert last_note(cluster, "p") == expected

    loop.run_until_complete(run())


def test_dynamic_provisioning_follows_allowed_topologies(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        cluster, scheduler = setup()
        cluster.add_storage_class(storage_class_dict("zonal", provisioner="csi.example", zones=["z1"]))
        cluster.add_pvc(pvc_dict("dyn", storage_class="zonal"))
        cluster.add_storage_class(storage_class_dict("nowhere", provisioner="csi.example", zones=["z7"]))
        cluster.add_pvc(pvc_dict("stuck", storage_class="nowhere"))
        await scheduler.start()
        cluster.create_pod(volume_pod("p", "dyn"))
        cluster.create_pod(volume_pod("q", "stuck"))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p")].node_name == "n1"  # the only z1 node
        claim = cluster.storage.pvc("default", "dyn")
        assert claim is not None and claim.annotations["volume.kubernetes.io/selected-node"] == "n1"
        assert claim.fully_bound
        assert last_note(cluster, "q") == (
            "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
        )

    loop.run_until_complete(run())


@pytest.mark.parametrize("provisioned", [False, True])
def test_pods_sharing_a_claim_not_bound_yet_go_where_its_one_volume_is(
    loop: asyncio.AbstractEventLoop, provisioned: bool
) -> None:
    # The first pod's Reserve chooses the claim's volume (a PV on one node, or one provisioned
    # there); the second, scheduled before that binding completes, must follow it.
    async def run() -> None:
        cluster, scheduler = setup(2)
        cluster.add_storage_class(storage_class_dict("dyn", provisioner="csi.example"))
        if provisioned:
            cluster.add_pvc(pvc_dict("shared", storage_class="dyn"))
        else:
            cluster.add_pv(pv_dict("pv0", node="n0"))
            cluster.add_pv(pv_dict("pv1", node="n1"))
            cluster.add_pvc(pvc_dict("shared"))
        # a goes to n1 (n0 is busier); then n1 is the busier one, where b must follow it all the same
        cluster.create_pod(pod_dict("busy", cpu="1", memory="1Gi", node_name="n0"))
        await scheduler.start()
        for name in "ab":
            cluster.create_pod(with_volumes(pod_dict(name, cpu="2", scheduler_name="vol"), [claim_volume("shared")]))
        await scheduler.run_until_idle()
        a, b = (cluster.pods[PodKey(f"default/{name}")].node_name for name in "ab")
        assert a is not None and a == b
        taken = [pv.name for pv in cluster.storage.pvs.values() if pv.claim_ref is not None]
        assert len(taken) == 1

    loop.run_until_complete(run())


def test_malformed_claim_does_not_break_other_pods(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        cluster, scheduler = setup()
        cluster.add_pv(pv_dict("pv", node="n0"))
        cluster.add_pvc(pvc_dict("weird", selector={"matchExpressions": [{"key": "a", "operator": "Bogus"}]}))
        await scheduler.start()
        cluster.create_pod(volume_pod("p", "weird"))
        cluster.create_pod(pod_dict("plain", scheduler_name="vol"))
        await scheduler.run_until_idle()
        assert "matchExpressions operator 'Bogus'" in last_note(cluster, "p")
        assert cluster.pods[PodKey("default/plain")].node_name is not None

    loop.run_until_complete(run())


def test_a_csi_driver_that_publishes_capacity_provisions_only_where_the_claim_fits(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """kube's CSIStorageCapacity check: maximumVolumeSize before capacity, nodeTopology selects
    the nodes, no topology reaches none; a driver that does not opt in is not checked."""

    async def run() -> None:
        cluster, scheduler = setup()  # n0 and n2 in zone z0, n1 in z1
        cluster.add_storage_class(storage_class_dict("fast", provisioner="csi.example.com"))
        cluster.add_csi_driver(csi_driver_dict("csi.example.com"))
        cluster.add_storage_capacity(storage_capacity_dict("z0-pool", "fast", zone="z0", capacity="2Gi"))
        cluster.add_storage_capacity(
            storage_capacity_dict("z1-pool", "fast", zone="z1", capacity="100Gi", maximum_volume_size="8Gi")
        )
        cluster.add_storage_capacity(storage_capacity_dict("lost", "fast", zone=None, capacity="1Ti"))
        cluster.add_storage_class(storage_class_dict("other", provisioner="other.example.com"))
        cluster.add_csi_driver(csi_driver_dict("other.example.com", storage_capacity=False))
        cluster.add_pvc(pvc_dict("fits", storage_class="fast", size="5Gi"))
        cluster.add_pvc(pvc_dict("huge", storage_class="fast", size="20Gi"))
        cluster.add_pvc(pvc_dict("unchecked", storage_class="other", size="1Ti"))
        await scheduler.start()
        for name in ("fits", "huge", "unchecked"):
            cluster.create_pod(volume_pod(name, name))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/fits")].node_name == "n1"
        assert cluster.pods[PodKey("default/unchecked")].node_name is not None
        assert cluster.pods[PodKey("default/huge")].node_name is None
        assert last_note(cluster, "huge") == "0/3 nodes are available: 3 node(s) did not have enough free storage."
        # The driver reports more room in z0: the pod is tried again and lands there.
        cluster.add_storage_capacity(storage_capacity_dict("z0-pool", "fast", zone="z0", capacity="50Gi"))
        scheduler.clock.advance(2.0)  # type: ignore[attr-defined]
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/huge")].node_name in ("n0", "n2")

    loop.run_until_complete(run())


def test_storage_pools_and_claims_may_pass_any_nodes_capacity(loop: asyncio.AbstractEventLoop) -> None:
    """Storage sizes are bounded by int64, as kube's quantities are, not by what a node holds."""

    async def run() -> None:
        cluster, scheduler = setup()
        cluster.add_storage_class(storage_class_dict("fast", provisioner="csi.example.com"))
        cluster.add_csi_driver(csi_driver_dict("csi.example.com"))
        cluster.add_storage_capacity(storage_capacity_dict("z1-pool", "fast", zone="z1", capacity="10Pi"))
        cluster.add_pvc(pvc_dict("lake", storage_class="fast", size="9Pi"))
        await scheduler.start()
        cluster.create_pod(volume_pod("p", "lake"))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p")].node_name == "n1"
        with pytest.raises(QuantityError, match=r"capacity '8Ei' is not between 0 and 9223372036854775807 bytes"):
            csi_storage_capacity_from_dict(storage_capacity_dict("sea", "fast", zone="z1", capacity="8Ei"))

    loop.run_until_complete(run())


def test_a_generic_ephemeral_volume_takes_only_the_claim_made_for_its_pod(loop: asyncio.AbstractEventLoop) -> None:
    """kube's VolumeIsForPod: the claim named <pod>-<volume> must be controlled by the pod,
    else it is someone else's data."""

    async def run() -> None:
        cluster, scheduler = setup()
        cluster.add_pv(pv_dict("pv1", node="n1"))
        stray = cluster.add_pvc(pvc_dict("web-data"))  # a user's claim that happens to bear the name
        await scheduler.start()
        template = {"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local"}}
        volume = {"name": "data", "ephemeral": {"volumeClaimTemplate": template}}
        cluster.create_pod(with_volumes(pod_dict("web", scheduler_name="vol"), [volume]))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/web")].node_name is None
        assert last_note(cluster, "web") == (
            "0/3 nodes are available: PVC default/web-data was not created for pod default/web (pod is not owner)."
        )
        # The user's claim goes; the ephemeral-volume controller makes the pod's own.
        cluster.delete_storage(stray)
        owned = pvc_dict("web-data")
        owner = {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "uid-default-web", "controller": True}
        owned["metadata"]["ownerReferences"] = [owner]
        cluster.add_pvc(owned)
        scheduler.clock.advance(2.0)  # type: ignore[attr-defined]
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/web")].node_name == "n1"

    loop.run_until_complete(run())


def test_nodes_refused_for_storage_and_for_topology_get_their_own_reasons(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        cluster, scheduler = setup()
        cluster.add_storage_class(storage_class_dict("zonal", provisioner="csi.example.com", zones=["z0"]))
        cluster.add_csi_driver(csi_driver_dict("csi.example.com"))
        cluster.add_storage_capacity(storage_capacity_dict("z0-pool", "zonal", zone="z0", capacity="1Gi"))
        cluster.add_pvc(pvc_dict("big", storage_class="zonal", size="5Gi"))
        await scheduler.start()
        cluster.create_pod(volume_pod("p", "big"))
        await scheduler.run_until_idle()
        assert last_note(cluster, "p") == (
            "0/3 nodes are available: 1 node(s) didn't find available persistent volumes to bind, "
            "2 node(s) did not have enough free storage."
        )

    loop.run_until_complete(run())


def test_a_pod_recreated_under_its_name_keeps_what_it_reserved(loop: asyncio.AbstractEventLoop) -> None:
    """Reservations belong to a pod by uid: the old pod's Unreserve (its bind failed after it was
    deleted) leaves the new pod's PV and claim reserved."""

    async def run() -> None:
        cluster, scheduler = setup()
        cluster.pv_controller = False  # the claim stays unbound: the PV is only assumed
        cluster.add_pv(pv_dict("only", node="n0"))
        cluster.add_pvc(pvc_dict("a"))
        await scheduler.start()
        cluster.create_pod(with_volumes(pod_dict("p", scheduler_name="vol", uid="old"), [claim_volume("a")]))
        scheduler.schedule_one()  # the old p is in PreBind: "only" is assumed for it
        plugin = scheduler.frameworks["vol"].plugins["VolumeBinding"]
        assert isinstance(plugin, VolumeBinding) and plugin.assumed == {"only": "old"}
        old = cluster.pods[PodKey("default/p")]
        cluster.delete_pod(old.key)
        new = cluster.create_pod(with_volumes(pod_dict("p", scheduler_name="vol", uid="new"), [claim_volume("a")]))
        assert new is not None
        plugin.assumed["only"], plugin.assumed_claims["default/a"] = "new", ("only", NodeName("n0"), "new")
        plugin.unreserve(CycleState(), old, NodeName("n0"))
        assert plugin.assumed == {"only": "new"} and plugin.assumed_claims == {"default/a": ("only", "n0", "new")}
        plugin.unreserve(CycleState(), new, NodeName("n0"))
        assert plugin.assumed == {} and plugin.assumed_claims == {}

    loop.run_until_complete(run())
