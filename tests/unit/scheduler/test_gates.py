"""Plugins gated by pod features: leaving a plugin out for a pod changes how much a cycle
costs, never where the pod goes (each gate must only leave out pods the plugin would skip)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pysched.scheduler.algorithm as algorithm_module
import pysched.scheduler.runtime as runtime_module
from pysched.api.builders import node_dict, pod_dict
from pysched.api.features import EVERY_POD, LABELS, NO_FEATURES, POD_AFFINITY, VOLUMES
from pysched.api.ids import PodKey
from pysched.api.objects import pod_from_dict
from pysched.api.storage_builders import pvc_dict
from pysched.backend.simulated import SimulatedCluster
from pysched.cmd.bench import run_bench
from pysched.framework.clock import VirtualClock
from pysched.framework.cycle_state import CycleState
from pysched.framework.gates import FeatureGated
from pysched.framework.status import Code
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler

HOSTNAME = "kubernetes.io/hostname"


def _ungated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(algorithm_module, "acts_on", lambda plugin: EVERY_POD)
    monkeypatch.setattr(runtime_module, "acts_on", lambda plugin: EVERY_POD)  # PreEnqueue to PreBind


def _bench_placements(monkeypatch: pytest.MonkeyPatch | None) -> tuple[dict[str, str | None], dict[str, str]]:
    """Where each pod went, and the volume each claim was bound to (PreBind's work)."""
    if monkeypatch is not None:
        _ungated(monkeypatch)
    held: list[Scheduler] = []
    asyncio.run(run_bench(60, 600, mix="constrained", configure=held.append))
    cluster = held[0].backend
    assert isinstance(cluster, SimulatedCluster)
    claims = {key: claim.volume_name for key, claim in cluster.storage.pvcs.items()}
    return {str(key): pod.node_name for key, pod in cluster.pods.items()}, claims


def test_the_constrained_bench_mix_lands_exactly_as_with_every_plugin_called(monkeypatch: pytest.MonkeyPatch) -> None:
    gated, gated_claims = _bench_placements(None)
    with monkeypatch.context() as patch:
        ungated, ungated_claims = _bench_placements(patch)
    assert gated == ungated
    assert gated_claims == ungated_claims
    assert sum(node is None for node in gated.values()) < len(gated) // 2  # most pods were placed
    assert sum(bool(volume) for volume in gated_claims.values()) > len(gated_claims) // 2  # most claims bound


def _anti(selector: dict[str, Any]) -> dict[str, Any]:
    term = {"labelSelector": selector, "topologyKey": HOSTNAME}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _scheduler(cluster: SimulatedCluster, clock: VirtualClock) -> Scheduler:
    registry = default_registry()
    return Scheduler(builtin_config(registry).only("default"), cluster, clock, registry)


@pytest.mark.parametrize(
    "selector",
    [{"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {}],
    ids=["no-app-label", "everything"],
)
def test_a_placed_term_selecting_unlabelled_pods_keeps_them_off_its_node(selector: dict[str, Any]) -> None:
    """The symmetric rule for a pod with no labels and no terms: pod affinity must see it once a
    placed pod's anti-affinity can select pods without labels."""

    async def run() -> None:
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        cluster.add_node(node_dict("a", labels={HOSTNAME: "a"}))
        cluster.add_node(node_dict("b", labels={HOSTNAME: "b"}))
        guard = pod_dict("guard", scheduler_name="default", node_name="a", labels={"role": "guard"})
        guard["spec"]["affinity"] = _anti(selector)
        cluster.create_pod(guard)
        scheduler = _scheduler(cluster, clock)
        await scheduler.start()
        algorithm = scheduler.frameworks["default"].algorithm
        plain = pod_from_dict(pod_dict("plain", scheduler_name="default"))
        assert not plain.features & ~EVERY_POD  # no feature but being a pod
        assert "InterPodAffinity" in {p.NAME for p in algorithm.plan(plain.features).pre_filter}
        for index in range(3):
            cluster.create_pod(pod_dict(f"plain-{index}", scheduler_name="default", cpu="100m"))
        await scheduler.run_until_idle()
        placed = {str(k): p.node_name for k, p in cluster.pods.items() if str(k).startswith("default/plain")}
        assert placed == {f"default/plain-{i}": "b" for i in range(3)}
        cluster.delete_pod(PodKey("default/guard"))
        await scheduler.run_until_idle()
        assert "InterPodAffinity" not in {p.NAME for p in algorithm.plan(plain.features).pre_filter}

    asyncio.run(run())


@st.composite
def _incoming(draw: st.DrawFn, index: int) -> dict[str, Any]:
    pod = pod_dict(f"in-{index}", scheduler_name="default", cpu="100m")
    spec, meta = pod["spec"], pod["metadata"]
    if draw(st.booleans()):
        meta["labels"] = {"app": draw(st.sampled_from(["x", "y"]))}
    if draw(st.booleans()):
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}
        ]
    extra = draw(st.sampled_from(["none", "anti", "spread", "port", "claim"]))
    if extra == "anti":
        spec["affinity"] = _anti({"matchLabels": {"app": "x"}})
    elif extra == "spread":
        constraint = {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule"}
        spec["topologySpreadConstraints"] = [{**constraint, "labelSelector": {"matchLabels": {"app": "x"}}}]
    elif extra == "port":
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    elif extra == "claim":
        spec["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    return pod


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_every_plugin_its_gate_leaves_out_would_have_skipped(data: st.DataObject) -> None:
    """Whatever is placed (pods with or without labels and terms, a term that selects pods
    without labels), a gated PreFilter or PreScore plugin returns Skip for each pod its gate
    leaves out."""

    async def run() -> None:
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        for name in ("a", "b", "c"):
            cluster.add_node(node_dict(name, labels={HOSTNAME: name}))
        cluster.add_pvc(pvc_dict("data", namespace="default"))
        cluster.set_service("default", "svc", {"app": "x"})  # default spread constraints select by it
        placed = data.draw(st.lists(st.integers(0, 4), max_size=5))
        for index, kind in enumerate(placed):
            pod = pod_dict(f"on-{index}", scheduler_name="default", node_name="abc"[index % 3], cpu="100m")
            if kind == 1:
                pod["metadata"]["labels"] = {"app": "x"}
            elif kind == 2:
                pod["spec"]["affinity"] = _anti({"matchLabels": {"app": "x"}})
            elif kind == 3:
                pod["spec"]["affinity"] = _anti({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]})
            elif kind == 4:
                term = {"weight": 5, "podAffinityTerm": {"labelSelector": {}, "topologyKey": HOSTNAME}}
                pod["spec"]["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}
            cluster.create_pod(pod)
        scheduler = _scheduler(cluster, clock)
        await scheduler.start()
        framework = scheduler.frameworks["default"]
        nodes = framework.handle.nodes
        feasible = nodes.present[: nodes.size].copy()
        for index in range(4):
            incoming = pod_from_dict(data.draw(_incoming(index)))
            for plugin in framework.pre_filter:
                if isinstance(plugin, FeatureGated) and not plugin.acts_on() & incoming.features:
                    assert plugin.pre_filter(CycleState(), incoming, nodes).code is Code.SKIP, plugin.NAME
            for score in framework.pre_score:
                if isinstance(score, FeatureGated) and not score.acts_on() & incoming.features:
                    assert score.pre_score(CycleState(), incoming, nodes, feasible).code is Code.SKIP, score.NAME

    asyncio.run(run())


def test_pod_features_follow_the_fields_they_are_read_from() -> None:
    plain = pod_from_dict(pod_dict("p"))
    assert plain.features == EVERY_POD
    labelled = plain.evolve(labels={"app": "x"})
    assert labelled.features == EVERY_POD | LABELS  # evolve reads them again
    anti = pod_dict("q")
    anti["spec"]["affinity"] = _anti({"matchLabels": {"app": "x"}})
    anti["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    assert pod_from_dict(anti).features == EVERY_POD | POD_AFFINITY | VOLUMES
    assert NO_FEATURES == 0
