"""Storage objects the volume plugins read: a pod's volumes, PersistentVolumeClaims,
PersistentVolumes, StorageClasses and CSINodes, as small frozen records parsed from API dicts.

Every parser is bounded: names are at most 253 characters, quantities pass the resource parser,
lists are capped. A malformed object raises one of `objects.MALFORMED`; the backends report it
and keep going.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_CEILING
from typing import Any

from pysched.api.labels import selector_matches, selector_problem
from pysched.api.limits import PLACED_LIST_LIMIT, clip
from pysched.api.resources import QuantityError, parse_quantity
from pysched.api.selectors import Requirement, SelectorTerm, go_int, requirement_problem

MAX_NAME_CHARS = 253  # a DNS subdomain: the longest name of any of these objects
MAX_VOLUMES = 1024  # volumes of one pod, terms of one affinity, drivers of one CSINode

STORAGE = "storage"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
FILESYSTEM = "Filesystem"


MAX_STORAGE_BYTES = 2**63 - 1  # what kube's int64 quantity holds: a storage pool may pass any node's size


def _storage_bytes(value: str | int | float, what: str) -> int:
    """A storage quantity in bytes, rounded up; bounded by int64, not by node capacities."""
    units = int(parse_quantity(value).to_integral_value(rounding=ROUND_CEILING))
    if not 0 <= units <= MAX_STORAGE_BYTES:
        raise QuantityError(f"{what} {clip(value)} is not between 0 and {MAX_STORAGE_BYTES} bytes")
    return units


def _name(value: object, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {clip(value)}")
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"{what} {clip(value)} is longer than {MAX_NAME_CHARS} characters")
    return value


def _list(value: object, what: str, limit: int = MAX_VOLUMES) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise TypeError(f"{what} must be a list, got {clip(value)}")
    if len(value) > limit:
        raise ValueError(f"{what} has {len(value)} entries (at most {limit})")
    return list(value)


def _map(value: object, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a map, got {clip(value)}")
    return value


def _strings(value: object, what: str) -> tuple[str, ...]:
    return tuple(_name(v, what) for v in _list(value, what))


def _string_map(value: object, what: str) -> dict[str, str]:
    raw = _map(value, what)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise TypeError(f"{what} must map strings to strings")
    return dict(raw)


# ----- a pod's volumes
@dataclass(frozen=True, slots=True)
class InlineDisk:
    """An inline disk VolumeRestrictions checks: GCE PD, AWS EBS, RBD or ISCSI."""

    kind: str  # "gce" | "aws" | "rbd" | "iscsi"
    ident: str  # pdName, volumeID, pool/image, IQN
    read_only: bool = False
    monitors: frozenset[str] = frozenset()  # RBD only

    def conflicts(self, other: InlineDisk) -> bool:
        """Two pods mounting these on one node conflict (VolumeRestrictions' isVolumeConflict)."""
        if self.kind != other.kind or self.ident != other.ident:
            return False
        if self.kind == "aws":
            return True
        if self.kind == "rbd" and not (self.monitors & other.monitors):
            return False
        return not (self.read_only and other.read_only)


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """What the volume plugins read of `spec.volumes`: claim names (those of generic ephemeral
    volumes also in `ephemeral`) and inline disks."""

    claims: tuple[str, ...] = ()
    disks: tuple[InlineDisk, ...] = ()
    ephemeral: frozenset[str] = frozenset()


def _disk(volume: Mapping[str, Any]) -> InlineDisk | None:
    for key, kind, ident_key in (
        ("gcePersistentDisk", "gce", "pdName"),
        ("awsElasticBlockStore", "aws", "volumeID"),
        ("iscsi", "iscsi", "iqn"),
    ):
        if key in volume:
            source = _map(volume[key], f"volume {key}")
            return InlineDisk(kind, _name(source.get(ident_key), f"{key}.{ident_key}"), source.get("readOnly") is True)
    if "rbd" in volume:
        rbd = _map(volume["rbd"], "volume rbd")
        pool = _name(rbd.get("pool"), "rbd.pool") or "rbd"
        image = _name(rbd.get("image"), "rbd.image")
        monitors = frozenset(_strings(rbd.get("monitors"), "rbd.monitors"))
        return InlineDisk("rbd", f"{pool}/{image}", rbd.get("readOnly") is True, monitors)
    return None


def pod_volumes(spec: Mapping[str, Any], pod_name: str, placed: bool = False) -> PodVolumes | None:
    """The pod's volumes of interest, or None when it has none (most pods: no cost later).
    `placed`: a placed pod's, read within PLACED_LIST_LIMIT."""
    raw = spec.get("volumes")
    if not raw:
        return None
    claims: list[str] = []
    disks: list[InlineDisk] = []
    ephemeral: list[str] = []
    for volume in _list(raw, "spec.volumes", PLACED_LIST_LIMIT if placed else MAX_VOLUMES):
        volume = _map(volume, "spec.volumes entry")
        if "persistentVolumeClaim" in volume:
            claim = _map(volume["persistentVolumeClaim"], "persistentVolumeClaim")
            claims.append(_name(claim.get("claimName"), "persistentVolumeClaim.claimName"))
        elif "ephemeral" in volume:
            # A generic ephemeral volume's claim is named <pod>-<volume> by its controller.
            ephemeral.append(f"{pod_name}-{_name(volume.get('name'), 'volume name')}")
            claims.append(ephemeral[-1])
        else:
            # Inline CSI volumes are not attached (the kubelet publishes them on the node alone):
            # no filter counts them, as kube-scheduler does not.
            disk = _disk(volume)
            if disk is not None:
                disks.append(disk)
    if not claims and not disks:
        return None
    return PodVolumes(tuple(claims), tuple(disks), frozenset(ephemeral))


# ----- node selectors (PV node affinity, StorageClass allowedTopologies)
def _requirements(raw: object, what: str) -> tuple[Requirement, ...]:
    out = []
    for entry in _list(raw, what):
        entry = _map(entry, what)
        out.append(
            Requirement(
                _name(entry.get("key"), f"{what}.key"),
                _name(entry.get("operator") or "In", f"{what}.operator"),
                _strings(entry.get("values"), f"{what}.values"),
            )
        )
    return tuple(out)


def requirement_matches(req: Requirement, labels: Mapping[str, str]) -> bool:
    if requirement_problem(req) is not None:
        return False
    value = labels.get(req.key)
    if req.operator == "In":
        return value is not None and value in req.values
    if req.operator == "NotIn":
        return value is None or value not in req.values
    if req.operator == "Exists":
        return value is not None
    if req.operator == "DoesNotExist":
        return value is None
    if req.operator in ("Gt", "Lt") and value is not None and len(req.values) == 1:
        have, bound = go_int(value), go_int(req.values[0])
        if have is None or bound is None:
            return False
        return have > bound if req.operator == "Gt" else have < bound
    return False


def terms_match(terms: tuple[SelectorTerm, ...], labels: Mapping[str, str]) -> bool:
    """Any term matches (an empty term matches nothing; matchFields see only labels, as the
    volume helpers build a node from its labels alone)."""
    for term in terms:
        if not term.match_expressions or term.match_fields:
            continue
        if all(requirement_matches(r, labels) for r in term.match_expressions):
            return True
    return False


# ----- PersistentVolumeClaim
@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    uid: str = ""
    storage_class: str = ""  # "" = no class
    volume_name: str = ""
    access_modes: tuple[str, ...] = ()
    request: int = 0  # bytes of storage asked for
    selector: Mapping[str, Any] | None = None
    selector_problem: str | None = None
    volume_mode: str = FILESYSTEM
    annotations: Mapping[str, str] = field(default_factory=dict)
    phase: str = "Pending"
    deleting: bool = False
    resource_version: str = ""
    controller_uid: str = ""  # its controller's, from ownerReferences: a generic ephemeral volume's pod
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def not_for(self, pod_namespace: str, pod_name: str, pod_uid: str) -> str | None:
        """Why this claim may not serve a pod's generic ephemeral volume (kube's
        VolumeIsForPod): the pod must be its controller, or it is another pod's (or a user's)."""
        if pod_uid and self.controller_uid == pod_uid:
            return None
        return f"PVC {self.key} was not created for pod {pod_namespace}/{pod_name} (pod is not owner)"

    @property
    def fully_bound(self) -> bool:
        return bool(self.volume_name) and ANN_BIND_COMPLETED in self.annotations


def pvc_from_dict(obj: Mapping[str, Any]) -> PersistentVolumeClaim:
    meta = _map(obj.get("metadata"), "metadata")
    spec = _map(obj.get("spec"), "spec")
    status = _map(obj.get("status"), "status")
    annotations = _string_map(meta.get("annotations"), "metadata.annotations")
    requests = _map(_map(spec.get("resources"), "spec.resources").get("requests"), "spec.resources.requests")
    storage = requests.get(STORAGE)
    selector = spec.get("selector")
    problem = None
    if selector is not None:
        selector = _map(selector, "spec.selector")
        problem = selector_problem(selector)
    if "storageClassName" in spec and spec["storageClassName"] is not None:
        storage_class = _name(spec["storageClassName"], "spec.storageClassName")
    else:
        storage_class = annotations.get(ANN_BETA_STORAGE_CLASS, "")
    return PersistentVolumeClaim(
        namespace=_name(meta.get("namespace") or "default", "metadata.namespace"),
        name=_name(meta["name"], "metadata.name"),
        uid=_name(meta.get("uid"), "metadata.uid"),
        storage_class=storage_class,
        volume_name=_name(spec.get("volumeName"), "spec.volumeName"),
        access_modes=_strings(spec.get("accessModes"), "spec.accessModes"),
        request=_storage_bytes(storage, "spec.resources.requests.storage") if storage is not None else 0,
        selector=selector,
        selector_problem=problem,
        volume_mode=_name(spec.get("volumeMode"), "spec.volumeMode") or FILESYSTEM,
        annotations=annotations,
        phase=_name(status.get("phase"), "status.phase") or "Pending",
        deleting=meta.get("deletionTimestamp") is not None,
        resource_version=_name(meta.get("resourceVersion"), "metadata.resourceVersion"),
        controller_uid=_controller_uid(meta),
        raw=obj,
    )


def _controller_uid(meta: Mapping[str, Any]) -> str:
    for ref in _list(meta.get("ownerReferences"), "metadata.ownerReferences"):
        ref = _map(ref, "metadata.ownerReferences entry")
        if ref.get("controller") is True:
            return _name(ref.get("uid"), "metadata.ownerReferences.uid")
    return ""


# ----- PersistentVolume
@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    storage_class: str = ""
    capacity: int = 0
    access_modes: tuple[str, ...] = ()
    volume_mode: str = FILESYSTEM
    claim_ref: ClaimRef | None = None
    node_affinity: tuple[SelectorTerm, ...] | None = None  # None: any node
    labels: Mapping[str, str] = field(default_factory=dict)
    phase: str = "Available"
    deleting: bool = False
    csi_driver: str = ""
    csi_handle: str = ""
    resource_version: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def fits_node(self, labels: Mapping[str, str]) -> bool:
        return self.node_affinity is None or terms_match(self.node_affinity, labels)

    def bound_to(self, claim: PersistentVolumeClaim) -> bool:
        ref = self.claim_ref
        return (
            ref is not None
            and ref.name == claim.name
            and ref.namespace == claim.namespace
            and (not ref.uid or ref.uid == claim.uid)
        )


def _selector_terms(raw: object, what: str) -> tuple[SelectorTerm, ...]:
    terms = []
    for term in _list(raw, what):
        term = _map(term, what)
        terms.append(
            SelectorTerm(
                _requirements(term.get("matchExpressions"), f"{what}.matchExpressions"),
                _requirements(term.get("matchFields"), f"{what}.matchFields"),
            )
        )
    return tuple(terms)


def pv_from_dict(obj: Mapping[str, Any]) -> PersistentVolume:
    meta = _map(obj.get("metadata"), "metadata")
    spec = _map(obj.get("spec"), "spec")
    status = _map(obj.get("status"), "status")
    annotations = _string_map(meta.get("annotations"), "metadata.annotations")
    capacity = _map(spec.get("capacity"), "spec.capacity").get(STORAGE)
    ref_raw = spec.get("claimRef")
    claim_ref = None
    if ref_raw is not None:
        ref = _map(ref_raw, "spec.claimRef")
        claim_ref = ClaimRef(
            _name(ref.get("namespace"), "claimRef.namespace"),
            _name(ref.get("name"), "claimRef.name"),
            _name(ref.get("uid"), "claimRef.uid"),
        )
    affinity = None
    required = _map(spec.get("nodeAffinity"), "spec.nodeAffinity").get("required")
    if required is not None:
        terms_raw = _map(required, "spec.nodeAffinity.required").get("nodeSelectorTerms")
        affinity = _selector_terms(terms_raw, "nodeSelectorTerms")
    csi = _map(spec.get("csi"), "spec.csi")
    if "storageClassName" in spec and spec["storageClassName"] is not None:
        storage_class = _name(spec["storageClassName"], "spec.storageClassName")
    else:
        storage_class = annotations.get(ANN_BETA_STORAGE_CLASS, "")
    return PersistentVolume(
        name=_name(meta["name"], "metadata.name"),
        storage_class=storage_class,
        capacity=_storage_bytes(capacity, "spec.capacity.storage") if capacity is not None else 0,
        access_modes=_strings(spec.get("accessModes"), "spec.accessModes"),
        volume_mode=_name(spec.get("volumeMode"), "spec.volumeMode") or FILESYSTEM,
        claim_ref=claim_ref,
        node_affinity=affinity,
        labels=_string_map(meta.get("labels"), "metadata.labels"),
        phase=_name(status.get("phase"), "status.phase") or "Available",
        deleting=meta.get("deletionTimestamp") is not None,
        csi_driver=_name(csi.get("driver"), "spec.csi.driver"),
        csi_handle=_name(csi.get("volumeHandle"), "spec.csi.volumeHandle"),
        resource_version=_name(meta.get("resourceVersion"), "metadata.resourceVersion"),
        raw=obj,
    )


def volume_matches_claim(pv: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """Everything FindMatchingVolume checks apart from the node and the exclusions: phase,
    claimRef, selector, class, access modes, volume mode, deletion and size."""
    if pv.deleting or pv.capacity < claim.request or pv.volume_mode != claim.volume_mode:
        return False
    if pv.phase != "Available" or pv.claim_ref is not None:
        return False
    if claim.selector is not None and not selector_matches(claim.selector, pv.labels):
        return False
    if pv.storage_class != claim.storage_class:
        return False
    return all(mode in pv.access_modes for mode in claim.access_modes)


# ----- StorageClass
@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: str = IMMEDIATE
    allowed_topologies: tuple[SelectorTerm, ...] | None = None  # None: provisioned anywhere
    resource_version: str = ""

    def allows(self, labels: Mapping[str, str]) -> bool:
        return self.allowed_topologies is None or terms_match(self.allowed_topologies, labels)


def storage_class_from_dict(obj: Mapping[str, Any]) -> StorageClass:
    meta = _map(obj.get("metadata"), "metadata")
    topologies = obj.get("allowedTopologies")
    allowed = None
    if topologies:
        terms = []
        for term in _list(topologies, "allowedTopologies"):
            term = _map(term, "allowedTopologies entry")
            terms.append(SelectorTerm(_requirements(term.get("matchLabelExpressions"), "matchLabelExpressions")))
        allowed = tuple(terms)
    return StorageClass(
        name=_name(meta["name"], "metadata.name"),
        provisioner=_name(obj.get("provisioner"), "provisioner"),
        binding_mode=_name(obj.get("volumeBindingMode"), "volumeBindingMode") or IMMEDIATE,
        allowed_topologies=allowed,
        resource_version=_name(meta.get("resourceVersion"), "metadata.resourceVersion"),
    )


# ----- CSINode
MAX_VOLUME_LIMIT = 2**31 - 1


@dataclass(frozen=True, slots=True)
class CSINode:
    name: str
    limits: Mapping[str, int] = field(default_factory=dict)  # driver -> allocatable count
    resource_version: str = ""


def csi_node_from_dict(obj: Mapping[str, Any]) -> CSINode:
    meta = _map(obj.get("metadata"), "metadata")
    limits: dict[str, int] = {}
    for driver in _list(_map(obj.get("spec"), "spec").get("drivers"), "spec.drivers"):
        driver = _map(driver, "spec.drivers entry")
        count = _map(driver.get("allocatable"), "allocatable").get("count")
        if count is None:
            continue
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_VOLUME_LIMIT:
            raise ValueError(f"allocatable.count {clip(count)} is not an integer in 0..{MAX_VOLUME_LIMIT}")
        limits[_name(driver.get("name"), "driver name")] = count
    return CSINode(
        _name(meta["name"], "metadata.name"),
        limits,
        _name(meta.get("resourceVersion"), "metadata.resourceVersion"),
    )


# ----- CSIDriver and CSIStorageCapacity: what a CSI driver that opts in can still provision where
@dataclass(frozen=True, slots=True)
class CSIDriver:
    name: str
    storage_capacity: bool = False  # spec.storageCapacity: the scheduler checks CSIStorageCapacity
    resource_version: str = ""


def csi_driver_from_dict(obj: Mapping[str, Any]) -> CSIDriver:
    meta = _map(obj.get("metadata"), "metadata")
    flag = _map(obj.get("spec"), "spec").get("storageCapacity")
    if flag is not None and not isinstance(flag, bool):
        raise TypeError(f"spec.storageCapacity must be true or false, got {clip(flag)}")
    version = _name(meta.get("resourceVersion"), "metadata.resourceVersion")
    return CSIDriver(_name(meta["name"], "metadata.name"), flag is True, version)


@dataclass(frozen=True, slots=True)
class CSIStorageCapacity:
    namespace: str
    name: str
    storage_class: str
    node_topology: Mapping[str, Any] | None = None  # a label selector; None: no node has access
    limit: int | None = None  # bytes: maximumVolumeSize when given (more precise), else capacity
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def serves(self, labels: Mapping[str, str]) -> bool:
        return self.node_topology is not None and selector_matches(self.node_topology, labels)


def csi_storage_capacity_from_dict(obj: Mapping[str, Any]) -> CSIStorageCapacity:
    meta = _map(obj.get("metadata"), "metadata")
    topology = obj.get("nodeTopology")
    if topology is not None:
        topology = _map(topology, "nodeTopology")
        problem = selector_problem(topology)
        if problem is not None:
            raise ValueError(f"nodeTopology: {problem}")
    field_name = "maximumVolumeSize" if obj.get("maximumVolumeSize") is not None else "capacity"
    limit = obj.get(field_name)
    return CSIStorageCapacity(
        namespace=_name(meta.get("namespace") or "default", "metadata.namespace"),
        name=_name(meta["name"], "metadata.name"),
        storage_class=_name(obj.get("storageClassName"), "storageClassName"),
        node_topology=topology,
        limit=_storage_bytes(limit, field_name) if limit is not None else None,
        resource_version=_name(meta.get("resourceVersion"), "metadata.resourceVersion"),
    )


Storage = PersistentVolumeClaim | PersistentVolume | StorageClass | CSINode | CSIDriver | CSIStorageCapacity
