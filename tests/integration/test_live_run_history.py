"""DeadlineLaxity's run history against the real apiserver: a pod that ends leaves the informer's
field selector, so the watch reports it deleted first and its end only after it is read back; the
run still counts, and a rerun of its kind whose deadline is nearer than that run took is demoted
with a `DeadlineInfeasible` event. The scheduler's clock is virtual: the run takes an hour of it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from pysched.api.objects import pod_from_dict
from pysched.api.times import format_rfc3339
from pysched.backend.live.client import connect
from pysched.backend.live.cluster import LiveCluster, LiveOptions
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.plugins import default_registry
from pysched.plugins.deadline_laxity import DeadlineLaxity
from pysched.scheduler.scheduler import Scheduler
from pysched.testing import KubeAPI, LocalControlPlane
from pysched.testing.helpers import end_pod, eventually, fake_node, make_pod

pytestmark = pytest.mark.integration

STEPS = "10000"


def profile(name: str) -> dict[str, Any]:
    plugins = {
        "queueSort": [{"name": "DeadlineLaxity"}],
        "preEnqueue": [{"name": "DeadlineLaxity"}],
        "filter": [{"name": "NodeAffinity"}, {"name": "NodeResourcesFit"}],
        "bind": [{"name": "DefaultBinder"}],
        "postBind": [{"name": "DeadlineLaxity"}],
    }
    return {"profiles": [{"schedulerName": name, "plugins": plugins}]}


async def test_a_live_run_is_timed_and_predicts_its_rerun(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str
) -> None:
    name = f"history-{namespace}"
    node = await asyncio.to_thread(fake_node, kube, f"{namespace}-n0")
    pinned = {"nodeSelector": {"kubernetes.io/hostname": node}}  # the control plane is shared
    registry = default_registry()
    clock = VirtualClock(time.time())
    client = await connect(str(control_plane.kubeconfig_path), qps=100, burst=100)
    backend = LiveCluster(client, LiveOptions(scheduler_names=frozenset({name})))
    scheduler = Scheduler(parse_config(profile(name), "test", registry), backend, clock, registry)
    stop = asyncio.Event()
    loop: asyncio.Task[None] | None = None

    def pod(pod_name: str, **notes: str) -> dict[str, Any]:
        raw = make_pod(pod_name, scheduler=name, annotations={"pysched.io/total-steps": STEPS, **notes})
        raw["spec"].update(pinned)
        return raw

    try:
        await scheduler.start()
        plugin = scheduler.frameworks[name].queue_sort
        assert isinstance(plugin, DeadlineLaxity)
        loop = asyncio.create_task(scheduler.run(stop, idle_poll=0.05))
        first = pod("first")
        await asyncio.to_thread(kube.create_pod, namespace, first)
        await eventually(lambda: bool(kube.get_pod(namespace, "first")["spec"].get("nodeName")), "first bound")
        rerun = pod_from_dict(pod("rerun"))
        assert plugin.remaining(rerun, 100) == 0.0  # nothing known yet, no prior
        clock.advance(3600)
        await asyncio.to_thread(end_pod, kube, namespace, "first", time.time())
        await eventually(lambda: plugin.remaining(rerun, 100) > 0, "the run timed")
        assert plugin.remaining(rerun, 100) == pytest.approx(3600)  # the same size: the same hour

        # Due in 30 minutes of the scheduler's clock: the hour its kind takes cannot make it.
        due = pod("rerun", **{"pysched.io/deadline": format_rfc3339(clock.now() + 1800)})
        await asyncio.to_thread(kube.create_pod, namespace, due)

        def demoted() -> list[str]:
            events = kube.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
            return [e["note"] for e in events if e["reason"] == "DeadlineInfeasible"]

        await eventually(lambda: bool(demoted()), "the rerun demoted")
        (note,) = demoted()
        assert "it takes 1h at its most CPUs" in note, note
    finally:
        stop.set()
        if loop is not None:
            await loop
        await scheduler.stop()
        await backend.stop()
        await client.close()
        for pod_name in ("first", "rerun"):
            await asyncio.to_thread(kube.force_delete_pod, namespace, pod_name)
        await asyncio.to_thread(kube.delete, f"/api/v1/nodes/{node}")
