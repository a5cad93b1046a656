"""InterPodAffinity on the simulated backend, one rule at a time, with kube's messages."""

from collections.abc import Iterator
from unittest import mock

import pytest

from pysched.api.affinity import parse_pod_affinity
from pysched.api.builders import make_pod
from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import MALFORMED
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import ClusterEvent, EventKind, QueueingHint
from pysched.plugins.inter_pod_affinity import (
    AFFINITY_REASON,
    ANTI_AFFINITY_REASON,
    EXISTING_ANTI_AFFINITY_REASON,
    NAME,
    InterPodAffinity,
)
from pysched.plugins.inter_pod_affinity.tests.helpers import HOST, Harness, affinity, pod, profile, term


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


def _plugin(h: Harness) -> InterPodAffinity:
    framework = h.scheduler.frameworks["affinity"]
    (plugin,) = [p for p in framework.plugins.values() if isinstance(p, InterPodAffinity)]
    return plugin


def test_required_anti_affinity_keeps_pods_apart_with_kubes_message(h: Harness) -> None:
    h.node("a")
    anti = affinity(anti=[term({"app": "db"})])
    h.create(pod("p1", {"app": "db"}, anti))
    h.create(pod("p2", {"app": "db"}, anti))
    h.run()
    assert h.node_of("p1") == "a" and h.node_of("p2") is None
    # p2's own term rejects the node first (kube checks the pod's anti-affinity before the existing pods').
    assert h.last_failure("p2") == f"0/1 nodes are available: 1 {ANTI_AFFINITY_REASON}."
    h.node("b")  # a new domain: the pod's hint requeues it
    h.run(10)
    assert h.node_of("p2") == "b"


def test_symmetric_rule_existing_pods_anti_affinity(h: Harness) -> None:
    h.node("a")
    h.node("b")
    h.create(
        pod(
            "guard",
            {"app": "guard"},
            affinity(anti=[term({"app": "web"})]),
            node_selector={"kubernetes.io/hostname": "a"},
        )
    )
    h.run()
    h.create(pod("web1", {"app": "web"}, node_selector={"kubernetes.io/hostname": "a"}))
    h.create(pod("web2", {"app": "web"}))
    h.run()
    assert h.node_of("guard") == "a"
    assert h.node_of("web1") is None
    assert h.node_of("web2") == "b"
    assert EXISTING_ANTI_AFFINITY_REASON in h.last_failure("web1")


def test_required_affinity_follows_the_matching_pod_and_first_pod_rule(h: Harness) -> None:
    h.node("a", zone="z1")
    h.node("b", zone="z2")
    h.node("c")  # no zone label: never satisfies a zone term
    together = affinity(required=[term({"team": "x"}, "zone")])
    h.create(pod("first", {"team": "x"}, together))  # matches its own term: the first of its group
    h.run()
    assert h.node_of("first") in ("a", "b")
    zone = {"a": "z1", "b": "z2"}[h.node_of("first") or ""]
    for i in range(3):
        h.create(pod(f"m{i}", {"team": "x"}, together))
    h.run()
    nodes = {h.node_of(f"m{i}") for i in range(3)}
    assert nodes <= {n for n, z in (("a", "z1"), ("b", "z2")) if z == zone}
    # A pod whose term matches nothing and not itself: unresolvable with kube's reason.
    h.create(pod("lonely", {"team": "y"}, affinity(required=[term({"team": "z"}, "zone")])))
    h.run()
    assert h.node_of("lonely") is None
    assert h.last_failure("lonely") == f"0/3 nodes are available: 3 {AFFINITY_REASON}."


def test_affinity_waits_for_a_matching_pod_and_is_requeued_when_one_is_bound(h: Harness) -> None:
    h.node("a")
    h.node("b")
    h.create(pod("follower", {"app": "f"}, affinity(required=[term({"app": "leader"})])))
    h.run()
    assert h.node_of("follower") is None
    h.create(pod("leader", {"app": "leader"}, node_selector={"kubernetes.io/hostname": "b"}))
    h.run(10)
    assert h.node_of("leader") == "b"
    assert h.node_of("follower") == "b"


def test_namespaces_and_namespace_selector() -> None:
    h = Harness()
    try:
        h.node("a")
        h.node("b")
        h.cluster.set_namespace("ml", {"team": "ml"})
        h.create(pod("other-ns", {"app": "db"}, namespace="ml", node_selector={"kubernetes.io/hostname": "a"}))
        h.run()
        # Same labels, default namespace only (no namespaces, no selector): the ml pod does not count.
        h.create(
            pod(
                "own", {"app": "x"}, affinity(anti=[term({"app": "db"})]), node_selector={"kubernetes.io/hostname": "a"}
            )
        )
        # A namespaceSelector choosing team=ml: node a is out.
        h.create(
            pod(
                "sel",
                {"app": "x"},
                affinity(anti=[term({"app": "db"}, namespace_selector={"matchLabels": {"team": "ml"}})]),
            )
        )
        # An empty namespaceSelector: every namespace.
        h.create(pod("all", {"app": "x"}, affinity(anti=[term({"app": "db"}, namespace_selector={})])))
        # Named namespaces.
        h.create(pod("named", {"app": "x"}, affinity(anti=[term({"app": "db"}, namespaces=["ml"])])))
        h.run()
        assert h.node_of("own") == "a"
        assert h.node_of("sel") == "b"
        assert h.node_of("all") == "b"
        assert h.node_of("named") == "b"
    finally:
        h.close()


