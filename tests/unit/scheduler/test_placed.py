"""The placed-pods view plugins count from: its notices always sum to what the cache holds."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.builders import make_node, make_pod
from pysched.api.features import LABELS
from pysched.api.ids import NodeName
from pysched.api.objects import PodInfo
from pysched.scheduler.cache import Cache


class Counting:
    """A listener keeping (row, label value) counts incrementally, as a plugin would."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[int, str]] = Counter()

    def pod_placed(self, pod: PodInfo, row: int) -> None:
        self.counts[(row, pod.labels.get("app", ""))] += 1

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        self.counts[(row, pod.labels.get("app", ""))] -= 1


def recount(cache: Cache) -> Counter[tuple[int, str]]:
    return Counter((row, pod.labels.get("app", "")) for pod, row in cache.placed)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "assume", "forget", "relabel", "remove", "drop-node", "add-node"]),
            st.integers(0, 5),
            st.sampled_from(["a", "b", ""]),  # "": no labels at all
        ),
        max_size=50,
    ),
    st.integers(0, 50),
)
def test_listener_counts_equal_a_recount_whatever_happens(ops: list[tuple[str, int, str]], subscribe_at: int) -> None:
    cache = Cache()
    for i in range(3):
        cache.add_node(make_node(f"n{i}", cpu="64", memory="64Gi"))
    listener, labelled_only = Counting(), Counting()
    pods: dict[str, PodInfo] = {}
    for step, (op, index, app) in enumerate(ops):
        if step == subscribe_at:
            cache.placed.subscribe(listener)  # late subscribers get every pod placed so far
            cache.placed.subscribe(labelled_only, LABELS)  # hears only of pods with labels
        name, node = f"p{index}", NodeName(f"n{index % 3}")
        known = pods.get(name)
        if op == "add":
            pods[name] = make_pod(
                name, cpu="1", node_name=node, labels={"app": app} if app else None, priority=index % 3
            )
            cache.add_pod(pods[name])
        elif op == "assume" and known is None:
            pods[name] = make_pod(name, cpu="1", labels={"app": app} if app else None, priority=index % 3)
            cache.assume(pods[name], node)
        elif op == "forget" and known is not None:
            cache.forget(known)
        elif op == "relabel" and known is not None and known.node_name is not None:
            pods[name] = make_pod(name, cpu="1", node_name=known.node_name, labels={"app": app} if app else None)
            cache.add_pod(pods[name])
        elif op == "remove" and known is not None:
            cache.remove_pod(known)
            del pods[name]
        elif op == "drop-node":
            cache.remove_node(make_node(node, cpu="64", memory="64Gi"))
        elif op == "add-node":
            cache.add_node(make_node(node, cpu="64", memory="64Gi"))
    if subscribe_at >= len(ops):
        cache.placed.subscribe(listener)
        cache.placed.subscribe(labelled_only, LABELS)
    assert +listener.counts == recount(cache)
    assert +labelled_only.counts == Counter({at: n for at, n in recount(cache).items() if at[1]})
    for priority in range(4):  # what preemption asks before it looks for victims
        assert cache.placed.any_below(priority) == any(pod.priority < priority for pod, _ in cache.placed)
    for app in ("a", "b"):
        assert sorted(cache.placed.with_label("app", app), key=str) == sorted(
            ((pod, row) for pod, row in cache.placed if pod.labels.get("app") == app), key=str
        )
    assert len(cache.placed) == len(cache)
    for name in ("n0", "n1", "n2"):
        on_node = {p.key for p in cache.pods_on(NodeName(name))}
        assert on_node == {key for key in (p.key for p in pods.values()) if cache.pod_node(key) == name}
