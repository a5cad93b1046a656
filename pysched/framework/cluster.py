"""The ClusterBackend protocol: everything the scheduler asks of a cluster.

A live implementation (kube-apiserver) and a simulated one (in memory, virtual clock) serve the
same scheduler loop; the scheduler never knows which one it talks to (DESIGN §4 rule 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pysched.api.ids import NodeName
from pysched.api.objects import NodeInfo, PodInfo
from pysched.api.resources import CPU, format_resource, to_scheduler_units
from pysched.framework.status import Status


class ClusterListener(Protocol):
    """Receives the informer stream: the cache and queue sit behind it."""

    def on_node_added(self, node: NodeInfo) -> None: ...
    def on_node_updated(self, old: NodeInfo, new: NodeInfo) -> None: ...
    def on_node_deleted(self, node: NodeInfo) -> None: ...
    def on_pod_added(self, pod: PodInfo) -> None: ...
    def on_pod_updated(self, old: PodInfo, new: PodInfo) -> None: ...
    def on_pod_deleted(self, pod: PodInfo) -> None: ...
    def on_invalid_pod(self, raw: Mapping[str, object], problem: str) -> None:
        """A pod of ours that cannot be read (e.g. a malformed quantity)."""
        ...


@dataclass(frozen=True, slots=True)
class PodCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class ContainerResize:
    """The new resources of one container in an in-place resize (`pods/{name}/resize`).

    Limits travel with requests: a resize that changed requests under a fixed limit could change
    the pod's QoS class, which the apiserver refuses (a Guaranteed pod must keep requests ==
    limits). Resources absent from `limits` keep the limit the container already has (or none).
    """

    requests: Mapping[str, str]
    limits: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, dict[str, str]]:
        """The container's `resources` in the API's shape (an empty `limits` is left out)."""
        out = {"requests": dict(self.requests)}
        if self.limits:
            out["limits"] = dict(self.limits)
        return out


def cpu_resize(pod: PodInfo, container: str, cpu_milli: int) -> ContainerResize:
    """A resize of one container's CPU request to `cpu_milli` that keeps the QoS class (memory is
    not touched); see `container_resize`."""
    return container_resize(pod, container, {CPU: cpu_milli})


def container_resize(pod: PodInfo, container: str, requests: Mapping[str, int]) -> ContainerResize:
    """A resize of one container's requests (scheduler units: millicores, bytes) that keeps the
    QoS class.

    Each resource's limit scales by the same ratio as its request (rounded up, so the limit never
    drops below the request), and a Guaranteed container's limit simply equals the new request.
    No limit stays no limit; resources not named are not touched.
    """
    resources: Mapping[str, Any] = {}
    for c in pod.raw.get("spec", {}).get("containers") or ():
        if c.get("name", "") == container:
            resources = c.get("resources") or {}
            break
    old_requests = resources.get("requests") or {}
    old_limits = resources.get("limits") or {}
    new_requests: dict[str, str] = {}
    new_limits: dict[str, str] = {}
    for name, value in requests.items():
        new_requests[name] = format_resource(name, value)
        limit = old_limits.get(name)
        if not isinstance(limit, str | int | float):
            continue
        limit_u = to_scheduler_units(name, limit)
        request = old_requests.get(name)
        # The API defaults a missing request to the limit: such a container is Guaranteed for it.
        request_u = to_scheduler_units(name, request) if isinstance(request, str | int | float) else limit_u
        if request_u == limit_u:
            new_limit = value
        elif request_u <= 0:  # no ratio to keep: only make room for the new request
            new_limit = max(limit_u, value)
        else:
            new_limit = -(-limit_u * value // request_u)
        new_limits[name] = format_resource(name, new_limit)
    return ContainerResize(new_requests, new_limits)


class ClusterBackend(Protocol):
    async def start(self, listener: ClusterListener) -> None:
        """List everything, deliver it to the listener, then keep delivering changes."""
        ...

    async def stop(self) -> None: ...

    async def bind(self, pod: PodInfo, node: NodeName) -> Status:
        """Bind through the binding subresource; a conflict is a rejection, not an exception."""
        ...

    async def patch_pod_condition(self, pod: PodInfo, condition: PodCondition) -> None: ...

    async def resize(self, pod: PodInfo, containers: Mapping[str, ContainerResize]) -> Status:
        """Request an in-place resize (`pods/resize`): container name -> its new requests and limits."""
        ...

    async def emit_event(self, pod: PodInfo, event_type: str, reason: str, note: str) -> None:
        """An events.k8s.io/v1 Event regarding the pod (type Normal or Warning)."""
        ...

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """The namespace's labels as last seen (None: no such namespace known).

        Synchronous on purpose: queue ordering asks it (DeadlineLaxity's `deadlineNamespaces`), so
        backends keep namespaces in memory (the live one through a namespace informer).
        """
        ...
