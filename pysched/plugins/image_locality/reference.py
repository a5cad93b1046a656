"""ImageLocality's direct definition: per node, per container and image volume, the formula of kube-scheduler's
imagelocality plugin over image states recomputed from every node's `status.images`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pysched.api.images import normalized_image_name, volume_images
from pysched.api.objects import NodeInfo
from pysched.framework.nodetable import I64
from pysched.plugins.image_locality import calculate_priority, scaled_image_score


def scores(pod: Mapping[str, Any], nodes: Sequence[NodeInfo]) -> I64:
    size: dict[str, int] = {}
    holders: dict[str, set[str]] = {}
    for node in nodes:  # in arrival order: the first node to report a name fixes its size
        for image in node.images:
            for name in image.names:
                size.setdefault(name, image.size)
                holders.setdefault(name, set()).add(node.name)
    spec = pod["spec"]
    containers = list(spec.get("initContainers") or ()) + list(spec["containers"])
    names = [normalized_image_name(container["image"]) for container in containers] + volume_images(pod)
    out = []
    for node in nodes:
        on_node = {name for image in node.images for name in image.names}
        total = 0
        for name in names:
            if name in on_node:
                total += scaled_image_score(size[name], len(holders[name]), len(nodes))
        out.append(calculate_priority(total, len(containers)))
    return np.array(out, np.int64)
