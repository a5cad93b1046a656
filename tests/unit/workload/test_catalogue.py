from pathlib import Path

import pytest

from pysched.testing.hostile import alias_bomb
from pysched.workload.catalogue import CatalogueError, CpuModel, GpuModel, load_catalogue
from pysched.workload.speed import Throughput


def _catalogue(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        ("{kind: cpu, steps: 1.0e300, t1: 1, f: 0.1, p_max: 4}", "steps: must be a number above 0 and at most 1e+16"),
        ("{kind: cpu, steps: 100, t1: .inf, f: 0.1, p_max: 4}", "t1: must be a number above 0"),
        ("{kind: cpu, steps: 100, t1: 1, f: .nan, p_max: 4}", "f: must be a number above 0"),
        ("{kind: cpu, steps: 100, t1: 1, f: 0.1, p_max: 1.0e30}", "p_max: must be a number above 0"),
        ("{kind: cpu, steps: 100, t1: 1, f: 5, p_max: 4}", "f: must be a number above 0 and at most 1, got 5"),
        ("{kind: cpu, steps: 100, t1: 1, f: 1.5, p_max: 4}", "f: must be a number above 0 and at most 1, got 1.5"),
        ("{kind: [" + ", ".join(["k" * 500] * 40) + "]}", "kind: must be cpu or gpu, got ["),
    ],
)
def test_model_numbers_are_bounded_and_quoted_short(tmp_path: Path, model: str, needle: str) -> None:
    with pytest.raises(CatalogueError, match=r"models\.m") as info:
        load_catalogue(_catalogue(tmp_path, f"models:\n  m: {model}\n"))
    assert needle in str(info.value) and len(str(info.value)) < 300


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ("global_batch_size,1,2\n64,inf,2\n", "not a rate from 0 to 1e9"),
        ("global_batch_size,1,2\n64,nan,2\n", "not a rate from 0 to 1e9"),
        ("global_batch_size,1,99999999999999\n64,1,2\n", "not an integer from 1 to"),
        ('global_batch_size,1\n64,"' + "9" * 200_000 + '"\n', "field larger than field limit"),
        ("global_batch_size,4,2,1\n64,30,20,10\n", "GPU counts must ascend, each once, got '4, 2, 1'"),
        ("global_batch_size,1,2,2\n64,1,2,3\n", "GPU counts must ascend, each once"),
        ("global_batch_size,1_0,20\n64,1,2\n", "'1_0' is not an integer from 1 to"),
        ("global_batch_size,1,2\n64,1,2\n64,5,6\n", "line 3: batch size 64 repeats line 2"),
        ("global_batch_size,1,2\n64,1,2,3,4\n", "line 2 has 5 cells, more than the header's 3"),
    ],
)
def test_throughput_tables_are_bounded(tmp_path: Path, table: str, needle: str) -> None:
    (tmp_path / "t.csv").write_text(table)
    with pytest.raises(CatalogueError, match=r"models\.g\.table: not a throughput table") as info:
        load_catalogue(_catalogue(tmp_path, "models:\n  g: {kind: gpu, table: t.csv}\n"))
    assert needle in str(info.value)


def test_unreadable_catalogue_files_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_bytes(b"\x00\x01binary")
    with pytest.raises(CatalogueError, match=r"models\.g\.table: .*t\.csv: a binary file, not text"):
        load_catalogue(_catalogue(tmp_path, "models:\n  g: {kind: gpu, table: t.csv}\n"))
    with pytest.raises(CatalogueError, match="aliases expand to more than 10,000 nodes"):
        load_catalogue(_catalogue(tmp_path, alias_bomb(top="models")))
    with pytest.raises(CatalogueError, match="a model name must be a string"):
        load_catalogue(_catalogue(tmp_path, "models: {7: {kind: cpu}}\n"))


def test_a_short_table_row_leaves_its_last_counts_unmeasured(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("global_batch_size, 1, 2, 4\n64,10,,30\n128,5\n")
    model = load_catalogue(_catalogue(tmp_path, "models:\n  g: {kind: gpu, table: t.csv}\n")).models["g"]
    assert isinstance(model, GpuModel)
    assert model.tables[64] == Throughput((1, 4), (10.0, 30.0)) and model.tables[128] == Throughput((1,), (5.0,))


CPU_MODEL = "{kind: cpu, steps: 9, t1: 1, f: 0.1, p_max: 8"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (f"models:\n  m: {CPU_MODEL}}}\nfoo: bar\n", "models.yaml: foo: unknown key (accepted: models)"),
        (
            f"models:\n  m: {CPU_MODEL}, pmax: 2, bogus: 1}}\n",
            "models.m.bogus: unknown key (accepted for kind cpu: kind, steps, batch_size, t1, f, p_max)",
        ),
        (
            "models:\n  g: {kind: gpu, table: t.csv, p_max: 8}\n",
            "models.g.p_max: unknown key (accepted for kind gpu: kind, table, steps)",
        ),
        (f"models:\n  m: {CPU_MODEL}, 7: 1}}\n", "models.m.7: unknown key"),
    ],
)
def test_unknown_catalogue_keys_are_refused(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(CatalogueError) as info:
        load_catalogue(_catalogue(tmp_path, text))
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_a_model_may_be_written_with_json_numbers(tmp_path: Path) -> None:
    text = '{"models": {"m": {"kind": "cpu", "steps": 1e3, "t1": 1e-3, "f": 1, "p_max": 8}}}'
    assert load_catalogue(_catalogue(tmp_path, text)).models["m"] == CpuModel("m", 1000, 0, 0.001, 1.0, 8)


def test_a_table_with_only_blank_lines_under_its_header_is_one_line(tmp_path: Path) -> None:
    """Its model had no batch size to run by: a traceback once a job used it."""
    (tmp_path / "t.csv").write_text("global_batch_size,1,2\n\n")
    with pytest.raises(CatalogueError, match=r"models\.g\.table: a header and at least one row are required"):
        load_catalogue(_catalogue(tmp_path, "models:\n  g: {kind: gpu, table: t.csv}\n"))
