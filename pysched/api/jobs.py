"""Which job a pod belongs to, its place among the job's members, and the job's minimum.

A training job is a group of pods scheduled all-or-nothing (a gang). A pod names its job in one of
the ways below, tried in this order (`docs/architecture.md`, "Jobs", has the table):

1. the Workload API: `spec.schedulingGroup.podGroupName` (scheduling.k8s.io PodGroup);
2. scheduler-plugins: the label `scheduling.x-k8s.io/pod-group` (scheduling.x-k8s.io PodGroup);
3. pysched's own label `pysched.io/job`, with the annotation `pysched.io/min-members`;
4. JobSet: the label `jobset.sigs.k8s.io/jobset-name`;
5. Kubeflow training jobs: the label `training.kubeflow.org/job-name`;
6. its controlling batch/v1 Job.

The first three name a group explicitly; two of them naming different groups is a conflict (the
first wins, and the pod gets an event). The last three are implied by a controller. Where the
minimum lives in another object (a PodGroup, an Indexed Job's parallelism) the backend resolves
it (`ClusterBackend.job_minimum`). A pod in no job is a job of one.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pysched.api.ids import JobKey
from pysched.api.limits import clip
from pysched.api.objects import PodInfo

# pysched's own contract: any controller (or none) may set them.
JOB_LABEL = "pysched.io/job"
MIN_MEMBERS = "pysched.io/min-members"
ROLE_LABEL = "pysched.io/role"  # a member's part in a parameter-server job: "ps" or "worker"
MIN_MEMBERS_FORMS = "a whole number of pods from 1 to 10000"
MAX_MEMBERS = 10_000  # pods in one job: beyond any cluster pysched serves, and bounds every count
# Set by other projects' controllers; read only.
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
KUBEFLOW_JOB_LABEL = "training.kubeflow.org/job-name"
KUBEFLOW_REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
KUBEFLOW_REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

NO_ORDER = ("", 0, 0)  # a member that states no place in its job
_COUNT = re.compile(r"^[0-9]{1,5}$")  # ASCII digits only, bounded before int()


class JobSource(enum.Enum):
    """How a pod named its job; the value is the kind in the job's key and in messages."""

    WORKLOAD = "PodGroup.scheduling.k8s.io"
    POD_GROUP = "PodGroup.scheduling.x-k8s.io"
    PYSCHED = "pysched.io/job"
    JOBSET = "JobSet"
    KUBEFLOW = "KubeflowJob"
    BATCH = "Job"

    @property
    def explicit(self) -> bool:
        return self in (JobSource.WORKLOAD, JobSource.POD_GROUP, JobSource.PYSCHED)


# Sources whose minimum only a PodGroup object holds: their pods wait while it is unknown.
GROUP_SOURCES = frozenset({JobSource.WORKLOAD, JobSource.POD_GROUP})


@dataclass(frozen=True, slots=True)
class JobRef:
    """A pod's job as the pod states it."""

    key: JobKey
    source: JobSource
    namespace: str
    name: str
    # Where the member sorts among its job's: (replica type or replicated job, job index, pod index).
    order: tuple[str, int, int] = NO_ORDER
    min_members: int | None = None  # given on the pod itself (pysched.io/min-members)
    problem: str = ""  # what the pod's job keys got wrong (told to the user; the job still works)

    @property
    def title(self) -> str:
        return f"{self.source.value} {self.namespace}/{self.name}"


# Where each kind of PodGroup is served, and the path of its minimum in the object.
POD_GROUP_APIS: dict[JobSource, tuple[str, tuple[str, ...]]] = {
    JobSource.WORKLOAD: ("/apis/scheduling.k8s.io/v1alpha2", ("spec", "schedulingPolicy", "gang", "minCount")),
    JobSource.POD_GROUP: ("/apis/scheduling.x-k8s.io/v1alpha1", ("spec", "minMember")),
}


