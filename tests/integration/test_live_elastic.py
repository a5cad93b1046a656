"""Elastic Indexed Jobs against the real apiserver and Job controller: `LiveCluster.scale_job` sets
a training Job's worker count, the Job controller adds or removes the highest indexes, pysched binds
the new workers and the kubelet emulator's gang keeps every step across the change, pauses, and
trains on at the new set's rate; and what cannot be scaled is refused with the reason.

The elastic Job runs on a plane of its own whose Job controller leaves Indexed Jobs without the
Workload API gangs (`WorkloadWithJob` off): the apiserver forbids changing the parallelism of a Job
whose pods are in a gang-scheduled PodGroup, which the shared plane's Job controller gives every
gang-shaped Indexed Job (the refusal is tested there)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pysched.api.annotations import (
    DEADLINE,
    EXPECTED_DURATION,
    TOTAL_STEPS,
    WORKERS_MAX,
    WORKERS_MIN,
    progress_of,
)
from pysched.api.ids import JobKey
from pysched.api.jobs import COMPLETION_INDEX, JobRef, JobSource, job_key
from pysched.api.objects import pod_from_dict
from pysched.api.times import parse_rfc3339
from pysched.backend.live.client import connect
from pysched.backend.live.cluster import LiveCluster
from pysched.framework.status import Code, Status
from pysched.testing import KubeAPI, LocalControlPlane, wait_for
from pysched.testing.emulator import KubeletEmulator
from pysched.testing.kube import JSON
from pysched.testing.scheduler import (
    builtin_profile,
    list_pods,
    namespace_nodes,
    pod_for,
    start_scheduler,
    write_profile,
)
from pysched.workload.job import Job
from pysched.workload.pod import EMULATE_BATCH_SIZE, emulate_annotations
from pysched.workload.segment import CHECKPOINT_SECONDS, SCALE_PAUSE_CPU_S, Run
from pysched.workload.speed import Amdahl, Throughput

pytestmark = pytest.mark.integration

SCALE = 100.0  # emulated seconds per wall second
INTERVAL = 20.0  # emulated seconds between progress writes
T1 = 0.6  # a worker's step on its 1 CPU; W all-reduce workers do W e(W) / 0.6 global steps a second
TRAINING = Job(
    "ddp", 0.0, 10_000_000, 1000, "64Mi", Amdahl.from_t1(T1, 0.02, 16), model="lstm", restart_on_resize=False
)


class Quiet:
    """The listener of a backend used only to scale: it takes every notice and keeps none."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args: None


def scale(plane: LocalControlPlane, namespace: str, job: str, workers: int) -> Status:
    """`LiveCluster.scale_job` from a backend of its own (pysched's child process exposes none)."""

    async def run() -> Status:
        client = await connect(str(plane.kubeconfig_path), qps=100, burst=100)
        backend = LiveCluster(client)
        try:
            await backend.start(Quiet())
            ref = JobRef(job_key(namespace, JobSource.BATCH, job), JobSource.BATCH, namespace, job)
            return await backend.scale_job(ref, workers)
        finally:
            await backend.stop()
            await client.close()

    return asyncio.run(run())


def indexed_job(name: str, template: JSON, workers: int, **spec: Any) -> JSON:
    body = {"completionMode": "Indexed", "parallelism": workers, "completions": workers, "template": template}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {**body, **spec}}


def job_spec(kube: KubeAPI, namespace: str, name: str) -> tuple[int, int]:
    spec = kube.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")["spec"]
    return spec["parallelism"], spec["completions"]


def workers(kube: KubeAPI, namespace: str) -> dict[int, JSON]:
    """The Job's pods that are not going, by completion index."""
    pods = list_pods(kube, namespace)
    return {
        int(p["metadata"]["labels"][COMPLETION_INDEX]): p for p in pods if not p["metadata"].get("deletionTimestamp")
    }


