"""A gang's deadline is judged once per run: never twice, never with another run's verdict."""

import asyncio
from typing import Any

import pytest

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.api.jobs import (
    COMPLETION_INDEX,
    JOB_LABEL,
    JOBSET_JOB_INDEX_LABEL,
    JOBSET_LABEL,
    JOBSET_UID_LABEL,
    MIN_MEMBERS,
    REPLICATED_JOB_LABEL,
    JobSource,
    job_key,
)
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.plugins.autoscale import Autoscale
from pysched.plugins.autoscale.tests.profile import pysched_scheduler
from pysched.scheduler.scheduler import Scheduler

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
MEMBERS = (PodKey("default/ddp-0"), PodKey("default/ddp-1"))


def _member(index: int, created: float, uid: str, *, gpu: bool = False, node: str | None = None) -> dict[str, Any]:
    """A member of a gang of bare pods (no controller): `pysched.io/job` and its minimum only."""
    notes = {"pysched.io/deadline": "30m", "pysched.io/total-steps": "10000", MIN_MEMBERS: "2"}
    return pod_dict(
        f"ddp-{index}",
        cpu="2",
        extended={"nvidia.com/gpu": "1"} if gpu else None,
        created=created,
        uid=uid,
        annotations=notes,
        labels={JOB_LABEL: "ddp"},
        node_name=node,
    )


def _world() -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    clock = VirtualClock(T0)
    cluster = SimulatedCluster(clock)
    cluster.add_node(node_dict("n", cpu="16", memory="64Gi", extended={"nvidia.com/gpu": "8"}))
    return clock, cluster, pysched_scheduler(cluster, clock)


def _deadlines(scheduler: Scheduler) -> dict[tuple[str, ...], float]:
    plugin = scheduler.frameworks["pysched"].reconcile[0]
    assert isinstance(plugin, Autoscale)
    (family,) = [f for f in plugin.metric_families() if f.name == "pysched_deadlines"]
    return dict(family.values)


async def _end(clock: VirtualClock, cluster: SimulatedCluster, scheduler: Scheduler) -> None:
    """The members succeed one after the other, a minute apart."""
    for key in MEMBERS:
        cluster.finish_pod(key, "Succeeded")
        await scheduler.run_until_idle()
        clock.advance(60)


def test_a_gang_of_bare_pods_resubmitted_under_the_same_names_is_judged_again() -> None:
    """Bare pods share no controller uid: a run that met its deadline lent its verdict to the
    resubmission that missed its own (within the 10 minutes a gang's verdict is remembered)."""

    async def run() -> tuple[SimulatedCluster, Scheduler]:
        clock, cluster, scheduler = _world()
        await scheduler.start()
        for i in range(2):
            cluster.create_pod(_member(i, T0, f"first-{i}"))
        await scheduler.run_until_idle()
        assert all(cluster.pods[key].node_name == "n" for key in MEMBERS)
        clock.advance(600)
        await _end(clock, cluster, scheduler)  # well within 30 minutes: met
        for key in MEMBERS:
            cluster.delete_pod(key)
        await scheduler.run_until_idle()
        clock.advance(60)
        for i in range(2):
            cluster.create_pod(_member(i, clock.now(), f"second-{i}"))
        await scheduler.run_until_idle()
        clock.advance(3600)  # past its own 30 minutes: missed
        await _end(clock, cluster, scheduler)
        return cluster, scheduler

    cluster, scheduler = asyncio.run(run())
    assert _deadlines(scheduler) == {("met",): 1.0, ("missed",): 1.0}
    for key in MEMBERS:
        assert cluster.conditions[key]["pysched.io/Deadline"].reason == "DeadlineMissed"


