"""The kubelet emulator runs a gang's members as one job against the real API: no training until
every member runs, progress on rank 0 only, a member that leaves takes the job back to its
checkpoint, and all members complete together."""

from __future__ import annotations

import pytest

from pysched.api.annotations import PROGRESS, progress_of
from pysched.api.ids import JobKey
from pysched.api.jobs import JOB_LABEL, MIN_MEMBERS, JobSource, job_key
from pysched.api.objects import pod_from_dict
from pysched.testing import KubeAPI, wait_for
from pysched.testing.emulator import KubeletEmulator
from pysched.testing.helpers import fake_node, make_pod
from pysched.testing.kube import JSON
from pysched.workload.job import Job
from pysched.workload.pod import emulate_annotations
from pysched.workload.segment import CHECKPOINT_SECONDS, Run
from pysched.workload.speed import Amdahl

SCALE = 100.0  # emulated seconds per wall second
INTERVAL = 60.0  # emulated seconds between progress writes

pytestmark = [pytest.mark.integration, pytest.mark.emulator(time_scale=SCALE, progress_interval=INTERVAL)]

# t(1) = 0.6 s a worker step; two all-reduce workers do 2 e(2) / 0.6 global steps a second.
JOB = Job("train", 0.0, 2000, 1000, "64Mi", Amdahl.from_t1(0.6, 0.02, 16), model="lstm", restart_on_resize=False)


def member(index: int) -> JSON:
    notes = {**emulate_annotations(JOB, seed=5, noise=0.0), MIN_MEMBERS: "2"}
    pod = make_pod(f"train-{index}", cpu="1", cpu_limit=None, annotations=notes)
    pod["metadata"]["labels"] = {JOB_LABEL: "train"}
    return pod


def steps(pod: JSON) -> int | None:
    found = progress_of(pod_from_dict(pod))
    return found[0] if found is not None else None


def training(emulator: KubeletEmulator, gang: JobKey, what: str, after: Run | None = None) -> Run:
    """The gang's segment once it trains (in a newer segment than `after`, when given)."""
    found = wait_for(
        lambda: emulator.gang_training(gang),
        lambda r: r is not None and (after is None or r.version > after.version),
        timeout=10,
        what=what,
    )
    assert found is not None
    return found


def rank0_reaches(kube: KubeAPI, namespace: str, wanted: int, what: str) -> None:
    wait_for(
        lambda: kube.get_pod(namespace, "train-0"),
        lambda pod: (steps(pod) or 0) >= wanted,
        timeout=20,
        what=what,
    )


def phase(kube: KubeAPI, namespace: str, name: str, wanted: str, timeout: float = 10) -> JSON:
    return wait_for(
        lambda: kube.get_pod(namespace, name),
        lambda pod: pod["status"].get("phase") == wanted,
        timeout=timeout,
        what=f"{name} {wanted}",
    )


def test_a_gang_trains_only_while_every_member_runs_and_ends_together(
    kube: KubeAPI, namespace: str, emulator: KubeletEmulator
) -> None:
    node = fake_node(kube, f"{namespace}-node")
    gang = job_key(namespace, JobSource.PYSCHED, "train")
    for index in (0, 1):
        kube.create_pod(namespace, member(index))
    kube.bind_pod(namespace, "train-1", node)
    phase(kube, namespace, "train-1", "Running")
    assert emulator.gang_training(gang) is None  # one member of two runs: the job waits

    kube.bind_pod(namespace, "train-0", node)
    run = training(emulator, gang, "gang training")
    assert run.seg_steps == 0 and run.cpu == 2.0
    # Two workers beat one (0.6 s a step) but not twice over: e(2) = 1 / (1 + s), s in [0.03, 0.09].
    assert 0.3 / (1 / 1.03) <= run.step_s <= 0.3 / (1 / 1.09)

    # Past the first checkpoint (300 s of training), rank 1 leaves: the job pauses.
    past_checkpoint = int(CHECKPOINT_SECONDS / run.step_s) + 100
    rank0_reaches(kube, namespace, past_checkpoint, "progress past the first checkpoint")
    reached = steps(kube.get_pod(namespace, "train-0")) or 0
    kube.force_delete_pod(namespace, "train-1")
    wait_for(lambda: emulator.gang_training(gang), lambda r: r is None, timeout=10, what="gang paused")

    # Its controller's replacement joins: training resumes from the checkpoint, not where it was.
    kube.create_pod(namespace, member(1))
    kube.bind_pod(namespace, "train-1", node)
    resumed = training(emulator, gang, "resumed")
    assert resumed.seg_steps == int(CHECKPOINT_SECONDS / run.step_s) < reached

    done = [phase(kube, namespace, name, "Succeeded", timeout=30) for name in ("train-0", "train-1")]
    assert PROGRESS not in (done[1]["metadata"].get("annotations") or {})  # only rank 0 reports
    assert emulator.errors == []


def test_a_failed_member_is_replaced_by_a_spare_and_every_pod_ends_with_the_job(
    kube: KubeAPI, namespace: str, emulator: KubeletEmulator
) -> None:
    node = fake_node(kube, f"{namespace}-node")
    gang = job_key(namespace, JobSource.PYSCHED, "train")
    for index in (0, 1, 2):  # minimum 2: the third pod waits as a spare
        kube.create_pod(namespace, member(index))
        kube.bind_pod(namespace, f"train-{index}", node)
        phase(kube, namespace, f"train-{index}", "Running")
    run = training(emulator, gang, "gang training")
    assert run.cpu == 2.0  # two members train, not three
    emulator.complete(namespace, "train-0", exit_code=1)  # rank 0 fails: the spare takes its place
    phase(kube, namespace, "train-0", "Failed")
    resumed = training(emulator, gang, "the gang training again with its spare", after=run)
    assert resumed.cpu == 2.0 and resumed.seg_steps == 0  # back to the checkpoint
    for name in ("train-1", "train-2"):  # the new rank 0 reports, and every pod ends with the job
        done = phase(kube, namespace, name, "Succeeded", timeout=30)
    assert PROGRESS in (kube.get_pod(namespace, "train-1")["metadata"].get("annotations") or {})
    assert PROGRESS not in (done["metadata"].get("annotations") or {})
    assert emulator.errors == []


def test_an_emulator_restarted_under_a_running_gang_resumes_from_rank_0s_progress(
    kube: KubeAPI, namespace: str, emulator: KubeletEmulator
) -> None:
    node = fake_node(kube, f"{namespace}-node")
    gang = job_key(namespace, JobSource.PYSCHED, "train")
    for index in (0, 1):
        kube.create_pod(namespace, member(index))
        kube.bind_pod(namespace, f"train-{index}", node)
    rank0_reaches(kube, namespace, 300, "rank 0 reporting 300 steps")
    emulator.stop()
    reported = steps(kube.get_pod(namespace, "train-0")) or 0
    again = KubeletEmulator(kube, time_scale=SCALE, progress_interval=INTERVAL).start()
    try:
        again.wait_synced()
        run = training(again, gang, "resumed")
        assert run.seg_steps == reported  # not from zero
        phase(kube, namespace, "train-1", "Succeeded", timeout=30)
        assert again.errors == []
    finally:
        again.stop()
