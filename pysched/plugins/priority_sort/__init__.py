"""PrioritySort: kube-scheduler's default queue order: by priority, within a priority by when the
pod last came into the queue (added, or after a failed attempt)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pysched.framework.interfaces import Handle, QueuedPod
from pysched.framework.registry import NoArgs, PluginSpec

NAME = "PrioritySort"


@dataclass(frozen=True, slots=True)
class PrioritySort:
    """Higher priority first, then the pod that came into the queue first: a refused pod goes
    behind those already waiting, as in kube-scheduler (ties: the pod created first)."""

    NAME: ClassVar[str] = NAME

    def sort_key(self, queued: QueuedPod) -> tuple[Any, ...]:
        return (-queued.pod.priority, queued.timestamp, queued.pod.created, queued.pod.key)


def factory(args: NoArgs, handle: Handle) -> PrioritySort:
    return PrioritySort()


SPEC = PluginSpec(NAME, NoArgs, factory, PrioritySort)