class Progress:
    """Rank 0's reported steps, every value seen while polling: they must never go backwards."""

    def __init__(self, kube: KubeAPI, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.seen: list[int] = []

    def read(self) -> int:
        rank0 = workers(self.kube, self.namespace).get(0)
        found = progress_of(pod_from_dict(rank0)) if rank0 is not None else None
        if found is not None and (not self.seen or self.seen[-1] != found[0]):
            self.seen.append(found[0])
        return self.seen[-1] if self.seen else 0

    def reaches(self, steps: int, what: str) -> int:
        return wait_for(self.read, lambda got: got >= steps, timeout=60, interval=0.05, what=what)

    def never_went_back(self) -> bool:
        return all(a <= b for a, b in zip(self.seen, self.seen[1:], strict=False))


def training(emulator: KubeletEmulator, gang: JobKey, cpu: float, after: Run | None, what: str) -> Run:
    """The gang's segment once it trains on `cpu` CPUs in total (in a newer segment than `after`)."""
    found = wait_for(
        lambda: emulator.gang_training(gang),
        lambda r: r is not None and r.cpu == cpu and (after is None or r.version > after.version),
        timeout=30,
        what=what,
    )
    assert found is not None
    return found


@pytest.fixture(scope="module")
def elastic_plane(control_plane_bin_dir: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    workdir = tmp_path_factory.mktemp("elastic-plane")
    args = ["--feature-gates=WorkloadWithJob=false"]  # a later --feature-gates entry wins for its key
    with LocalControlPlane(workdir, bin_dir=control_plane_bin_dir, extra_controller_manager_args=args) as plane:
        yield plane


def test_an_elastic_indexed_job_scales_up_and_down_and_its_training_keeps_every_step(
    elastic_plane: LocalControlPlane, tmp_path: Path
) -> None:
    kube = elastic_plane.api()
    namespace = "elastic"
    kube.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    name = f"pysched-{namespace}"
    gang = job_key(namespace, JobSource.BATCH, "ddp")
    pod = pod_for("unused", name, namespace, "1")
    pod["spec"]["restartPolicy"] = "Never"
    template = {"metadata": {"annotations": emulate_annotations(TRAINING, seed=3, noise=0.0)}, "spec": pod["spec"]}
    scheduler = start_scheduler(
        elastic_plane, name, config=write_profile(tmp_path / "profiles.yaml", name), args=["--qps=1000", "--burst=1000"]
    )
    emulator = KubeletEmulator(kube, time_scale=SCALE, progress_interval=INTERVAL).start()
    progress = Progress(kube, namespace)
    try:
        emulator.wait_synced()
        with namespace_nodes(kube, namespace, 2, cpu="4"):
            kube.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", indexed_job("ddp", template, 2))
            two = training(emulator, gang, 2.0, None, "the two workers training")
            s = two.step_s / (T1 / 2) - 1  # 2 e(2) / 0.6 steps/s, e(2) = 1 / (1 + s): the job's drawn s
            assert 0.03 <= s <= 0.09
            assert all(p["spec"].get("nodeName") for p in workers(kube, namespace).values())
            # Past the first periodic checkpoint, so a scale played as a failure would show.
            progress.reaches(int(CHECKPOINT_SECONDS / two.step_s) + 200, "rank 0 past the first checkpoint")

            at = emulator.emulated_now()
            before = progress.read()
            status = scale(elastic_plane, namespace, "ddp", 4)
            assert status.ok, status.message()
            assert job_spec(kube, namespace, "ddp") == (4, 4)
            four = training(emulator, gang, 4.0, two, "four workers training")
            bound = wait_for(
                lambda: workers(kube, namespace),
                lambda found: sorted(found) == [0, 1, 2, 3] and all(p["spec"].get("nodeName") for p in found.values()),
                timeout=30,
                what="the Job controller's pods 2 and 3 bound by pysched",
            )
            assert {p["spec"]["schedulerName"] for p in bound.values()} == {name}
            assert four.seg_steps >= before  # nothing lost: the scale checkpointed
            assert four.seg_start >= at + SCALE_PAUSE_CPU_S[0]  # the rendezvous' pause
            assert four.step_s == pytest.approx(T1 * (1 + 3 * s) / 4, rel=1e-6)  # 4 e(4) / 0.6 steps/s
            progress.reaches(four.seg_steps + 200, "rank 0 reporting on four workers")

            at = emulator.emulated_now()
            before = progress.read()
            status = scale(elastic_plane, namespace, "ddp", 2)
            assert status.ok, status.message()
            assert job_spec(kube, namespace, "ddp") == (2, 2)
            wait_for(
                lambda: workers(kube, namespace),
                lambda found: sorted(found) == [0, 1],
                timeout=30,
                what="the Job controller removing pods 3 and 2",
            )
            for index, going in {
                int(p["metadata"]["labels"][COMPLETION_INDEX]): p for p in list_pods(kube, namespace)
            }.items():
                if going["metadata"].get("deletionTimestamp"):
                    assert index in (2, 3)
                    kube.force_delete_pod(namespace, going["metadata"]["name"])  # as a kubelet finishes it
            again = training(emulator, gang, 2.0, four, "two workers training again")
            assert again.seg_steps >= before and again.seg_start >= at + SCALE_PAUSE_CPU_S[0]
            assert again.step_s == pytest.approx(two.step_s, rel=1e-6)
            progress.reaches(again.seg_steps + 200, "rank 0 reporting on two workers again")
            assert sorted(workers(kube, namespace)) == [0, 1]
            assert progress.never_went_back(), progress.seen
            assert emulator.errors == []
            kube.delete(f"/apis/batch/v1/namespaces/{namespace}/jobs/ddp", {"propagationPolicy": "Background"})
    finally:
        emulator.stop()
        assert scheduler.stop() == 0, scheduler.log()


def test_a_job_that_cannot_scale_is_refused_with_the_reason_and_nothing_changes(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str
) -> None:
    """On the shared plane: the Job controller makes gang-shaped Indexed Jobs Workload API gangs,
    whose parallelism the apiserver does not let change."""
    pod = pod_for("unused", "nobody", namespace, "1")
    pod["spec"]["restartPolicy"] = "Never"
    template = {"spec": pod["spec"]}
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    kube.post(jobs, indexed_job("gang", template, 2))
    kube.post(jobs, indexed_job("plain", template, 2, completionMode="NonIndexed"))
    kube.post(jobs, indexed_job("uneven", template, 2, completions=4))
    kube.post(jobs, indexed_job("per-index", template, 2, backoffLimitPerIndex=1, maxFailedIndexes=2))
    groups = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups"
    wait_for(
        lambda: kube.get(groups)["items"],
        lambda found: any(o.get("name") == "gang" for g in found for o in g["metadata"].get("ownerReferences", [])),
        timeout=30,
        what="the Job controller's PodGroup of the gang",
    )

    refused = scale(control_plane, namespace, "gang", 4)
    assert refused.code is Code.UNSCHEDULABLE
    assert "cannot change parallelism for a Job referencing gang-scheduled PodGroup" in refused.message()
    invalid = scale(control_plane, namespace, "per-index", 1)  # the apiserver's validation
    assert invalid.code is Code.UNSCHEDULABLE and "maxFailedIndexes" in invalid.message()
    plain = scale(control_plane, namespace, "plain", 3)  # refused before any request
    assert plain.code is Code.UNSCHEDULABLE and "not an Indexed batch/v1 Job" in plain.message()
    uneven = scale(control_plane, namespace, "uneven", 3)
    assert uneven.code is Code.UNSCHEDULABLE and "completions 4 and parallelism 2" in uneven.message()
    wanted = {"gang": (2, 2), "plain": (2, 2), "uneven": (2, 4), "per-index": (2, 2)}
    assert {job: job_spec(kube, namespace, job) for job in wanted} == wanted


# The planner's own scaling: resnet50 at batch 256 trains 3.45 steps/s on 2 GPUs and 6.19 on 4
# (the A100 table, times the job's drawn factor U(0.9, 1.1)); the emulator runs 25 emulated
# seconds per wall second. A job of 6,190 steps takes 65-80 s on 2 GPUs and 36-44 s on 4, so its
# 60 s deadline is met only if pysched scales it up early.
GPU_SCALE = 25.0
GPU_STEPS = 6190
GPU_DEADLINE_S = 60
RESNET = Job("resnet", 0.0, GPU_STEPS, 1000, "64Mi", Throughput((), ()), model="resnet50")  # the table by name


def gpu_template(scheduler: str, namespace: str, gpus: int, notes: dict[str, str]) -> JSON:
    pod = pod_for("unused", scheduler, namespace, "1")
    pod["spec"]["restartPolicy"] = "Never"
    resources = pod["spec"]["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = str(gpus)
    resources["limits"] = {"nvidia.com/gpu": str(gpus)}  # an extended resource's limit equals its request
    base = {**emulate_annotations(RESNET, seed=5, noise=0.0), EMULATE_BATCH_SIZE: "256"}
    return {"metadata": {"annotations": {**base, **notes}}, "spec": pod["spec"]}


def elastic_profile(path: Path, name: str) -> Path:
    """The built-in `pysched` profile, its ElasticScale planning every second for a fast emulator."""
    profile = builtin_profile("pysched", name)
    args = {
        "intervalSeconds": 0.5,
        "replanSeconds": 1,
        "cooldownSeconds": 5,
        "scalePauseSeconds": 3,  # the emulator's 30-90 s pause, in wall seconds
        "scaleTimeoutSeconds": 30,
    }
    profile["pluginConfig"].append({"name": "ElasticScale", "args": args})
    path.write_text(yaml.safe_dump({"profiles": [profile]}))
    return path


def test_the_planner_scales_an_elastic_job_up_to_meet_its_deadline_and_back_down_for_another_job(
    elastic_plane: LocalControlPlane, tmp_path: Path
) -> None:
    kube = elastic_plane.api()
    namespace = "planned"
    kube.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    name = f"pysched-{namespace}"
    elastic = {WORKERS_MIN: "1", WORKERS_MAX: "4", DEADLINE: f"{GPU_DEADLINE_S}s", EXPECTED_DURATION: "72s"}
    scheduler = start_scheduler(
        elastic_plane,
        name,
        config=elastic_profile(tmp_path / "profiles.yaml", name),
        args=["--qps=1000", "--burst=1000"],
    )
    emulator = KubeletEmulator(kube, time_scale=GPU_SCALE, progress_interval=GPU_SCALE).start()
    specs: list[tuple[int, int]] = []

    def spec_seen() -> tuple[int, int]:
        spec = job_spec(kube, namespace, "resnet")
        if not specs or specs[-1] != spec:
            specs.append(spec)
        return spec

    try:
        emulator.wait_synced()
        with namespace_nodes(kube, namespace, 1, cpu="16", gpu="8"):
            job = indexed_job("resnet", gpu_template(name, namespace, 1, elastic), 2)
            posted = kube.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
            created = parse_rfc3339(posted["metadata"]["creationTimestamp"])
            assert created is not None
            deadline = created + GPU_DEADLINE_S
            wait_for(spec_seen, lambda s: s == (4, 4), timeout=20, interval=0.05, what="the plan's 4 workers")
            progress = Progress(kube, namespace)
            progress.reaches(int(GPU_STEPS * 0.8), "the job 80% done on 4 GPUs")
            # A short best-effort job that needs 5 of the 8 GPUs: the elastic job gives back the one
            # GPU it lacks, whatever its deadline would allow by now (2 on a quiet machine, 3 on a
            # loaded one), so the outcome does not hang on how fast this machine ran the job.
            short = {TOTAL_STEPS: "1000", EXPECTED_DURATION: "5s"}
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "short", **gpu_template(name, namespace, 5, short)["metadata"]},
            }
            pod["spec"] = gpu_template(name, namespace, 5, short)["spec"]
            kube.post(f"/api/v1/namespaces/{namespace}/pods", pod)
            wait_for(spec_seen, lambda s: s == (3, 3), timeout=20, interval=0.05, what="the elastic job down to 3")
            for going in list_pods(kube, namespace):
                if going["metadata"].get("deletionTimestamp"):
                    kube.force_delete_pod(namespace, going["metadata"]["name"])  # as a kubelet finishes it
            wait_for(
                lambda: kube.get(f"/api/v1/namespaces/{namespace}/pods/short"),
                lambda p: bool(p["spec"].get("nodeName")),
                timeout=20,
                what="the short job bound on the GPUs given back",
            )
            done = wait_for(
                lambda: kube.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/resnet"),
                lambda j: (j.get("status") or {}).get("succeeded", 0) >= 2,
                timeout=60,
                interval=0.05,
                what="the elastic job done",
            )
            finished = time.time()
            assert specs[0] == (2, 2) and (4, 4) in specs and specs[-1] == (3, 3), specs  # up, then down
            assert finished <= deadline, f"missed by {finished - deadline:.1f}s"
            assert progress.never_went_back(), progress.seen
            assert (done.get("status") or {}).get("failed", 0) == 0
            assert emulator.errors == []
    finally:
        emulator.stop()
        assert scheduler.stop() == 0, scheduler.log()
