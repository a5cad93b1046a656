"""The kubelet emulator runs training jobs on the simulator's workload model against the real API.

Emulated time runs 100x wall time: a 1000-step lstm job of 0.6 s steps (600 emulated seconds) takes
6 s; progress is written every 60 emulated seconds (0.6 s). Expected times come from the simulator
(`run_policy`) or its segment arithmetic for the same truth, seed and noise.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from pysched.api.annotations import PROGRESS
from pysched.api.times import parse_rfc3339
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.sim.runner import run_policy
from pysched.sim.scenario import Scenario, cpu_nodes
from pysched.testing import KubeAPI, wait_for
from pysched.testing.emulator import KubeletEmulator
from pysched.testing.helpers import container_status, fake_node, make_pod
from pysched.testing.kube import JSON
from pysched.workload.accounting import Accounting, resize_run
from pysched.workload.job import Job
from pysched.workload.pod import emulate_annotations
from pysched.workload.segment import RESTART_SECONDS, Run, noise_rng, start_run
from pysched.workload.speed import Amdahl

SCALE = 100.0  # emulated seconds per wall second
INTERVAL = 60.0  # emulated seconds between progress writes
SEED = 7
NOISE = 0.05
# Polling every 50 ms plus watch and write latency: allowed error on a finish time, in wall seconds.
TOLERANCE_S = 0.75

pytestmark = [pytest.mark.integration, pytest.mark.emulator(time_scale=SCALE, progress_interval=INTERVAL)]


def lstm(restart: bool = False) -> Job:
    """1000 steps of t(c) = 0.012 + 0.588 / min(c, 16) s: 600 s on 1 CPU, 0.159 s a step on 4."""
    return Job("train", 0.0, 1000, 1000, "64Mi", Amdahl.from_t1(0.6, 0.02, 16), model="lstm", restart_on_resize=restart)


def simulated_run(job: Job, resize_at: float | None = None, cpu: float = 4.0) -> Run:
    """The simulator's segments for the job, started at 0 on 1 CPU, optionally resized."""
    rng = noise_rng(SEED, job)
    run = start_run(job, 1.0, 0.0, rng, NOISE)
    if resize_at is not None:
        resize_run(run, cpu, resize_at, Accounting(), rng, NOISE)
    return run


def progress(pod: JSON) -> tuple[int, float] | None:
    raw = (pod["metadata"].get("annotations") or {}).get(PROGRESS)
    if raw is None:
        return None
    steps, _, when = raw.partition("@")
    stamp = parse_rfc3339(when)
    assert stamp is not None, raw
    return int(steps), stamp


class Watcher:
    """Polls one pod, keeping every progress value seen."""

    def __init__(self, kube: KubeAPI, namespace: str, name: str) -> None:
        self.kube, self.namespace, self.name = kube, namespace, name
        self.seen: list[tuple[int, float]] = []

    def fetch(self) -> JSON:
        pod = self.kube.get_pod(self.namespace, self.name)
        value = progress(pod)
        if value is not None and (not self.seen or self.seen[-1] != value):
            self.seen.append(value)
        return pod

    def until(self, predicate: object, what: str, timeout: float = 15.0) -> JSON:
        return wait_for(self.fetch, predicate, timeout=timeout, interval=0.05, what=what)  # type: ignore[arg-type]


def start_job(kube: KubeAPI, namespace: str, job: Job) -> tuple[Watcher, float]:
    """Create and bind the job's pod; returns the watcher and the wall time it was seen Running."""
    node = fake_node(kube, f"{namespace}-node")
    pod = make_pod(job.name, cpu="1", cpu_limit=None, annotations=emulate_annotations(job, SEED, NOISE))
    if job.restart_on_resize:
        pod["spec"]["containers"][0]["resizePolicy"][0]["restartPolicy"] = "RestartContainer"
    kube.create_pod(namespace, pod)
    kube.bind_pod(namespace, job.name, node)
    watcher = Watcher(kube, namespace, job.name)
    watcher.until(lambda p: p.get("status", {}).get("phase") == "Running", "job Running", timeout=10)
    return watcher, time.monotonic()


def succeeded(pod: JSON) -> bool:
    return bool(pod.get("status", {}).get("phase") == "Succeeded")


