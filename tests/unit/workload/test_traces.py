import os
import re
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.workload import traces
from pysched.workload.catalogue import Catalogue, CpuModel, builtin_catalogue
from pysched.workload.job import Job
from pysched.workload.traces import (
    DEFAULT_GPU_MIX,
    DeadlineRule,
    TraceError,
    parse_deadline_rule,
    read_csv,
    read_swf,
    synthetic,
    write_csv,
)

CATALOGUE = builtin_catalogue()


def _write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_published_deadline_layout_loads_unchanged(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"
        "1,0,5000,resnet50,7200,128,4,3000\n"
        "2,60,,vgg16,,64,2,1800\n",
    )
    trace = read_csv(path, CATALOGUE)
    assert trace.problems == ()
    first, second = trace.jobs
    assert (first.steps, first.model, first.gpu, first.deadline) == (5000, "resnet50", 4, 7200.0)  # num_iteration wins
    assert first.truth.step_seconds(0, 4) == pytest.approx(1 / 11.224201427896464)  # batch 128 row
    rate = 9.03564356887826  # vgg16, batch 64, 2 GPUs
    assert second.steps == round(1800 * rate)  # from duration at the requested resources
    assert second.deadline is not None and 60 + 0.5 * 1800 <= second.deadline <= 60 + 1.5 * 1800


def test_raw_layout_loads_and_extra_columns_are_ignored(tmp_path: Path) -> None:
    path = _write(tmp_path, "job_id,submission_time,duration,num_gpu,user\na,0,600,0,alice\nb,10,1200,8,bob\n")
    trace = read_csv(path, CATALOGUE, seed=1)
    assert trace.skipped == 0
    cpu, gpu = trace.jobs
    assert cpu.gpu == 0 and cpu.model in ("lstm", "gan", "autoencoder") and cpu.cpu_milli == 2000
    assert cpu.steps == round(600 / cpu.truth.step_seconds(2, 0))
    assert gpu.gpu == 8 and gpu.cpu_milli == 32_000
    assert read_csv(path, CATALOGUE, seed=1).jobs == trace.jobs  # seeded


def test_bad_rows_are_reported_with_file_line_and_skipped(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "job_id,submission_time,duration,num_gpu,model_name\n"
        "ok,0,100,0,lstm\n"
        ",0,100,0,\n"
        "neg,-5,100,0,\n"
        "nan,abc,100,0,\n"
        "nodur,0,,0,\n"
        "unknown,0,100,0,alexnet\n"
        "gpucpu,0,100,2,lstm\n"
        "toolong,0,100,0,lstm,extra\n",
    )
    trace = read_csv(path, CATALOGUE)
    assert [j.source for j in trace.jobs] == [f"{path}:2"]
    assert trace.skipped == 7
    lines = [p.split(": ", 1)[0] for p in trace.problems]
    assert lines == [f"{path}:{n}" for n in range(3, 10)]
    assert "unknown model 'alexnet'" in trace.problems[4]


def test_skipped_rows_that_had_a_deadline_are_counted_for_the_ratio(tmp_path: Path) -> None:
    text = (
        "job_id,submission_time,iterations,model_name,num_gpu,ddl\n"
        "a,0,1000,resnet50,1,1200\n"
        "a,20,1000,resnet50,1,2000\n"  # a repeated id
        "c,30,1000,resnet50,1,25\n"  # its deadline before its submission
        "d,40,abc,resnet50,1,\n"  # malformed, and no deadline of its own
    )
    path = _write(tmp_path, text)
    by_rule = read_csv(path, CATALOGUE)
    assert [p.split(": ", 1)[0] for p in by_rule.problems] == [f"{path}:3", f"{path}:4", f"{path}:5"]
    assert "job_id 'a' repeats line 2" in by_rule.problems[0]
    assert by_rule.skipped_deadlines == 3  # the rule would have given `d` one
    assert read_csv(path, CATALOGUE, rule=None).skipped_deadlines == 2
    (job,) = by_rule.jobs
    assert job.steps == 1000  # `iterations` is ElasticFlow's converter's name for num_iteration


