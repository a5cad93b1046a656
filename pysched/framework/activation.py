"""Where a plugin asks for pods it holds back to be looked at again (kube-scheduler's
`Handle.Activate`).

A PreEnqueue plugin that gates a pod for a reason no pod or node event carries (an admission
decision made on a clock) calls `activate` once its answer may have changed: each named pod that
is gated or parked as unschedulable goes through PreEnqueue again, and into the active queue if
every plugin lets it. With `refused_by`, only the pods parked as unschedulable whose last refusal
was that plugin's alone move (a gang's member calls its siblings back, not one a filter refused).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pysched.api.ids import PodKey

Activate = Callable[[Iterable[PodKey], "str | None"], int]


class PodActivator:
    """Handle-reachable; the scheduler installs its queue's `activate`."""

    __slots__ = ("_activate",)

    def __init__(self) -> None:
        self._activate: Activate | None = None

    def install(self, activate: Activate) -> None:
        self._activate = activate

    def activate(self, keys: Iterable[PodKey], refused_by: str | None = None) -> int:
        """How many of the pods went back through PreEnqueue (0 with no scheduler installed)."""
        return 0 if self._activate is None else self._activate(keys, refused_by)
