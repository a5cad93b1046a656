"""LearnedQueueSort in the scheduler: the network's pick decides the bind order, within the head's
priority and never splitting a gang; a bad weights file or window is refused when the profile loads."""

import asyncio
import copy
from pathlib import Path

import numpy as np
import pytest

from pysched.api.builders import node_dict, pod_dict
from pysched.api.objects import PodInfo
from pysched.backend.simulated import SimulatedCluster
from pysched.deadline.features import FEATURES, WIDTH
from pysched.deadline.scorer import dump_policy
from pysched.framework.clock import VirtualClock
from pysched.framework.config import ConfigError, parse_config
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_profiles
from pysched.plugins.learned_queue_sort import NAME, LearnedQueueSort
from pysched.scheduler.scheduler import Scheduler

T0 = 1_767_225_600.0


def _policy(
    tmp_path: Path, feature: str, sign: float, window: int = 8, trained_on: dict[str, tuple[float, float]] | None = None
) -> str:
    """A network whose score is `sign` times one feature (monotone through tanh)."""
    w1 = np.zeros((1, WIDTH))
    w1[0, FEATURES.index(feature)] = sign * 0.1
    path = tmp_path / f"{feature}{sign:+g}{'' if trained_on is None else sorted(trained_on.items())}.json"
    layers = [(w1, np.zeros(1)), (np.ones((1, 1)), np.zeros(1))]
    path.write_text(dump_policy(layers, "tanh", window, {}, trained_on=trained_on))
    return str(path)


def _profile(weights: str, window: int = 0, **more: object) -> dict[str, object]:
    return {
        "profiles": [
            {
                "schedulerName": "l",
                "plugins": {
                    "queueSort": [{"name": NAME}],
                    "filter": [{"name": "NodeResourcesFit"}],
                    "bind": [{"name": "DefaultBinder"}],
                },
                "pluginConfig": [{"name": NAME, "args": {"weights": weights, "window": window, **more}}],
            }
        ]
    }


def _bind_order(weights: str, pods: list[dict[str, object]], cpu: str = "2", gpus: int = 0) -> list[str]:
    """Pods created at once onto one node that holds one at a time; the order they ran in."""

    async def run() -> list[str]:
        clock = VirtualClock(T0)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        scheduler = Scheduler(parse_config(_profile(weights), "t", registry), cluster, clock, registry)
        assert isinstance(scheduler.frameworks["l"].queue_sort, LearnedQueueSort)
        cluster.add_node(
            node_dict("n", cpu=cpu, memory="8Gi", extended={"nvidia.com/gpu": str(gpus)} if gpus else None)
        )
        await scheduler.start()
        for raw in pods:
            cluster.create_pod(raw)
        order: list[str] = []
        for _ in range(len(pods)):
            await scheduler.run_until_idle()
            running = [k for k, p in cluster.pods.items() if p.node_name is not None and k.split("/")[1] not in order]
            order += [k.split("/")[1] for k in running]
            for key in running:
                cluster.finish_pod(key)
            clock.advance_to(clock.now() + 60)
        await scheduler.stop()
        return order

    return asyncio.run(run())


def _pod(name: str, deadline: str | None, priority: int = 0, created: float = T0, gpus: int = 0) -> dict[str, object]:
    notes = {} if deadline is None else {"pysched.io/deadline": deadline}
    extended = {"nvidia.com/gpu": str(gpus)} if gpus else None
    return pod_dict(
        name, cpu="2", created=created, annotations=notes, scheduler_name="l", priority=priority, extended=extended
    )


def test_the_network_decides_the_order(tmp_path: Path) -> None:
    pods = [_pod("late", "3h", created=T0 - 3), _pod("soon", "1h", created=T0 - 2), _pod("mid", "2h", created=T0 - 1)]
    assert _bind_order(_policy(tmp_path, "to_deadline", -1.0), pods) == ["soon", "mid", "late"]
    assert _bind_order(_policy(tmp_path, "to_deadline", +1.0), pods) == ["late", "mid", "soon"]


