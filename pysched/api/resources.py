"""Kubernetes resource quantities and pod requests, computed the way kube-scheduler does.

Quantities become integers in the unit the scheduler compares: CPU in millicores, everything
else in base units (bytes for memory), both rounded up like `Quantity.MilliValue()` / `Value()`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

from pysched.api.limits import MAX_EXPONENT, MAX_UNITS, MAX_VALUE_CHARS, clip

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
GPU = "nvidia.com/gpu"

# kube-scheduler scores pods without requests as if they asked for this (schedutil.DefaultMilliCPURequest
# and DefaultMemoryRequest); only scoring uses these, never the fit check.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))([a-zA-Z]*|[eE][+-]?[0-9]+)$")
_EXPONENT = re.compile(r"^[eE][+-]?[0-9]+$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
QUANTITY_FORMS = "a Kubernetes quantity such as 500m, 1.5, 2Gi, 1e3 or 1k"


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a Kubernetes quantity (`500m`, `1.5`, `2Gi`, `1e3`, `1k`) into an exact Decimal.

    Bounded: at most MAX_VALUE_CHARS characters, ASCII digits, an exponent within MAX_EXPONENT
    (1e999999999 would take Decimal past its context), finite numbers only."""
    if isinstance(value, bool):
        raise QuantityError(f"{value} is not {QUANTITY_FORMS}")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value} is not {QUANTITY_FORMS}")
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"{clip(str(value))} is not {QUANTITY_FORMS}")
    text = value.strip()
    if len(text) > MAX_VALUE_CHARS:
        raise QuantityError(f"{clip(text)} is longer than {MAX_VALUE_CHARS} characters")
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"{clip(text)} is not {QUANTITY_FORMS}")
    number, suffix = match.groups()
    base = Decimal(number)  # the regex admits only ASCII decimal numbers
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    if not _EXPONENT.match(suffix):
        raise QuantityError(f"{clip(text)} is not {QUANTITY_FORMS}")
    exponent = int(suffix[1:])
    if exponent > MAX_EXPONENT:
        raise QuantityError(f"{clip(text)} is beyond any node's capacity")
    return base.scaleb(max(exponent, -MAX_EXPONENT))


def to_scheduler_units(resource: str, value: str | int | float) -> int:
    """A quantity in the unit the scheduler compares: millicores for CPU, base units otherwise.
    Beyond MAX_UNITS (no node has that much) it is refused rather than carried into int64 tables."""
    try:
        return _scheduler_units(resource, value)
    except TypeError:  # unhashable, so no quantity: refused as malformed
        return _parse_units(resource, value)


def _parse_units(resource: str, value: str | int | float) -> int:
    quantity = parse_quantity(value)
    if resource == CPU:
        quantity *= 1000
    units = int(quantity.to_integral_value(rounding=ROUND_CEILING))
    if abs(units) > MAX_UNITS:
        shown = clip(value) if isinstance(value, str) else repr(value)
        raise QuantityError(
            f"{resource} {shown} is beyond any node's capacity (at most {format_resource(resource, MAX_UNITS)})"
        )
    return units


# A pure function of a few distinct values (a cluster's pods ask for a handful of sizes), read
# again for every pod at every reconcile; refusals raise, and are not remembered.
_scheduler_units = functools.lru_cache(maxsize=4096, typed=True)(_parse_units)


ResourceMap = dict[str, int]


def parse_resource_list(raw: Mapping[str, Any] | None) -> ResourceMap:
    """A `resources.requests`-style mapping in scheduler units."""
    if not raw:
        return {}
    if not isinstance(raw, Mapping):
        raise QuantityError(f"expected a map of resource names to quantities, got {clip(str(raw))}")
    parsed = {str(name): to_scheduler_units(str(name), value) for name, value in raw.items()}
    for name, units in parsed.items():
        if units < 0:  # the API server refuses these; a negative request would make room on a node
            raise QuantityError(f"{clip(name)}: {clip(raw[name])} is negative")
    return parsed


def _add_into(total: ResourceMap, extra: Mapping[str, int]) -> None:
    for name, value in extra.items():
        total[name] = total.get(name, 0) + value


def _max_into(total: ResourceMap, other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > total.get(name, 0):
            total[name] = value


def _effective_requests(
    desired: Mapping[str, Any] | None,
    status: Mapping[str, Any] | None,
    infeasible: bool,
    overhead: Mapping[str, int] | None = None,
) -> ResourceMap:
    """What a container (or, with the pod's own status, the pod) counts for, as kube-scheduler's
    `determineEffectiveRequests`: while its status reports resources, the largest of desired,
    allocated and actual, leaving the desired out when the pending resize is Infeasible; else
    the desired. A pod's own status includes its `overhead`, which the caller adds once: taken
    out of the status here."""
    if status is None or status.get("resources") is None:
        return parse_resource_list(desired)
    requests = {} if infeasible else parse_resource_list(desired)
    for reported in (status.get("allocatedResources"), (status.get("resources") or {}).get("requests")):
        values = parse_resource_list(reported)
        for name, value in (overhead or {}).items():
            if name in values:
                values[name] = max(0, values[name] - value)
        _max_into(requests, values)
    return requests


def _pod_level(name: str) -> bool:
    """A resource pod-level `spec.resources` may set (kube's IsSupportedPodLevelResource)."""
    return name in (CPU, MEMORY) or name.startswith("hugepages-")


def infeasible_resize(pod_status: Mapping[str, Any]) -> str | None:
    """The kubelet's message when it refuses a pending resize for good (`PodResizePending`, reason
    `Infeasible`); None otherwise. Such a resize's desired requests do not count."""
    for condition in pod_status.get("conditions") or ():
        if condition.get("type") == "PodResizePending" and condition.get("reason") == "Infeasible":
            return str(condition.get("message") or "the node cannot fit it")
    return None


def pod_requests(pod: Mapping[str, Any]) -> ResourceMap:
    """Effective requests of a pod as kube-scheduler (v1.36) computes them.

    max(sum of regular containers + restartable init containers (sidecars), the largest
    init-time footprint), plus pod overhead; pod-level `spec.resources` wins where set. While
    a resize is in progress, each container, each sidecar and the pod-level resources count the
    largest of desired, allocated and actual (`_effective_requests`), except that an Infeasible
    resize does not count its desired values.
    """
    total = _pod_total(pod, None)
    for name, value in total.items():
        if value > MAX_UNITS:  # each container within bounds, their sum not
            raise QuantityError(f"{name}: the pod requests more than any node's capacity")
    return {name: value for name, value in total.items() if value}


_STAND_INS = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}


