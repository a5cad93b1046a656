"""API faults survived: kube-apiserver killed and started again under a running scheduler.

A private control plane (the shared one must not go down under other tests). After each fault
the scheduler's cache must equal the API: pods sized to fill exactly what the API's pods leave
free all bind, and one more does not.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pysched.testing import KubeAPI, LocalControlPlane, NodeSpec, create_fake_nodes, wait_for
from pysched.testing.scheduler import (
    TEST_LABEL,
    SchedulerProcess,
    create_pods,
    events,
    list_pods,
    overcommitted,
    pod_for,
    start_scheduler,
    write_profile,
)

pytestmark = pytest.mark.integration

NODES, NODE_CPUS = 3, 4
NAMESPACE = "faults"
LEASE = ["--lease-duration=15", "--renew-deadline=10", "--retry-period=2"]  # kube-scheduler's defaults


@pytest.fixture(scope="module")
def plane(control_plane_bin_dir: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    with LocalControlPlane(tmp_path_factory.mktemp("faults-plane"), bin_dir=control_plane_bin_dir) as plane:
        kube = plane.api()
        kube.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        spec = NodeSpec(cpu=str(NODE_CPUS), memory="32Gi", labels={TEST_LABEL: NAMESPACE})
        create_fake_nodes(kube, NODES, spec, prefix="faults-n")
        yield plane


def bound(kube: KubeAPI) -> list[str]:
    return sorted(p["metadata"]["name"] for p in list_pods(kube, NAMESPACE) if p["spec"].get("nodeName"))


def fill_exactly(kube: KubeAPI, scheduler: str, tag: str) -> None:
    """Pods of one CPU for every CPU the API's pods leave free, and one more: the free ones all
    bind and the extra one is refused, or the scheduler's cache is not the API's."""
    used = sum(1 for _ in bound(kube))  # every test pod asks for one CPU
    free = NODES * NODE_CPUS - used
    names = [f"{tag}-{i}" for i in range(free + 1)]
    create_pods(kube, NAMESPACE, [pod_for(n, scheduler, NAMESPACE, "1") for n in names])
    wait_for(lambda: bound(kube), lambda b: len(b) == used + free, timeout=60, what=f"{free} pods filling the nodes")
    refused = wait_for(
        lambda: [e for e in events(kube, NAMESPACE, "FailedScheduling") if e["regarding"]["name"].startswith(tag)],
        bool,
        timeout=30,
        what="the extra pod refused",
    )
    assert refused and len(bound(kube)) == used + free  # exactly full: the extra one stays pending
    assert not overcommitted(kube, list_pods(kube, NAMESPACE))
    pending = [n for n in names if n not in bound(kube)]
    assert len(pending) == 1
    kube.force_delete_pod(NAMESPACE, pending[0])


def readiness_while_down(replica: SchedulerProcess, seconds: float) -> set[int]:
    """The /readyz answers seen while the API is down (polled, not slept through)."""
    seen: set[int] = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        status, body = replica.get("/readyz")
        seen.add(status)
        if status == 503:
            assert "API server unreachable" in body or "informers" in body, body
        time.sleep(0.2)
    return seen


def test_a_short_outage_costs_nothing_and_a_long_one_hands_over_without_double_binds(
    plane: LocalControlPlane, tmp_path: Path
) -> None:
    kube = plane.api()
    name = "pysched-faults"
    profile = write_profile(tmp_path / "profiles.yaml", name)
    first = start_scheduler(plane, f"{name}-0", config=profile, leader_elect=True, lease_name=name, args=LEASE)
    second: SchedulerProcess | None = None
    try:
        wait_for(first.is_leader, bool, timeout=30, what="a leader")
        create_pods(kube, NAMESPACE, [pod_for(f"before-{i}", name, NAMESPACE, "1") for i in range(4)])
        wait_for(lambda: bound(kube), lambda b: len(b) == 4, timeout=30, what="the first pods bound")
        for i in range(30):  # the store moves on while the scheduler watches only pods and nodes
            kube.post(
                f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"churn-{i}"}},
            )

        # Shorter than the renew deadline: the Lease is kept, nothing restarts, readiness dips.
        down = time.monotonic()
        plane.stop_apiserver()
        seen = readiness_while_down(first, 2.0)
        plane.start_apiserver()
        outage = time.monotonic() - down
        assert outage < 10.0, f"the outage lasted {outage:.1f} s: not shorter than the renew deadline"
        assert 503 in seen and first.get("/healthz")[0] == 200
        wait_for(first.ready, bool, timeout=60, what="ready again once the API answers")
        assert first.process.alive() and first.is_leader()
        # The new apiserver's watch cache starts past the versions the informers held: 410 Gone,
        # then a relist delivered as a diff, which the exact fill below shows was right.
        assert first.metric('pysched_informer_relists_total{resource="pods"}') >= 1
        fill_exactly(kube, name, "short")

        # Longer than the renew deadline: the leader stops writing and exits 1 (as kube-scheduler
        # does); the follower takes over once the API is back. Nothing is bound twice.
        second = start_scheduler(plane, f"{name}-1", config=profile, leader_elect=True, lease_name=name, args=LEASE)
        for pod in [p for p in list_pods(kube, NAMESPACE) if p["metadata"]["name"].startswith("short")]:
            kube.force_delete_pod(NAMESPACE, pod["metadata"]["name"])
        plane.stop_apiserver()
        wait_for(first.process.alive, lambda alive: not alive, timeout=30, what="the old leader's exit")
        assert first.process.popen is not None and first.process.popen.returncode == 1, first.log()
        assert 200 not in readiness_while_down(second, 2.0)
        plane.start_apiserver()
        wait_for(second.is_leader, bool, timeout=60, what="the follower takes over")
        fill_exactly(kube, name, "long")
        assert second.metric('pysched_bind_calls_total{result="409"}') == 0, second.log()
        assert second.process.alive()
    finally:
        for replica in (first, second):
            if replica is not None and replica.process.alive():
                replica.stop()
