import pytest

from pysched.api.builders import make_node, make_pod
from pysched.api.ids import PodKey
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


def test_backoff_doubles_per_error_in_a_row_from_one_second_to_ten() -> None:
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


def test_refusals_and_errors_in_a_row_back_off_apart() -> None:
    """kube counts refusals for good and errors since the last refusal, and backs off by the
    errors while there are any."""
    clock = VirtualClock(0.0)
    q = _queue(clock)
    q.add(make_pod("p"))
    waits, counts = [], []
    for failure in ("refused", "refused", "error", "error", "refused"):
        queued = q.pop()
        assert queued is not None
        if failure == "refused":
            q.on_event(ClusterEvent(EventKind.NODE_ADD))  # in flight: it goes to backoff, not to sleep
            q.requeue_unschedulable(queued, frozenset({"NodeResourcesFit"}))
        else:
            q.requeue_backoff(queued)
        assert q.where(queued.pod.key) == "backoff" and queued.timestamp == clock.now()
        waits.append(queued.backoff_until - clock.now())
        counts.append((queued.refusals, queued.errors_in_a_row))
        clock.advance_to(queued.backoff_until)
    assert waits == [1.0, 2.0, 1.0, 2.0, 4.0]  # 1 and 2 s refused, 1 and 2 s erring, then 4 s refused
    assert counts == [(1, 0), (2, 0), (2, 1), (2, 2), (3, 0)]


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


def test_an_event_during_the_attempt_that_cannot_help_the_pod_leaves_it_asleep() -> None:
    clock = VirtualClock(0.0)
    q = _queue(clock)  # its rejectors' hints queue it for a node added only
    q.add(make_pod("p"))
    queued = q.pop()
    assert queued is not None
    q.on_event(ClusterEvent(EventKind.POD_DELETE))  # in flight: a pod elsewhere ended
    q.requeue_unschedulable(queued, frozenset({"NodeAffinity"}))
    assert q.where(queued.pod.key) == "unschedulable"
    again = q.pop()
    assert again is None
    other = make_pod("q")
    q.add(other)
    queued = q.pop()
    assert queued is not None
    q.on_event(ClusterEvent(EventKind.POD_DELETE))
    q.on_event(ClusterEvent(EventKind.NODE_ADD))  # one of the events in flight may help
    q.on_event(ClusterEvent(EventKind.POD_DELETE))
    q.requeue_unschedulable(queued, frozenset({"NodeAffinity"}))
    assert q.where(queued.pod.key) == "backoff"


def test_events_are_kept_only_while_some_pod_is_in_flight() -> None:
    clock = VirtualClock(0.0)
    q = _queue(clock)
    for name in ("a", "b"):
        q.add(make_pod(name))
    first, second = q.pop(), q.pop()
    assert first is not None and second is not None
    for _ in range(5):
        q.on_event(ClusterEvent(EventKind.POD_DELETE))
    q.done(first.pod.key)  # bound
    q.on_event(ClusterEvent(EventKind.POD_DELETE))
    q.delete(second.pod.key)  # gone while in flight: nothing is in flight any more
    assert len(q._in_flight_events) == 0
    for _ in range(5):
        q.on_event(ClusterEvent(EventKind.POD_DELETE))  # none kept: no pod to ask about them
    assert len(q._in_flight_events) == 0


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


def test_backoff_after_thousands_of_attempts_is_the_cap_not_an_overflow() -> None:
    clock = VirtualClock(0.0)
    q = _queue(clock)
    q.add(make_pod("p"))
    queued = q.pop()
    assert queued is not None
    queued.errors_in_a_row = 4999  # 2.0 ** 4999 would raise OverflowError
    q.requeue_backoff(queued)
    assert q.next_wakeup() == 10.0


def _contained_queue(clock: VirtualClock, raising: set[str], where: str) -> tuple[SchedulingQueue, list[str]]:
    caught: list[str] = []

    def pre_enqueue(pod: PodInfo) -> Status:
        if where == "PreEnqueue" and pod.name in raising:
            raise ValueError("invalid literal for int(): '²'")
        return SUCCESS

    def sort_key(queued: QueuedPod) -> tuple[object, ...]:
        if where == "QueueSort" and queued.pod.name in raising:
            raise ValueError("invalid literal for int(): '²'")
        return PrioritySort().sort_key(queued)

    def hint(queued: QueuedPod, event: ClusterEvent) -> QueueingHint:
        if where == "QueueingHint" and queued.pod.name in raising:
            raise KeyError("boom")
        return QueueingHint.QUEUE

    def contained(queued: QueuedPod, stage: str, err: Exception) -> None:
        caught.append(f"{queued.pod.name}:{stage}")

    return SchedulingQueue(clock, sort_key, pre_enqueue, hint, QueueTimings(), contained), caught


@pytest.mark.parametrize("stage", ["PreEnqueue", "QueueSort"])
def test_a_plugin_raising_on_enqueue_parks_only_that_pod(stage: str) -> None:
    clock = VirtualClock(0.0)
    q, caught = _contained_queue(clock, {"bad"}, stage)
    q.add(make_pod("bad", annotations={"pysched.io/total-steps": "²"}))
    q.add(make_pod("good"))
    assert caught == [f"bad:{stage}"]
    assert q.where(make_pod("bad").key) == "parked"
    popped = q.pop()
    assert popped is not None and popped.pod.name == "good"
    assert q.pop() is None
    q.update(make_pod("bad", annotations={"pysched.io/total-steps": "²"}))  # unchanged: stays parked
    assert q.where(make_pod("bad").key) == "parked"
    assert q.counts()["parked"] == 1


