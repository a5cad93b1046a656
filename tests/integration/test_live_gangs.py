"""Gangs against the real kube-apiserver and kube-controller-manager: an Indexed batch/v1 Job's
workers bind all together or not at all (the Job controller gives it a Workload API PodGroup whose
minimum is its parallelism), and so do pods named by `pysched.io/job`, by a scheduler-plugins
PodGroup and by a Workload API PodGroup of their own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pysched.api.annotations import DEADLINE, TOTAL_STEPS
from pysched.api.jobs import REPLICATED_JOB_LABEL
from pysched.api.times import parse_time
from pysched.testing import KubeAPI, LocalControlPlane, NodeSpec, wait_for
from pysched.testing.controlplane import SCHEDULING_API, ManagedProcess, create_fake_nodes
from pysched.testing.emulator import KubeletEmulator
from pysched.testing.jobset import JOBSET_API
from pysched.testing.scheduler import (
    TEST_LABEL,
    SchedulerProcess,
    create_pods,
    events,
    gang_member,
    list_pods,
    namespace_nodes,
    pod_for,
    pysched_profile,
    start_scheduler,
)
from pysched.workload.job import Job
from pysched.workload.pod import emulate_annotations
from pysched.workload.speed import Amdahl

pytestmark = pytest.mark.integration


def _bound(pods: list[dict[str, Any]]) -> int:
    return sum(1 for pod in pods if pod["spec"].get("nodeName"))


@contextlib.contextmanager
def _one_more_node(kube: KubeAPI, namespace: str, cpu: str) -> Iterator[None]:
    """A node added to this test's nodes mid-test (deleted afterwards)."""
    spec = NodeSpec(cpu=cpu, memory="32Gi", labels={TEST_LABEL: namespace})
    names = create_fake_nodes(kube, 1, spec, prefix=f"{namespace}-x")
    try:
        yield
    finally:
        for node in names:
            kube.delete(f"/api/v1/nodes/{node}")


def _all_tried(kube: KubeAPI, namespace: str, count: int) -> list[dict[str, Any]]:
    """Wait until `count` pods exist and each was tried and left Pending (PodScheduled False).
    On the shared plane other tests' nodes have free room too, so the gang is refused by its
    members' filters rather than by the room check, and no JobUnschedulable event need come."""
    return wait_for(
        lambda: list_pods(kube, namespace),
        lambda pods: (
            len(pods) == count
            and all(
                p["spec"].get("nodeName")
                or any(
                    c.get("type") == "PodScheduled" and c.get("status") == "False"
                    for c in p["status"].get("conditions", [])
                )
                for p in pods
            )
        ),
        timeout=60,
        what=f"{count} pods tried",
    )


def _told(kube: KubeAPI, namespace: str, text: str) -> None:
    """Wait for a FailedScheduling event saying `text`."""
    wait_for(
        lambda: events(kube, namespace, "FailedScheduling"),
        lambda found: any(text in e.get("note", "") for e in found),
        timeout=30,
        what=f"FailedScheduling saying {text!r}",
    )


def _all_bound(kube: KubeAPI, namespace: str, count: int, timeout: float = 30) -> None:
    wait_for(
        lambda: list_pods(kube, namespace), lambda found: _bound(found) == count, timeout=timeout, what=f"{count} bound"
    )


def _indexed_job(namespace: str, scheduler: str, name: str, workers: int) -> dict[str, Any]:
    pod = pod_for("unused", scheduler, namespace, "4", memory="1Gi")
    pod["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "parallelism": workers,
            "completions": workers,
            "template": {"metadata": {"labels": {"app": "ddp"}}, "spec": pod["spec"]},
        },
    }


def test_an_indexed_job_binds_no_worker_until_all_fit_then_all(
    kube: KubeAPI, namespace: str, default_scheduler: SchedulerProcess
) -> None:
    name = f"pysched-{namespace}"
    with namespace_nodes(kube, namespace, 3, cpu="4"):
        kube.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", _indexed_job(namespace, name, "ddp", 4))
        pods = _all_tried(kube, namespace, 4)
        assert _bound(pods) == 0  # 3 of 4 DDP workers would wait in rendezvous forever
        with _one_more_node(kube, namespace, cpu="4"):
            _all_bound(kube, namespace, 4, timeout=60)
            assert len(events(kube, namespace, "JobUnschedulable")) <= 1  # one per job, not per pod


def test_a_labelled_gang_waits_for_its_last_member_then_binds_together(
    kube: KubeAPI, namespace: str, default_scheduler: SchedulerProcess
) -> None:
    name = f"pysched-{namespace}"

    def member(i: int) -> dict[str, Any]:
        return gang_member(f"w{i}", name, namespace, "train", 3)

    with namespace_nodes(kube, namespace, 2):
        create_pods(kube, namespace, [member(0), member(1)])
        _told(kube, namespace, "waiting for 1 more")
        assert _bound(list_pods(kube, namespace)) == 0
        kube.create_pod(namespace, member(2))
        _all_bound(kube, namespace, 3)