def test_lone_carriage_returns_are_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "job_id,submission_time,duration\ra,0,60\rb,5,60\r")
    with pytest.raises(TraceError, match=r":1: its lines end in a lone carriage return \(CR\); save it with LF"):
        read_csv(path, CATALOGUE)


def test_file_without_usable_header_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=":1: header needs"):
        read_csv(_write(tmp_path, "a,b\n1,2\n"), CATALOGUE)
    with pytest.raises(TraceError, match="cannot read"):
        read_csv(tmp_path / "missing.csv", CATALOGUE)


@pytest.mark.parametrize(
    ("header", "named"),
    [
        ("job_id,submission_time,duration,duration", "'duration'"),
        ("job_id,submission_time,duration,iteration,iterations", "'num_iteration (iteration, iterations)'"),
        # An alias beside its column: which of the two a row means is not known.
        (
            "job_id,job_id,submission_time,submit_time,duration",
            "'job_id, submission_time (submission_time, submit_time)'",
        ),
    ],
)
def test_a_column_named_twice_is_an_error(tmp_path: Path, header: str, named: str) -> None:
    """csv keeps the last of the cells: `duration,duration` with 600,5 ran a job of 5 s."""
    path = _write(tmp_path, f"{header},,\na,0,600,5,6,,\n")
    with pytest.raises(TraceError, match=":1: header names a column more than once: " + re.escape(named) + "$"):
        read_csv(path, CATALOGUE)


def test_deadline_rule_forms() -> None:
    assert parse_deadline_rule("0.5,1.5") == DeadlineRule(0.5, 1.5)
    assert parse_deadline_rule("none") is None
    for bad in ("1", "x,y", "2,1", "0,1"):
        with pytest.raises(ValueError, match=r"accepted|need"):
            parse_deadline_rule(bad)


def test_swf(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "; Version: 2.2\n"
        "1 0 10 3600 4 -1 -1 4 7200 -1 1 1 1 -1 1 -1 -1 -1\n"
        "2 100 5 1800 -1 -1 -1 -1 3600 -1 1 1 1 -1 1 -1 -1 -1\n"
        "3 200 5\n"
        "4 300 10 3600 4 -1 -1 4 7200 -1 1 1 1 -1 1 -1 -1 -1 extra\n",  # 19 fields: not SWF either
        "t.swf",
    )
    trace = read_swf(path, CATALOGUE)
    assert [j.cpu_milli for j in trace.jobs] == [4000]
    assert [p.split(": ")[0] for p in trace.problems] == [f"{path}:3", f"{path}:4", f"{path}:5"]
    assert trace.problems[2].endswith(": 19 fields, SWF has 18")
    assert trace.skipped_deadlines == 3 and read_swf(path, CATALOGUE, rule=None).skipped_deadlines == 0


def test_swf_job_numbers_are_unique(tmp_path: Path) -> None:
    row = " 0 10 600 2 -1 -1 2 -1 -1 1 1 1 -1 1 -1 -1 -1\n"
    path = _write(tmp_path, "1" + row + "2" + row + "1" + row, "t.swf")
    trace = read_swf(path, CATALOGUE)
    assert len(trace.jobs) == 2
    assert trace.problems == (f"{path}:3: job number '1' repeats line 1",)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31))
def test_generator_is_reproducible(seed: int) -> None:
    a = synthetic(50, CATALOGUE, seed=seed, gpu_share=0.5)
    b = synthetic(50, CATALOGUE, seed=seed, gpu_share=0.5)
    assert a == b
    assert all(j.steps >= 1 and j.deadline is not None and j.deadline > j.submit for j in a)
    assert [j.submit for j in a] == sorted(j.submit for j in a)


def test_generator_gpu_mix_and_round_trip(tmp_path: Path) -> None:
    jobs = synthetic(4000, CATALOGUE, seed=3)
    share = {g: sum(1 for j in jobs if j.gpu == g) / len(jobs) for g in DEFAULT_GPU_MIX}
    for g, expected in DEFAULT_GPU_MIX.items():
        assert share[g] == pytest.approx(expected, abs=0.02)
    out = tmp_path / "gen.csv"
    write_csv(jobs[:20], out)
    back = read_csv(out, CATALOGUE)
    assert back.skipped == 0
    assert [(j.steps, j.gpu, j.model, j.cpu_milli) for j in back.jobs] == [
        (j.steps, j.gpu, j.model, j.cpu_milli) for j in jobs[:20]
    ]


