"""Helpers for tests that run the scheduler on the simulated backend."""

from __future__ import annotations

import asyncio

from pysched.framework.clock import VirtualClock
from pysched.scheduler.scheduler import Scheduler

PAST_BACKOFF_S = 11.0  # past a pod's backoff after its first refusals


def settle(scheduler: Scheduler) -> None:
    """Start the scheduler (again), run it until idle, move its virtual clock past the backoff of
    the pods it refused and run it until idle again: a preemptor is refused once, then binds."""

    async def go() -> None:
        await scheduler.start()
        await scheduler.run_until_idle()
        assert isinstance(scheduler.clock, VirtualClock), "settle needs the simulated backend's clock"
        scheduler.clock.advance(PAST_BACKOFF_S)
        await scheduler.run_until_idle()

    asyncio.run(go())
