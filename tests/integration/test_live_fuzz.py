"""Hostile pods through the real apiserver: what it accepts, `pysched run` must survive.

A smaller corpus than the simulated fuzz (which runs 2,000 pods in the unit tests): hypothesis
draws batches of pods, half valid and half hostile; the apiserver refuses some (422), the rest
reach the scheduler. After each batch a plain pod must bind (no stall), the process must be the
same, healthy leader, and no bug may have reached the last-resort guard.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pysched.testing import KubeAPI, LocalControlPlane, NodeSpec, create_fake_nodes, wait_for
from pysched.testing.hostile import hostile_pod
from pysched.testing.kube import KubeAPIError
from pysched.testing.scheduler import TEST_LABEL, SchedulerProcess, pod_for, pysched_profile, start_scheduler

pytestmark = pytest.mark.integration

BATCHES, PER_BATCH = 6, 40  # 240 pods
_names = itertools.count()


@pytest.fixture(scope="module")
def fuzzed(
    control_plane: LocalControlPlane, kube: KubeAPI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, SchedulerProcess, dict[str, int]]]:
    namespace = "live-fuzz"
    kube.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    spec = NodeSpec(cpu="16", memory="64Gi", labels={TEST_LABEL: namespace, "zone": "a"})
    nodes = create_fake_nodes(kube, 4, spec, prefix="fuzz-n")
    profile = pysched_profile(tmp_path_factory.mktemp("fuzz") / "profiles.yaml", "pysched-fuzz")
    scheduler = start_scheduler(control_plane, "pysched-fuzz", config=profile, leader_elect=True, lease_name="fuzz")
    counts = {"created": 0, "refused by the apiserver": 0, "left out: stall the apiserver": 0}
    try:
        wait_for(scheduler.is_leader, bool, timeout=30, what="the fuzzed scheduler leads")
        yield namespace, scheduler, counts
    finally:
        scheduler.stop()
        for pod in kube.get(f"/api/v1/namespaces/{namespace}/pods")["items"]:
            kube.force_delete_pod(namespace, pod["metadata"]["name"])
        kube.delete(f"/api/v1/namespaces/{namespace}")
        for node in nodes:
            kube.delete(f"/api/v1/nodes/{node}")


def as_created(raw: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The drawn pod as a client would create it in the test's namespace, on the test's nodes."""
    meta = raw["metadata"]
    meta.update(name=f"fz-{next(_names)}", namespace=namespace)
    for field in ("uid", "creationTimestamp"):
        meta.pop(field, None)
    raw.pop("status", None)
    spec = raw["spec"]
    spec["schedulerName"] = "pysched-fuzz"
    if isinstance(spec.get("nodeSelector"), dict):
        spec["nodeSelector"][TEST_LABEL] = namespace
    else:
        spec["nodeSelector"] = {TEST_LABEL: namespace}
    return raw


_HUGE_EXPONENT = re.compile(r"[eE][+-]?[0-9]{4,}")


def stalls_the_apiserver(raw: dict[str, Any]) -> bool:
    """kube-apiserver v1.36 itself spends more than 30 s parsing a resource quantity such as
    `1e-999999999` (pysched refuses it in microseconds: the simulated fuzz covers it)."""
    return bool(_HUGE_EXPONENT.search(json.dumps(raw.get("spec"), default=str)))


@st.composite
def batch(draw: st.DrawFn) -> list[dict[str, Any]]:
    return [draw(hostile_pod(i, hostile=i % 2 == 1)) for i in range(PER_BATCH)]


@settings(
    max_examples=BATCHES,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # a failure is printed as drawn, not shrunk against the API
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(pods=batch())
def test_hostile_pods_through_the_apiserver_never_stall_the_scheduler(
    kube: KubeAPI, fuzzed: tuple[str, SchedulerProcess, dict[str, int]], pods: list[dict[str, Any]]
) -> None:
    namespace, scheduler, counts = fuzzed
    for raw in pods:
        if stalls_the_apiserver(raw):
            counts["left out: stall the apiserver"] += 1
            continue
        try:
            kube.create_pod(namespace, as_created(raw, namespace))
            counts["created"] += 1
        except KubeAPIError:
            counts["refused by the apiserver"] += 1  # validation's job, not ours
    plain = pod_for(f"plain-{next(_names)}", "pysched-fuzz", namespace, "10m")
    kube.create_pod(namespace, plain)
    path = f"/api/v1/namespaces/{namespace}/pods/{plain['metadata']['name']}"
    wait_for(lambda: kube.get(path)["spec"].get("nodeName"), bool, timeout=30, what="a plain pod bound")
    assert scheduler.process.alive() and scheduler.is_leader() and scheduler.get("/healthz")[0] == 200
    errors = sum(v for k, v in scheduler.metrics().items() if k.startswith("pysched_internal_errors_total"))
    assert errors == 0, scheduler.log(80)
    assert counts["created"] > 0, counts
