"""Two `pysched run` replicas on one Lease; and a scheduler killed mid-run, then restarted."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pysched.testing import KubeAPI, LocalControlPlane, wait_for
from pysched.testing.chaos import leader_and_follower
from pysched.testing.scheduler import (
    create_pods,
    list_pods,
    namespace_nodes,
    overcommitted,
    pod_for,
    start_scheduler,
    write_profile,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def nodes(kube: KubeAPI, namespace: str) -> Iterator[list[str]]:
    with namespace_nodes(kube, namespace, 10) as names:
        yield names


def bound_count(kube: KubeAPI, namespace: str) -> int:
    return sum(1 for p in list_pods(kube, namespace) if p["spec"].get("nodeName"))


def test_only_the_leader_binds_and_the_follower_takes_over(
    control_plane: LocalControlPlane,
    kube: KubeAPI,
    namespace: str,
    nodes: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Default timings (15 s lease, 10 s renew deadline, 2 s retry): the takeover is measured."""
    name = f"pysched-{namespace}"
    profile = write_profile(tmp_path / "profiles.yaml", name)
    leader, follower = leader_and_follower(control_plane, name, profile, namespace)
    try:
        create_pods(kube, namespace, [pod_for(f"a{i}", name, namespace, "100m") for i in range(20)])
        wait_for(lambda: bound_count(kube, namespace), lambda n: n == 20, what="20 pods bound")
        assert follower.binds() == 0
        assert not follower.is_leader()
        assert leader.binds() == 20

        leader.kill()
        killed = time.monotonic()
        wait_for(follower.is_leader, bool, timeout=30, interval=0.05, what="follower takes over")
        takeover = time.monotonic() - killed
        assert takeover <= 15.0 + 2 * 2.0  # lease duration, plus one retry period of each side
        create_pods(kube, namespace, [pod_for(f"b{i}", name, namespace, "100m") for i in range(20)])
        wait_for(lambda: bound_count(kube, namespace), lambda n: n == 40, what="40 pods bound")
        assert follower.binds() == 20
        assert not overcommitted(kube, list_pods(kube, namespace))
        with capsys.disabled():
            print(f"\nleader takeover after SIGKILL: {takeover:.1f}s (lease 15 s)")
    finally:
        for replica in (leader, follower):
            replica.kill()


def test_graceful_stop_hands_the_lease_over(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, tmp_path: Path
) -> None:
    name = f"pysched-{namespace}"
    profile = write_profile(tmp_path / "profiles.yaml", name)
    first = start_scheduler(control_plane, f"{name}-0", config=profile, leader_elect=True, lease_namespace=namespace)
    wait_for(first.is_leader, bool, what="first leader")
    second = start_scheduler(control_plane, f"{name}-1", config=profile, leader_elect=True, lease_namespace=namespace)
    try:
        assert first.stop() == 0, first.log()
        stopped = time.monotonic()
        wait_for(second.is_leader, bool, timeout=20, interval=0.05, what="second takes over")
        assert time.monotonic() - stopped < 5.0  # released, not expired
    finally:
        second.kill()


def test_sigkill_mid_run_then_restart_binds_every_pod_once(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, nodes: list[str], tmp_path: Path
) -> None:
    name = f"pysched-{namespace}"
    profile = write_profile(tmp_path / "profiles.yaml", name)
    slow = ["--qps=40", "--burst=10", "--event-qps=5"]  # slow enough to be killed halfway
    create_pods(kube, namespace, [pod_for(f"p{i:03d}", name, namespace, "250m") for i in range(240)])
    first = start_scheduler(control_plane, f"{name}-0", config=profile, args=slow)
    wait_for(lambda: bound_count(kube, namespace), lambda n: n >= 40, what="some pods bound")
    first.kill()
    before = bound_count(kube, namespace)
    assert before < 240, "the scheduler finished before it could be killed"
    second = start_scheduler(control_plane, f"{name}-1", config=profile, args=["--qps=1000", "--burst=1000"])
    try:
        wait_for(lambda: bound_count(kube, namespace), lambda n: n == 240, timeout=60, what="all pods bound")
        # A pod bound before the kill arrives bound through the informer: no second bind call for it.
        # (A bind the API was still serving at the kill may land after `before` was counted.)
        assert 240 - before - 10 <= second.metric('pysched_bind_calls_total{result="ok"}') <= 240 - before
        assert second.metric('pysched_bind_calls_total{result="409"}') == 0
        assert not overcommitted(kube, list_pods(kube, namespace))
    finally:
        assert second.stop() == 0, second.log()


