"""Fixtures for the integration tests (real etcd, kube-apiserver and kube-controller-manager built
from Go modules)."""

from __future__ import annotations

from pysched.testing.pytest_plugin import (  # noqa: F401  (fixtures, re-exported for pytest)
    control_plane,
    control_plane_bin_dir,
    emulator,
    kube,
    namespace,
)
