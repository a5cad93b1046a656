"""One hostile pod must never stop scheduling: each trigger that once crashed or hung the leader,
live, with two replicas on one Lease. Every hostile pod gets its event, the leader stays the
leader (no crash, no restart, no hang), no bug reaches the last-resort guard, and a plain pod
created after all of them is bound."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pysched.api.annotations import CPU_MAX, CPU_MIN, DEADLINE, PROGRESS, TOTAL_STEPS, format_progress
from pysched.testing import KubeAPI, LocalControlPlane, wait_for
from pysched.testing.emulator import KubeletEmulator
from pysched.testing.scheduler import (
    SchedulerProcess,
    events,
    namespace_nodes,
    pod_for,
    pysched_profile,
    start_scheduler,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def nodes(kube: KubeAPI, namespace: str) -> Iterator[list[str]]:
    with namespace_nodes(kube, namespace, 2) as names:
        yield names


def pod(name: str, scheduler: str, namespace: str, cpu: str = "500m", memory: str = "64Mi", **notes: str) -> Any:
    raw = pod_for(name, scheduler, namespace, cpu, memory)
    raw["metadata"]["annotations"] = notes
    return raw


def leader_of(replicas: list[SchedulerProcess]) -> SchedulerProcess | None:
    return next((r for r in replicas if r.is_leader()), None)


def test_hostile_pods_neither_crash_nor_hang_the_leader(
    control_plane: LocalControlPlane,
    kube: KubeAPI,
    namespace: str,
    nodes: list[str],
    emulator: KubeletEmulator,
    tmp_path: Path,
) -> None:
    name = f"pysched-{namespace}"
    profile = pysched_profile(tmp_path / "profiles.yaml", name)
    replicas = [
        start_scheduler(control_plane, f"{name}-{i}", config=profile, leader_elect=True, lease_name=name, wait=True)
        for i in range(2)
    ]
    try:
        leader = wait_for(lambda: leader_of(replicas), lambda r: r is not None, timeout=30, what="a leader")
        assert leader is not None
        pending = {
            "cpu-1ei": pod("cpu-1ei", name, namespace, cpu="1Ei"),
            "cpu-int64": pod("cpu-int64", name, namespace, cpu="9223372036854775807"),
            "memory-1e30": pod("memory-1e30", name, namespace, memory="1e30"),
            "cpu-min-digits": pod("cpu-min-digits", name, namespace, **{CPU_MIN: "9" * 5000}),
            "cpu-max-exponent": pod("cpu-max-exponent", name, namespace, **{CPU_MAX: "1e999999999"}),
            "arabic-deadline": pod("arabic-deadline", name, namespace, **{DEADLINE: "\u0661\u0662h"}),
            "superscript-steps": pod("superscript-steps", name, namespace, **{DEADLINE: "1h", TOTAL_STEPS: "\u00b2"}),
            "huge-deadline": pod(
                "huge-deadline", name, namespace, **{DEADLINE: "99999999999999999999h", TOTAL_STEPS: "1000"}
            ),
            # No count can save it (10^6 steps in 2 minutes): choosing must not walk a billion counts.
            "cpu-max-1e9": pod(
                "cpu-max-1e9", name, namespace, **{DEADLINE: "2m", TOTAL_STEPS: "1000000", CPU_MAX: "1e9"}
            ),
            "long-progress": pod("long-progress", name, namespace, **{DEADLINE: "1h", TOTAL_STEPS: "100000"}),
        }
        for raw in pending.values():
            kube.create_pod(namespace, raw)
        path = f"/api/v1/namespaces/{namespace}/pods"
        wait_for(
            lambda: {p["metadata"]["name"] for p in kube.get(path)["items"] if p["spec"].get("nodeName")},
            lambda bound: {"cpu-max-1e9", "long-progress", "huge-deadline", "superscript-steps"} <= bound,
            timeout=60,
            what="the schedulable hostile pods bound",
        )
        # Running pods report hostile progress (a training pod's own token may write it).
        kube.patch(f"{path}/long-progress", {"metadata": {"annotations": {PROGRESS: "1" * 4301 + "@" + "x"}}})
        kube.patch(f"{path}/cpu-max-1e9", {"metadata": {"annotations": {PROGRESS: format_progress(100, time.time())}}})
        kube.patch(f"{path}/superscript-steps", {"metadata": {"annotations": {TOTAL_STEPS: "\u00b2\u00b3"}}})

        def report_and_read() -> list[str]:
            """The job's helper writes its progress as it trains; what pysched concluded so far."""
            steps = int(100 * (time.time() - started))
            kube.patch(
                f"{path}/cpu-max-1e9", {"metadata": {"annotations": {PROGRESS: format_progress(steps, time.time())}}}
            )
            return [e["note"] for e in events(kube, namespace, "DeadlineInfeasible")]

        started = time.time()
        infeasible = wait_for(report_and_read, bool, timeout=60, interval=1.0, what="the unsaveable job judged")
        assert any("even at 8 CPUs" in note for note in infeasible), infeasible  # capped by its node
        refused = [e["note"] for e in events(kube, namespace, "FailedScheduling")]
        for pod_name in ("cpu-1ei", "cpu-int64", "memory-1e30"):
            assert any("beyond any node's capacity" in n for n in refused), (pod_name, refused)
        warned = wait_for(
            lambda: {e["regarding"]["name"] for e in events(kube, namespace, "InvalidAnnotation")},
            lambda got: {"cpu-min-digits", "cpu-max-exponent", "arabic-deadline", "superscript-steps"} <= got,
            timeout=30,
            what="every malformed annotation warned about",
        )
        assert warned
        wait_for(
            lambda: {e["regarding"]["name"] for e in events(kube, namespace, "InvalidProgress")},
            lambda got: "long-progress" in got,
            timeout=30,
            what="the running pod's malformed progress warned about",
        )

        kube.create_pod(namespace, pod("plain", name, namespace))
        wait_for(lambda: kube.get(f"{path}/plain")["spec"].get("nodeName"), bool, timeout=30, what="a plain pod bound")
        assert leader.process.alive() and leader.is_leader()  # no crash, no restart, no lost Lease
        for replica in replicas:
            status, _ = replica.get("/healthz")
            assert status == 200
            _, text = replica.get("/metrics")
            assert "# HELP pysched_internal_errors_total" in text  # exported, so a zero means none
            errors = sum(v for k, v in replica.metrics().items() if k.startswith("pysched_internal_errors_total"))
            assert errors == 0, replica.log()
    finally:
        for replica in replicas:
            replica.stop()