def pod_nonzero_requests(pod: Mapping[str, Any], requests: Mapping[str, int]) -> tuple[int, int] | None:
    """CPU and memory as kube-scheduler's scoring counts them when that differs from
    `nonzero_requests(requests)`: the stand-ins fill in each container that leaves cpu or memory
    out (not one that asks for 0), not the pod's total. None for most pods (every container
    states both, and both add up to more than 0): nothing is read twice for them."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    missing = any(
        name not in ((c.get("resources") or {}).get("requests") or {}) for c in containers for name in _STAND_INS
    )
    if not missing and requests.get(CPU, 0) and requests.get(MEMORY, 0):
        return None
    filled = _pod_total(pod, _STAND_INS)
    found = (min(filled.get(CPU, 0), MAX_UNITS), min(filled.get(MEMORY, 0), MAX_UNITS))
    return None if found == nonzero_requests(requests) else found


def _pod_total(pod: Mapping[str, Any], fill: Mapping[str, int] | None) -> ResourceMap:
    """`pod_requests` before its checks; with `fill`, each container's (and init container's)
    requests get those values for the names they leave out (kube's NonMissingContainerRequests)."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = {s.get("name"): s for s in status.get("containerStatuses") or ()}
    init_statuses = {s.get("name"): s for s in status.get("initContainerStatuses") or ()}
    infeasible = infeasible_resize(status) is not None

    def filled(requests: ResourceMap, desired: Mapping[str, Any] | None) -> ResourceMap:
        for name, value in (fill or {}).items():
            if name not in (desired or {}) and name not in requests:
                requests[name] = value
        return requests

    total: ResourceMap = {}
    for container in spec.get("containers") or ():
        desired = (container.get("resources") or {}).get("requests")
        effective = _effective_requests(desired, statuses.get(container.get("name")), infeasible)
        _add_into(total, filled(effective, desired))

    # Init containers run in order; sidecars (restartPolicy Always) keep running after they start,
    # so each init container's footprint includes the sidecars started before it.
    sidecars: ResourceMap = {}
    init_peak: ResourceMap = {}
    for init in spec.get("initContainers") or ():
        desired = (init.get("resources") or {}).get("requests")
        if init.get("restartPolicy") == "Always":  # a sidecar is resized in place like a container
            requests = filled(_effective_requests(desired, init_statuses.get(init.get("name")), infeasible), desired)
            _add_into(total, requests)
            _add_into(sidecars, requests)
            footprint = dict(sidecars)
        else:
            footprint = dict(sidecars)
            _add_into(footprint, filled(parse_resource_list(desired), desired))
        _max_into(init_peak, footprint)
    _max_into(total, init_peak)

    pod_desired = (spec.get("resources") or {}).get("requests")
    pod_level = parse_resource_list(pod_desired)
    overhead = parse_resource_list(spec.get("overhead"))
    if any(_pod_level(name) for name in pod_level):
        effective = _effective_requests(pod_desired, status, infeasible, overhead)  # the pod's own status.resources
        for name in pod_level:
            if _pod_level(name):
                total[name] = effective.get(name, 0)

    _add_into(total, overhead)
    return total


def nonzero_requests(requests: Mapping[str, int]) -> tuple[int, int]:
    """CPU and memory as kube-scheduler's scoring sees them: defaults stand in for zero."""
    cpu = requests.get(CPU, 0) or DEFAULT_MILLI_CPU_REQUEST
    memory = requests.get(MEMORY, 0) or DEFAULT_MEMORY_REQUEST
    return cpu, memory


@dataclass(frozen=True, slots=True)
class ResourceNames:
    """The resource columns known so far; cpu, memory, pods and ephemeral-storage come first."""

    names: tuple[str, ...] = (CPU, MEMORY, PODS, EPHEMERAL_STORAGE)

    def with_names(self, extra: Iterable[str]) -> ResourceNames:
        new = [name for name in extra if name not in self.names]
        return self if not new else ResourceNames((*self.names, *sorted(set(new))))


def format_resource(resource: str, value: int) -> str:
    """Scheduler units back to a readable quantity (`1500m`, `2Gi`)."""
    if resource == CPU:
        return f"{value // 1000}" if value % 1000 == 0 else f"{value}m"
    for suffix, factor in reversed(_BINARY.items()):
        if value and value % factor == 0:
            return f"{value // factor}{suffix}"
    return str(value)