def test_a_pod_unlike_any_trained_on_keeps_its_place_and_the_network_orders_the_others(tmp_path: Path) -> None:
    latest_first = _policy(tmp_path, "to_deadline", +1.0, trained_on={"gpus": (0.0, 0.0)})  # CPU jobs only
    pods = [
        _pod("a", "2h", created=T0 - 4),
        _pod("b", "3h", created=T0 - 3),
        _pod("gpu", "1h", created=T0 - 2, gpus=1),
        _pod("c", "90m", created=T0 - 1),
    ]
    # The network picks b, then a; the GPU pod, never scored, is then the first in creation order.
    assert _bind_order(latest_first, pods, gpus=1) == ["b", "a", "gpu", "c"]
    trained_on_gpus = _policy(tmp_path, "to_deadline", +1.0, trained_on={"gpus": (0.0, 1.0)})
    assert _bind_order(trained_on_gpus, pods, gpus=1) == ["b", "a", "c", "gpu"]
    assert _bind_order(_policy(tmp_path, "to_deadline", +1.0), pods, gpus=1) == ["b", "a", "c", "gpu"]  # no ranges


def test_a_lower_priority_is_never_picked_before_the_head_priority(tmp_path: Path) -> None:
    pods = [_pod("vip", "3h", priority=5, created=T0 - 2), _pod("soon", "1h", created=T0 - 3)]
    assert _bind_order(_policy(tmp_path, "to_deadline", -1.0), pods) == ["vip", "soon"]


@pytest.mark.parametrize(
    ("weights", "window", "problem"),
    [
        ("absent.json", 0, "absent.json: cannot read"),
        ("policy", 64, "64 is more than the 8 pods its weights file supports"),
        ("policy", -1, "window"),
    ],
)
def test_a_bad_weights_file_or_window_is_refused_when_the_profile_loads(
    tmp_path: Path, weights: str, window: int, problem: str
) -> None:
    path = _policy(tmp_path, "laxity", -1.0) if weights == "policy" else str(tmp_path / weights)
    with pytest.raises(ConfigError, match=problem):
        parse_config(_profile(path, window), "t", default_registry())


def test_the_shipped_profile_runs_a_scenario() -> None:
    from pysched.plugins.builtin import builtin_config
    from pysched.sim.runner import simulate
    from pysched.sim.scenario import builtin_scenario

    registry = default_registry()
    config = builtin_config(registry)
    result = simulate(builtin_scenario(3, "seed-insufficient"), config, ["learned"], registry, seed=3)["learned"]
    assert result.unfinished == 0 and result.deadline_met > 0


def test_the_cluster_view_follows_binds_finishes_and_node_changes(tmp_path: Path) -> None:
    """The free shares and the most room on one node, kept from the node table's change log, equal
    a full recount after every kind of change."""
    import random

    from pysched.api.ids import NodeName

    def recount(plugin: LearnedQueueSort) -> tuple[float, float, int, int]:
        nodes = plugin.handle.nodes
        live = nodes.present[: nodes.size]
        out: list[float] = []
        rooms: list[int] = []
        for resource in ("cpu", "nvidia.com/gpu"):
            column = nodes.column.get(resource)
            if column is None or not live.any():
                out.append(0.0)
                rooms.append(0)
                continue
            alloc = nodes.allocatable[: nodes.size, column][live]
            free = alloc - nodes.requested[: nodes.size, column][live]
            out.append(0.0 if alloc.sum() <= 0 else max(0.0, free.sum() / alloc.sum()))
            rooms.append(int(free.max()))
        return out[0], out[1], rooms[0], rooms[1]

    async def run() -> None:
        rng = random.Random(3)
        clock = VirtualClock(T0)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        scheduler = Scheduler(
            parse_config(_profile(_policy(tmp_path, "laxity", -1.0)), "t", registry), cluster, clock, registry
        )
        plugin = scheduler.frameworks["l"].queue_sort
        assert isinstance(plugin, LearnedQueueSort)
        for i in range(6):
            cluster.add_node(node_dict(f"n{i}", cpu=str(4 + i), memory="64Gi", extended={"nvidia.com/gpu": str(i % 3)}))
        await scheduler.start()
        made = 0
        for step in range(60):
            action = rng.random()
            if action < 0.5:
                cluster.create_pod(pod_dict(f"p{made}", cpu=rng.choice(["1", "2", "500m"]), scheduler_name="l"))
                made += 1
                await scheduler.run_until_idle()
            elif action < 0.8:
                bound = [k for k, p in cluster.pods.items() if p.node_name is not None and p.phase == "Running"]
                if bound:
                    cluster.finish_pod(rng.choice(bound))
            elif action < 0.9:
                name = NodeName(f"n{rng.randrange(6)}")
                if name in cluster.nodes:
                    cluster.delete_node(name)
            else:
                name = NodeName(f"n{rng.randrange(6)}")
                if name not in cluster.nodes:
                    cluster.add_node(node_dict(name, cpu="16", memory="64Gi"))
            view = plugin._room
            view.refresh(plugin.handle.nodes)
            free_cpu, free_gpu = view.shares.free_cpu, view.shares.free_gpu
            cpu_room, gpu_room = int(view.most[0]), int(view.most[1])
            expected = recount(plugin)
            assert (round(free_cpu, 9), round(free_gpu, 9), cpu_room, gpu_room) == (
                round(expected[0], 9),
                round(expected[1], 9),
                expected[2],
                expected[3],
            ), step
        await scheduler.stop()

    asyncio.run(run())