def test_cpu_jobs_over_provision() -> None:
    jobs: tuple[Job, ...] = synthetic(500, CATALOGUE, seed=5, gpu_share=0.0)
    assert all(j.gpu == 0 for j in jobs)
    assert sum(1 for j in jobs if j.cpu_milli >= 8000) > 100


HEADER = "job_id,submission_time,duration,num_gpu,num_iteration,deadline,num_cpu,batch_size,memory\n"


@pytest.mark.parametrize(
    ("cells", "problem"),
    [
        ("a,1e300,600,0,,,,,", "submission_time '1e300' must be a number from 0 to 10,000,000,000"),
        ("a,inf,600,0,,,,,", "submission_time 'inf' is not a number"),
        ("a,nan,600,0,,,,,", "submission_time 'nan' is not a number"),
        ("a,1_000,600,0,,,,,", "submission_time '1_000' is not a number"),
        ("a,\u0663,600,0,,,,,", "submission_time '\u0663' is not a number"),  # an Arabic-Indic 3
        ("a,\uff11\uff10,600,0,,,,,", "is not a number"),  # full-width digits
        ("a,0,-600,0,,,,,", "duration '-600' must be a number from 0"),
        ("a,0,1e300,0,,,,,", "duration '1e300'"),
        # A running job is looked at every reconcile: one of 1e9 s took 443 s to replay alone.
        ("a,0,31622401,0,,,,,", "duration '31622401' must be a number from 0 to 31,622,400"),
        ("a,0,600,1e30,,,,,", "num_gpu '1e30' must be a number from 0 to 4,096"),
        ("a,0,,0,1e300,,,,", "num_iteration '1e300' must be a number from 1 to 9,999,999,999,999,999"),
        ("a,0,,0,99999999999999999999,,,,", "num_iteration"),
        # 16 digits, the most allowed, read exactly (through a float it was 1e16, "out of range"):
        # refused only for the years it would run.
        ("a,0,,0,9999999999999999,,,,", "more than 31,622,400 (366 days)"),
        ("a,0,600,0,,nan,,,", "deadline 'nan'"),
        ("a,0,600,0,,,1e300,,", "num_cpu '1e300'"),
        ("a,0,600,0,,,,9e18,", "batch_size '9e18'"),
        ("a,0,,0,1000000000000,,,,", "runs"),  # 1e12 steps of a CPU model: beyond 1e10 s
        ("a,0,,0,100000000000,,,,", "more than 31,622,400 (366 days)"),  # 1e11 steps: beyond a year
        # The steps run, not the duration beside them (which passed the bound, and the run went on for ever).
        ("a,0,600,0,100000000000,,,,", "more than 31,622,400 (366 days)"),
        ("a,0,600,0,,,,,1e300", "memory '1e300' is not a Kubernetes quantity the scheduler can count"),
    ],
)
def test_numeric_cells_are_finite_and_bounded(tmp_path: Path, cells: str, problem: str) -> None:
    path = _write(tmp_path, HEADER + "ok,0,600,0,,,,,\n" + cells + "\n")
    trace = read_csv(path, CATALOGUE)
    assert len(trace.jobs) == 1 and len(trace.problems) == 1
    assert trace.problems[0].startswith(f"{path}:3: ") and problem in trace.problems[0], trace.problems[0]


def test_a_cell_over_128_kib_is_an_error_naming_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + "ok,0,600,0,,,,,\n" + 'big,0,600,0,,,,,"' + "x" * (128 * 1024 + 1) + '"\n')
    with pytest.raises(TraceError, match=rf"{path}:3: field larger than field limit \(131072\)"):
        read_csv(path, CATALOGUE)