def test_job_writes_progress_and_finishes_when_the_simulator_says(
    kube: KubeAPI, namespace: str, emulator: KubeletEmulator
) -> None:
    job = lstm()
    registry = default_registry()
    scenario = Scenario("one", cpu_nodes(1, "8", "8Gi"), (job,))
    result = asyncio.run(
        run_policy(
            scenario,
            builtin_config(registry),
            "default",
            registry,
            seed=SEED,
            progress_interval=INTERVAL,
            step_noise=NOISE,
        )
    )
    (simulated_jct,) = result.jct
    assert simulated_jct == pytest.approx(simulated_run(job).finish_time())

    watcher, started = start_job(kube, namespace, job)
    pod = watcher.until(succeeded, "job Succeeded by the workload model")
    elapsed = time.monotonic() - started
    assert elapsed == pytest.approx(simulated_jct / SCALE, abs=TOLERANCE_S)
    cs = container_status(pod)
    assert cs is not None and cs["state"]["terminated"]["exitCode"] == 0

    # Progress as the training helper writes it: every 60 emulated seconds, increasing, and the
    # steps are those the simulator's segment gives at each write.
    steps = [s for s, _ in watcher.seen]
    assert len(steps) >= 4, watcher.seen
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    run = simulated_run(job)
    expected = {run.steps_at(k * INTERVAL) for k in range(1, 11)}
    assert set(steps) <= expected, (steps, sorted(expected))
    stamps = [t for _, t in watcher.seen]
    assert all(b > a for a, b in itertools.pairwise(stamps))


def test_midway_resize_speeds_the_job_up(kube: KubeAPI, namespace: str, emulator: KubeletEmulator) -> None:
    job = lstm()
    watcher, started = start_job(kube, namespace, job)
    first = emulator.training(namespace, job.name)
    assert first is not None and first.cpu == 1.0

    watcher.until(lambda p: (progress(p) or (0, 0.0))[0] >= 250, "250 steps done")
    kube.resize_pod(namespace, job.name, {"main": {"requests": {"cpu": "4", "memory": "64Mi"}}})
    watcher.until(
        lambda p: ((container_status(p) or {}).get("resources") or {}).get("requests", {}).get("cpu") == "4",
        "resize actuated",
    )
    resized = time.monotonic()
    run = emulator.training(namespace, job.name)
    assert run is not None and run.cpu == 4.0 and run.version == 1

    # The emulator re-timed the job exactly as the simulator does at the same (emulated) moment.
    resize_at = run.seg_start - first.seg_start
    sim = simulated_run(job, resize_at)
    assert abs(run.seg_steps - sim.seg_steps) <= 1
    assert run.seg_steps >= 250
    assert run.step_s == pytest.approx(sim.step_s, rel=1e-3)
    assert sim.step_s < first.step_s / 3

    pod = watcher.until(succeeded, "resized job Succeeded")
    elapsed = time.monotonic() - started
    # The resize moment as this test saw it agrees with the emulator's within the polling error.
    assert (resized - started) * SCALE == pytest.approx(resize_at, abs=TOLERANCE_S * SCALE)
    assert elapsed == pytest.approx(sim.finish_time() / SCALE, abs=TOLERANCE_S)
    assert elapsed < simulated_run(job).finish_time() / SCALE - 1.5  # well before the unresized finish
    steps = [s for s, _ in watcher.seen]
    assert steps == sorted(steps), watcher.seen  # in place: progress kept
    assert (container_status(pod) or {}).get("restartCount", 0) == 0


def test_restart_resize_loses_progress(kube: KubeAPI, namespace: str, emulator: KubeletEmulator) -> None:
    job = lstm(restart=True)
    watcher, started = start_job(kube, namespace, job)
    first = emulator.training(namespace, job.name)
    assert first is not None and first.job.restart_on_resize

    # Late enough that the first write after the restart (60 s after steps resume: ~377 steps on
    # 4 CPUs) shows fewer steps than before it.
    watcher.until(lambda p: (progress(p) or (0, 0.0))[0] >= 450, "450 steps done")
    kube.resize_pod(namespace, job.name, {"main": {"requests": {"cpu": "4", "memory": "64Mi"}}})
    pod = watcher.until(lambda p: (container_status(p) or {}).get("restartCount") == 1, "container restarted")
    run = emulator.training(namespace, job.name)
    assert run is not None and run.cpu == 4.0 and run.seg_steps == 0

    resize_at = run.seg_start - RESTART_SECONDS - first.seg_start
    sim = simulated_run(job, resize_at)
    assert sim.seg_steps == 0 and run.step_s == pytest.approx(sim.step_s, rel=1e-3)

    before = max(s for s, _ in watcher.seen)
    pod = watcher.until(succeeded, "restarted job Succeeded")
    elapsed = time.monotonic() - started
    assert elapsed == pytest.approx(sim.finish_time() / SCALE, abs=TOLERANCE_S)
    steps = [s for s, _ in watcher.seen]
    restarted = steps[steps.index(before) + 1 :]
    assert restarted and restarted[0] < before, watcher.seen  # progress lost, counting again from 0
    assert restarted == sorted(restarted)
    assert (container_status(pod) or {}).get("restartCount") == 1
