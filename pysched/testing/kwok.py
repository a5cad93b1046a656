"""KWOK (``sigs.k8s.io/kwok``) on a :class:`LocalControlPlane`: fake kubelets for the nodes it is
told to manage, which renew their node Leases and play their pods' lifecycles (a pod bound to such
a node is made Running, as a kubelet would report it; a deleted one is finished).

``hack/build-kwok.sh`` builds it into ``${PYSCHED_CACHE_DIR:-~/.cache/pysched}/kwok/kwok-V_goV/bin``
(``PYSCHED_KWOK_BIN`` points somewhere else) with ``stages.yaml`` beside it, KWOK's own "fast"
stage set from the same module.
"""

from __future__ import annotations

from pathlib import Path

from pysched.testing.controlplane import (
    FAKE_NODE_LABEL,
    BinariesNotFound,
    LocalControlPlane,
    ManagedProcess,
    find_build,
)

KWOK_VERSION = "v0.8.0"  # hack/kwok/go.mod's require (a unit test holds the two equal)
KWOK_BIN_ENV = "PYSCHED_KWOK_BIN"
KWOK_BUILD_HINT = "build it with `bash hack/build-kwok.sh` (or `make control-plane`)"
STAGES = "stages.yaml"
# The nodes KWOK manages; the plane's own heartbeat leaves them alone (a value other than "true").
KWOK_NODE_LABELS = {"type": "kwok", FAKE_NODE_LABEL: "kwok"}


def find_kwok(bin_dir: Path | str | None = None) -> Path:
    """The bin dir holding `kwok` and its stages; BinariesNotFound with the build hint otherwise."""
    found = find_build(
        bin_dir,
        need=("kwok",),
        env=KWOK_BIN_ENV,
        folder="kwok",
        prefix=f"kwok-{KWOK_VERSION}_",
        what=f"KWOK {KWOK_VERSION} build",
        hint=KWOK_BUILD_HINT,
    )
    if not (found / STAGES).is_file():
        raise BinariesNotFound(f"{found} has kwok but not its {STAGES}; {KWOK_BUILD_HINT}")
    return found


def start_kwok(plane: LocalControlPlane, bin_dir: Path | str | None = None) -> ManagedProcess:
    """KWOK as a process of the plane, managing the nodes labelled with ``KWOK_NODE_LABELS`` (no
    client rate limit: KWOK sets none)."""
    found = find_kwok(bin_dir)
    argv = [
        str(found / "kwok"),
        f"--kubeconfig={plane.kubeconfig_path}",
        "--manage-nodes-with-label-selector=" + ",".join(f"{k}={v}" for k, v in KWOK_NODE_LABELS.items()),
        f"--config={found / STAGES}",
    ]
    return plane.spawn("kwok", argv)
