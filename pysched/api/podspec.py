"""The one table of PodSpec fields: which pysched plugin handles each, which are refused, and
which no default kube-scheduler v1.36 plugin reads (so ignoring them is what kube-scheduler does).
A pod's refused paths are read once, when its record is built (`PodInfo.refused`): the fields
refused are immutable in the API, so a pod keeps them for its lifetime, and a pod that sets none
costs the UnsupportedFields plugin nothing per cycle.

A path is JSON field names joined by dots, `[]` stepping into every item of a list. A pod that
sets a refused path (a non-empty value) is left Pending with `refusal(path)`: pysched must never
place a pod while silently ignoring something the default scheduler would have honoured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

REFUSED: Final = "refused"
NOT_READ: Final = "not read by kube-scheduler"

# path -> the pysched plugin(s) that handle it, REFUSED, or NOT_READ.
FIELDS: Final[Mapping[str, str]] = {
    # read by default plugins, handled
    "spec.nodeName": "NodeName",
    "spec.nodeSelector": "NodeAffinity",
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution": "NodeAffinity",
    "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution": "NodeAffinity",
    "spec.affinity.podAffinity": "InterPodAffinity",
    "spec.affinity.podAntiAffinity": "InterPodAffinity",
    "spec.tolerations": "TaintToleration",
    "spec.containers[].resources": "NodeResourcesFit, BalancedAllocation, LeastAllocated, MostAllocated",
    "spec.initContainers[].resources": "NodeResourcesFit",
    "spec.initContainers[].restartPolicy": "NodeResourcesFit, NodePorts (sidecars)",
    "spec.overhead": "NodeResourcesFit",
    "spec.resources": "NodeResourcesFit (pod-level resources)",
    "spec.containers[].ports": "NodePorts",
    "spec.initContainers[].ports": "NodePorts (sidecars)",
    "spec.containers[].image": "ImageLocality",
    "spec.initContainers[].image": "ImageLocality",
    "spec.schedulerName": "profiles",
    "spec.priority": "PrioritySort, DefaultPreemption",
    "spec.preemptionPolicy": "DefaultPreemption",
    "spec.topologySpreadConstraints": "PodTopologySpread",
    "spec.volumes": "VolumeBinding, VolumeZone, VolumeRestrictions, NodeVolumeLimits, ImageLocality (image volumes)",
    "spec.schedulingGates": "SchedulingGates",
    "spec.containers[].restartPolicyRules": "NodeDeclaredFeatures",
    "spec.initContainers[].restartPolicyRules": "NodeDeclaredFeatures",
    "spec.hostUsers": "NodeDeclaredFeatures (with hostNetwork)",
    # with hostUsers: false; its ports arrive as containers[].ports[].hostPort
    "spec.hostNetwork": "NodeDeclaredFeatures (with hostUsers)",
    # read by default plugins, not implemented by pysched
    "spec.resourceClaims": REFUSED,  # DynamicResources
    "spec.containers[].resources.claims": REFUSED,  # DynamicResources
    "spec.initContainers[].resources.claims": REFUSED,  # DynamicResources
    # v1.35's alpha gang scheduling (GangScheduling): v1.36 names the pod's gang spec.schedulingGroup
    "spec.workloadRef": REFUSED,
    # no default plugin reads these (admission turns priorityClassName into priority and
    # runtimeClassName into overhead and a node selector before the scheduler sees the pod)
    "spec.containers": NOT_READ,  # beyond the container fields above
    "spec.initContainers": NOT_READ,
    "spec.ephemeralContainers": NOT_READ,
    "spec.restartPolicy": NOT_READ,
    "spec.terminationGracePeriodSeconds": NOT_READ,
    "spec.activeDeadlineSeconds": NOT_READ,
    "spec.dnsPolicy": NOT_READ,
    "spec.dnsConfig": NOT_READ,
    "spec.serviceAccountName": NOT_READ,
    "spec.serviceAccount": NOT_READ,
    "spec.automountServiceAccountToken": NOT_READ,
    "spec.hostPID": NOT_READ,
    "spec.hostIPC": NOT_READ,
    "spec.shareProcessNamespace": NOT_READ,
    "spec.securityContext": NOT_READ,
    "spec.imagePullSecrets": NOT_READ,
    "spec.hostname": NOT_READ,
    "spec.hostnameOverride": NOT_READ,
    "spec.subdomain": NOT_READ,
    "spec.setHostnameAsFQDN": NOT_READ,
    "spec.hostAliases": NOT_READ,
    "spec.priorityClassName": NOT_READ,
    "spec.readinessGates": NOT_READ,
    "spec.runtimeClassName": NOT_READ,
    "spec.enableServiceLinks": NOT_READ,
    "spec.os": NOT_READ,
    "spec.schedulingGroup": "Coscheduling (the pod's gang; job identity)",
}

REFUSED_PATHS: Final = tuple(path for path, handler in FIELDS.items() if handler == REFUSED)


def refusal(path: str) -> str:
    return f"pysched does not support {path}; use the default scheduler"


def _steps(path: str) -> tuple[tuple[str, bool], ...]:
    """`spec.containers[].resources` -> (("spec", False), ("containers", True), ("resources", False))."""
    return tuple((step.removesuffix("[]"), step.endswith("[]")) for step in path.split("."))


Check = Callable[[object], bool]


def _non_empty(value: object) -> bool:
    return value not in ("", [], {})


def _compile(steps: tuple[tuple[str, bool], ...]) -> Check:
    """A check that some value at `steps` below a node is non-empty (lists stepped into where
    marked; a wrong shape on the way sets nothing), built once: it runs for every pod, so it makes
    no garbage and walks no table."""
    if not steps:
        return _non_empty
    (name, many), below = steps[0], _compile(steps[1:])

    def check(node: object) -> bool:
        if type(node) is not dict and not isinstance(node, Mapping):  # API objects are dicts: no ABC check
            return False
        value = node.get(name)
        if value is None:
            return False
        if not many:
            return below(value)
        if type(value) is not list:
            return False
        for item in value:  # noqa: SIM110 (no generator per pod)
            if below(item):
                return True
        return False

    return check


# (path, its field under spec, the check of what lies below spec)
_COMPILED: Final = tuple((path, _steps(path)[1][0], _compile(_steps(path)[1:])) for path in REFUSED_PATHS)


def refused_fields(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The refused paths the pod sets, in table order."""
    spec = pod.get("spec")
    if type(spec) is not dict and not isinstance(spec, Mapping):
        return ()
    found: tuple[str, ...] = ()
    for path, root, check in _COMPILED:
        if root in spec and check(spec):
            found = (*found, path)
    return found
