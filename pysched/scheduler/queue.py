"""The scheduling queue: active, backoff and unschedulable pods, as in kube-scheduler.

- active: ordered by the profile's QueueSort key;
- backoff: pods that failed recently wait 1 s, doubling per refusal (or per error in a row) up
  to 10 s (kube-scheduler's with SchedulerPopFromBackoffQ off: see `_failed`);
- unschedulable: parked until a cluster event that may help (per the rejecting plugins'
  queueing hints) or the safety flush (parked longer than 5 min, checked every 30 s);
- gated: pods a PreEnqueue plugin holds back;
- parked: pods on which a plugin or the scheduler raised (a bug, contained to the pod): they
  come back when the pod changes or after the unschedulable timeout, never on cluster events,
  so one such pod cannot spin the loop;
- dormant: on a standby replica (`dormant=True` until `wake`), pods are only kept: PreEnqueue
  and the sort key run when the replica leads, so what plugins tell there (a warning, a
  demotion, an admission) is told by a replica whose writes go out.
Time comes from the injected clock only.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import heapq
import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pysched.api.ids import PodKey
from pysched.api.objects import PodInfo
from pysched.framework.clock import Clock
from pysched.framework.events import ClusterEvent, EventKind, QueueingHint
from pysched.framework.interfaces import QueuedPod, QueuePickPlugin
from pysched.framework.status import Status

ACTIVE, BACKOFF, UNSCHEDULABLE, GATED, PARKED, IN_FLIGHT = (
    "active", "backoff", "unschedulable", "gated", "parked", "in-flight"
)  # fmt: skip
DORMANT = "dormant"  # counted as active: where the pod goes once the replica leads
# Why a pod came into a queue, as kube-scheduler v1.36's scheduler_queue_incoming_pods_total names
# it: its own add or update as an unscheduled pod's, a cluster event that moved it by kube's label
# for that event (its resource and action) where the kind has one, else by the kind.
POD_ADD, POD_UPDATE, ATTEMPT_FAILED = "UnschedulablePodAdd", "UnschedulablePodUpdate", "ScheduleAttemptFailure"
BACKOFF_COMPLETE, UNSCHEDULABLE_TIMEOUT, FORCE_ACTIVATE = "BackoffComplete", "UnschedulableTimeout", "ForceActivate"
EVENT_LABELS: dict[EventKind, str] = {
    EventKind.POD_DELETE: "AssignedPodDelete",
    EventKind.POD_RESIZE_DOWN: "AssignedPodUpdatePodScaleDown",
    EventKind.ASSIGNED_POD_UPDATE: "AssignedPodUpdatePodLabel",
    EventKind.UNSCHEDULED_POD_ADD: "UnschedulablePodAdd",
}
# kube keeps gated pods among its unschedulable ones, and labels them so.
QUEUE_LABELS = {GATED: UNSCHEDULABLE}
MAX_DOUBLINGS = 64  # the backoff's exponent is capped before the power: 2.0 ** 1025 overflows
# Events kept while pods are in flight (a gang's members wait at Permit for minutes): past this,
# the oldest are forgotten and a pod in flight since before them backs off as if one had helped.
MAX_IN_FLIGHT_EVENTS = 100_000

SortKey = Callable[[QueuedPod], tuple[Any, ...]]
PreEnqueue = Callable[[PodInfo], Status]
Hint = Callable[[QueuedPod, ClusterEvent], QueueingHint]
Contained = Callable[[QueuedPod, str, Exception], None]  # (pod, stage, error): a plugin raised
# The kinds of event that may help an unschedulable pod (None: any). An event is checked against
# only the pods waiting for its kind, so a stream of binds costs nothing for pods that wait for
# room elsewhere.
Interest = Callable[[QueuedPod], frozenset[EventKind] | None]


@dataclass(frozen=True, slots=True)
class QueueTimings:
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    unschedulable_timeout: float = 300.0
    flush_interval: float = 30.0
    # A pod the periodic retry lets out gets a whole cycle (fresh FailedScheduling reasons) when
    # its reasons are at least this old; before, one its rejectors still refuse is refused
    # without a cycle, as after an event. The retry comes every `unschedulable_timeout`: a whole
    # cycle each time was a fifth of what a crowded simulation spent.
    rediagnose_interval: float = 3600.0


DEFAULT_TIMINGS = QueueTimings()


class SchedulingQueue:
    def __init__(
        self,
        clock: Clock,
        sort_key: SortKey,
        pre_enqueue: PreEnqueue,
        hint: Hint,
        timings: QueueTimings = DEFAULT_TIMINGS,
        contained: Contained | None = None,
        interest: Interest = lambda _: None,
        picker: QueuePickPlugin | None = None,
        still_rejected: Callable[[QueuedPod], bool] = lambda _: False,
        dormant: bool = False,
    ) -> None:
        self._clock = clock
        self._dormant: dict[PodKey, QueuedPod] | None = {} if dormant else None
        self._still_rejected = still_rejected
        self._picker = picker  # its window is read at each pop: an environment may set it
        self._interest = interest
        self._contained = contained
        self._sort_key = sort_key
        self._pre_enqueue = pre_enqueue
        self._hint = hint
        self.timings = timings
        self._pods: dict[PodKey, QueuedPod] = {}
        self._where: dict[PodKey, str] = {}
        self._token: dict[PodKey, int] = {}
        self._active: list[tuple[tuple[Any, ...], int, PodKey]] = []
        self._front: list[tuple[tuple[Any, ...], int, PodKey]] = []  # a QueuePick window, sorted
        self._front_stale = False  # a token was replaced or dropped since `_front` was last checked
        self._backoff: list[tuple[float, int, PodKey]] = []
        self._unschedulable: dict[PodKey, QueuedPod] = {}
        self._waiting_for: dict[EventKind | None, dict[PodKey, QueuedPod]] = {}
        self._kinds: dict[PodKey, tuple[EventKind | None, ...]] = {}
        self._parked: dict[PodKey, QueuedPod] = {}
        self._seq = itertools.count()
        self._event_seq = 0
        self._popped_at: dict[PodKey, int] = {}
        # The events since the oldest pod in flight was popped, by sequence number: a pod that
        # fails is parked unless one of them may have helped it (`requeue_unschedulable`).
        self._in_flight_events: collections.deque[tuple[int, ClusterEvent]] = collections.deque()
        self._in_flight_forgotten = 0  # the last sequence number forgotten past the bound
        self._in_flight_kept = 0  # how many were left at the last trim
        self._next_flush = clock.now() + timings.flush_interval
        self._wakeup = asyncio.Event()
        self.incoming: collections.Counter[tuple[str, str]] = collections.Counter()  # (queue, event)

    def _came(self, qp: QueuedPod, event: str) -> None:
        """Count where the pod went and why (read from where it is now, so a pod that PreEnqueue
        gated or a plugin's bug parked counts there)."""
        where = self._where.get(qp.pod.key)
        if where is not None:
            self.incoming[(QUEUE_LABELS.get(where, where), event)] += 1

    # ----- placement helpers
    def _push_active(self, qp: QueuedPod) -> None:
        try:
            qp.sort_key = self._sort_key(qp)
        except Exception as err:  # a QueueSort plugin's bug parks this pod, not the queue
            self._contain(qp, "QueueSort", err)
            return
        token = next(self._seq)
        self._front_stale |= qp.pod.key in self._token
        self._token[qp.pod.key] = token
        self._where[qp.pod.key] = ACTIVE
        heapq.heappush(self._active, (qp.sort_key, token, qp.pod.key))
        self._wakeup.set()

    def _push_backoff(self, qp: QueuedPod) -> None:
        token = next(self._seq)
        self._front_stale |= qp.pod.key in self._token
        self._token[qp.pod.key] = token
        self._where[qp.pod.key] = BACKOFF
        heapq.heappush(self._backoff, (qp.backoff_until, token, qp.pod.key))

    def _park(self, qp: QueuedPod, where: str) -> None:
        self._where[qp.pod.key] = where
        self._front_stale |= self._token.pop(qp.pod.key, None) is not None
        if where == UNSCHEDULABLE:
            key = qp.pod.key
            self._unschedulable[key] = qp
            kinds = self._interest(qp)
            self._kinds[key] = (None,) if kinds is None else tuple(kinds)
            for kind in self._kinds[key]:
                self._waiting_for.setdefault(kind, {})[key] = qp
        elif where == PARKED:
            self._parked[qp.pod.key] = qp

    def _contain(self, qp: QueuedPod, stage: str, err: Exception) -> None:
        self.park(qp)
        if self._contained is not None:
            self._contained(qp, stage, err)

    def _enqueue(self, qp: QueuedPod) -> None:
        """Into active, or gated when a PreEnqueue plugin says not yet: every way into the active
        queue passes here, so PreEnqueue sees a pod changed while it waited (and warns of it)."""
        self._parked.pop(qp.pod.key, None)
        try:
            status = self._pre_enqueue(qp.pod)
        except Exception as err:  # called from informer handlers: contain it to this pod
            self._contain(qp, "PreEnqueue", err)
            return
        if status.ok:
            qp.gated_by = ""
            if math.isnan(qp.first_active):
                qp.first_active = self._clock.now()
            self._push_active(qp)
        else:
            qp.gated_by = status.plugin or "PreEnqueue"
            self._park(qp, GATED)

    def _failed(self, qp: QueuedPod, now: float, refused: bool) -> None:
        """A failed attempt (`refused`: by plugins; else an error): its counts, its timestamp and
        the end of its backoff, as kube-scheduler reckons them: initial << (count - 1) up to the
        maximum, counting the errors in a row while there are any, else the refusals.

        kube's SchedulerPopFromBackoffQ (on since 1.33) also pops a backing-off pod whenever
        nothing else is active, and ends backoffs on whole seconds; not done here. A cycle takes
        no time on a simulated clock, so that pop sends the members of a gang released at Permit
        (and every pod their release moves) round the cycle again at the same instant, for ever
        or until something breaks the round (kube's spin, on a real clock, until the cluster
        changes)."""
        if refused:
            qp.refusals += 1
            qp.errors_in_a_row = 0
        else:
            qp.errors_in_a_row += 1
        qp.timestamp = now
        t = self.timings
        count = qp.errors_in_a_row or qp.refusals
        qp.backoff_until = now + float(min(t.initial_backoff * 2.0 ** min(count - 1, MAX_DOUBLINGS), t.max_backoff))

    def _drop_unschedulable(self, key: PodKey) -> None:
        if self._unschedulable.pop(key, None) is not None:
            for kind in self._kinds.pop(key, ()):
                self._waiting_for[kind].pop(key, None)

    def _leave_unschedulable(self, qp: QueuedPod) -> None:
        self._drop_unschedulable(qp.pod.key)
        if qp.backoff_until > self._clock.now():
            self._push_backoff(qp)
        else:
            self._enqueue(qp)

    # ----- informer side
    def add(self, pod: PodInfo) -> None:
        """A new pending pod of ours."""
        if pod.key in self._pods:
            self.update(pod)
            return
        qp = QueuedPod(pod, added=self._clock.now())
        self._pods[pod.key] = qp
        if self._dormant is not None:
            self._dormant[pod.key] = qp
            self._where[pod.key] = DORMANT
            return
        self._enqueue(qp)
        self._came(qp, POD_ADD)

    def wake(self) -> None:
        """The replica leads: its dormant pods go through PreEnqueue, in the order they came."""
        dormant, self._dormant = self._dormant, None
        for qp in (dormant or {}).values():
            self._enqueue(qp)
            self._came(qp, POD_ADD)

    def update(self, pod: PodInfo) -> None:
        qp = self._pods.get(pod.key)
        if qp is None:
            self.add(pod)
            return
        changed = (
            qp.pod.raw.get("spec") != pod.raw.get("spec")
            or qp.pod.annotations != pod.annotations
            or qp.pod.labels != pod.labels  # its own labels decide affinity and spread terms
        )
        qp.pod = pod
        where = self._where.get(pod.key)
        if where == DORMANT:
            return
        if where == GATED or (where == PARKED and changed):
            self._enqueue(qp)
            self._came(qp, POD_UPDATE)
        elif where == UNSCHEDULABLE and changed:
            # The pod itself changed (a resize, a new toleration...): it may fit now.
            self._leave_unschedulable(qp)
            self._came(qp, POD_UPDATE)
        elif where == ACTIVE:
            self._push_active(qp)  # re-sort: the old heap entry goes stale
        elif where is None:
            self._enqueue(qp)  # never placed (cannot happen; a pod must not get stuck if it does)

    def activate(self, keys: Iterable[PodKey], refused_by: str | None = None) -> int:
        """A plugin's gate or verdict may have changed for these pods: the gated and the
        unschedulable ones go through PreEnqueue again now (kube-scheduler's Activate); with
        `refused_by`, only the unschedulable ones that plugin alone refused. Returns how many did."""
        moved = 0
        for key in keys:
            qp = self._pods.get(key)
            where = self._where.get(key)
            if qp is None or where not in (GATED, UNSCHEDULABLE):
                continue
            if refused_by is not None and (where == GATED or qp.unschedulable_plugins != {refused_by}):
                continue
            self._drop_unschedulable(key)
            self._enqueue(qp)
            self._came(qp, FORCE_ACTIVATE)
            moved += 1
        return moved

    def delete(self, key: PodKey) -> None:
        self._pods.pop(key, None)
        if self._where.pop(key, None) is None:
            return  # not placed since its last delete: every other book is set with `_where`
        self._front_stale |= self._token.pop(key, None) is not None
        self._drop_unschedulable(key)
        self._parked.pop(key, None)
        if self._dormant is not None:
            self._dormant.pop(key, None)
        if self._popped_at.pop(key, None) is not None:
            self._forget_in_flight_events()

    def on_event(self, event: ClusterEvent) -> int:
        """A cluster change: move the parked pods it may help. Returns how many moved."""
        self._event_seq += 1
        if self._popped_at:
            self._in_flight_events.append((self._event_seq, event))
            if len(self._in_flight_events) > MAX_IN_FLIGHT_EVENTS:
                self._in_flight_forgotten = self._in_flight_events.popleft()[0]
        for_kind, for_any = self._waiting_for.get(event.kind), self._waiting_for.get(None)
        if not for_kind and not for_any:
            return 0  # most events: nothing parked waits for this kind
        moved = 0
        waiting = [*(for_kind or {}).values(), *(for_any or {}).values()]
        for qp in waiting:
            try:
                hint = self._hint(qp, event)
            except Exception as err:
                self._contain(qp, "QueueingHint", err)
                continue
            if hint is QueueingHint.QUEUE:
                self._leave_unschedulable(qp)
                self._came(qp, EVENT_LABELS.get(event.kind, event.kind.value))
                moved += 1
        return moved

    # ----- scheduler side
    def flush(self) -> None:
        now = self._clock.now()
        while self._backoff and self._backoff[0][0] <= now:
            _, token, key = heapq.heappop(self._backoff)
            if self._token.get(key) == token:
                qp = self._pods[key]
                self._enqueue(qp)  # PreEnqueue again on the way in, as kube-scheduler
                self._came(qp, BACKOFF_COMPLETE)
        if now >= self._next_flush:
            self._next_flush = now + self.timings.flush_interval
            for qp in list(self._unschedulable.values()):
                if now - qp.timestamp >= self.timings.unschedulable_timeout:
                    if self._still_rejected(qp):
                        # Every plugin that rejected it would, on the cluster as it is now: as if
                        # tried and refused again (asked again next period).
                        qp.attempts += 1
                        self._failed(qp, now, refused=True)
                        continue
                    qp.retried |= now - qp.diagnosed >= self.timings.rediagnose_interval  # a whole cycle
                    self._leave_unschedulable(qp)
                    self._came(qp, UNSCHEDULABLE_TIMEOUT)
            for qp in list(self._parked.values()):
                if now - qp.timestamp >= self.timings.unschedulable_timeout:
                    self._enqueue(qp)  # the bug may have been transient: try once more
                    self._came(qp, UNSCHEDULABLE_TIMEOUT)

    def pop(self) -> QueuedPod | None:
        """The next pod to schedule, or None when nothing is ready."""
        self.flush()
        if self._picker is not None:
            return self._pop_picked(self._picker)
        while self._active:
            _, token, key = heapq.heappop(self._active)
            if self._token.get(key) != token:
                continue  # stale entry: the pod moved or was re-sorted
            return self._popped(key)
        self._wakeup.clear()
        return None

    def _pop_picked(self, picker: QueuePickPlugin) -> QueuedPod | None:
        """The pod the QueuePick plugin chooses among the first `window` active ones. Those are
        held sorted outside the heap (`_front`) between pops, so a pick costs one heap operation,
        not a window's; the others keep their keys, tokens and places."""
        window, front, tokens, active = picker.window, self._front, self._token, self._active
        if self._front_stale:
            front[:] = [e for e in front if tokens.get(e[2]) == e[1]]  # moved or re-sorted since
            self._front_stale = False
        while len(front) > window:
            heapq.heappush(active, front.pop())
        while active:
            top = active[0]
            if tokens.get(top[2]) != top[1]:
                heapq.heappop(active)  # stale
            elif len(front) < window:
                bisect.insort(front, heapq.heappop(active))
            elif top < front[-1]:  # queued since the window was filled, ahead of its last
                bisect.insort(front, heapq.heapreplace(active, front.pop()))
            else:
                break
        if not front:
            self._wakeup.clear()
            return None
        chosen = 0
        if len(front) > 1:
            candidates = [self._pods[key] for _, _, key in front]
            try:
                chosen = picker.pick(candidates)
            except Exception as err:  # a plugin's bug: the queue's own order, and the bug reported
                if self._contained is not None:
                    self._contained(candidates[0], "QueuePick", err)
            if not 0 <= chosen < len(front):
                chosen = 0
        return self._popped(front.pop(chosen)[2])

    def _popped(self, key: PodKey) -> QueuedPod:
        del self._token[key]
        self._where[key] = IN_FLIGHT
        self._popped_at[key] = self._event_seq
        qp = self._pods[key]
        qp.attempts += 1
        return qp

    async def wait(self, timeout: float) -> None:
        """Block until something may be ready (live loop); the simulator never calls this."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout)

    def done(self, key: PodKey) -> None:
        """The pod was bound (or handed to binding): it leaves the queue."""
        self.delete(key)

    def requeue_unschedulable(self, qp: QueuedPod, rejectors: frozenset[str]) -> None:
        """After a failed attempt. If an event came in while the pod was in flight that its
        rejectors' hints say may help, it may already have: back off instead of parking
        (kube-scheduler's in-flight events)."""
        key = qp.pod.key
        if key not in self._pods:
            return
        qp.unschedulable_plugins = rejectors
        # No plugin refused it (a cluster without nodes): kube counts it as an error, and as no
        # event is known to help, it is tried again after its backoff.
        self._failed(qp, self._clock.now(), refused=bool(rejectors))
        popped = self._popped_at.pop(key, self._event_seq)
        if not rejectors or (popped < self._event_seq and self._helped_in_flight(qp, popped)):
            self._push_backoff(qp)
        else:
            self._park(qp, UNSCHEDULABLE)
        self._forget_in_flight_events()
        self._came(qp, ATTEMPT_FAILED)

    def _helped_in_flight(self, qp: QueuedPod, popped: int) -> bool:
        """Some event since `popped` may help the pod (or one that may was forgotten)."""
        if popped < self._in_flight_forgotten:
            return True
        for seq, event in reversed(self._in_flight_events):
            if seq <= popped:
                return False
            try:
                if self._hint(qp, event) is QueueingHint.QUEUE:
                    return True
            except Exception:  # a hint's bug: as if it said the event may help
                return True
        return False

    def _forget_in_flight_events(self) -> None:
        """Drop the events older than every pod still in flight."""
        events = self._in_flight_events
        if not self._popped_at:
            events.clear()
            self._in_flight_kept = 0
        elif len(events) > 2 * self._in_flight_kept + 64:  # now and then: a pod may stay in flight long
            oldest = min(self._popped_at.values())
            while events and events[0][0] <= oldest:
                events.popleft()
            self._in_flight_kept = len(events)

    def park(self, qp: QueuedPod) -> None:
        """A bug hit this pod: hold it until it changes or the unschedulable timeout passes."""
        if qp.pod.key not in self._pods:
            return
        self._drop_unschedulable(qp.pod.key)
        qp.timestamp = self._clock.now()
        self._popped_at.pop(qp.pod.key, None)
        self._forget_in_flight_events()
        self._park(qp, PARKED)
        self._came(qp, ATTEMPT_FAILED)

    def requeue_backoff(self, qp: QueuedPod) -> None:
        """After an error (bind failure, API error): retry after the backoff."""
        key = qp.pod.key
        if key not in self._pods:
            return
        self._failed(qp, self._clock.now(), refused=False)
        self._popped_at.pop(key, None)
        self._forget_in_flight_events()
        self._push_backoff(qp)
        self._came(qp, ATTEMPT_FAILED)

    # ----- reads
    def next_wakeup(self) -> float | None:
        """When the queue may next have work without any new event (backoff expiry or flush)."""
        while self._backoff and self._token.get(self._backoff[0][2]) != self._backoff[0][1]:
            heapq.heappop(self._backoff)  # drop stale entries
        times = [self._backoff[0][0]] if self._backoff else []
        if self._unschedulable or self._parked:
            times.append(self._next_flush)
        return min(times) if times else None

    def where(self, key: PodKey) -> str | None:
        return self._where.get(key)

    def get(self, key: PodKey) -> QueuedPod | None:
        return self._pods.get(key)

    def has_active(self) -> bool:
        """Whether a pod waits in the active queue (O(1) amortised, unlike `counts`)."""
        if any(self._token.get(key) == token for _, token, key in self._front):
            return True
        while self._active and self._token.get(self._active[0][2]) != self._active[0][1]:
            heapq.heappop(self._active)  # drop stale entries
        return bool(self._active)

    def has_backoff(self) -> bool:
        """Whether a pod waits out a backoff (O(1) amortised)."""
        while self._backoff and self._token.get(self._backoff[0][2]) != self._backoff[0][1]:
            heapq.heappop(self._backoff)  # drop stale entries
        return bool(self._backoff)

    def unschedulable_by_plugin(self) -> dict[tuple[str, str], int]:
        """(plugin, profile) -> pods it keeps unschedulable or gated (kube-scheduler's
        scheduler_unschedulable_pods: a pod counts once for each plugin that rejected it)."""
        out: collections.Counter[tuple[str, str]] = collections.Counter()
        for key, where in self._where.items():
            qp = self._pods[key]
            if where == UNSCHEDULABLE:
                for plugin in qp.unschedulable_plugins:
                    out[(plugin, qp.pod.scheduler_name)] += 1
            elif where == GATED and qp.gated_by:
                out[(qp.gated_by, qp.pod.scheduler_name)] += 1
        return dict(out)

    def counts(self) -> dict[str, int]:
        out = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0, PARKED: 0, IN_FLIGHT: 0}
        for where in self._where.values():
            out[ACTIVE if where == DORMANT else where] += 1
        return out

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, key: object) -> bool:
        return key in self._pods
