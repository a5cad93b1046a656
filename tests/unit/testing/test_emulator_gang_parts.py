"""The kubelet emulator's gangs, the parts that need no API: which truth a job gets, its members'
ranks, and a JobSet's minimum. (Against the real apiserver: tests/integration/test_emulator_gangs.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from pysched.api.jobs import JOB_LABEL, MIN_MEMBERS, ROLE_LABEL, JobRef, job_of
from pysched.api.objects import pod_from_dict
from pysched.testing.emulator_gangs import Slot, _jobset_minimum, new_gang, rank_of
from pysched.testing.helpers import make_pod
from pysched.workload.catalogue import builtin_catalogue
from pysched.workload.gang import AllReduce, DataParallel, ParameterServer
from pysched.workload.pod import EMULATE_MODEL, EMULATE_SEED

CATALOGUE = builtin_catalogue()


def member(name: str, model: str = "lstm", role: str | None = None, seed: str = "1") -> dict[str, Any]:
    pod = make_pod(name, annotations={EMULATE_MODEL: model, EMULATE_SEED: seed, MIN_MEMBERS: "3"})
    pod["metadata"]["namespace"] = "ns"
    pod["metadata"]["labels"] = {JOB_LABEL: "train", **({ROLE_LABEL: role} if role else {})}
    return pod


def ref_of(pod: dict[str, Any]) -> JobRef:
    ref = job_of(pod_from_dict(pod))
    assert ref is not None
    return ref


def test_a_gang_gets_the_truth_its_members_describe() -> None:
    ddp = member("w0")
    gang = new_gang(ddp, ref_of(ddp), 3, CATALOGUE, 0)
    assert gang is not None and isinstance(gang.run.gang.speed, AllReduce)
    assert len(gang.run.gang.members) == 3
    ps = member("w0", role="worker")
    made = new_gang(ps, ref_of(ps), 3, CATALOGUE, 0)
    assert made is not None and isinstance(made.run.gang.speed, ParameterServer)
    gpu = member("g0", model="resnet50")
    on_gpus = new_gang(gpu, ref_of(gpu), 3, CATALOGUE, 8)
    assert on_gpus is not None and isinstance(on_gpus.run.gang.speed, DataParallel)
    assert on_gpus.run.gang.speed.gpus_per_node == 8
    plain = make_pod("p")
    plain["metadata"]["labels"] = {JOB_LABEL: "train"}
    assert new_gang(plain, ref_of(plain), 3, CATALOGUE, 0) is None  # names no model: not a training job


def test_every_member_draws_the_same_truth_whichever_is_seen_first() -> None:
    first, second = member("w0"), member("w1")
    a, b = new_gang(first, ref_of(first), 3, CATALOGUE, 0), new_gang(second, ref_of(second), 3, CATALOGUE, 0)
    assert a is not None and b is not None
    assert a.spec.job.truth == b.spec.job.truth and a.run.gang.speed == b.run.gang.speed
    other = member("w0", seed="2")
    c = new_gang(other, ref_of(other), 3, CATALOGUE, 0)
    assert c is not None and c.spec.job.truth != a.spec.job.truth


def test_a_model_with_no_gang_truth_is_refused() -> None:
    pod = member("w0", model="resnet50")
    pod["metadata"]["annotations"][EMULATE_MODEL] = "nonexistent"
    with pytest.raises(ValueError, match="unknown model"):
        new_gang(pod, ref_of(pod), 3, CATALOGUE, 0)


def test_rank_zero_is_the_first_worker_and_servers_come_last() -> None:
    pods = [member("train-ps-0", role="ps"), member("train-worker-1", role="worker"), member("train-worker-0")]
    gang = new_gang(pods[1], ref_of(pods[1]), 3, CATALOGUE, 0)
    assert gang is not None
    for i, pod in enumerate(pods):
        gang.members[("ns", pod["metadata"]["name"])] = Slot("uid", i, rank_of(pod, ref_of(pod)))
    assert gang.reporter() == ("ns", "train-worker-0")
    assert gang.free_index() is None
    del gang.members[("ns", "train-worker-0")]
    assert gang.reporter() == ("ns", "train-worker-1") and gang.free_index() == 2


def test_a_jobsets_minimum_sums_its_indexed_replicated_jobs() -> None:
    def replicated(replicas: Any, parallelism: int, mode: str = "Indexed") -> dict[str, Any]:
        spec = {"completionMode": mode, "parallelism": parallelism, "completions": parallelism}
        return {"replicas": replicas, "template": {"spec": spec}}

    assert _jobset_minimum({"replicatedJobs": [replicated(1, 2), replicated(2, 3)]}) == 8
    assert _jobset_minimum({"replicatedJobs": [replicated(1, 2), replicated(1, 2, "NonIndexed")]}) is None
    assert _jobset_minimum({"replicatedJobs": [replicated("2", 2)]}) is None
    assert _jobset_minimum({}) is None
