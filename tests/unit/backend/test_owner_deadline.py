"""Deadline durations count from the controlling owner's creation: parsing, both backends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pysched.api.annotations import DEADLINE, deadline_of
from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import JobKey, OwnerUID, PodKey
from pysched.api.jobs import JOBSET_LABEL, JobRef, JobSource, job_key
from pysched.api.objects import OwnerRef, PodInfo, pod_from_dict
from pysched.api.times import format_rfc3339
from pysched.api.volumes import Storage
from pysched.backend.live.cluster import LiveCluster
from pysched.backend.live.kubeclient import JSON
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.events import EventKind
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler
from pysched.testing.scripted import ScriptedApi

JOB_UID = "job-uid-1"
JOB_CREATED = 1_000.0
HOUR = 3600.0


def owner_ref(uid: str = JOB_UID, kind: str = "Job", api_version: str = "batch/v1", controller: bool = True) -> JSON:
    return {"apiVersion": api_version, "kind": kind, "name": "train", "uid": uid, "controller": controller}


def job_pod(
    name: str,
    created: float,
    *,
    refs: list[JSON] | None = None,
    deadline: str = "1h",
    scheduler: str = "pysched",
    node: str | None = None,
    phase: str = "Pending",
) -> dict[str, Any]:
    raw = pod_dict(
        name,
        namespace="ns",
        created=created,
        annotations={DEADLINE: deadline},
        scheduler_name=scheduler,
        node_name=node,
        uid=f"uid-{name}",
    )
    raw["metadata"]["ownerReferences"] = [owner_ref()] if refs is None else refs
    raw["metadata"]["resourceVersion"] = "1"
    raw["status"]["phase"] = phase
    return raw


def job(uid: str = JOB_UID, created: float = JOB_CREATED, version: str = "1") -> JSON:
    meta = {"name": "train", "namespace": "ns", "uid": uid, "creationTimestamp": format_rfc3339(created)}
    meta["resourceVersion"] = version
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta}


# ----------------------------------------------------------------------------- objects, deadline_of
def test_the_controller_reference_is_parsed_once_from_raw() -> None:
    others = [owner_ref("rs", kind="ReplicaSet", api_version="apps/v1", controller=False), owner_ref()]
    pod = pod_from_dict(job_pod("p", 5_000.0, refs=others))
    assert pod.controller == OwnerRef("Job", "train", OwnerUID(JOB_UID), "batch/v1")
    assert pod.controller.is_job and pod.owner_created is None
    assert pod_from_dict(job_pod("q", 5_000.0, refs=[])).controller is None
    assert pod_from_dict(job_pod("r", 5_000.0, refs=[owner_ref(controller=False)])).controller is None
    jobset = pod_from_dict(job_pod("s", 5_000.0, refs=[owner_ref(kind="JobSet", api_version="jobset.x-k8s.io/v1")]))
    assert jobset.controller is not None and not jobset.controller.is_job
    # owner times known to the backend are filled in while building; evolve keeps both fields
    known = pod_from_dict(job_pod("t", 5_000.0), {JOB_UID: JOB_CREATED})
    assert known.owner_created == JOB_CREATED
    moved = known.evolve(node_name="n1")
    assert moved.controller == known.controller and moved.owner_created == JOB_CREATED


def test_a_duration_counts_from_the_owner_when_known_else_from_the_pod() -> None:
    pod = pod_from_dict(job_pod("p", 5_000.0, deadline="1h30m"))
    assert deadline_of(pod) == 5_000.0 + 1.5 * HOUR
    assert deadline_of(pod.evolve(owner_created=JOB_CREATED)) == JOB_CREATED + 1.5 * HOUR
    absolute = pod_from_dict(job_pod("a", 5_000.0, deadline="1970-01-01T02:00:00Z"), {JOB_UID: JOB_CREATED})
    assert deadline_of(absolute) == 2 * HOUR  # an RFC 3339 time is absolute, owner or not
    bad = pod_from_dict(job_pod("b", 5_000.0, deadline="soon"), {JOB_UID: JOB_CREATED})
    assert deadline_of(bad) is None


# ----------------------------------------------------------------------------- simulated backend
def test_simulated_owners_fill_the_time_and_a_recreated_pod_keeps_its_deadline() -> None:
    cluster = SimulatedCluster(VirtualClock(0.0))
    cluster.add_owner(JOB_UID, JOB_CREATED)
    first = cluster.create_pod(job_pod("train-a", 2_000.0))
    assert first is not None and first.owner_created == JOB_CREATED
    assert deadline_of(first) == JOB_CREATED + HOUR
    cluster.delete_pod(first.key)
    retry = cluster.create_pod(job_pod("train-b", 3_000.0))  # the Job's replacement, created later
    assert retry is not None and deadline_of(retry) == deadline_of(first)
    orphan = cluster.create_pod(job_pod("other", 3_000.0, refs=[owner_ref("unknown-uid")]))
    assert orphan is not None and deadline_of(orphan) == 3_000.0 + HOUR  # owner unknown: the pod's own
    plain = cluster.create_pod(job_pod("plain", 3_000.0, refs=[]))
    assert plain is not None and deadline_of(plain) == 3_000.0 + HOUR


class Updates:
    def __init__(self) -> None:
        self.added: dict[str, PodInfo] = {}
        self.updated: list[tuple[PodInfo, PodInfo]] = []
        self.deleted: list[str] = []
        self.minimums: list[JobKey] = []

    def on_node_added(self, node: Any) -> None: ...
    def on_node_updated(self, old: Any, new: Any) -> None: ...
    def on_node_deleted(self, node: Any) -> None: ...
    def on_pod_added(self, pod: PodInfo) -> None:
        self.added[pod.key] = pod

    def on_pod_updated(self, old: PodInfo, new: PodInfo) -> None:
        self.updated.append((old, new))

    def on_pod_deleted(self, pod: PodInfo) -> None:
        self.deleted.append(pod.key)

    def on_invalid_pod(self, raw: Mapping[str, object], problem: str) -> None:
        raise AssertionError(problem)

    def on_storage_changed(self, kind: EventKind, old: Storage | None, new: Storage | None) -> None:
        pass  # these tests watch pods

    def on_job_minimum_changed(self, job: JobKey) -> None:
        self.minimums.append(job)


async def test_simulated_owner_registered_after_its_pods_updates_them() -> None:
    cluster = SimulatedCluster(VirtualClock(0.0))
    listener = Updates()
    await cluster.start(listener)
    early = cluster.create_pod(job_pod("early", 2_000.0))
    gone = cluster.create_pod(job_pod("gone", 2_000.0))
    assert early is not None and gone is not None and early.owner_created is None
    cluster.delete_pod(gone.key)
    cluster.add_owner(JOB_UID, JOB_CREATED)
    assert [(old.key, new.owner_created) for old, new in listener.updated] == [(early.key, JOB_CREATED)]
    assert cluster.pods[early.key].owner_created == JOB_CREATED


async def test_edf_orders_a_recreated_job_pod_by_its_jobs_creation() -> None:
    """One free CPU, two pods with `1h` created at the same time: the one whose Job is older is due first."""
    clock = VirtualClock(5_000.0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    scheduler = Scheduler(builtin_config(registry).only("edf"), cluster, clock, registry)
    cluster.add_node(node_dict("n1", cpu="1", memory="8Gi"))
    cluster.add_owner(JOB_UID, JOB_CREATED)
    await scheduler.start()
    cluster.create_pod(job_pod("fresh", 5_000.0, refs=[], scheduler="edf"))
    cluster.create_pod(job_pod("retry", 5_000.0, scheduler="edf"))  # created second: loses any tie
    await scheduler.run_until_idle()
    assert cluster.pods[PodKey("ns/retry")].node_name == "n1"
    assert cluster.pods[PodKey("ns/fresh")].node_name is None


# ----------------------------------------------------------------------------- live backend
JOBS, PODS = "/apis/batch/v1/jobs", "/api/v1/pods"


async def live_backend(listener: Updates, api: ScriptedApi | None = None) -> tuple[LiveCluster, ScriptedApi]:
    """A started live backend whose informers read `api` (nothing listed unless it says so)."""
    api = api or ScriptedApi()
    backend = LiveCluster(api)
    await backend.start(listener)
    return backend, api


async def test_live_pod_of_a_known_job_gets_its_creation_time() -> None:
    listener = Updates()
    backend, api = await live_backend(listener)
    await api.send(JOBS, "ADDED", job())
    await api.send(PODS, "ADDED", job_pod("p", 5_000.0))
    await backend.stop()
    pod = listener.added["ns/p"]
    assert pod.owner_created == JOB_CREATED and deadline_of(pod) == JOB_CREATED + HOUR


async def test_live_job_learned_after_its_pods_delivers_them_again_as_updates() -> None:
    listener = Updates()
    backend, api = await live_backend(listener)
    await api.send(PODS, "ADDED", job_pod("a", 5_000.0))
    await api.send(PODS, "ADDED", job_pod("b", 6_000.0, node="n1", phase="Running"))
    await api.send(PODS, "ADDED", job_pod("c", 5_000.0, refs=[owner_ref("other-job")]))
    await api.send(PODS, "ADDED", job_pod("gone", 5_000.0))
    await api.send(PODS, "DELETED", job_pod("gone", 5_000.0))
    assert all(p.owner_created is None for p in listener.added.values())

    await api.send(JOBS, "ADDED", job())
    redelivered = {old.key: (old.owner_created, new.owner_created) for old, new in listener.updated}
    assert redelivered == {"ns/a": (None, JOB_CREATED), "ns/b": (None, JOB_CREATED)}  # not c, not gone
    assert deadline_of(backend.pods["ns/b"]) == JOB_CREATED + HOUR
    assert backend.pods["ns/b"].node_name == "n1"  # nothing else changed

    await api.send(JOBS, "MODIFIED", job(version="2"))  # a status update of the Job: nothing to deliver
    await backend.stop()
    assert len(listener.updated) == 2


async def test_live_pods_of_other_controllers_count_from_their_creation() -> None:
    listener = Updates()
    backend, api = await live_backend(listener)
    refs = [owner_ref("js", kind="JobSet", api_version="jobset.x-k8s.io/v1")]
    await api.send(PODS, "ADDED", job_pod("p", 5_000.0, refs=refs))
    await api.send(JOBS, "ADDED", job(uid="js"))  # even a batch Job under that uid does not apply
    await backend.stop()
    assert deadline_of(listener.added["ns/p"]) == 5_000.0 + HOUR and not listener.updated


async def test_live_pod_keeps_its_jobs_time_after_the_job_is_deleted() -> None:
    listener = Updates()
    api = ScriptedApi({JOBS: [job()]})
    backend, api = await live_backend(listener, api)
    await api.send(PODS, "ADDED", job_pod("p", 5_000.0, node="n1", phase="Running"))
    api.items[JOBS] = []
    await api.expire(JOBS)  # a relist without the Job: deleted by key
    assert not backend.job_created
    updated = job_pod("p", 5_000.0, node="n1", phase="Running")
    updated["metadata"]["resourceVersion"] = "2"
    await api.send(PODS, "MODIFIED", updated)
    assert backend.pods["ns/p"].owner_created == JOB_CREATED
    # The end arrives as DELETED with the final object: judged against the same deadline.
    await api.send(PODS, "DELETED", job_pod("p", 5_000.0, node="n1", phase="Succeeded"))
    await backend.stop()
    ended = listener.updated[-1][1]
    assert ended.terminated and ended.owner_created == JOB_CREATED


async def test_live_job_recreated_under_the_same_name_replaces_the_old_uid() -> None:
    backend, api = await live_backend(Updates())
    await api.send(JOBS, "ADDED", job())
    await api.send(JOBS, "MODIFIED", job(uid="job-uid-2", created=JOB_CREATED + 50, version="2"))
    await backend.stop()
    assert backend.job_created == {"job-uid-2": JOB_CREATED + 50}


async def test_live_start_lists_jobs_before_pods() -> None:
    api = ScriptedApi({JOBS: [job()], PODS: [job_pod("p", 5_000.0)]})
    listener = Updates()
    backend, _ = await live_backend(listener, api)
    await backend.stop()
    lists = [path for method, path in api.requests if method == "GET"]
    workloads = [
        "/api/v1/services",
        "/api/v1/replicationcontrollers",
        "/apis/apps/v1/replicasets",
        "/apis/apps/v1/statefulsets",
    ]
    assert lists == [
        "/api/v1/namespaces",
        JOBS,
        "/apis/policy/v1/poddisruptionbudgets",
        "/apis/scheduling.k8s.io/v1alpha2",  # discovery: PodGroups are watched where served
        "/apis/scheduling.x-k8s.io/v1alpha1",
        *workloads,
        "/api/v1/nodes",
        "/api/v1/persistentvolumeclaims",
        "/api/v1/persistentvolumes",
        "/apis/storage.k8s.io/v1/storageclasses",
        "/apis/storage.k8s.io/v1/csinodes",
        "/apis/storage.k8s.io/v1/csidrivers",
        "/apis/storage.k8s.io/v1/csistoragecapacities",
        PODS,
    ]
    assert listener.added["ns/p"].owner_created == JOB_CREATED and not listener.updated


def _indexed(name: str, parallelism: int, jobset: str | None = None, version: str = "1") -> JSON:
    meta: JSON = {"name": name, "namespace": "ns", "uid": f"u-{name}", "resourceVersion": version}
    if jobset is not None:
        meta["labels"] = {JOBSET_LABEL: jobset}
    return {"metadata": meta, "spec": {"completionMode": "Indexed", "parallelism": parallelism}}


def _ref(source: JobSource, name: str) -> JobRef:
    return JobRef(job_key("ns", source, name), source, "ns", name)


async def test_live_minimums_of_indexed_jobs_jobsets_and_podgroups() -> None:
    groups = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
    api = ScriptedApi({JOBS: [_indexed("solo", 4)]})
    api.objects["/apis/scheduling.x-k8s.io/v1alpha1"] = {"kind": "APIResourceList"}  # only that API is served
    listener = Updates()
    backend, _ = await live_backend(listener, api)
    assert backend.job_minimum(_ref(JobSource.BATCH, "solo")) == 4
    done = _indexed("solo", 4, version="2")
    done["spec"]["completions"], done["status"] = 6, {"succeeded": 4}
    await api.send(JOBS, "MODIFIED", done)
    assert backend.job_minimum(_ref(JobSource.BATCH, "solo")) == 2  # its last two indexes: no more pods will come
    await api.send(JOBS, "ADDED", _indexed("train-a-0", 2, jobset="train"))
    await api.send(JOBS, "ADDED", _indexed("train-b-0", 3, jobset="train"))
    assert backend.job_minimum(_ref(JobSource.JOBSET, "train")) == 5  # every Job of the JobSet at once
    await api.send(JOBS, "MODIFIED", _indexed("train-b-0", 1, jobset="train", version="2"))
    assert backend.job_minimum(_ref(JobSource.JOBSET, "train")) == 3
    # A JobSet keeps a Job that completed (an initializer run before the trainers): it makes no
    # more pods, and the gang is the others'.
    finished = _indexed("train-init-0", 1, jobset="train")
    finished["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    await api.send(JOBS, "ADDED", finished)
    assert backend.job_minimum(_ref(JobSource.JOBSET, "train")) == 3
    await api.send(JOBS, "DELETED", _indexed("train-a-0", 2, jobset="train", version="3"))
    assert backend.job_minimum(_ref(JobSource.JOBSET, "train")) == 1
    # Where the Job controller gives a gang-shaped Job a Workload API PodGroup, its pods name it
    # and are that group's gang: the JobSet's is the rest of its Jobs (whether the API is served
    # says nothing: the controller's WorkloadWithJob gate decides).
    await api.send(JOBS, "ADDED", _indexed("train-c-0", 4, jobset="train"))
    assert backend.job_minimum(_ref(JobSource.JOBSET, "train")) == 5
    member = pod_dict("train-c-0-0", namespace="ns")
    member["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train-c-0", "uid": "u-train-c-0", "controller": True}
    ]
    member["spec"]["schedulingGroup"] = {"podGroupName": "train-c-0"}
    listener.minimums.clear()
    await api.send(PODS, "ADDED", member)
    assert backend.job_minimum(_ref(JobSource.JOBSET, "train")) == 1
    assert _ref(JobSource.JOBSET, "train").key in listener.minimums
    group = {"metadata": {"name": "g", "namespace": "ns", "resourceVersion": "1"}, "spec": {"minMember": 6}}
    await api.send(groups, "ADDED", group)
    assert backend.job_minimum(_ref(JobSource.POD_GROUP, "g")) == 6
    assert backend.job_minimum(_ref(JobSource.WORKLOAD, "g")) is None  # that API is not served here
    await backend.stop()
    told = set(listener.minimums)
    assert {_ref(JobSource.JOBSET, "train").key, _ref(JobSource.POD_GROUP, "g").key} <= told
