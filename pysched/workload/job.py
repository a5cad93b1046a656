"""A training job: one pod or a gang of member pods, total steps, an optional deadline and a hidden
true speed model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pysched.api.annotations import DEADLINE, EXPECTED_DURATION, TOTAL_STEPS, WORKERS_MAX, WORKERS_MIN
from pysched.api.builders import pod_dict
from pysched.api.jobs import COMPLETION_INDEX, JOB_LABEL, MIN_MEMBERS, ROLE_LABEL
from pysched.api.times import format_rfc3339
from pysched.workload.gang import Gang, Member
from pysched.workload.speed import SpeedModel

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    submit: float  # seconds from the start of the run
    steps: int
    cpu_milli: int  # requested, as the user wrote it
    memory: str
    truth: SpeedModel = field(repr=False)  # hidden: only the simulated cluster reads it
    gpu: int = 0
    deadline: float | None = None  # absolute, same clock as `submit`
    priority: int = 0
    model: str = ""
    source: str = ""  # file:line of the trace row, for messages
    trace_id: str = ""  # the trace row's job_id ("" for a generated job)
    # TF 1.x parameter-server jobs cannot adopt new CPUs live: a CPU resize restarts the
    # container (Kubernetes resizePolicy RestartContainer) and, without checkpoints, loses progress.
    restart_on_resize: bool = True
    # Several member pods (cpu_milli and gpu are then their totals, `truth` one member's model);
    # None: the job is one pod.
    gang: Gang | None = None
    # An elastic job's workers (min, max): its members are the workers of an Indexed batch/v1 Job
    # (`owner_uid`) whose parallelism the scheduler sets; None: the job is rigid.
    elastic: tuple[int, int] | None = None
    expected_s: float | None = None  # what its owner expects it to run at its request (from earlier runs)
    # Its steps were counted from a trace's duration at its request: a job made a gang later (its
    # speed then drawn) is recounted at that speed, so that it runs the duration at its request.
    from_duration: bool = False

    @property
    def cpu(self) -> float:
        return self.cpu_milli / 1000

    @property
    def owner_uid(self) -> str:
        return f"job-uid-{self.name}"

    def manifests(self, scheduler_name: str, epoch: float) -> list[dict[str, Any]]:
        """The job's pods: itself, or its members (rank 0 first), each naming the job."""
        if self.gang is None:
            return [self.manifest(scheduler_name, epoch)]
        return [self.manifest(scheduler_name, epoch, member) for member in self.gang.members]

    def manifest(self, scheduler_name: str, epoch: float, member: Member | None = None) -> dict[str, Any]:
        """The pod of a one-pod job, or of one member."""
        name, cpu_milli, memory, gpu = self.name, self.cpu_milli, self.memory, self.gpu
        if member is not None:
            name, cpu_milli, memory, gpu = member.name, member.cpu_milli, member.memory, member.gpu
        extra: dict[str, Any] = {}
        if gpu:
            extra = {"extended": {"nvidia.com/gpu": str(gpu)}, "tolerations": [GPU_TOLERATION]}
        annotations = {TOTAL_STEPS: str(self.steps)}
        if self.deadline is not None:
            annotations[DEADLINE] = format_rfc3339(epoch + self.deadline)
        if self.expected_s is not None:
            annotations[EXPECTED_DURATION] = f"{max(1, round(self.expected_s))}s"
        labels: dict[str, str] = {}
        if member is not None and self.elastic is not None:
            annotations[WORKERS_MIN], annotations[WORKERS_MAX] = (str(n) for n in self.elastic)
            labels[COMPLETION_INDEX] = member.name.rpartition("-")[2]
        elif member is not None and self.gang is not None:
            annotations[MIN_MEMBERS] = str(len(self.gang.members))
            labels[JOB_LABEL] = self.name
            if member.role:
                labels[ROLE_LABEL] = member.role
        raw = pod_dict(
            name,
            namespace="sim",
            cpu=f"{cpu_milli}m",
            memory=memory,
            scheduler_name=scheduler_name,
            priority=self.priority,
            created=epoch + self.submit,
            annotations=annotations,
            labels=labels,
            **extra,
        )
        if member is not None and self.elastic is not None:
            raw["metadata"]["ownerReferences"] = [
                {"apiVersion": "batch/v1", "kind": "Job", "name": self.name, "uid": self.owner_uid, "controller": True}
            ]
        policy = "RestartContainer" if self.restart_on_resize else "NotRequired"
        raw["spec"]["containers"][0]["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": policy}]
        return raw
