"""Test tooling: a real local control plane, fake nodes and a kubelet emulator.

Needs the synchronous ``kubernetes`` client (a test dependency) and the binaries
built by ``hack/build-control-plane.sh``.
"""

from pysched.testing.controlplane import (
    FAKE_NODE_LABEL,
    K8S_VERSION,
    BinariesNotFound,
    ControlPlaneError,
    LocalControlPlane,
    NodeSpec,
    PortInUse,
    ProcessCrashed,
    create_fake_nodes,
    find_bin_dir,
)
from pysched.testing.kube import KubeAPI, KubeAPIError, wait_for

__all__ = [
    "FAKE_NODE_LABEL",
    "K8S_VERSION",
    "BinariesNotFound",
    "ControlPlaneError",
    "KubeAPI",
    "KubeAPIError",
    "LocalControlPlane",
    "NodeSpec",
    "PortInUse",
    "ProcessCrashed",
    "create_fake_nodes",
    "find_bin_dir",
    "wait_for",
]