@pytest.mark.parametrize("looked_at", [True, False], ids=["after-a-reconcile", "before-any-reconcile"])
def test_a_running_gpu_gang_a_new_leader_finds_counts_once(looked_at: bool) -> None:
    """Autoscale leaves GPU pods alone, so a gang a previous leader bound was never seen as one:
    each member's end counted again."""

    async def run() -> Scheduler:
        clock, cluster, scheduler = _world()
        for i in range(2):
            cluster.create_pod(_member(i, T0, f"gpu-{i}", gpu=True, node="n"))
        await scheduler.start()
        scheduler.take_over([])
        await scheduler.run_until_idle()
        if looked_at:
            clock.advance(120)  # past a reconcile
            await scheduler.run_until_idle()
        await _end(clock, cluster, scheduler)
        return scheduler

    assert _deadlines(asyncio.run(run())) == {("met",): 1.0, ("missed",): 0.0}


def _indexed(index: int, created: float, uid: str) -> dict[str, Any]:
    """A bound GPU worker of the Indexed Job `ddp` (its gang's minimum is the Job's)."""
    raw = _member(index, created, uid, gpu=True, node="n")
    del raw["metadata"]["annotations"][MIN_MEMBERS], raw["metadata"]["labels"][JOB_LABEL]
    raw["metadata"]["labels"][COMPLETION_INDEX] = str(index)
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "ddp", "uid": "job-uid", "controller": True}
    raw["metadata"]["ownerReferences"] = [owner]
    return raw


DDP = job_key("default", JobSource.BATCH, "ddp")


async def _running_indexed_gang_taken_over() -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    """Two bound GPU workers of the Indexed Job `ddp` a new leader finds, past its first reconcile."""
    clock, cluster, scheduler = _world()
    cluster.set_job_minimum(DDP, 2)
    for i in range(2):
        cluster.create_pod(_indexed(i, T0, f"indexed-{i}"))
    cluster.add_owner("job-uid", T0)
    await scheduler.start()
    scheduler.take_over([])
    clock.advance(120)  # past a reconcile
    await scheduler.run_until_idle()
    return clock, cluster, scheduler


def test_an_indexed_jobs_gpu_gang_a_new_leader_finds_counts_once_as_its_minimum_drops() -> None:
    """The Job's minimum is what it still has to complete: once a worker succeeded, its keys no
    longer say the rest is a gang. Seen running, it is one."""

    async def run() -> Scheduler:
        clock, cluster, scheduler = await _running_indexed_gang_taken_over()
        cluster.set_job_minimum(DDP, 1)  # one worker has succeeded, as the Job's status says
        await _end(clock, cluster, scheduler)
        return scheduler

    assert _deadlines(asyncio.run(run())) == {("met",): 1.0, ("missed",): 0.0}


def test_a_worker_its_job_replaces_after_the_verdict_carries_the_verdict() -> None:
    """A controller's pods are one run while the controller lives, whenever each was created."""

    async def run() -> tuple[SimulatedCluster, Scheduler]:
        clock, cluster, scheduler = await _running_indexed_gang_taken_over()
        cluster.finish_pod(MEMBERS[0], "Failed")  # the gang's verdict: missed
        await scheduler.run_until_idle()
        cluster.delete_pod(MEMBERS[0])
        clock.advance(60)
        cluster.create_pod(_indexed(0, clock.now(), "indexed-0-again"))  # the Job controller's replacement
        await scheduler.run_until_idle()
        await _end(clock, cluster, scheduler)
        return cluster, scheduler

    cluster, scheduler = asyncio.run(run())
    assert _deadlines(scheduler) == {("met",): 0.0, ("missed",): 1.0}
    assert cluster.conditions[MEMBERS[0]]["pysched.io/Deadline"].reason == "DeadlineMissed"


def _wave(name: str, created: float) -> dict[str, Any]:
    """A pod of the batch Job `waves` (3 completions, one at a time), due 30 minutes after the Job."""
    notes = {"pysched.io/deadline": "30m", "pysched.io/total-steps": "10000"}
    raw = pod_dict(name, cpu="2", created=created, uid=f"uid-{name}", annotations=notes, node_name="n")
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "waves", "uid": "waves-uid", "controller": True}
    raw["metadata"]["ownerReferences"] = [owner]
    return raw


