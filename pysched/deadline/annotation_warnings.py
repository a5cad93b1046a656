"""One `InvalidAnnotation` event per malformed workload annotation of a pod: what the plugins that
read the contract at PreEnqueue (DeadlineLaxity, EarliestDeadline) tell the pod's owner."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from pysched.api.annotations import INVALID_ANNOTATION, invalid_annotations
from pysched.api.ids import PodKey, PodUID
from pysched.api.limits import clip
from pysched.api.objects import PodInfo
from pysched.framework.interfaces import Handle


@dataclass(slots=True)
class AnnotationWarnings:
    """Reads each version of a pod once, and tells each malformed (key, value) once per pod;
    `keys` limits it to the annotations the plugin reads (None: the whole contract)."""

    handle: Handle
    keys: Collection[str] | None = None
    _validated: dict[PodKey, PodInfo] = field(default_factory=dict)  # the version whose annotations were read
    _warned: dict[PodUID, set[tuple[str, str]]] = field(default_factory=dict)  # (key, value) told

    def check(self, pod: PodInfo) -> None:
        if self._validated.get(pod.key) is pod:
            return
        self._validated[pod.key] = pod
        for key, value, forms in invalid_annotations(pod):
            if self.keys is not None and key not in self.keys:
                continue
            warned = self._warned.setdefault(pod.uid, set())
            shown = clip(value)  # kept and echoed cut short: the value may be 200 KB
            if (key, shown) not in warned:
                warned.add((key, shown))
                note = f"{key}: {shown} is not {forms}; ignored"
                self.handle.tasks.spawn(self.handle.cluster.emit_event(pod, "Warning", INVALID_ANNOTATION, note))

    def forget(self, pod: PodInfo) -> None:
        """By key only while the key still names this pod (a pod recreated under the same name
        may be known before the old one's deletion arrives)."""
        validated = self._validated.get(pod.key)
        if validated is not None and validated.uid == pod.uid:
            del self._validated[pod.key]
        self._warned.pop(pod.uid, None)
