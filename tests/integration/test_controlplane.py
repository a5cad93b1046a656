"""LocalControlPlane lifecycle: processes stopped by pid, crashes reported with the log tail."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pysched.testing import LocalControlPlane, ProcessCrashed
from pysched.testing.controlplane import pid_alive

pytestmark = pytest.mark.integration


def test_context_manager_stops_every_process(control_plane_bin_dir: str, tmp_path: Path) -> None:
    with LocalControlPlane(tmp_path / "cp", bin_dir=control_plane_bin_dir) as plane:
        pids = plane.pids
        assert [p.name for p in plane.processes] == ["etcd", "kube-apiserver", "kube-controller-manager"]
        assert all(pid_alive(pid) for pid in pids)
        assert plane.api().get("/api/v1/namespaces/default")  # the admin token works
        assert plane.kubeconfig_path.exists()
    assert not any(pid_alive(pid) for pid in pids)


def test_crashed_etcd_is_reported_with_log_tail(control_plane_bin_dir: str, tmp_path: Path) -> None:
    with LocalControlPlane(tmp_path / "cp", bin_dir=control_plane_bin_dir, controller_manager=False) as plane:
        etcd = next(p for p in plane.processes if p.name == "etcd")
        os.kill(etcd.pid, signal.SIGKILL)
        assert etcd.popen is not None
        etcd.popen.wait(10)
        with pytest.raises(ProcessCrashed) as err:
            plane.check()
        message = str(err.value)
        assert "etcd" in message and "exited" in message
        assert str(etcd.log_path) in message
