"""PrioritySort: kube-scheduler's default queue order by priority; within a priority by creation
time (kube's by when the pod was last queued: see the README)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pysched.framework.interfaces import Handle, QueuedPod
from pysched.framework.registry import NoArgs, PluginSpec

NAME = "PrioritySort"


@dataclass(frozen=True, slots=True)
class PrioritySort:
    """Higher priority first, then the pod created first (then first queued)."""

    NAME: ClassVar[str] = NAME

    def sort_key(self, queued: QueuedPod) -> tuple[Any, ...]:
        return (-queued.pod.priority, queued.pod.created, queued.added, queued.pod.key)


def factory(args: NoArgs, handle: Handle) -> PrioritySort:
    return PrioritySort()


SPEC = PluginSpec(NAME, NoArgs, factory, PrioritySort)
