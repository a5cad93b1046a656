from pysched.api.builders import make_pod
from pysched.framework.clock import VirtualClock
from pysched.framework.events import ClusterEvent, EventKind, QueueingHint
from pysched.framework.interfaces import QueuedPod
from pysched.framework.status import SUCCESS
from pysched.plugins.priority_sort import PrioritySort
from pysched.scheduler.queue import SchedulingQueue


def test_higher_priority_first_then_first_queued() -> None:
    plugin = PrioritySort()
    low_old = QueuedPod(make_pod("a", priority=0, created=1.0), added=5.0)
    low_new = QueuedPod(make_pod("b", priority=0, created=2.0), added=0.0)
    high = QueuedPod(make_pod("c", priority=10, created=9.0), added=9.0)
    tie = QueuedPod(make_pod("d", priority=0, created=0.5), added=5.0)
    ordered = sorted([low_new, high, low_old, tie], key=plugin.sort_key)
    assert [q.pod.name for q in ordered] == ["c", "b", "d", "a"]


def test_a_refused_pod_goes_behind_the_pods_already_waiting() -> None:
    """kube-scheduler refreshes a pod's queue timestamp when it is queued again after a refusal:
    the pods that waited meanwhile go first, whenever they were created."""
    clock = VirtualClock(100.0)

    def hint(queued: QueuedPod, event: ClusterEvent) -> QueueingHint:
        return QueueingHint.QUEUE

    q = SchedulingQueue(clock, PrioritySort().sort_key, lambda _: SUCCESS, hint)
    q.add(make_pod("old", created=1.0))
    first = q.pop()
    assert first is not None and first.pod.name == "old"
    clock.advance_to(100.5)
    q.add(make_pod("newer", created=50.0))
    clock.advance_to(101.0)
    q.requeue_unschedulable(first, frozenset({"NodeResourcesFit"}))  # refused at 101
    q.on_event(ClusterEvent(EventKind.NODE_ADD))
    clock.advance_to(200.0)  # its backoff is over
    popped = [q.pop(), q.pop()]
    assert [p.pod.name if p else None for p in popped] == ["newer", "old"]
