"""Autoscale against the real apiserver.

A pending deadline job is sized from the profile's prior before it binds (through
`pods/{name}/resize` on an unscheduled pod) and binds with the new requests, without a stale-bind
refusal. Its measured speed goes into the `pysched.io/State` condition through `pods/status`;
a second scheduler, started after the first one stopped (a new leader), takes the same speed
model back from the pod it lists.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

import pytest

from pysched.api.annotations import format_progress
from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import PodInfo
from pysched.backend.live.client import connect
from pysched.backend.live.cluster import LiveCluster, LiveOptions
from pysched.deadline.condition import parse_state
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.framework.status import Status
from pysched.plugins import default_registry
from pysched.plugins.autoscale import Autoscale
from pysched.scheduler.scheduler import Scheduler
from pysched.testing import KubeAPI, LocalControlPlane, wait_for
from pysched.testing.helpers import eventually, fake_node, make_pod
from pysched.testing.kube import JSON

pytestmark = pytest.mark.integration


def profile(name: str) -> dict[str, Any]:
    return {
        "profiles": [
            {
                "schedulerName": name,
                "plugins": {
                    "queueSort": [{"name": "DeadlineLaxity"}],
                    "preEnqueue": [{"name": "DeadlineLaxity"}],
                    "filter": [{"name": "NodeAffinity"}, {"name": "NodeResourcesFit"}],
                    "preBind": [{"name": "Autoscale"}],
                    "bind": [{"name": "DefaultBinder"}],
                    "postBind": [{"name": "Autoscale"}],
                    "reconcile": [{"name": "Autoscale"}],
                },
                "pluginConfig": [
                    # Every job looked at every reconcile: each report below is measured.
                    {
                        "name": "Autoscale",
                        "args": {"intervalSeconds": 60, "priorStepSeconds": 0.2, "reviewMaxSeconds": 0},
                    },
                ],
            }
        ]
    }


class Replica:
    """One scheduler process's worth: client, live backend, scheduler loop."""

    def __init__(self, control_plane: LocalControlPlane, name: str, clock: VirtualClock) -> None:
        self.control_plane, self.name, self.clock = control_plane, name, clock
        self.stop = asyncio.Event()

    async def start(self) -> None:
        registry = default_registry()
        self.client = await connect(str(self.control_plane.kubeconfig_path), qps=100, burst=100)
        self.backend = LiveCluster(self.client, LiveOptions(scheduler_names=frozenset({self.name})))
        self.scheduler = Scheduler(
            parse_config(profile(self.name), "test", registry), self.backend, self.clock, registry
        )
        await self.scheduler.start()
        self.loop = asyncio.create_task(self.scheduler.run(self.stop, idle_poll=0.05))
        plugin = self.scheduler.frameworks[self.name].reconcile[0]
        assert isinstance(plugin, Autoscale)
        self.autoscale = plugin

    async def close(self) -> None:
        self.stop.set()
        await self.loop
        await self.scheduler.stop()
        await self.backend.stop()
        await self.client.close()


