"""The JobSet controller on the shared control plane: a JobSet becomes one Job per replicated Job,
the Job controller makes their pods with the JobSet's labels, and the validating webhook, called by
URL, refuses what the schema lets through."""

from __future__ import annotations

from typing import Any

import pytest

from pysched.api.jobs import JOBSET_JOB_INDEX_LABEL as JOB_INDEX_LABEL
from pysched.api.jobs import JOBSET_LABEL as JOBSET_NAME_LABEL
from pysched.api.jobs import REPLICATED_JOB_LABEL
from pysched.testing import KubeAPI, KubeAPIError, wait_for
from pysched.testing.controlplane import SCHEDULING_API, ManagedProcess
from pysched.testing.helpers import make_pod
from pysched.testing.jobset import JOBSET_API, first_job_depends_on

pytestmark = pytest.mark.integration

UNSERVED = "nobody-serves-this"  # the pods stay Pending: no scheduler binds them


def jobsets(namespace: str) -> str:
    return f"/apis/{JOBSET_API}/namespaces/{namespace}/jobsets"


def replicated_job(name: str, pods: int) -> dict[str, Any]:
    pod = make_pod("unused", scheduler=UNSERVED)
    pod["spec"]["restartPolicy"] = "Never"
    job = {"completionMode": "Indexed", "completions": pods, "parallelism": pods, "template": {"spec": pod["spec"]}}
    return {"name": name, "replicas": 1, "template": {"spec": job}}


def jobset_of(name: str, *replicated_jobs: dict[str, Any]) -> dict[str, Any]:
    spec = {"replicatedJobs": list(replicated_jobs)}
    return {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": {"name": name}, "spec": spec}


def test_a_jobset_makes_jobs_and_their_pods_carry_its_labels(
    jobset: ManagedProcess, kube: KubeAPI, namespace: str
) -> None:
    created = kube.post(
        jobsets(namespace), jobset_of("train", replicated_job("workers", 2), replicated_job("driver", 2))
    )

    jobs = wait_for(
        lambda: kube.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"],
        lambda items: len(items) == 2,
        what="the JobSet's two Jobs",
    )
    assert sorted(j["metadata"]["name"] for j in jobs) == ["train-driver-0", "train-workers-0"]
    for job in jobs:
        owner = next(o for o in job["metadata"]["ownerReferences"] if o.get("controller"))
        assert (owner["kind"], owner["uid"]) == ("JobSet", created["metadata"]["uid"])

    pods = wait_for(
        lambda: kube.get(f"/api/v1/namespaces/{namespace}/pods")["items"],
        lambda items: len(items) == 4,
        what="two pods of each Job",
    )
    by_replicated_job: dict[str, int] = {}
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert labels[JOBSET_NAME_LABEL] == "train"
        assert labels[JOB_INDEX_LABEL] == "0"  # the one replica of its replicated Job
        by_replicated_job[labels[REPLICATED_JOB_LABEL]] = by_replicated_job.get(labels[REPLICATED_JOB_LABEL], 0) + 1
        assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    assert by_replicated_job == {"workers": 2, "driver": 2}
    # Each child Job is gang-shaped (Indexed, completions == parallelism > 1): with WorkloadWithJob
    # the Job controller gives it a PodGroup of its own, which its pods name.
    groups = {
        g["metadata"]["name"]: g for g in kube.get(f"/apis/{SCHEDULING_API}/namespaces/{namespace}/podgroups")["items"]
    }
    assert len(groups) == 2 and all(g["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2 for g in groups.values())
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == set(groups)
    jobset.check()  # the manager is still running


def test_the_validating_webhook_refuses_an_invalid_jobset(
    jobset: ManagedProcess, kube: KubeAPI, namespace: str
) -> None:
    with pytest.raises(KubeAPIError) as refused:
        kube.post(jobsets(namespace), first_job_depends_on("invalid"))
    assert 'admission webhook "vjobset.kb.io" denied the request' in str(refused.value)
    assert "DependsOn can't be set for the first ReplicatedJob" in str(refused.value)
    assert not kube.exists(f"{jobsets(namespace)}/invalid")


def test_a_duplicate_replicated_job_name_is_refused_by_the_schema(
    jobset: ManagedProcess, kube: KubeAPI, namespace: str
) -> None:
    with pytest.raises(KubeAPIError) as refused:
        kube.post(jobsets(namespace), jobset_of("twice", replicated_job("same", 1), replicated_job("same", 1)))
    assert refused.value.status == 422
    assert "spec.replicatedJobs[1]: Duplicate value" in str(refused.value)
