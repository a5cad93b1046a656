"""LiveCluster.scale_job on a scripted API: the patch it sends, and why it refuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pysched.api.jobs import JobRef, JobSource, job_key
from pysched.backend.live.cluster import LiveCluster
from pysched.backend.live.kubeclient import JSON, MERGE_PATCH, ApiResponse
from pysched.framework.status import Code, Status
from pysched.testing.scripted import ScriptedApi

JOBS = "/apis/batch/v1/jobs"
TRAIN = "/apis/batch/v1/namespaces/ns/jobs/train"


def batch_job(name: str = "train", *, mode: str | None = "Indexed", parallelism: int = 2, completions: Any = 2) -> JSON:
    spec: JSON = {"parallelism": parallelism, "completions": completions}
    if mode is not None:
        spec["completionMode"] = mode
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1"}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def ref(name: str = "train", source: JobSource = JobSource.BATCH) -> JobRef:
    return JobRef(job_key("ns", source, name), source, "ns", name)


class Quiet:
    """A listener that takes every notice and keeps none: these tests read the backend's answers."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args: None


async def started(*jobs: JSON) -> tuple[LiveCluster, ScriptedApi]:
    api = ScriptedApi({JOBS: list(jobs)})
    backend = LiveCluster(api)
    await backend.start(Quiet())
    return backend, api


async def scale(
    jobs: tuple[JSON, ...],
    workers: int,
    *,
    job: JobRef | None = None,
    answer: ApiResponse | None = None,
    writable: Callable[[], bool] | None = None,
) -> tuple[Status, ScriptedApi]:
    """One scale_job call on a backend that listed `jobs`; the PATCH of ns/train answers `answer`."""
    backend, api = await started(*jobs)
    if answer is not None:
        api.answers[("PATCH", TRAIN)] = answer
    if writable is not None:
        backend.writable = writable
    try:
        return await backend.scale_job(job or ref(), workers), api
    finally:
        await backend.stop()


async def test_scale_merge_patches_parallelism_and_completions_together_with_the_uid() -> None:
    status, api = await scale((batch_job(),), 4, answer=ApiResponse(200, batch_job(parallelism=4, completions=4)))
    assert status.ok, status.message()
    body = {"metadata": {"uid": "uid-train"}, "spec": {"parallelism": 4, "completions": 4}}
    assert api.writes == [("PATCH", TRAIN, body, MERGE_PATCH)]


@pytest.mark.parametrize(
    ("status", "message", "says"),
    [
        (
            403,
            'jobs.batch "train" is forbidden: User "system:serviceaccount:kube-system:pysched" cannot patch resource',
            "forbidden (pysched's RBAC needs patch jobs.batch)",
        ),
        (
            403,
            'jobs.batch "train" is forbidden: cannot change parallelism for a Job referencing gang-scheduled PodGroup',
            "is forbidden: jobs.batch",  # admission, not RBAC: no RBAC hint
        ),
        (404, 'jobs.batch "train" not found', "no longer exists"),
        (422, "spec.maxFailedIndexes: must be less than or equal to completions", "cannot be scaled to 3 workers"),
        (422, 'metadata.uid: Invalid value: "uid-train": field is immutable', "cannot be scaled to 3 workers"),
    ],
)
async def test_a_rejected_scale_is_unschedulable_with_the_reason_and_the_apiservers_message(
    status: int, message: str, says: str
) -> None:
    answer, _ = await scale((batch_job(),), 3, answer=ApiResponse(status, {"message": message}))
    assert answer.code is Code.UNSCHEDULABLE
    assert says in answer.message() and message in answer.message()
    assert "Job ns/train" in answer.message()


async def test_a_server_error_is_an_error_not_a_verdict_on_the_job() -> None:
    answer, _ = await scale((batch_job(),), 3, answer=ApiResponse(500, {"message": "etcdserver: request timed out"}))
    assert answer.code is Code.ERROR and "etcdserver: request timed out" in answer.message()


async def test_a_follower_sends_nothing() -> None:
    answer, api = await scale((batch_job(),), 4, writable=lambda: False)
    assert answer.code is Code.ERROR and "not the leader" in answer.message()
    assert api.writes == []


async def test_a_leader_that_lost_its_lease_while_the_request_waited_sends_nothing() -> None:
    checks = iter([True])  # fresh at the call, gone once the rate limiter lets the request through
    answer, api = await scale((batch_job(),), 4, writable=lambda: next(checks, False))
    assert answer.code is Code.ERROR and "Lease" in answer.message()
    assert api.writes == []


@pytest.mark.parametrize(
    ("jobs", "job", "says"),
    [
        ((), ref(), "is not an Indexed batch/v1 Job"),  # not seen by the Job informer
        ((batch_job(mode=None, parallelism=2, completions=4),), ref(), "is not an Indexed batch/v1 Job"),
        ((batch_job(mode="NonIndexed"),), ref(), "is not an Indexed batch/v1 Job"),
        ((batch_job(),), ref(source=JobSource.JOBSET), "is not an Indexed batch/v1 Job"),
        ((batch_job(),), ref(source=JobSource.PYSCHED), "is not an Indexed batch/v1 Job"),
        ((batch_job(parallelism=2, completions=8),), ref(), "completions 8 and parallelism 2"),
        ((batch_job(parallelism=8, completions=2),), ref(), "completions 2 and parallelism 8"),
    ],
)
async def test_a_job_that_cannot_scale_elastically_is_refused_without_a_request(
    jobs: tuple[JSON, ...], job: JobRef, says: str
) -> None:
    answer, api = await scale(jobs, 4, job=job)
    assert answer.code is Code.UNSCHEDULABLE and says in answer.message()
    assert api.writes == []


@pytest.mark.parametrize("workers", [0, -1, 10_001])
async def test_a_worker_count_out_of_range_is_refused_without_a_request(workers: int) -> None:
    answer, api = await scale((batch_job(),), workers)
    assert answer.code is Code.ERROR and "out of range" in answer.message()
    assert api.writes == []


async def test_the_informers_view_of_the_job_decides_after_a_change() -> None:
    """A Job that became elastic (completions set equal to parallelism) scales; one recreated as a
    plain Job no longer does."""
    backend, api = await started(batch_job(parallelism=2, completions=6))
    api.answers[("PATCH", TRAIN)] = ApiResponse(200, batch_job(parallelism=3, completions=3))
    try:
        assert not (await backend.scale_job(ref(), 3)).ok
        changed = batch_job(parallelism=6, completions=6)
        changed["metadata"]["resourceVersion"] = "2"
        await api.send(JOBS, "MODIFIED", changed)
        assert (await backend.scale_job(ref(), 3)).ok
        plain = batch_job(mode=None)
        plain["metadata"].update(resourceVersion="3", uid="uid-other")
        await api.send(JOBS, "MODIFIED", plain)
        refused = await backend.scale_job(ref(), 4)
    finally:
        await backend.stop()
    assert refused.code is Code.UNSCHEDULABLE
    assert [w[2]["spec"] for w in api.writes] == [{"parallelism": 3, "completions": 3}]
