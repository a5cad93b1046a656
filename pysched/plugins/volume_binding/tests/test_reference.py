"""VolumeBinding's vectorised filter against a per-node reference: kube's binder decision
(claims smallest first, each taking the smallest fitting PV not yet taken, the rest provisioned
where their class allows) evaluated node by node from the node's labels, with no masks."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.builders import node_dict, pod_dict
from pysched.api.objects import node_from_dict, pod_from_dict
from pysched.api.storage_builders import claim_volume, pv_dict, pvc_dict, storage_class_dict, with_volumes
from pysched.api.volumes import NO_PROVISIONER
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle
from pysched.framework.nodetable import NodeTable
from pysched.framework.storage import StorageView
from pysched.plugins.volume_binding import PodClaims, VolumeBinding, candidate_volumes, read_claims

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
SIZES = ("1Gi", "2Gi", "4Gi")
CLASSES = ("static", "dynamic", "zoned")  # no provisioner; provisioned anywhere; only in zone z0


def reference_fits(claims: PodClaims, storage: StorageView, labels: dict[str, str], name: str) -> bool:
    """Whether the pod's claims can all be satisfied on the node with `labels`."""
    for claim in claims.bound:
        pv = storage.pv(claim.volume_name)
        if pv is None or not pv.fits_node(labels):
            return False
    taken: set[str] = set()
    for claim in claims.delayed:
        storage_class = storage.storage_class(claim.storage_class)
        provisions = (
            storage_class is not None and storage_class.provisioner != NO_PROVISIONER and storage_class.allows(labels)
        )
        selected = claim.annotations.get("volume.kubernetes.io/selected-node")
        if selected is not None:
            if selected != name or not provisions:
                return False
            continue
        prebound, matching = candidate_volumes(claim, storage, frozenset(taken))
        if prebound is not None:
            if not prebound.fits_node(labels):
                return False
            taken.add(prebound.name)
            continue
        fitting = [pv for pv in matching if pv.fits_node(labels)]
        if fitting:
            taken.add(fitting[0].name)
        elif not provisions:
            return False
    return True


@st.composite
def scenes(draw: st.DrawFn) -> dict[str, Any]:
    nodes = draw(st.integers(2, 6))
    classes = {
        "static": storage_class_dict("static"),
        "dynamic": storage_class_dict("dynamic", provisioner="csi.example/d"),
        "zoned": storage_class_dict("zoned", provisioner="csi.example/z", zones=["z0"]),
    }
    pvs = []
    for index in range(draw(st.integers(0, 6))):
        where = draw(st.sampled_from(["node", "zone", "anywhere"]))
        pv = pv_dict(
            f"pv{index}",
            storage_class=draw(st.sampled_from(CLASSES)),
            size=draw(st.sampled_from(SIZES)),
            node=f"n{draw(st.integers(0, nodes - 1))}" if where == "node" else None,
        )
        if where == "zone":
            term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [f"z{draw(st.integers(0, 1))}"]}]}
            pv["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
        pvs.append(pv)
    claims = [
        pvc_dict(
            f"c{index}",
            storage_class=draw(st.sampled_from(CLASSES)),
            size=draw(st.sampled_from(SIZES)),
        )
        for index in range(draw(st.integers(1, 3)))
    ]
    return {"nodes": nodes, "classes": list(classes.values()), "pvs": pvs, "claims": claims}


@settings(max_examples=150, deadline=None)
@given(scenes())
def test_filter_equals_the_per_node_binder_decision(scene: dict[str, Any]) -> None:
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    table = NodeTable()
    for index in range(scene["nodes"]):
        raw = node_dict(f"n{index}", labels={ZONE: f"z{index % 2}", HOSTNAME: f"n{index}"})
        table.add(node_from_dict(raw))
    for storage_class in scene["classes"]:
        cluster.add_storage_class(storage_class)
    for pv in scene["pvs"]:
        cluster.add_pv(pv)
    for claim in scene["claims"]:
        cluster.add_pvc(claim)
    pod = pod_from_dict(with_volumes(pod_dict("p"), [claim_volume(c["metadata"]["name"]) for c in scene["claims"]]))
    plugin = VolumeBinding(Handle(cluster, clock, table))
    state = CycleState()
    assert plugin.pre_filter(state, pod, table).ok
    feasible = plugin.filter_batch(state, pod, table).feasible
    storage = cluster.storage
    claims = read_claims(pod, storage)
    assert isinstance(claims, PodClaims)
    expected = [
        reference_fits(claims, storage, dict(info.labels), str(info.name))
        for info in (table.infos[row] for row in range(table.size))
        if info is not None
    ]
    np.testing.assert_array_equal(feasible[: table.size], expected)
