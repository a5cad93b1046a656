"""Hooks through which the scheduler reports what it does (metrics in `pysched run`).

The scheduler calls these on its hot path, so the default does nothing and an implementation
must be cheap (a counter increment, a histogram observation).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pysched.framework.interfaces import QueuedPod
from pysched.framework.status import Code

# (profile, extension point, status code, seconds): one extension point's run for one pod.
ExtensionPointTimer = Callable[[str, str, Code, float], None]
# (plugin, extension point, status code, seconds): one plugin's run at one point, sampled cycles only.
PluginTimer = Callable[[str, str, Code, float], None]


class SchedulingObserver(Protocol):
    def attempt(self, profile: str, result: str, seconds: float) -> None:
        """One scheduling attempt ended: result is scheduled, unschedulable or error."""
        ...

    def bound(self, queued: QueuedPod, now: float) -> None:
        """A pod was bound; `queued.added` is when it first entered the queue."""
        ...

    @property
    def extension_points(self) -> ExtensionPointTimer | None:
        """Where each extension point's duration goes; None: not timed (no clock read is paid)."""
        ...

    @property
    def plugin_executions(self) -> PluginTimer | None:
        """Where each plugin's duration goes in the sampled cycles; None: not timed."""
        ...


class NullObserver:
    extension_points: ExtensionPointTimer | None = None
    plugin_executions: PluginTimer | None = None

    def attempt(self, profile: str, result: str, seconds: float) -> None:
        pass

    def bound(self, queued: QueuedPod, now: float) -> None:
        pass
