"""Gangs against the real kube-apiserver and kube-controller-manager: an Indexed batch/v1 Job's
workers bind all together or not at all (its parallelism is the minimum), and a gang of plain pods
named by `pysched.io/job` does the same."""

from __future__ import annotations

from typing import Any

import pytest

from pysched.api.jobs import JOB_LABEL, MIN_MEMBERS
from pysched.testing import KubeAPI, NodeSpec, wait_for
from pysched.testing.controlplane import create_fake_nodes
from pysched.testing.scheduler import (
    TEST_LABEL,
    SchedulerProcess,
    create_pods,
    events,
    list_pods,
    namespace_nodes,
    pod_for,
)

pytestmark = pytest.mark.integration


def _bound(pods: list[dict[str, Any]]) -> int:
    return sum(1 for pod in pods if pod["spec"].get("nodeName"))


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
        told = wait_for(
            lambda: events(kube, namespace, "JobUnschedulable"),
            lambda found: len(found) >= 1,
            timeout=30,
            what="the job told it cannot fit",
        )
        assert "Job " in told[0]["note"] and "the cluster has room for 3" in told[0]["note"], told[0]["note"]
        pods = list_pods(kube, namespace)
        assert len(pods) == 4 and _bound(pods) == 0  # 3 of 4 DDP workers would wait in rendezvous forever
        extra = create_fake_nodes(
            kube, 1, NodeSpec(cpu="4", memory="32Gi", labels={TEST_LABEL: namespace}), prefix=f"{namespace}-x"
        )
        try:
            wait_for(
                lambda: list_pods(kube, namespace),
                lambda found: _bound(found) == 4,
                timeout=60,
                what="every worker bound once a fourth node came",
            )
            assert len(events(kube, namespace, "JobUnschedulable")) == 1  # one per job, not per pod
        finally:
            for node in extra:
                kube.delete(f"/api/v1/nodes/{node}")


def test_a_labelled_gang_waits_for_its_last_member_then_binds_together(
    kube: KubeAPI, namespace: str, default_scheduler: SchedulerProcess
) -> None:
    name = f"pysched-{namespace}"

    def member(i: int) -> dict[str, Any]:
        pod = pod_for(f"w{i}", name, namespace, "1")
        pod["metadata"].setdefault("labels", {})[JOB_LABEL] = "train"
        pod["metadata"].setdefault("annotations", {})[MIN_MEMBERS] = "3"
        return pod

    with namespace_nodes(kube, namespace, 2):
        create_pods(kube, namespace, [member(0), member(1)])
        wait_for(
            lambda: events(kube, namespace, "FailedScheduling"),
            lambda found: any("waiting for 1 more" in e.get("note", "") for e in found),
            timeout=30,
            what="the members told they wait for one more",
        )
        assert _bound(list_pods(kube, namespace)) == 0
        kube.create_pod(namespace, member(2))
        wait_for(
            lambda: list_pods(kube, namespace),
            lambda found: _bound(found) == 3,
            timeout=30,
            what="all three bound",
        )
