"""The oldest Kubernetes pysched runs against, and how the API server's `/version` is read.

In-place pod resize (`pods/resize`, the kubelet actuating CPU changes without a restart) is GA in
1.35; pysched's autoscaling rests on it, and its binder and events use APIs older than that.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MIN_KUBERNETES = (1, 35)
_MINOR = re.compile(r"^(\d{1,4})")  # "35", "35+" (EKS, GKE), "35-gke.1"


def version_problem(body: Mapping[str, Any]) -> str | None:
    """Why the API server that answered `/version` with `body` is too old; None when it is new
    enough or says nothing readable (a server that hides its version is given the benefit)."""
    major, minor = str(body.get("major", "")), _MINOR.match(str(body.get("minor", "")))
    if not major.isdigit() or minor is None:
        return None
    found = (int(major), int(minor.group(1)))
    if found >= MIN_KUBERNETES:
        return None
    want = ".".join(map(str, MIN_KUBERNETES))
    shown = str(body.get("gitVersion") or f"v{found[0]}.{found[1]}")[:64]
    return f"pysched needs Kubernetes {want} or later (in-place pod resize is GA there); the API server is {shown}"