def test_binary_and_non_utf8_traces_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b"PK\x03\x04\x00\x00 a zip archive")
    with pytest.raises(TraceError, match="a binary file, not text"):
        read_csv(path, CATALOGUE)
    path.write_bytes(HEADER.encode() + b"ok,0,600,0,,,,,\nb\xe9,0,600,0,,,,,\n")
    with pytest.raises(TraceError, match=rf"{path}:3: not UTF-8 text"):
        read_csv(path, CATALOGUE)
    path.write_text(HEADER + "x" * (2 * 1024 * 1024) + "\n")
    with pytest.raises(TraceError, match=rf"{path}:2: line longer than"):
        read_csv(path, CATALOGUE)


def test_swf_numbers_are_bounded_too(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "; SWF\n1 0 10 3600 4 -1 -1 4 7200 -1 1 1 1 -1 1 -1 -1 -1\n"
        "2 1e300 5 inf -1 -1 -1 nan 3600 -1 1 1 1 -1 1 -1 -1 -1\n",
        "t.swf",
    )
    trace = read_swf(path, CATALOGUE)
    # Named by the SWF field, not by the CSV column it is read as.
    assert len(trace.jobs) == 1 and trace.problems[0].startswith(f"{path}:3: field 2 (submit time) '1e300'")
    path.write_text(
        "; SWF\n1 0 10 -1 -1 -1 -1 -1 7200 -1 1 1 1 -1 1 -1 -1 -1\n2 0 10 60 -1 -1 -1 -3 0 -1 1 1 1 -1 1 -1 -1 -1\n"
    )
    problems = read_swf(path, CATALOGUE).problems
    assert problems[0].startswith(f"{path}:2: field 4 (run time) '-1' must be a number from 0"), problems
    assert problems[1].startswith(f"{path}:3: field 8 (requested processors) '-3'"), problems


def test_the_row_count_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traces, "MAX_TRACE_ROWS", 3)
    path = _write(tmp_path, HEADER + "".join(f"j{i},0,600,0,,,,,\n" for i in range(4)))
    with pytest.raises(TraceError, match=rf"{path}:5: more than 3 rows"):
        read_csv(path, CATALOGUE)


def test_deadline_rule_factors_are_bounded() -> None:
    for bad in ("1,1e300", "0.5,inf", "nan,1", "1,11"):
        with pytest.raises(ValueError, match=r"need 0 < LO <= HI <= 10|not accepted"):
            parse_deadline_rule(bad)


def test_elasticflow_column_names_and_a_byte_order_mark_load(tmp_path: Path) -> None:
    path = _write(tmp_path, "\ufeffjob_id,submit_time,iteration,model_name,ddl,num_gpu\na,10,500,resnet50,900,1\n")
    loaded = read_csv(path, CATALOGUE)
    assert loaded.problems == ()
    (job,) = loaded.jobs
    assert (job.submit, job.steps, job.deadline, job.gpu) == (10.0, 500, 900.0, 1)
    # Both names of one column: which one a row means is not known, so the header is refused.
    both = _write(tmp_path, "job_id,submission_time,num_iteration,deadline,ddl\na,5,100,50,900\n", "both.csv")
    twice = r"both.csv:1: header names a column more than once: 'deadline \(deadline, ddl\)'"
    with pytest.raises(TraceError, match=twice):
        read_csv(both, CATALOGUE)


def test_repeated_job_ids_and_deadlines_before_submission_are_reported_per_line(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + "a,0,600,0,,,,,\nb,100,600,0,,,,,\na,50,600,0,,,,,\n")
    loaded = read_csv(path, CATALOGUE)
    assert [j.submit for j in loaded.jobs] == [0.0, 100.0]
    assert loaded.problems == (f"{path}:4: job_id 'a' repeats line 2",)
    early = _write(tmp_path, "job_id,submission_time,num_iteration,deadline\nx,100,10,50\ny,0,10,50\n", "early.csv")
    loaded = read_csv(early, CATALOGUE)
    assert [j.submit for j in loaded.jobs] == [0.0]
    assert loaded.problems == (f"{early}:2: deadline 50 is before submission_time 100",)


