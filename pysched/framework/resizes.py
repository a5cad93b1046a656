"""When each bound pod's CPUs last changed, as the scheduler saw it.

A resize the kubelet defers takes effect between two looks of a reconcile plugin: progress
written before that moment was made on the old CPUs, and must not be measured at the new ones.
The informer delivers the pod whose container statuses say so; its arrival is the time kept.
"""

from __future__ import annotations

from pysched.api.containers import running_cpus
from pysched.api.ids import PodKey, PodUID
from pysched.api.objects import PodInfo


class ResizeLog:
    """Per pod (by uid: not a pod recreated under its name), the last time its containers'
    running CPUs (what the kubelet actuated, else the spec) were seen to change."""

    __slots__ = ("_at",)

    def __init__(self) -> None:
        self._at: dict[PodKey, tuple[PodUID, float]] = {}

    def observe(self, old: PodInfo, new: PodInfo, now: float) -> None:
        """A bound pod's update: kept when its running CPUs changed."""
        if old.raw.get("spec") is new.raw.get("spec") and old.raw.get("status") is new.raw.get("status"):
            return  # most updates (a condition, an annotation) share both
        containers = (new.raw.get("spec") or {}).get("containers") or ()
        names = [name for c in containers if isinstance(c, dict) and isinstance(name := c.get("name"), str)]
        if any(running_cpus(old, name) != running_cpus(new, name) for name in names):
            self._at[new.key] = (new.uid, now)

    def last(self, pod: PodInfo) -> float | None:
        """When the pod's running CPUs last changed; None when they have not since it was seen bound."""
        found = self._at.get(pod.key)
        return found[1] if found is not None and found[0] == pod.uid else None

    def forget(self, pod: PodInfo) -> None:
        found = self._at.get(pod.key)
        if found is not None and found[0] == pod.uid:
            del self._at[pod.key]