def pod_group_minimum(obj: Mapping[str, Any], source: JobSource) -> int:
    """A PodGroup's minimum members, bounded: a group without one (the Workload API's `basic`
    policy, `minMember` 0 or absent) is a group of one-by-one pods, minimum 1."""
    value: Any = obj
    for step in POD_GROUP_APIS[source][1]:
        value = value.get(step) if isinstance(value, Mapping) else None
    if type(value) is not int or value < 1:
        return 1
    return min(value, MAX_MEMBERS)


def indexed_job_minimum(spec: object, status: object = None) -> int | None:
    """A batch/v1 Job's gang size from its spec: an Indexed Job's members all run at once, so its
    parallelism, at most the completions still to make (`status.succeeded` of them are made, and
    the indexes of `status.failedIndexes` are never run again: the Job controller runs no more pods
    than that, so an index that failed and is retried, or the last indexes of a Job of more
    completions than parallelism, would wait for ever for more); None for any other Job, and for
    one that makes no more pods (all made, or finished: a JobSet keeps such Jobs)."""
    if not isinstance(spec, Mapping) or spec.get("completionMode") != "Indexed":
        return None
    status = status if isinstance(status, Mapping) else {}
    if _finished(status):
        return None
    parallelism, completions = spec.get("parallelism"), spec.get("completions")
    if type(completions) is int:
        succeeded = status.get("succeeded")
        completions -= (succeeded if type(succeeded) is int and succeeded > 0 else 0) + _index_count(
            status.get("failedIndexes")
        )
        if completions < 1:
            return None
    if type(completions) is int and type(parallelism) is int and completions < parallelism:
        parallelism = completions
    if type(parallelism) is int and 1 <= parallelism <= MAX_MEMBERS:
        return parallelism
    return None


def _finished(status: Mapping[str, Any]) -> bool:
    """The Job's `Complete` or `Failed` condition is True."""
    conditions = status.get("conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in conditions
    )


_INDEXES = re.compile(r"([0-9]{1,9})(?:-([0-9]{1,9}))?")


def _index_count(value: object) -> int:
    """How many indexes a `status.failedIndexes` string (`1,3-5`) names; 0 when absent or unreadable."""
    if not isinstance(value, str) or not value or len(value) > 64 * 1024:
        return 0
    count = 0
    for part in value.split(","):
        match = _INDEXES.fullmatch(part.strip())
        if match is None:
            return 0
        first, last = int(match[1]), int(match[2] or match[1])
        count += max(0, last - first + 1)
    return count


def completions_left(job: Mapping[str, Any]) -> int | None:
    """A batch/v1 Job that runs in waves (`spec.completions` above `spec.parallelism`, which is 1
    when unset): its completions not made yet (`status.succeeded` are; 0 once its `Complete`
    condition is True). None for any other Job: the pods that run at once end it together."""
    spec, status = job.get("spec"), job.get("status")
    spec = spec if isinstance(spec, Mapping) else {}
    status = status if isinstance(status, Mapping) else {}
    completions, parallelism = spec.get("completions"), spec.get("parallelism", 1)
    if type(completions) is not int or type(parallelism) is not int or not 0 < parallelism < completions:
        return None
    conditions = status.get("conditions")
    if isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") == "Complete" and c.get("status") == "True" for c in conditions
    ):
        return 0
    succeeded = status.get("succeeded")
    made = succeeded if type(succeeded) is int and succeeded > 0 else 0
    return max(0, min(completions, MAX_MEMBERS * MAX_MEMBERS) - made)


def run_uid(pod: PodInfo) -> str:
    """The uid that tells one run of the pod's job from a later one under the same names: its
    JobSet's (a JobSet's pods are controlled by its Jobs, one or more per replicated job), else its
    controller's; "" for a pod without one."""
    if pod.labels.get(JOBSET_LABEL) and (jobset := pod.labels.get(JOBSET_UID_LABEL)):
        return jobset
    return pod.controller.uid if pod.controller is not None else ""


