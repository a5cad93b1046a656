"""ImageLocality: favour nodes that already hold the pod's container and image-volume images,
kube-scheduler's formula: each image found on the node adds its size scaled by the share of nodes holding it;
the sum, clamped to [23 MiB, 1000 MiB x containers], maps linearly onto 0..100.

The node table keeps image name -> rows (`NodeTable.image_rows`), so PreScore returns Skip at
once when no node holds any of the pod's images, and the kernel's incremental path stays."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pysched.api.features import EVERY_POD, NO_FEATURES, PodFeatures
from pysched.api.images import container_images, volume_images
from pysched.api.objects import PodInfo
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle
from pysched.framework.nodetable import I64, MAX_NODE_SCORE, Bools, NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SKIP, SUCCESS, Status

NAME = "ImageLocality"
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
_STATE = "ImageLocality/images"


@dataclass(frozen=True, slots=True)
class _PodImages:
    present: tuple[str, ...]  # the pod's images some node holds, one entry per container and image volume
    containers: int


def scaled_image_score(size: int, holders: int, total_nodes: int) -> int:
    """The image's size times its spread (holders / nodes), truncated as kube's float64 -> int64."""
    return int(float(size) * (float(holders) / float(total_nodes)))


def calculate_priority(total: int, containers: int) -> int:
    highest = MAX_CONTAINER_THRESHOLD * containers
    clamped = min(max(total, MIN_THRESHOLD), highest)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (highest - MIN_THRESHOLD)


@dataclass(frozen=True, slots=True)
class ImageLocality:
    NAME: ClassVar[str] = NAME
    nodes: NodeTable | None = field(default=None, compare=False, repr=False)  # the profile's, for acts_on

    def acts_on(self) -> PodFeatures:
        """Every pod while some node reports images (the node table's generation changes when
        the first one does), none before."""
        return EVERY_POD if self.nodes is None or self.nodes.image_rows else NO_FEATURES

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> Status:
        held = nodes.image_rows
        if not held:
            return SKIP
        read = container_images(pod.raw)
        if read is None:
            return SKIP
        images, containers = read
        present = tuple(image for image in (*images, *volume_images(pod.raw)) if image in held)
        if not present:
            return SKIP
        state.write(_STATE, _PodImages(present, containers))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        found = state.read(_STATE, _PodImages)
        if found is None:  # PreScore did not run: compute what it would have
            self.pre_score(state, pod, nodes, feasible)
            found = state.read(_STATE, _PodImages)
        scores = np.zeros(nodes.size, np.int64)
        if found is None or nodes.count == 0:
            return scores
        sums: dict[int, int] = {}
        for image in found.present:
            rows = nodes.image_rows.get(image, {})
            add = scaled_image_score(nodes.image_size.get(image, 0), len(rows), nodes.count)
            for row in rows:
                sums[row] = sums.get(row, 0) + add
        floor = calculate_priority(0, found.containers)  # 0: rows holding none of the images
        scores[:] = floor
        for row, total in sums.items():
            scores[row] = calculate_priority(total, found.containers)
        return scores


def factory(args: NoArgs, handle: Handle) -> ImageLocality:
    return ImageLocality(nodes=handle.nodes)


SPEC = PluginSpec(NAME, NoArgs, factory, ImageLocality)