def test_a_deadline_from_a_namespace_that_may_not_use_one_does_not_count(tmp_path: Path) -> None:
    """Ordered by deadline, the window would let anybody jump the queue by writing one: in a
    namespace the selector does not match, a deadline pod is best-effort, behind every real one."""

    async def run() -> list[str]:
        clock = VirtualClock(T0)
        cluster = SimulatedCluster(clock)
        cluster.set_namespace("ml", {"pysched.io/deadlines": "allowed"})
        cluster.set_namespace("web", {})
        registry = default_registry()
        profile = _profile(
            _policy(tmp_path, "to_deadline", -1.0),
            window=1,  # the queue's own order alone
            windowOrder="deadline",
            deadlineNamespaces={"matchLabels": {"pysched.io/deadlines": "allowed"}},
        )
        scheduler = Scheduler(parse_config(profile, "t", registry), cluster, clock, registry)
        plugin = scheduler.frameworks["l"].queue_sort
        assert isinstance(plugin, LearnedQueueSort)
        cluster.add_node(node_dict("n", cpu="2", memory="8Gi"))
        await scheduler.start()
        for name, namespace, deadline in (("cheat", "web", "10m"), ("real", "ml", "2h"), ("later", "ml", "3h")):
            notes = {"pysched.io/deadline": deadline}
            cluster.create_pod(
                pod_dict(name, namespace=namespace, cpu="2", created=T0, annotations=notes, scheduler_name="l")
            )
        queued = [q for q in (scheduler.queue.get(k) for k in cluster.pods) if q is not None]
        rows, _, _ = plugin.features(queued)
        best_effort = FEATURES.index("best_effort")
        assert {q.pod.name: float(r[best_effort]) for q, r in zip(queued, rows, strict=True)} == {
            "cheat": 1.0,
            "real": 0.0,
            "later": 0.0,
        }
        # Namespaces' labels change while pods wait: the rows follow (each pod is the same object).
        cluster.set_namespace("web", {"pysched.io/deadlines": "allowed"})
        cluster.set_namespace("ml", {})
        rows, _, _ = plugin.features(queued)
        assert [float(r[best_effort]) for r in rows] == [0.0 if q.pod.name == "cheat" else 1.0 for q in queued]
        cluster.set_namespace("web", {})
        cluster.set_namespace("ml", {"pysched.io/deadlines": "allowed"})
        order: list[str] = []
        for _ in range(3):
            await scheduler.run_until_idle()
            for key, pod in cluster.pods.items():
                if pod.node_name is not None and key.split("/")[1] not in order:
                    order.append(key.split("/")[1])
                    cluster.finish_pod(key)
            clock.advance_to(clock.now() + 60)
        await scheduler.stop()
        return order

    assert asyncio.run(run()) == ["real", "later", "cheat"]


