"""A profile that leaves out the plugin checking what a pod states in its own spec refuses that
pod with words naming the plugin, rather than place it unchecked; other pods are placed as
before, and the built-in profiles refuse nothing this way."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.api.storage_builders import claim_volume, with_volumes
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config, builtin_profiles
from pysched.scheduler.scheduler import Scheduler
from pysched.scheduler.unchecked import UncheckedConstraints

PROFILE = "lean"
SELECTOR = {"matchLabels": {"app": "x"}}
HOSTNAME = "kubernetes.io/hostname"


def _pod(edit: Callable[[dict[str, Any]], None] | None = None, **kw: Any) -> dict[str, Any]:
    raw = pod_dict("p", scheduler_name=PROFILE, labels={"app": "x"}, **kw)
    if edit is not None:
        edit(raw["spec"])
    return raw


def _anti_affinity(spec: dict[str, Any]) -> None:
    term = {"labelSelector": SELECTOR, "topologyKey": HOSTNAME}
    spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _spread(spec: dict[str, Any]) -> None:
    constraint = {
        "maxSkew": 1,
        "topologyKey": HOSTNAME,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": SELECTOR,
    }
    spec["topologySpreadConstraints"] = [constraint]


def _host_port(spec: dict[str, Any]) -> None:
    spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]


def _resource_claim(spec: dict[str, Any]) -> None:
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu"}]


def _restart_all(spec: dict[str, Any]) -> None:
    spec["containers"][0]["restartPolicyRules"] = [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
    ]


def _claimed() -> dict[str, Any]:
    return with_volumes(_pod(), [claim_volume("data")])


# (the plugin a profile leaves out, a pod stating what it checks, what the pod is told it states)
CASES = [
    ("NodeAffinity", lambda: _pod(node_selector={"zone": "a"}), "node selector or required node affinity"),
    ("InterPodAffinity", lambda: _pod(_anti_affinity), "required pod affinity or anti-affinity"),
    ("PodTopologySpread", lambda: _pod(_spread), "DoNotSchedule topology spread constraints"),
    ("NodePorts", lambda: _pod(_host_port), "host ports"),
    ("VolumeBinding", _claimed, "persistent volume claims"),
    ("VolumeZone", _claimed, "persistent volume claims"),
    ("VolumeRestrictions", _claimed, "volumes"),
    ("NodeVolumeLimits", _claimed, "persistent volume claims"),
    ("UnsupportedFields", lambda: _pod(_resource_claim), "spec.resourceClaims"),
    ("NodeDeclaredFeatures", lambda: _pod(_restart_all), "node features RestartAllContainersOnContainerExits"),
]


def _profile(without: str | None) -> dict[str, Any]:
    """The built-in `default` profile named `lean`, without `without` at PreFilter and Filter."""
    profile = copy.deepcopy(next(p for p in builtin_profiles() if p["schedulerName"] == "default"))
    profile["schedulerName"] = PROFILE
    for point in ("preFilter", "filter"):
        profile["plugins"][point] = [ref for ref in profile["plugins"][point] if ref["name"] != without]
    return profile


def _run(raw: dict[str, Any], without: str | None) -> tuple[SimulatedCluster, list[str]]:
    registry = default_registry()
    config = parse_config({"profiles": [_profile(without)]}, "test", registry)
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    cluster.add_node(node_dict("a", cpu="8", memory="16Gi", labels={"zone": "a", HOSTNAME: "a"}))
    scheduler = Scheduler(config, cluster, clock, registry)

    async def go() -> None:
        await scheduler.start()
        cluster.create_pod(raw)
        await scheduler.run_until_idle()
        await scheduler.stop()

    asyncio.run(go())
    return cluster, [e.note for e in cluster.events if e.pod == "default/p" and e.reason == "FailedScheduling"]


@pytest.mark.parametrize(("plugin", "make", "what"), CASES, ids=[c[0] for c in CASES])
def test_a_pod_stating_what_the_profile_leaves_unchecked_is_refused(
    plugin: str, make: Callable[[], dict[str, Any]], what: str
) -> None:
    cluster, told = _run(make(), without=plugin)
    assert cluster.pods[PodKey("default/p")].node_name is None
    assert told == [
        f"0/1 nodes are available: profile {PROFILE} leaves out what checks the pod's own constraints: "
        f"{plugin} ({what}). "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    ]


@pytest.mark.parametrize(("plugin", "make", "what"), CASES, ids=[c[0] for c in CASES])
def test_the_same_pod_is_judged_by_the_plugin_when_the_profile_runs_it(
    plugin: str, make: Callable[[], dict[str, Any]], what: str
) -> None:
    _, told = _run(make(), without=None)
    assert not any("leaves out" in note for note in told)


@pytest.mark.parametrize("plugin", [c[0] for c in CASES])
def test_a_pod_stating_nothing_is_placed_by_a_profile_without_the_plugin(plugin: str) -> None:
    cluster, told = _run(_pod(), without=plugin)
    assert cluster.pods[PodKey("default/p")].node_name == "a"
    assert told == []


def test_every_builtin_profile_runs_every_plugin_that_checks_what_pods_state() -> None:
    registry = default_registry()
    for profile in builtin_config(registry).profiles:
        assert UncheckedConstraints.of(profile, registry) is None, profile.scheduler_name
