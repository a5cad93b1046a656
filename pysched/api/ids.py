"""Identifiers. Distinct types so a node name is never passed where a pod key is expected."""

from typing import NewType

PodKey = NewType("PodKey", str)
"""`namespace/name` of a pod."""
PodUID = NewType("PodUID", str)
OwnerUID = NewType("OwnerUID", str)  # metadata.uid of a pod's controlling owner (a Job, say)
NodeName = NewType("NodeName", str)


def pod_key(namespace: str, name: str) -> PodKey:
    return PodKey(f"{namespace}/{name}")


JobKey = NewType("JobKey", str)
"""`namespace/kind/name` of a job (api/jobs.py): the kind keeps two controllers' names apart."""
