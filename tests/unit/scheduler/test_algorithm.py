"""The fused-kernel contract as the engine reads it: plugins declare their terms, the engine never
names a plugin."""

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pytest
import yaml

from pysched.api.builders import make_pod, node_dict
from pysched.api.objects import PodInfo
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import ConfigError, parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.fused import FusedTerm, ResourceWeights
from pysched.framework.interfaces import FilterResult
from pysched.framework.masks import mask_result
from pysched.framework.nodetable import I64, Bools, NodeTable
from pysched.framework.registry import NoArgs, PluginSpec, Registry
from pysched.plugins import default_registry
from pysched.plugins.node_resources.reference import least_allocated
from pysched.scheduler.scheduler import Scheduler


@dataclass(frozen=True)
class Spread:
    """An out-of-tree plugin under a name the engine has never heard of, whose meaning is the
    kernel's LEAST_ALLOCATED term with memory weighted three times cpu."""

    NAME: ClassVar[str] = "Spread"
    fused_term: ClassVar[FusedTerm] = FusedTerm.LEAST_ALLOCATED
    params: Any = field(default_factory=lambda: ResourceWeights(cpu=1, memory=3))

    def fused_params(self) -> Any:
        return self.params

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        cpu, memory = pod.nonzero_cpu_memory
        size = nodes.size
        return least_allocated(cpu, memory, nodes.allocatable[:size], nodes.nonzero_requested[:size], 1, 3)


def _registry(spread: Spread) -> Registry:
    registry = default_registry()
    registry.register(PluginSpec("Spread", NoArgs, lambda args, handle: spread, Spread))
    return registry


def _profile(score: list[dict[str, Any]], config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "profiles": [
            {
                "schedulerName": "x",
                "plugins": {
                    "queueSort": [{"name": "PrioritySort"}],
                    "filter": [{"name": "NodeResourcesFit"}],
                    "score": score,
                    "bind": [{"name": "DefaultBinder"}],
                },
                "pluginConfig": config or [],
            }
        ]
    }


def _scheduler(registry: Registry, profile: dict[str, Any]) -> tuple[SimulatedCluster, Scheduler]:
    clock = VirtualClock(0.0)
    cluster = SimulatedCluster(clock)
    return cluster, Scheduler(parse_config(profile, "test", registry), cluster, clock, registry)


def test_a_plugin_declaring_a_fused_term_runs_in_the_kernel_whatever_its_name() -> None:
    registry = _registry(Spread())
    cluster, scheduler = _scheduler(registry, _profile([{"name": "Spread", "weight": 3}]))
    algorithm = scheduler.frameworks["x"].algorithm
    assert algorithm.extra_scores == ()  # nothing left for the slow path
    weights = algorithm.weights
    assert (weights.least_allocated, weights.cpu_weight, weights.memory_weight) == (3, 1, 3)
    # The kernel answers with the plugin's own meaning: memory-heavy free room wins.
    for node in (node_dict("cpu-rich", cpu="64", memory="8Gi"), node_dict("memory-rich", cpu="8", memory="64Gi")):
        scheduler.on_node_added(cluster.add_node(node))
    pod = make_pod("p", cpu="1", memory="1Gi", scheduler_name="x")
    result = scheduler.frameworks["x"].find_node(CycleState(), pod)
    assert result.node == "memory-rich"


def test_contradicting_declarations_are_refused_at_start_up() -> None:
    bad_params = _registry(Spread(params=(1, 3)))
    with pytest.raises(ConfigError, match="Spread gives"):
        _scheduler(bad_params, _profile([{"name": "Spread"}]))
    twice = _registry(Spread())
    with pytest.raises(ConfigError, match="fuse the same term"):
        _scheduler(twice, _profile([{"name": "Spread"}, {"name": "LeastAllocated"}]))
    filter_at_score = _profile([{"name": "LeastAllocated"}])
    filter_at_score["profiles"][0]["plugins"]["filter"] = [{"name": "LeastAllocated"}]
    with pytest.raises(ConfigError):  # LeastAllocated serves no filter point at all
        parse_config(filter_at_score, "test", default_registry())


def test_least_and_most_allocated_must_share_the_kernel_resource_weights() -> None:
    profile = _profile(
        [{"name": "LeastAllocated"}, {"name": "MostAllocated"}],
        [{"name": "LeastAllocated", "args": {"cpuWeight": 2}}, {"name": "MostAllocated", "args": {"cpuWeight": 1}}],
    )
    with pytest.raises(ConfigError, match="LeastAllocated and MostAllocated: must use the same resource weights"):
        _scheduler(default_registry(), profile)
    same = yaml.safe_load(yaml.safe_dump(profile))
    same["profiles"][0]["pluginConfig"][1]["args"] = {"cpuWeight": 2}
    _, scheduler = _scheduler(default_registry(), same)
    weights = scheduler.frameworks["x"].algorithm.weights
    assert (weights.least_allocated, weights.most_allocated, weights.cpu_weight) == (1, 1, 2)


@dataclass(frozen=True)
class SameTeam:
    """A mask filter reading what no in-tree filter reads: the pod's `team` label must match the
    node's. Under a cache key fixed to the in-tree filters' fields, two pods differing only in
    their team would share one mask."""

    NAME: ClassVar[str] = "SameTeam"

    def mask_key(self, pod: PodInfo) -> str:
        return pod.labels.get("team", "")

    def node_mask(self, pod: PodInfo, nodes: NodeTable) -> Bools:
        column = nodes.label_column("team")
        return np.asarray(column == nodes.label_value_id("team", pod.labels.get("team", "")))

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        return mask_result(self.node_mask(pod, nodes), "node(s) belong to another team", unresolvable=True)


def test_each_mask_filter_keys_the_mask_cache_by_what_it_reads() -> None:
    registry = default_registry()
    registry.register(PluginSpec("SameTeam", NoArgs, lambda args, handle: SameTeam(), SameTeam))
    profile = _profile([{"name": "LeastAllocated"}])
    profile["profiles"][0]["plugins"]["filter"] = [{"name": "SameTeam"}, {"name": "NodeResourcesFit"}]
    cluster, scheduler = _scheduler(registry, profile)
    for team in ("red", "blue"):
        scheduler.on_node_added(cluster.add_node(node_dict(f"{team}-node", labels={"team": team})))
    framework = scheduler.frameworks["x"]
    for team in ("red", "blue", "red"):
        pod = make_pod(f"{team}-pod", scheduler_name="x", labels={"team": team})
        assert framework.find_node(CycleState(), pod).node == f"{team}-node"
