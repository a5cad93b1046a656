"""Deadline verdicts against the real apiserver: the leader writes `DeadlineMet` / `DeadlineMissed`
on a pod that ended, a standby writes nothing and counts nothing, and a replica that takes over
counts the verdicts it finds and judges the job that ended while no replica led."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pysched.api.ids import PodKey
from pysched.api.times import format_rfc3339, parse_rfc3339
from pysched.backend.live.client import connect
from pysched.backend.live.cluster import LiveCluster, LiveOptions
from pysched.cmd.cli import main
from pysched.framework.clock import WallClock
from pysched.framework.config import parse_config
from pysched.plugins import default_registry
from pysched.plugins.autoscale import Autoscale
from pysched.scheduler.scheduler import Scheduler
from pysched.testing import KubeAPI, LocalControlPlane
from pysched.testing.helpers import condition, end_pod, eventually, fake_node, make_pod
from pysched.testing.kube import JSON

pytestmark = pytest.mark.integration


def profile(name: str, autoscale: dict[str, Any] | None = None) -> dict[str, Any]:
    plugins = {
        "queueSort": [{"name": "DeadlineLaxity"}],
        "filter": [{"name": "NodeAffinity"}, {"name": "NodeResourcesFit"}],
        "bind": [{"name": "DefaultBinder"}],
        "postBind": [{"name": "Autoscale"}],
        "reconcile": [{"name": "Autoscale"}],
    }
    config = [{"name": "Autoscale", "args": autoscale}] if autoscale else []
    return {"profiles": [{"schedulerName": name, "plugins": plugins, "pluginConfig": config}]}


class Replica:
    """A `pysched run` process's worth, built as a standby: it leads from `take_over` on."""

    def __init__(self, control_plane: LocalControlPlane, name: str, autoscale: dict[str, Any] | None = None) -> None:
        self.control_plane, self.name, self.autoscale_args = control_plane, name, autoscale
        self.stop = asyncio.Event()
        self.loop: asyncio.Task[None] | None = None

    async def start(self) -> None:
        registry = default_registry()
        self.client = await connect(str(self.control_plane.kubeconfig_path), qps=100, burst=100)
        self.backend = LiveCluster(self.client, LiveOptions(scheduler_names=frozenset({self.name})))
        config = parse_config(profile(self.name, self.autoscale_args), "test", registry)
        self.scheduler = Scheduler(config, self.backend, WallClock(), registry, standby=True)
        await self.scheduler.start()
        (plugin,) = self.scheduler.frameworks[self.name].reconcile
        assert isinstance(plugin, Autoscale)
        self.autoscale = plugin

    async def lead(self) -> None:
        """What `pysched run` does once it holds the Lease."""
        self.scheduler.take_over(await self.backend.ended_pods())
        self.loop = asyncio.create_task(self.scheduler.run(self.stop, idle_poll=0.05))

    def verdicts(self) -> dict[str, float]:
        (family,) = [f for f in self.autoscale.metric_families() if f.name == "pysched_deadlines"]
        return {key[0]: value for key, value in family.values.items()}

    async def close(self) -> None:
        self.stop.set()
        if self.loop is not None:
            await self.loop
        await self.scheduler.stop()
        await self.backend.stop()
        await self.client.close()


def _state(pod: JSON) -> dict[str, Any]:
    found = condition(pod, "pysched.io/State")
    return json.loads(found["message"]) if found else {}


