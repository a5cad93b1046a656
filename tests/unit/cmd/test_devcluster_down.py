"""`pysched dev-cluster down` signals only the processes its pids file names one by one."""

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pysched.cmd import devcluster
from pysched.testing import controlplane


@pytest.fixture
def kills(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    sent: list[tuple[int, int]] = []

    def kill(pid: int, sig: int) -> None:
        sent.append((pid, sig))
        raise ProcessLookupError

    monkeypatch.setattr(os, "kill", kill)
    return sent


@pytest.mark.parametrize(
    ("processes", "said"),
    [
        ([{"name": "etcd", "pid": -1, "exe": "etcd"}], "processes[0].pid must be a whole number from 2 to"),
        ([{"name": "etcd", "pid": 0, "exe": "etcd"}], "not 0"),
        ([{"name": "etcd", "pid": 1, "exe": "etcd"}], "not 1"),
        ([{"name": "etcd", "pid": "abc", "exe": "etcd"}], "not 'abc'"),
        ([{"name": "etcd", "pid": True, "exe": "etcd"}], "not True"),
        ([5], "processes[0] is not an object"),
        ([{"name": "etcd", "pid": 4321}], "processes[0] needs an exe and a name"),
    ],
)
def test_a_pid_that_names_no_single_process_is_refused_before_any_signal(
    tmp_path: Path, kills: list[tuple[int, int]], capsys: pytest.CaptureFixture[str], processes: list[Any], said: str
) -> None:
    (tmp_path / "pids.json").write_text(json.dumps({"processes": processes}))
    assert devcluster.main(["down", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and "nothing was stopped" in err[0], err
    assert kills == []
    assert (tmp_path / "pids.json").exists()


@pytest.mark.parametrize("pid", [-1, 0, 1, -4321])
def test_stop_pid_never_signals_a_group_init_or_everyone(pid: int, kills: list[tuple[int, int]]) -> None:
    controlplane.stop_pid(pid, "etcd", timeout=0.0)
    controlplane.stop_pid(pid, timeout=0.0)
    assert not controlplane.pid_alive(pid) and not controlplane.pid_matches(pid, "etcd")
    assert kills == []
