import asyncio

import pytest

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import ConfigError, parse_config
from pysched.framework.registry import ArgsError, parse_args
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.plugins.seed_restart import SeedArgs, SeedRestart, decide
from pysched.scheduler.scheduler import Scheduler


def test_the_papers_rule() -> None:
    # 300 steps in 300 s of 1000: T = 1200 s; deadline 600 s after the start, 300 s left.
    decision = decide(1000, 300, 1000, 300.0, 300.0, 600.0, 1.2)
    assert decision is not None and decision.predicted_s == 1200 and decision.cpu_milli == 4000
    assert decide(2000, 300, 1000, 300.0, 300.0, 600.0, 1.2) == decision.__class__(1200, 8000)
    assert decide(1000, 300, 1000, 150.0, 300.0, 600.0, 1.2) is None  # T = 600: on time
    assert decide(1000, 300, 1000, 300.0, -1.0, 600.0, 1.2) is None  # deadline passed: nothing helps


def test_args_are_checked() -> None:
    registry = default_registry()
    raw = {
        "profiles": [
            {
                "schedulerName": "s",
                "plugins": {
                    "queueSort": [{"name": "EarliestDeadline"}],
                    "bind": [{"name": "DefaultBinder"}],
                    "reconcile": [{"name": "SeedRestart"}],
                },
                "pluginConfig": [{"name": "SeedRestart", "args": {"factor": 0.5}}],
            }
        ]
    }
    with pytest.raises(ConfigError, match=r"factor: must be >= 1 and <= 100, got 0\.5"):
        parse_config(raw, "t", registry)
    assert SeedArgs().warmup_steps == 300


def test_seed_places_on_the_least_cpu_loaded_node() -> None:
    async def run() -> dict[PodKey, str | None]:
        clock = VirtualClock(0.0)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        config = builtin_config(registry)
        # a: half its CPUs taken, memory free; b: few CPUs taken, memory nearly full
        cluster.add_node(node_dict("a", cpu="16", memory="64Gi"))
        cluster.add_node(node_dict("b", cpu="16", memory="64Gi"))
        cluster.create_pod(pod_dict("load-a", cpu="8", memory="1Gi", node_name="a", scheduler_name="x"))
        cluster.create_pod(pod_dict("load-b", cpu="2", memory="60Gi", node_name="b", scheduler_name="x"))
        for policy in ("seed", "default"):
            scheduler = Scheduler(config.only(policy), cluster, clock, registry)
            await scheduler.start()
            cluster.create_pod(pod_dict(f"job-{policy}", cpu="1", memory="1Gi", scheduler_name=policy))
            await scheduler.run_until_idle()
            await scheduler.stop()
        return {k: p.node_name for k, p in cluster.pods.items()}

    placed = asyncio.run(run())
    assert placed[PodKey("default/job-seed")] == "b"  # least CPU-loaded, memory ignored
    assert placed[PodKey("default/job-default")] == "a"  # LeastAllocated over cpu and memory


@pytest.mark.parametrize("interval", [1.0e-300, 0.0, -1.0, 0.05, 1e9, float("inf"), float("nan")])
def test_the_reconcile_interval_is_bounded(interval: float) -> None:
    with pytest.raises(ArgsError, match="intervalSeconds"):
        parse_args(SeedArgs, {"intervalSeconds": interval})


def test_sane_intervals_and_factors_load() -> None:
    assert parse_args(SeedArgs, {"intervalSeconds": 0.1, "factor": 1.0}).interval_seconds == 0.1
    assert parse_args(SeedArgs, {"intervalSeconds": 86_400}).interval_seconds == 86_400
    for factor in (float("inf"), float("nan"), 1e300):
        with pytest.raises(ArgsError, match="factor"):
            parse_args(SeedArgs, {"factor": factor})


def test_it_forgets_a_pod_once_it_ended_or_was_deleted() -> None:
    async def run() -> SeedRestart:
        clock = VirtualClock(0.0)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        scheduler = Scheduler(builtin_config(registry).only("seed"), cluster, clock, registry)
        plugin = scheduler.frameworks["seed"].plugins["SeedRestart"]
        assert isinstance(plugin, SeedRestart)
        cluster.add_node(node_dict("n", cpu="16", memory="64Gi"))
        await scheduler.start()
        for name in ("ends", "deleted"):
            cluster.create_pod(pod_dict(name, cpu="1", scheduler_name="seed"))
        await scheduler.run_until_idle()
        assert set(plugin._started) == {"default/ends", "default/deleted"}
        cluster.finish_pod(PodKey("default/ends"))
        cluster.delete_pod(PodKey("default/deleted"))
        await scheduler.run_until_idle()
        await scheduler.stop()
        return plugin

    plugin = asyncio.run(run())
    assert not plugin._started and not plugin._judged
