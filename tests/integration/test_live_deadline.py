"""A deadline met by autoscaling on the real apiserver (same behaviour on both
backends), end to end: `pysched`'s plugins on the live backend, the kubelet emulator running the
simulator's workload model, in-place resizes actuated by the emulator.

Two identical jobs, each alone on its own node: 1,000 steps of `t(c) = 0.012 + 0.588 / c` s,
600 s on their requested 1 CPU, with a deadline 500 s after creation. Time is scaled 50x: the
emulator runs 50 emulated seconds per wall second and writes progress every 60 emulated seconds
with millisecond stamps, so the jobs look 50x faster to a scheduler on wall time (12 s of work,
a 10 s deadline). Left at its request (`noscale`) the job misses; `pysched` measures it after its
first report, resizes it in place and it finishes in time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import pytest

from pysched.api.annotations import deadline_of
from pysched.api.objects import pod_from_dict
from pysched.backend.live.client import connect
from pysched.backend.live.cluster import LiveCluster, LiveOptions
from pysched.framework.clock import WallClock
from pysched.framework.config import parse_config
from pysched.plugins import default_registry
from pysched.plugins.autoscale import Autoscale
from pysched.scheduler.scheduler import Scheduler
from pysched.testing import KubeAPI, LocalControlPlane
from pysched.testing.emulator import KubeletEmulator
from pysched.testing.helpers import eventually, fake_node, make_pod
from pysched.testing.kube import JSON
from pysched.workload.job import Job
from pysched.workload.pod import emulate_annotations
from pysched.workload.speed import Amdahl

SCALE = 50.0  # emulated seconds per wall second
DEADLINE = "10s"  # wall seconds from creation: 500 emulated seconds

pytestmark = [pytest.mark.integration, pytest.mark.emulator(time_scale=SCALE, progress_interval=60.0)]


def profiles(pysched: str, noscale: str) -> dict[str, Any]:
    base = {
        "queueSort": [{"name": "DeadlineLaxity"}],
        "preEnqueue": [{"name": "DeadlineLaxity"}],
        "filter": [{"name": "NodeAffinity"}, {"name": "NodeResourcesFit"}],
        "bind": [{"name": "DefaultBinder"}],
    }
    scaled = {**base, "preBind": [{"name": "Autoscale"}], "postBind": [{"name": "Autoscale"}]}
    scaled["reconcile"] = [{"name": "Autoscale"}]
    # Wall-time settings for jobs that run 50x fast: reconcile 5x a second, 1 s cooldown.
    autoscale = {"name": "Autoscale", "args": {"intervalSeconds": 0.2, "cooldownSeconds": 1.0}}
    return {
        "profiles": [
            {"schedulerName": pysched, "plugins": scaled, "pluginConfig": [autoscale]},
            {"schedulerName": noscale, "plugins": base},
        ]
    }


def job_pod(scheduler: str, node: str) -> JSON:
    job = Job("train", 0.0, 1000, 1000, "64Mi", Amdahl.from_t1(0.6, 0.02, 16), model="lstm", restart_on_resize=False)
    notes = {**emulate_annotations(job, seed=3, noise=0.0), "pysched.io/deadline": DEADLINE}
    pod = make_pod(f"job-{scheduler}", cpu="1", cpu_limit=None, scheduler=scheduler, annotations=notes)
    pod["spec"]["affinity"] = {  # the control plane is shared: other tests' nodes exist too
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
            }
        }
    }
    return pod


async def finished_at(kube: KubeAPI, namespace: str, name: str, timeout: float = 30.0) -> tuple[float, JSON]:
    """Wall time at which the pod was first seen Succeeded (polled every 50 ms), and the pod."""
    end = time.time() + timeout
    while time.time() < end:
        pod = await asyncio.to_thread(kube.get_pod, namespace, name)
        if pod.get("status", {}).get("phase") == "Succeeded":
            return time.time(), pod
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{name} did not finish")


def family(plugin: Any, name: str) -> Mapping[tuple[str, ...], float]:
    """One of the plugin's metric families by name (their order is not part of the contract)."""
    values: Mapping[tuple[str, ...], float] = next(f.values for f in plugin.metric_families() if f.name == name)
    return values


async def test_autoscaling_meets_a_deadline_the_request_would_miss(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, emulator: KubeletEmulator
) -> None:
    pysched, noscale = f"pysched-{namespace}", f"noscale-{namespace}"
    nodes = [await asyncio.to_thread(fake_node, kube, f"{namespace}-{n}") for n in ("a", "b")]
    registry = default_registry()
    client = await connect(str(control_plane.kubeconfig_path), qps=100, burst=100)
    backend = LiveCluster(client, LiveOptions(scheduler_names=frozenset({pysched, noscale})))
    scheduler = Scheduler(parse_config(profiles(pysched, noscale), "test", registry), backend, WallClock(), registry)
    plugin = scheduler.frameworks[pysched].reconcile[0]
    assert isinstance(plugin, Autoscale)
    stop = asyncio.Event()
    try:
        await scheduler.start()
        loop = asyncio.create_task(scheduler.run(stop, idle_poll=0.05))
        for name, node in ((pysched, nodes[0]), (noscale, nodes[1])):
            await asyncio.to_thread(kube.create_pod, namespace, job_pod(name, node))
        (scaled_end, scaled), (plain_end, plain) = await asyncio.gather(
            finished_at(kube, namespace, f"job-{pysched}"), finished_at(kube, namespace, f"job-{noscale}")
        )
        scaled_deadline, plain_deadline = deadline_of(pod_from_dict(scaled)), deadline_of(pod_from_dict(plain))
        assert scaled_deadline is not None and plain_deadline is not None
        rescales = family(plugin, "pysched_autoscale_rescales")
        assert rescales.get(("up", "ok"), 0) >= 1, "pysched never scaled the job up"  # (and maybe down at the end)
        assert scaled_end <= scaled_deadline, f"pysched missed by {scaled_end - scaled_deadline:.2f}s"
        assert plain_end > plain_deadline  # the request alone misses: the scenario means something
        assert plain["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"
        # The plugin saw it end in time: pysched_deadlines_total{result="met"}.
        await eventually(lambda: family(plugin, "pysched_deadlines").get(("met",)) == 1.0, "deadline counted met")
        stop.set()
        await loop
    finally:
        stop.set()
        await scheduler.stop()
        await backend.stop()
        await client.close()
        for name in (pysched, noscale):
            await asyncio.to_thread(kube.force_delete_pod, namespace, f"job-{name}")
        for node in nodes:
            await asyncio.to_thread(kube.delete, f"/api/v1/nodes/{node}")
