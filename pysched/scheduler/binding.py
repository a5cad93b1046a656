"""Binding cycles off the scheduling path: a deque drained by a bounded set of workers.

A worker runs one binding cycle at a time and takes the next job whenever it is free, so up to
`workers` binds are in flight against a real API server, while against the simulated cluster
(whose binds never suspend) one worker drains the whole batch without a task switch per pod. A
job wakes one idle worker, not all of them: the simulator binds thousands of pods one at a time,
and waking 64 workers for each cost more than the bind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import structlog

log = structlog.get_logger("pysched.scheduler.binding")

J = TypeVar("J")


class BindPipeline(Generic[J]):
    def __init__(self, run: Callable[[J], Awaitable[None]], workers: int) -> None:
        if workers < 1:
            raise ValueError("at least one bind worker is needed")
        self._run = run
        self._workers_wanted = workers
        self._jobs: asyncio.Queue[J] | None = None
        self._pending = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._idle: asyncio.Event | None = None

    def start(self) -> None:
        self._jobs = asyncio.Queue()
        self._idle = asyncio.Event()
        self._idle.set()
        self._tasks = [asyncio.create_task(self._worker()) for _ in range(self._workers_wanted)]

    def submit(self, job: J) -> None:
        assert self._jobs is not None and self._idle is not None, "start() first"
        self._pending += 1
        self._idle.clear()
        self._jobs.put_nowait(job)  # wakes one waiting worker, if any

    @property
    def in_flight(self) -> int:
        return self._pending

    async def _worker(self) -> None:
        assert self._jobs is not None and self._idle is not None
        while True:
            job = await self._jobs.get()  # no task switch while jobs are queued
            try:
                await self._run(job)
            except Exception:  # the runner handles expected failures; this is a bug
                log.exception("binding cycle crashed")
            finally:
                self._pending -= 1
                if self._pending == 0:
                    self._idle.set()

    async def join(self) -> None:
        """Wait until every submitted binding cycle has finished."""
        if self._idle is not None:
            await self._idle.wait()

    async def stop(self, grace: float | None = None) -> None:
        """Let the binding cycles in flight finish, for at most `grace` seconds (None: however
        long they take); those still running then (a PreBind waiting for volumes) are cancelled."""
        try:
            await asyncio.wait_for(self.join(), grace)
        except TimeoutError:
            log.warning("binding cycles cancelled at stop", in_flight=self._pending, grace_seconds=grace)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
