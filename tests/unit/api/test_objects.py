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
        # Every field not changed is the very same object (raw and features too, which == skips).
        kept = [f.name for f in dataclasses.fields(pod) if f.name not in changes and f.name != "features"]
        assert all(getattr(moved, name) is getattr(pod, name) for name in kept)
        assert (moved.features is pod.features) == ("labels" not in changes)
