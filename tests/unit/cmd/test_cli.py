import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pysched import __version__
from pysched.cmd.cli import build_parser, main
from pysched.sim.plots import same_curves
from pysched.sim.runner import PolicyResult
from pysched.testing.hostile import alias_bomb


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out == f"pysched {__version__}\n"
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"pysched {__version__}\n"


def test_bare_pysched_prints_its_commands_and_exits_0() -> None:
    for command in ([sys.executable, "-m", "pysched"], [sys.executable, "-m", "pysched.cmd.cli"]):
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("usage: pysched")
        for name in ("simulate", "bench", "run", "status", "explain", "dev-cluster", "version"):
            assert name in result.stdout


def test_simulate_writes_the_documented_json(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    assert main(["simulate", "--policy", "default", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data) == {"cluster", "workload", "policies"}
    result = data["policies"]["default"]
    assert set(result) == {
        "jobs",
        "deadline_jobs",
        "deadline_met",
        "deadline_met_ratio",
        "cpu_utilization",
        "mean_jct_s",
        "mean_queue_s",
        "makespan_s",
        "rescales",
        "skipped",
        "unfinished",
    }
    # the default `small` scenario: 200 jobs, all with deadlines, none too big for the cluster
    assert result["jobs"] + result["skipped"] == 200 and 0 < result["deadline_met"] <= result["deadline_jobs"]
    assert result["deadline_met_ratio"] == round(result["deadline_met"] / result["deadline_jobs"], 4)
    assert result["makespan_s"] > 0 and 0 < result["cpu_utilization"] <= 1
    assert data["cluster"]["nodes"] == 8 and data["workload"]["name"] == "small"


def test_simulate_takes_profiles_from_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "packing.yaml"
    config.write_text(
        "profiles:\n"
        "  - schedulerName: packing\n"
        "    plugins:\n"
        "      queueSort: [{name: PrioritySort}]\n"
        "      filter: [{name: TaintToleration}, {name: NodeResourcesFit}]\n"
        "      score: [{name: MostAllocated}]\n"
        "      bind: [{name: DefaultBinder}]\n"
    )
    out = tmp_path / "sim.json"
    assert main(["simulate", "--config", str(config), "--policy", "packing", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["policies"]["packing"]["jobs"] > 150


def test_a_weights_file_spoiled_between_policies_shows_the_finished_ones_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each policy builds its plugins when its turn comes, reading their files again."""
    import pysched.sim.runner as runner
    from pysched.plugins.learned_queue_sort import BUILTIN_PATH

    weights = tmp_path / "w.json"
    weights.write_text(BUILTIN_PATH.read_text())
    config = tmp_path / "learned.yaml"
    config.write_text(
        "profiles:\n- schedulerName: lq\n  plugins:\n    queueSort: [{name: LearnedQueueSort}]\n"
        "    filter: [{name: NodeResourcesFit}]\n    bind: [{name: DefaultBinder}]\n"
        f"  pluginConfig:\n  - name: LearnedQueueSort\n    args: {{weights: {weights}}}\n"
    )
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submission_time,num_iteration\na,0,100\nb,10,100\n")
    real = runner.run_policy

    async def then_spoil(*args: object, **kwargs: object) -> PolicyResult:
        result = await real(*args, **kwargs)  # type: ignore[arg-type]
        weights.write_text('{"format": "pysched.io/queue-policy", "sch')  # replaced by a truncated copy
        return result

    monkeypatch.setattr(runner, "run_policy", then_spoil)
    out = tmp_path / "sim.json"
    argv = ["simulate", "--config", str(config), "--trace", str(trace), "--json", str(out)]
    assert main([*argv, "--policy", "default", "--policy", "lq"]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("pysched: error: policy lq could not start: lq: pluginConfig.LearnedQueueSort.args.weights:")
    assert "not JSON" in last
    assert "default" in captured.out and "lq" not in captured.out  # the finished policy's row
    assert not out.exists()  # no output file of a run cut short


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pysched.cmd.cli", *args], capture_output=True, text=True, timeout=120)


def test_broken_profile_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(
        "profiles:\n  - schedulerName: x\n    plugins:\n"
        "      queueSort: [{name: PrioritySort}]\n      bind: [{name: Nope}]\n"
    )
    result = _cli("simulate", "--config", str(config))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert str(config) in lines[0] and "profiles[0].plugins.bind[0].name: unknown plugin 'Nope'" in lines[0]


def test_unknown_policy_and_bad_flags_exit_2_with_one_line() -> None:
    result = _cli("simulate", "--policy", "nosuch")
    assert (
        result.returncode == 2
        and len(result.stderr.strip().splitlines()) == 1
        and "unknown policy 'nosuch'" in result.stderr
    )
    result = _cli("bench", "--nodes", "x", "--pods", "1")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_bench_reports_the_documented_fields(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert main(["bench", "--nodes", "50", "--pods", "200", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {"nodes", "pods", "seconds", "pods_per_second", "p50_ms", "p99_ms", "peak_rss_mb"} <= set(data)
    assert data["nodes"] == 50 and data["pods"] == 200 and data["scheduled"] > 150


def _one_line_exit_2(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_bad_workload_flags_exit_2_with_the_accepted_values(tmp_path: Path) -> None:
    _one_line_exit_2(_cli("simulate", "--scenario", "nosuch"), "seed-insufficient", "gpu-mixed")
    _one_line_exit_2(_cli("simulate", "--cluster", "nodes=two"), "nodes=8,cpu=32,memory=128Gi,gpu=0")
    _one_line_exit_2(_cli("simulate", "--deadline-rule", "soon"), "none")
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,submission_time,duration\n1,-1,10\n2,0,abc\n")
    _one_line_exit_2(_cli("simulate", "--trace", str(bad)), "no valid row", f"{bad}:2")


def test_trace_run_reports_skipped_rows_and_writes_plots(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"
        "1,0,2000,lstm,4000,,0,\n"
        "2,10,,resnet50,,64,1,600\n"
        "3,20,,resnet50,,64,16,600\n"
        "4,30,,nosuch,,,0,600\n"
    )
    out, plots = tmp_path / "sim.json", tmp_path / "plots"
    result = _cli(
        "simulate",
        "--trace",
        str(trace),
        "--cluster",
        "nodes=2,cpu=32,memory=128Gi,gpu=8",
        "--policy",
        "default",
        "--policy",
        "seed",
        "--json",
        str(out),
        "--plot",
        str(plots),
    )
    assert result.returncode == 0, result.stderr
    assert f"{trace}:5: unknown model 'nosuch'" in result.stderr
    assert f"{trace}:4" not in result.stderr  # 16 GPUs on 8-GPU nodes: a gang of two pods, not skipped
    data = json.loads(out.read_text())
    for policy in ("default", "seed"):
        result_of = data["policies"][policy]  # the bad row is a job of the workload, its deadline missed
        assert (result_of["jobs"], result_of["deadline_jobs"], result_of["skipped"]) == (4, 4, 1)
    assert data["cluster"] == {"nodes": 2, "cpu": 64.0, "gpu": 16}
    assert (data["workload"]["jobs"], data["workload"]["bad_rows"]) == (3, 1)  # together the policies' 4 jobs
    assert "3 jobs (and 1 bad row) on 2 nodes" in result.stdout
    assert sorted(p.name for p in plots.iterdir()) == ["cpu_allocated_vs_used.png", "deadline_met.png", "jct_cdf.png"]


def test_an_alias_bomb_profile_exits_2_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bomb.yaml"
    config.write_text(alias_bomb(top="profiles"))
    result = _cli("simulate", "--config", str(config))
    _one_line_exit_2(result, str(config), "aliases expand to more than 10,000 nodes")
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "a binary file, not text"),
        ("profiles: [{schedulerName: caf\xe9}]\n".encode("latin-1"), "not UTF-8 text"),
        (("[" * 50_000).encode(), "nest"),
    ],
)
def test_unreadable_profile_files_exit_2_in_one_line(tmp_path: Path, content: bytes, needle: str) -> None:
    config = tmp_path / "p.yaml"
    config.write_bytes(content)
    result = _cli("simulate", "--config", str(config))
    _one_line_exit_2(result, str(config), needle)
    assert "Traceback" not in result.stderr


def test_a_tiny_reconcile_interval_is_refused_before_the_simulation(tmp_path: Path) -> None:
    config = tmp_path / "p.yaml"
    config.write_text(
        "profiles:\n  - schedulerName: fast\n    plugins:\n"
        "      queueSort: [{name: EarliestDeadline}]\n      bind: [{name: DefaultBinder}]\n"
        "      reconcile: [{name: SeedRestart}]\n"
        "    pluginConfig: [{name: SeedRestart, args: {intervalSeconds: 1.0e-300}}]\n"
    )
    _one_line_exit_2(_cli("simulate", "--config", str(config)), "args.intervalSeconds: must be >= 0.1 and <= 86400")


@pytest.mark.parametrize(
    ("cluster", "needle"),
    [
        ("cpu=1Ei", "--cluster: cpu=1Ei: "),
        ("nodes=1000000000", "1,000,000,000 nodes, more than 100,000"),
        ("nodes=99999,memory=1Pi", "memory adds up to more than 2**53 units"),
    ],
)
def test_huge_clusters_exit_2_before_any_node_is_built(
    cluster: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--policy", "default", "--cluster", cluster]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err


def test_traces_with_oversized_cells_or_bad_bytes_exit_2_naming_the_line(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text('job_id,submission_time,duration\n1,0,600\n2,0,"' + "x" * 200_000 + '"\n')
    _one_line_exit_2(_cli("simulate", "--trace", str(trace)), f"{trace}:3: field larger than field limit")
    trace.write_bytes(b"job_id,submission_time,duration\n1,0,600\n2,0,6\xff0\n")
    _one_line_exit_2(_cli("simulate", "--trace", str(trace)), f"{trace}:3: not UTF-8 text")


def test_every_flag_of_every_command_has_help() -> None:
    def missing(parser: argparse.ArgumentParser, path: str) -> list[str]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found += missing(sub, f"{path} {name}")
            elif not action.help and action.dest != "help":
                found.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
        return found

    assert missing(build_parser(), "pysched") == []


def test_jobs_csv_has_one_row_per_policy_and_job_agreeing_with_the_json(tmp_path: Path) -> None:
    out, table = tmp_path / "sim.json", tmp_path / "out" / "jobs.csv"
    args = ["simulate", "--policy", "default", "--policy", "pysched", "--json", str(out), "--jobs-csv", str(table)]
    assert main(args) == 0
    summary = json.loads(out.read_text())["policies"]
    with table.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for policy in ("default", "pysched"):
        mine = [r for r in rows if r["policy"] == policy]
        assert len(mine) == summary[policy]["jobs"] == 200
        assert sum(r["met"] == "true" for r in mine) == summary[policy]["deadline_met"]
        assert sum(int(r["rescales"]) for r in mine) == summary[policy]["rescales"]
    rescaled = next(r for r in rows if r["policy"] == "pysched" and int(r["rescales"]) > 0 and r["cpu_segments"])
    segments = [s.partition(":") for s in rescaled["cpu_segments"].split(";")]
    assert len(segments) >= 2 and len({cpus for _, _, cpus in segments}) >= 2  # the CPUs it held changed
    start = float(segments[0][0].split("-")[0])
    assert abs(start - float(rescaled["started_s"])) <= 1
    assert float(rescaled["finished_s"]) >= float(segments[-1][0].split("-")[1]) - 1


def test_jobs_csv_names_each_job_by_the_traces_id(tmp_path: Path) -> None:
    """Rows were named by their place among the valid rows only, which no trace id matched."""
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submission_time,duration\nalpha,0,600\nbeta,5,-1\ngamma,10,600\n")
    table = tmp_path / "jobs.csv"
    assert main(["simulate", "--trace", str(trace), "--policy", "default", "--jobs-csv", str(table)]) == 0
    with table.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["job"], r["trace_id"], r["submitted_s"]) for r in rows] == [
        ("job-00000", "alpha", "0.0"),
        ("job-00001", "gamma", "10.0"),
    ]


def test_identical_jct_curves_are_named_in_the_legend() -> None:
    def result(jct: tuple[float, ...]) -> PolicyResult:
        return PolicyResult(len(jct), 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, jct=jct)

    results = {"default": result((3.0, 1.0)), "edf": result((1.0, 3.0)), "seed": result((2.0,)), "x": result(())}
    assert same_curves(results) == {"edf": "default"}


def test_a_plot_file_that_cannot_be_written_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found after the run, it cost the run and left the JSON written with exit 2."""
    (tmp_path / "plots" / "deadline_met.png").mkdir(parents=True)
    trace = tmp_path / "one.csv"
    trace.write_text("job_id,submission_time,duration\na,0,600\n")
    out = tmp_path / "sim.json"
    argv = ["simulate", "--trace", str(trace), "--policy", "default", "--plot", str(tmp_path / "plots")]
    assert main([*argv, "--json", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"pysched: error: --plot: {tmp_path / 'plots' / 'deadline_met.png'} is a folder"
    ]
    assert captured.out == "" and not out.exists()


def test_a_run_without_deadline_jobs_shows_no_ratio(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ratio of "0/0  0.0%" read as every deadline missed."""
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submission_time,duration\na,0,600\n")
    assert main(["simulate", "--trace", str(trace), "--deadline-rule", "none", "--policy", "default"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("default"))
    assert row.split()[1:3] == ["0/0", "-"]


def test_an_swf_trace_is_known_by_its_extension_in_any_case(tmp_path: Path) -> None:
    """Without a leading `;` comment, `T.SWF` was read as CSV and refused for its header."""
    trace = tmp_path / "T.SWF"
    trace.write_text("1 0 5 600 2 -1 -1 2 600 -1 1 1 1 1 1 1 -1 -1\n")
    out = tmp_path / "sim.json"
    assert main(["simulate", "--trace", str(trace), "--policy", "default", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["policies"]["default"]["jobs"] == 1


UNLIKE_WEIGHTS = """
profiles:
  - schedulerName: a
    plugins:
      queueSort: [{name: PrioritySort}]
      filter: [{name: NodeResourcesFit}]
      score: [{name: LeastAllocated, weight: 1}, {name: MostAllocated, weight: 1}]
      bind: [{name: DefaultBinder}]
    pluginConfig:
      - {name: MostAllocated, args: {cpuWeight: 2, memoryWeight: 1}}
"""


def test_a_profile_whose_plugins_cannot_be_built_together_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LeastAllocated and MostAllocated with unlike resource weights pass each plugin's own
    checks: `simulate` ran every other policy first and then blamed a file change, `pysched run`
    connected and crashed with a traceback (a Deployment in a crash loop)."""
    profile = tmp_path / "profiles.yaml"
    profile.write_text(UNLIKE_WEIGHTS)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    told = "a: pluginConfig: LeastAllocated and MostAllocated: must use the same resource weights"
    assert main(["simulate", "--config", str(profile), "--policy", "default", "--policy", "a"]) == 2
    out, err = capsys.readouterr()
    assert told in err and "default" not in out  # nothing ran
    assert main(["run", "--config", str(profile), "--kubeconfig", str(kubeconfig)]) == 2
    assert capsys.readouterr().err.strip() == f"pysched run: error: {told}"
