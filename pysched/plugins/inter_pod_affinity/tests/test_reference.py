"""The incremental plugin equals the per-node, per-pod reference on random clusters and terms."""

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysched.api.builders import make_node, pod_dict
from pysched.api.ids import NodeName
from pysched.api.objects import PodInfo, pod_from_dict
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle
from pysched.framework.status import Code
from pysched.plugins.inter_pod_affinity import InterPodAffinity, InterPodAffinityArgs, factory, reference
from pysched.plugins.inter_pod_affinity.tests.helpers import affinity
from pysched.scheduler.cache import Cache

NAMESPACES = ["default", "ml", "web"]
APPS = ["a", "b", "c"]
KEYS = ["kubernetes.io/hostname", "zone", "rack"]

selector = st.one_of(
    st.builds(lambda v: {"matchLabels": {"app": v}}, st.sampled_from(APPS)),
    st.builds(
        lambda op, vs: {
            "matchExpressions": [{"key": "app", "operator": op, "values": vs if op in ("In", "NotIn") else []}]
        },
        st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
        st.lists(st.sampled_from(APPS), min_size=1, max_size=2),
    ),
    st.just({}),
)
namespace_part = st.one_of(
    st.just({}),
    st.builds(lambda ns: {"namespaces": ns}, st.lists(st.sampled_from(NAMESPACES), min_size=1, max_size=2)),
    st.just({"namespaceSelector": {}}),
    st.just({"namespaceSelector": {"matchLabels": {"team": "t"}}}),
)
term = st.builds(
    lambda sel, ns, key, label_keys: {"labelSelector": sel, "topologyKey": key, **ns, **label_keys},
    selector,
    namespace_part,
    st.sampled_from(KEYS),
    st.sampled_from([{}, {"matchLabelKeys": ["tier"]}, {"mismatchLabelKeys": ["tier"]}]),
)
weighted = st.tuples(st.integers(1, 100), term)
spec_affinity = st.one_of(
    st.none(),
    st.builds(
        lambda r, a, p, pa: affinity(r, a, p, pa),
        st.lists(term, max_size=2),
        st.lists(term, max_size=2),
        st.lists(weighted, max_size=2),
        st.lists(weighted, max_size=2),
    ),
)
pod_spec = st.tuples(
    st.sampled_from(NAMESPACES),
    st.sampled_from([*APPS, None]),
    st.sampled_from(["1", "2", None]),
    spec_affinity,
)
node_labels = st.fixed_dictionaries(
    {}, optional={"zone": st.sampled_from(["z1", "z2"]), "rack": st.sampled_from(["r1", "r2", "r3"])}
)


def _pod(name: str, spec: tuple[str, str | None, str | None, Any], node: str | None = None) -> PodInfo:
    namespace, app, tier, aff = spec
    labels = {k: v for k, v in (("app", app), ("tier", tier)) if v is not None}
    raw = pod_dict(name, namespace=namespace, labels=labels, node_name=node)
    if aff:
        raw["spec"]["affinity"] = aff
    return pod_from_dict(raw)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(node_labels, min_size=1, max_size=6),
    st.lists(st.tuples(pod_spec, st.integers(0, 5)), max_size=12),
    st.lists(pod_spec, min_size=1, max_size=4),
    st.integers(0, 12),
    st.integers(0, 3),
    st.booleans(),
    st.booleans(),
)
def test_plugin_equals_reference(
    node_specs: list[dict[str, str]],
    placed_specs: list[tuple[Any, int]],
    incoming: list[Any],
    subscribe_after: int,
    hard_weight: int,
    ignore: bool,
    team_ml: bool,
) -> None:
    clock = VirtualClock(0.0)
    cluster = SimulatedCluster(clock)
    for ns in NAMESPACES:
        cluster.set_namespace(ns, {"team": "t"} if ns == "ml" or (team_ml and ns == "web") else {})
    cache = Cache()
    nodes = [make_node(f"n{i}", labels=labels) for i, labels in enumerate(node_specs)]
    for node in nodes:
        cache.add_node(node)
    handle = Handle(cluster, clock, cache.nodes, pods=cache.placed)
    args = InterPodAffinityArgs(hard_pod_affinity_weight=hard_weight, ignore_preferred_terms_of_existing_pods=ignore)
    plugin: InterPodAffinity | None = None
    placed: list[tuple[PodInfo, Any]] = []

    def check() -> None:
        assert plugin is not None
        for j, spec in enumerate(incoming):
            pod = _pod(f"in{j}", spec)
            ns_labels = lambda ns: cluster.namespace_labels(ns) or {}  # noqa: E731
            want = reference.verdicts(pod, nodes, placed, ns_labels, cluster.namespace_names())
            state = CycleState()
            status = plugin.pre_filter(state, pod, cache.nodes)
            assert status.code in (Code.SUCCESS, Code.SKIP)
            if status.code is Code.SKIP:
                assert want == [None] * len(nodes)
            else:
                result = plugin.filter_batch(state, pod, cache.nodes)
                got: list[str | None] = [None] * len(nodes)
                for reason, where in result.reasons.items():
                    for row in np.flatnonzero(where):
                        got[row] = reason
                assert [None if result.feasible[i] else got[i] for i in range(len(nodes))] == want
            feasible = np.ones(len(nodes), np.bool_)
            want_raw = reference.raw_scores(pod, nodes, placed, ns_labels, cluster.namespace_names(), hard_weight)
            own = pod.pod_affinity is not None and pod.pod_affinity.preferred
            if ignore and not own:
                want_raw = [0] * len(nodes)
            state = CycleState()
            status = plugin.pre_score(state, pod, cache.nodes, feasible)
            if status.code is Code.SKIP:
                assert not any(want_raw)
            else:
                raw = plugin.score_batch(state, pod, cache.nodes, feasible)
                assert list(raw) == want_raw
                scores = raw.copy()
                plugin.normalize_scores(state, pod, scores, feasible)
                assert list(scores) == reference.normalized(want_raw)

    for i, (spec, index) in enumerate(placed_specs):
        if i == subscribe_after:
            plugin = factory(args, handle)
        node = nodes[index % len(nodes)]
        pod = _pod(f"p{i}", spec, node.name)
        cluster.namespaces.setdefault(pod.namespace, {})
        cache.add_pod(pod)
        placed.append((pod, node))
        if plugin is not None and i % 3 == 0:
            check()  # matchers made now are kept by the placements that follow
    if plugin is None:
        plugin = factory(args, handle)
    check()
    # Remove half of the pods: the counts follow.
    for pod, _ in placed[::2]:
        cache.remove_pod(pod)
    placed = placed[1::2]
    check()
    assert NodeName("n0") in cache.nodes.row