async def test_prior_sizing_before_bind_and_the_model_survives_a_new_leader(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str
) -> None:
    name = f"autoscale-{namespace}"
    node = await asyncio.to_thread(fake_node, kube, f"{namespace}-n0")
    key = PodKey(f"{namespace}/job")
    # 10,000 steps of 0.2 s on one CPU (the prior): 40 minutes are not enough on 1 CPU at the band's
    # edge, 2 CPUs are; cpu-min 2 keeps it there once its real (much faster) speed is known.
    notes = {
        "pysched.io/deadline": "40m",
        "pysched.io/total-steps": "10000",
        "pysched.io/cpu-min": "2",
        "pysched.io/cpu-max": "2",
    }
    pod = make_pod("job", cpu="1", memory="64Mi", cpu_limit="1", memory_limit="64Mi", scheduler=name, annotations=notes)
    pod["spec"]["affinity"] = {  # the control plane is shared: other tests' nodes exist too
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
            }
        }
    }
    # The job's time is virtual: the test advances it as the training process reports.
    clock = VirtualClock(time.time())
    first = Replica(control_plane, name, clock)
    second = Replica(control_plane, name, clock)
    try:
        await first.start()
        bound_requests: list[int] = []  # the CPUs of the pod each bind was asked for
        bind = first.backend.bind

        async def recording_bind(pod: PodInfo, node: NodeName) -> Status:
            bound_requests.append(pod.requests["cpu"])
            return await bind(pod, node)

        first.backend.bind = recording_bind  # type: ignore[method-assign]
        await asyncio.to_thread(kube.create_pod, namespace, pod)
        bound = await pod_until(kube, namespace, lambda p: bool(p["spec"].get("nodeName")), "pod bound")
        resources = bound["spec"]["containers"][0]["resources"]
        assert resources["requests"]["cpu"] == resources["limits"]["cpu"] == "2"  # resized before the bind
        assert bound["status"]["qosClass"] == "Guaranteed"
        # The resize's answer reached the scheduler at once (read your writes), so the re-read
        # before the bind saw 2 CPUs: one bind, of what the pod asks for now, none refused as stale.
        assert bound_requests == [2000] and first.backend.binds["stale"] == 0
        nodes = first.scheduler.cache.nodes
        row, column = nodes.row[NodeName(node)], nodes.column["cpu"]
        await eventually(lambda: int(nodes.requested[row, column]) == 2000, "cache counts 2 CPUs")

        # The training process reports 400 steps a minute, twice; each report meets a reconcile.
        for steps in (400, 800):
            stamp = format_progress(steps, clock.now() + 60)
            path = kube.pod_path(namespace, "job")
            await asyncio.to_thread(kube.patch, path, {"metadata": {"annotations": {"pysched.io/progress": stamp}}})
            await eventually(functools.partial(progress_seen_is, first, key, stamp), "progress delivered")
            clock.advance(60)  # then the reconcile it meets is due: wait until it has run
            await eventually(functools.partial(reconciled_by, first.scheduler, clock.now()), "reconciled")
        await eventually(lambda: intervals(first, key) == 2, "both reports measured")
        model = first.autoscale.predictor.get(key)
        assert model is not None
        measured = model.count_stats()
        assert [s.cpus for s in measured] == [2.0]

        def speed_saved(pod: JSON) -> bool:
            state = parse_state(_state_message(pod))
            return state is not None and [s.cpus for s in state.counts] == [2.0]

        saved = await pod_until(kube, namespace, speed_saved, "the speed in the State condition")
        await first.close()

        await second.start()  # a new leader: it knows the pod only from the apiserver
        clock.advance(60)
        await eventually(functools.partial(reconciled_by, second.scheduler, clock.now()), "reconciled")
        await eventually(lambda: second.autoscale.predictor.get(key) is not None, "the new leader reconciled")
        restored = second.autoscale.predictor.get(key)
        assert restored is not None
        again = restored.count_stats()
        assert [s.cpus for s in again] == [s.cpus for s in measured] == [2.0]
        assert again[0].step_seconds == pytest.approx(measured[0].step_seconds, rel=1e-4), _state_message(saved)
    finally:
        for replica in (first, second):
            if hasattr(replica, "loop") and not replica.loop.done():
                await replica.close()
        await asyncio.to_thread(kube.force_delete_pod, namespace, "job")
        await asyncio.to_thread(kube.delete, f"/api/v1/nodes/{node}")


def reconciled_by(scheduler: Scheduler, when: float) -> bool:
    """The reconcile due at `when` has started (it sets the next due time first)."""
    due = scheduler.next_reconcile()
    return due is not None and due > when


def intervals(replica: Replica, key: PodKey) -> int:
    model = replica.autoscale.predictor.get(key)
    return 0 if model is None else len(model.intervals)


def progress_seen_is(replica: Replica, key: PodKey, value: str) -> bool:
    pod = replica.backend.pods.get(key)
    return pod is not None and pod.annotations.get("pysched.io/progress") == value


async def pod_until(kube: KubeAPI, namespace: str, predicate: Callable[[JSON], bool], what: str) -> JSON:
    found: JSON = await asyncio.to_thread(wait_for, lambda: kube.get_pod(namespace, "job"), predicate, what=what)
    return found


def _state_message(pod: JSON) -> str:
    for cond in pod.get("status", {}).get("conditions") or ():
        if cond.get("type") == "pysched.io/State":
            return str(cond.get("message", ""))
    return ""
