"""Node declared features, as kube-scheduler v1.36's NodeDeclaredFeatures reads them: what a
kubelet declares it supports (`status.declaredFeatures`) and what a pod's spec needs of its node
(the inference of k8s.io/component-helpers' nodedeclaredfeatures for scheduling). A kubelet
lacking such a feature refuses the pod at admission, so the scheduler must not send it there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

RESTART_ALL_CONTAINERS: Final = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK: Final = "UserNamespacesHostNetworkSupport"
RESTART_ALL_CONTAINERS_ACTION: Final = "RestartAllContainers"

MAX_DECLARED_FEATURES: Final = 256  # names read per node (a kubelet declares a handful)
MAX_FEATURE_NAME_CHARS: Final = 256

NO_NODE_FEATURES: Final[frozenset[str]] = frozenset()


def declared_features(status: Mapping[str, Any]) -> frozenset[str]:
    """`status.declaredFeatures`, bounded; an entry that is not a name is skipped, not the node."""
    names = status.get("declaredFeatures")
    if not isinstance(names, list) or not names:
        return NO_NODE_FEATURES
    return frozenset(
        n for n in names[:MAX_DECLARED_FEATURES] if isinstance(n, str) and 0 < len(n) <= MAX_FEATURE_NAME_CHARS
    )


def _restarts_all(containers: object) -> bool:
    if not isinstance(containers, list):
        return False
    for container in containers:
        rules = container.get("restartPolicyRules") if isinstance(container, Mapping) else None
        if isinstance(rules, list) and any(
            isinstance(rule, Mapping) and rule.get("action") == RESTART_ALL_CONTAINERS_ACTION for rule in rules
        ):
            return True
    return False


def required_features(spec: Mapping[str, Any]) -> frozenset[str]:
    """The features the pod's node must declare: a container or init container whose restart
    rule restarts all containers; host network inside a user namespace (`hostUsers: false`).
    Both fields are immutable, so a pod's answer never changes."""
    needed: list[str] = []
    if _restarts_all(spec.get("containers")) or _restarts_all(spec.get("initContainers")):
        needed.append(RESTART_ALL_CONTAINERS)
    if spec.get("hostNetwork") is True and spec.get("hostUsers") is False:
        needed.append(USER_NAMESPACES_HOST_NETWORK)
    return frozenset(needed) if needed else NO_NODE_FEATURES
