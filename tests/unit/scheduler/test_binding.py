"""The binding pipeline: binds run in the order submitted, up to `workers` at once, and a job
wakes one idle worker, not every one."""

import asyncio
from typing import Any

from pysched.scheduler.binding import BindPipeline


def test_binds_run_in_order_and_at_most_workers_at_once() -> None:
    async def run() -> tuple[list[int], int]:
        done: list[int] = []
        running, most = 0, 0
        release = asyncio.Event()

        async def bind(job: int) -> None:
            nonlocal running, most
            running += 1
            most = max(most, running)
            await release.wait()  # an API call in flight
            running -= 1
            done.append(job)

        pipeline: BindPipeline[int] = BindPipeline(bind, workers=3)
        pipeline.start()
        for job in range(7):
            pipeline.submit(job)
        await asyncio.sleep(0)
        assert pipeline.in_flight == 7
        release.set()
        await pipeline.join()
        await pipeline.stop()
        return done, most

    done, most = asyncio.run(run())
    assert sorted(done) == list(range(7)) and most == 3


def test_a_job_wakes_one_idle_worker() -> None:
    async def run() -> list[int]:
        loop = asyncio.get_running_loop()
        scheduled: list[int] = []
        call_soon = loop.call_soon

        def counted(callback: Any, *args: Any, context: Any = None) -> asyncio.Handle:
            scheduled[-1] += 1
            return call_soon(callback, *args, context=context)

        async def bind(job: int) -> None:
            return None  # the simulated cluster never suspends

        pipeline: BindPipeline[int] = BindPipeline(bind, workers=64)
        pipeline.start()
        await asyncio.sleep(0)  # every worker waits for a job
        loop.call_soon = counted  # type: ignore[method-assign, assignment]
        for job in range(3):
            scheduled.append(0)
            pipeline.submit(job)
            await pipeline.join()
        loop.call_soon = call_soon  # type: ignore[method-assign]
        await pipeline.stop()
        return scheduled

    # What runs per job: the worker woken, and the join's wake-up; not 64 workers.
    assert all(n <= 4 for n in asyncio.run(run()))
