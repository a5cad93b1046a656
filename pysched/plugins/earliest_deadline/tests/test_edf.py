import asyncio

from hypothesis import given
from hypothesis import strategies as st

from pysched.api.annotations import DEADLINE, INVALID_ANNOTATION, TOTAL_STEPS, parse_duration
from pysched.api.builders import make_pod, node_dict, pod_dict
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.interfaces import QueuedPod
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.plugins.earliest_deadline import EarliestDeadline
from pysched.scheduler.scheduler import Scheduler
from pysched.sim.runner import profile_scheduler


def _edf_scheduler() -> tuple[SimulatedCluster, Scheduler]:
    registry = default_registry()
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    return cluster, profile_scheduler(builtin_config(registry), "edf", cluster, clock, registry)


def _plugin() -> EarliestDeadline:
    _, scheduler = _edf_scheduler()
    (plugin,) = (p for p in scheduler.frameworks["edf"].pre_enqueue if isinstance(p, EarliestDeadline))
    return plugin


EDF = _plugin()


def _queued(name: str, deadline: str | None = None, priority: int = 0, created: float = 0.0) -> QueuedPod:
    annotations = {"pysched.io/deadline": deadline} if deadline is not None else {}
    return QueuedPod(make_pod(name, priority=priority, created=created, annotations=annotations), added=created)


def _order(*pods: QueuedPod) -> list[str]:
    return [q.pod.name for q in sorted(pods, key=EDF.sort_key)]


def test_earliest_deadline_first_then_no_deadline() -> None:
    late = _queued("late", "2026-01-01T10:00:00Z", created=1.0)
    early = _queued("early", "2026-01-01T09:00:00Z", created=2.0)
    none = _queued("none", created=0.0)
    assert _order(none, late, early) == ["early", "late", "none"]


def test_priority_wins_over_deadline() -> None:
    urgent = _queued("urgent", "2026-01-01T00:00:01Z")
    important = _queued("important", priority=10)
    assert _order(urgent, important) == ["important", "urgent"]


def test_duration_counts_from_creation() -> None:
    # created at 0 with 2h vs created at 3600 with 30m: the second is due first (5400 < 7200)
    a = _queued("a", "2h", created=0.0)
    b = _queued("b", "30m", created=3600.0)
    assert _order(a, b) == ["b", "a"]
    assert _queued("c", "1h30m", created=100.0).pod.created + 5400 == 5500


def test_malformed_deadline_is_absent() -> None:
    bad = _queued("bad", "tomorrow", created=0.0)
    good = _queued("good", "10h", created=50.0)
    plain = _queued("plain", created=10.0)
    assert _order(plain, bad, good) == ["good", "bad", "plain"]


@given(st.integers(0, 99), st.integers(0, 59), st.integers(0, 59))
def test_durations(h: int, m: int, s: int) -> None:
    assert parse_duration(f"{h}h{m}m{s}s") == h * 3600 + m * 60 + s
    assert parse_duration(f"{h}h {m}m") is None
    assert parse_duration("") is None


def test_a_malformed_deadline_is_told_once_and_the_pod_still_runs() -> None:
    async def run() -> None:
        cluster, scheduler = _edf_scheduler()
        cluster.add_node(node_dict("n", cpu="4", memory="8Gi"))
        await scheduler.start()
        notes = {DEADLINE: "next tuesday", TOTAL_STEPS: "x"}  # EarliestDeadline reads the deadline only
        cluster.create_pod(pod_dict("p", scheduler_name="edf", annotations=notes))
        await scheduler.run_until_idle()
        told = [e.note for e in cluster.events if e.reason == INVALID_ANNOTATION]
        assert len(told) == 1 and told[0].startswith(f"{DEADLINE}: 'next tuesday' is not ")
        assert cluster.pods[make_pod("p").key].node_name == "n"  # read as no deadline: sorted last, placed
        await scheduler.stop()

    asyncio.run(run())
