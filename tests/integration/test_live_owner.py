"""Deadline durations of a Job's pods count from the Job's creation, read by the live backend from
the real kube-apiserver. Jobs and their pods are created directly: the Jobs are `managedBy` another
controller, so kube-controller-manager's Job controller leaves them and their pods alone."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from pysched.api.annotations import DEADLINE, deadline_of
from pysched.api.ids import JobKey
from pysched.api.objects import NodeInfo, PodInfo
from pysched.api.times import parse_time
from pysched.api.volumes import Storage
from pysched.backend.live.client import AsyncKubeClient, connect
from pysched.backend.live.cluster import LiveCluster, LiveOptions
from pysched.backend.live.kubeclient import ApiResponse
from pysched.framework.events import EventKind
from pysched.testing import KubeAPI, LocalControlPlane
from pysched.testing.helpers import eventually, make_pod
from pysched.testing.kube import JSON, KubeAPIError

pytestmark = pytest.mark.integration

TWO_HOURS = 7200.0
JOBS = "/apis/batch/v1/jobs"


class Listener:
    def __init__(self) -> None:
        self.pods: dict[str, PodInfo] = {}
        self.updates: list[tuple[PodInfo, PodInfo]] = []

    def on_node_added(self, node: NodeInfo) -> None: ...
    def on_node_updated(self, old: NodeInfo, new: NodeInfo) -> None: ...
    def on_node_deleted(self, node: NodeInfo) -> None: ...
    def on_pod_added(self, pod: PodInfo) -> None:
        self.pods[pod.key] = pod

    def on_pod_updated(self, old: PodInfo, new: PodInfo) -> None:
        self.pods[new.key] = new
        self.updates.append((old, new))

    def on_pod_deleted(self, pod: PodInfo) -> None:
        self.pods.pop(pod.key, None)

    def on_invalid_pod(self, raw: Mapping[str, object], problem: str) -> None:
        raise AssertionError(problem)

    def on_storage_changed(self, kind: EventKind, old: Storage | None, new: Storage | None) -> None:
        pass  # these tests watch pods and nodes only

    def on_job_minimum_changed(self, job: JobKey) -> None:
        pass


def create_job(kube: KubeAPI, namespace: str, name: str) -> JSON:
    template = make_pod("unused")
    template["spec"]["restartPolicy"] = "Never"
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        # Else the Job controller would add a pod of its own and release the hand-made ones (they lack
        # its labels); the garbage collector still sees a real owner.
        "spec": {"managedBy": "pysched.io/test", "template": {"metadata": {}, "spec": template["spec"]}},
    }
    return kube.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", body)


def delete_jobs(kube: KubeAPI, namespace: str, *names: str) -> None:
    # Background: the garbage collector deletes the hand-made pods too (batch/v1's default orphans them)
    for name in names:
        with contextlib.suppress(KubeAPIError):
            kube.delete(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}", propagationPolicy="Background")


def job_pod(name: str, scheduler: str, job: JSON) -> JSON:
    pod = make_pod(name, scheduler=scheduler, annotations={DEADLINE: "2h"})
    meta = job["metadata"]
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"], "controller": True}
    pod["metadata"]["ownerReferences"] = [ref]
    return pod


async def a_second_after(stamp: float) -> None:
    """Timestamps have whole seconds: wait until a pod created now cannot share the Job's second."""
    await eventually(lambda: time.time() >= stamp + 1.0, "the clock past the Job's creation second")


async def test_a_job_pod_counts_its_deadline_from_the_job(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str
) -> None:
    name = f"owner-{namespace}"
    first = await asyncio.to_thread(create_job, kube, namespace, "first")
    first_created = parse_time(first["metadata"]["creationTimestamp"])
    await a_second_after(first_created)
    await asyncio.to_thread(kube.create_pod, namespace, job_pod("first-0", name, first))
    client = await connect(str(control_plane.kubeconfig_path), qps=100, burst=100)
    backend = LiveCluster(client, LiveOptions(scheduler_names=frozenset({name})))
    listener = Listener()
    try:
        await backend.start(listener)  # Jobs are synced before pods: the pod arrives with the time
        pod = listener.pods[f"{namespace}/first-0"]
        assert pod.controller is not None and pod.controller.uid == first["metadata"]["uid"]
        assert pod.owner_created == first_created and pod.created > first_created
        assert deadline_of(pod) == first_created + TWO_HOURS

        # Both created while the backend watches (the two watches may deliver in either order).
        second = await asyncio.to_thread(create_job, kube, namespace, "second")
        second_created = parse_time(second["metadata"]["creationTimestamp"])
        await a_second_after(second_created)
        await asyncio.to_thread(kube.create_pod, namespace, job_pod("second-0", name, second))
        key = f"{namespace}/second-0"
        await eventually(lambda: key in listener.pods and listener.pods[key].owner_created is not None, "owner time")
        assert listener.pods[key].owner_created == second_created
        assert deadline_of(listener.pods[key]) == second_created + TWO_HOURS
    finally:
        await backend.stop()
        await client.close()
        await asyncio.to_thread(delete_jobs, kube, namespace, "first", "second")


class LateJobWatch:
    """The real connection, with the watch of Jobs held back until `release()`: a Job created
    after the backend started then reaches it after its pod, as when that watch lags."""

    def __init__(self, client: AsyncKubeClient) -> None:
        self.client = client
        self.released = asyncio.Event()

    async def request(self, method: str, path: str, **options: Any) -> ApiResponse:
        return await self.client.request(method, path, **options)

    async def watch(self, path: str, query: Mapping[str, str], inactivity: float) -> AsyncIterator[JSON]:
        if path == JOBS:
            await self.released.wait()
        async for event in self.client.watch(path, query, inactivity):
            yield event

    async def close(self) -> None:
        await self.client.close()


async def test_a_job_learned_after_its_pod_delivers_the_pod_again(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str
) -> None:
    name = f"late-{namespace}"
    client = LateJobWatch(await connect(str(control_plane.kubeconfig_path), qps=100, burst=100))
    backend = LiveCluster(client, LiveOptions(scheduler_names=frozenset({name})))
    listener = Listener()
    try:
        await backend.start(listener)
        job = await asyncio.to_thread(create_job, kube, namespace, "train")
        job_created = parse_time(job["metadata"]["creationTimestamp"])
        await a_second_after(job_created)
        await asyncio.to_thread(kube.create_pod, namespace, job_pod("train-0", name, job))
        key = f"{namespace}/train-0"
        await eventually(lambda: key in listener.pods, "pod delivered")
        pod = listener.pods[key]
        assert pod.owner_created is None and deadline_of(pod) == pod.created + TWO_HOURS
        assert not listener.updates

        client.released.set()  # the Job watch resumes from the start-up list: the Job arrives now
        await eventually(lambda: bool(listener.updates), "pod delivered again with its Job's time")
        old, new = listener.updates[0]
        assert old.owner_created is None and new.owner_created == job_created
        assert new.uid == pod.uid and deadline_of(new) == job_created + TWO_HOURS
        assert backend.pods[key].owner_created == job_created
    finally:
        await backend.stop()
        await client.close()
        await asyncio.to_thread(delete_jobs, kube, namespace, "train")
