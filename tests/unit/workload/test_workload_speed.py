import math
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pysched.workload.catalogue import CatalogueError, CpuModel, GpuModel, builtin_catalogue, load_catalogue
from pysched.workload.speed import Amdahl, Throughput

CATALOGUE = builtin_catalogue()


def test_builtin_cpu_models_are_pinned_by_design() -> None:
    pinned = {
        "lstm": (10_000, 0.60, 0.02, 16),
        "gan": (100_000, 0.12, 0.03, 8),
        "autoencoder": (30_000, 0.25, 0.01, 32),
    }
    for name, (steps, t1, f, p_max) in pinned.items():
        model = CATALOGUE.get(name)
        assert isinstance(model, CpuModel)
        assert (model.steps, model.t1, model.f, model.p_max) == (steps, t1, f, p_max)
    assert set(CATALOGUE.names(GpuModel)) >= {"resnet50", "vgg16", "bert", "inception3", "deepspeech2", "gpt2"}


def test_amdahl_step_time_and_cpu_use() -> None:
    lstm = Amdahl.from_t1(0.60, 0.02, 16)
    assert lstm.a == pytest.approx(0.012) and lstm.b == pytest.approx(0.588)
    assert lstm.step_seconds(1, 0) == pytest.approx(0.60)
    assert lstm.step_seconds(4, 0) == pytest.approx(0.012 + 0.588 / 4)
    assert lstm.step_seconds(64, 0) == lstm.step_seconds(16, 0)  # capped at p_max
    assert lstm.cpu_seconds_per_step() == pytest.approx(0.60)
    # below one CPU the whole step is throttled: allocation equals use
    assert 0.5 * lstm.step_seconds(0.5, 0) == pytest.approx(0.60)


@given(st.integers(0, 10_000), st.sampled_from(["lstm", "gan", "autoencoder"]))
def test_per_job_truth_stays_in_the_design_ranges(seed: int, name: str) -> None:
    model = CATALOGUE.get(name)
    assert isinstance(model, CpuModel)
    truth = model.truth(random.Random(seed))
    t1 = truth.a + truth.b
    assert 0.75 * model.t1 - 1e-12 <= t1 <= 1.25 * model.t1 + 1e-12
    assert 0.5 * model.f - 1e-12 <= truth.a / t1 <= 1.5 * model.f + 1e-12
    assert max(1, math.floor(0.5 * model.p_max)) <= truth.p_max <= math.ceil(1.5 * model.p_max)


def test_same_seed_same_truth() -> None:
    model = CATALOGUE.get("gan")
    assert isinstance(model, CpuModel)
    assert model.truth(random.Random(3)) == model.truth(random.Random(3))


def test_gpu_tables_by_batch_interpolated_and_not_offered() -> None:
    resnet = CATALOGUE.get("resnet50")
    assert isinstance(resnet, GpuModel) and sorted(resnet.tables) == [64, 128, 256]
    table = resnet.truth(random.Random(0), 128)
    assert table.rate(2) == pytest.approx(6.619528678370847)
    assert table.rate(3) == pytest.approx((6.619528678370847 + 11.224201427896464) / 2)
    assert table.step_seconds(0, 4) == pytest.approx(1 / 11.224201427896464)
    assert table.rate(128) is None and math.isinf(table.step_seconds(0, 128))
    cifar = CATALOGUE.get("resnet50_cifar10")
    assert isinstance(cifar, GpuModel)
    assert cifar.truth(random.Random(0)).gpus == (1, 2, 4, 8)  # zero cells are not offered
    speech = CATALOGUE.get("deepspeech2")
    assert isinstance(speech, GpuModel)
    assert speech.truth(random.Random(0), 32).rate(64) is None  # empty cell
    with pytest.raises(KeyError):
        resnet.truth(random.Random(0), 100)
    assert Throughput((), ()).rate(1) is None


def test_user_catalogue_adds_models_and_reports_errors(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("global_batch_size,1,2\n32,2.0,3.0\n")
    good = tmp_path / "cat.yaml"
    good.write_text(
        "models:\n  mine: {kind: gpu, table: t.csv}\n  tiny: {kind: cpu, steps: 10, t1: 1.0, f: 0.5, p_max: 2}\n"
    )
    catalogue = load_catalogue(good)
    assert catalogue.get("lstm") is not None
    mine = catalogue.get("mine")
    assert isinstance(mine, GpuModel) and mine.truth(random.Random(0)).rate(2) == 3.0
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  x: {kind: cpu, steps: -1, t1: 1, f: 0.1, p_max: 1}\n")
    with pytest.raises(CatalogueError, match=r"models\.x\.steps"):
        load_catalogue(bad)
