"""The throughput harness's parts that need no cluster: workload files (the shipped ones parse; a
bad one is one line naming the key), the report's medians and per-round ratios, and the command's
refusals (one line, exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from perf.harness.command import main, markdown, summarise
from perf.harness.live import RoundResult, constraint_problems, placed, pods_of
from perf.harness.workload import WorkloadError, load_workload, parse_workload

ROOT = Path(__file__).resolve().parents[3]
WORKLOADS = ROOT / "perf" / "workloads"


def test_the_shipped_workloads_parse_and_the_standard_set_is_there() -> None:
    loaded = {path.stem: load_workload(path) for path in WORKLOADS.glob("*.yaml")}
    assert {"basic-1000", "basic-5000"} <= set(loaded)
    basic = loaded["basic-1000"]
    assert (basic.nodes.count, basic.pod_count, basic.rate) == (1000, 5000, None)
    assert loaded["basic-5000"].nodes.count == 5000 and loaded["basic-5000"].pod_count == 10000
    assert loaded["steady-5000"].rate == 100.0
    mixed = pods_of(loaded["mixed-1000"], "s")
    gpu = [p for p in mixed if "nvidia.com/gpu" in p["spec"]["containers"][0]["resources"]["requests"]]
    assert len(mixed) == 5000 and len(gpu) == 1000
    constrained = loaded["constrained-1000"]
    assert constrained.nodes.zones == 3 and [g.anti_affinity or g.spread for g in constrained.pods] == [0, 25, 25]
    churn = loaded["churn-1000"].churn
    assert churn is not None and (churn.interval, churn.nodes, churn.pods) == (0.5, 1, 10)
    jobs = loaded["jobs-1000"]
    assert jobs.profile == "pysched" and [g.gang for g in jobs.pods] == [0, 8, 0] and jobs.pods[2].deadline == "2h"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"nodes": {"count": 1}}, "needs `nodes` and `pods`"),
        ({"nodes": {"count": 0}, "pods": [{"count": 1}]}, "nodes.count: must be a whole number from 1"),
        ({"nodes": {"count": 1, "cpus": "2"}, "pods": [{"count": 1}]}, "nodes: unknown key 'cpus'"),
        ({"nodes": {"count": 1}, "pods": [{"count": 1, "cpu": "lots"}]}, "pods[0].cpu: must be a positive quantity"),
        ({"nodes": {"count": 1}, "pods": [{"count": 1, "gpu": 2}]}, "pods[0].gpu: 2 is more than a node has (0)"),
        (
            {"nodes": {"count": 1}, "pods": [{"count": 1}], "arrival": {"rate": 0}},
            "arrival.rate: must be pods a second",
        ),
        ({"nodes": {"count": 1}, "pods": [{"count": 1}], "arrival": "soon"}, "arrival: must be a mapping"),
        ({"nodes": {"count": 1}, "pods": []}, "pods: must be a list of 1 to 16"),
        ({"nodes": {"count": 3}, "pods": [{"count": 4, "spread": 2}]}, "pods[0].spread: needs nodes.zones"),
        ({"nodes": {"count": 3}, "pods": [{"count": 4, "antiAffinity": 4}]}, "cannot keep apart on 3 nodes"),
        ({"nodes": {"count": 1}, "pods": [{"count": 1, "deadline": "2h"}]}, "deadline and totalSteps go together"),
        (
            {"nodes": {"count": 1}, "pods": [{"count": 1, "deadline": "soon", "totalSteps": 5}]},
            "pods[0].deadline: must be a duration",
        ),
        (
            {"nodes": {"count": 1}, "pods": [{"count": 1}], "profile": "fast"},
            "profile: must be one of default, pysched",
        ),
        ({"nodes": {"count": 1}, "pods": [{"count": 1}], "churn": {"interval": 0}}, "churn.interval: must be seconds"),
        (
            {"nodes": {"count": 4, "zones": 2}, "pods": [{"count": 4, "antiAffinity": 2, "spread": 2}]},
            "pods[0]: antiAffinity and spread are two kinds of group",
        ),
        ({"nodes": {"count": 4}, "pods": [{"count": 10, "gang": 4}]}, "10 pods do not make whole gangs of 4"),
        (
            {"nodes": {"count": 1}, "pods": [{"count": 1, "deadline": "0s", "totalSteps": 5}]},
            "pods[0].deadline: must be a duration",
        ),
        ({"nodes": {"count": 1}, "pods": [{"count": 1}], "churn": {"interval": 1}}, "churn: needs nodes or pods"),
        (
            {"nodes": {"count": 1}, "pods": [{"count": 1}], "churn": {"pods": 5, "every": 1}},
            "churn: unknown key 'every'",
        ),
    ],
)
def test_a_bad_workload_is_one_line_naming_the_key(raw: object, says: str) -> None:
    with pytest.raises(WorkloadError) as err:
        parse_workload(raw)
    assert says in str(err.value) and "\n" not in str(err.value)


def _result(scheduler: str, rate: float, problems: tuple[str, ...] = ()) -> RoundResult:
    return RoundResult(scheduler, 10, 10, rate, rate / 2, None, None, 1.0, 100.0, 2.0, 0.5, problems)


def test_the_report_takes_medians_and_ratios_of_the_same_rounds() -> None:
    workload = parse_workload({"name": "w", "nodes": {"count": 2}, "pods": [{"count": 10}]})
    rounds = {
        "pysched": [_result("pysched", 300), _result("pysched", 100), _result("pysched", 200)],
        "raw-bind": [_result("raw-bind", 300), _result("raw-bind", 400), _result("raw-bind", 100)],
    }
    report = summarise(workload, "live", rounds)
    assert report["results"]["pysched"]["pods_per_second"] == 200
    # per round 1.0, 0.25, 2.0: the median of the ratios, not the ratio of the medians (200/300)
    assert report["ratios"] == {"pysched/raw-bind": 1.0}
    assert report["results"]["pysched"]["correct"] is True
    rounds["raw-bind"][1] = _result("raw-bind", 400, ("n1 cpu 5000 > 4000",))
    assert summarise(workload, "live", rounds)["results"]["raw-bind"]["correct"] is False
    table = markdown(report)
    assert "| pysched | 200 | 100 |" in table and "pysched/raw-bind 1" in table


def test_the_command_refuses_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: {count: -1}\npods: [{count: 1}]\n")
    assert main(["run", str(bad)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"perf: error: {bad}: nodes.count: must be a whole number from 1 to 20000, got -1"
    ]
    good = str(WORKLOADS / "basic-1000.yaml")
    assert main(["run", good, "--scheduler", "pysched,yunikorn"]) == 2
    assert "unknown scheduler 'yunikorn'" in capsys.readouterr().err
    assert main(["run", good, "--backend", "sim", "--scheduler", "kube-scheduler"]) == 2
    assert "runs pysched alone" in capsys.readouterr().err
    churned = str(WORKLOADS / "churn-1000.yaml")
    assert main(["run", churned, "--backend", "sim", "--scheduler", "pysched"]) == 2
    assert "churn runs against an API server only" in capsys.readouterr().err
    assert main(["run", churned, "--kwok"]) == 2
    assert "churn and --kwok do not go together" in capsys.readouterr().err
    assert main(["run", good, "--backend", "sim", "--scheduler", "pysched", "--kwok"]) == 2
    assert "KWOK runs against an API server only" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_sim_round_binds_every_pod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text("nodes: {count: 3, cpu: '4', memory: 16Gi, pods: 20}\npods: [{count: 30, cpu: 100m}]\n")
    out = tmp_path / "out.json"
    assert main(["run", str(tiny), "--backend", "sim", "--scheduler", "pysched", "--json", str(out)]) == 0
    import json

    report = json.loads(out.read_text())
    assert report["results"]["pysched"]["rounds"][0]["bound"] == 30 and report["results"]["pysched"]["correct"]


def test_a_round_that_fails_midway_still_reports_and_the_chart_is_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import perf.harness.command as command

    def broken(*args: object, **kwargs: object) -> RoundResult:
        raise RuntimeError("etcd did not start")

    monkeypatch.setattr(command, "run_round", broken)
    out, chart = tmp_path / "out.json", tmp_path / "chart.png"
    good = str(WORKLOADS / "basic-1000.yaml")
    assert main(["run", good, "--scheduler", "raw-bind", "--json", str(out), "--plot", str(chart)]) == 1
    report = json.loads(out.read_text())
    (round_,) = report["results"]["raw-bind"]["rounds"]
    assert round_["problems"] == ["round failed: RuntimeError: etcd did not start"] and not round_["correct"]
    assert chart.stat().st_size > 1000 and chart.read_bytes()[:4] == b"\x89PNG"
    assert "NOT CORRECT" in capsys.readouterr().err


def test_shaped_pods_carry_their_groups_and_the_check_finds_what_breaks_them() -> None:
    workload = parse_workload(
        {
            "nodes": {"count": 6, "zones": 3},
            "pods": [
                {"count": 4, "antiAffinity": 2},
                {"count": 3, "spread": 3},
                {"count": 4, "gang": 4, "deadline": "2h", "totalSteps": 100},
            ],
        }
    )
    pods = pods_of(workload, "s")
    apart, spread, gang = pods[:4], pods[4:7], pods[7:]
    assert [p["metadata"]["labels"]["perf.pysched.io/group"] for p in apart] == ["g0-0", "g0-0", "g0-1", "g0-1"]
    assert all(p["spec"]["affinity"]["podAntiAffinity"] for p in apart)
    assert all(p["spec"]["topologySpreadConstraints"][0]["maxSkew"] == 1 for p in spread)
    assert {p["metadata"]["labels"]["pysched.io/job"] for p in gang} == {"gang-2-0"}
    assert all(p["metadata"]["annotations"]["pysched.io/deadline"] == "2h" for p in gang)
    zones = {f"n{i}": f"zone-{i % 3}" for i in range(6)}

    def bind(pod: dict[str, Any], node: str) -> dict[str, Any]:
        return {**pod, "spec": {**pod["spec"], "nodeName": node}}

    good = [bind(apart[0], "n0"), bind(apart[1], "n1"), bind(apart[2], "n0"), bind(apart[3], "n2")]
    good += [bind(spread[0], "n0"), bind(spread[1], "n1"), bind(spread[2], "n2")]
    assert constraint_problems(map(placed, good), zones) == []
    bad = [
        bind(apart[0], "n0"),
        bind(apart[1], "n0"),
        bind(spread[0], "n0"),
        bind(spread[1], "n3"),
        bind(spread[2], "n1"),
    ]
    assert constraint_problems(map(placed, bad), zones) == [
        "2 replicas of g0-0 on node n0",
        "spread group g1-0 has zone counts {'zone-0': 2, 'zone-1': 1, 'zone-2': 0}",
    ]


def test_a_shaped_sim_round_honours_every_constraint(tmp_path: Path) -> None:
    shaped = tmp_path / "shaped.yaml"
    shaped.write_text(
        "nodes: {count: 12, cpu: '4', memory: 16Gi, pods: 20, zones: 3}\n"
        "profile: pysched\n"
        "pods: [{count: 20, antiAffinity: 10}, {count: 18, spread: 9}, {count: 16, gang: 8},"
        " {count: 4, deadline: 1h, totalSteps: 1000}]\n"
    )
    out = tmp_path / "out.json"
    assert main(["run", str(shaped), "--backend", "sim", "--scheduler", "pysched", "--json", str(out)]) == 0
    import json

    (round_,) = json.loads(out.read_text())["results"]["pysched"]["rounds"]
    assert round_["bound"] == 58 and round_["problems"] == [] and round_["correct"]


def test_the_curve_measures_each_size_and_refuses_bad_sizes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    out, chart = tmp_path / "curve.json", tmp_path / "curve.png"
    argv = ["curve", "--nodes", "4,8", "--pods-per-node", "3", "--backend", "sim", "--json", str(out)]
    assert main([*argv, "--plot", str(chart)]) == 0
    points = json.loads(out.read_text())["points"]
    assert [(p["backend"], p["scheduler"], p["nodes"], p["pods"]) for p in points] == [
        ("sim", "pysched", 4, 12),
        ("sim", "pysched", 8, 24),
    ]
    assert all(p["correct"] and p["ms_per_pod"] == round(1000 / p["pods_per_second"], 4) for p in points)
    assert chart.read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert main(["curve", "--nodes", "4,0"]) == 2
    assert "--nodes: distinct node counts from 1 to 20000" in capsys.readouterr().err
    assert main(["curve", "--nodes", "4,4"]) == 2
    assert "distinct node counts" in capsys.readouterr().err
    assert main(["curve", "--nodes", "4", "--scheduler", "kube-scheduler"]) == 2  # sim runs pysched alone
    assert "nothing to measure" in capsys.readouterr().err
    assert main(["curve", "--nodes", "4", "--backend", "cloud"]) == 2
    assert "unknown backend or scheduler 'cloud'" in capsys.readouterr().err
