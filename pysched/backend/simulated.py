"""An in-memory cluster on a virtual clock, driving the real scheduler.

Binds apply at once and are delivered back to the listener as the informer would deliver
them; events and conditions are recorded for inspection. It is a product feature (trace
replay, perf on large fake clusters), not a mock: it implements the same ClusterBackend
protocol the live backend does.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from pysched.api.annotations import PROGRESS, ProgressReport
from pysched.api.containers import ContainerResize
from pysched.api.disruption import DisruptionBudget, budget_from_dict
from pysched.api.ids import JobKey, NodeName, PodKey, PodUID
from pysched.api.jobs import JobRef, JobSource
from pysched.api.objects import MALFORMED, NodeInfo, PodInfo, node_from_dict, pod_from_dict, read_pod
from pysched.api.times import format_rfc3339
from pysched.api.volumes import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    NO_PROVISIONER,
    STORAGE,
    PersistentVolume,
    PersistentVolumeClaim,
    Storage,
    csi_driver_from_dict,
    csi_node_from_dict,
    csi_storage_capacity_from_dict,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
)
from pysched.framework.clock import Clock
from pysched.framework.cluster import ClusterListener, PodCondition
from pysched.framework.status import SUCCESS, Status, error, unschedulable
from pysched.framework.storage import StorageView, storage_kind

log = structlog.get_logger("pysched.sim")


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    time: float
    pod: PodKey
    type: str
    reason: str
    note: str


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set on every namespace by the apiserver

BindHook = Callable[[PodInfo, NodeName], None]
ResizeHook = Callable[[PodInfo, PodInfo], None]  # (before, after) of an accepted resize
DeleteHook = Callable[[PodInfo], None]
ScaleHook = Callable[[JobRef, int], None]  # (job, workers) of an accepted scale: the owner's controller


class SimulatedCluster:
    def __init__(self, clock: Clock, *, record_events: bool = True) -> None:
        self.clock = clock
        self.nodes: dict[NodeName, NodeInfo] = {}
        self.pods: dict[PodKey, PodInfo] = {}
        self.events: list[RecordedEvent] = []
        self.conditions: dict[PodKey, dict[str, PodCondition]] = {}
        self.bind_hooks: list[BindHook] = []
        self.resize_hooks: list[ResizeHook] = []
        self.delete_hooks: list[DeleteHook] = []
        self.scale_hooks: list[ScaleHook] = []  # play the owner's controller: add or remove members
        self.scales: list[tuple[JobKey, int]] = []  # accepted scales, in order
        # Labels of namespaces created with `set_namespace`; a namespace a pod uses is added with
        # none, and has only the label the apiserver gives every namespace (kubernetes.io/metadata.name).
        self.namespaces: dict[str, dict[str, str]] = {}
        # Controlling owners' creation times (owner uid -> epoch s), as the live backend's Job
        # informer knows them: deadline durations of their pods count from these.
        self.owners: dict[str, float] = {}
        # Service selectors (namespace -> service name -> selector) and ReplicationController /
        # ReplicaSet / StatefulSet label selectors ((namespace, kind, name) -> selector), as the
        # live backend's informers know them: PodTopologySpread's default constraints read them.
        self.services: dict[str, dict[str, dict[str, str]]] = {}
        self.controllers: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        self.job_minimums: dict[JobKey, int] = {}  # minimums other objects hold (set_job_minimum)
        self.failed_jobs: set[JobKey] = set()  # owners that gave up (a batch Job past its backoff limit)
        # Batch Jobs that run in waves: their completions still to make (`job_completions_left`).
        self.completions_left: dict[JobKey, int] = {}
        self._awaiting_owner: dict[str, set[PodKey]] = {}  # owner uid -> its pods created before it
        self.binds = 0
        self.budgets: dict[str, DisruptionBudget] = {}  # "ns/name" -> PodDisruptionBudget
        self.preempted: list[PodKey] = []  # pods deleted by the scheduler's preemption, in order
        self.nominations: list[tuple[PodKey, NodeName | None]] = []  # nominatedNodeName writes, in order
        self._storage = StorageView()
        # Emulate kube-controller-manager's PV controller: a PV pointed at a claim binds it, a
        # claim given a selected node gets a provisioned PV. Off: claims stay as the binder left them.
        self.pv_controller = True
        self._record_events = record_events
        self._listener: ClusterListener | None = None
        self._versions = itertools.count(1)
        # What simulated training wrote as each pod's progress, by pod uid (`write_progress`).
        self._progress: dict[PodKey, tuple[PodUID, ProgressReport]] = {}

    # ----- ClusterBackend
    async def start(self, listener: ClusterListener) -> None:
        self._listener = listener
        for node in self.nodes.values():
            listener.on_node_added(node)
        for pod in self.pods.values():
            listener.on_pod_added(pod)

    async def stop(self) -> None:
        self._listener = None

    async def bind(self, pod: PodInfo, node: NodeName) -> Status:
        current = self.pods.get(pod.key)
        if current is None or current.uid != pod.uid:
            return unschedulable(f"pod {pod.key} no longer exists")
        if current.node_name is not None:
            return error(f"pod {pod.key} is already assigned to node {current.node_name}")
        if node not in self.nodes:
            return unschedulable(f"node {node} not found")
        if (current.raw.get("spec") or {}).get("schedulingGates"):  # the API server refuses it too
            return error(f"pod {pod.name} has non-empty .spec.schedulingGates")
        raw = current.raw
        if (raw.get("status") or {}).get("nominatedNodeName"):  # the apiserver clears it on binding
            raw = {**raw, "status": {k: v for k, v in raw["status"].items() if k != "nominatedNodeName"}}
        bound = current.evolve(node_name=node, raw=raw, resource_version=str(next(self._versions)))
        self.pods[pod.key] = bound
        self.binds += 1
        if self._listener is not None:
            self._listener.on_pod_updated(current, bound)
        for hook in self.bind_hooks:
            hook(bound, node)
        return SUCCESS

    async def patch_pod_conditions(self, pod: PodInfo, *conditions: PodCondition) -> Status:
        """Kept apart (`conditions`) and in the pod's status. A pending pod's are delivered as an
        update, as the informer delivers conditions written through `pods/status` (the queue
        order reads them: a demotion); a bound pod's are not, as nothing of a running simulation
        reads them back (a new leader would) and every rewrite would cost an update. A condition
        that says what the pod already shows is not written, as the live cluster skips it."""
        current = self.pods.get(pod.key)
        if current is None:
            return unschedulable(f"pod {pod.key} no longer exists")
        status = dict(current.raw.get("status") or {})
        shown = {c.get("type"): c for c in status.get("conditions") or ()}
        conditions = tuple(c for c in conditions if not c.shown_in(shown.get(c.type)))
        if not conditions:
            return SUCCESS
        kept = self.conditions.setdefault(pod.key, {})
        types = {c.type for c in conditions}
        entries = [c for c in status.get("conditions") or () if c.get("type") not in types]
        for condition in conditions:
            kept[condition.type] = condition
            entry = {"type": condition.type, "status": condition.status, "reason": condition.reason}
            entry["message"] = condition.message
            entries.append(entry)
        status["conditions"] = entries
        updated = current.evolve(raw={**current.raw, "status": status})
        self.pods[pod.key] = updated
        if self._listener is not None and current.node_name is None:
            self._listener.on_pod_updated(current, updated)
        return SUCCESS

    async def resize(self, pod: PodInfo, containers: Mapping[str, ContainerResize]) -> Status:
        current = self.pods.get(pod.key)
        if current is None or current.uid != pod.uid:  # gone, or recreated under its name since
            return unschedulable(f"pod {pod.key} no longer exists")
        raw: dict[str, Any] = copy.deepcopy(dict(current.raw))
        for container in raw.get("spec", {}).get("containers", []):
            wanted = containers.get(container.get("name", ""))
            if wanted is not None:
                resources = container.setdefault("resources", {})
                resources.setdefault("requests", {}).update(wanted.requests)
                if wanted.limits:
                    resources.setdefault("limits", {}).update(wanted.limits)
        updated = self._replace(current, raw)
        for hook in self.resize_hooks:
            hook(current, updated)
        return SUCCESS

    async def emit_event(self, pod: PodInfo, event_type: str, reason: str, note: str) -> None:
        if self._record_events:
            self.events.append(RecordedEvent(self.clock.now(), pod.key, event_type, reason, note))

    async def delete_preempted(self, victim: PodInfo) -> Status:
        current = self.pods.get(victim.key)
        if current is None or current.uid != victim.uid:
            return SUCCESS  # gone already: nothing to delete
        self.preempted.append(victim.key)
        self.delete_pod(victim.key)
        return SUCCESS

    async def set_nominated_node(self, pod: PodInfo, node: NodeName | None) -> Status:
        current = self.pods.get(pod.key)
        if current is None or current.uid != pod.uid:
            return unschedulable(f"pod {pod.key} no longer exists")
        self.nominations.append((pod.key, node))
        status = {**(current.raw.get("status") or {})}
        if node is None:
            status.pop("nominatedNodeName", None)
        else:
            status["nominatedNodeName"] = node
        updated = current.evolve(raw={**current.raw, "status": status}, resource_version=str(next(self._versions)))
        self.pods[pod.key] = updated
        if self._listener is not None:
            self._listener.on_pod_updated(current, updated)
        return SUCCESS

    def disruption_budgets(self) -> Sequence[DisruptionBudget]:
        return tuple(self.budgets.values())

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return {**self.namespaces.get(namespace, {}), NAMESPACE_NAME_LABEL: namespace}

    @property
    def storage(self) -> StorageView:
        return self._storage

    async def bind_volume(self, pv: PersistentVolume, claim: PersistentVolumeClaim) -> Status:
        current = self._storage.pv(pv.name)
        if current is None:
            return error(f'persistentvolume "{pv.name}" not found')
        if current.claim_ref is not None and not current.bound_to(claim):
            return error(f"persistentvolume {pv.name!r} is already bound to another claim")
        raw = copy.deepcopy(dict(current.raw))
        raw.setdefault("spec", {})["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": claim.namespace,
            "name": claim.name,
            "uid": claim.uid,
        }
        raw.setdefault("metadata", {}).setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
        bound = self.add_pv(raw)
        if self.pv_controller:
            self._complete_binding(bound, claim)
        return SUCCESS

    async def select_node(self, claim: PersistentVolumeClaim, node: NodeName) -> Status:
        current = self._storage.pvc(claim.namespace, claim.name)
        if current is None:
            return error(f'persistentvolumeclaim "{claim.name}" not found')
        raw = copy.deepcopy(dict(current.raw))
        raw.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = node
        updated = self.add_pvc(raw)
        storage_class = self._storage.storage_class(updated.storage_class)
        if self.pv_controller and storage_class is not None and storage_class.provisioner != NO_PROVISIONER:
            hostname = self.nodes[node].labels.get("kubernetes.io/hostname", node) if node in self.nodes else node
            name = f"pvc-{updated.uid or updated.name}"
            pv = self.add_pv(
                {
                    "metadata": {"name": name},
                    "spec": {
                        "storageClassName": updated.storage_class,
                        "capacity": {STORAGE: str(updated.request)},
                        "accessModes": list(updated.access_modes),
                        "volumeMode": updated.volume_mode,
                        "claimRef": {"namespace": updated.namespace, "name": updated.name, "uid": updated.uid},
                        "csi": {"driver": storage_class.provisioner, "volumeHandle": name},
                        "nodeAffinity": {
                            "required": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [hostname]}
                                        ]
                                    }
                                ]
                            }
                        },
                    },
                    "status": {"phase": "Bound"},
                }
            )
            self._complete_binding(pv, updated)
        return SUCCESS

    def _complete_binding(self, pv: PersistentVolume, claim: PersistentVolumeClaim) -> None:
        """What the PV controller does once a PV's claimRef names a claim: both sides Bound."""
        current = self._storage.pvc(claim.namespace, claim.name)
        if current is None:
            return
        raw = copy.deepcopy(dict(current.raw))
        raw.setdefault("spec", {})["volumeName"] = pv.name
        annotations = raw.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[ANN_BIND_COMPLETED] = "yes"
        annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
        raw.setdefault("status", {})["phase"] = "Bound"
        self.add_pvc(raw)
        pv_raw = copy.deepcopy(dict(pv.raw))
        pv_raw.setdefault("status", {})["phase"] = "Bound"
        self.add_pv(pv_raw)

    # ----- storage objects (the simulated world's PVCs, PVs, StorageClasses, CSINodes)
    def _store(self, obj: Storage) -> None:
        old = self._storage.upsert(obj)
        if self._listener is not None:
            self._listener.on_storage_changed(storage_kind(obj), old, obj)

    def _versioned(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(raw)
        out["metadata"] = {**(raw.get("metadata") or {}), "resourceVersion": str(next(self._versions))}
        return out

    def add_pvc(self, raw: Mapping[str, Any]) -> PersistentVolumeClaim:
        claim = pvc_from_dict(self._versioned(raw))
        self._store(claim)
        return claim

    def add_pv(self, raw: Mapping[str, Any]) -> PersistentVolume:
        pv = pv_from_dict(self._versioned(raw))
        self._store(pv)
        return pv

    def add_storage_class(self, raw: Mapping[str, Any]) -> None:
        self._store(storage_class_from_dict(raw))

    def add_csi_node(self, raw: Mapping[str, Any]) -> None:
        self._store(csi_node_from_dict(raw))

    def add_csi_driver(self, raw: Mapping[str, Any]) -> None:
        self._store(csi_driver_from_dict(raw))

    def add_storage_capacity(self, raw: Mapping[str, Any]) -> None:
        """A CSIStorageCapacity, as a CSI driver's external-provisioner publishes it."""
        self._store(csi_storage_capacity_from_dict(self._versioned(raw)))

    def delete_storage(self, obj: Storage) -> None:
        old = self._storage.remove(obj)
        if old is not None and self._listener is not None:
            self._listener.on_storage_changed(storage_kind(obj), old, None)

    def namespace_names(self) -> Collection[str]:
        return self.namespaces.keys()

    def service_selectors(self, namespace: str) -> Sequence[Mapping[str, str]]:
        return list(self.services.get(namespace, {}).values())

    def controller_selector(self, namespace: str, kind: str, name: str) -> Mapping[str, Any] | None:
        return self.controllers.get((namespace, kind, name))

    def job_minimum(self, job: JobRef) -> int | None:
        return self.job_minimums.get(job.key)

    def job_failed(self, job: JobRef) -> bool:
        return job.key in self.failed_jobs

    def job_completions_left(self, job: JobRef) -> int | None:
        return self.completions_left.get(job.key)

    async def scale_job(self, job: JobRef, workers: int) -> Status:
        """An Indexed Job's parallelism (its job minimum here) set to `workers`; the scale hooks
        then add or remove its pods as the Job controller would."""
        if job.source is not JobSource.BATCH or job.key not in self.job_minimums:
            return unschedulable(f"{job.title} is not an Indexed Job this cluster knows: it cannot be scaled")
        if workers < 1:
            return error(f"{job.title}: cannot scale to {workers} workers")
        self.scales.append((job.key, workers))
        self.set_job_minimum(job.key, workers)
        for hook in self.scale_hooks:
            hook(job, workers)
        return SUCCESS

    def set_job_minimum(self, job: JobKey, minimum: int | None) -> None:
        """The minimum another object holds for a job (a PodGroup's, an Indexed Job's), or none,
        as its informer would deliver it."""
        if minimum is None:
            self.job_minimums.pop(job, None)
        else:
            self.job_minimums[job] = minimum
        if self._listener is not None:
            self._listener.on_job_minimum_changed(job)

    # ----- the simulated world changes
    def set_service(self, namespace: str, name: str, selector: Mapping[str, str] | None) -> None:
        """A Service and its selector (None or {}: a Service without one, which selects no pod)."""
        services = self.services.setdefault(namespace, {})
        if selector:
            services[name] = dict(selector)
        else:
            services.pop(name, None)

    def set_controller(self, namespace: str, kind: str, name: str, selector: Mapping[str, Any] | None) -> None:
        """A ReplicationController (selector as matchLabels), ReplicaSet or StatefulSet; None removes it."""
        if selector is None:
            self.controllers.pop((namespace, kind, name), None)
        else:
            self.controllers[(namespace, kind, name)] = selector

    def set_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        self.namespaces[name] = dict(labels)

    def add_budget(self, budget: DisruptionBudget | Mapping[str, Any]) -> DisruptionBudget:
        """Create or replace a PodDisruptionBudget (an API-shaped dict or a parsed one)."""
        parsed = budget if isinstance(budget, DisruptionBudget) else budget_from_dict(budget)
        self.budgets[f"{parsed.namespace}/{parsed.name}"] = parsed
        return parsed

    def add_owner(self, uid: str, created: float) -> None:
        """Register a controlling owner (a Job) and its creation time. Pods naming it as their
        controller get it as `owner_created`; pods created before it are delivered again as updates,
        as the live backend does when its Job informer learns a Job after the Job's pods."""
        self.owners[uid] = created
        for key in self._awaiting_owner.pop(uid, ()):
            current = self.pods.get(key)
            if current is None or current.controller is None or current.controller.uid != uid:
                continue
            updated = current.evolve(owner_created=created, resource_version=str(next(self._versions)))
            self.pods[key] = updated
            if self._listener is not None:
                self._listener.on_pod_updated(current, updated)

    def _replace(self, current: PodInfo, raw: Mapping[str, Any]) -> PodInfo:
        updated = dataclasses.replace(
            pod_from_dict(raw), node_name=current.node_name, phase=current.phase, owner_created=current.owner_created
        )
        self.pods[current.key] = updated
        if self._listener is not None:
            self._listener.on_pod_updated(current, updated)
        return updated

    def add_node(self, node: NodeInfo | Mapping[str, Any]) -> NodeInfo:
        info = node if isinstance(node, NodeInfo) else node_from_dict(node)
        old = self.nodes.get(info.name)
        self.nodes[info.name] = info
        if self._listener is not None:
            if old is None:
                self._listener.on_node_added(info)
            else:
                self._listener.on_node_updated(old, info)
        return info

    def delete_node(self, name: NodeName) -> None:
        node = self.nodes.pop(name)
        if self._listener is not None:
            self._listener.on_node_deleted(node)

    def create_pod(self, raw: Mapping[str, Any]) -> PodInfo | None:
        """Create a pod as the API would; None (and a listener warning) when it cannot be read."""
        try:
            pod, problem = read_pod(raw, self.owners)
            if problem is not None:
                log.warning("placed pod read without its constraints", pod=pod.key, problem=problem)
        except MALFORMED as err:
            if self._listener is not None:
                self._listener.on_invalid_pod(raw, str(err))
            return None
        if pod.key in self.pods:
            raise ValueError(f"pod {pod.key} already exists")
        self.pods[pod.key] = pod
        self.namespaces.setdefault(pod.namespace, {})  # a pod's namespace exists from then on
        if pod.controller is not None and pod.owner_created is None:
            self._awaiting_owner.setdefault(pod.controller.uid, set()).add(pod.key)
        if self._listener is not None:
            self._listener.on_pod_added(pod)
        return pod

    def write_progress(self, key: PodKey, report: ProgressReport) -> None:
        """The training helper's `pysched.io/progress` write, kept beside the pod (`progress`
        reads it): as a new pod object it would be an informer update for every running job every
        simulated minute, and nothing reacts to a bound pod's progress but the plugins reading it."""
        self._progress[key] = (self.pods[key].uid, report)

    def progress(self, pod: PodInfo) -> ProgressReport | None:
        written = self._progress.get(pod.key)
        if written is not None and written[0] == pod.uid:
            return written[1]
        value = pod.annotations.get(PROGRESS)
        return None if value is None else ProgressReport.of_text(value)

    def set_annotations(self, key: PodKey, annotations: Mapping[str, str | None]) -> PodInfo:
        """Patch annotations as a client would, a merge patch (None removes one; a progress
        annotation replaces `write_progress`'s)."""
        if PROGRESS in annotations:
            self._progress.pop(key, None)
        current = self.pods[key]
        merged = {k: v for k, v in {**current.annotations, **annotations}.items() if v is not None}
        meta = {**current.raw.get("metadata", {}), "annotations": merged}
        updated = current.evolve(
            annotations=merged, raw={**current.raw, "metadata": meta}, resource_version=str(next(self._versions))
        )
        self.pods[key] = updated
        if self._listener is not None:
            self._listener.on_pod_updated(current, updated)
        return updated

    def set_labels(self, key: PodKey, labels: Mapping[str, str]) -> PodInfo:
        """Replace the pod's labels as a client would."""
        current = self.pods[key]
        meta = {**current.raw.get("metadata", {}), "labels": dict(labels)}
        return self._replace(current, {**current.raw, "metadata": meta})

    def set_scheduling_gates(self, key: PodKey, names: Sequence[str]) -> PodInfo:
        """Replace `spec.schedulingGates` as their controller would (it may only remove gates)."""
        current = self.pods[key]
        spec = {**current.raw.get("spec", {}), "schedulingGates": [{"name": name} for name in names]}
        return self._replace(current, {**current.raw, "spec": spec})

    def set_status(self, key: PodKey, status: Mapping[str, Any]) -> PodInfo:
        """Replace the pod's `status` as a kubelet would write it (container statuses with the
        actuated resources, `PodResizePending`...): what the simulated kubelet does not model."""
        current = self.pods[key]
        return self._replace(current, {**current.raw, "status": dict(status)})

    def begin_deletion(self, key: PodKey) -> PodInfo:
        """A graceful deletion under way (`metadata.deletionTimestamp` set): the pod stays, bound
        and running, until `delete_pod`."""
        current = self.pods[key]
        stamp = format_rfc3339(self.clock.now())
        return self._replace(
            current, {**current.raw, "metadata": {**current.raw.get("metadata", {}), "deletionTimestamp": stamp}}
        )

    def finish_pod(self, key: PodKey, phase: str = "Succeeded") -> PodInfo:
        current = self.pods[key]
        done = dataclasses.replace(current, phase=phase)
        self.pods[key] = done
        if self._listener is not None:
            self._listener.on_pod_updated(current, done)
        return done

    def delete_pod(self, key: PodKey) -> None:
        pod = self.pods.pop(key)
        self.conditions.pop(key, None)
        self._progress.pop(key, None)
        if pod.controller is not None and pod.owner_created is None:
            waiting = self._awaiting_owner.get(pod.controller.uid)
            if waiting is not None:
                waiting.discard(key)
                if not waiting:
                    del self._awaiting_owner[pod.controller.uid]
        if self._listener is not None:
            self._listener.on_pod_deleted(pod)
        for hook in self.delete_hooks:
            hook(pod)
