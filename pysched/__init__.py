"""pysched: a deadline-aware scheduler and in-place autoscaler for training jobs on Kubernetes."""

from __future__ import annotations

import os
from pathlib import Path

__version__ = "0.1.0"

CACHE_ENV = "PYSCHED_CACHE_DIR"


def cache_dir() -> Path:
    """Where pysched keeps what it builds (compiled kernels, the test control plane): never inside
    the installed package. `$PYSCHED_CACHE_DIR`, else `~/.cache/pysched`."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "pysched"
