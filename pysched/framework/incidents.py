"""Bugs contained to the pod that hit them.

A plugin or the scheduler raising on one pod (hostile input that slipped past a parser, a plain
bug) must not stop the scheduling loop, the informers or the reconcile of other pods. The place
that catches it reports it here: it is logged with its traceback, counted by stage (the
`pysched_internal_errors` metric), and told to the pod's owner as a Warning event. The scheduler
installs the event sink; without one (unit tests of a single plugin) reports are only counted.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import structlog

from pysched.api.inputs import brief
from pysched.api.objects import PodInfo

log = structlog.get_logger("pysched.incidents")

# The reason of a pending pod's PodScheduled condition (its event: FailedScheduling), and of a
# running pod's event (its PodScheduled condition is left as it is).
REASON = "InternalError"

Notify = Callable[[PodInfo, str], None]


def describe(error: BaseException) -> str:
    """The exception as one short line (its message may quote a huge value)."""
    return f"{type(error).__name__}: {brief(error)}"


class Incidents:
    """Counts and reports contained bugs; one per scheduler, shared by every profile."""

    __slots__ = ("_notify", "counts")

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._notify: Notify | None = None

    def install(self, notify: Notify) -> None:
        self._notify = notify

    def report(self, stage: str, pod: PodInfo | None, error: BaseException, *, then: str = "") -> None:
        """Record a bug caught at `stage` while handling `pod`; `then` says what became of the pod."""
        self.counts[stage] += 1
        log.error("internal error contained", stage=stage, pod=pod.key if pod else None, exc_info=error)
        if pod is not None and self._notify is not None:
            message = f"pysched hit an internal error in {stage} ({describe(error)})"
            self._notify(pod, f"{message}; {then}" if then else message)

    @property
    def total(self) -> int:
        return sum(self.counts.values())
