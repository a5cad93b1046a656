"""A QueuePick plugin chooses among the first pods of the active queue; the rest keep their places."""

from collections.abc import Sequence
from dataclasses import dataclass, field

from pysched.api.builders import make_pod
from pysched.api.objects import PodInfo
from pysched.framework.clock import VirtualClock
from pysched.framework.events import ClusterEvent, QueueingHint
from pysched.framework.interfaces import QueuedPod, QueuePickPlugin
from pysched.framework.status import SUCCESS, Status
from pysched.scheduler.queue import QueueTimings, SchedulingQueue


@dataclass
class Picker:
    NAME = "Picker"
    window: int
    choice: int = 0
    raises: bool = False
    seen: list[list[str]] = field(default_factory=list)

    def sort_key(self, queued: QueuedPod) -> tuple[object, ...]:
        return (queued.pod.created, queued.pod.key)

    def pick(self, candidates: Sequence[QueuedPod]) -> int:
        self.seen.append([c.pod.name for c in candidates])
        if self.raises:
            raise RuntimeError("bug")
        return self.choice


def _queue(picker: Picker, contained: list[str]) -> SchedulingQueue:
    def pre_enqueue(pod: PodInfo) -> Status:
        return SUCCESS

    def hint(queued: QueuedPod, event: ClusterEvent) -> QueueingHint:
        return QueueingHint.QUEUE

    assert isinstance(picker, QueuePickPlugin)
    return SchedulingQueue(
        VirtualClock(0.0),
        picker.sort_key,
        pre_enqueue,
        hint,
        QueueTimings(),
        lambda qp, stage, err: contained.append(f"{stage}:{qp.pod.name}"),
        picker=picker,
    )


def _names(q: SchedulingQueue) -> list[str]:
    out = []
    while (qp := q.pop()) is not None:
        out.append(qp.pod.name)
    return out


def test_the_pick_comes_from_the_window_and_the_others_keep_their_order() -> None:
    picker = Picker(window=3, choice=2)
    q = _queue(picker, [])
    for i in range(5):
        q.add(make_pod(f"p{i}", created=float(i)))
    assert _names(q) == ["p2", "p3", "p4", "p0", "p1"]
    assert picker.seen[0] == ["p0", "p1", "p2"]
    assert picker.seen[1] == ["p0", "p1", "p3"]
    assert picker.seen[-1] == ["p0", "p1"]  # a single pod left is popped without asking


def test_a_raising_or_out_of_range_pick_falls_back_to_the_queue_order() -> None:
    contained: list[str] = []
    picker = Picker(window=4, raises=True)
    q = _queue(picker, contained)
    for i in range(3):
        q.add(make_pod(f"p{i}", created=float(i)))
    assert _names(q) == ["p0", "p1", "p2"]
    assert contained == ["QueuePick:p0", "QueuePick:p1"]
    picker = Picker(window=4, choice=99)
    q = _queue(picker, [])
    for i in range(3):
        q.add(make_pod(f"p{i}", created=float(i)))
    assert _names(q) == ["p0", "p1", "p2"]


def test_the_window_is_read_at_each_pop() -> None:
    picker = Picker(window=2, choice=1)
    q = _queue(picker, [])
    for i in range(4):
        q.add(make_pod(f"p{i}", created=float(i)))
    assert q.pop().pod.name == "p1"  # type: ignore[union-attr]
    picker.window = 3
    assert q.pop().pod.name == "p2"  # type: ignore[union-attr]
    assert picker.seen == [["p0", "p1"], ["p0", "p2", "p3"]]


def test_a_pod_queued_later_ahead_of_the_window_enters_it() -> None:
    picker = Picker(window=2, choice=1)
    q = _queue(picker, [])
    for i in (2, 3, 4):
        q.add(make_pod(f"p{i}", created=float(i)))
    assert q.pop().pod.name == "p3"  # type: ignore[union-attr]
    q.add(make_pod("p0", created=0.0))
    q.add(make_pod("p1", created=1.0))
    assert q.pop().pod.name == "p1"  # type: ignore[union-attr]
    assert picker.seen == [["p2", "p3"], ["p0", "p1"]]  # p2 went back: two earlier pods came in
    assert _names(q) == ["p2", "p4", "p0"]


def test_pods_held_in_the_window_count_as_active_and_can_leave_it() -> None:
    picker = Picker(window=4, choice=1)
    q = _queue(picker, [])
    q.add(make_pod("a", created=0.0))
    q.add(make_pod("b", created=1.0))
    q.add(make_pod("c", created=2.0))
    assert q.pop().pod.name == "b"  # type: ignore[union-attr]
    assert q.has_active()  # a and c wait in the window, none in the heap
    q.delete(make_pod("a").key)
    assert q.has_active()
    assert q.pop().pod.name == "c"  # type: ignore[union-attr]
    assert not q.has_active() and q.pop() is None


def test_a_pod_in_the_window_re_sorted_by_an_update_takes_its_new_place() -> None:
    picker = Picker(window=3, choice=1)
    q = _queue(picker, [])
    for i in range(4):
        q.add(make_pod(f"p{i}", created=float(i)))
    assert q.pop().pod.name == "p1"  # type: ignore[union-attr]
    q.update(make_pod("p0", created=9.0))  # its key moves behind every other pod's
    assert q.pop().pod.name == "p3"  # type: ignore[union-attr]
    assert picker.seen[1] == ["p2", "p3", "p0"]  # once, in its new place
