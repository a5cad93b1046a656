"""What a pod asks of the scheduler beyond resources, its node selector, required node affinity
and tolerations, as bits set once when the pod record is built. A plugin with nothing to do for
pods lacking certain bits says so (`pysched.framework.gates`), and the engine does not call it
for them: a plain pod then pays nothing for the pod-affinity, spread, port and volume plugins of
the default profile."""

from __future__ import annotations

from typing import Final, NewType

PodFeatures = NewType("PodFeatures", int)

NO_FEATURES: Final = PodFeatures(0)  # what a plugin that acts on no pod (now) answers
EVERY_POD: Final = PodFeatures(1)  # set for every pod: what a plugin that acts on all answers
POD_AFFINITY: Final = PodFeatures(2)  # spec.affinity.podAffinity / podAntiAffinity
SPREAD: Final = PodFeatures(4)  # spec.topologySpreadConstraints
HOST_PORTS: Final = PodFeatures(8)  # containers' or sidecars' hostPorts
VOLUMES: Final = PodFeatures(16)  # claims, ephemeral, CSI or other disks the volume plugins read
CONTROLLER: Final = PodFeatures(32)  # a controlling owner (default spread constraints select by it)
LABELS: Final = PodFeatures(64)  # any label (a Service, or another pod's term, may select it)
NODE_PREFERENCES: Final = PodFeatures(128)  # preferred node affinity
REFUSED: Final = PodFeatures(256)  # a PodSpec field pysched refuses (`pysched.api.podspec`)
NODE_FEATURES: Final = PodFeatures(512)  # features its node must declare (`pysched.api.node_features`)


def features_of(
    *,
    pod_affinity: bool,
    spread: bool,
    host_ports: bool,
    volumes: bool,
    controller: bool,
    labels: bool,
    node_preferences: bool,
    refused: bool,
    node_features: bool,
) -> PodFeatures:
    return PodFeatures(
        EVERY_POD
        | (POD_AFFINITY if pod_affinity else 0)
        | (SPREAD if spread else 0)
        | (HOST_PORTS if host_ports else 0)
        | (VOLUMES if volumes else 0)
        | (CONTROLLER if controller else 0)
        | (LABELS if labels else 0)
        | (NODE_PREFERENCES if node_preferences else 0)
        | (REFUSED if refused else 0)
        | (NODE_FEATURES if node_features else 0)
    )
