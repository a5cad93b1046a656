from pysched.api.builders import make_node, make_pod
from pysched.api.objects import PodInfo
from pysched.framework.clock import VirtualClock
from pysched.framework.events import ClusterEvent, EventKind, QueueingHint
from pysched.framework.interfaces import QueuedPod
from pysched.framework.status import SUCCESS, Status, unschedulable
from pysched.plugins.priority_sort import PrioritySort
from pysched.scheduler.queue import QueueTimings, SchedulingQueue


def _queue(clock: VirtualClock, gate: set[str] | None = None, helps: set[EventKind] | None = None) -> SchedulingQueue:
    gate = gate if gate is not None else set()
    helps = helps if helps is not None else {EventKind.NODE_ADD}

    def pre_enqueue(pod: PodInfo) -> Status:
        return unschedulable("gated", plugin="Gate") if pod.name in gate else SUCCESS

    def hint(queued: QueuedPod, event: ClusterEvent) -> QueueingHint:
        return QueueingHint.QUEUE if event.kind in helps else QueueingHint.SKIP

    return SchedulingQueue(clock, PrioritySort().sort_key, pre_enqueue, hint, QueueTimings())


def test_pops_in_queue_sort_order() -> None:
    clock = VirtualClock(100.0)
    q = _queue(clock)
    q.add(make_pod("old", created=1.0))
    q.add(make_pod("new", created=2.0))
    q.add(make_pod("urgent", created=3.0, priority=5))
    popped = [q.pop(), q.pop(), q.pop(), q.pop()]
    assert [p.pod.name if p else None for p in popped] == ["urgent", "old", "new", None]


def test_backoff_doubles_from_one_second_to_ten() -> None:
    clock = VirtualClock(0.0)
    q = _queue(clock)
    q.add(make_pod("p"))
    waits = []
    for _ in range(6):
        queued = q.pop()
        assert queued is not None
        q.requeue_backoff(queued)
        assert q.pop() is None  # still backing off
        wake = q.next_wakeup()
        assert wake is not None
        waits.append(wake)
        clock.advance_to(wake)
    deltas = [round(b - a, 6) for a, b in zip([0.0, *waits], waits, strict=False)]
    assert deltas == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_unschedulable_pod_waits_for_an_event_its_rejector_cares_about() -> None:
    clock = VirtualClock(0.0)
    q = _queue(clock, helps={EventKind.NODE_ADD})
    q.add(make_pod("p"))
    queued = q.pop()
    assert queued is not None
    q.requeue_unschedulable(queued, frozenset({"NodeResourcesFit"}))
    clock.advance_to(50.0)
    assert q.pop() is None and q.where(queued.pod.key) == "unschedulable"
    assert q.on_event(ClusterEvent(EventKind.POD_DELETE)) == 0  # does not help this pod
    assert q.on_event(ClusterEvent(EventKind.NODE_ADD, None, make_node("n"))) == 1
    again = q.pop()
    assert again is not None and again.pod.name == "p" and again.attempts == 2


def test_event_during_the_attempt_sends_the_pod_to_backoff_not_to_sleep() -> None:
    clock = VirtualClock(0.0)
    q = _queue(clock)
    q.add(make_pod("p"))
    queued = q.pop()
    assert queued is not None
    q.on_event(ClusterEvent(EventKind.NODE_ADD))  # arrives while the pod is in flight
    q.requeue_unschedulable(queued, frozenset({"NodeResourcesFit"}))
    assert q.where(queued.pod.key) == "backoff"
    clock.advance_to(1.0)
    assert q.pop() is not None


def test_safety_flush_retries_pods_parked_for_five_minutes() -> None:
    clock = VirtualClock(0.0)
    q = _queue(clock, helps=set())
    q.add(make_pod("p"))
    queued = q.pop()
    assert queued is not None
    q.requeue_unschedulable(queued, frozenset({"X"}))
    clock.advance_to(299.0)
    assert q.pop() is None
    clock.advance_to(330.0)
    assert q.pop() is not None


def test_pre_enqueue_gates_until_the_pod_changes() -> None:
    clock = VirtualClock(0.0)
    gate = {"p"}
    q = _queue(clock, gate=gate)
    q.add(make_pod("p"))
    assert q.pop() is None and q.where(make_pod("p").key) == "gated"
    gate.clear()
    q.update(make_pod("p", annotations={"touched": "1"}))
    assert q.pop() is not None


def test_update_of_a_parked_pod_requeues_it_and_delete_forgets_it() -> None:
    clock = VirtualClock(0.0)
    q = _queue(clock, helps=set())
    q.add(make_pod("p", cpu="8"))
    queued = q.pop()
    assert queued is not None
    q.requeue_unschedulable(queued, frozenset({"NodeResourcesFit"}))
    clock.advance_to(20.0)
    q.update(make_pod("p", cpu="1"))  # e.g. resized down while pending
    assert q.pop() is not None
    q.delete(queued.pod.key)
    assert len(q) == 0 and q.pop() is None


def test_has_active_ignores_stale_heap_entries() -> None:
    clock = VirtualClock(0.0)
    q = _queue(clock)
    q.add(make_pod("p"))
    q.update(make_pod("p", annotations={"x": "1"}))  # re-sorted: the first heap entry is stale
    assert q.has_active()
    assert q.pop() is not None
    assert not q.has_active() and q.counts()["active"] == 0