def _plugins_group(name: str, minimum: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": minimum},
    }


def test_a_podgroup_gang_waits_for_its_podgroup_then_its_members(
    kube: KubeAPI, namespace: str, default_scheduler: SchedulerProcess
) -> None:
    name = f"pysched-{namespace}"

    def member(i: int) -> dict[str, Any]:
        pod = pod_for(f"m{i}", name, namespace, "1")
        pod["metadata"].setdefault("labels", {})["scheduling.x-k8s.io/pod-group"] = "gang"
        return pod

    with namespace_nodes(kube, namespace, 2):
        create_pods(kube, namespace, [member(0), member(1)])
        _told(kube, namespace, "no such PodGroup is known yet")
        kube.post(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups", _plugins_group("gang", 3))
        _told(kube, namespace, "waiting for 1 more")
        assert _bound(list_pods(kube, namespace)) == 0
        kube.create_pod(namespace, member(2))
        _all_bound(kube, namespace, 3)


def test_pods_naming_a_workload_api_podgroup_bind_as_one_gang(
    kube: KubeAPI, namespace: str, default_scheduler: SchedulerProcess
) -> None:
    name = f"pysched-{namespace}"
    group = {
        "apiVersion": SCHEDULING_API,
        "kind": "PodGroup",
        "metadata": {"name": "ddp"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
    }
    kube.post(f"/apis/{SCHEDULING_API}/namespaces/{namespace}/podgroups", group)

    def member(i: int) -> dict[str, Any]:
        pod = pod_for(f"w{i}", name, namespace, "2")
        pod["spec"]["schedulingGroup"] = {"podGroupName": "ddp"}
        return pod

    with namespace_nodes(kube, namespace, 1, cpu="4"):  # room for two of the three
        create_pods(kube, namespace, [member(i) for i in range(3)])
        assert _bound(_all_tried(kube, namespace, 3)) == 0
        with _one_more_node(kube, namespace, cpu="4"):
            _all_bound(kube, namespace, 3, timeout=60)


def test_each_replicated_job_of_a_jobset_binds_all_together_or_not_at_all(
    kube: KubeAPI, namespace: str, default_scheduler: SchedulerProcess, jobset: ManagedProcess
) -> None:
    """The Job controller gives each of the JobSet's Jobs a gang PodGroup: with room for three
    workers, one replicated job of two binds whole and the other waits, none of it bound."""
    name = f"pysched-{namespace}"
    pod = pod_for("unused", name, namespace, "2", memory="1Gi")
    pod["spec"]["restartPolicy"] = "Never"
    job = {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "template": {"spec": pod["spec"]}}
    body = {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": "train"},
        "spec": {"replicatedJobs": [{"name": r, "replicas": 1, "template": {"spec": job}} for r in ("a", "b")]},
    }
    with namespace_nodes(kube, namespace, 3, cpu="2"):
        kube.post(f"/apis/{JOBSET_API}/namespaces/{namespace}/jobsets", body)
        pods = wait_for(
            lambda: _all_tried(kube, namespace, 4),
            lambda found: _bound(found) == 2,
            timeout=60,
            what="one replicated job bound, the other tried and pending",
        )
        bound = {p["metadata"]["labels"][REPLICATED_JOB_LABEL] for p in pods if p["spec"].get("nodeName")}
        assert len(bound) == 1  # both bound workers are of the same replicated job
        with _one_more_node(kube, namespace, cpu="2"):
            _all_bound(kube, namespace, 4, timeout=60)


EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"


def _for_this_test(manifest: dict[str, Any], scheduler: str, namespace: str) -> dict[str, Any]:
    """An example as shipped, with this test's scheduler and nodes."""
    templates = (
        [manifest["spec"]["template"]]
        if manifest["kind"] == "Job"
        else [job["template"]["spec"]["template"] for job in manifest["spec"]["replicatedJobs"]]
    )
    for template in templates:
        template["spec"]["schedulerName"] = scheduler
        template["spec"]["nodeSelector"] = {TEST_LABEL: namespace}
    return manifest


def test_the_example_indexed_job_and_jobset_bind_whole_on_a_dev_cluster(
    kube: KubeAPI, namespace: str, default_scheduler: SchedulerProcess, jobset: ManagedProcess
) -> None:
    name = f"pysched-{namespace}"
    job = _for_this_test(yaml.safe_load((EXAMPLES / "ddp-indexed-job.yaml").read_text()), name, namespace)
    sets = _for_this_test(yaml.safe_load((EXAMPLES / "ddp-jobset.yaml").read_text()), name, namespace)
    # 24 CPUs are asked for: 32 leave room for either job to bind first (with 24, the JobSet's pods
    # spread by LeastAllocated could leave no node with 4 CPUs for the Job's last worker).
    with namespace_nodes(kube, namespace, 4, cpu="8"):
        kube.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
        kube.post(f"/apis/{JOBSET_API}/namespaces/{namespace}/jobsets", sets)
        wait_for(
            lambda: list_pods(kube, namespace),
            lambda found: len(found) == 8 and _bound(found) == 8,
            timeout=90,
            what="the example Job's four workers and the JobSet's four pods bound",
        )


# Job-level deadlines: lstm workers, t(c) = 0.012 + 0.588 / min(c, 16) s a step, on an emulator
# running 50 emulated seconds per wall second; each job's deadline is 10 s after its Job's creation.
SCALE = 50.0
DEADLINE_S = 15  # wall seconds; long enough that the ramp-up (observe, then grow) is a small part
TRAINING = Job("ddp", 0.0, 4000, 1000, "64Mi", Amdahl.from_t1(0.6, 0.02, 16), model="lstm", restart_on_resize=False)


def _training_template(scheduler: str, namespace: str, steps: int) -> dict[str, Any]:
    pod = pod_for("unused", scheduler, namespace, "1")
    pod["spec"]["restartPolicy"] = "Never"
    notes = {**emulate_annotations(TRAINING, seed=3, noise=0.0), TOTAL_STEPS: str(steps), DEADLINE: f"{DEADLINE_S}s"}
    return {"metadata": {"annotations": notes}, "spec": pod["spec"]}


def _indexed(template: dict[str, Any], workers: int) -> dict[str, Any]:
    return {"completionMode": "Indexed", "parallelism": workers, "completions": workers, "template": template}


@pytest.mark.emulator(time_scale=SCALE, progress_interval=60.0)
def test_an_indexed_job_and_a_jobsets_jobs_meet_deadlines_their_requests_would_miss(
    control_plane: LocalControlPlane,
    kube: KubeAPI,
    namespace: str,
    tmp_path: Path,
    jobset: ManagedProcess,
    emulator: KubeletEmulator,
) -> None:
    """Autoscaling resizes every worker of a gang together. At its request (1 CPU a worker) no job
    here can finish in time: W workers do at most W / 0.6 global steps a second."""
    jobs = {"ddp": (4, 5250), "train-a-0": (2, 3000), "train-b-0": (2, 3000)}  # Job: (workers, steps)
    for workers, steps in jobs.values():
        assert steps * 0.6 / workers / SCALE > DEADLINE_S
    name = f"pysched-{namespace}"
    config = pysched_profile(tmp_path / "profiles.yaml", name, intervalSeconds=0.2, cooldownSeconds=1.0)
    scheduler = start_scheduler(control_plane, name, config=config, args=["--qps=1000", "--burst=1000"])
    try:
        with namespace_nodes(kube, namespace, 6, cpu="8"):
            ddp = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ddp"}}
            ddp["spec"] = _indexed(_training_template(name, namespace, jobs["ddp"][1]), 4)
            replicated = [
                {
                    "name": r,
                    "replicas": 1,
                    "template": {"spec": _indexed(_training_template(name, namespace, jobs[f"train-{r}-0"][1]), 2)},
                }
                for r in ("a", "b")
            ]
            sets = {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": {"name": "train"}}
            sets["spec"] = {"replicatedJobs": replicated}
            kube.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", ddp)
            kube.post(f"/apis/{JOBSET_API}/namespaces/{namespace}/jobsets", sets)
            finished: dict[str, float] = {}
            scaled: dict[str, set[str]] = {job: set() for job in jobs}  # CPUs every worker had at once

            def note_finished(pods: list[dict[str, Any]]) -> bool:
                for job in jobs:
                    members = [p for p in pods if p["metadata"]["labels"].get("job-name") == job]
                    cpus = {p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for p in members}
                    if len(members) == jobs[job][0] and len(cpus) == 1:
                        scaled[job] |= cpus
                    done = len(members) == jobs[job][0] and all(
                        p["status"].get("phase") == "Succeeded" for p in members
                    )
                    if done and job not in finished:
                        # When its last worker ended, as the kubelet wrote it (whole seconds).
                        finished[job] = max(
                            parse_time(p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"])
                            for p in members
                        )
                return len(finished) == len(jobs)

            wait_for(
                lambda: list_pods(kube, namespace), note_finished, timeout=60, interval=0.05, what="every job done"
            )
            for job in jobs:
                created = parse_time(
                    kube.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{job}")["metadata"]["creationTimestamp"]
                )
                assert finished[job] <= created + DEADLINE_S, (  # both stamps truncated to seconds
                    f"{job} missed by {finished[job] - created - DEADLINE_S:.2f}s"
                )
                assert scaled[job] - {"1"}, f"{job}'s workers were never all resized together: {scaled[job]}"
            # One verdict per job, not per member.
            wait_for(
                lambda: scheduler.metric(f'pysched_deadlines_total{{profile="{name}",result="met"}}'),
                lambda met: met == len(jobs),
                timeout=10,
                what="each job's deadline counted met once",
            )
            assert emulator.errors == []
    finally:
        assert scheduler.stop() == 0, scheduler.log()
