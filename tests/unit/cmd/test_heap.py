"""The collector policy of long-running commands: what was loaded is frozen for the block, and
everything, reference cycles included, is the collector's again after it."""

from __future__ import annotations

import asyncio
import gc
import weakref

from pysched.cmd.bench import run_bench
from pysched.cmd.heap import settled
from pysched.scheduler.scheduler import Scheduler


class _Record:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def _tracked(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())


def test_what_was_loaded_is_skipped_by_the_collector_until_the_block_ends() -> None:
    loaded = [[i] for i in range(100)]
    with settled() as frozen:
        assert frozen >= len(loaded) and gc.get_freeze_count() > 0
        later: list[object] = []
        assert not _tracked(loaded) and _tracked(later)
    assert gc.get_freeze_count() == 0
    assert _tracked(loaded)


def test_a_cycle_frozen_in_the_block_is_collected_after_it() -> None:
    record = _Record()
    gone = weakref.ref(record)
    with settled():
        del record
        gc.collect()
        assert gone() is not None  # frozen: the collector does not look at it
    gc.collect()
    assert gone() is None


def test_the_bench_schedules_with_the_loaded_cluster_frozen() -> None:
    seen: list[int] = []

    def configure(scheduler: Scheduler) -> None:
        run = scheduler.run_until_idle

        async def observed() -> None:
            seen.append(gc.get_freeze_count())
            await run()

        scheduler.run_until_idle = observed  # type: ignore[method-assign]

    result = asyncio.run(run_bench(20, 50, configure=configure))
    assert result.scheduled == 50
    assert seen and seen[0] > 0
    assert gc.get_freeze_count() == 0
    seen.clear()
    asyncio.run(run_bench(20, 50, configure=configure, settle=False))
    assert seen == [0]
