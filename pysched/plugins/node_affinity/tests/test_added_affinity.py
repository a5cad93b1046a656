"""A profile's addedAffinity: every pod of the profile meets it besides its own affinity, as kube's
NodeAffinityArgs; a bad one is refused when the profile is read."""

import asyncio
import dataclasses
from typing import Any

import pytest

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import SchedulerConfig
from pysched.framework.registry import ArgsError, parse_args
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.plugins.node_affinity import NodeAffinityArgs
from pysched.scheduler.scheduler import Scheduler

REGISTRY = default_registry()


def zone(operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": "zone", "operator": operator, "values": list(values)}]}


ONLY_Z1 = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [zone("In", "z1")]}}


def _run(added: dict[str, Any], pods: list[dict[str, Any]]) -> SimulatedCluster:
    async def run() -> SimulatedCluster:
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        cluster.add_node(node_dict("small-z1", cpu="4", labels={"zone": "z1"}))
        cluster.add_node(node_dict("big-z2", cpu="64", labels={"zone": "z2"}))
        cluster.add_node(node_dict("big-z3", cpu="64", labels={"zone": "z3"}))
        config = builtin_config(REGISTRY).only("default")
        profile = config.profiles[0]
        args = {**profile.plugin_args, "NodeAffinity": {"addedAffinity": added}}
        profile = dataclasses.replace(profile, plugin_args=args)
        scheduler = Scheduler(SchedulerConfig((profile,), config.source), cluster, clock, REGISTRY)
        await scheduler.start()
        for pod in pods:
            cluster.create_pod(pod)
        await scheduler.run_until_idle()
        await scheduler.stop()
        return cluster

    return asyncio.run(run())


def test_every_pod_of_the_profile_meets_the_added_required_affinity() -> None:
    plain = pod_dict("plain", scheduler_name="default")
    cluster = _run(ONLY_Z1, [plain])
    assert cluster.pods[PodKey("default/plain")].node_name == "small-z1"  # not the emptier z2/z3 nodes


def test_a_pod_whose_own_affinity_contradicts_the_added_one_is_refused_with_both_reasons() -> None:
    own = pod_dict("z2-only", scheduler_name="default", affinity_terms=[zone("In", "z2")])
    cluster = _run(ONLY_Z1, [own])
    assert cluster.pods[PodKey("default/z2-only")].node_name is None
    notes = [e.note for e in cluster.events if e.reason == "FailedScheduling"]
    assert notes and notes[0].startswith(
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 node(s) didn't match scheduler-enforced node affinity."
    ), notes[0]


def test_added_preferences_score_with_the_pods_own() -> None:
    prefer_z3 = {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "preference": zone("In", "z3")}]}
    cluster = _run(prefer_z3, [pod_dict(f"p{i}", scheduler_name="default") for i in range(3)])
    assert {cluster.pods[PodKey(f"default/p{i}")].node_name for i in range(3)} == {"big-z3"}


@pytest.mark.parametrize(
    ("added", "problem"),
    [
        ({"required": {}}, "unknown field 'required'"),
        (
            {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}},
            "nodeSelectorTerms must hold at least one term",
        ),
        (
            {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [zone("Near", "z1")]}},
            "operator must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt, got 'Near'",
        ),
        (
            {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [zone("In")]}},
            "In needs at least one value",
        ),
        (
            {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [zone("Gt", "x")]}},
            "Gt takes exactly one integer value",
        ),
        (
            {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [zone("Gt", "-5")]}},
            "label value '-5' must be empty or at most 63 characters",
        ),
        (
            {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [zone("NotIn", "z 1")]}},
            "label value 'z 1' must be empty or at most 63 characters",
        ),
        (
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "spec.x", "operator": "In", "values": ["a"]}]}]
                }
            },
            "matchFields supports only metadata.name",
        ),
        (
            {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": zone("In", "z1")}]},
            "weight must be an integer from 1 to 100, got 0",
        ),
        ("zone=z1", "expected a map or nothing, got 'zone=z1'"),
    ],
)
def test_a_bad_added_affinity_is_refused_naming_the_field(added: Any, problem: str) -> None:
    with pytest.raises(ArgsError) as refused:
        parse_args(NodeAffinityArgs, {"addedAffinity": added})
    assert refused.value.field == "addedAffinity" and problem in str(refused.value), str(refused.value)
