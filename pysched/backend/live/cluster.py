"""The live ClusterBackend: informers, binds, conditions, resizes and events on a real API server.

It talks to the API only through `KubeClient` (`client.AsyncKubeClient` in production): plain
JSON in and out, so the Kubernetes client library stays in `client.py`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import socket
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from pysched.api.annotations import PROGRESS, ProgressReport
from pysched.api.containers import ContainerResize
from pysched.api.disruption import DisruptionBudget, budget_from_dict
from pysched.api.ids import JobKey, NodeName
from pysched.api.jobs import (
    JOBSET_LABEL,
    MAX_MEMBERS,
    POD_GROUP_APIS,
    JobRef,
    JobSource,
    completions_left,
    indexed_job_minimum,
    job_key,
    job_of,
    pod_group_minimum,
)
from pysched.api.objects import MALFORMED, NodeInfo, PodInfo, node_from_dict, pod_from_dict, read_pod
from pysched.api.times import format_micro_time, format_rfc3339, parse_rfc3339, parse_time
from pysched.api.volumes import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
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
from pysched.backend.live.eventsink import EventRecord, EventSink, Series
from pysched.backend.live.informer import Informer
from pysched.backend.live.kubeclient import JSON, MERGE_PATCH, STRATEGIC_MERGE_PATCH, KubeClient
from pysched.framework.cluster import FAILED_SCHEDULING, ClusterListener, PodCondition
from pysched.framework.status import SUCCESS, Status, error, unschedulable
from pysched.framework.storage import StorageView, storage_kind
from pysched.framework.tasks import BackgroundTasks

log = structlog.get_logger("pysched.live")

# Succeeded and Failed pods hold no resources; a pod that leaves this selection arrives as DELETED.
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


# The workload kinds whose selectors PodTopologySpread's default constraints read: kind, list path, resource.
_CONTROLLERS = (
    ("ReplicationController", "/api/v1/replicationcontrollers", "replicationcontrollers"),
    ("ReplicaSet", "/apis/apps/v1/replicasets", "replicasets"),
    ("StatefulSet", "/apis/apps/v1/statefulsets", "statefulsets"),
)


@dataclass(frozen=True, slots=True)
class LiveOptions:
    scheduler_names: frozenset[str] | None = None  # pending pods of other schedulers are not parsed
    controller: str = "pysched"
    instance: str = socket.gethostname()
    event_qps: float = 50.0  # kube-scheduler's event client: the same 50 / 100 as its main client
    event_burst: int = 100
    event_backlog: int = 10_000  # while event writes fail, the backlog is cut to this (the shed counted)
    event_patch_interval: float = 30.0  # how often a growing series is written back
    inactivity: float = 70.0
    page_size: int = 500


def _keep_owner_time(old: PodInfo, new: PodInfo) -> PodInfo:
    """`new` with `old`'s owner creation time when the Job is gone from the informer (deleted
    before its pods) and the pod is the same one under the same controller."""
    if (
        new.owner_created is None
        and old.owner_created is not None
        and old.uid == new.uid
        and old.controller is not None
        and new.controller is not None
        and old.controller.uid == new.controller.uid
    ):
        return new.evolve(owner_created=old.owner_created)
    return new


_ACTIONS = {"Scheduled": "Binding", "Preempted": "Preempting"}  # the events' action, as kube-scheduler's
EVENT_TTL_SECONDS = 3600.0  # the apiserver's default --event-ttl: older events are gone anyway


def _scheduled_at(pod: PodInfo) -> float:
    """When the pod was bound: its PodScheduled condition's transition, else its creation."""
    for condition in (pod.raw.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("lastTransitionTime"):
            return parse_rfc3339(str(condition["lastTransitionTime"])) or pod.created
    return pod.created


def _pod_path(pod: PodInfo, sub: str = "") -> str:
    path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
    return f"{path}/{sub}" if sub else path


class LiveCluster:
    """ClusterBackend on a real API server. Writes are refused while `writable()` is False
    (a follower or a leader that lost its lease must not touch the cluster)."""

    def __init__(self, client: KubeClient, options: LiveOptions | None = None) -> None:
        self.client = client
        self.options = options or LiveOptions()
        self.writable: Callable[[], bool] = lambda: True
        self.binds: collections.Counter[str] = collections.Counter()  # result -> bind calls made
        self.nodes: dict[str, NodeInfo] = {}
        self.pods: dict[str, PodInfo] = {}
        self.namespaces: dict[str, dict[str, str]] = {}  # name -> labels (deadlineNamespaces)
        # batch/v1 Jobs: uid -> creation time, for deadline durations of their pods.
        # Only Jobs: pods of other controllers (JobSet, Kubeflow jobs) count from their own creation.
        self.job_created: dict[str, float] = {}
        self._job_uids: dict[str, str] = {}  # "ns/name" -> uid (a relist deletes by key)
        self._failed_jobs: set[JobKey] = set()  # batch Jobs whose Failed condition is True
        self._completions_left: dict[JobKey, int] = {}  # batch Jobs that run in waves (`job_completions_left`)
        self._indexed_parallelism: dict[str, int] = {}  # "ns/name" -> an Indexed Job's gang size
        # "ns/name" -> its spec's completions and parallelism as written (scale_job's check)
        self._indexed_counts: dict[str, tuple[object, object]] = {}
        # A JobSet's Indexed Jobs: its job key -> {"ns/name" of a Job: parallelism}, and back.
        self._jobset_sizes: dict[JobKey, dict[str, int]] = {}
        self._jobset_of_job: dict[str, JobKey] = {}
        # "ns/name" of Jobs whose pods name a Workload API scheduling group: the Job controller
        # gave them a PodGroup (its WorkloadWithJob gate), so they are gangs of their own.
        self._grouped_jobs: set[str] = set()
        self._group_minimums: dict[JobKey, int] = {}  # PodGroups (both APIs) -> their minimum
        # PodGroup informers, for the APIs this cluster serves (found at start: both are optional).
        self.group_informers: dict[JobSource, Informer] = {}
        self._pods_by_job: dict[str, set[str]] = {}  # Job uid -> keys of known pods it controls
        # Label selectors of Services (namespace -> name -> selector) and of ReplicationControllers,
        # ReplicaSets and StatefulSets ((namespace, kind, name) -> selector): PodTopologySpread's
        # default constraints select the pods of the workloads a pod belongs to.
        self.services: dict[str, dict[str, dict[str, str]]] = {}
        self.controllers: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        self._invalid: dict[str, str] = {}  # "ns/name" -> uid of the unreadable pod told about
        self.budgets: dict[str, DisruptionBudget] = {}  # "ns/name" -> policy/v1 PodDisruptionBudget
        self._listener: ClusterListener | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._reads = BackgroundTasks()  # how pods that left the watch ended
        self.events = EventSink(
            self._create_event,
            self._patch_event,
            qps=self.options.event_qps,
            burst=self.options.event_burst,
            max_pending=self.options.event_backlog,
            patch_interval=self.options.event_patch_interval,
        )
        self.events.enabled = lambda: self.writable()
        opts = self.options
        self.namespace_informer = Informer(
            client, "/api/v1/namespaces", self._namespace_upsert, self._namespace_delete,
            page_size=opts.page_size, inactivity=opts.inactivity, resource="namespaces",
        )  # fmt: skip
        self.job_informer = Informer(
            client, "/apis/batch/v1/jobs", self._job_upsert, self._job_delete,
            page_size=opts.page_size, inactivity=opts.inactivity, resource="jobs",
        )  # fmt: skip
        self.budget_informer = Informer(
            client, "/apis/policy/v1/poddisruptionbudgets", self._budget_upsert, self._budget_delete,
            page_size=opts.page_size, inactivity=opts.inactivity, resource="poddisruptionbudgets",
        )  # fmt: skip
        self.service_informer = Informer(
            client, "/api/v1/services", self._service_upsert, self._service_delete,
            page_size=opts.page_size, inactivity=opts.inactivity, resource="services",
        )  # fmt: skip
        self.controller_informers = tuple(
            Informer(
                client,
                path,
                self._controller_upsert(kind),
                self._controller_delete(kind),
                page_size=opts.page_size,
                inactivity=opts.inactivity,
                resource=resource,
            )
            for kind, path, resource in _CONTROLLERS
        )
        self.node_informer = Informer(
            client, "/api/v1/nodes", self._node_upsert, self._node_delete,
            page_size=opts.page_size, inactivity=opts.inactivity, resource="nodes",
        )  # fmt: skip
        self._storage = StorageView()
        # What the volume plugins read: claims, volumes, classes and CSI nodes (kube-scheduler's
        # listers of the same objects).
        self.storage_informers = tuple(
            Informer(
                client,
                path,
                self._storage_upsert(parse),
                self._storage_delete(parse),
                page_size=opts.page_size,
                inactivity=opts.inactivity,
                resource=resource,
            )
            for path, resource, parse in (
                ("/api/v1/persistentvolumeclaims", "persistentvolumeclaims", pvc_from_dict),
                ("/api/v1/persistentvolumes", "persistentvolumes", pv_from_dict),
                ("/apis/storage.k8s.io/v1/storageclasses", "storageclasses", storage_class_from_dict),
                ("/apis/storage.k8s.io/v1/csinodes", "csinodes", csi_node_from_dict),
                ("/apis/storage.k8s.io/v1/csidrivers", "csidrivers", csi_driver_from_dict),
                (
                    "/apis/storage.k8s.io/v1/csistoragecapacities",
                    "csistoragecapacities",
                    csi_storage_capacity_from_dict,
                ),
            )
        )
        self.pod_informer = Informer(
            client, "/api/v1/pods", self._pod_upsert, self._pod_delete,
            field_selector=ACTIVE_PODS, page_size=opts.page_size, inactivity=opts.inactivity, resource="pods",
        )  # fmt: skip

    # ----- informers
    async def start(self, listener: ClusterListener) -> None:
        """Namespaces, Jobs, nodes, then pods (so pods find their namespace's labels and their Job's
        creation time, and bound pods their nodes); returns once all are synced."""
        self._listener = listener
        self.events.start()
        self._tasks.append(asyncio.create_task(self.namespace_informer.run()))
        await self.namespace_informer.synced.wait()
        self._tasks.append(asyncio.create_task(self.job_informer.run()))
        await self.job_informer.synced.wait()
        self._tasks.append(asyncio.create_task(self.budget_informer.run()))
        await self.budget_informer.synced.wait()
        await self._start_group_informers()
        for informer in (self.service_informer, *self.controller_informers):
            self._tasks.append(asyncio.create_task(informer.run()))
        for informer in (self.service_informer, *self.controller_informers):
            await informer.synced.wait()
        self._tasks.append(asyncio.create_task(self.node_informer.run()))
        await self.node_informer.synced.wait()
        for informer in self.storage_informers:
            self._tasks.append(asyncio.create_task(informer.run()))
        for informer in self.storage_informers:
            await informer.synced.wait()
        self._tasks.append(asyncio.create_task(self.pod_informer.run()))
        await self.pod_informer.synced.wait()
        log.info("informers synced", nodes=len(self.nodes), pods=len(self.pods))

    async def stop(self) -> None:
        await self.events.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._reads.cancel()
        self._tasks = []
        self._listener = None

    async def _start_group_informers(self) -> None:
        """Watch the PodGroups of each API the server serves (the Workload API is alpha, the
        scheduler-plugins CRD may not be installed), before pods, so members find their minimum."""
        opts = self.options
        for source, (api, _) in POD_GROUP_APIS.items():
            found = await self.client.request("GET", api)
            if found.status in (403, 404):
                # Not served (or not ours to read): its pods wait, told their PodGroup is unknown.
                log.info("PodGroups not watched", api=api, status=found.status)
                continue
            # Served, or the answer was lost (5xx, no answer): the informer retries until it lists.
            informer = Informer(
                self.client, f"{api}/podgroups", self._group_upsert(source), self._group_delete(source),
                page_size=opts.page_size, inactivity=opts.inactivity, resource=f"podgroups ({api})",
            )  # fmt: skip
            self.group_informers[source] = informer
            self._tasks.append(asyncio.create_task(informer.run()))
            await informer.synced.wait()

    def _watches(self, source: JobSource) -> bool:
        return source in self.group_informers

    def _group_upsert(self, source: JobSource) -> Callable[[JSON], None]:
        def upsert(raw: JSON) -> None:
            meta = raw.get("metadata") or {}
            key = job_key(str(meta.get("namespace") or ""), source, str(meta.get("name") or ""))
            minimum = pod_group_minimum(raw, source)
            if self._group_minimums.get(key) != minimum:
                self._group_minimums[key] = minimum
                if self._listener is not None:
                    self._listener.on_job_minimum_changed(key)

        return upsert

    def _group_delete(self, source: JobSource) -> Callable[[str, JSON | None], None]:
        def delete(key: str, raw: JSON | None) -> None:
            namespace, _, name = key.partition("/")
            job = job_key(namespace, source, name)
            if self._group_minimums.pop(job, None) is not None and self._listener is not None:
                self._listener.on_job_minimum_changed(job)

        return delete

    @property
    def informers(self) -> tuple[Informer, ...]:
        return (
            self.namespace_informer,
            self.job_informer,
            self.budget_informer,
            *self.group_informers.values(),
            self.service_informer,
            *self.controller_informers,
            self.node_informer,
            *self.storage_informers,
            self.pod_informer,
        )

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.namespaces.get(namespace)

    # ----- storage: informers into the StorageView, and the binder's writes
    @property
    def storage(self) -> StorageView:
        return self._storage

    def _storage_upsert(self, parse: Callable[[JSON], Storage]) -> Callable[[JSON], None]:
        def upsert(raw: JSON) -> None:
            try:
                obj = parse(raw)
            except MALFORMED as err:
                meta = raw.get("metadata") or {}
                log.warning(
                    "storage object not readable", kind=raw.get("kind"), name=meta.get("name"), problem=str(err)
                )
                return
            old = self._storage.upsert(obj)
            if self._listener is not None:
                self._listener.on_storage_changed(storage_kind(obj), old, obj)

        return upsert

    def _storage_delete(self, parse: Callable[[JSON], Storage]) -> Callable[[str, JSON | None], None]:
        def delete(key: str, raw: JSON | None) -> None:
            namespace, _, name = key.rpartition("/")
            stub: JSON = {"metadata": {"name": name, "namespace": namespace or None}}
            try:
                obj = parse(raw if raw is not None else stub)
            except MALFORMED:
                obj = parse(stub)
            old = self._storage.remove(obj)
            if old is not None and self._listener is not None:
                self._listener.on_storage_changed(storage_kind(obj), old, None)

        return delete

    async def bind_volume(self, pv: PersistentVolume, claim: PersistentVolumeClaim) -> Status:
        if not self.writable():
            return error("not the leader: volume binding refused")
        # The binder's static binding: claimRef (with the PV's resourceVersion, so a PV someone
        # else took meanwhile is a conflict), as kube's GetBindVolumeToClaim writes it.
        body = {
            "metadata": {
                "resourceVersion": pv.resource_version,
                "annotations": {ANN_BOUND_BY_CONTROLLER: "yes"},
            },
            "spec": {
                "claimRef": {
                    "kind": "PersistentVolumeClaim",
                    "apiVersion": "v1",
                    "namespace": claim.namespace,
                    "name": claim.name,
                    "uid": claim.uid,
                    "resourceVersion": claim.resource_version,
                }
            },
        }
        resp = await self.client.request(
            "PATCH", f"/api/v1/persistentvolumes/{pv.name}", body=body, content_type=MERGE_PATCH,
            only_if=self.writable,
        )  # fmt: skip
        if not resp.ok:
            return error(f"binding persistentvolume {pv.name!r}: {resp.message()}")
        self._storage_upsert(pv_from_dict)(resp.body)
        return SUCCESS

    async def select_node(self, claim: PersistentVolumeClaim, node: NodeName) -> Status:
        if not self.writable():
            return error("not the leader: volume provisioning refused")
        body = {"metadata": {"resourceVersion": claim.resource_version, "annotations": {ANN_SELECTED_NODE: node}}}
        path = f"/api/v1/namespaces/{claim.namespace}/persistentvolumeclaims/{claim.name}"
        resp = await self.client.request("PATCH", path, body=body, content_type=MERGE_PATCH, only_if=self.writable)
        if not resp.ok:
            return error(f"selecting node for persistentvolumeclaim {claim.name!r}: {resp.message()}")
        self._storage_upsert(pvc_from_dict)(resp.body)
        return SUCCESS

    def namespace_names(self) -> Collection[str]:
        return self.namespaces.keys()

    def _namespace_upsert(self, raw: JSON) -> None:
        meta = raw.get("metadata") or {}
        labels = meta.get("labels") or {}
        self.namespaces[str(meta.get("name"))] = {str(k): str(v) for k, v in labels.items()}

    def _namespace_delete(self, key: str, raw: JSON | None) -> None:
        self.namespaces.pop(key, None)

    def disruption_budgets(self) -> Sequence[DisruptionBudget]:
        return tuple(self.budgets.values())

    def _budget_upsert(self, raw: JSON) -> None:
        meta = raw.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        try:
            self.budgets[key] = budget_from_dict(raw)
        except MALFORMED as err:
            log.warning("PodDisruptionBudget cannot be read, ignored", budget=key, problem=str(err))
            self.budgets.pop(key, None)

    def _budget_delete(self, key: str, raw: JSON | None) -> None:
        self.budgets.pop(key, None)

    def service_selectors(self, namespace: str) -> Sequence[Mapping[str, str]]:
        return list(self.services.get(namespace, {}).values())

    def controller_selector(self, namespace: str, kind: str, name: str) -> Mapping[str, Any] | None:
        return self.controllers.get((namespace, kind, name))

    def _service_upsert(self, raw: JSON) -> None:
        meta = raw.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        selector = (raw.get("spec") or {}).get("selector")
        services = self.services.setdefault(namespace, {})
        if isinstance(selector, Mapping) and selector:
            services[name] = {str(k): str(v) for k, v in selector.items()}
        else:
            services.pop(name, None)  # no selector: it selects no pod

    def _service_delete(self, key: str, raw: JSON | None) -> None:
        namespace, _, name = key.partition("/")
        services = self.services.get(namespace)
        if services is not None:
            services.pop(name, None)
            if not services:
                del self.services[namespace]

    def _controller_upsert(self, kind: str) -> Callable[[JSON], None]:
        def upsert(raw: JSON) -> None:
            meta = raw.get("metadata") or {}
            key = (str(meta.get("namespace")), kind, str(meta.get("name")))
            selector = (raw.get("spec") or {}).get("selector")
            if kind == "ReplicationController" and isinstance(selector, Mapping):
                selector = {"matchLabels": selector}  # a plain map: the same as matchLabels
            if isinstance(selector, Mapping):
                self.controllers[key] = selector
            else:
                self.controllers.pop(key, None)

        return upsert

    def _controller_delete(self, kind: str) -> Callable[[str, JSON | None], None]:
        def delete(key: str, raw: JSON | None) -> None:
            namespace, _, name = key.partition("/")
            self.controllers.pop((namespace, kind, name), None)

        return delete

    def _job_upsert(self, raw: JSON) -> None:
        meta = raw.get("metadata") or {}
        labels = meta.get("labels")
        jobset = labels.get(JOBSET_LABEL) if isinstance(labels, Mapping) else None
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        self._note_parallelism(key, raw.get("spec") or {}, jobset, raw.get("status"))
        batch = job_key(str(meta.get("namespace")), JobSource.BATCH, str(meta.get("name")))
        if _job_gave_up(raw):
            self._failed_jobs.add(batch)
        else:
            self._failed_jobs.discard(batch)
        left = completions_left(raw)
        if left is None:
            self._completions_left.pop(batch, None)
        else:
            self._completions_left[batch] = left
        uid = str(meta.get("uid") or "")
        if not uid or uid in self.job_created:
            return  # a status update of a known Job: its creation time does not change
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        replaced = self._job_uids.get(key)
        if replaced is not None:  # deleted and recreated under the same name while we were not watching
            self.job_created.pop(replaced, None)
        created = parse_time(meta.get("creationTimestamp"))
        self._job_uids[key] = uid
        self.job_created[uid] = created
        # The Job and pod watches race: pods that arrived first are delivered again with its time.
        for pod_key in self._pods_by_job.get(uid, ()):
            old = self.pods.get(pod_key)
            if old is None or old.controller is None or old.controller.uid != uid or old.owner_created == created:
                continue
            new = old.evolve(owner_created=created)
            self.pods[pod_key] = new
            if self._listener is not None:
                self._listener.on_pod_updated(old, new)

    def _note_parallelism(
        self, key: str, spec: Mapping[str, Any], jobset: object = None, status: object = None
    ) -> None:
        """An Indexed Job's members all run at once: its parallelism (at most the completions it
        still makes) is its gang's minimum, and a JobSet's is the sum over its Jobs (`jobset`: the
        JobSet a Job belongs to, by its label)."""
        namespace, _, name = key.partition("/")
        before = self._indexed_parallelism.get(key)
        now = indexed_job_minimum(spec, status)
        if now is not None:
            self._indexed_parallelism[key] = now
            self._indexed_counts[key] = (spec.get("completions"), spec.get("parallelism"))
        else:
            self._indexed_parallelism.pop(key, None)
            self._indexed_counts.pop(key, None)
        changed = {job_key(namespace, JobSource.BATCH, name)} if now != before else set()
        owner = job_key(namespace, JobSource.JOBSET, jobset) if isinstance(jobset, str) and jobset else None
        was = self._jobset_of_job.pop(key, None)
        if was is not None:
            sizes = self._jobset_sizes[was]
            del sizes[key]
            if not sizes:
                del self._jobset_sizes[was]
        if owner is not None and now is not None:
            self._jobset_of_job[key] = owner
            self._jobset_sizes.setdefault(owner, {})[key] = now
        if was != (owner if now is not None else None) or now != before:
            changed.update(k for k in (was, owner) if k is not None)
        if self._listener is not None:
            for job in changed:
                self._listener.on_job_minimum_changed(job)

    def job_minimum(self, job: JobRef) -> int | None:
        if job.source is JobSource.BATCH:
            return self._indexed_parallelism.get(f"{job.namespace}/{job.name}")
        if job.source is JobSource.JOBSET:
            # Its Jobs that the Job controller gave a PodGroup are gangs of their own (seen once
            # their pods name it; whether it does is its WorkloadWithJob gate, not whether the
            # API is served): the JobSet's gang is the rest of its Jobs.
            sizes = self._jobset_sizes.get(job.key) or {}
            total = sum(size for key, size in sizes.items() if key not in self._grouped_jobs)
            return min(total, MAX_MEMBERS) if total else None
        return self._group_minimums.get(job.key)

    def job_failed(self, job: JobRef) -> bool:
        return job.key in self._failed_jobs

    def job_completions_left(self, job: JobRef) -> int | None:
        return self._completions_left.get(job.key)

    def progress(self, pod: PodInfo) -> ProgressReport | None:
        value = pod.annotations.get(PROGRESS)
        return None if value is None else ProgressReport.of_text(value)

    def _job_delete(self, key: str, raw: JSON | None) -> None:
        self._note_parallelism(key, {})
        self._grouped_jobs.discard(key)
        namespace, _, name = key.partition("/")
        self._failed_jobs.discard(job_key(namespace, JobSource.BATCH, name))
        self._completions_left.pop(job_key(namespace, JobSource.BATCH, name), None)
        # Its pods keep the time they were given (`_pod_upsert` carries it over): a deadline never moves.
        uid = self._job_uids.pop(key, None)
        if uid is not None:
            self.job_created.pop(uid, None)

    def _index_pod(self, old: PodInfo | None, pod: PodInfo | None) -> None:
        """Keep `_pods_by_job` (Job uid -> pod keys) in step with a pod's controller."""
        was = old.controller.uid if old is not None and old.controller is not None and old.controller.is_job else None
        now = pod.controller.uid if pod is not None and pod.controller is not None and pod.controller.is_job else None
        if was == now:
            return
        if was is not None and old is not None:
            keys = self._pods_by_job.get(was)
            if keys is not None:
                keys.discard(old.key)
                if not keys:
                    del self._pods_by_job[was]
        if now is not None and pod is not None:
            self._pods_by_job.setdefault(now, set()).add(pod.key)

    def _note_grouped(self, pod: PodInfo) -> None:
        """A Job's pod naming a Workload API scheduling group: the Job is a gang of its own, no
        longer counted in its JobSet's (which is told its minimum changed)."""
        controller = pod.controller
        if controller is None or not controller.is_job or not (pod.raw.get("spec") or {}).get("schedulingGroup"):
            return
        key = f"{pod.namespace}/{controller.name}"
        if key in self._grouped_jobs:
            return
        self._grouped_jobs.add(key)
        owner = self._jobset_of_job.get(key)
        if owner is not None and self._listener is not None:
            self._listener.on_job_minimum_changed(owner)

    def _node_upsert(self, raw: JSON) -> None:
        assert self._listener is not None
        name = str((raw.get("metadata") or {}).get("name"))
        old = self.nodes.get(name)
        try:
            node = node_from_dict(raw)
        except MALFORMED as err:
            log.warning("node cannot be read, ignored", node=name, problem=str(err))
            if old is not None:
                self._node_delete(name, None)
            return
        self.nodes[name] = node
        if old is None:
            self._listener.on_node_added(node)
        elif dataclasses.replace(old, resource_version=node.resource_version) != node:
            # a heartbeat changes only the resourceVersion of what we read: no event for the queue
            self._listener.on_node_updated(old, node)

    def _node_delete(self, key: str, raw: JSON | None) -> None:
        assert self._listener is not None
        old = self.nodes.pop(key, None)
        if old is not None:
            self._listener.on_node_deleted(old)

    def _ours(self, raw: Mapping[str, Any]) -> bool:
        names = self.options.scheduler_names
        spec = raw.get("spec") or {}
        return names is None or spec.get("schedulerName") in names

    def _pod_upsert(self, raw: JSON) -> None:
        assert self._listener is not None
        meta = raw.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        old = self.pods.get(key)
        version = meta.get("resourceVersion")
        if old is not None and old.resource_version and old.resource_version == version and old.uid == meta.get("uid"):
            return  # this very version is known (a relist, or our own write's answer came first)
        bound = bool((raw.get("spec") or {}).get("nodeName"))
        if old is None and not bound and not self._ours(raw):
            return  # another scheduler's pending pod: nothing to account or schedule
        try:
            pod, problem = read_pod(raw, self.job_created)
            if problem is not None and old is None:  # told once, when first seen
                log.warning("placed pod read without its constraints", pod=key, problem=problem)
        except MALFORMED as err:
            if old is not None:
                self._pod_delete(key, None)
            uid = str(meta.get("uid") or key)
            if self._ours(raw) and self._invalid.get(key) != uid:
                self._invalid[key] = uid
                self._listener.on_invalid_pod(raw, str(err))
            return
        self._invalid.pop(key, None)
        if old is not None and pod.owner_created is None and old.owner_created is not None:
            pod = _keep_owner_time(old, pod)
        self.pods[key] = pod
        self._index_pod(old, pod)
        self._note_grouped(pod)
        if old is None:
            self._listener.on_pod_added(pod)
        elif old.uid != pod.uid:  # deleted and recreated while we were not watching
            self._listener.on_pod_deleted(old)
            self._listener.on_pod_added(pod)
        else:
            self._listener.on_pod_updated(old, pod)

    def _pod_delete(self, key: str, raw: JSON | None) -> None:
        assert self._listener is not None
        self._invalid.pop(key, None)  # an unreadable pod was never in `pods`
        old = self.pods.pop(key, None)
        if old is None:
            return
        ended = self._ended(old, raw)
        if ended is not None:
            self._listener.on_pod_updated(old, ended)
        elif not old.terminated and not old.deleting and old.node_name and self._ours(old.raw if raw is None else raw):
            # The watch cache sends a pod leaving the field selector (it ended) as DELETED with
            # its last matching state, Running, and a relist (after 410 Gone) has no state at all
            # for a pod that ended meanwhile: ask the apiserver how it ended, so plugins learn it
            # succeeded or failed (deadline met or missed), not merely that it went away.
            self._reads.spawn(self._read_end(old))
        self._index_pod(old, None)
        self._listener.on_pod_deleted(old)

    def _ended(self, old: PodInfo, raw: JSON | None) -> PodInfo | None:
        """The pod's end, when `raw` is a terminal state of the same pod (met or missed is judged
        against the same deadline, even if its Job went first)."""
        if raw is None or old.terminated:
            return None
        try:
            ended = pod_from_dict(raw, self.job_created)
        except MALFORMED:
            return None
        return _keep_owner_time(old, ended) if ended.terminated and ended.uid == old.uid else None

    async def _read_end(self, old: PodInfo) -> None:
        resp = await self.client.request("GET", _pod_path(old))
        ended = self._ended(old, resp.body) if resp.ok else None  # 404: it really was deleted
        if ended is not None and self._listener is not None:
            self._listener.on_pod_updated(old, ended)

    # ----- writes
    async def bind(self, pod: PodInfo, node: NodeName) -> Status:
        if not self.writable():
            self.binds["refused"] += 1
            return error("not the leader: bind refused")
        current = self.pods.get(pod.key)
        if current is not None and current.uid == pod.uid and current.requests != pod.requests:
            # resized in place during the scheduling cycle: the placement used stale requests
            self.binds["stale"] += 1
            return error(f"pod {pod.key} was resized while being scheduled; retrying with the new requests")
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        resp = await self.client.request("POST", _pod_path(pod, "binding"), body=body, only_if=self.writable)
        if resp.status == 0 and not self.writable():
            self.binds["refused"] += 1  # the Lease went while the bind waited for the rate limiter
            return error("not the leader: bind refused")
        if resp.status in (200, 201):  # the answer is a Status; there is nothing else to read
            self.binds["ok"] += 1
            return SUCCESS
        self.binds[str(resp.status)] += 1
        if resp.status == 404:
            return unschedulable(f"pod {pod.key} no longer exists")
        return error(resp.message())  # the API's words, as kube-scheduler's DefaultBinder reports them

    async def patch_pod_conditions(self, pod: PodInfo, *conditions: PodCondition) -> Status:
        """One strategic-merge PATCH of `pods/status` (conditions merge by type). A condition
        that says what the pod already shows is not written (kube-scheduler skips such writes
        too); one whose status is unchanged keeps its lastTransitionTime."""
        if not self.writable():
            return error("not the leader: conditions not written")
        current = self.pods.get(pod.key, pod)
        existing = {str(c.get("type")): c for c in (current.raw.get("status") or {}).get("conditions") or ()}
        entries = []
        for condition in conditions:
            if condition.type == "PodScheduled" and condition.status == "False" and current.node_name is not None:
                continue  # bound meanwhile (e.g. a bind that lost a race): the pod is not unschedulable
            before = existing.get(condition.type)
            if condition.shown_in(before):
                continue
            since = before.get("lastTransitionTime") if before and before.get("status") == condition.status else None
            entries.append({
                "type": condition.type,
                "status": condition.status,
                "reason": condition.reason,
                "message": condition.message,
                "lastProbeTime": None,
                "lastTransitionTime": since or format_rfc3339(time.time()),
            })  # fmt: skip
        if not entries:
            return SUCCESS
        body = {"metadata": {"uid": pod.uid}, "status": {"conditions": entries}}
        resp = await self.client.request(
            "PATCH", _pod_path(pod, "status"), body=body, content_type=STRATEGIC_MERGE_PATCH, only_if=self.writable
        )
        if resp.ok:
            return SUCCESS
        if resp.status == 404:
            return unschedulable(f"pod {pod.key} no longer exists")
        log.warning("pod conditions not written", pod=pod.key, error=resp.message())
        return error(f"conditions of {pod.key} not written: {resp.message()}")

    async def resize(self, pod: PodInfo, containers: Mapping[str, ContainerResize]) -> Status:
        if not self.writable():
            return error("not the leader: resize refused")
        # Strategic merge: only the named resources change, so limits not given keep their value.
        body = [{"name": name, "resources": r.as_dict()} for name, r in containers.items()]
        patch: JSON = {"spec": {"containers": body}}
        if pod.uid:  # a precondition: a pod recreated under the name since is not resized for this one
            patch["metadata"] = {"uid": pod.uid}
        before = self.pods.get(pod.key)
        resp = await self.client.request(
            "PATCH", _pod_path(pod, "resize"), body=patch, content_type=STRATEGIC_MERGE_PATCH, only_if=self.writable
        )
        if resp.ok:
            self._read_own_write(pod.key, before, resp.body)
            return SUCCESS
        if resp.status == 404 or (resp.status == 422 and "metadata.uid" in resp.message()):
            return unschedulable(f"pod {pod.key} no longer exists")
        return error(f"resize of {pod.key} rejected: {resp.message()}")

    async def scale_job(self, job: JobRef, workers: int) -> Status:
        if not self.writable():
            return error("not the leader: scale refused")
        key = f"{job.namespace}/{job.name}"
        gang = self._indexed_parallelism.get(key) if job.source is JobSource.BATCH else None
        if gang is None:
            return unschedulable(f"{job.title} is not an Indexed batch/v1 Job: pysched cannot scale it")
        completions, parallelism = self._indexed_counts.get(key, (None, gang))
        if completions != parallelism:
            # Patching both would also change which indexes the Job must complete: not a worker count.
            return unschedulable(
                f"{job.title} has completions {completions} and parallelism {parallelism}: "
                "only a Job whose completions equal its parallelism scales elastically"
            )
        if not 1 <= workers <= MAX_MEMBERS:
            return error(f"{job.title}: {workers} workers is out of range (1 to {MAX_MEMBERS})")
        # Elastic Indexed Jobs: completions may change only together with parallelism, kept equal.
        # The uid makes it a precondition: a Job recreated under the name since is not scaled.
        body: JSON = {"spec": {"parallelism": workers, "completions": workers}}
        uid = self._job_uids.get(key)
        if uid:
            body["metadata"] = {"uid": uid}
        path = f"/apis/batch/v1/namespaces/{job.namespace}/jobs/{job.name}"
        resp = await self.client.request("PATCH", path, body=body, content_type=MERGE_PATCH, only_if=self.writable)
        if resp.ok:
            return SUCCESS
        if resp.status == 0 and not self.writable():
            return error("not the leader: scale refused (the Lease went while the request waited)")
        if resp.status == 403:
            # RBAC, or admission: e.g. a Job whose pods the Job controller put in a gang PodGroup.
            rbac = " (pysched's RBAC needs patch jobs.batch)" if "cannot patch" in resp.message() else ""
            return unschedulable(f"scaling {job.title} is forbidden{rbac}: {resp.message()}")
        if resp.status == 404:
            return unschedulable(f"{job.title} no longer exists: {resp.message()}")
        if resp.status == 422:  # invalid, or recreated under the name since (its uid is immutable)
            return unschedulable(f"{job.title} cannot be scaled to {workers} workers: {resp.message()}")
        return error(f"scaling {job.title} to {workers} workers failed: {resp.message()}")

    async def delete_preempted(self, victim: PodInfo) -> Status:
        if not self.writable():
            return error("not the leader: deletion refused")
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": victim.uid}}
        resp = await self.client.request("DELETE", _pod_path(victim), body=body, only_if=self.writable)
        if resp.ok or resp.status in (404, 409):  # gone, or a new pod under the name: not ours to delete
            return SUCCESS
        return error(f"deleting {victim.key} failed: {resp.message()}")

    async def set_nominated_node(self, pod: PodInfo, node: NodeName | None) -> Status:
        if not self.writable():
            return error("not the leader: nomination refused")
        body = {"metadata": {"uid": pod.uid}, "status": {"nominatedNodeName": node}}
        resp = await self.client.request(
            "PATCH", _pod_path(pod, "status"), body=body, content_type=MERGE_PATCH, only_if=self.writable
        )
        if resp.ok:
            return SUCCESS
        if resp.status == 404:
            return unschedulable(f"pod {pod.key} no longer exists")
        return error(f"nominating {pod.key} failed: {resp.message()}")

    def _read_own_write(self, key: str, before: PodInfo | None, answer: JSON) -> None:
        """Take the pod the apiserver answered a write with at once (read your writes): the
        binding cycle that resized a pending pod then binds what the pod asks for now, and the
        cache counts it. Only when the watch delivered nothing newer meanwhile; the watch's own
        copy of this version changes nothing when it arrives (`_pod_upsert` skips a version it has)."""
        if answer.get("kind") != "Pod" or self._listener is None or before is None:
            return
        current = self.pods.get(key)
        if current is not None and current.resource_version == before.resource_version:
            self._pod_upsert(answer)

    async def emit_event(self, pod: PodInfo, event_type: str, reason: str, note: str) -> None:
        """Queued, never awaited on the API: binds must not wait behind events. Each is also the
        decision's log line (a failed attempt's is the scheduling cycle's debug line), written
        even if the event sink must drop the event."""
        if reason != FAILED_SCHEDULING:
            job = job_of(pod)
            log.info(reason, pod=pod.key, job=job.key if job is not None else None, type=event_type, note=note)
        self.events.record(
            EventRecord(
                namespace=pod.namespace,
                pod_name=pod.name,
                pod_uid=pod.uid,
                type=event_type,
                reason=reason,
                action=_ACTIONS.get(reason, "Scheduling"),
                note=note,
                controller=pod.scheduler_name or self.options.controller,
            )
        )

    async def take_over(self, now: float) -> list[PodInfo]:
        """What a new leader does before its first cycle: lists the pods that ended and posts the
        missing `Scheduled` events; returns the ended pods, for the scheduler's own take-over.
        The informer's pods are read before the list goes out: a pod that ends while the list is on
        the wire leaves the informer, and the list may have been served before it ended."""
        active = list(self.pods.values())
        ended = await self.ended_pods()
        listed = {pod.uid for pod in ended}
        for pod in active:  # it left the informer meanwhile: read how it ended, so it is judged too
            if pod.node_name is not None and pod.uid not in listed and pod.key not in self.pods:
                resp = await self.client.request("GET", _pod_path(pod))
                with contextlib.suppress(*MALFORMED):
                    final = pod_from_dict(resp.body, self.job_created) if resp.ok else None
                    if final is not None and final.uid == pod.uid and final.terminated:
                        ended.append(final)
        await self.post_missing_scheduled_events(now, [*active, *ended])
        return ended

    async def post_missing_scheduled_events(self, now: float, candidates: Sequence[PodInfo]) -> int:
        """A leader killed between a bind and its `Scheduled` event leaves a bound pod without one.
        A new leader lists the `Scheduled` events once and posts the missing ones for the pods of
        its profiles among `candidates` bound within the events' lifetime, running or ended since
        (a short job may finish before the Lease changes hands); returns how many it posted."""
        names = self.options.scheduler_names
        bound = list(
            {
                pod.uid: pod
                for pod in candidates
                if pod.node_name is not None
                and (names is None or pod.scheduler_name in names)
                and _scheduled_at(pod) >= now - EVENT_TTL_SECONDS
            }.values()
        )
        if not bound:
            return 0
        seen: set[str] = set()
        query = {"fieldSelector": "reason=Scheduled", "limit": "500"}
        while True:
            resp = await self.client.request("GET", "/apis/events.k8s.io/v1/events", query=query)
            if not resp.ok:
                log.warning("scheduled events not listed; none re-posted", error=resp.message())
                return 0
            for item in resp.body.get("items") or ():
                seen.add(str((item.get("regarding") or {}).get("uid") or ""))
            cont = str((resp.body.get("metadata") or {}).get("continue") or "")
            if not cont:
                break
            query = {**query, "continue": cont}
        missing = [pod for pod in bound if pod.uid not in seen]
        for pod in missing:
            await self.emit_event(
                pod, "Normal", "Scheduled", f"Successfully assigned {pod.namespace}/{pod.name} to {pod.node_name}"
            )
        if missing:
            log.info("scheduled events re-posted", pods=len(missing))
        return len(missing)

    async def ended_pods(self) -> list[PodInfo]:
        """Bound pods of our profiles that ended: the pod informer no longer holds them
        (ACTIVE_PODS). Listed once, by a new leader, paged; a failed list gives what it read."""
        selector = "spec.nodeName!=,status.phase!=Pending,status.phase!=Running,status.phase!=Unknown"
        names = self.options.scheduler_names
        selectors = [selector] if names is None else [f"{selector},spec.schedulerName={n}" for n in sorted(names)]
        found: list[PodInfo] = []
        for field_selector in selectors:
            query = {"fieldSelector": field_selector, "limit": str(self.options.page_size)}
            while True:
                resp = await self.client.request("GET", "/api/v1/pods", query=query)
                if not resp.ok:
                    log.warning("ended pods not listed; their events and verdicts not checked", error=resp.message())
                    return found
                for raw in resp.body.get("items") or ():
                    with contextlib.suppress(*MALFORMED):
                        found.append(pod_from_dict(raw, self.job_created))
                cont = str((resp.body.get("metadata") or {}).get("continue") or "")
                if not cont:
                    break
                query = {**query, "continue": cont}
        return found

    async def _create_event(self, event: EventRecord, when: float) -> str | None:
        name = event_name(event.pod_name, uuid.uuid4().hex[:16])
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": event.namespace},
            "eventTime": format_micro_time(when),
            "reportingController": event.controller,
            "reportingInstance": f"{event.controller}-{self.options.instance}"[:128],
            "action": event.action,
            "reason": event.reason,
            "type": event.type,
            "note": event.note,
            "regarding": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": event.namespace,
                "name": event.pod_name,
                "uid": event.pod_uid,
            },
        }
        resp = await self.client.request(
            "POST", f"/apis/events.k8s.io/v1/namespaces/{event.namespace}/events", body=body, rate_limited=False,
            only_if=self.writable,
        )  # fmt: skip
        if not resp.ok:
            log.warning("event not created", reason=event.reason, pod=event.pod_name, error=resp.message())
            failed = resp.status == 0 or resp.status == 429 or resp.status >= 500
            return None if failed else ""
        return name

    async def _patch_event(self, event: EventRecord, series: Series) -> bool:
        body = {"series": {"count": series.count, "lastObservedTime": format_micro_time(series.last_seen_wall)}}
        path = f"/apis/events.k8s.io/v1/namespaces/{event.namespace}/events/{series.name}"
        resp = await self.client.request(
            "PATCH", path, body=body, content_type=MERGE_PATCH, rate_limited=False, only_if=self.writable
        )
        if resp.status == 404:
            return False  # deleted, or past its TTL: the sink creates it again
        if not resp.ok:
            log.warning("event series not updated", reason=event.reason, pod=event.pod_name, error=resp.message())
        return True


def event_name(pod_name: str, suffix: str) -> str:
    """The pod's name, cut to leave room for `suffix`, then the suffix: a name cut short may end
    in "-" or ".", which no part of a DNS subdomain may end with."""
    return f"{pod_name[:200].rstrip('-.')}.{suffix}"


def _job_gave_up(raw: Mapping[str, Any]) -> bool:
    """A batch/v1 Job's `Failed` condition is True: it replaces no failed pod any more."""
    conditions = (raw.get("status") or {}).get("conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") == "Failed" and c.get("status") == "True" for c in conditions
    )
