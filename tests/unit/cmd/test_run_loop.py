"""`pysched run` never keeps the Lease with a dead or stuck scheduling loop."""

import asyncio
from typing import Any

from pysched.cmd.run import LOOP_STALL_SECONDS, RunState, lead_and_schedule, liveness_problem


class DyingScheduler:
    """A scheduler whose loop raises: a bug past every per-pod guard."""

    clock: Any = None

    def take_over(self, ended: list[Any]) -> None:
        pass

    async def run(self, stop: asyncio.Event) -> None:
        raise RuntimeError("a bug nobody contained")


class Backend:
    async def take_over(self, now: float) -> list[Any]:
        return []


class Clock:
    def now(self) -> float:
        return 0.0


def test_a_loop_that_raises_stops_everything_and_says_why() -> None:
    async def run() -> RunState:
        state = RunState(leader=True)  # no leader election: leading from the start
        scheduler = DyingScheduler()
        scheduler.clock = Clock()
        await lead_and_schedule(scheduler, Backend(), None, state)  # type: ignore[arg-type]
        return state

    state = asyncio.run(run())
    assert state.stop.is_set()  # teardown follows: the Lease is handed back, the process exits
    assert not state.scheduling
    problem = liveness_problem(state, 0.0)
    assert problem is not None and "RuntimeError: a bug nobody contained" in problem


def test_liveness_fails_when_a_leaders_loop_stops_ticking() -> None:
    state = RunState(leader=True)
    assert liveness_problem(state, LOOP_STALL_SECONDS * 10) is None  # not scheduling (a follower)
    state.scheduling = True
    assert liveness_problem(state, LOOP_STALL_SECONDS - 1) is None
    problem = liveness_problem(state, LOOP_STALL_SECONDS + 1)
    assert problem is not None and "has not run for" in problem
