"""Slim, immutable records of the pods and nodes the scheduler reads.

Both backends build these from the raw API dicts with the same functions, so the live and the
simulated cluster cannot disagree about what a pod asks for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pysched.api.affinity import MAX_WEIGHT, PodAffinity, parse_pod_affinity
from pysched.api.features import PodFeatures, features_of
from pysched.api.ids import NodeName, OwnerUID, PodKey, PodUID, pod_key
from pysched.api.images import NodeImage, node_images
from pysched.api.limits import clip
from pysched.api.node_features import NO_NODE_FEATURES, declared_features, required_features
from pysched.api.podspec import refused_fields
from pysched.api.ports import HostPort, host_ports
from pysched.api.resources import (
    PODS,
    ResourceMap,
    nonzero_requests,
    parse_resource_list,
    pod_nonzero_requests,
    pod_requests,
)
from pysched.api.selectors import Requirement as Requirement  # re-exported: their home was here
from pysched.api.selectors import SelectorTerm as SelectorTerm
from pysched.api.spread import SpreadConstraint, spread_constraints
from pysched.api.times import parse_time
from pysched.api.volumes import PodVolumes, pod_volumes

DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Toleration semantics of k8s.io/api/core/v1 `Toleration.ToleratesTaint`."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("Equal", "") and self.value == taint.value


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """The pod's controlling owner: its ownerReference with `controller: true`."""

    kind: str
    name: str
    uid: OwnerUID
    api_version: str = ""

    @property
    def is_job(self) -> bool:
        """A batch Job: the only owner kind the live backend watches for creation times."""
        return self.kind == "Job" and self.api_version.startswith("batch/")


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the scheduler needs of a pod; `raw` keeps the source object for plugins that want more."""

    key: PodKey
    uid: PodUID
    namespace: str
    name: str
    scheduler_name: str
    priority: int
    created: float
    requests: ResourceMap
    node_name: NodeName | None = None
    # CPU and memory as scoring counts them, where the stand-ins filled in per container differ
    # from `nonzero_requests(requests)` (api/resources.py `pod_nonzero_requests`); None: they do not.
    nonzero: tuple[int, int] | None = None
    phase: str = "Pending"
    node_selector: tuple[tuple[str, str], ...] = ()
    required_terms: tuple[SelectorTerm, ...] | None = None
    preferred_terms: tuple[tuple[int, SelectorTerm], ...] = ()  # (weight, preference), kube's skips dropped
    tolerations: tuple[Toleration, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""
    deleting: bool = False
    controller: OwnerRef | None = None
    # The controller's creation time (epoch s) when the backend knows it: deadline durations count
    # from it, so a pod its Job recreates keeps the Job's deadline.
    owner_created: float | None = None
    host_ports: tuple[HostPort, ...] = ()  # containers' and sidecars' hostPorts (api/ports.py)
    volumes: PodVolumes | None = None  # PVCs and inline disks, None for pods without either
    pod_affinity: PodAffinity | None = None  # spec.affinity.podAffinity / podAntiAffinity
    spread: tuple[SpreadConstraint, ...] = ()  # spec.topologySpreadConstraints
    refused: tuple[str, ...] = ()  # the refused PodSpec paths it sets (api/podspec.py); immutable in the API
    required_features: frozenset[str] = NO_NODE_FEATURES  # what its node must declare (api/node_features.py)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # Derived from the fields above (api/features.py), never given: plugins gate on it per cycle.
    features: PodFeatures = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", self._features())

    def _features(self) -> PodFeatures:
        return features_of(
            pod_affinity=self.pod_affinity is not None,
            spread=bool(self.spread),
            host_ports=bool(self.host_ports),
            volumes=self.volumes is not None,
            controller=self.controller is not None,
            labels=bool(self.labels),
            node_preferences=bool(self.preferred_terms),
            refused=bool(self.refused),
            node_features=bool(self.required_features),
        )

    @property
    def terminated(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def nonzero_cpu_memory(self) -> tuple[int, int]:
        return self.nonzero if self.nonzero is not None else nonzero_requests(self.requests)

    def evolve(self, **changes: object) -> PodInfo:
        """A copy with some fields changed (cheaper than dataclasses.replace on the hot path)."""
        clone = _copy_pod(self)
        setter = object.__setattr__
        for name, value in changes.items():
            if name not in _POD_FIELDS:
                raise TypeError(f"PodInfo has no field {name!r}")
            setter(clone, name, value)
        if "requests" in changes and "nonzero" not in changes:
            setter(clone, "nonzero", None)  # read from a pod's containers, which a resize changed
        if not _FEATURE_FIELDS.isdisjoint(changes):
            setter(clone, "features", clone._features())
        return clone


_POD_FIELDS: frozenset[str] = frozenset(f.name for f in dataclasses.fields(PodInfo) if f.init)


def _slot_copier() -> Callable[[PodInfo], PodInfo]:
    """A copy of every slot in straight-line code, generated once as dataclasses generates its
    methods: a copy per update of every running pod's progress, at half the cost of a loop."""
    names = [f.name for f in dataclasses.fields(PodInfo)]
    scope: dict[str, Any] = {f"set_{n}": vars(PodInfo)[n].__set__ for n in names}
    scope.update(new=object.__new__, PodInfo=PodInfo)
    body = "".join(f"    set_{n}(clone, pod.{n})\n" for n in names)
    exec(f"def copy(pod):\n    clone = new(PodInfo)\n{body}    return clone\n", scope)
    copy: Callable[[PodInfo], PodInfo] = scope["copy"]
    return copy


