from pysched.api.builders import make_pod
from pysched.framework.interfaces import QueuedPod
from pysched.plugins.priority_sort import PrioritySort


def test_higher_priority_first_then_older() -> None:
    plugin = PrioritySort()
    low_old = QueuedPod(make_pod("a", priority=0, created=1.0), added=5.0)
    low_new = QueuedPod(make_pod("b", priority=0, created=2.0), added=0.0)
    high = QueuedPod(make_pod("c", priority=10, created=9.0), added=9.0)
    ordered = sorted([low_new, high, low_old], key=plugin.sort_key)
    assert [q.pod.name for q in ordered] == ["c", "a", "b"]
