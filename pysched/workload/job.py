"""A training job: one pod, total steps, an optional deadline and a hidden true speed model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pysched.api.annotations import DEADLINE, TOTAL_STEPS
from pysched.api.builders import pod_dict
from pysched.api.times import format_rfc3339
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
    # TF 1.x parameter-server jobs cannot adopt new CPUs live: a CPU resize restarts the
    # container (Kubernetes resizePolicy RestartContainer) and, without checkpoints, loses progress.
    restart_on_resize: bool = True

    @property
    def cpu(self) -> float:
        return self.cpu_milli / 1000

    def manifest(self, scheduler_name: str, epoch: float) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.gpu:
            extra = {"extended": {"nvidia.com/gpu": str(self.gpu)}, "tolerations": [GPU_TOLERATION]}
        annotations = {TOTAL_STEPS: str(self.steps)}
        if self.deadline is not None:
            annotations[DEADLINE] = format_rfc3339(epoch + self.deadline)
        raw = pod_dict(
            self.name,
            namespace="sim",
            cpu=f"{self.cpu_milli}m",
            memory=self.memory,
            scheduler_name=scheduler_name,
            priority=self.priority,
            created=epoch + self.submit,
            annotations=annotations,
            **extra,
        )
        policy = "RestartContainer" if self.restart_on_resize else "NotRequired"
        raw["spec"]["containers"][0]["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": policy}]
        return raw
