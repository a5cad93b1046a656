"""The built-in `default` profile over a simulated cluster of the given nodes."""

from __future__ import annotations

from typing import Any

from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler


def default_world(*nodes: dict[str, Any]) -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    for node in nodes:
        cluster.add_node(node)
    registry = default_registry()
    return clock, cluster, Scheduler(builtin_config(registry).only("default"), cluster, clock, registry)
