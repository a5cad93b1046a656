"""A training job read from its pod's annotations, as the kubelet emulator reads it."""

from pathlib import Path

import pytest

from pysched.cmd.cli import main
from pysched.testing.emulator import main as emulator_main
from pysched.testing.helpers import make_pod
from pysched.workload.catalogue import CpuModel, GpuModel, builtin_catalogue
from pysched.workload.job import Job
from pysched.workload.pod import (
    EMULATE_BATCH_SIZE,
    EMULATE_MODEL,
    EMULATE_NOISE,
    EMULATE_SEED,
    EMULATE_TRUTH,
    emulate_annotations,
    job_from_pod,
    parse_truth,
    truth_rng,
)
from pysched.workload.speed import Amdahl, Throughput

CATALOGUE = builtin_catalogue()


def test_a_pod_without_a_model_is_no_job() -> None:
    assert job_from_pod(make_pod("p"), CATALOGUE) is None


def test_truth_is_drawn_around_the_model_as_the_simulator_draws() -> None:
    pod = make_pod("train", cpu="2", cpu_limit=None, annotations={EMULATE_MODEL: "lstm", EMULATE_SEED: "3"})
    spec = job_from_pod(pod, CATALOGUE)
    assert spec is not None
    model = CATALOGUE.get("lstm")
    assert isinstance(model, CpuModel)
    assert spec.job.truth == model.truth(truth_rng(3, "train"))
    assert (spec.job.steps, spec.job.cpu_milli, spec.job.gpu, spec.seed, spec.noise) == (10_000, 2000, 0, 3, 0.05)
    assert not spec.job.restart_on_resize  # make_pod's cpu resizePolicy is NotRequired
    other = job_from_pod(make_pod("other", annotations={EMULATE_MODEL: "lstm", EMULATE_SEED: "3"}), CATALOGUE)
    assert other is not None and other.job.truth != spec.job.truth  # each job its own truth


def test_restart_policy_steps_noise_and_gpu_rows() -> None:
    pod = make_pod("g", annotations={EMULATE_MODEL: "resnet50", "pysched.io/total-steps": "500", EMULATE_NOISE: "0"})
    pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "2"
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    pod["spec"]["containers"][0]["resizePolicy"][0]["restartPolicy"] = "RestartContainer"
    spec = job_from_pod(pod, CATALOGUE)
    assert spec is not None
    model = CATALOGUE.get("resnet50")
    assert isinstance(model, GpuModel)
    assert spec.job.truth == model.tables[model.default_batch] and isinstance(spec.job.truth, Throughput)
    assert (spec.job.steps, spec.job.gpu, spec.noise, spec.job.restart_on_resize) == (500, 2, 0.0, True)
    batch = max(model.tables)
    pod["metadata"]["annotations"][EMULATE_BATCH_SIZE] = str(batch)
    spec = job_from_pod(pod, CATALOGUE)
    assert spec is not None and spec.job.truth == model.tables[batch]


def test_truth_override_round_trips_a_simulated_job() -> None:
    job = Job("j", 0.0, 1234, 1000, "1Gi", Amdahl.from_t1(0.37, 0.031, 11), model="gan")
    pod = make_pod("j", cpu="1", cpu_limit=None, annotations=emulate_annotations(job, seed=9, noise=0.0))
    spec = job_from_pod(pod, CATALOGUE)
    assert spec is not None
    assert (spec.job.truth, spec.job.steps, spec.seed, spec.noise) == (job.truth, 1234, 9, 0.0)
    assert parse_truth("t1=0.6,f=0.02,p_max=16") == Amdahl.from_t1(0.6, 0.02, 16)


@pytest.mark.parametrize(
    ("annotations", "key"),
    [
        ({EMULATE_MODEL: "nosuch"}, EMULATE_MODEL),
        ({EMULATE_MODEL: "lstm", "pysched.io/total-steps": "0"}, "pysched.io/total-steps"),
        ({EMULATE_MODEL: "lstm", "pysched.io/total-steps": "1.5"}, "pysched.io/total-steps"),
        ({EMULATE_MODEL: "lstm", EMULATE_SEED: "-1"}, EMULATE_SEED),
        ({EMULATE_MODEL: "lstm", EMULATE_NOISE: "nan"}, EMULATE_NOISE),
        ({EMULATE_MODEL: "lstm", EMULATE_TRUTH: "a=1"}, EMULATE_TRUTH),
        ({EMULATE_MODEL: "lstm", EMULATE_TRUTH: "t1=0.6,f=2,p_max=4"}, EMULATE_TRUTH),
        ({EMULATE_MODEL: "lstm", EMULATE_TRUTH: "a=0,b=1,p_max=1.5"}, EMULATE_TRUTH),
        ({EMULATE_MODEL: "lstm", EMULATE_TRUTH: "a=x,b=1,p_max=1"}, EMULATE_TRUTH),
        ({EMULATE_MODEL: "resnet50", EMULATE_BATCH_SIZE: "3"}, EMULATE_BATCH_SIZE),
    ],
)
def test_bad_annotations_name_the_key(annotations: dict[str, str], key: str) -> None:
    with pytest.raises(ValueError, match=key):
        job_from_pod(make_pod("p", annotations=annotations), CATALOGUE)


def test_dev_cluster_rejects_a_bad_time_scale(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["dev-cluster", "up", "--dir", str(tmp_path), "--emulate", "--emulate-time-scale", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--emulate-time-scale" in err[0]


def test_emulator_rejects_bad_flags() -> None:
    for flag, value in (("--time-scale", "0"), ("--progress-interval", "-1"), ("--time-scale", "inf")):
        with pytest.raises(SystemExit) as exit_info:
            emulator_main(["--kubeconfig", "/nonexistent", flag, value])
        assert exit_info.value.code == 2
