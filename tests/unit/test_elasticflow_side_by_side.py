"""perf/elasticflow_side_by_side.py without an ElasticFlow checkout: argument and environment
errors, the reading of ElasticFlow's output and job log, and one run against a stand-in scheduler.py."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "perf" / "elasticflow_side_by_side.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("elasticflow_side_by_side", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


side = _load()

# A made-up run: progress lines each round, the closing pair last.
OUTPUT = textwrap.dedent(
    """\
    round at 100
    accepted jobs: 1
    declined jobs: 0
    job 2 ends at 900
    accepted jobs: 3
    declined jobs: 1
    """
)
JOB_LOG = textwrap.dedent(
    """\
    time,job_id,num_gpu,submit_time,start_time,end_time,ddl
    500.0,a,2,0,0,500.0,600
    700.0,b,1,10,10,700.0,700
    960.0,c,4,20,20,960.0,900
    """
)


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_without_the_variable_it_exits_2_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ELASTICFLOW_DIR", raising=False)
    assert side.main(["--trace", "195job"]) == 2
    assert "ELASTICFLOW_DIR is not set" in _one_line_error(capsys)


def test_a_directory_that_is_no_checkout_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("ELASTICFLOW_DIR", str(tmp_path))
    assert side.main(["--trace", "cluster10"]) == 2
    line = _one_line_error(capsys)
    assert "ELASTICFLOW_DIR" in line and "not a checkout" in line


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--trace", "no-such-trace.csv"], "no such file"),
        (["--ef-policies", "edf,fifo-ish"], "fifo-ish"),
        (["--pysched-arg", "--elastic"], "--pysched-arg=--flag"),
        (["--cluster", "nodes=two"], "--cluster"),
        (["--ef-slot", "0"], "--ef-slot"),
        (["--nonsense"], "unrecognized"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], words: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("ELASTICFLOW_DIR", str(_fake_checkout(tmp_path)))
    assert side.main(argv) == 2
    assert words in _one_line_error(capsys)


def test_a_trace_of_its_own_needs_a_cluster(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = tmp_path / "mine.csv"
    trace.write_text("job_id,submission_time,duration,deadline\nx,0,10,20\n")
    monkeypatch.setenv("ELASTICFLOW_DIR", str(_fake_checkout(tmp_path)))
    assert side.main(["--trace", str(trace)]) == 2
    assert "--cluster is required" in _one_line_error(capsys)


def test_the_closing_counts_are_the_last_pair_and_the_recount_is_strict() -> None:
    counts = side.parse_elasticflow_output(OUTPUT, JOB_LOG)
    assert (counts.accepted, counts.declined, counts.jobs) == (3, 1, 4)
    assert counts.strict_met == 2  # c ended at 960, after its deadline 900; b exactly at it counts
    assert side.parse_elasticflow_output(OUTPUT).strict_met is None


def test_output_in_another_format_is_a_clear_error() -> None:
    with pytest.raises(side.ElasticFlowFormatError, match="not in a recognised format"):
        side.parse_elasticflow_output("finished: 3 of 4 jobs met their deadline\n")
    with pytest.raises(side.ElasticFlowFormatError, match=r"job\.csv.*no ddl"):
        side.parse_elasticflow_output(OUTPUT, "job_id,end_time\na,5\n")
    with pytest.raises(side.ElasticFlowFormatError, match=r"job\.csv.*line"):
        side.parse_elasticflow_output(OUTPUT, "job_id,end_time,ddl\na,soon,5\n")


def test_the_cluster_spec_follows_pyscheds_cluster() -> None:
    spec = side.elasticflow_cluster("nodes=16,cpu=64,memory=256Gi,gpu=8")
    assert spec.splitlines() == [
        "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node",
        "1,16,8,64,256",
    ]


def test_pysched_rows_use_every_job_as_the_denominator() -> None:
    data = {"policies": {"edf": {"jobs": 10, "deadline_jobs": 8, "deadline_met": 4, "unfinished": 1}}}
    (row,) = side.rows_from_pysched(data)
    assert (row.policy, row.side, row.met, row.jobs, row.ratio) == ("edf", "pysched", 4, 10, 0.4)
    with pytest.raises(side.RunError):
        side.rows_from_pysched({"policies": {"edf": {"jobs": 10}}})


# A stand-in for ElasticFlow's scheduler.py: checks the flags it is given and writes OUTPUT / JOB_LOG.
FAKE_SCHEDULER = f"""
import sys
flags = dict(a[2:].split("=", 1) for a in sys.argv[1:])
assert flags["simulation"] == "True" and flags["schedule"] == "ef-accessctrl", flags
assert open(flags["cluster_spec"]).read().splitlines()[1] == "1,16,8,64,256"
open(flags["log_path"] + "/job.csv", "w").write({JOB_LOG!r})
print("slot", flags["scheduling_slot"])
print({OUTPUT!r})
"""


def _fake_checkout(tmp_path: Path) -> Path:
    scheduler = tmp_path / "ef" / "ElasticFlow" / "scheduler"
    (scheduler / "throughputs_A100").mkdir(parents=True, exist_ok=True)
    (scheduler / "scheduler.py").write_text(FAKE_SCHEDULER)
    return tmp_path / "ef"


def test_an_elasticflow_run_is_read_from_its_output_and_job_log(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ELASTICFLOW_DIR", str(_fake_checkout(tmp_path)))
    monkeypatch.setenv("ELASTICFLOW_PYTHON", sys.executable)
    args = side.parse_args(["--trace", "195job", "--ef-policies", "ef-accessctrl"])
    work = tmp_path / "work"
    work.mkdir()
    plan = side.make_plan(args, work)
    assert plan.slot == 240 and plan.cluster == "nodes=16,cpu=64,memory=256Gi,gpu=8"
    row = side.run_elasticflow(plan, "ef-accessctrl")
    assert (row.side, row.met, row.jobs) == ("ElasticFlow", 2, 4)
    assert "its own count 3" in row.note and "1 of them ended after their deadline" in row.note
    assert "slot 240" in (work / "elasticflow-ef-accessctrl" / "stdout.log").read_text()
