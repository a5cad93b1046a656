"""Small helpers for tests against the real API: pod manifests, status lookups."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pysched.api.times import format_rfc3339
from pysched.testing.controlplane import NodeSpec, create_fake_node
from pysched.testing.kube import JSON, KubeAPI

TEST_SCHEDULER = "pysched-integration-test"  # no scheduler watches this name


def make_pod(
    name: str,
    *,
    cpu: str = "100m",
    memory: str = "64Mi",
    cpu_limit: str | None = "200m",
    memory_limit: str | None = "128Mi",
    scheduler: str = TEST_SCHEDULER,
    annotations: dict[str, str] | None = None,
) -> JSON:
    limits: dict[str, str] = {}
    if cpu_limit is not None:
        limits["cpu"] = cpu_limit
    if memory_limit is not None:
        limits["memory"] = memory_limit
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        resources["limits"] = limits
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/pause:none",
                    "resources": resources,
                    "resizePolicy": [
                        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
                        {"resourceName": "memory", "restartPolicy": "NotRequired"},
                    ],
                }
            ],
        },
    }


def end_pod(kube: KubeAPI, namespace: str, name: str, finished: float) -> None:
    """What a kubelet writes when the pod's only container exits 0 at `finished` (epoch s)."""
    terminated = {"exitCode": 0, "reason": "Completed", "startedAt": format_rfc3339(finished - 60),
                  "finishedAt": format_rfc3339(finished)}  # fmt: skip
    status = {
        "phase": "Succeeded",
        "containerStatuses": [
            {"name": "main", "image": "trainer", "imageID": "", "ready": False, "restartCount": 0,
             "state": {"terminated": terminated}},
        ],
    }  # fmt: skip
    kube.patch(kube.pod_path(namespace, name, "status"), {"status": status})


def fake_node(kube: KubeAPI, name: str, spec: NodeSpec | None = None) -> str:
    create_fake_node(kube, name, spec or NodeSpec())
    return name


def container(pod: JSON, name: str = "main") -> JSON:
    found: JSON = next(c for c in pod["spec"]["containers"] if c["name"] == name)
    return found


def container_status(pod: JSON, name: str = "main") -> JSON | None:
    for cs in pod.get("status", {}).get("containerStatuses") or []:
        if cs.get("name") == name:
            found: JSON = cs
            return found
    return None


def condition(pod: JSON, ctype: str) -> JSON | None:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == ctype:
            found: JSON = cond
            return found
    return None


async def eventually(predicate: Callable[[], bool], what: str, timeout: float = 20.0, poll: float = 0.05) -> None:
    """Poll `predicate` on the event loop until it holds; TimeoutError naming `what` otherwise."""
    for _ in range(int(timeout / poll)):
        if predicate():
            return
        await asyncio.sleep(poll)
    raise TimeoutError(what)
