"""The alpha workload API on the test control plane (scheduling.k8s.io/v1alpha2 and its feature
gates): a gang PodGroup and a pod naming it are stored as written, and the Job controller gives an
Indexed Job's pods their completion index and, for a gang-shaped Job, a Workload and a PodGroup."""

from __future__ import annotations

from typing import Any

import pytest

from pysched.api.jobs import COMPLETION_INDEX
from pysched.testing import KubeAPI, wait_for
from pysched.testing.controlplane import SCHEDULING_API
from pysched.testing.helpers import make_pod

pytestmark = pytest.mark.integration

UNSERVED = "nobody-serves-this"  # the pods stay Pending: no scheduler binds them
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"


def groups_path(namespace: str, resource: str) -> str:
    return f"/apis/{SCHEDULING_API}/namespaces/{namespace}/{resource}"


def test_podgroup_and_a_pod_that_names_it(kube: KubeAPI, namespace: str) -> None:
    group = {
        "apiVersion": SCHEDULING_API,
        "kind": "PodGroup",
        "metadata": {"name": "gang"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
    }
    kube.post(groups_path(namespace, "podgroups"), group)
    pod = make_pod("member", scheduler=UNSERVED)
    pod["spec"]["schedulingGroup"] = {"podGroupName": "gang"}
    kube.create_pod(namespace, pod)

    stored = kube.get(f"{groups_path(namespace, 'podgroups')}/gang")
    assert stored["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
    assert kube.get_pod(namespace, "member")["spec"]["schedulingGroup"] == {"podGroupName": "gang"}


def indexed_job(name: str, pods: int) -> dict[str, Any]:
    pod = make_pod("unused", scheduler=UNSERVED)
    pod["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "template": {"spec": pod["spec"]},
        },
    }


def test_indexed_job_pods_carry_their_index_and_the_jobs_podgroup(kube: KubeAPI, namespace: str) -> None:
    job = kube.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", indexed_job("train", 2))
    uid = job["metadata"]["uid"]
    pods = wait_for(
        lambda: kube.get(f"/api/v1/namespaces/{namespace}/pods")["items"],
        lambda items: len(items) == 2,
        what="the Job's two pods",
    )
    assert sorted(p["metadata"]["labels"][COMPLETION_INDEX] for p in pods) == ["0", "1"]
    for pod in pods:
        meta = pod["metadata"]
        assert meta["annotations"][COMPLETION_INDEX] == meta["labels"][COMPLETION_INDEX]
        assert meta["labels"][CONTROLLER_UID] == uid
        assert "batch.kubernetes.io/job-tracking" in meta["finalizers"]
        assert pod["spec"]["hostname"] == f"train-{meta['labels'][COMPLETION_INDEX]}"
        owner = next(o for o in meta["ownerReferences"] if o.get("controller"))
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Job", "train", uid)

    # WorkloadWithJob: parallelism == completions > 1 and Indexed makes a gang of the Job.
    workloads = kube.get(groups_path(namespace, "workloads"))["items"]
    assert [w["spec"]["controllerRef"] for w in workloads] == [{"apiGroup": "batch", "kind": "Job", "name": "train"}]
    (group,) = kube.get(groups_path(namespace, "podgroups"))["items"]
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    assert group["spec"]["podGroupTemplateRef"]["workload"]["workloadName"] == workloads[0]["metadata"]["name"]
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {group["metadata"]["name"]}
