"""Pod lifecycle notices for the plugins of one profile.

kube-scheduler has no extension point for "a pod ended" or "a pod is gone": a plugin that needs
them adds event handlers to the informers its Handle gives it. Here a plugin subscribes through
`Handle.pod_lifecycle` (from its factory) to the two moments pysched's plugins need: a bound pod
of the profile reached Succeeded or Failed (the one moment a deadline is known met or missed;
terminated pods leave the cache, so reconcile never sees them), and a pod of the profile, pending
or bound, was deleted (per-pod plugin state must be dropped then, or it grows with every pod ever
seen). A pod the informer drops after it terminated is told as deleted too, after it terminated.

A third notice is a leader's: when a replica takes over (the first, or after a failover), the pods
of the profile that ended while no replica of it led, listed once from the API (the informer holds
active pods only), so that a verdict missed in between is given and counts are rebuilt. Until then
`leading` is False on a standby replica: it sees pods end but gives no verdicts (its writes would
be refused, and its counts would double what it finds at take-over).

The last is a QueueSort's: profiles run together share one queue, ordered by the first profile's
QueueSort, so that plugin keeps state for the other profiles' pods as well; it hears when one of
those ended or was deleted (`on_sorted_gone`), their own profile's plugins apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pysched.api.objects import PodInfo

PodHandler = Callable[[PodInfo], None]
TakeOverHandler = Callable[[Sequence[PodInfo]], None]


class PodLifecycle:
    def __init__(self, leading: bool = True) -> None:
        self._terminated: list[PodHandler] = []
        self._deleted: list[PodHandler] = []
        self._taken_over: list[TakeOverHandler] = []
        self._sorted_gone: list[PodHandler] = []
        self.leading = leading

    def on_terminated(self, handler: PodHandler) -> None:
        self._terminated.append(handler)

    def on_deleted(self, handler: PodHandler) -> None:
        self._deleted.append(handler)

    def on_taken_over(self, handler: TakeOverHandler) -> None:
        self._taken_over.append(handler)

    def on_sorted_gone(self, handler: PodHandler) -> None:
        """For a QueueSort: a pod of another profile it ordered ended or was deleted."""
        self._sorted_gone.append(handler)

    # The engine's side.
    def terminated(self, pod: PodInfo) -> None:
        for handler in self._terminated:
            handler(pod)

    def deleted(self, pod: PodInfo) -> None:
        for handler in self._deleted:
            handler(pod)

    def sorted_gone(self, pod: PodInfo) -> None:
        for handler in self._sorted_gone:
            handler(pod)

    def taken_over(self, ended: Sequence[PodInfo]) -> None:
        self.leading = True
        for handler in self._taken_over:
            handler(ended)
