"""Hooks through which the scheduler reports what it does (metrics in `pysched run`).

The scheduler calls these on its hot path, so the default does nothing and an implementation
must be cheap (a counter increment, a histogram observation).
"""

from __future__ import annotations

from typing import Protocol

from pysched.framework.interfaces import QueuedPod


class SchedulingObserver(Protocol):
    def attempt(self, profile: str, result: str, seconds: float) -> None:
        """One scheduling attempt ended: result is scheduled, unschedulable or error."""
        ...

    def bound(self, queued: QueuedPod, now: float) -> None:
        """A pod was bound; `queued.added` is when it first entered the queue."""
        ...


class NullObserver:
    def attempt(self, profile: str, result: str, seconds: float) -> None:
        pass

    def bound(self, queued: QueuedPod, now: float) -> None:
        pass
