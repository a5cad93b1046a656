"""`pysched learn`: bad input is one line and exit 2; evaluation runs policies side by side."""

import json
from pathlib import Path

import numpy as np
import pytest

from pysched.cmd.cli import main
from pysched.cmd.learn import parse_seeds
from pysched.deadline.allocation import FEATURES as ALLOCATION_FEATURES
from pysched.deadline.scorer import ALLOCATION, body_digest, dump_policy
from pysched.plugins.learned_queue_sort import BUILTIN_PATH


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--seeds", "9-3"], "--seeds: FIRST <= LAST"),
        (["--seeds", "all"], "--seeds: FIRST-LAST"),
        (["--seeds", "\u0661\u0660\u0660\u0660-\u0661\u0660\u0660\u0660"], "--seeds: FIRST-LAST"),  # Arabic-Indic
        (["--seeds", "4294967295-4294967296"], "--seeds: seeds from 0 to 4,294,967,295"),
        (["--scenario", "nope"], "--scenario: one of"),
        (["--policy", "nope", "--seeds", "1-1"], "unknown policy 'nope'"),
        (["--weights", "/nonexistent/p.json"], "--weights: /nonexistent/p.json: cannot read"),
    ],
)
def test_evaluate_refuses_bad_input(args: list[str], problem: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["learn", "evaluate", *args]) == 2
    assert problem in _one_line(capsys)


def test_seeds_reach_the_largest_an_environment_takes() -> None:
    assert parse_seeds("4294967290-4294967295") == range(4294967290, 4294967296)  # refused before: 10 digits


def _spoiled(tmp_path: Path, change: dict[str, object]) -> str:
    body = json.loads(BUILTIN_PATH.read_text())
    del body["sha256"]
    body.update(change)
    body["sha256"] = body_digest(body)
    path = tmp_path / "spoiled.json"
    path.write_text(json.dumps(body))
    return str(path)


def test_a_weights_file_of_another_schema_stops_simulate_and_evaluate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    weights = _spoiled(tmp_path, {"schema": 99})
    assert main(["learn", "evaluate", "--weights", weights, "--seeds", "1-1"]) == 2
    assert "made for feature schema 99" in _one_line(capsys)
    profile = tmp_path / "learned.yaml"
    profile.write_text(
        "profiles:\n- schedulerName: learned\n  plugins:\n    queueSort: [{name: LearnedQueueSort}]\n"
        "    bind: [{name: DefaultBinder}]\n"
        f"  pluginConfig:\n  - name: LearnedQueueSort\n    args: {{weights: {weights}}}\n"
    )
    assert main(["simulate", "--config", str(profile), "--policy", "learned"]) == 2
    line = _one_line(capsys)
    assert "weights" in line and "made for feature schema 99" in line


