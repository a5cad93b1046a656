import asyncio
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.api.images import node_images, normalized_image_name
from pysched.api.objects import NodeInfo, node_from_dict, pod_from_dict
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.nodetable import NodeTable
from pysched.framework.status import Code
from pysched.plugins import default_registry
from pysched.plugins.image_locality import MB, ImageLocality
from pysched.plugins.image_locality import reference as ref
from pysched.scheduler.scheduler import Scheduler


def imaged(name: str, *images: tuple[list[str], int], **kw: Any) -> dict[str, Any]:
    raw = node_dict(name, **kw)
    raw["status"]["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    return raw


def with_images(
    name: str, *images: str, init: tuple[str, ...] = (), volumes: tuple[str, ...] = (), **kw: Any
) -> dict[str, Any]:
    raw = pod_dict(name, **kw)
    raw["spec"]["containers"] = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    if init:
        raw["spec"]["initContainers"] = [{"name": f"i{i}", "image": image} for i, image in enumerate(init)]
    if volumes:
        raw["spec"]["volumes"] = [{"name": f"v{i}", "image": {"reference": ref}} for i, ref in enumerate(volumes)]
    return raw


def test_image_names_are_normalized_as_kube_does() -> None:
    assert normalized_image_name("trainer") == "trainer:latest"
    assert normalized_image_name("reg:5000/trainer") == "reg:5000/trainer:latest"
    assert normalized_image_name("reg:5000/trainer:v1") == "reg:5000/trainer:v1"
    assert normalized_image_name("trainer@sha256:abc") == "trainer@sha256:abc"


def test_node_images_are_bounded_and_bad_entries_skipped() -> None:
    status = {"images": [{"names": ["a:1"], "sizeBytes": 5}, {"names": "x", "sizeBytes": 1}, {"sizeBytes": -1}, 7]}
    assert [(i.names, i.size) for i in node_images(status)] == [(("a:1",), 5)]
    many = {"images": [{"names": [f"i{n}:1"], "sizeBytes": 1} for n in range(5000)]}
    assert len(node_images(many)) == 1024
    assert node_images({"images": "nope"}) == ()


def test_kube_formula_on_a_known_cluster() -> None:
    table = NodeTable()
    table.add(node_from_dict(imaged("a", (["big:latest"], 500 * MB), (["small:v1"], 10 * MB))))
    table.add(node_from_dict(imaged("b", (["big:latest"], 500 * MB))))
    table.add(node_from_dict(node_dict("c")))
    table.add(node_from_dict(node_dict("d")))
    pod = pod_from_dict(with_images("p", "big", "small:v1"))
    plugin, state = ImageLocality(), CycleState()
    feasible = np.ones(4, np.bool_)
    assert plugin.pre_score(state, pod, table, feasible).ok
    # big: 500 MB x 2/4 nodes = 250 MB; small: 10 MB x 1/4; two containers: max 2000 MB.
    a = 100 * (250 * MB + int(10 * MB * 0.25) - 23 * MB) // (2000 * MB - 23 * MB)
    b = 100 * (250 * MB - 23 * MB) // (2000 * MB - 23 * MB)
    assert list(plugin.score_batch(state, pod, table, feasible)) == [a, b, 0, 0]


def test_image_volumes_count_as_kube_counts_them() -> None:
    """An image volume's image held by a node scores as a container's does (kube-scheduler v1.36's
    sumImageScores), without raising the container count the thresholds scale with."""
    table = NodeTable()
    table.add(node_from_dict(node_dict("a")))
    table.add(node_from_dict(imaged("b", (["registry.io/model:v1"], 900 * MB))))
    table.add(node_from_dict(node_dict("c")))
    pod = pod_from_dict(with_images("p", "trainer", volumes=("registry.io/model:v1",)))
    plugin, state = ImageLocality(), CycleState()
    feasible = np.ones(3, np.bool_)
    assert plugin.pre_score(state, pod, table, feasible).ok
    b = 100 * (300 * MB - 23 * MB) // (1000 * MB - 23 * MB)  # 900 MB x 1/3 nodes; one container
    assert list(plugin.score_batch(state, pod, table, feasible)) == [0, b, 0] and b == 28


def test_skip_when_no_node_holds_any_of_the_pods_images() -> None:
    table = NodeTable()
    table.add(node_from_dict(node_dict("a")))
    plugin, feasible = ImageLocality(), np.ones(1, np.bool_)
    pod = pod_from_dict(with_images("p", "trainer"))
    assert plugin.pre_score(CycleState(), pod, table, feasible).code is Code.SKIP
    table.add(node_from_dict(imaged("b", (["other:1"], MB))))
    assert plugin.pre_score(CycleState(), pod, table, feasible).code is Code.SKIP
    table.update(node_from_dict(imaged("b", (["trainer:latest"], MB))))  # a status-only update
    assert plugin.pre_score(CycleState(), pod, table, feasible).ok
    table.remove(NodeName("b"))
    assert table.image_rows == {} and table.image_size == {}


NAMES = ["a:latest", "b:v1", "c:latest", "reg/d:latest"]
POD_IMAGES = ["a", "b:v1", "c", "reg/d", "e"]
node_images_st = st.lists(
    st.tuples(st.lists(st.sampled_from(NAMES), min_size=1, max_size=2), st.integers(0, 3000 * MB))
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(node_images_st, min_size=1, max_size=6),
    st.lists(st.sampled_from(POD_IMAGES), min_size=1, max_size=3),
    st.lists(st.sampled_from(POD_IMAGES), max_size=2),
    st.lists(st.sampled_from(POD_IMAGES), max_size=2),
)
def test_indexed_scores_equal_the_direct_formula(
    per_node: list[list[tuple[list[str], int]]], images: list[str], init: list[str], volumes: list[str]
) -> None:
    table = NodeTable()
    nodes: list[NodeInfo] = []
    for i, held in enumerate(per_node):
        node = node_from_dict(imaged(f"n{i}", *held))
        nodes.append(node)
        table.add(node)
    raw = with_images("p", *images, init=tuple(init), volumes=tuple(volumes))
    pod = pod_from_dict(raw)
    plugin, state = ImageLocality(), CycleState()
    feasible = np.ones(len(nodes), np.bool_)
    expected = ref.scores(raw, nodes)
    if plugin.pre_score(state, pod, table, feasible).code is Code.SKIP:
        assert not expected.any()
    else:
        np.testing.assert_array_equal(plugin.score_batch(state, pod, table, feasible), expected)


PROFILE = {
    "profiles": [
        {
            "schedulerName": "img",
            "plugins": {
                "queueSort": [{"name": "PrioritySort"}],
                "filter": [{"name": "NodeResourcesFit"}],
                "preScore": [{"name": "ImageLocality"}],
                "score": [{"name": "LeastAllocated", "weight": 1}, {"name": "ImageLocality", "weight": 1}],
                "bind": [{"name": "DefaultBinder"}],
            },
        }
    ]
}


def test_the_pod_goes_to_the_node_holding_its_image() -> None:
    async def run() -> None:
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        scheduler = Scheduler(parse_config(PROFILE, "t", registry), cluster, clock, registry)
        cluster.add_node(node_dict("empty"))
        cluster.add_node(imaged("cached", (["trainer:latest"], 900 * MB)))
        cluster.add_node(node_dict("empty2"))
        await scheduler.start()
        cluster.create_pod(with_images("p", "trainer", scheduler_name="img"))
        cluster.create_pod(with_images("q", "other", scheduler_name="img"))  # no node holds it: Skip
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p")].node_name == "cached"
        assert cluster.pods[PodKey("default/q")].node_name is not None
        await scheduler.stop()

    asyncio.run(run())