def test_a_frozen_leader_writes_nothing_after_it_thaws(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, nodes: list[str], tmp_path: Path
) -> None:
    """SIGSTOP the leader while its binds wait in its rate limiter, let the follower take over and
    bind everything, then SIGCONT it: it must send none of those binds (each would be a 409)."""
    name = f"pysched-{namespace}"
    profile = write_profile(tmp_path / "profiles.yaml", name)
    fast_lease = ["--lease-duration=4", "--renew-deadline=3", "--retry-period=0.5"]
    first = start_scheduler(
        control_plane, f"{name}-0", config=profile, leader_elect=True, lease_name=name,
        args=[*fast_lease, "--qps=4", "--burst=1"],  # binds queue up behind the rate limiter
    )  # fmt: skip
    wait_for(first.is_leader, bool, timeout=20, what="first leads")
    second = start_scheduler(control_plane, f"{name}-1", config=profile, leader_elect=True, lease_name=name,
                             args=[*fast_lease, "--qps=1000", "--burst=1000"])  # fmt: skip
    try:
        create_pods(kube, namespace, [pod_for(f"p{i:02d}", name, namespace, "250m") for i in range(60)])
        wait_for(lambda: bound_count(kube, namespace), lambda n: n >= 4, what="the first leader binding")
        assert first.process.popen is not None
        first.process.popen.send_signal(signal.SIGSTOP)
        try:
            wait_for(second.is_leader, bool, timeout=20, what="the follower takes over")
            wait_for(lambda: bound_count(kube, namespace), lambda n: n == 60, timeout=60, what="all bound")
        finally:
            first.process.popen.send_signal(signal.SIGCONT)
        first.process.popen.wait(30)
        assert first.process.popen.returncode == 1  # it learnt it had lost the Lease and exited
        stopped = [json.loads(line) for line in first.log(200).splitlines() if '"event": "stopped"' in line]
        assert stopped, first.log()
        binds = stopped[-1]["binds"]
        assert "409" not in binds, binds  # not one stale bind reached the API
        assert binds.get("refused", 0) >= 1, binds  # and some were held when it thawed
        assert second.metric('pysched_bind_calls_total{result="409"}') == 0
        assert not overcommitted(kube, list_pods(kube, namespace))
    finally:
        second.stop()
        first.stop()  # reaps it and tells the control plane its exit was expected


def test_pods_pending_before_the_leader_is_elected_get_what_preenqueue_tells(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, tmp_path: Path
) -> None:
    """Pods pending when the replica starts (a restart, a rollout, a failover): their warning and
    their demotion are told once it leads. As a standby it kept them without PreEnqueue, which
    would have told them while its writes were refused, and never again."""
    name = f"pysched-{namespace}"
    with namespace_nodes(kube, namespace, 1):
        for pod, value in (("bad", "tomorrow-ish"), ("late", "2020-01-01T00:00:00Z")):  # malformed; long past
            raw = pod_for(pod, name, namespace, "100m")
            raw["metadata"]["annotations"] = {"pysched.io/deadline": value}
            kube.create_pod(namespace, raw)
        config = write_profile(tmp_path / "profiles.yaml", name, builtin="pysched-noscale")
        proc = start_scheduler(
            control_plane, name, config=config, leader_elect=True, lease_namespace=namespace, lease_name=name
        )
        try:
            wait_for(
                lambda: list_pods(kube, namespace), lambda ps: all(p["spec"].get("nodeName") for p in ps), what="bound"
            )

            def told() -> set[tuple[str, str]]:
                items = kube.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events").get("items", [])
                return {(e["regarding"]["name"], e["reason"]) for e in items}

            wanted = {("bad", "InvalidAnnotation"), ("late", "DeadlineInfeasible")}
            wait_for(told, lambda seen: wanted <= seen, what="the warning and the demotion")
            late = kube.get_pod(namespace, "late")
            reasons = [c["reason"] for c in late["status"].get("conditions", []) if c["type"] == "pysched.io/Deadline"]
            assert reasons == ["DeadlineInfeasible"]
        finally:
            assert proc.stop() == 0, proc.log()
