import os
from pathlib import Path

import pytest

from pysched.cmd.cli import main
from pysched.cmd.flags import clash_problem, dns_problem, number_problem, output_problem
from pysched.cmd.run import main as run_main
from pysched.testing.hostile import alias_bomb


def _exit_2_one_line(code: int, capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2 and len(lines) == 1, captured.err
    assert "Traceback" not in captured.err and captured.out == ""  # refused before any work
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0", "1e-300", "1e300"])
def test_simulate_progress_interval_must_be_finite_and_in_range(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", f"--progress-interval={value}"])
    _exit_2_one_line(code, capsys, "--progress-interval: must be >= 1 and <= 86400")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--nodes", "1000000000", "--pods", "1"], "--nodes: must be >= 1 and <= 100000"),
        (["--nodes", "1", "--pods", "100000000000"], "--pods: must be >= 1 and <= 200000"),
        (["--nodes", "0", "--pods", "1"], "--nodes: must be >= 1"),
    ],
)
def test_bench_sizes_are_capped_before_anything_is_built(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _exit_2_one_line(main(["bench", *argv]), capsys, needle)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--qps", "nan"], "--qps: must be >= 0 and <= 100000, got nan"),
        (["--qps", "-1"], "--qps: must be >= 0"),
        (["--qps", "1e300"], "--qps: must be >= 0 and <= 100000"),
        (["--burst", "0"], "--burst: must be >= 1"),
        (["--event-qps", "inf"], "--event-qps: must be >= 0 and <= 100000, got inf"),
        (["--event-burst", "10000000000"], "--event-burst"),
        (["--max-binds-in-flight", "1000000000"], "--max-binds-in-flight: must be >= 1 and <= 10000"),
        (["--lease-duration", "inf"], "--lease-duration: must be >= 1 and <= 3600, got inf"),
        (["--lease-duration", "nan"], "--lease-duration"),
        (["--renew-deadline", "0"], "--renew-deadline: must be > 0"),
        (["--renew-deadline=-inf"], "--renew-deadline"),
        (["--retry-period", "1e-300"], "--retry-period: must be >= 0.01"),
        (["--retry-period", "nan"], "--retry-period"),
        (["--lease-name", "UPPER_bad!"], "--lease-name: 'UPPER_bad!' is not a Kubernetes name (1 to 253"),
        (["--lease-name", "a" * 300], "--lease-name: "),
        (["--lease-namespace", "Bad_NS"], "--lease-namespace: 'Bad_NS' is not a Kubernetes name (1 to 63"),
        (["--kubeconfig", ""], "--kubeconfig: a file name is needed"),
        (["--config", ""], "--config: a file name is needed"),
    ],
)
def test_run_float_flags_are_finite_and_in_range(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _exit_2_one_line(run_main(argv), capsys, "pysched run: error: ", needle)


def test_run_refuses_a_kubeconfig_bomb_before_the_client_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(alias_bomb())
    _exit_2_one_line(run_main(["--kubeconfig", str(kubeconfig)]), capsys, "--kubeconfig: ", "aliases expand")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--emulate-time-scale", "inf"], "--emulate-time-scale: must be > 0"),
        (["--emulate-time-scale", "nan"], "--emulate-time-scale"),
        (["--emulate-time-scale", "0"], "--emulate-time-scale"),
        (["--nodes", "1000000"], "--nodes: must be >= 0 and <= 5000"),
        (["--node-cpu", "-1"], "--node-cpu must be a non-negative quantity"),
        (["--node-memory", "lots"], "--node-memory must be a non-negative quantity"),
    ],
)
def test_dev_cluster_flags_are_checked_first(
    tmp_path: Path, argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["dev-cluster", "up", "--dir", str(tmp_path / "dev"), *argv])
    _exit_2_one_line(code, capsys, needle)
    assert not (tmp_path / "dev").exists()


def test_number_problem_names_the_flag() -> None:
    assert number_problem("--x", 5, 0, 10) is None
    assert number_problem("--x", float("nan"), 0, 10) == "--x: must be >= 0 and <= 10, got nan"