_copy_pod = _slot_copier()
_FEATURE_FIELDS: frozenset[str] = frozenset(
    {
        "pod_affinity",
        "spread",
        "host_ports",
        "volumes",
        "controller",
        "labels",
        "preferred_terms",
        "refused",
        "required_features",
    }
)  # what `_features` reads


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: NodeName
    allocatable: ResourceMap
    capacity: ResourceMap = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    resource_version: str = ""
    images: tuple[NodeImage, ...] = ()  # status.images, bounded (api/images.py)
    declared_features: frozenset[str] = NO_NODE_FEATURES  # status.declaredFeatures, bounded (api/node_features.py)


def _requirements(raw: Any) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(str(r.get("key", "")), str(r.get("operator", "")), tuple(map(str, r.get("values") or ())))
        for r in raw or ()
    )


def _required_terms(spec: Mapping[str, Any]) -> tuple[SelectorTerm, ...] | None:
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    return tuple(
        SelectorTerm(_requirements(t.get("matchExpressions")), _requirements(t.get("matchFields")))
        for t in required.get("nodeSelectorTerms") or ()
    )


def _preferred_terms(spec: Mapping[str, Any]) -> tuple[tuple[int, SelectorTerm], ...]:
    """Preferred node affinity as kube's NodeAffinity scores it: terms of weight 0 or without
    any requirement are left out."""
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    out = []
    for item in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        weight = item.get("weight") or 0
        if not isinstance(weight, int) or isinstance(weight, bool) or not 0 <= weight <= MAX_WEIGHT:
            raise ValueError(f"a preferred node affinity term's weight: 1 to {MAX_WEIGHT}, got {clip(weight)}")
        preference = item.get("preference") or {}
        term = SelectorTerm(
            _requirements(preference.get("matchExpressions")), _requirements(preference.get("matchFields"))
        )
        if weight and (term.match_expressions or term.match_fields):
            out.append((weight, term))
    return tuple(out)


def _controller(refs: Any) -> OwnerRef | None:
    for ref in refs:
        if ref.get("controller") is True:
            return OwnerRef(
                kind=str(ref.get("kind") or ""),
                name=str(ref.get("name") or ""),
                uid=OwnerUID(str(ref.get("uid") or "")),
                api_version=str(ref.get("apiVersion") or ""),
            )
    return None


# What reading a malformed object may raise (a wrong type where a map was expected, a number
# beyond Decimal's context...): the backends catch exactly these and report the object.
MALFORMED: tuple[type[Exception], ...] = (ValueError, KeyError, TypeError, AttributeError, ArithmeticError)


def _optional_text(value: object, what: str) -> str | None:
    """A string field of the API: absent or a string (a hand-written object may hold anything)."""
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{what}: {clip(value)} is not a string")


_INT32 = 2**31


