"""`pysched run` as a process: an unreachable API server at start-up is retried and reported; the
test fixture that starts it picks new ports when one is taken, and leaves nothing behind when it
cannot start."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pysched.testing import LocalControlPlane, wait_for
from pysched.testing import scheduler as scheduler_module
from pysched.testing.controlplane import free_port, free_ports, kubeconfig_dict
from pysched.testing.scheduler import start_scheduler

pytestmark = pytest.mark.integration


def test_unreachable_api_is_retried_and_reported(control_plane: LocalControlPlane, tmp_path: Path) -> None:
    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(json.dumps(kubeconfig_dict(f"https://127.0.0.1:{free_port()}", "token", None)))
    proc = start_scheduler(control_plane, f"pysched-dead-{tmp_path.name}", kubeconfig=dead, wait=False)
    try:
        status, body = wait_for(
            lambda: proc.get("/readyz"),
            lambda answer: "API server unreachable" in answer[1],
            timeout=60,
            what="/readyz to report the unreachable API server",
        )
        assert status == 503 and "Cannot connect" in body
        assert proc.get("/healthz") == (200, "ok")
        wait_for(lambda: proc.log().count("list or watch failed"), lambda n: n >= 2, what="retries in the log")
    finally:
        assert proc.stop() == 0, proc.log()


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


def test_a_port_taken_before_the_bind_is_picked_again(
    control_plane: LocalControlPlane, tmp_path: Path, taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    picks = iter([[taken_port, free_port()]])
    monkeypatch.setattr(scheduler_module, "free_ports", lambda count: next(picks, None) or free_ports(count))
    name = f"pysched-port-{tmp_path.name}"
    proc = start_scheduler(control_plane, name)
    try:
        assert proc.port != taken_port and proc.ready()
        assert "address already in use" in proc.log(200)  # the first attempt did hit the taken port
        assert [p.name for p in control_plane.processes].count(name) == 1
        control_plane.check()  # the first attempt's exit is not a crash of the plane
    finally:
        assert proc.stop() == 0, proc.log()


def test_a_scheduler_that_cannot_start_leaves_nothing_behind(control_plane: LocalControlPlane, tmp_path: Path) -> None:
    name = f"pysched-bad-{tmp_path.name}"
    with pytest.raises(RuntimeError, match="pysched exited"):
        start_scheduler(control_plane, name, config=tmp_path / "missing.yaml")
    assert name not in [p.name for p in control_plane.processes]
    control_plane.check()
