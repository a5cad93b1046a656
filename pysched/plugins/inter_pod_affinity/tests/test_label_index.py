"""The label index finds every matcher / carried term a pod matches: none is missed whatever
kind of requirement its selector has (In with several values, matchLabels, Exists, NotIn only,
DoesNotExist, matchLabelKeys merged in, an empty or an absent selector)."""

import itertools
from typing import Any

from pysched.api.affinity import AffinityTerm, Selector, parse_selector
from pysched.api.builders import pod_dict
from pysched.api.objects import PodInfo, pod_from_dict
from pysched.framework.placed import PlacedPods
from pysched.plugins.inter_pod_affinity.counts import (
    CarriedTerms,
    Clause,
    LabelIndex,
    Matcher,
    Matches,
    index_keys,
    matches_all,
)
from pysched.plugins.inter_pod_affinity.tests.helpers import affinity, term

SELECTORS: list[dict[str, Any] | None] = [
    {"matchLabels": {"app": "a"}},
    {"matchLabels": {"app": "b", "tier": "1"}},
    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b", "c"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["1", "2"]}], "matchLabels": {"app": "c"}},
    {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}, {"key": "app", "operator": "In", "values": ["b"]}]},
    {},
    None,
]
LABELS: list[dict[str, str]] = [
    {k: v for k, v in (("app", app), ("tier", tier), ("x", "y")) if v is not None}
    for app, tier in itertools.product(["a", "b", "c", "d", None], ["1", "2", None])
]


def _selector(raw: dict[str, Any] | None) -> Selector:
    return parse_selector(raw, "test")


def _pod(name: str, labels: dict[str, str], namespace: str = "default", spec: Any = None, node: str = "") -> PodInfo:
    raw = pod_dict(name, namespace=namespace, labels=labels, node_name=node or None)
    if spec:
        raw["spec"]["affinity"] = spec
    return pod_from_dict(raw)


def test_index_keys_pick_a_required_label_value() -> None:
    assert index_keys([_selector(SELECTORS[0])]) == (("app", "a"),)
    assert index_keys([_selector(SELECTORS[2])]) == (("app", "a"), ("app", "b"), ("app", "c"))
    assert index_keys([_selector(SELECTORS[3])]) == (("app", "c"),)  # the In with the fewest values
    assert index_keys([_selector(SELECTORS[4])]) is None  # Exists: no value required
    assert index_keys([_selector(SELECTORS[5])]) is None  # NotIn only
    assert index_keys([_selector({})]) is None
    assert index_keys([_selector(None)]) == ()  # matches nothing: filed nowhere
    assert index_keys([_selector(SELECTORS[4]), _selector(SELECTORS[0])]) == (("app", "a"),)


def test_candidates_cover_every_match_once() -> None:
    index: LabelIndex[int] = LabelIndex()
    selectors = [_selector(raw) for raw in SELECTORS]
    for i, selector in enumerate(selectors):
        index.add(i, (selector,))
    for labels in LABELS:
        found = list(index.candidates(labels))
        assert len(found) == len(set(found))
        assert {i for i in found if selectors[i].matches(labels)} == {
            i for i, s in enumerate(selectors) if s.matches(labels)
        }
    for i, selector in enumerate(selectors):
        index.remove(i, (selector,))
    assert not index.items() and all(not list(index.candidates(labels)) for labels in LABELS)


def _placed_pods() -> list[tuple[PodInfo, int]]:
    out = []
    for i, labels in enumerate(LABELS):
        namespace = "default" if i % 3 else "ml"
        out.append((_pod(f"p{i}", labels, namespace), i % 4))
    return out


def test_matches_follow_placements_for_every_kind_of_matcher() -> None:
    pods = PlacedPods()
    matches = Matches(pods)  # subscribes itself on first use
    clauses = [Clause(_selector(raw), namespaces) for raw in SELECTORS for namespaces in (None, frozenset({"default"}))]
    matchers: list[Matcher] = [(c,) for c in clauses] + [(a, b) for a, b in itertools.combinations(clauses[:8], 2)]
    matchers.append(())
    for matcher in matchers:
        assert matches.rows(matcher) == {}
    placed = _placed_pods()
    for pod, row in placed:
        pods.placed(pod, row)
    for pod, row in placed[::2]:
        pods.removed(pod, row)
    left = placed[1::2]
    for matcher in matchers:
        want: dict[int, int] = {}
        for pod, row in left:
            if matches_all(matcher, pod):
                want[row] = want.get(row, 0) + 1
        assert matches.rows(matcher) == want, matcher


def test_carried_terms_are_found_for_every_incoming_pod() -> None:
    carried = CarriedTerms(hard_weight=1)
    owners = []
    for i, raw in enumerate(SELECTORS):
        extras: list[dict[str, Any]] = [{}, {"matchLabelKeys": ["tier"]}, {"mismatchLabelKeys": ["app"]}]
        for j, extra in enumerate(extras):
            t = term(None, "zone", **extra)
            if raw is not None:
                t["labelSelector"] = raw
            else:
                del t["labelSelector"]
            spec = affinity(anti=[t], preferred=[(3, t)], preferred_anti=[(5, t)], required=[t])
            owners.append(_pod(f"o{i}-{j}", {"app": "b", "tier": "2"}, spec=spec))
    for row, owner in enumerate(owners):
        carried.pod_placed(owner, row)
    for gone in owners[::3]:
        carried.pod_removed(gone, owners.index(gone))
    # Every term is filed but those whose selector matches nothing; removed ones are gone.
    assert carried.anti_index.items() == {t for t in carried.required_anti if not t.selector.nothing}
    assert carried.scoring_index.items() == {k for k in carried.scoring if not k[0].selector.nothing}
    for i, labels in enumerate(LABELS):
        pod = _pod(f"in{i}", labels, "default" if i % 2 else "ml")

        def hit(t: AffinityTerm, p: PodInfo = pod) -> bool:
            return t.matches(p.namespace, p.labels, {})

        assert {t for t in carried.anti_index.candidates(pod.labels) if hit(t)} == {
            t for t in carried.required_anti if hit(t)
        }
        assert {k for k in carried.scoring_index.candidates(pod.labels) if hit(k[0])} == {
            k for k in carried.scoring if hit(k[0])
        }