def _int32(value: object, what: str) -> int:
    """An int32 field of the API (absent: 0); a float, a string or a bool is refused, not cast."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and -_INT32 <= value < _INT32:
        return value
    raise ValueError(f"{what}: {clip(value)} is not a 32-bit integer")


def _tolerations(raw: object) -> tuple[Toleration, ...]:
    """`spec.tolerations`, each field a string: a key of another type must not become the empty
    key, which tolerates every taint."""
    if not raw:
        return ()
    if not isinstance(raw, list) or not all(isinstance(t, Mapping) for t in raw):
        raise ValueError("spec.tolerations: a list of objects")
    return tuple(
        Toleration(
            _optional_text(t.get("key"), f"spec.tolerations[{i}].key") or "",
            _optional_text(t.get("operator"), f"spec.tolerations[{i}].operator") or "Equal",
            _optional_text(t.get("value"), f"spec.tolerations[{i}].value") or "",
            _optional_text(t.get("effect"), f"spec.tolerations[{i}].effect") or "",
        )
        for i, t in enumerate(raw)
    )


def _string_map(value: object, what: str) -> dict[str, str]:
    """Labels or annotations: strings to strings, as the API guarantees (a hand-written object may not)."""
    if not value:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError(f"{what} must map strings to strings")
    return dict(value)


# What a placed pod is read without when it cannot be read whole (a list past this scheduler's
# bounds, a field it cannot parse): the constraints it placed itself by, not what it holds.
_PLACED_OPTIONAL = ("affinity", "topologySpreadConstraints", "volumes")


def read_pod(obj: Mapping[str, Any], owner_times: Mapping[str, float] | None = None) -> tuple[PodInfo, str | None]:
    """`pod_from_dict`, and for a pod bound to a node that cannot be read whole, the pod read
    without its own constraints and why (None: read whole). Its requests and host ports count on
    its node whatever else it states: a pod another scheduler placed is there, and dropping it
    would let its node be overcommitted. A bound pod's lists are read within PLACED_LIST_LIMIT, not
    the bounds pysched places pods under: its host ports, volumes and anti-affinity count. Raises
    one of MALFORMED for a pod not bound, and for a bound one whose requests cannot be read."""
    try:
        return pod_from_dict(obj, owner_times), None
    except MALFORMED:
        spec = obj.get("spec") or {}
        if not isinstance(spec, Mapping) or not spec.get("nodeName"):
            raise
    try:
        return pod_from_dict(obj, owner_times, placed=True), None
    except MALFORMED as err:
        problem = str(err)
    stripped = {k: v for k, v in spec.items() if k not in _PLACED_OPTIONAL}
    return pod_from_dict({**obj, "spec": stripped}, owner_times, placed=True), problem


def pod_from_dict(
    obj: Mapping[str, Any], owner_times: Mapping[str, float] | None = None, placed: bool = False
) -> PodInfo:
    """Build a PodInfo from a Pod as the API serves it (camelCase JSON).

    `owner_times` (owner uid -> creation time, as the backend knows them) fills `owner_created`
    when the pod's controller is among them. `placed`: a bound pod, whose lists are read within
    PLACED_LIST_LIMIT (`read_pod`).

    Raises ValueError (QuantityError included) for a pod whose requests cannot be read; the
    caller turns that into an event on the pod instead of crashing.
    """
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    namespace = str(meta.get("namespace") or "default")
    name = str(meta["name"])
    node = _optional_text(spec.get("nodeName"), "spec.nodeName")
    refs = meta.get("ownerReferences")
    controller = _controller(refs) if refs else None  # most bench pods have none: skip the call
    owner_created = owner_times.get(controller.uid) if controller is not None and owner_times else None
    return PodInfo(
        key=pod_key(namespace, name),
        uid=PodUID(str(meta.get("uid") or "")),
        namespace=namespace,
        name=name,
        scheduler_name=str(spec.get("schedulerName") or DEFAULT_SCHEDULER),
        priority=_int32(spec.get("priority"), "spec.priority"),
        created=parse_time(meta.get("creationTimestamp")),
        requests=(requests := pod_requests(obj)),
        nonzero=pod_nonzero_requests(obj, requests),
        node_name=NodeName(node) if node else None,
        phase=str(status.get("phase") or "Pending"),
        node_selector=tuple(sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items())),
        required_terms=_required_terms(spec),
        preferred_terms=_preferred_terms(spec),
        tolerations=_tolerations(spec.get("tolerations")),
        annotations=_string_map(meta.get("annotations"), "metadata.annotations"),
        labels=_string_map(meta.get("labels"), "metadata.labels"),
        resource_version=str(meta.get("resourceVersion") or ""),
        deleting=meta.get("deletionTimestamp") is not None,
        controller=controller,
        owner_created=owner_created,
        host_ports=host_ports(spec, placed),
        volumes=pod_volumes(spec, name, placed) if "volumes" in spec else None,
        pod_affinity=parse_pod_affinity(spec.get("affinity"), namespace, meta.get("labels"), placed),
        spread=spread_constraints(spec.get("topologySpreadConstraints")),
        refused=refused_fields(obj),
        required_features=required_features(spec),
        raw=obj,
    )


def node_from_dict(obj: Mapping[str, Any]) -> NodeInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    capacity = parse_resource_list(status.get("capacity"))
    allocatable = parse_resource_list(status.get("allocatable")) if "allocatable" in status else dict(capacity)
    allocatable.setdefault(PODS, 0)
    return NodeInfo(
        name=NodeName(str(meta["name"])),
        allocatable=allocatable,
        capacity=capacity,
        labels=_string_map(meta.get("labels"), "metadata.labels"),
        taints=tuple(
            Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
            for t in spec.get("taints") or ()
        ),
        unschedulable=bool(spec.get("unschedulable")),
        resource_version=str(meta.get("resourceVersion") or ""),
        images=node_images(status),
        declared_features=declared_features(status),
    )
