"""EarliestDeadline: priority first, then the earliest `pysched.io/deadline` first."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from pysched.api.annotations import deadline_of
from pysched.framework.interfaces import Handle, QueuedPod
from pysched.framework.registry import NoArgs, PluginSpec

NAME = "EarliestDeadline"


@dataclass(frozen=True, slots=True)
class EarliestDeadline:
    """Within a priority, the pod due first pops first; pods without a (readable) deadline come
    after every pod with one, in PrioritySort's order (creation, then first queued)."""

    NAME: ClassVar[str] = NAME

    def sort_key(self, queued: QueuedPod) -> tuple[Any, ...]:
        pod = queued.pod
        deadline = deadline_of(pod)
        return (-pod.priority, math.inf if deadline is None else deadline, pod.created, queued.added, pod.key)


def factory(args: NoArgs, handle: Handle) -> EarliestDeadline:
    return EarliestDeadline()


SPEC = PluginSpec(NAME, NoArgs, factory, EarliestDeadline)
