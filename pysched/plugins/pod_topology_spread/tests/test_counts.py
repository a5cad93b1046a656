"""SelectorCounts' inverted index: a selector registered before the pods arrive is kept up to
date through the index buckets alone, so any pod an indexed selector missed shows up here as a
count that differs from a recount with the plain label-selector semantics."""

import random

import numpy as np

from pysched.api.builders import make_node, make_pod
from pysched.api.labels import selector_matches
from pysched.api.objects import PodInfo
from pysched.api.spread import SpreadSelector, parse_selector
from pysched.framework.nodetable import NodeTable
from pysched.framework.placed import PlacedPods
from pysched.plugins.pod_topology_spread.counts import SelectorCounts

RAW_SELECTORS = [
    {"matchLabels": {"app": "web"}},
    {"matchLabels": {"app": "web", "tier": "t1"}},
    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db", "cache"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["t1", "t2"]}]},
    {
        "matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web", "db"]},
            {"key": "tier", "operator": "In", "values": ["t2"]},
        ]
    },
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
    {
        "matchExpressions": [
            {"key": "tier", "operator": "Exists"},
            {"key": "app", "operator": "NotIn", "values": ["db"]},
        ]
    },
    {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]},  # unindexable
    {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},  # unindexable
    {"matchLabels": {"app": "db"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
]
APPS = ["web", "db", "cache", None]
TIERS = ["t1", "t2", "t3", None]


def _selectors() -> list[SpreadSelector]:
    parsed = [parse_selector(raw)[0] for raw in RAW_SELECTORS]
    # matchLabelKeys merged into a selector (an In or NotIn-only one gets a matchLabels pair)
    parsed += [parsed[2].with_labels({"tier": "t1"}), parsed[7].with_labels({"tier": "t3"})]
    parsed.append(SpreadSelector((("app", "web"),), (("app", "In", ("db", "web")),)))
    return parsed


def _labels(rng: random.Random) -> dict[str, str]:
    pairs = {"app": rng.choice(APPS), "tier": rng.choice(TIERS), "other": rng.choice(["x", None])}
    return {k: v for k, v in pairs.items() if v is not None}


def _pod(name: str, labels: dict[str, str], namespace: str) -> PodInfo:
    return make_pod(name, namespace=namespace, cpu="1", labels=labels)


def _recount(placed: dict[str, tuple[PodInfo, int]], namespace: str, selector: SpreadSelector, size: int) -> list[int]:
    out = [0] * size
    for pod, row in placed.values():
        if pod.namespace == namespace and selector_matches(selector.as_mapping(), pod.labels):
            out[row] += 1
    return out


def test_index_terms_are_requirements() -> None:
    web, both, in3, _, multi, exists, exists_notin, notin, absent, db_absent = _selectors()[:10]
    assert web.index_terms() == (("app", "web"),)
    assert both.index_terms() == (("app", "web"),)
    assert sorted(in3.index_terms()) == [("app", "cache"), ("app", "db"), ("app", "web")]
    assert multi.index_terms() == (("tier", "t2"),)  # the In with fewer values
    assert exists.index_terms() == exists_notin.index_terms() == (("tier", None),)
    assert notin.index_terms() == absent.index_terms() == ()
    assert db_absent.index_terms() == (("app", "db"),)
    assert SpreadSelector().index_terms() == SpreadSelector(nothing=True).index_terms() == ()


def test_matches_equals_the_mapping_semantics() -> None:
    rng = random.Random(7)
    for _ in range(300):
        labels = _labels(rng)
        for selector in _selectors():
            assert selector.matches(labels) == selector_matches(selector.as_mapping(), labels), (selector, labels)


def test_indexed_counts_follow_placements_and_label_changes() -> None:
    rng = random.Random(11)
    nodes = NodeTable()
    for i in range(5):
        nodes.add(make_node(f"n{i}", cpu="64", memory="64Gi"))
    pods = PlacedPods()
    counts = SelectorCounts(pods, nodes)
    rescanned = SelectorCounts(pods, nodes, kept=3)  # evicts, so each read rebuilds from its pod index
    selectors = _selectors()
    namespaces = ["default", "other"]
    for namespace in namespaces:
        for selector in selectors:
            assert not counts.of(namespace, selector).any()  # registered before any pod
    placed: dict[str, tuple[PodInfo, int]] = {}
    for step in range(400):
        action = rng.random()
        if placed and action < 0.25:
            name = rng.choice(sorted(placed))
            pod, row = placed.pop(name)
            pods.removed(pod, row)
        elif placed and action < 0.55:  # the same pod with new labels
            name = rng.choice(sorted(placed))
            old, row = placed[name]
            new = _pod(name, _labels(rng), old.namespace)
            pods.replaced(old, new, row)
            placed[name] = (new, row)
        else:
            name = f"p{step}"
            pod, row = _pod(name, _labels(rng), rng.choice(namespaces)), rng.randrange(nodes.size)
            pods.placed(pod, row)
            placed[name] = (pod, row)
        for namespace in namespaces:
            for selector in selectors:
                expected = _recount(placed, namespace, selector, nodes.size)
                assert counts.of(namespace, selector).tolist() == expected, (step, namespace, selector)
                assert rescanned.of(namespace, selector).tolist() == expected, (step, namespace, selector)
    late = SelectorCounts(pods, nodes)  # subscribed after the pods: built from the replay
    for namespace in namespaces:
        for selector in selectors:
            assert late.of(namespace, selector).tolist() == _recount(placed, namespace, selector, nodes.size)


def test_eviction_drops_the_index_entries() -> None:
    nodes = NodeTable()
    nodes.add(make_node("n0", cpu="64", memory="64Gi"))
    pods = PlacedPods()
    counts = SelectorCounts(pods, nodes, kept=2)
    selectors = _selectors()
    for selector in selectors:
        counts.of("default", selector)
    assert len(counts) == 2
    pods.placed(_pod("a", {"app": "web", "tier": "t1"}, "default"), 0)
    for selector in selectors:
        assert counts.of("default", selector).tolist() == [int(selector.matches({"app": "web", "tier": "t1"}))]
    assert np.array_equal(counts.of("default", selectors[0]), [1])
