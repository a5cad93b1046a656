"""The built-in `pysched` profile on a simulated cluster, with Autoscale's args overridden."""

import dataclasses
from typing import Any

from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import SchedulerConfig
from pysched.framework.registry import camel_case
from pysched.plugins import default_registry
from pysched.plugins.autoscale import NAME
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler


def pysched_scheduler(cluster: SimulatedCluster, clock: VirtualClock, **args: Any) -> Scheduler:
    """`args` in snake case (`cooldown_seconds=0`), as `AutoscaleArgs` names them."""
    registry = default_registry()
    (profile,) = builtin_config(registry).only("pysched").profiles
    given = {camel_case(name): value for name, value in args.items()}
    plugin_args = {**profile.plugin_args, NAME: {**profile.plugin_args.get(NAME, {}), **given}}
    config = SchedulerConfig((dataclasses.replace(profile, plugin_args=plugin_args),))
    return Scheduler(config, cluster, clock, registry)
