"""Fixtures for the integration tests (real etcd, kube-apiserver and kube-controller-manager built
from Go modules)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pysched.testing import LocalControlPlane
from pysched.testing.pytest_plugin import (  # noqa: F401  (fixtures, re-exported for pytest)
    control_plane,
    control_plane_bin_dir,
    emulator,
    helm,
    jobset,
    kube,
    kwok_bin_dir,
    namespace,
)
from pysched.testing.scheduler import SchedulerProcess, start_scheduler, write_profile


@pytest.fixture
def default_scheduler(
    control_plane: LocalControlPlane,  # noqa: F811 (the fixtures imported above)
    namespace: str,  # noqa: F811
    tmp_path: Path,
) -> Iterator[SchedulerProcess]:
    """pysched on the built-in default profile (kube-scheduler's plugin set) as `pysched-<namespace>`."""
    name = f"pysched-{namespace}"
    proc = start_scheduler(
        control_plane, name, config=write_profile(tmp_path / "profiles.yaml", name), args=["--qps=1000", "--burst=1000"]
    )
    yield proc
    assert proc.stop() == 0, proc.log()