def test_output_paths_that_cannot_be_written(tmp_path: Path) -> None:
    regular = tmp_path / "file.txt"
    regular.write_text("keep")
    assert (
        output_problem("--json", str(regular / "out.json"))
        == f"--json: {regular / 'out.json'}: {regular} is not a folder"
    )
    assert "is not a folder" in str(output_problem("--json", str(regular / "deeper" / "out.json")))
    assert output_problem("--json", str(tmp_path)) == f"--json: {tmp_path} is a folder"
    assert output_problem("--plot", str(regular), folder=True) == f"--plot: {regular} is not a folder"
    assert "is not a folder" in str(output_problem("--plot", str(regular / "plots"), folder=True))
    assert regular.read_text() == "keep"


def test_writable_outputs_leave_nothing_behind(tmp_path: Path) -> None:
    assert output_problem("--json", str(tmp_path / "out.json")) is None
    assert output_problem("--json", str(tmp_path / "new" / "dir" / "out.json")) is None  # created by the writer
    assert output_problem("--plot", str(tmp_path / "plots"), folder=True) is None
    assert list(tmp_path.iterdir()) == []
    existing = tmp_path / "old.json"
    existing.write_text("previous run")
    assert output_problem("--json", str(existing)) is None
    assert existing.read_text() == "previous run"  # not truncated by the check


def test_unwritable_outputs_exit_2_before_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    regular = tmp_path / "file.txt"
    regular.write_text("")
    code = main(["simulate", "--policy", "default", "--json", str(regular / "sim.json")])
    _exit_2_one_line(code, capsys, "--json: ", "is not a folder")
    code = main(["simulate", "--policy", "default", "--plot", str(regular)])
    _exit_2_one_line(code, capsys, "--plot: ", "is not a folder")
    code = main(["bench", "--nodes", "1", "--pods", "1", "--json", str(tmp_path)])
    _exit_2_one_line(code, capsys, "--json: ", "is a folder")