def test_match_label_keys_merge_the_pods_own_values() -> None:
    parsed = parse_pod_affinity(
        affinity(anti=[term({"app": "db"}, matchLabelKeys=["rev"], mismatchLabelKeys=["tier"])]),
        "default",
        {"rev": "2", "tier": "t", "app": "db"},
    )
    assert parsed is not None
    (t,) = parsed.required_anti_affinity
    assert t.selector.matches({"app": "db", "rev": "2", "tier": "u"})
    assert not t.selector.matches({"app": "db", "rev": "1", "tier": "u"})
    assert not t.selector.matches({"app": "db", "rev": "2", "tier": "t"})


def test_keys_the_apiserver_merged_already_are_not_merged_again_from_changed_labels() -> None:
    """The apiserver merges matchLabelKeys into the stored selector at creation; the pod's labels
    may change afterwards, and the stored `rev In (1)` stays the term's whole say on `rev`."""
    stored = term(
        {"app": "db"}, expressions=[{"key": "rev", "operator": "In", "values": ["1"]}], matchLabelKeys=["rev"]
    )
    parsed = parse_pod_affinity(affinity(anti=[stored]), "default", {"rev": "2", "app": "db"})
    assert parsed is not None
    (t,) = parsed.required_anti_affinity
    assert t.selector.matches({"app": "db", "rev": "1"})  # not `rev In (1), rev In (2)`: nothing
    assert not t.selector.matches({"app": "db", "rev": "2"})


def test_topology_key_beyond_hostname(h: Harness) -> None:
    h.node("a", zone="z1")
    h.node("b", zone="z1")
    h.node("c", zone="z2")
    h.node("d")  # without the key: an anti-affinity term never rejects it
    h.create(pod("db", {"app": "db"}, node_selector={"kubernetes.io/hostname": "a"}))
    h.run()
    for name in ("x1", "x2"):
        h.create(
            pod(
                name,
                {"app": "x"},
                affinity(anti=[term({"app": "db"}, "zone")]),
                node_selector={"kubernetes.io/hostname": "b"},
            )
        )
    h.run()
    assert h.node_of("x1") is None
    h.create(
        pod(
            "x3",
            {"app": "x"},
            affinity(anti=[term({"app": "db"}, "zone")]),
            node_selector={"kubernetes.io/hostname": "d"},
        )
    )
    h.run()
    assert h.node_of("x3") == "d"


def test_preferred_terms_score_and_normalize() -> None:
    h = Harness(profile(weight=100))
    try:
        for n in ("a", "b", "c"):
            h.node(n)
        h.create(pod("cache", {"app": "cache"}, node_selector={"kubernetes.io/hostname": "c"}))
        h.run()
        h.create(pod("near", {"app": "web"}, affinity(preferred=[(50, term({"app": "cache"}))])))
        h.create(pod("far", {"app": "web2"}, affinity(preferred_anti=[(50, term({"app": "cache"}))])))
        h.run()
        assert h.node_of("near") == "c"
        assert h.node_of("far") in ("a", "b")
    finally:
        h.close()


@pytest.mark.parametrize(
    ("args", "lead_affinity", "expected"),
    [
        # A plain pod the lead's required affinity matches is drawn to b (hardPodAffinityWeight).
        ({"hardPodAffinityWeight": 5}, affinity(required=[term({"app": "f"}), term({"app": "f"})]), "b"),
        # hardPodAffinityWeight 0: LeastAllocated alone (the lead's cpu makes b the fuller node).
        ({"hardPodAffinityWeight": 0}, affinity(required=[term({"app": "f"})]), "a"),
        # The lead's preference draws the pod...
        ({}, affinity(preferred=[(100, term({"app": "f"}))]), "b"),
        # ...unless existing pods' preferred terms are ignored for pods without terms of their own.
        ({"ignorePreferredTermsOfExistingPods": True}, affinity(preferred=[(100, term({"app": "f"}))]), "a"),
    ],
)
def test_existing_pods_terms_score_the_incoming_pod(
    args: dict[str, object], lead_affinity: dict[str, object], expected: str
) -> None:
    h = Harness(profile(weight=100, args=args))
    try:
        for n in ("a", "b"):
            h.node(n)
        h.create(pod("lead", {"app": "f"}, lead_affinity, node_selector={"kubernetes.io/hostname": "b"}, cpu="1"))
        h.run()
        assert h.node_of("lead") == "b"
        h.create(pod("plain", {"app": "f"}))
        h.run()
        assert h.node_of("plain") == expected
    finally:
        h.close()