def test_a_window_widened_after_the_start_gets_room_for_its_rows(tmp_path: Path) -> None:
    async def run() -> LearnedQueueSort:
        clock = VirtualClock(T0)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        profile = _profile(_policy(tmp_path, "to_deadline", -1.0), window=2)
        scheduler = Scheduler(parse_config(profile, "t", registry), cluster, clock, registry)
        plugin = scheduler.frameworks["l"].queue_sort
        assert isinstance(plugin, LearnedQueueSort)
        plugin.window = 8  # as a training environment sets it, after the buffers were made for 2
        cluster.add_node(node_dict("n", cpu="16", memory="8Gi"))
        await scheduler.start()
        for i in range(8):
            cluster.create_pod(_pod(f"p{i}", f"{8 - i}h", created=T0 + i))
        await scheduler.run_until_idle()
        await scheduler.stop()
        assert all(p.node_name == "n" for p in cluster.pods.values())
        return plugin

    assert asyncio.run(run())._buffers.allowed.shape[0] >= 8


def test_a_pod_refused_after_its_pick_keeps_its_row_until_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each version of a pod is read once, though it is picked, refused and offered again; the
    rows of pods that ended are given back."""
    reads: list[tuple[str, int]] = []
    read = LearnedQueueSort._read

    def counted(self: LearnedQueueSort, pod: PodInfo) -> list[float]:
        reads.append((pod.key, id(pod)))
        return read(self, pod)

    monkeypatch.setattr(LearnedQueueSort, "_read", counted)

    async def run() -> None:
        clock = VirtualClock(T0)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        config = parse_config(_profile(_policy(tmp_path, "laxity", -1.0)), "t", registry)
        scheduler = Scheduler(config, cluster, clock, registry)
        plugin = scheduler.frameworks["l"].queue_sort
        assert isinstance(plugin, LearnedQueueSort)
        cluster.add_node(node_dict("n", cpu="2", memory="8Gi"))
        await scheduler.start()
        for i in range(4):
            cluster.create_pod(_pod(f"p{i}", "2026-01-01T02:00:00Z", created=T0 + i))
        for _ in range(5):  # one at a time; then the last one's end
            await scheduler.run_until_idle()
            for key in [k for k, p in cluster.pods.items() if p.node_name is not None and not p.terminated]:
                cluster.finish_pod(key)
            clock.advance_to(clock.now() + 60)
        assert all(p.phase == "Succeeded" for p in cluster.pods.values())
        assert not plugin._fixed.slot and not plugin._deadlines  # every row and deadline given back
        await scheduler.stop()

    asyncio.run(run())
    assert len(reads) == len(set(reads)) and len(reads) >= 4


def test_it_forgets_the_pods_of_another_profile_it_ordered_when_they_go() -> None:
    """Profiles run together share the first one's queue order; what it keeps for the other
    profile's pods goes when they end or are deleted, not only its own profile's."""

    async def run() -> LearnedQueueSort:
        shipped = {p["schedulerName"]: p for p in builtin_profiles()}["learned"]
        other = copy.deepcopy(shipped)
        other["schedulerName"] = "learned-b"
        registry = default_registry()
        clock = VirtualClock(T0)
        cluster = SimulatedCluster(clock)
        cluster.add_node(node_dict("n", cpu="4", memory="8Gi"))
        config = parse_config({"profiles": [shipped, other]}, "t", registry)
        scheduler = Scheduler(config, cluster, clock, registry)
        first = scheduler.frameworks["learned"].queue_sort
        assert isinstance(first, LearnedQueueSort)
        await scheduler.start()
        for i in range(6):
            notes = {"pysched.io/deadline": "1h", "pysched.io/total-steps": "1000"}
            cluster.create_pod(pod_dict(f"p{i}", cpu="2", created=T0, annotations=notes, scheduler_name="learned-b"))
        await scheduler.run_until_idle()
        assert first._deadlines  # it ordered them
        while cluster.pods:
            for key in [k for k, p in cluster.pods.items() if p.node_name is not None]:
                cluster.finish_pod(key)
                cluster.delete_pod(key)
            clock.advance_to(clock.now() + 60)
            await scheduler.run_until_idle()
        await scheduler.stop()
        return first

    first = asyncio.run(run())
    assert not first._deadlines and not first._fixed.slot
