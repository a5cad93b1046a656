"""`pysched run` as a process: an unreachable API server at start-up is retried and reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pysched.testing import LocalControlPlane, wait_for
from pysched.testing.controlplane import free_port, kubeconfig_dict
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
