"""Work started from synchronous code (events and conditions written from the queue path, reads
of how a pod ended) that must run on the event loop without anyone awaiting it there."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class BackgroundTasks:
    """Coroutines run as tasks and kept referenced until they finish (the loop holds only weak
    references to tasks)."""

    __slots__ = ("_tasks",)

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[object]] = set()

    def spawn(self, work: Coroutine[Any, Any, object]) -> None:
        """Run `work` on the loop; what it returns (a write's Status) is not looked at."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            work.close()  # no loop runs (a plugin called directly by a unit test): nothing to write to
            return
        task = loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def join(self) -> None:
        """Wait for the tasks running now (their failures are theirs: not raised here)."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def __len__(self) -> int:
        return len(self._tasks)
