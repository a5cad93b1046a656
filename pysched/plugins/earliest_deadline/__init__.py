"""EarliestDeadline: priority first, then the earliest `pysched.io/deadline` first."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from pysched.api.annotations import DEADLINE, deadline_of
from pysched.api.objects import PodInfo
from pysched.deadline.annotation_warnings import AnnotationWarnings
from pysched.framework.interfaces import Handle, QueuedPod
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SUCCESS, Status

NAME = "EarliestDeadline"


@dataclass(frozen=True, slots=True)
class EarliestDeadline:
    """Within a priority, the pod due first pops first; pods without a (readable) deadline come
    after every pod with one, in PrioritySort's order (creation, then first queued). At
    PreEnqueue, a malformed deadline is told to the pod (`InvalidAnnotation`), once."""

    NAME: ClassVar[str] = NAME
    warnings: AnnotationWarnings

    def sort_key(self, queued: QueuedPod) -> tuple[Any, ...]:
        pod = queued.pod
        deadline = deadline_of(pod)
        return (-pod.priority, math.inf if deadline is None else deadline, pod.created, queued.added, pod.key)

    def pre_enqueue(self, pod: PodInfo) -> Status:
        self.warnings.check(pod)
        return SUCCESS


def factory(args: NoArgs, handle: Handle) -> EarliestDeadline:
    warnings = AnnotationWarnings(handle, keys=(DEADLINE,))
    handle.pod_lifecycle.on_deleted(warnings.forget)
    return EarliestDeadline(warnings)


SPEC = PluginSpec(NAME, NoArgs, factory, EarliestDeadline)
