"""What the CLI does when its output streams or its run are cut short: the files it was asked
to write are written whatever happens to stdout, and no traceback reaches the user."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pysched.cmd import cli

SIMULATE = [sys.executable, "-m", "pysched.cmd.cli", "simulate", "--scenario", "small", "--policy", "default"]


def test_a_reader_that_stops_early_loses_neither_the_json_nor_gets_a_traceback(tmp_path: Path) -> None:
    """`pysched simulate --json out.json | head -1`: the table's reader leaves after one line."""
    out = tmp_path / "out.json"
    proc = subprocess.Popen([*SIMULATE, "--json", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert json.loads(out.read_text())["policies"]["default"]["jobs"] == 200
    assert "Traceback" not in stderr


def test_a_closed_stdout_is_no_crash(tmp_path: Path) -> None:
    """Started with stdout closed (`>&-`): the run completes and writes its file."""
    out = tmp_path / "out.json"
    close_stdout = lambda: os.close(1)  # noqa: E731 - in the child, before it runs
    result = subprocess.run(
        [*SIMULATE, "--json", str(out)], stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=close_stdout
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["policies"]["default"]["jobs"] == 200


def test_outputs_are_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """A trace's ids are UTF-8; written back under an ASCII locale they were an encoding error
    and an empty file."""
    out = tmp_path / "jobs.csv"
    code = f"from pysched.cmd.flags import write_output; write_output({str(out)!r}, 'job-\\u8bad\\u7ec3-1')"
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0"}
    result = subprocess.run(
        [sys.executable, "-X", "utf8=0", "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == "job-训练-1".encode()


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_simulate", interrupted)
    assert cli.main(["simulate"]) == cli.INTERRUPTED
    assert capsys.readouterr().err == "pysched simulate: interrupted\n"


def test_an_interrupted_one_off_status_is_not_a_success(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import pysched.cmd.status as status_module

    async def interrupted(*args: object) -> int:
        raise KeyboardInterrupt

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    monkeypatch.setattr(status_module, "status", interrupted)
    assert cli.main(["status", "--kubeconfig", str(kubeconfig), "-n", "default"]) == cli.INTERRUPTED
    assert capsys.readouterr().err == "pysched status: interrupted\n"
    assert cli.main(["status", "--kubeconfig", str(kubeconfig), "-n", "default", "--watch"]) == 0  # how a watch ends


def test_a_kubeconfig_that_is_a_folder_is_told_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "--kubeconfig", str(tmp_path)]) == 2
    assert f"kubeconfig {tmp_path}: is a folder, not a file" in capsys.readouterr().err


def test_a_run_that_contained_internal_errors_exits_1_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A bug contained to its pod lets the run finish, but its figures are not a result: the
    command says which policy hit how many, and ends with 1 (it ended with 0, the figures shown
    as any others)."""
    from pysched.plugins.autoscale import controller

    original = controller.Controller._decide
    planted: list[int] = []

    async def flaky(self: controller.Controller, *args: Any, **kwargs: Any) -> bool:
        if not planted:
            planted.append(1)
            raise ValueError("a planted bug")
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(controller.Controller, "_decide", flaky)
    out = tmp_path / "out.json"
    assert cli.main(["simulate", "--policy", "default", "--policy", "pysched", "--json", str(out)]) == 1
    err = capsys.readouterr().err
    assert "pysched simulate: policy pysched hit 1 internal error (logged above)" in err
    assert "policy default" not in err and json.loads(out.read_text())["policies"]["pysched"]["jobs"] == 200
