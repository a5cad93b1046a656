"""Pod objects: copies with some fields changed."""

import dataclasses
from typing import Any

from pysched.api.objects import pod_from_dict


def test_evolve_is_replace_with_every_other_field_kept() -> None:
    raw = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"app": "a"}, "annotations": {"k": "v"}},
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]},
    }
    pod = pod_from_dict(raw, {})
    every: list[dict[str, Any]] = [
        {"annotations": {"k": "w"}, "resource_version": "7"},
        {"labels": {}},
        {"node_name": "n1"},
    ]
    for changes in every:
        moved, replaced = pod.evolve(**changes), dataclasses.replace(pod, **changes)
        assert moved == replaced and moved.features == replaced.features