def test_outputs_that_would_overwrite_an_input_or_each_other_are_refused(tmp_path: Path) -> None:
    trace, out = str(tmp_path / "t.csv"), str(tmp_path / "out")
    inputs = [("--trace", trace), ("--config", None)]
    assert (
        clash_problem([("--json", trace)], inputs) == "--json: it is the file --trace reads; the run would overwrite it"
    )
    assert clash_problem([("--json", out), ("--jobs-csv", out)], inputs) == "--jobs-csv: --json writes the same file"
    nested = clash_problem([("--json", out), ("--jobs-csv", f"{out}/jobs.csv")], inputs)
    assert nested == "--jobs-csv: --json writes a file where this one needs a folder, or the other way round"
    assert clash_problem([("--json", out), ("--jobs-csv", f"{out}.csv"), ("--plot", None)], inputs) is None
    # A hard link is the same file under another name.
    (tmp_path / "t.csv").write_text("")
    os.link(trace, tmp_path / "linked.csv")
    linked = clash_problem([("--json", str(tmp_path / "linked.csv"))], inputs)
    assert linked == "--json: it is the file --trace reads; the run would overwrite it"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--json", ""], "--json: a file name is needed"),
        (["--jobs-csv", ""], "--jobs-csv: a file name is needed"),
        (["--plot", ""], "--plot: a folder name is needed"),
        (["--cluster", ""], "--cluster: '': no such file, and not an accepted spec (nodes="),
        (["--cluster", "/nonexistent/cluster.yaml"], "no such file, and not an accepted spec"),
    ],
)
def test_empty_or_missing_names_are_refused(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    _exit_2_one_line(main(["simulate", "--policy", "default", *argv]), capsys, needle)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("flag", ["--json", "--jobs-csv"])
def test_an_output_that_fails_at_the_end_is_one_line(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--policy", "default", "--cluster", "nodes=2,cpu=32,memory=128Gi", flag, "/dev/full"])
    captured = capsys.readouterr()
    assert code == 2 and "Traceback" not in captured.err
    assert captured.err.strip().splitlines()[-1] == "pysched: error: cannot write /dev/full: No space left on device"


@pytest.mark.parametrize("flag", ["--trace", "--config", "--catalogue", "--cluster", "--json", "--jobs-csv", "--plot"])
def test_a_loop_of_symbolic_links_is_refused_naming_the_flag(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loop = tmp_path / "loop1"
    loop.symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(loop)
    _exit_2_one_line(main(["simulate", "--policy", "default", flag, str(loop)]), capsys, f"{flag}: {loop}", "loop")


@pytest.mark.parametrize(("flag", "folder"), [("--plot", True), ("--json", False), ("--jobs-csv", False)])
def test_an_output_through_a_dangling_symbolic_link_is_refused_before_the_run(
    flag: str, folder: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "missing" / "x")
    needle = "is a symbolic link to nothing"
    assert needle in str(output_problem(flag, str(dangling), folder=folder))
    inside = str(output_problem(flag, str(dangling / "out"), folder=folder))
    assert inside.startswith(f"{flag}: {dangling / 'out'}: {dangling} {needle}")
    _exit_2_one_line(main(["simulate", "--policy", "default", flag, str(dangling)]), capsys, f"{flag}: ", needle)


def test_plots_share_their_folder_but_not_their_files_and_a_cluster_file_is_an_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pysched.cmd.cli import _plot_files

    plots = str(tmp_path / "out")
    assert clash_problem([("--json", f"{plots}/results.json"), *_plot_files(plots)], []) is None
    clash = clash_problem([("--json", f"{plots}/jct_cdf.png"), *_plot_files(plots)], [])
    assert clash == "--plot: --json writes the same file"
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("groups: [{count: 1, cpu: 4, memory: 8Gi}]\n")
    code = main(["simulate", "--policy", "default", "--cluster", str(cluster), "--json", str(cluster)])
    _exit_2_one_line(code, capsys, "--json: it is the file --cluster reads")
    assert cluster.read_text().startswith("groups")


def test_names_that_go_into_request_paths_are_kubernetes_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert dns_problem("--namespace", "team-a") is None and dns_problem("POD", "job-1.worker-0", subdomain=True) is None
    for bad in ("", "../../etc", "p?x=1", "-a", "a-", "A", "a" * 64):
        assert dns_problem("--namespace", bad) is not None, bad
    _exit_2_one_line(main(["explain", "../../etc"]), capsys, "pysched explain: error: POD: '../../etc' is not")
    _exit_2_one_line(main(["explain", "p", "-n", "Bad_NS"]), capsys, "--namespace: 'Bad_NS' is not")
    _exit_2_one_line(main(["status", "-n", "x/y"]), capsys, "--namespace: 'x/y' is not")


def test_a_kubeconfig_contexts_namespace_is_a_kubernetes_name_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: x}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u, namespace: 'a/../../../apis'}}]\n"
        "current-context: x\n"
    )
    needle = "the kubeconfig context's namespace: 'a/../../../apis' is not"
    _exit_2_one_line(main(["status", "--kubeconfig", str(kubeconfig)]), capsys, needle)
    _exit_2_one_line(main(["explain", "p", "--kubeconfig", str(kubeconfig)]), capsys, needle)


