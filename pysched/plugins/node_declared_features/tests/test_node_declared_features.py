import asyncio
from typing import Any

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.api.node_features import (
    MAX_DECLARED_FEATURES,
    RESTART_ALL_CONTAINERS,
    USER_NAMESPACES_HOST_NETWORK,
    declared_features,
    required_features,
)
from pysched.api.objects import pod_from_dict
from pysched.plugins.node_declared_features import REASON
from pysched.testing.simulated import default_world

RESTART_RULE = {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}


def restarting(name: str, *, init: bool = False, **kw: Any) -> dict[str, Any]:
    raw = pod_dict(name, scheduler_name="default", **kw)
    container = {"name": "c", "image": "x", "restartPolicy": "Never", "restartPolicyRules": [RESTART_RULE]}
    if init:
        raw["spec"]["initContainers"] = [container]
    else:
        raw["spec"]["containers"][0].update(container)
    return raw


def declaring(name: str, *features: str) -> dict[str, Any]:
    raw = node_dict(name, cpu="8", memory="16Gi")
    if features:
        raw["status"]["declaredFeatures"] = list(features)
    return raw


def test_what_a_pod_needs_is_inferred_as_kubernetes_infers_it_for_scheduling() -> None:
    assert required_features(restarting("p")["spec"]) == {RESTART_ALL_CONTAINERS}
    assert required_features(restarting("p", init=True)["spec"]) == {RESTART_ALL_CONTAINERS}
    other_rule = restarting("p")
    other_rule["spec"]["containers"][0]["restartPolicyRules"] = [
        {"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}
    ]
    assert required_features(other_rule["spec"]) == frozenset()
    assert required_features({"hostNetwork": True, "hostUsers": False}) == {USER_NAMESPACES_HOST_NETWORK}
    assert required_features({"hostNetwork": True}) == frozenset()  # hostUsers absent: the host's namespace
    assert required_features({"hostNetwork": False, "hostUsers": False}) == frozenset()
    assert pod_from_dict(restarting("p")).required_features == {RESTART_ALL_CONTAINERS}
    assert pod_from_dict(pod_dict("plain")).required_features == frozenset()


def test_declared_features_are_bounded_and_bad_entries_skipped() -> None:
    assert declared_features({"declaredFeatures": ["A", 7, "", None, "B/c"]}) == {"A", "B/c"}
    assert declared_features({"declaredFeatures": "A"}) == frozenset()
    many = {"declaredFeatures": [f"F{i}" for i in range(1000)]}
    assert len(declared_features(many)) == MAX_DECLARED_FEATURES


def test_a_pod_needing_a_feature_goes_only_to_a_node_declaring_it() -> None:
    """The default profile would spread the pod to the empty node; only the fuller one declares
    what the pod needs, so it goes there, as kube-scheduler v1.36 places it. A plain pod still
    goes to the empty node."""

    async def run() -> tuple[str | None, str | None]:
        _, cluster, scheduler = default_world(declaring("old"), declaring("new", RESTART_ALL_CONTAINERS, "Other"))
        cluster.create_pod(pod_dict("filler", cpu="4", memory="8Gi", node_name="new", scheduler_name="default"))
        await scheduler.start()
        cluster.create_pod(restarting("p", cpu="1", memory="1Gi"))
        cluster.create_pod(pod_dict("plain", cpu="1", memory="1Gi", scheduler_name="default", created=1.0))
        await scheduler.run_until_idle()
        return cluster.pods[PodKey("default/p")].node_name, cluster.pods[PodKey("default/plain")].node_name

    assert asyncio.run(run()) == ("new", "old")


def test_without_such_a_node_the_pod_waits_and_is_placed_once_a_node_declares_it() -> None:
    async def run() -> tuple[list[str], str | None, str | None]:
        clock, cluster, scheduler = default_world(declaring("old"), declaring("other", USER_NAMESPACES_HOST_NETWORK))
        await scheduler.start()
        cluster.create_pod(restarting("p"))
        await scheduler.run_until_idle()
        told = [e.note for e in cluster.events if e.pod == "default/p" and e.reason == "FailedScheduling"]
        before = cluster.pods[PodKey("default/p")].node_name
        clock.advance(20.0)  # past its backoff: only the node update can let it out
        cluster.add_node(declaring("other", RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK))
        await scheduler.run_until_idle()
        return told, before, cluster.pods[PodKey("default/p")].node_name

    told, before, after = asyncio.run(run())
    assert before is None and after == "other"
    assert told == [
        f"0/2 nodes are available: 2 {REASON}. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    ]
