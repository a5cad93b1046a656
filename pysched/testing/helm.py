"""The helm CLI the chart check uses, built from its Go module by hack/build-helm.sh into the cache."""

from __future__ import annotations

from pathlib import Path

from pysched.testing.controlplane import find_build

HELM_VERSION = "v4.3.2"  # hack/helm/go.mod's require (a unit test holds the two equal)
HELM_BIN_ENV = "PYSCHED_HELM_BIN"
HELM_BUILD_HINT = "build it with `bash hack/build-helm.sh` (or `make control-plane`)"


def find_helm() -> Path:
    """The `helm` binary: in ``$PYSCHED_HELM_BIN``, else the newest complete build in the cache;
    :class:`~pysched.testing.controlplane.BinariesNotFound` with the build hint when there is none."""
    bin_dir = find_build(
        None,
        need=("helm",),
        env=HELM_BIN_ENV,
        folder="helm",
        prefix=f"helm-{HELM_VERSION}_",
        what=f"helm {HELM_VERSION} build",
        hint=HELM_BUILD_HINT,
    )
    return bin_dir / "helm"