def test_bench_refuses_an_empty_output_and_reports_a_failed_write(capsys: pytest.CaptureFixture[str]) -> None:
    _exit_2_one_line(main(["bench", "--nodes", "1", "--pods", "1", "--json", ""]), capsys, "--json: a file name")
    if Path("/dev/full").exists():
        assert main(["bench", "--nodes", "1", "--pods", "1", "--json", "/dev/full"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == ["pysched: error: cannot write /dev/full: No space left on device"]


@pytest.mark.parametrize(
    "command",
    [["simulate"], ["bench", "--nodes", "1", "--pods", "1"], ["learn", "train", "--steps", "0", "--out", "w.json"]],
)
@pytest.mark.parametrize("seed", ["-1", "4294967296", "99999999999", "1e3", " 7", "1_0", "٣", ""])
def test_every_seed_flag_takes_0_to_2_to_the_32_minus_1(
    command: list[str], seed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """numpy's global seeding (Stable-Baselines3) refuses the rest with a traceback; the simulator
    took them silently."""
    monkeypatch.chdir(tmp_path)  # where a regression's `learn train` would write w.json
    with pytest.raises(SystemExit) as done:
        main([*command, f"--seed={seed}"])
    _exit_2_one_line(int(str(done.value.code)), capsys, "argument --seed: must be a whole number from 0 to 4294967295")


def test_the_largest_seed_is_taken() -> None:
    from pysched.api.limits import MAX_SEED
    from pysched.cmd.flags import parse_seed

    assert parse_seed("0") == 0 and parse_seed(str(MAX_SEED)) == MAX_SEED == 2**32 - 1
    assert main(["bench", "--nodes", "1", "--pods", "1", f"--seed={MAX_SEED}"]) == 0


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["simulate", "--policy=default", "--config="], "--config: a file name is needed"),
        (["simulate", "--policy=default", "--catalogue="], "--catalogue: a file name is needed"),
        (["simulate", "--policy=default", "--scenario="], "--scenario: a scenario name is needed"),
        (["simulate", "--policy=default", "--trace="], "--trace: a file name is needed"),
        (["status", "--kubeconfig="], "--kubeconfig: a file name is needed"),
        (["status", "--context="], "--context: a context name is needed"),
        (["status", "--scheduler="], "--scheduler: '' is not a Kubernetes name"),
        (["status", "--scheduler", "Bad Name"], "--scheduler: 'Bad Name' is not a Kubernetes name"),
        (["explain", "p", "--kubeconfig="], "--kubeconfig: a file name is needed"),
        (["explain", "p", "--context="], "--context: a context name is needed"),
        (["dev-cluster", "down", "--dir="], "--dir: a folder name is needed"),
        (["dev-cluster", "up", "--dir=", "--apiserver-port=70000"], "--dir: a folder name is needed"),
        (["learn", "train", "--steps", "0", "--out", "w.json", "--init="], "--init: a file name is needed"),
        (["learn", "train", "--steps", "0", "--out", "w.json", "--curve="], "--curve: a file name is needed"),
        (
            ["learn", "evaluate", "--seeds=1000-1000", "--policy=default", "--weights="],
            "--weights: a file name is needed",
        ),
        (["learn", "evaluate", "--seeds=1000-1000", "--policy=default", "--json="], "--json: a file name is needed"),
        (["learn", "tune", "--seeds=1000-1000", "--json="], "--json: a file name is needed"),
    ],
)
def test_an_empty_value_is_refused_not_taken_for_a_flag_left_out(
    argv: list[str], needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """'' used to mean "not given": the built-in profiles and scenario, $KUBECONFIG, the current
    folder, the shipped weights, no output at all. (The other flags keep a regression quick and
    harmless: `dev-cluster up` then stops at the port rather than starting a cluster here.)"""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    _exit_2_one_line(main(argv), capsys, needle)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("identity", "needle"),
    [
        ("", "--identity: must name this replica (an empty holderIdentity is a free Lease), got ''"),
        ("   ", "--identity: must name this replica"),
        ("a" * 254, "--identity: must be at most 253 characters, got 254"),
        ("host\n1", "--identity: must be printable, without line breaks or control characters, got 'host\\n1'"),
    ],
)
def test_run_refuses_an_identity_that_names_no_replica(
    identity: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _exit_2_one_line(run_main(["--identity", identity, "--no-leader-elect"]), capsys, "pysched run: error: ", needle)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--node-gpu", "0.5"], "--node-gpu must be a whole number, got '0.5'"),
        (["--node-pods", "0.5"], "--node-pods must be a whole number, got '0.5'"),
        (["--node-pods", "1m"], "--node-pods must be a whole number, got '1m'"),
    ],
)
def test_dev_cluster_counts_are_whole_numbers(
    tmp_path: Path, argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The API refuses a node with half a GPU or pod only once the control plane is up."""
    code = main(["dev-cluster", "up", "--dir", str(tmp_path / "dev"), *argv])
    _exit_2_one_line(code, capsys, needle)
    assert not (tmp_path / "dev").exists()
