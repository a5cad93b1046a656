"""The ClusterBackend protocol: everything the scheduler asks of a cluster.

A live implementation (kube-apiserver) and a simulated one (in memory, virtual clock) serve the
same scheduler loop; the scheduler never knows which one it talks to.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pysched.api.annotations import ProgressReport
from pysched.api.containers import ContainerResize
from pysched.api.disruption import DisruptionBudget
from pysched.api.ids import JobKey, NodeName
from pysched.api.jobs import JobRef
from pysched.api.labels import selector_matches
from pysched.api.objects import NodeInfo, PodInfo
from pysched.api.volumes import PersistentVolume, PersistentVolumeClaim, Storage
from pysched.framework.events import EventKind
from pysched.framework.status import Status
from pysched.framework.storage import StorageView


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

    def on_storage_changed(self, kind: EventKind, old: Storage | None, new: Storage | None) -> None:
        """A PVC, PV, StorageClass or CSINode was added (old None), updated or deleted (new None);
        the backend's `storage` view already holds the change."""
        ...

    def on_job_minimum_changed(self, job: JobKey) -> None:
        """The object holding a job's minimum (a PodGroup, an Indexed Job) was added, changed or
        deleted; `job_minimum` already answers with the change."""
        ...


FAILED_SCHEDULING = "FailedScheduling"  # the event reason of a pod that could not be scheduled


@dataclass(frozen=True, slots=True)
class PodCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""

    def shown_in(self, entry: Mapping[str, Any] | None) -> bool:
        """A pod's `status.conditions` entry already says this (such a write is skipped, as
        kube-scheduler skips it)."""
        return (
            entry is not None
            and entry.get("status") == self.status
            and entry.get("reason", "") == self.reason
            and entry.get("message", "") == self.message
        )


class ClusterBackend(Protocol):
    async def start(self, listener: ClusterListener) -> None:
        """List everything, deliver it to the listener, then keep delivering changes."""
        ...

    async def stop(self) -> None: ...

    async def bind(self, pod: PodInfo, node: NodeName) -> Status:
        """Bind through the binding subresource; a conflict is a rejection, not an exception."""
        ...

    async def patch_pod_conditions(self, pod: PodInfo, *conditions: PodCondition) -> Status:
        """Write the conditions through `pods/status`, in one request (nothing to write, as the
        pod shows them already, is a success; a pod gone is Unschedulable)."""
        ...

    async def resize(self, pod: PodInfo, containers: Mapping[str, ContainerResize]) -> Status:
        """Request an in-place resize (`pods/resize`): container name -> its new requests and limits."""
        ...

    async def emit_event(self, pod: PodInfo, event_type: str, reason: str, note: str) -> None:
        """An events.k8s.io/v1 Event regarding the pod (type Normal or Warning)."""
        ...

    async def delete_preempted(self, victim: PodInfo) -> Status:
        """Delete a pod the scheduler preempted (the only deletion the scheduler makes); a pod
        already gone is a success."""
        ...

    async def set_nominated_node(self, pod: PodInfo, node: NodeName | None) -> Status:
        """Write `status.nominatedNodeName` (None clears it)."""
        ...

    def disruption_budgets(self) -> Sequence[DisruptionBudget]:
        """The PodDisruptionBudgets as last seen (synchronous: preemption reads them in its cycle)."""
        ...

    @property
    def storage(self) -> StorageView:
        """PVCs, PVs, StorageClasses and CSINodes as last seen (kept in memory, like namespaces)."""
        ...

    async def bind_volume(self, pv: PersistentVolume, claim: PersistentVolumeClaim) -> Status:
        """Point the PV's claimRef at the claim (the binder's static binding; the PV controller
        completes the claim's side)."""
        ...

    async def select_node(self, claim: PersistentVolumeClaim, node: NodeName) -> Status:
        """Annotate the claim with the node chosen for it (`volume.kubernetes.io/selected-node`):
        the provisioner creates its volume there."""
        ...

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """The namespace's labels as last seen (None: no such namespace known).

        Synchronous on purpose: queue ordering asks it (DeadlineLaxity's `deadlineNamespaces`), so
        backends keep namespaces in memory (the live one through a namespace informer).
        """
        ...

    def namespace_names(self) -> Collection[str]:
        """Every namespace known (with `namespace_labels`), for the namespaces a namespaceSelector
        of an inter-pod affinity term selects."""

    def service_selectors(self, namespace: str) -> Sequence[Mapping[str, str]]:
        """The `spec.selector` of each Service in the namespace that has one, as last seen.

        Synchronous like `namespace_labels`: PodTopologySpread's default constraints select the
        pods of the Services and controllers a pod belongs to, so backends keep these in memory."""
        ...

    def job_minimum(self, job: JobRef) -> int | None:
        """The minimum number of members of a job whose minimum another object holds (a
        PodGroup's, an Indexed batch Job's parallelism), as last seen; None when unknown.

        Synchronous like `namespace_labels`: the job book asks it when a member is observed."""
        ...

    def job_failed(self, job: JobRef) -> bool:
        """The job's owner gave up (a batch/v1 Job with its `Failed` condition: backoff limit or
        deadline reached), as last seen: no pod replaces a failed one any more."""
        ...

    def job_completions_left(self, job: JobRef) -> int | None:
        """For a batch/v1 Job that runs in waves (more completions than pods at once), how many
        of its completions are still to be made, as last seen (0: it completed); None for any
        other job, whose pods that end together end it."""
        ...

    def progress(self, pod: PodInfo) -> ProgressReport | None:
        """The pod's `pysched.io/progress` as last seen (None: not written). The live cluster reads
        the annotation; the simulated one keeps what its simulated training writes beside the pod,
        as numbers.

        Synchronous like `namespace_labels`: the reconcile plugins read it for every job they look at."""
        ...

    async def scale_job(self, job: JobRef, workers: int) -> Status:
        """Set an elastic job's worker count through its owner (an Indexed batch/v1 Job:
        `parallelism` and `completions` together); the owner's controller adds or removes pods.
        An owner that cannot be scaled (another kind, immutable, forbidden) is a rejection whose
        message says why."""
        ...

    def controller_selector(self, namespace: str, kind: str, name: str) -> Mapping[str, Any] | None:
        """The label selector (`matchLabels` / `matchExpressions`) of a ReplicationController (its
        map selector as matchLabels), ReplicaSet or StatefulSet, as last seen; None when unknown."""
        ...


def namespace_selected(cluster: ClusterBackend, selector: Mapping[str, Any] | None, namespace: str) -> bool:
    """Whether a profile's namespace selector (`deadlineNamespaces`) admits `namespace`: always
    without one, never for a namespace the backend does not know."""
    if selector is None:
        return True
    labels = cluster.namespace_labels(namespace)
    return labels is not None and selector_matches(selector, labels)
