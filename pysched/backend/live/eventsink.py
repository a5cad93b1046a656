"""Events without flooding the API: series for repeats, a rate limit and a bounded backlog.

The same event for the same pod (type, reason, note) within `series_window` is not created
again: its `series.count` grows and is patched at most once per `patch_interval` (events.k8s.io/v1
series, as client-go's event broadcaster does). New events go through their own token bucket. While
the API takes them, none is dropped (up to `max_backlog`, a memory bound far above any burst):
a burst is posted late, not lost, where client-go's broadcaster drops past 1,000 queued. When
writes fail, the backlog is cut to `max_pending`, oldest first, and what it shed is counted; an
event no answer came for is tried again, `retry_delay` apart, up to `max_tries` times (client-go's
broadcaster: 12, 10 s apart), then counted too.
Events are best effort in Kubernetes, while binds and conditions are not, so events never wait
in front of them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from pysched.api.limits import truncate_note
from pysched.backend.live.ratelimit import TokenBucket

log = structlog.get_logger("pysched.events")

# An event no answer came for (the apiserver restarting, overloaded) is tried again, as
# client-go's broadcaster does (12 tries, 10 s apart), then counted as dropped.
RETRY_DELAY_S = 10.0
MAX_TRIES = 12


@dataclass(frozen=True, slots=True)
class EventRecord:
    namespace: str
    pod_name: str
    pod_uid: str
    type: str
    reason: str
    action: str
    note: str
    controller: str


@dataclass(slots=True)
class Series:
    name: str  # the Event object's name once created, "" before
    count: int
    last_seen: float
    last_seen_wall: float
    patched_count: int = 1


@dataclass(frozen=True, slots=True)
class _Create:
    record: EventRecord
    when: float  # wall clock
    tries: int = 0  # writes that got no answer so far


@dataclass(frozen=True, slots=True)
class _Patch:
    record: EventRecord
    series: Series


# The created event's name; "" when the API refused this event (it answered: the event is lost,
# the others are still written); None when the write failed (no answer, an overloaded server).
CreateFn = Callable[[EventRecord, float], Awaitable[str | None]]
# Whether the series' event is still there: False when the API says it is gone (deleted, or its
# TTL ran out within the series window), and the next repeat must create it again.
PatchFn = Callable[[EventRecord, Series], Awaitable[bool]]


class EventSink:
    def __init__(
        self,
        create: CreateFn,
        patch: PatchFn,
        *,
        qps: float = 20.0,
        burst: int = 50,
        max_pending: int = 1000,
        max_backlog: int = 200_000,
        workers: int = 8,
        series_window: float = 600.0,
        patch_interval: float = 30.0,
        retry_delay: float = RETRY_DELAY_S,
        max_tries: int = MAX_TRIES,
        now: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._create = create
        self._patch = patch
        self._bucket = TokenBucket(qps, burst, now=now)
        self._max_pending = max_pending
        self._max_backlog = max(max_backlog, max_pending)
        self._failing = False  # the last write failed: the backlog is held to max_pending
        self._window = series_window
        self._patch_interval = patch_interval
        self._retry_delay = retry_delay
        self._max_tries = max(1, max_tries)
        self._now = now
        self._wall = wall
        self._series: dict[EventRecord, Series] = {}
        self._jobs: collections.deque[_Create | _Patch] = collections.deque()
        self._wake = asyncio.Event()
        self._workers = max(1, workers)  # each waits on one API round trip at a time
        self._tasks: list[asyncio.Task[None]] = []
        self.dropped = 0
        self.created = 0
        self.patched = 0
        self.enabled: Callable[[], bool] = lambda: True

    @property
    def backlog(self) -> int:
        """Creates and series patches queued, not yet sent."""
        return len(self._jobs)

    @property
    def series(self) -> int:
        """Events remembered for series (each forgotten once quiet for `series_window`)."""
        return len(self._series)

    def record(self, event: EventRecord) -> None:
        """Queue an event (never blocks, never raises)."""
        if not self.enabled():
            return
        event = dataclasses.replace(event, note=truncate_note(event.note))
        now = self._now()
        series = self._series.get(event)
        if series is not None and now - series.last_seen < self._window:
            series.count += 1
            series.last_seen = now
            series.last_seen_wall = self._wall()
            return
        if len(self._jobs) >= (self._max_pending if self._failing else self._max_backlog):
            self.dropped += 1
            return
        self._series[event] = Series("", 1, now, self._wall())
        self._jobs.append(_Create(event, self._wall()))
        self._wake.set()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run(primary=i == 0)) for i in range(self._workers)]

    async def stop(self, drain_timeout: float = 2.0) -> None:
        if not self._tasks:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._drained(), drain_timeout)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _drained(self) -> None:
        while self._jobs:
            await asyncio.sleep(0.05)

    def _queue_patches(self) -> None:
        """Patch grown series, forget ones that went quiet (keeps the map bounded)."""
        now = self._now()
        for event, series in list(self._series.items()):
            if now - series.last_seen >= self._window:
                del self._series[event]
            elif series.name and series.count > series.patched_count:
                series.patched_count = series.count
                self._jobs.append(_Patch(event, series))

    async def _run(self, primary: bool) -> None:
        next_flush = self._now() + self._patch_interval
        while True:
            if primary and self._now() >= next_flush:
                self._queue_patches()
                next_flush = self._now() + self._patch_interval
            if not self._jobs:
                self._wake.clear()
                # only the primary worker needs to wake up for the series flush
                with contextlib.suppress(TimeoutError):
                    timeout = max(0.01, next_flush - self._now()) if primary else None
                    await asyncio.wait_for(self._wake.wait(), timeout)
                continue
            job = self._jobs.popleft()
            await self._bucket.acquire()
            written = True
            try:
                if isinstance(job, _Create):
                    name = await self._create(job.record, job.when)
                    written = name is not None  # logged by the writer when not created
                    if name:
                        self.created += 1
                    series = self._series.get(job.record)
                    if series is not None and name:
                        series.name = name
                elif await self._patch(job.record, job.series):
                    self.patched += 1
                else:  # its event is gone: created again, as client-go's recorder does
                    job.series.name = ""
                    self._jobs.appendleft(_Create(job.record, self._wall()))
            except Exception as err:  # I/O boundary: an event lost is logged, never fatal
                written = False
                log.warning("event not written", reason=job.record.reason, error=str(err))
            self._failing = not written
            if self._failing:
                if isinstance(job, _Create):
                    self._retry(job)
                self._shed()
                await asyncio.sleep(self._retry_delay)  # this worker waits; the API may be coming back

    def _retry(self, job: _Create) -> None:
        """First in line again, or dropped (and counted) after its last try."""
        if job.tries + 1 < self._max_tries:
            self._jobs.appendleft(dataclasses.replace(job, tries=job.tries + 1))
            return
        self._drop(job)

    def _shed(self) -> None:
        """Writes fail: hold the backlog to max_pending, dropping (and counting) the oldest, so
        that an API in trouble is not met with a flood when it comes back."""
        while len(self._jobs) > self._max_pending:
            self._drop(self._jobs.popleft())

    def _drop(self, job: _Create | _Patch) -> None:
        """Count a write given up; a create's series is forgotten, so that a repeat is a new event
        rather than a count on one that was never written."""
        self.dropped += 1
        if isinstance(job, _Create):
            series = self._series.get(job.record)
            if series is not None and not series.name:
                del self._series[job.record]
