import asyncio
from typing import Any

import pytest

from pysched.api import features
from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.api.objects import pod_from_dict
from pysched.api.podspec import FIELDS, NOT_READ, REFUSED, refusal, refused_fields
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.plugins import default_registry
from pysched.scheduler.scheduler import Scheduler

# The fields of PodSpec in staging/src/k8s.io/api/core/v1/types.go at v1.36 (JSON names).
PODSPEC_V1_36 = [
    "volumes",
    "initContainers",
    "containers",
    "ephemeralContainers",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "dnsPolicy",
    "nodeSelector",
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
    "nodeName",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "securityContext",
    "imagePullSecrets",
    "hostname",
    "subdomain",
    "affinity",
    "schedulerName",
    "tolerations",
    "hostAliases",
    "priorityClassName",
    "priority",
    "dnsConfig",
    "readinessGates",
    "runtimeClassName",
    "enableServiceLinks",
    "preemptionPolicy",
    "overhead",
    "topologySpreadConstraints",
    "setHostnameAsFQDN",
    "os",
    "hostUsers",
    "schedulingGates",
    "resourceClaims",
    "resources",
    "hostnameOverride",
    "schedulingGroup",
]

# What the plugins of pkg/scheduler/apis/config/v1/default_plugins.go read of a pod at v1.36
# (pkg/scheduler/framework/plugins/*: schedulinggates, queuesort, nodename, nodeaffinity,
# tainttoleration, nodeports, noderesources, imagelocality, volumebinding, volumezone,
# volumerestrictions, nodevolumelimits, podtopologyspread, interpodaffinity, defaultpreemption,
# dynamicresources, nodedeclaredfeatures).
READ_BY_DEFAULT_PLUGINS = [
    "spec.schedulingGates",
    "spec.priority",
    "spec.nodeName",
    "spec.nodeSelector",
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution",
    "spec.tolerations",
    "spec.containers[].ports",
    "spec.initContainers[].ports",
    "spec.initContainers[].restartPolicy",
    "spec.containers[].resources",
    "spec.initContainers[].resources",
    "spec.overhead",
    "spec.resources",
    "spec.containers[].image",
    "spec.initContainers[].image",
    "spec.volumes",
    "spec.topologySpreadConstraints",
    "spec.affinity.podAffinity",
    "spec.affinity.podAntiAffinity",
    "spec.preemptionPolicy",
    "spec.resourceClaims",
    "spec.containers[].resources.claims",
    "spec.initContainers[].resources.claims",
    "spec.containers[].restartPolicyRules",
    "spec.initContainers[].restartPolicyRules",
    "spec.hostNetwork",
    "spec.hostUsers",
]


# PodSpec fields of v1.35 (the oldest release pysched runs on) that v1.36 no longer has.
PODSPEC_V1_35_ONLY = ["workloadRef"]  # its alpha gang scheduling; v1.36: schedulingGroup


def test_the_table_covers_every_podspec_field_and_everything_default_plugins_read() -> None:
    top = {path.split(".")[1].removesuffix("[]") for path in FIELDS}
    assert set(PODSPEC_V1_36) | set(PODSPEC_V1_35_ONLY) <= top
    for path in READ_BY_DEFAULT_PLUGINS:
        assert FIELDS.get(path, NOT_READ) != NOT_READ, path


TERM = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
SIDECAR = {"name": "side", "image": "s", "restartPolicy": "Always"}


def _sample(path: str) -> tuple[str, Any]:
    """Where and what to set for a pod using `path` (which the node `a`, zone a, can honour)."""
    samples: dict[str, Any] = {
        "spec.nodeName": "a",
        "spec.nodeSelector": {"zone": "a"},
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [TERM]},
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": TERM}
        ],
        "spec.affinity.podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
        "spec.affinity.podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
        "spec.tolerations": [{"key": "x", "operator": "Exists"}],
        "spec.containers[].resources": {"requests": {"cpu": "1"}},
        "spec.initContainers[].resources": {"requests": {"cpu": "1"}},
        "spec.initContainers[].restartPolicy": "Always",
        "spec.overhead": {"cpu": "100m"},
        "spec.resources": {"requests": {"cpu": "2"}},
        "spec.containers[].ports": [{"containerPort": 80, "hostPort": 8080}],
        "spec.initContainers[].ports": [{"containerPort": 81, "hostPort": 8081}],
        "spec.containers[].image": "trainer:v2",
        "spec.initContainers[].image": "init:v2",
        "spec.schedulerName": "t",
        "spec.priority": 10,
        "spec.preemptionPolicy": "Never",
        "spec.topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}
        ],
        "spec.volumes": [{"name": "scratch", "emptyDir": {}}],
        "spec.schedulingGates": [{"name": "example.com/wait"}],
        "spec.resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
        "spec.workloadRef": {"name": "training", "podGroup": "workers"},
        "spec.containers[].resources.claims": [{"name": "gpu"}],
        "spec.initContainers[].resources.claims": [{"name": "gpu"}],
        "spec.containers": [{"name": "main", "image": "trainer"}],
        "spec.initContainers": [{"name": "init", "image": "init"}],
        "spec.ephemeralContainers": [{"name": "debug", "image": "busybox"}],
        "spec.restartPolicy": "Never",
        "spec.terminationGracePeriodSeconds": 5,
        "spec.activeDeadlineSeconds": 600,
        "spec.dnsPolicy": "None",
        "spec.dnsConfig": {"nameservers": ["1.1.1.1"]},
        "spec.serviceAccountName": "trainer",
        "spec.serviceAccount": "trainer",
        "spec.automountServiceAccountToken": False,
        "spec.hostNetwork": True,
        "spec.hostPID": True,
        "spec.hostIPC": True,
        "spec.shareProcessNamespace": True,
        "spec.securityContext": {"runAsUser": 1000},
        "spec.imagePullSecrets": [{"name": "registry"}],
        "spec.hostname": "h",
        "spec.hostnameOverride": "h2",
        "spec.subdomain": "s",
        "spec.setHostnameAsFQDN": True,
        "spec.hostAliases": [{"ip": "10.0.0.1", "hostnames": ["x"]}],
        "spec.priorityClassName": "high",
        "spec.readinessGates": [{"conditionType": "example.com/ready"}],
        "spec.runtimeClassName": "gvisor",
        "spec.enableServiceLinks": False,
        "spec.os": {"name": "linux"},
        "spec.hostUsers": False,
        "spec.schedulingGroup": {"podGroupName": "g"},
        # a rule that needs no declared feature (RestartAllContainers does: the profile lacks its check)
        "spec.containers[].restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [3]}}],
        "spec.initContainers[].restartPolicyRules": [
            {"action": "Restart", "exitCodes": {"operator": "In", "values": [3]}}
        ],
    }
    return path, samples[path]