def test_a_duration_of_more_steps_than_a_step_count_holds_is_reported_per_line(tmp_path: Path) -> None:
    tiny = CpuModel("tiny", 100, 0, 1e-14, 0.5, 4)  # 1e-14 s a step: 600 s is about 1e17 steps
    catalogue = Catalogue({**CATALOGUE.models, "tiny": tiny})
    path = _write(tmp_path, "job_id,submission_time,duration,model_name\nok,0,600,lstm\nbig,0,600,tiny\n")
    trace = read_csv(path, catalogue)
    assert [j.model for j in trace.jobs] == ["lstm"]
    (problem,) = trace.problems
    assert problem.startswith(f"{path}:3: duration 600 s is ") and "e+17 steps of model tiny at " in problem
    assert problem.endswith("s a step, more than 9,999,999,999,999,999")
    assert trace.skipped_deadlines == 1


def test_a_job_id_repeating_a_skipped_row_is_reported_too(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + "a,0,-5,0,,,,,\na,10,600,0,,,,,\nb,0,600,0,,,,,,extra\nb,20,600,0,,,,,\n")
    loaded = read_csv(path, CATALOGUE)
    assert loaded.jobs == ()
    assert [p.split(": ", 1)[1] for p in loaded.problems] == [
        "duration '-5' must be a number from 0 to 31,622,400",
        "job_id 'a' repeats line 2",
        "more cells than header columns",
        "job_id 'b' repeats line 4",
    ]
    row = " 0 10 600 2 -1 -1 2 -1 -1 1 1 1 -1 1 -1 -1 -1\n"
    swf = _write(tmp_path, "1 0 10\n1" + row + "2 inf" + row[2:] + "2" + row, "t.swf")
    trace = read_swf(swf, CATALOGUE)
    assert trace.jobs == ()
    assert [p.split(": ", 1)[1] for p in trace.problems] == [
        "3 fields, SWF has 18",
        "job number '1' repeats line 1",
        "field 2 (submit time) 'inf' is not a number",
        "job number '2' repeats line 3",
    ]


def test_an_swf_trace_read_through_a_pipe_loses_no_job(tmp_path: Path) -> None:
    """The first line is read to tell SWF from CSV: the SWF reader goes on from there, where
    opening the path again lost the pipe's first block of jobs."""
    fifo = tmp_path / "trace.swf"
    os.mkfifo(fifo)
    text = "; Version: 2.2\n" + "".join(
        f"{i} {i * 10} 5 600 2 -1 -1 2 600 -1 1 1 1 1 1 1 -1 -1\n" for i in range(1, 3001)
    )

    def write() -> None:
        with fifo.open("w") as out:
            out.write(text)

    writer = threading.Thread(target=write)
    writer.start()
    trace = read_csv(fifo, CATALOGUE)
    writer.join()
    assert (len(trace.jobs), trace.problems) == (3000, ())


def test_a_bad_row_changes_no_draw_of_the_rows_after_it(tmp_path: Path) -> None:
    rows = ["c,0,600,0,,,3,,", "d,10,900,0,,,5,,"]
    good = read_csv(_write(tmp_path, HEADER + "a,0,600,0,,,,,\nb,5,600,0,,,,,\n" + "\n".join(rows) + "\n"), CATALOGUE)
    bad = read_csv(_write(tmp_path, HEADER + "a,0,600,0,,,,,\nb,5,-1,0,,,,,\n" + "\n".join(rows) + "\n"), CATALOGUE)
    assert len(bad.problems) == 1

    def drawn(trace: traces.Trace) -> list[tuple[str, float | None, int]]:
        return [(j.model, j.deadline, j.steps) for j in trace.jobs if j.cpu_milli in (3000, 5000)]

    assert drawn(bad) == drawn(good) and len(drawn(good)) == 2


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_batch_size_without_a_model_draws_among_the_models_that_measure_it(tmp_path: Path, seed: int) -> None:
    text = "job_id,submission_time,duration,num_gpu,batch_size\n" + "".join(
        f"j{i},{i * 10},600,1,32\n" for i in range(10)
    )
    trace = read_csv(_write(tmp_path, text), CATALOGUE, seed=seed)
    assert trace.problems == () and len(trace.jobs) == 10
    assert all(32 in CATALOGUE.models[j.model].tables for j in trace.jobs)  # type: ignore[union-attr]
