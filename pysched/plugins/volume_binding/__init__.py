"""VolumeBinding: a pod's PersistentVolumeClaims decide where it can run, and are bound for it.

kube-scheduler's VolumeBinding (v1.36) with its binder: PreFilter reads the pod's claims (missing,
lost, being deleted, unbound Immediate claims reject the pod for every node), Filter checks bound
PVs' node affinity and finds, per node, a PV for each unbound WaitForFirstConsumer claim (or
dynamic provisioning the StorageClass allows there), Reserve assumes the chosen PVs so no other
pod takes them, PreBind writes the bindings (PV claimRef, or the claim's selected-node
annotation) and waits until the PV controller reports every claim bound.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar

import numpy as np

from pysched.api.features import VOLUMES, PodFeatures
from pysched.api.ids import NodeName
from pysched.api.objects import PodInfo
from pysched.api.volumes import (
    ANN_SELECTED_NODE,
    NO_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    volume_matches_claim,
)
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import PLACEMENT_EVENTS, ClusterEvent, EventKind, EventRegistration, QueueingHint
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.nodetable import Bools, NodeTable
from pysched.framework.registry import MAX_ARGS_SECONDS, PluginSpec, check_range
from pysched.framework.status import SKIP, SUCCESS, Status, error, unresolvable
from pysched.framework.storage import StorageView, terms_mask

NAME = "VolumeBinding"
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"  # kube v1.36 wording
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
_CLAIMS = "VolumeBinding/claims"
_DECISION = "VolumeBinding/decision"
POLL_SECONDS = 0.1  # how often PreBind looks at the (in-memory) claims while waiting


@dataclass(frozen=True, slots=True)
class VolumeBindingArgs:
    bind_timeout_seconds: float = 600.0  # kube's default

    def validate(self) -> None:
        check_range(self, "bind_timeout_seconds", 0.0, MAX_ARGS_SECONDS)


@dataclass(frozen=True, slots=True)
class PodClaims:
    """PreFilter's reading of the pod's claims, for Filter, Reserve and PreBind."""

    bound: tuple[PersistentVolumeClaim, ...]
    delayed: tuple[PersistentVolumeClaim, ...]  # unbound, WaitForFirstConsumer, smallest first


@dataclass(frozen=True, slots=True)
class Decision:
    """The bindings chosen for one node: static (PV, claim) pairs and claims to provision."""

    static: tuple[tuple[PersistentVolume, PersistentVolumeClaim], ...] = ()
    provision: tuple[PersistentVolumeClaim, ...] = ()


def read_claims(pod: PodInfo, storage: StorageView) -> PodClaims | Status:
    """kube's podHasPVCs + GetPodVolumeClaims: the pod's claims sorted out, or why it cannot run."""
    assert pod.volumes is not None
    claims: list[PersistentVolumeClaim] = []
    for name in pod.volumes.claims:
        claim = storage.pvc(pod.namespace, name)
        if claim is None:
            return unresolvable(f'persistentvolumeclaim "{name}" not found')
        if claim.phase == "Lost":
            return unresolvable(
                f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{claim.volume_name}"'
            )
        if claim.deleting:
            return unresolvable(f'persistentvolumeclaim "{name}" is being deleted')
        if name in pod.volumes.ephemeral:
            why = claim.not_for(pod.namespace, pod.name, pod.uid)
            if why is not None:
                return unresolvable(why)
        claims.append(claim)
    bound: list[PersistentVolumeClaim] = []
    delayed: list[PersistentVolumeClaim] = []
    immediate = False
    for claim in claims:
        if claim.fully_bound:
            bound.append(claim)
            continue
        if not claim.storage_class or claim.volume_name:
            # No class to delay by, or it names its volume (prebound): the PV controller binds
            # it, as kube-scheduler treats it (unbound immediate), not this pod's placement.
            immediate = True
            continue
        storage_class = storage.storage_class(claim.storage_class)
        if storage_class is None:
            return unresolvable(f'storageclass.storage.k8s.io "{claim.storage_class}" not found')
        if storage_class.binding_mode != WAIT_FOR_FIRST_CONSUMER:
            immediate = True
        elif claim.selector_problem is not None:
            return unresolvable(f'persistentvolumeclaim "{claim.name}": {claim.selector_problem}')
        else:
            delayed.append(claim)
    if immediate:
        return unresolvable(UNBOUND_IMMEDIATE)
    delayed.sort(key=lambda c: c.request)
    return PodClaims(tuple(bound), tuple(delayed))


def candidate_volumes(
    claim: PersistentVolumeClaim, storage: StorageView, excluded: frozenset[str]
) -> tuple[PersistentVolume | None, list[PersistentVolume]]:
    """The PV pre-bound to the claim (if any) and the available PVs that match it anywhere,
    smallest first (FindMatchingVolume's checks that do not depend on the node)."""
    prebound = None
    matching = []
    for pv in storage.pvs_of_class(claim.storage_class):
        if pv.name in excluded:
            continue
        if pv.bound_to(claim):
            if not pv.deleting and pv.capacity >= claim.request and pv.volume_mode == claim.volume_mode:
                prebound = pv
        elif volume_matches_claim(pv, claim):
            matching.append(pv)
    matching.sort(key=lambda pv: (pv.capacity, pv.name))
    return prebound, matching


@dataclass(slots=True)
class VolumeBinding:
    handle: Handle
    args: VolumeBindingArgs = field(default_factory=VolumeBindingArgs)
    NAME: ClassVar[str] = NAME
    # PV name -> the pod it is reserved for (between Reserve and the end of PreBind), by `_owner`.
    assumed: dict[str, str] = field(default_factory=dict)
    # Claim key -> the PV (None: provisioned) and node a pod's Reserve chose for it, and that pod:
    # another pod of the same claim must follow (kube's assumed PV claimRef and selected node).
    assumed_claims: dict[str, tuple[str | None, NodeName, str]] = field(default_factory=dict)
    _masks: dict[tuple[str, str, str], Bools] = field(default_factory=dict)
    _mask_generation: int = -1

    @property
    def storage(self) -> StorageView:
        return self.handle.cluster.storage

    # ----- PreFilter
    def acts_on(self) -> PodFeatures:
        return VOLUMES  # a pod without volumes is skipped at PreFilter

    @staticmethod
    def stated_constraint(pod: PodInfo) -> str | None:
        return "persistent volume claims" if pod.volumes is not None and pod.volumes.claims else None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        if pod.volumes is None or not pod.volumes.claims:
            return SKIP
        claims = read_claims(pod, self.storage)
        if isinstance(claims, Status):
            return claims
        state.write(_CLAIMS, claims)
        return SUCCESS

    # ----- Filter
    def _mask(self, kind: str, name: str, version: str, build: Callable[[], Bools], nodes: NodeTable) -> Bools:
        """`build()`'s rows for one version of one object, kept until the node table changes."""
        if self._mask_generation != nodes.generation or len(self._masks) > 4096:
            self._masks.clear()
            self._mask_generation = nodes.generation
        key = (kind, name, version)
        found = self._masks.get(key)
        if found is None:
            found = self._masks[key] = build()
        return found

    def _pv_mask(self, pv: PersistentVolume, nodes: NodeTable) -> Bools | None:
        if pv.node_affinity is None:
            return None
        return self._mask("pv", pv.name, pv.resource_version, partial(terms_mask, pv.node_affinity, nodes), nodes)

    def _provision_mask(self, claim: PersistentVolumeClaim, nodes: NodeTable, space: bool = True) -> Bools:
        """checkVolumeProvisions for one claim: where its class may provision a volume (with
        `space`, also where its CSI driver says a volume of its size still fits)."""
        storage_class = self.storage.storage_class(claim.storage_class)
        if storage_class is None or storage_class.provisioner == NO_PROVISIONER:
            return np.zeros(nodes.size, np.bool_)
        if storage_class.allowed_topologies is None:
            mask = np.ones(nodes.size, np.bool_)
        else:
            build = partial(terms_mask, storage_class.allowed_topologies, nodes)
            mask = self._mask("class", storage_class.name, storage_class.resource_version, build, nodes)
        room = self._space_mask(claim, storage_class, nodes) if space else None
        return mask if room is None else mask & room

    def _space_mask(self, claim: PersistentVolumeClaim, storage_class: StorageClass, nodes: NodeTable) -> Bools | None:
        """kube's hasEnoughCapacity: rows some CSIStorageCapacity of the class serves with room for
        the claim; None when nothing is checked (no size asked, or a driver that does not opt in)."""
        if not self._checks_space(claim, storage_class):
            return None
        mask = np.zeros(nodes.size, np.bool_)
        for capacity in self.storage.capacities_of_class(storage_class.name):
            if capacity.limit is not None and capacity.limit >= claim.request:
                build = partial(_serving_mask, capacity, nodes)
                mask |= self._mask("capacity", capacity.key, capacity.resource_version, build, nodes)
        return mask

    def _checks_space(self, claim: PersistentVolumeClaim, storage_class: StorageClass) -> bool:
        driver = self.storage.csi_driver(storage_class.provisioner)
        return claim.request > 0 and driver is not None and driver.storage_capacity

    def _excluded(self, pod: PodInfo) -> frozenset[str]:
        return frozenset(name for name, owner in self.assumed.items() if owner != _owner(pod))

    def _taken(self, claim: PersistentVolumeClaim, pod: PodInfo) -> tuple[PersistentVolume | None, NodeName] | None:
        """What another pod's Reserve chose for this claim and where: its PV (None: to be
        provisioned on that node). None when no other pod has it reserved."""
        found = self.assumed_claims.get(claim.key)
        if found is None or found[2] == _owner(pod):
            return None
        pv_name, node, _ = found
        return (self.storage.pv(pv_name) if pv_name is not None else None), node

    def _follows(self, taken: tuple[PersistentVolume | None, NodeName], nodes: NodeTable) -> Bools:
        """Rows where a pod of a claim another pod reserved can go: where its PV is reachable,
        or the very node its volume is provisioned on."""
        pv, node = taken
        if pv is None:
            return _only_row(nodes, node)
        mask = self._pv_mask(pv, nodes)
        return np.ones(nodes.size, np.bool_) if mask is None else mask

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        size = nodes.size
        claims = state.read(_CLAIMS, PodClaims)
        if claims is None:
            return FilterResult(np.ones(size, np.bool_))
        missing = np.zeros(size, np.bool_)
        node_conflict = np.zeros(size, np.bool_)
        for claim in claims.bound:
            pv = self.storage.pv(claim.volume_name)
            if pv is None:
                missing[:] = True
                continue
            mask = self._pv_mask(pv, nodes)
            if mask is not None:
                node_conflict |= ~mask
        bind_conflict = np.zeros(size, np.bool_)
        no_space = np.zeros(size, np.bool_)
        if claims.delayed:
            bind_conflict = ~self._delayed_feasible(pod, claims.delayed, nodes)
            if bind_conflict.any() and self._space_matters(claims.delayed):
                # Rows that only the drivers' free storage refuses are told so, as kube does.
                without_space = ~self._delayed_feasible(pod, claims.delayed, nodes, space=False)
                no_space = bind_conflict & ~without_space
                bind_conflict = without_space
        feasible = ~(missing | node_conflict | bind_conflict | no_space)
        reasons = {
            REASON_PV_NOT_EXIST: missing,
            REASON_NODE_CONFLICT: node_conflict,
            REASON_BIND_CONFLICT: bind_conflict,
            REASON_NOT_ENOUGH_SPACE: no_space,
        }
        return FilterResult(feasible, reasons, unresolvable=True)

    def _space_matters(self, delayed: Sequence[PersistentVolumeClaim]) -> bool:
        storage = self.storage
        return any(
            (sc := storage.storage_class(claim.storage_class)) is not None and self._checks_space(claim, sc)
            for claim in delayed
        )

    def _delayed_feasible(
        self, pod: PodInfo, delayed: Sequence[PersistentVolumeClaim], nodes: NodeTable, space: bool = True
    ) -> Bools:
        """Rows where every unbound WaitForFirstConsumer claim gets a PV or can be provisioned."""
        size = nodes.size
        excluded = self._excluded(pod)
        feasible = np.ones(size, np.bool_)
        to_match = []
        for claim in delayed:
            taken = self._taken(claim, pod)
            selected = claim.annotations.get(ANN_SELECTED_NODE)
            if taken is not None:
                feasible &= self._follows(taken, nodes)
            elif selected is not None:
                feasible &= _only_row(nodes, NodeName(selected)) & self._provision_mask(claim, nodes, space)
            else:
                to_match.append(claim)
        if not to_match:
            return feasible
        # Rows where no PV of any claim fits provision every claim: one vectorised pass. Rows
        # some PV fits are decided one by one with the binder's greedy choice.
        touched = np.zeros(size, np.bool_)
        provision_all = np.ones(size, np.bool_)
        for claim in to_match:
            prebound, matching = candidate_volumes(claim, self.storage, excluded)
            provision_all &= self._provision_mask(claim, nodes, space)
            for pv in (prebound, *matching) if prebound is not None else matching:
                mask = self._pv_mask(pv, nodes)
                if mask is None:
                    touched[:] = True
                    break
                touched |= mask
            if prebound is not None:
                touched[:] = True  # a pre-bound claim whose PV does not fit a node provisions nothing
        result = feasible & ~touched & provision_all
        for row in np.flatnonzero(touched & feasible & nodes.present[:size]):
            result[row] = self.decide(pod, to_match, int(row), nodes, excluded, space) is not None
        return result

    def decide(
        self,
        pod: PodInfo,
        claims: Sequence[PersistentVolumeClaim],
        row: int,
        nodes: NodeTable,
        excluded: frozenset[str],
        space: bool = True,
    ) -> Decision | None:
        """The binder's choice on one node (findMatchingVolumes then checkVolumeProvisions):
        claims smallest first each take the smallest fitting PV not taken yet; the rest must
        be provisionable there. None: the node does not fit."""
        chosen: set[str] = set()
        static: list[tuple[PersistentVolume, PersistentVolumeClaim]] = []
        provision: list[PersistentVolumeClaim] = []
        for claim in claims:
            taken = self._taken(claim, pod)
            if taken is not None:  # bound by the pod that reserved it: this one only follows
                if not self._follows(taken, nodes)[row]:
                    return None
                continue
            selected = claim.annotations.get(ANN_SELECTED_NODE)
            if selected is not None:
                if nodes.names[row] != selected or not self._provision_mask(claim, nodes, space)[row]:
                    return None
                provision.append(claim)
                continue
            prebound, matching = candidate_volumes(claim, self.storage, excluded | chosen)
            pick: PersistentVolume | None = None
            if prebound is not None:
                mask = self._pv_mask(prebound, nodes)
                if mask is None or mask[row]:
                    pick = prebound
            else:
                for pv in matching:
                    mask = self._pv_mask(pv, nodes)
                    if mask is None or mask[row]:
                        pick = pv
                        break
            if pick is not None:
                chosen.add(pick.name)
                static.append((pick, claim))
            elif prebound is None and self._provision_mask(claim, nodes, space)[row]:
                provision.append(claim)
            else:
                return None
        return Decision(tuple(static), tuple(provision))

    # ----- Reserve / Unreserve
    def reserve(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        if pod.volumes is None:
            return SUCCESS  # nothing was read at PreFilter (most pods: no state lookup)
        claims = state.read(_CLAIMS, PodClaims)
        if claims is None or not claims.delayed:
            return SUCCESS
        nodes = self.handle.nodes
        row = nodes.row.get(node)
        decision = None
        if row is not None:
            decision = self.decide(pod, claims.delayed, row, nodes, self._excluded(pod))
        if decision is None:
            return error(f"no volume binding for pod {pod.key} on node {node} any more")
        for pv, claim in decision.static:
            self.assumed[pv.name] = _owner(pod)
            self.assumed_claims[claim.key] = (pv.name, node, _owner(pod))
        for claim in decision.provision:
            self.assumed_claims[claim.key] = (None, node, _owner(pod))
        state.write(_DECISION, decision)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        self._release(pod)

    def _release(self, pod: PodInfo) -> None:
        owner_of_pod = _owner(pod)
        for name in [name for name, owner in self.assumed.items() if owner == owner_of_pod]:
            del self.assumed[name]
        for key in [key for key, (_, _, owner) in self.assumed_claims.items() if owner == owner_of_pod]:
            del self.assumed_claims[key]

    # ----- PreBind
    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        """Success when claims are to be bound (PreBind then waits for the PV controller)."""
        decision = state.read(_DECISION, Decision) if pod.volumes is not None else None
        return SUCCESS if decision is not None and (decision.static or decision.provision) else SKIP

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        if pod.volumes is None:
            return SUCCESS
        decision = state.read(_DECISION, Decision)
        if decision is None or not (decision.static or decision.provision):
            return SUCCESS
        cluster = self.handle.cluster
        for pv, claim in decision.static:
            status = await cluster.bind_volume(pv, claim)
            if not status.ok:
                return error(f"binding volumes: {status.message()}")
        for claim in decision.provision:
            if claim.annotations.get(ANN_SELECTED_NODE) != node:
                status = await cluster.select_node(claim, node)
                if not status.ok:
                    return error(f"binding volumes: {status.message()}")
        status = await self._wait_bound(decision)
        self._release(pod)
        return status

    def _bound(self, decision: Decision) -> Status | None:
        """SUCCESS once every claim is fully bound (to its chosen PV), an error when provisioning
        was given up, None while waiting."""
        storage = self.storage
        for pv, claim in decision.static:
            current = storage.pvc(claim.namespace, claim.name)
            if current is None:
                return error(f'binding volumes: persistentvolumeclaim "{claim.name}" not found')
            if not (current.fully_bound and current.volume_name == pv.name):
                return None
        for claim in decision.provision:
            current = storage.pvc(claim.namespace, claim.name)
            if current is None:
                return error(f'binding volumes: persistentvolumeclaim "{claim.name}" not found')
            if ANN_SELECTED_NODE not in current.annotations and not current.fully_bound:
                return error(f'binding volumes: provisioning failed for PVC "{claim.name}"')
            if not current.fully_bound:
                return None
        return SUCCESS

    async def _wait_bound(self, decision: Decision) -> Status:
        polls = max(1, math.ceil(self.args.bind_timeout_seconds / POLL_SECONDS))
        for attempt in range(polls + 1):
            status = self._bound(decision)
            if status is not None:
                return status
            if attempt < polls:
                await asyncio.sleep(POLL_SECONDS)
        return error("binding volumes: context deadline exceeded")

    # ----- queueing
    def events_to_register(self) -> Sequence[EventRegistration]:
        return (
            *PLACEMENT_EVENTS,
            EventRegistration(EventKind.PVC_CHANGE, _claim_of_pod),
            EventRegistration(EventKind.PV_CHANGE),
            EventRegistration(EventKind.STORAGE_CLASS_CHANGE),
            EventRegistration(EventKind.CSI_NODE_CHANGE),
            EventRegistration(EventKind.CSI_DRIVER_CHANGE),
            EventRegistration(EventKind.CSI_STORAGE_CAPACITY_CHANGE),
        )


def _serving_mask(capacity: CSIStorageCapacity, nodes: NodeTable) -> Bools:
    """Rows whose labels the capacity's nodeTopology selects (kube's nodeHasAccess)."""
    mask = np.zeros(nodes.size, np.bool_)
    if capacity.node_topology is None:
        return mask
    for row in range(nodes.size):
        info = nodes.infos[row]
        if info is not None:
            mask[row] = capacity.serves(info.labels)
    return mask


def _claim_of_pod(pod: PodInfo, event: ClusterEvent) -> QueueingHint:
    """A claim change matters to the pods that mount it (same namespace and name)."""
    claim = event.new if event.new is not None else event.old
    if (
        isinstance(claim, PersistentVolumeClaim)
        and pod.volumes is not None
        and claim.namespace == pod.namespace
        and claim.name in pod.volumes.claims
    ):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _owner(pod: PodInfo) -> str:
    """Whose reservation: the pod's uid, so a pod recreated under its name neither takes nor
    releases what the old one reserved."""
    return pod.uid or pod.key


def factory(args: VolumeBindingArgs, handle: Handle) -> VolumeBinding:
    return VolumeBinding(handle, args)


SPEC = PluginSpec(NAME, VolumeBindingArgs, factory, VolumeBinding)


def _only_row(nodes: NodeTable, node: NodeName) -> Bools:
    """A mask with the row of `node` alone (none when it is gone)."""
    only = np.zeros(nodes.size, np.bool_)
    row = nodes.row.get(node)
    if row is not None:
        only[row] = True
    return only
