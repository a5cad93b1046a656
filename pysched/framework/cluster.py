"""The ClusterBackend protocol: everything the scheduler asks of a cluster.

A live implementation (kube-apiserver) and a simulated one (in memory, virtual clock) serve the
same scheduler loop; the scheduler never knows which one it talks to (DESIGN §4 rule 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from pysched.framework.status import Status
from pysched.ids import NodeName
from pysched.objects import NodeInfo, PodInfo


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


class ClusterBackend(Protocol):
    async def start(self, listener: ClusterListener) -> None:
        """List everything, deliver it to the listener, then keep delivering changes."""
        ...

    async def stop(self) -> None: ...

    async def bind(self, pod: PodInfo, node: NodeName) -> Status:
        """Bind through the binding subresource; a conflict is a rejection, not an exception."""
        ...

    async def patch_pod_condition(self, pod: PodInfo, condition: PodCondition) -> None: ...

    async def resize(self, pod: PodInfo, container_requests: Mapping[str, Mapping[str, str]]) -> Status:
        """Request an in-place resize (`pods/resize`): container name -> resource -> quantity."""
        ...

    async def emit_event(self, pod: PodInfo, event_type: str, reason: str, note: str) -> None:
        """An events.k8s.io/v1 Event regarding the pod (type Normal or Warning)."""
        ...