def test_bad_selector_is_one_unresolvable_event_and_others_are_unaffected(h: Harness) -> None:
    h.node("a")
    bad = affinity(anti=[term(expressions=[{"key": "app", "operator": "Near", "values": ["x"]}])])
    h.create(pod("bad", {"app": "x"}, bad))
    bad_key = affinity(required=[term({"app": "x"}, "not a key!")])
    h.create(pod("badkey", {"app": "x"}, bad_key))
    h.create(pod("good", {"app": "x"}))
    h.run()
    assert h.node_of("good") == "a"
    assert h.node_of("bad") is None and h.node_of("badkey") is None
    assert h.last_failure("bad") == (
        "0/1 nodes are available: parsing pod: requiredAntiAffinityTerms: "
        "'Near' is not a valid label selector operator."
    )
    assert "parsing pod: requiredAffinityTerms" in h.last_failure("badkey")
    assert h.where("bad") == "unschedulable"


def test_wrong_types_are_malformed() -> None:
    for broken in (
        {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "x"}},
        {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": 3}]}},
        {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"a": "b"})] * 65}},
        {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": "1"}]}},
    ):
        with pytest.raises(MALFORMED):
            parse_pod_affinity(broken, "default", {})


def test_plain_pods_skip_and_keep_the_fast_path(h: Harness) -> None:
    for n in ("a", "b", "c"):
        h.node(n)
    with mock.patch.object(InterPodAffinity, "filter_batch", side_effect=AssertionError("filter ran")):
        for i in range(5):
            h.create(pod(f"plain{i}", {"app": "x"}))
        h.run()
    assert all(h.node_of(f"plain{i}") for i in range(5))
    plugin = _plugin(h)
    assert plugin.matches.scans == 0  # nothing counted for plain pods


def test_counts_are_built_once_then_kept_by_placements(h: Harness) -> None:
    for n in ("a", "b", "c", "d"):
        h.node(n)
    anti = affinity(anti=[term({"app": "spread"})])
    for i in range(4):
        h.create(pod(f"s{i}", {"app": "spread"}, anti))
    h.run()
    assert sorted(h.node_of(f"s{i}") or "" for i in range(4)) == ["a", "b", "c", "d"]
    plugin = _plugin(h)
    assert plugin.matches.scans == 1


def test_hints() -> None:
    h = Harness()
    try:
        plugin = _plugin(h)
        wants = make_pod("w", labels={"app": "w"})
        wants = wants.evolve(
            pod_affinity=parse_pod_affinity(
                affinity(required=[term({"app": "lead"})], anti=[term({"app": "bad"})]), "default", {}
            )
        )
        lead = make_pod("lead", labels={"app": "lead"}, node_name="a")
        bad = make_pod("bad", labels={"app": "bad"}, node_name="a")
        regs = {r.kind: r for r in plugin.events_to_register()}
        relabelled = bad.evolve(labels={"app": "ok"})
        cases = [
            (EventKind.ASSIGNED_POD_ADD, None, lead, QueueingHint.QUEUE),
            (EventKind.ASSIGNED_POD_ADD, None, bad, QueueingHint.SKIP),
            (EventKind.POD_DELETE, bad, None, QueueingHint.QUEUE),
            (EventKind.POD_DELETE, lead, None, QueueingHint.SKIP),
            (EventKind.ASSIGNED_POD_UPDATE, bad, relabelled, QueueingHint.QUEUE),
            (EventKind.ASSIGNED_POD_UPDATE, relabelled, lead, QueueingHint.QUEUE),
            (EventKind.ASSIGNED_POD_UPDATE, lead, lead, QueueingHint.SKIP),
        ]
        for kind, old, new, expected in cases:
            assert regs[kind].decide(wants, ClusterEvent(kind, old, new)) is expected, (kind, old, new)
        assert NAME == "InterPodAffinity"
    finally:
        h.close()


def test_only_nodes_failing_the_pods_own_affinity_are_unresolvable(h: Harness) -> None:
    """kube: the pod's own affinity unmet on a node is UnschedulableAndUnresolvable there (no
    preemption adds the pods it needs); anti-affinity unmet is Unschedulable (a victim may go)."""
    h.node("a", zone="z1")
    h.node("b", zone="z2")
    h.create(pod("x", {"team": "x"}, node_selector={HOST: "a"}))
    h.create(pod("db", {"app": "db"}, node_selector={HOST: "a"}))
    h.run()
    wanted = affinity(required=[term({"team": "x"}, "zone")], anti=[term({"app": "db"})])
    raw = pod("p", {"app": "p"}, wanted)
    h.create(raw)
    h.run()
    assert h.node_of("p") is None
    framework = h.scheduler.frameworks["affinity"]
    queued = h.scheduler.queue.get(PodKey("default/p"))
    assert queued is not None
    result = framework.find_node(CycleState(), queued.pod)
    assert result.diagnosis is not None and not result.diagnosis.unresolvable
    rows = h.scheduler.cache.nodes.row
    resolvable = result.diagnosis.resolvable_rows
    assert resolvable is not None
    assert bool(resolvable[rows[NodeName("a")]]) and not bool(resolvable[rows[NodeName("b")]])