def test_a_parked_pod_returns_when_it_changes_or_after_the_timeout() -> None:
    clock = VirtualClock(0.0)
    raising = {"bad"}
    q, _ = _contained_queue(clock, raising, "PreEnqueue")
    q.add(make_pod("bad", annotations={"x": "1"}))
    assert q.where(make_pod("bad").key) == "parked"
    q.on_event(ClusterEvent(EventKind.NODE_ADD, None, make_node("n")))
    assert q.where(make_pod("bad").key) == "parked"  # cluster events never wake a parked pod
    raising.clear()
    q.update(make_pod("bad", annotations={"x": "2"}))
    assert q.where(make_pod("bad").key) == "active"
    raising.add("again")
    q.add(make_pod("again"))
    raising.clear()
    clock.advance(299.0)
    q.flush()
    assert q.where(make_pod("again").key) == "parked"
    clock.advance(31.0)
    q.flush()
    assert q.where(make_pod("again").key) == "active"


def test_a_raising_queueing_hint_parks_that_pod_and_moves_the_others() -> None:
    clock = VirtualClock(0.0)
    q, caught = _contained_queue(clock, {"bad"}, "QueueingHint")
    for name in ("bad", "good"):
        q.add(make_pod(name))
        popped = q.pop()
        assert popped is not None
        q.requeue_unschedulable(popped, frozenset({"NodeResourcesFit"}))
    moved = q.on_event(ClusterEvent(EventKind.NODE_ADD, None, make_node("n")))
    assert moved == 1 and caught == ["bad:QueueingHint"]
    assert q.where(make_pod("good").key) in ("active", "backoff")
    assert q.where(make_pod("bad").key) == "parked"


def test_an_event_is_checked_only_against_pods_waiting_for_its_kind() -> None:
    """A stream of binds must not walk every unschedulable pod: pods whose rejectors registered
    other kinds are not even asked, pods whose rejectors name no events are asked always. A pod
    no plugin rejected (a cluster without nodes) waits out its backoff, as kube-scheduler's does."""
    clock = VirtualClock(0.0)
    asked: list[str] = []

    def hint(queued: QueuedPod, event: ClusterEvent) -> QueueingHint:
        asked.append(queued.pod.name)
        return QueueingHint.QUEUE

    def interest(queued: QueuedPod) -> frozenset[EventKind] | None:
        return None if "Unregistered" in queued.unschedulable_plugins else frozenset({EventKind.NODE_ADD})

    q = SchedulingQueue(clock, PrioritySort().sort_key, lambda _: SUCCESS, hint, QueueTimings(), interest=interest)
    for name, rejectors in (
        ("room", frozenset({"NodeResourcesFit"})),
        ("any", frozenset({"Unregistered"})),
        ("none", frozenset[str]()),
    ):
        q.add(make_pod(name))
        queued = q.pop()
        assert queued is not None
        q.requeue_unschedulable(queued, rejectors)
    assert q.where(PodKey("default/none")) == "backoff"
    assert q.on_event(ClusterEvent(EventKind.ASSIGNED_POD_ADD, None, make_pod("bound"))) == 1
    assert asked == ["any"]
    assert q.on_event(ClusterEvent(EventKind.NODE_ADD, None, make_node("n"))) == 1
    assert asked == ["any", "room"]
    assert q.counts()["unschedulable"] == 0


def test_activate_takes_gated_and_unschedulable_pods_through_pre_enqueue_again() -> None:
    clock = VirtualClock(0.0)
    gate = {"held"}
    q = _queue(clock, gate=gate, helps=set())
    q.add(make_pod("held"))
    q.add(make_pod("parked"))
    parked = q.pop()
    assert parked is not None and parked.pod.name == "parked"
    q.requeue_unschedulable(parked, frozenset({"NodeResourcesFit"}))
    q.add(make_pod("running"))
    running = q.pop()
    assert running is not None
    held, parked_key, running_key = make_pod("held").key, make_pod("parked").key, make_pod("running").key
    assert q.activate([held]) == 1 and q.where(held) == "gated"  # the gate still says no
    gate.clear()
    assert q.activate([held, parked_key, running_key]) == 2  # the in-flight pod is left alone
    assert q.where(running_key) == "in-flight"
    popped = [q.pop(), q.pop(), q.pop()]
    assert sorted(p.pod.name for p in popped if p) == ["held", "parked"] and popped[2] is None


def test_a_dormant_queue_runs_pre_enqueue_only_once_it_wakes() -> None:
    """A standby replica keeps its pending pods without PreEnqueue: what a plugin tells there
    (a warning, a demotion) would be told by a replica whose writes are refused, and not again."""
    clock = VirtualClock(0.0)
    seen: list[str] = []

    def pre_enqueue(pod: PodInfo) -> Status:
        seen.append(pod.name)
        return SUCCESS

    q = SchedulingQueue(clock, PrioritySort().sort_key, pre_enqueue, lambda *_: QueueingHint.QUEUE, dormant=True)
    for created, name in enumerate(("b", "a", "gone")):
        q.add(make_pod(name, created=float(created)))
    q.update(make_pod("a", created=1.0, cpu="2"))
    q.delete(make_pod("gone").key)
    assert seen == [] and q.pop() is None and q.counts()["active"] == 2
    q.wake()
    assert seen == ["b", "a"]  # in the order they came, each once, as it is now
    popped, a = q.pop(), q.get(make_pod("a").key)
    assert popped is not None and popped.pod.name == "b" and a is not None and a.pod.requests["cpu"] == 2000
    q.add(make_pod("c", created=3.0))
    assert seen == ["b", "a", "c"]  # awake: at once
