"""Pods that a Permit plugin holds back before their binding cycle (kube-scheduler's waiting pods).

A pod waits, assumed on its node, until every plugin that answered Wait has allowed it; one
rejection sends it back to the queue. Each waiting plugin gives a timeout, measured on the
scheduler's injected clock: when it passes, the pod is rejected on that plugin's behalf (so the
simulator times out in virtual time, and a gang's members are released together, not by a
wall-clock timer). Plugins reach the waiting pods through `Handle.waiting_pods`, e.g. a gang's
last member allows the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import PodInfo
from pysched.framework.status import SUCCESS, Status, unschedulable

MAX_WAIT_SECONDS = 15 * 60.0  # kube-scheduler's cap on a Permit timeout

Done = Callable[["WaitingPod", Status], None]


class WaitingPod:
    """One pod held at Permit: its node, the plugins still to allow it and their deadlines."""

    __slots__ = ("_deadlines", "_done", "_since", "_waits", "node", "pod")

    def __init__(self, pod: PodInfo, node: NodeName, waits: Mapping[str, float], now: float, done: Done) -> None:
        """`waits`: plugin -> seconds it may wait (capped at MAX_WAIT_SECONDS); `done` is called
        once, with Success when the last plugin allows the pod, or with the first rejection."""
        self.pod = pod
        self.node = node
        self._since = now
        self._waits = {plugin: min(seconds, MAX_WAIT_SECONDS) for plugin, seconds in waits.items()}
        self._deadlines = {plugin: now + seconds for plugin, seconds in self._waits.items()}
        self._done: Done | None = done

    @property
    def pending_plugins(self) -> frozenset[str]:
        return frozenset(self._deadlines)

    @property
    def deadline(self) -> float:
        """When the first pending plugin's wait runs out."""
        return min(self._deadlines.values(), default=self._since)

    def allow(self, plugin: str) -> None:
        """`plugin` lets the pod go on; it binds once no plugin is pending."""
        self._deadlines.pop(plugin, None)
        if not self._deadlines:
            self._finish(SUCCESS)

    def reject(self, plugin: str, message: str) -> None:
        self._finish(unschedulable(message, plugin=plugin))

    def expire(self, now: float) -> None:
        """Reject on behalf of the first plugin whose wait has run out by `now`."""
        late = [plugin for plugin, deadline in self._deadlines.items() if deadline <= now]
        if late:
            plugin = min(late, key=self._deadlines.__getitem__)
            self.reject(plugin, f"rejected due to timeout after waiting {self._waits[plugin]:g}s at plugin {plugin}")

    def _finish(self, status: Status) -> None:
        done, self._done = self._done, None
        if done is not None:
            done(self, status)


class WaitingPods:
    """The pods waiting at Permit, by pod key (one map per scheduler, shared by its profiles)."""

    def __init__(self) -> None:
        self._pods: dict[PodKey, WaitingPod] = {}

    def hold(self, pod: PodInfo, node: NodeName, waits: Mapping[str, float], now: float, done: Done) -> WaitingPod:
        """Hold a pod at Permit (see `WaitingPod`); it leaves the map as soon as it is allowed or
        rejected, before `done` is called."""

        def leave(waiting: WaitingPod, status: Status) -> None:
            self._pods.pop(waiting.pod.key, None)
            done(waiting, status)

        waiting = self._pods[pod.key] = WaitingPod(pod, node, waits, now, leave)
        return waiting

    def get(self, key: PodKey) -> WaitingPod | None:
        return self._pods.get(key)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)

    def expire(self, now: float) -> None:
        for waiting in list(self._pods.values()):
            waiting.expire(now)

    def next_deadline(self) -> float | None:
        return min((w.deadline for w in self._pods.values()), default=None)
