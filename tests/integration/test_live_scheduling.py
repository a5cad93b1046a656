"""`pysched run` against the real kube-apiserver: binds, events, conditions, no overcommit."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pysched.testing import KubeAPI, LocalControlPlane, NodeSpec, create_fake_nodes, wait_for
from pysched.testing.helpers import condition
from pysched.testing.scheduler import (
    TEST_LABEL,
    SchedulerProcess,
    create_pods,
    events,
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
    with namespace_nodes(kube, namespace, 50, cpu="4", memory="16Gi") as names:
        yield names


@pytest.fixture
def scheduler(control_plane: LocalControlPlane, namespace: str, tmp_path: Path) -> Iterator[SchedulerProcess]:
    profile = write_profile(tmp_path / "profiles.yaml", f"pysched-{namespace}")
    proc = start_scheduler(
        control_plane,
        f"pysched-{namespace}",
        config=profile,
        args=["--qps=1000", "--burst=1000", "--event-qps=500", "--event-burst=500"],
    )
    yield proc
    assert proc.stop() == 0, proc.log()


def test_200_pods_on_50_nodes(
    kube: KubeAPI, namespace: str, nodes: list[str], scheduler: SchedulerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"pysched-{namespace}"
    cpus = ["100m", "250m", "500m", "750m", "1"]
    pods = [pod_for(f"p{i:03d}", name, namespace, cpus[i % len(cpus)], f"{64 * (1 + i % 4)}Mi") for i in range(200)]
    started = time.monotonic()
    create_pods(kube, namespace, pods)
    bound = wait_for(
        lambda: list_pods(kube, namespace),
        lambda items: sum(1 for p in items if p["spec"].get("nodeName")) == 200,
        timeout=60,
        what="200 pods bound",
    )
    elapsed = time.monotonic() - started
    assert {p["spec"]["nodeName"] for p in bound} <= set(nodes)
    assert not overcommitted(kube, bound)
    scheduled = wait_for(
        lambda: events(kube, namespace, "Scheduled"), lambda e: len(e) == 200, timeout=30, what="Scheduled events"
    )
    sample = scheduled[0]
    assert sample["type"] == "Normal"
    assert sample["note"] == f"Successfully assigned {namespace}/{sample['regarding']['name']} to " + next(
        p["spec"]["nodeName"] for p in bound if p["metadata"]["name"] == sample["regarding"]["name"]
    )
    assert sample["reportingController"] == name
    metrics = scheduler.metrics()
    assert metrics[f'scheduler_schedule_attempts_total{{profile="{name}",result="scheduled"}}'] == 200
    assert metrics['pysched_bind_calls_total{result="ok"}'] == 200
    with capsys.disabled():
        print(f"\n200 pods created and bound in {elapsed:.2f}s ({200 / elapsed:.0f} pods/s)")


def test_unschedulable_pod_gets_event_and_condition_then_binds(
    kube: KubeAPI, namespace: str, nodes: list[str], scheduler: SchedulerProcess
) -> None:
    name = f"pysched-{namespace}"
    kube.create_pod(namespace, pod_for("big", name, namespace, "16"))
    failed = wait_for(
        lambda: events(kube, namespace, "FailedScheduling"), lambda e: len(e) >= 1, what="FailedScheduling event"
    )
    assert failed[0]["type"] == "Warning"
    assert failed[0]["note"].startswith("0/")
    assert "50 Insufficient cpu" in failed[0]["note"]
    pod = wait_for(
        lambda: kube.get_pod(namespace, "big"),
        lambda p: condition(p, "PodScheduled") is not None,
        what="PodScheduled condition",
    )
    cond = condition(pod, "PodScheduled")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert "Insufficient cpu" in cond["message"]

    big = f"{namespace}-big"
    create_fake_nodes(kube, 1, NodeSpec(cpu="32", labels={TEST_LABEL: namespace}), prefix=big)
    try:
        added = time.monotonic()
        bound = wait_for(
            lambda: kube.get_pod(namespace, "big"), lambda p: bool(p["spec"].get("nodeName")), what="big pod bound"
        )
        assert bound["spec"]["nodeName"].startswith(big)
        assert time.monotonic() - added < 15  # the node event requeues it; no 5-minute flush needed
    finally:
        kube.delete(f"/api/v1/nodes/{big}000")


def test_pods_of_other_schedulers_are_left_alone(
    kube: KubeAPI, namespace: str, nodes: list[str], scheduler: SchedulerProcess
) -> None:
    kube.create_pod(namespace, pod_for("theirs", "someone-else", namespace, "100m"))
    kube.create_pod(namespace, pod_for("ours", f"pysched-{namespace}", namespace, "100m"))
    wait_for(lambda: kube.get_pod(namespace, "ours"), lambda p: bool(p["spec"].get("nodeName")), what="ours bound")
    assert not kube.get_pod(namespace, "theirs")["spec"].get("nodeName")
    assert scheduler.binds() == 1