def _pod_using(name: str, path: str) -> dict[str, Any]:
    raw = pod_dict(name, scheduler_name="t")
    spec = raw["spec"]
    if "initContainers" in path and path != "spec.initContainers":
        spec["initContainers"] = [dict(SIDECAR)]
    where, value = _sample(path)
    steps = where.split(".")[1:]
    node: Any = spec
    for step in steps[:-1]:
        node = node[step[:-2]][0] if step.endswith("[]") else node.setdefault(step, {})
    last = steps[-1]
    if last == "resources" and isinstance(node, dict) and "resources" in node:
        node[last].update(value)
    else:
        node[last] = value
    return raw


PROFILE = {
    "profiles": [
        {
            "schedulerName": "t",
            "plugins": {
                "queueSort": [{"name": "PrioritySort"}],
                "preEnqueue": [{"name": "SchedulingGates"}],
                "preFilter": [{"name": "UnsupportedFields"}, {"name": "NodePorts"}],
                "filter": [
                    {"name": "NodeUnschedulable"},
                    {"name": "NodeName"},
                    {"name": "TaintToleration"},
                    {"name": "NodeAffinity"},
                    {"name": "NodePorts"},
                    {"name": "NodeResourcesFit"},
                ],
                "score": [{"name": "LeastAllocated", "weight": 1}],
                "bind": [{"name": "DefaultBinder"}],
            },
        }
    ]
}


@pytest.mark.parametrize("path", list(FIELDS))
def test_each_field_is_honoured_or_refused_with_exactly_the_event(path: str) -> None:
    async def run() -> None:
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        scheduler = Scheduler(parse_config(PROFILE, "t", registry), cluster, clock, registry)
        cluster.add_node(node_dict("a", labels={"zone": "a"}))
        cluster.add_node(node_dict("b", labels={"zone": "b"}, cpu="1"))
        await scheduler.start()
        cluster.create_pod(_pod_using("p", path))
        await scheduler.run_until_idle()
        pod = cluster.pods[PodKey("default/p")]
        notes = [e.note for e in cluster.events if e.pod == "default/p" and e.reason == "FailedScheduling"]
        if FIELDS[path] == REFUSED:
            assert pod.node_name is None
            assert notes == [f"0/2 nodes are available: {refusal(path)}."]
            assert scheduler.queue.where(pod.key) == "unschedulable"
        elif FIELDS[path] == "SchedulingGates":
            assert notes == [] and pod.node_name is None  # held, untried, until the gates go
            assert scheduler.queue.where(pod.key) == "gated"
        else:
            assert notes == []
            # Node b (zone b, 1 cpu) fails every sample that a pysched plugin honours.
            assert pod.node_name is not None
            if path.startswith(("spec.node", "spec.affinity.nodeAffinity.req", "spec.resources")):
                assert pod.node_name == "a"
        await scheduler.stop()

    asyncio.run(run())


def test_plain_and_empty_values_are_not_refused() -> None:
    raw = pod_dict("p")
    assert refused_fields(raw) == ()
    raw["spec"]["resourceClaims"] = []
    raw["spec"]["schedulingGates"] = []
    raw["spec"]["containers"][0]["resources"]["claims"] = []
    assert refused_fields(raw) == ()
    raw["spec"]["containers"] = "not a list"
    assert refused_fields(raw) == ()


def test_several_refused_fields_are_all_named() -> None:
    raw = _pod_using("p", "spec.resourceClaims")
    raw["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    assert refused_fields(raw) == ("spec.resourceClaims", "spec.containers[].resources.claims")


def test_a_pod_record_carries_its_refused_paths_and_the_feature_the_plugin_is_gated_on() -> None:
    raw = pod_dict("claims")
    raw["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    raw["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    pod = pod_from_dict(raw)
    assert pod.refused == ("spec.resourceClaims", "spec.containers[].resources.claims")
    assert pod.features & features.REFUSED
    # A later update keeps them (the fields are immutable in the API); a plain pod has none.
    bound = pod.evolve(node_name="n", raw={**raw, "status": {"phase": "Running"}})
    assert bound.refused == pod.refused and bound.features & features.REFUSED
    plain = pod_from_dict(pod_dict("plain"))
    assert plain.refused == () and not plain.features & features.REFUSED
