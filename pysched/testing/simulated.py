"""Helpers for tests that run the scheduler on the simulated backend."""

from __future__ import annotations

import asyncio
from typing import Any

from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
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


def default_world(*nodes: dict[str, Any]) -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    """The given nodes under the built-in `default` profile, on a virtual clock at 1000 s."""
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    for node in nodes:
        cluster.add_node(node)
    registry = default_registry()
    return clock, cluster, Scheduler(builtin_config(registry).only("default"), cluster, clock, registry)