def job_key(namespace: str, source: JobSource, name: str) -> JobKey:
    return JobKey(f"{namespace}/{source.value}/{name}")


def _count(value: str | None) -> int | None:
    """A bounded whole number (member index, count); None when absent or malformed."""
    if value is None or not _COUNT.match(value.strip()):
        return None
    number = int(value.strip())
    return number if number <= MAX_MEMBERS else None


def _group_name(spec: Mapping[str, Any]) -> str | None:
    group = spec.get("schedulingGroup")
    if not isinstance(group, Mapping):
        return None
    name = group.get("podGroupName")
    return name if isinstance(name, str) and name else None


def _named(pod: PodInfo) -> list[tuple[JobSource, str]]:
    """Every job the pod names, in precedence order."""
    found: list[tuple[JobSource, str]] = []
    spec = pod.raw.get("spec")
    if isinstance(spec, Mapping):
        group = _group_name(spec)
        if group is not None:
            found.append((JobSource.WORKLOAD, group))
    labels = pod.labels
    if labels:
        for source, label in (
            (JobSource.POD_GROUP, POD_GROUP_LABEL),
            (JobSource.PYSCHED, JOB_LABEL),
            (JobSource.JOBSET, JOBSET_LABEL),
            (JobSource.KUBEFLOW, KUBEFLOW_JOB_LABEL),
        ):
            value = labels.get(label)
            if value:
                found.append((source, value))
    controller = pod.controller
    if controller is not None and controller.is_job and controller.name:
        found.append((JobSource.BATCH, controller.name))
    return found


def _order(pod: PodInfo, source: JobSource) -> tuple[str, int, int]:
    labels, notes = pod.labels, pod.annotations
    index = _count(notes.get(COMPLETION_INDEX) or labels.get(COMPLETION_INDEX)) or 0
    if source is JobSource.KUBEFLOW:
        kind = labels.get(KUBEFLOW_REPLICA_TYPE_LABEL, "")
        return kind, 0, _count(labels.get(KUBEFLOW_REPLICA_INDEX_LABEL)) or 0
    return labels.get(REPLICATED_JOB_LABEL, ""), _count(labels.get(JOBSET_JOB_INDEX_LABEL)) or 0, index


def job_of(pod: PodInfo) -> JobRef | None:
    """The pod's job, or None for a pod in no job (a job of one)."""
    if not pod.labels and pod.controller is None and "schedulingGroup" not in (pod.raw.get("spec") or {}):
        return None  # most pods: nothing to look at
    named = _named(pod)
    if not named:
        return None
    source, name = named[0]
    problems: list[str] = []
    explicit = [(s, n) for s, n in named if s.explicit]
    others = [f"{s.value} {clip(n)}" for s, n in explicit[1:] if n != name]
    if others:
        shown = clip(name)
        problems.append(f"the pod names {source.value} {shown} and also {', '.join(others)}; it joins {shown}")
    minimum: int | None = None
    if source is JobSource.PYSCHED:
        given = pod.annotations.get(MIN_MEMBERS)
        if given is not None:
            minimum = _count(given)
            if minimum is None or minimum < 1:
                problems.append(
                    f"{MIN_MEMBERS}: {clip(given)} is not {MIN_MEMBERS_FORMS}; the job's pods are scheduled one by one"
                )
                minimum = 1
    elif MIN_MEMBERS in pod.annotations:
        problems.append(
            f"{MIN_MEMBERS} is read only with the label {JOB_LABEL}: the pod's job is {source.value} "
            f"{clip(name)}, whose minimum comes from it"
        )
    return JobRef(
        key=job_key(pod.namespace, source, name),
        source=source,
        namespace=pod.namespace,
        name=name,
        order=_order(pod, source),
        min_members=minimum,
        problem="; ".join(problems),
    )
