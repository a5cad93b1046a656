"""Container images: what a node reports it holds (`status.images`) and image names as
kube-scheduler's ImageLocality compares them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pysched.api.limits import MAX_UNITS

MAX_NODE_IMAGES = 1_024  # images read per node (the kubelet reports 50 by default)
MAX_IMAGE_NAMES = 16  # names read per image (a digest and a few tags in practice)
MAX_IMAGE_NAME_CHARS = 1_024


@dataclass(frozen=True, slots=True)
class NodeImage:
    names: tuple[str, ...]
    size: int  # bytes


def normalized_image_name(name: str) -> str:
    """kube-scheduler's normalizedImageName: a name without a tag after its last `/` gets
    `:latest` (no registry or `library/` is added: kube-scheduler does not either)."""
    return name + ":latest" if name.rfind(":") <= name.rfind("/") else name


def node_images(status: Mapping[str, Any]) -> tuple[NodeImage, ...]:
    """`status.images`, bounded; an entry of the wrong shape is skipped, not the node."""
    images = status.get("images")
    if not isinstance(images, list):
        return ()
    out: list[NodeImage] = []
    for entry in images[:MAX_NODE_IMAGES]:
        if not isinstance(entry, Mapping):
            continue
        size = entry.get("sizeBytes", 0)
        raw_names = entry.get("names")
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_UNITS:
            continue
        if not isinstance(raw_names, list):
            continue
        names = tuple(
            n for n in raw_names[:MAX_IMAGE_NAMES] if isinstance(n, str) and 0 < len(n) <= MAX_IMAGE_NAME_CHARS
        )
        if names:
            out.append(NodeImage(names, size))
    return tuple(out)


def container_images(pod: Mapping[str, Any]) -> tuple[list[str], int] | None:
    """The normalized images of a pod's init containers and containers, and how many containers
    it has (ImageLocality's thresholds scale with it); None when the spec has no container list."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return None
    images: list[str] = []
    count = 0
    for key in ("initContainers", "containers"):
        containers = spec.get(key) or []
        if not isinstance(containers, list):
            return None
        for container in containers:
            count += 1
            image = container.get("image") if isinstance(container, Mapping) else None
            if isinstance(image, str) and 0 < len(image) <= MAX_IMAGE_NAME_CHARS:
                images.append(normalized_image_name(image))
    return (images, count) if count else None


def volume_images(pod: Mapping[str, Any]) -> list[str]:
    """The normalized images of the pod's image volumes (`spec.volumes[].image.reference`), which
    ImageLocality scores as it scores containers' images (they add nothing to the container count
    its thresholds scale with)."""
    spec = pod.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    if not isinstance(volumes, list):
        return []
    images: list[str] = []
    for volume in volumes:
        image = volume.get("image") if isinstance(volume, Mapping) else None
        reference = image.get("reference") if isinstance(image, Mapping) else None
        if isinstance(reference, str) and 0 < len(reference) <= MAX_IMAGE_NAME_CHARS:
            images.append(normalized_image_name(reference))
    return images