def test_evaluate_reports_medians_and_the_bar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "made" / "eval.json"  # its folder is made, as `--json` of simulate does
    policies = ["--policy", "edf", "--policy", "pysched-noscale", "--policy", "learned", "--policy", "edf"]
    assert main(["learn", "evaluate", "--seeds", "1000-1001", *policies, "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert [line.split()[0] for line in printed.splitlines()[1:4]] == ["edf", "pysched-noscale", "learned"]
    assert printed.count("  edf ") == 1  # named twice, run and shown once
    assert "learned reaches the better of edf and pysched-noscale + 0.03 on" in printed
    data = json.loads(out.read_text())
    assert set(data["median"]) == {"edf", "pysched-noscale", "learned"}
    assert all(len(r) == 2 and all(0 <= x <= 1 for x in r) for r in data["ratios"].values())
    assert data["seeds"] == [1000, 1001]


def test_train_refuses_bad_numbers_before_it_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.json"
    assert main(["learn", "train", "--steps", "-5", "--out", str(out)]) == 2
    assert "--steps" in _one_line(capsys)
    assert main(["learn", "train", "--steps", "10", "--window", "1", "--out", str(out)]) == 2
    assert "--window" in _one_line(capsys)
    for mix in ("seed-insufficient,nope", "small,small", "small,"):
        assert main(["learn", "train", "--steps", "10", "--scenario", mix, "--out", str(out)]) == 2
        assert "--scenario: one of" in _one_line(capsys)
    assert main(["learn", "train", "--steps", "10", "--out", str(out), "--curve-json", str(tmp_path)]) == 2
    assert f"--curve-json: {tmp_path} is a folder" in _one_line(capsys)  # not found out after training
    # GPU jobs alone: nothing for an allocation policy to decide (every reset would skip on and on).
    allocation = ["learn", "train", "--env", "allocation", "--scenario", "gpu-philly", "--steps", "10"]
    assert main([*allocation, "--out", str(out)]) == 2
    assert "--scenario gpu-philly: its workloads hold no CPU job with a deadline" in _one_line(capsys)
    assert not out.exists()


def test_train_and_evaluate_refuse_an_output_that_is_an_input_or_another_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    weights = tmp_path / "w.json"
    weights.write_text(BUILTIN_PATH.read_text())
    out = str(tmp_path / "p.json")
    cases = [
        (["learn", "train", "--steps", "10", "--out", out, "--curve-json", out], "--curve-json: --out writes the same"),
        (
            ["learn", "train", "--steps", "10", "--out", str(weights), "--init", str(weights)],
            "--out: it is the file --init",
        ),
        (["learn", "evaluate", "--weights", str(weights), "--json", str(weights)], "--json: it is the file --weights"),
    ]
    for argv, problem in cases:
        assert main(argv) == 2
        assert problem in _one_line(capsys)
    assert not Path(out).exists() and weights.read_text() == BUILTIN_PATH.read_text()


def test_evaluate_uses_the_weights_it_is_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two opposite policies on the same seed give different ratios: the file is what runs."""
    import numpy as np

    from pysched.deadline.features import FEATURES, WIDTH

    ratios = []
    for sign in (1.0, -1.0):
        w1 = np.zeros((1, WIDTH))
        w1[0, FEATURES.index("to_deadline")] = sign
        path = tmp_path / f"p{sign:+g}.json"
        path.write_text(dump_policy([(w1, np.zeros(1)), (np.ones((1, 1)), np.zeros(1))], "tanh", 16, {}))
        out = tmp_path / f"e{sign:+g}.json"
        assert main(["learn", "evaluate", "--weights", str(path), "--seeds", "1000-1000", "--policy", "learned",
                     "--json", str(out)]) == 0  # fmt: skip
        ratios.append(json.loads(out.read_text())["median"]["learned"])
    capsys.readouterr()
    assert ratios[0] < ratios[1]  # latest deadline first loses to earliest deadline first


def test_evaluate_exits_2_when_its_weights_file_is_spoiled_between_seeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import pysched.sim.runner as runner
    from pysched.sim.runner import PolicyResult

    weights = tmp_path / "w.json"
    weights.write_text(BUILTIN_PATH.read_text())
    real = runner.run_policy

    async def then_spoil(*args: object, **kwargs: object) -> PolicyResult:
        result = await real(*args, **kwargs)  # type: ignore[arg-type]
        weights.write_text("[]")
        return result

    monkeypatch.setattr(runner, "run_policy", then_spoil)
    argv = ["learn", "evaluate", "--weights", str(weights), "--seeds", "1000-1001", "--policy", "learned"]
    assert main(argv) == 2
    line = _one_line(capsys)
    assert line.startswith("pysched learn: error: seed 1001: policy learned could not start: ")
    assert str(weights) in line


def test_another_weights_file_keeps_the_learned_profile_s_other_args(tmp_path: Path) -> None:
    from pysched.learn.evaluate import learned_config
    from pysched.plugins import default_registry

    path = tmp_path / "p.json"
    path.write_text(BUILTIN_PATH.read_text())
    profile = learned_config(default_registry(), str(path)).profile("learned")
    assert profile is not None
    assert profile.plugin_args["LearnedQueueSort"] == {"weights": str(path), "windowOrder": "deadline", "window": 16}


def test_evaluate_takes_a_policy_trained_with_a_smaller_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pysched.deadline.features import WIDTH
    from pysched.learn.evaluate import learned_config
    from pysched.plugins import default_registry

    windows = {}
    for supported in (8, 32):
        path = tmp_path / f"w{supported}.json"
        path.write_text(dump_policy([(np.ones((1, WIDTH)), np.zeros(1))], "relu", supported, {}))
        profile = learned_config(default_registry(), str(path)).profile("learned")
        assert profile is not None
        windows[supported] = profile.plugin_args["LearnedQueueSort"]["window"]
    assert windows == {8: 8, 32: 16}  # the profile's 16, or fewer when the file supports fewer
    argv = ["learn", "evaluate", "--weights", str(tmp_path / "w8.json"), "--seeds", "1000-1000", "--policy", "learned"]
    assert main(argv) == 0
    assert "learned" in capsys.readouterr().out


def test_evaluate_allocation_needs_an_allocation_weights_file_and_runs_it_beside_pysched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["learn", "evaluate", "--env", "allocation", "--seeds", "1-1"]) == 2
    assert "--weights: an allocation policy's weights file is required" in _one_line(capsys)
    assert main(["learn", "evaluate", "--env", "allocation", "--weights", str(BUILTIN_PATH), "--seeds", "1-1"]) == 2
    assert "not a pysched.io/allocation-policy file (it is a 'pysched.io/queue-policy' file)" in _one_line(capsys)
    weight = np.zeros((3, len(ALLOCATION_FEATURES)))
    weight[0, ALLOCATION_FEATURES.index("heuristic")], weight[2, ALLOCATION_FEATURES.index("heuristic")] = -2, 2
    copy = tmp_path / "copy.json"  # answers what Autoscale would
    copy.write_text(dump_policy([(weight, np.array([-0.5, 0.0, -0.5]))], "relu", 16, {}, ALLOCATION))
    out = tmp_path / "eval.json"
    args = ["learn", "evaluate", "--env", "allocation", "--weights", str(copy), "--seeds", "3-4", "--json", str(out)]
    assert main(args) == 0
    ratios = json.loads(out.read_text())["ratios"]
    assert set(ratios) == {"pysched", "pysched-allocation"} and ratios["pysched"] == ratios["pysched-allocation"]


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--arm", "safetyMargin=11"], "--arm: safetyMargin: must be >= 0 and <= 10"),
        (["--arm", "speed=1"], "--arm: NAME=VALUE"),
        (["--period", "10"], "--period: must be >= 60"),
        (["--seeds", "5-1"], "--seeds: FIRST <= LAST"),
        (["--scenario", "nope"], "--scenario: one of"),
    ],
)
def test_tune_refuses_bad_input(args: list[str], problem: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["learn", "tune", *args]) == 2
    assert problem in _one_line(capsys)


def test_tune_compares_the_configured_and_the_tuned_profile_seed_by_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "made" / "tune.json"
    args = ["learn", "tune", "--seeds", "1-1", "--arm", "safetyMargin=0.05", "--arm", "bandZ=2", "--json", str(out)]
    assert main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("seed 1: configured ")
    summary = json.loads(lines[-1])
    assert summary["seeds"] == 1 and summary["scenario"] == "small" and sum(summary["pulls"]) >= 2
    written = json.loads(out.read_text())
    assert written["arms"] == [{"safetyMargin": 0.05}, {"bandZ": 2.0}] and len(written["per_seed"]) == 1