async def test_verdicts_are_written_by_the_leader_and_rebuilt_by_the_next(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"verdicts-{namespace}"
    node = await asyncio.to_thread(fake_node, kube, f"{namespace}-n0")
    notes = {"pysched.io/deadline": "40m", "pysched.io/total-steps": "10000"}
    pinned = {"nodeSelector": {"kubernetes.io/hostname": node}}  # the control plane is shared
    first, second = Replica(control_plane, name), Replica(control_plane, name)
    try:
        await first.start()
        await first.lead()
        await second.start()  # a standby: its informers run, it judges nothing
        for pod in ("early", "late"):
            raw = make_pod(pod, cpu="100m", scheduler=name, annotations=notes)
            raw["spec"].update(pinned)
            await asyncio.to_thread(kube.create_pod, namespace, raw)

        def bound() -> bool:
            return all(kube.get_pod(namespace, pod)["spec"].get("nodeName") for pod in ("early", "late"))

        await eventually(bound, "both bound")

        # Ends as the kubelet says (whole seconds): 30 minutes after creation, 10 before the deadline.
        created = {pod: parse_rfc3339(kube.get_pod(namespace, pod)["metadata"]["creationTimestamp"]) or 0.0
                   for pod in ("early", "late")}  # fmt: skip
        ended_at = created["early"] + 1800
        await asyncio.to_thread(end_pod, kube, namespace, "early", ended_at)

        def judged() -> bool:
            return bool(_state(kube.get_pod(namespace, "early")).get("verdict"))

        await eventually(judged, "the leader's verdict on early")
        early = kube.get_pod(namespace, "early")
        verdict = condition(early, "pysched.io/Deadline")
        assert verdict is not None and (verdict["status"], verdict["reason"]) == ("True", "DeadlineMet")
        assert verdict["message"].startswith("met: finished 10m before the deadline ("), verdict["message"]
        state = _state(early)
        assert (state["verdict"], state["counted"], state["endedAt"]) == ("met", True, format_rfc3339(ended_at))
        assert first.verdicts() == {"met": 1, "missed": 0}
        await eventually(lambda: PodKey(f"{namespace}/early") not in second.backend.pods, "the standby saw it end")
        assert second.verdicts() == {"met": 0, "missed": 0}  # a standby counts nothing
        await first.close()  # the leader dies; "late" ends while nobody leads, two hours late

        await asyncio.to_thread(end_pod, kube, namespace, "late", created["late"] + 2400 + 4800)
        await eventually(lambda: PodKey(f"{namespace}/late") not in second.backend.pods, "the standby saw it end")
        assert not _state(kube.get_pod(namespace, "late")) and second.verdicts() == {"met": 0, "missed": 0}

        await second.lead()
        assert second.verdicts() == {"met": 1, "missed": 1}  # early's verdict found, late's given now
        await eventually(lambda: bool(_state(kube.get_pod(namespace, "late")).get("verdict")), "late judged")
        late = kube.get_pod(namespace, "late")
        missed = condition(late, "pysched.io/Deadline")
        assert missed is not None and (missed["status"], missed["reason"]) == ("False", "DeadlineMissed")
        assert missed["message"].startswith("missed: finished 1h 20m after the deadline"), missed["message"]
        notes_seen = [
            e["note"] for e in kube.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
            if e["reason"] == "DeadlineMissed"
        ]  # fmt: skip
        assert notes_seen == [missed["message"]]
        # What an operator reads, from the API alone.
        status = ["status", "--kubeconfig", str(control_plane.kubeconfig_path), "-n", namespace, "--scheduler", name]
        assert await asyncio.to_thread(main, [*status, "-o", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)["jobs"]
        assert [(r["job"], r["state"]) for r in rows] == [("late", "Missed"), ("early", "Met")]  # tightest first
        assert (rows[0]["slack"], rows[1]["slack"]) == (-4800, 600)
        assert await asyncio.to_thread(main, status) == 0
        table = capsys.readouterr().out
        assert "DeadlineMissed: missed: finished 1h 20m after the deadline" in table
        explain = ["explain", "late", "--kubeconfig", str(control_plane.kubeconfig_path), "-n", namespace]
        assert await asyncio.to_thread(main, explain) == 0
        history = capsys.readouterr().out.splitlines()
        events = history[history.index("Events:") + 1 :]
        assert [line.split()[3] for line in events] == ["Scheduled:", "DeadlineMissed:"], history  # oldest first
        assert "  DeadlineMissed (False): missed: finished 1h 20m after the deadline" in "\n".join(history)
    finally:
        for replica in (first, second):
            if hasattr(replica, "scheduler") and not replica.stop.is_set():
                await replica.close()
        for pod in ("early", "late"):
            await asyncio.to_thread(kube.force_delete_pod, namespace, pod)
        await asyncio.to_thread(kube.delete, f"/api/v1/nodes/{node}")


async def test_a_job_of_two_completions_one_at_a_time_is_judged_once_by_its_last_pod(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str
) -> None:
    """The Job controller makes its second pod once the first succeeded: the Job ends with the
    second, so its verdict is that pod's, given once (the first pod's end was judged as the Job's)."""
    name = f"waves-{namespace}"
    node = await asyncio.to_thread(fake_node, kube, f"{namespace}-w0")
    template = make_pod(
        "x", cpu="100m", scheduler=name, annotations={"pysched.io/deadline": "40m", "pysched.io/total-steps": "100"}
    )
    template["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    template["spec"]["restartPolicy"] = "Never"
    meta = {k: v for k, v in template["metadata"].items() if k != "name"}
    spec = {"completions": 2, "parallelism": 1, "template": {"metadata": meta, "spec": template["spec"]}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "waves"}, "spec": spec}
    replica = Replica(control_plane, name, {"intervalSeconds": 1})  # the Job's completion is read at a reconcile
    try:
        await replica.start()
        await replica.lead()
        await asyncio.to_thread(kube.post, f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
        ended: list[str] = []
        for wave in range(2):

            def bound_pods() -> list[str]:
                pods = kube.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector="job-name=waves")["items"]
                return [
                    p["metadata"]["name"]
                    for p in pods
                    if p["spec"].get("nodeName") and p["metadata"]["name"] not in ended
                ]

            await eventually(lambda: bool(bound_pods()), f"wave {wave} bound")
            (pod,) = bound_pods()
            created = parse_rfc3339(kube.get_pod(namespace, pod)["metadata"]["creationTimestamp"]) or 0.0
            # The first ends well within the deadline, the second 20 minutes after it.
            await asyncio.to_thread(end_pod, kube, namespace, pod, created + (600 if wave == 0 else 3600))
            ended.append(pod)

        def verdicts() -> list[tuple[str, str]]:
            items = kube.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
            return [
                (e["regarding"]["name"], e["reason"]) for e in items if e["reason"] in ("DeadlineMet", "DeadlineMissed")
            ]

        await eventually(lambda: bool(verdicts()), "the Job judged")
        # Judged as its first pod's end, the Job was told met before its second pod ran.
        assert verdicts() == [(ended[1], "DeadlineMissed")]
        assert replica.verdicts() == {"met": 0, "missed": 1}
    finally:
        if hasattr(replica, "scheduler") and not replica.stop.is_set():
            await replica.close()
        await asyncio.to_thread(
            kube.delete, f"/apis/batch/v1/namespaces/{namespace}/jobs/waves", {"propagationPolicy": "Background"}
        )
        await asyncio.to_thread(kube.delete, f"/api/v1/nodes/{node}")
