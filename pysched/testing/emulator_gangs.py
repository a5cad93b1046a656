"""Multi-pod jobs on the kubelet emulator: a gang's members train as one job.

A training pod (it names a model, `pysched.workload.pod`) that belongs to a job
(`pysched.api.jobs.job_of`) whose minimum is 2 or more is a member of a gang. The job trains only
while its minimum members run, at the rate the simulator's gang truths give for what they hold
(`pysched.workload.gang`), run by the very code the simulator runs (`pysched.workload.gang_run`):
a member that leaves pauses it back to its last checkpoint, a member's CPU resize re-times it, and
a change of the job's minimum (an elastic scale) keeps its steps and pauses it (`GangRun.scale`).
Progress is written on rank 0 (the first member in the job's order, parameter servers last), the
member the scheduler reads; when the steps are done every member completes.

The minimum is read as the scheduler reads it: `pysched.io/min-members` on the pod, the PodGroup's
(either API), an Indexed Job's parallelism, or the sum over a JobSet's Indexed replicated jobs. A
job whose minimum is unknown (a missing object, a Kubeflow job) is no gang here: its pods train one
by one. The truth comes from the first member's annotations with the job's name as the seed's
subject, so every member agrees: parameter-server jobs when a member is labelled
`pysched.io/role`, data-parallel GPU jobs for GPU models, all-reduce CPU jobs otherwise.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pysched.api.jobs import (
    POD_GROUP_APIS,
    ROLE_LABEL,
    JobRef,
    JobSource,
    indexed_job_minimum,
    pod_group_minimum,
)
from pysched.testing.jobset import JOBSET_API
from pysched.testing.kube import JSON, KubeAPI, KubeAPIError
from pysched.workload.catalogue import Catalogue
from pysched.workload.gang import PS, WORKER, AllReduce, DataParallel, Gang, GangSpeed, Held, Member, ParameterServer
from pysched.workload.gang import contention as ps_contention
from pysched.workload.gang_run import GangRun
from pysched.workload.pod import PodJob, job_from_pod, truth_rng
from pysched.workload.segment import noise_rng
from pysched.workload.speed import Throughput

PodName = tuple[str, str]  # (namespace, name)


def read_minimum(api: KubeAPI, ref: JobRef) -> int | None:
    """The job's minimum members as its objects state it; None when unknown (no such object, or a
    source that states none). Other API errors raise."""
    if ref.min_members is not None:
        return ref.min_members
    ns = ref.namespace
    try:
        if ref.source in POD_GROUP_APIS:
            base = POD_GROUP_APIS[ref.source][0]
            return pod_group_minimum(api.get(f"{base}/namespaces/{ns}/podgroups/{ref.name}"), ref.source)
        if ref.source is JobSource.BATCH:
            return indexed_job_minimum(api.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{ref.name}").get("spec"))
        if ref.source is JobSource.JOBSET:
            jobset = api.get(f"/apis/{JOBSET_API}/namespaces/{ns}/jobsets/{ref.name}")
            return _jobset_minimum(jobset.get("spec") or {})
    except KubeAPIError as err:
        if err.status in (403, 404):
            return None
        raise
    return None


def _jobset_minimum(spec: Mapping[str, Any]) -> int | None:
    total = 0
    for replicated in spec.get("replicatedJobs") or []:
        replicas = replicated.get("replicas", 1)
        job_spec = ((replicated.get("template") or {}).get("spec")) or {}
        size = indexed_job_minimum(job_spec)
        if size is None or type(replicas) is not int or replicas < 0:
            return None
        total += replicas * size
    return total or None


@dataclass(slots=True)
class Slot:
    uid: str
    index: int  # the member's place in the GangRun
    rank: tuple[bool, tuple[str, int, int], str]  # parameter servers last, then the job's order


@dataclass(frozen=True, slots=True)
class Spare:
    """A running pod of the job beyond its minimum: it takes the place of a member that leaves."""

    uid: str
    rank: tuple[bool, tuple[str, int, int], str]
    held: Held


@dataclass(slots=True)
class EmulatedGang:
    ref: JobRef
    spec: PodJob  # the job's model, total steps, seed and noise
    run: GangRun
    rng: random.Random
    members: dict[PodName, Slot] = field(default_factory=dict)
    spares: dict[PodName, Spare] = field(default_factory=dict)
    done: bool = False
    serial: int = 0  # this gang object among every one the emulator made (versions its timers)

    def version(self) -> int:
        """The current segment's, unique across gang objects (a re-made gang restarts its runs' count)."""
        run = self.run.run
        return (self.serial << 32) | (run.version if run is not None else 0)

    def reporter(self) -> PodName | None:
        """Rank 0: where progress is written."""
        return min(self.members, key=lambda pod: self.members[pod].rank, default=None)

    def free_index(self) -> int | None:
        taken = {slot.index for slot in self.members.values()}
        return next((i for i in range(len(self.run.gang.members)) if i not in taken), None)

    def uid_of(self, pod: PodName) -> str | None:
        slot, spare = self.members.get(pod), self.spares.get(pod)
        return slot.uid if slot is not None else spare.uid if spare is not None else None

    def take_spare(self) -> tuple[PodName, Spare] | None:
        if not self.spares:
            return None
        pod = min(self.spares, key=lambda name: self.spares[name].rank)
        return pod, self.spares.pop(pod)


def rank_of(pod: JSON, ref: JobRef) -> tuple[bool, tuple[str, int, int], str]:
    meta = pod.get("metadata") or {}
    role = (meta.get("labels") or {}).get(ROLE_LABEL)
    return role == PS, ref.order, f"{meta.get('namespace')}/{meta.get('name')}"


def role_of(pod: JSON) -> str:
    return PS if ((pod.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL) == PS else WORKER


def new_gang(pod: JSON, ref: JobRef, size: int, catalogue: Catalogue, gpus_per_node: int) -> EmulatedGang | None:
    """The gang of `ref` read from one member (None when it names no model); ValueError for bad
    annotations or a model with no gang truth."""
    meta = pod.get("metadata") or {}
    as_job = {**pod, "metadata": {**meta, "name": ref.name}}  # the job's name seeds its truth
    spec = job_from_pod(as_job, catalogue)
    if spec is None:
        return None
    job = spec.job
    draw = truth_rng(spec.seed, f"{ref.name}/gang")
    speed: GangSpeed
    if isinstance(job.truth, Throughput):
        speed = DataParallel(draw.uniform(0.9, 1.1), max(1, gpus_per_node))
    else:
        labelled = ROLE_LABEL in (meta.get("labels") or {})
        s = ps_contention(job.model, draw)
        speed = ParameterServer(s) if labelled else AllReduce(s)
    placeholders = tuple(Member(f"{ref.name}-{i}", "", 0, "0") for i in range(size))
    run = GangRun(job, Gang(placeholders, speed))
    return EmulatedGang(ref, spec, run, noise_rng(spec.seed, job))