WAVES = job_key("default", JobSource.BATCH, "waves")


@pytest.mark.parametrize("status_lags", [False, True])
def test_a_job_of_several_waves_is_judged_once_at_its_last_completion(status_lags: bool) -> None:
    """Its first pod ended in time, its last after the deadline: the Job missed it. Judged at the
    first pod's end, it was told met (and each wave counted again)."""

    async def run() -> tuple[SimulatedCluster, Scheduler]:
        clock, cluster, scheduler = _world()
        cluster.add_owner("waves-uid", T0)
        await scheduler.start()
        scheduler.take_over([])
        for left, name in ((3, "waves-a"), (2, "waves-b"), (1, "waves-c")):
            cluster.completions_left[WAVES] = left
            cluster.create_pod(_wave(name, clock.now()))
            await scheduler.run_until_idle()
            clock.advance(900)  # 15 minutes each: the third ends 45 minutes in
            if name == "waves-c" and not status_lags:
                cluster.completions_left[WAVES] = 0  # the Job counted it before its pod's end came
            cluster.finish_pod(PodKey(f"default/{name}"), "Succeeded")
            await scheduler.run_until_idle()
            assert not [e for e in cluster.events if e.reason in ("DeadlineMet", "DeadlineMissed")] or name == "waves-c"
        cluster.completions_left[WAVES] = 0  # its Complete condition
        clock.advance(120)  # a reconcile
        await scheduler.run_until_idle()
        return cluster, scheduler

    cluster, scheduler = asyncio.run(run())
    assert _deadlines(scheduler) == {("met",): 0.0, ("missed",): 1.0}
    verdicts = [(e.pod, e.reason) for e in cluster.events if e.reason in ("DeadlineMet", "DeadlineMissed")]
    assert verdicts == [("default/waves-c", "DeadlineMissed")]


def test_a_jobset_of_several_jobs_is_judged_once() -> None:
    """A JobSet's pods are controlled by its Jobs (here a driver Job and a workers Job): one run of
    the JobSet, told by the uid its controller labels every pod with, is one verdict."""

    def member(name: str, replicated: str, index: int, job_uid: str) -> dict[str, Any]:
        raw = pod_dict(
            name,
            cpu="2",
            created=T0,
            annotations={"pysched.io/deadline": "2h", "pysched.io/total-steps": "1000"},
            labels={
                JOBSET_LABEL: "js",
                JOBSET_UID_LABEL: "uid-js",
                REPLICATED_JOB_LABEL: replicated,
                JOBSET_JOB_INDEX_LABEL: "0",
                COMPLETION_INDEX: str(index),
            },
        )
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": f"js-{replicated}-0", "uid": job_uid}
        raw["metadata"]["ownerReferences"] = [{**owner, "controller": True}]
        return raw

    async def run() -> Scheduler:
        clock, cluster, scheduler = _world()
        for uid in ("uid-driver", "uid-workers"):
            cluster.add_owner(uid, T0)
        cluster.set_job_minimum(job_key("default", JobSource.JOBSET, "js"), 3)
        await scheduler.start()
        cluster.create_pod(member("js-driver-0-0", "driver", 0, "uid-driver"))
        for i in range(2):
            cluster.create_pod(member(f"js-workers-0-{i}", "workers", i, "uid-workers"))
        await scheduler.run_until_idle()
        assert all(pod.node_name == "n" for pod in cluster.pods.values())
        clock.advance(600)
        for key in list(cluster.pods):
            cluster.finish_pod(key, "Succeeded")
            clock.advance(1)
            await scheduler.run_until_idle()
        return scheduler

    scheduler = asyncio.run(run())
    assert _deadlines(scheduler) == {("met",): 1.0, ("missed",): 0.0}  # one per child Job before
