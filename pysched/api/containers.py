"""What a pod's containers ask for and run with, read from the pod as the API serves it, and the
shape of an in-place resize of one container (`pods/{name}/resize`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pysched.api.objects import PodInfo
from pysched.api.resources import CPU, MEMORY, format_resource, infeasible_resize, to_scheduler_units
from pysched.api.times import parse_rfc3339


def container_names(pod: PodInfo) -> list[str]:
    return [str(c.get("name", "")) for c in pod.raw.get("spec", {}).get("containers") or []]


def restarts_on_change(container: Mapping[str, Any], resources: Collection[str]) -> bool:
    """A resize that changes `resources` restarts this container: the kubelet restarts it when
    one of them has `resizePolicy` `RestartContainer` (the default, NotRequired, is in place)."""
    return any(
        p.get("resourceName") in resources and p.get("restartPolicy") == "RestartContainer"
        for p in container.get("resizePolicy") or ()
    )


def restarts_on_cpu_resize(container: Mapping[str, Any]) -> bool:
    """A CPU resize restarts this container."""
    return restarts_on_change(container, (CPU,))


def restarts_on_resize(pod: PodInfo, container: str, memory_too: bool = False) -> bool:
    """The pod's container named `container` restarts on a CPU resize (`memory_too`: one that
    changes its memory with its CPUs)."""
    for c in pod.raw.get("spec", {}).get("containers") or ():
        if c.get("name", "") == container:
            return restarts_on_change(c, (CPU, MEMORY) if memory_too else (CPU,))
    return False


def container_request(pod: PodInfo, container: str, resource: str) -> str | int | float | None:
    """The container's own request for `resource` as written (None when it has none)."""
    for c in pod.raw.get("spec", {}).get("containers") or ():
        if c.get("name", "") == container:
            value = ((c.get("resources") or {}).get("requests") or {}).get(resource)
            return value if isinstance(value, str | int | float) else None
    return None


def container_cpus(pod: PodInfo, container: str) -> float:
    """The container's desired CPU request (spec), in CPUs: 0 when it asks none (its pod's other
    containers' CPUs are not its own)."""
    value = container_request(pod, container, CPU)
    return 0.0 if value is None else to_scheduler_units(CPU, value) / 1000


def actual_cpus(pod: PodInfo, container: str) -> float | None:
    """The CPUs the kubelet reports the container running with (`containerStatuses[].resources`);
    None when it reports none (no kubelet support for resize, or not running yet)."""
    milli = actual_request(pod, container, CPU)
    return None if milli is None else milli / 1000


def running_cpus(pod: PodInfo, container: str) -> float:
    """The CPUs the container runs on: what the kubelet actuated, else its spec."""
    actual = actual_cpus(pod, container)
    return container_cpus(pod, container) if actual is None else actual


def actual_request(pod: PodInfo, container: str, resource: str) -> int | None:
    """The container's actuated request for `resource` (scheduler units), as the kubelet reports it."""
    for status in (pod.raw.get("status") or {}).get("containerStatuses") or ():
        if status.get("name") == container:
            value = ((status.get("resources") or {}).get("requests") or {}).get(resource)
            return to_scheduler_units(resource, value) if isinstance(value, str | int | float) else None
    return None


def resize_infeasible(pod: PodInfo) -> str | None:
    """The kubelet's message when it refuses the pending resize for good (`PodResizePending`,
    reason `Infeasible`: more than the node could ever give); None otherwise."""
    return infeasible_resize(pod.raw.get("status") or {})


@dataclass(frozen=True, slots=True)
class ContainerResize:
    """The new resources of one container in an in-place resize (`pods/{name}/resize`).

    Limits travel with requests: a resize that changed requests under a fixed limit could change
    the pod's QoS class, which the apiserver refuses (a Guaranteed pod must keep requests ==
    limits). Resources absent from `limits` keep the limit the container already has (or none).
    """

    requests: Mapping[str, str]
    limits: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, dict[str, str]]:
        """The container's `resources` in the API's shape (an empty `limits` is left out)."""
        out = {"requests": dict(self.requests)}
        if self.limits:
            out["limits"] = dict(self.limits)
        return out


def cpu_resize(pod: PodInfo, container: str, cpu_milli: int) -> ContainerResize:
    """A resize of one container's CPU request to `cpu_milli` that keeps the QoS class (memory is
    not touched); see `container_resize`."""
    return container_resize(pod, container, {CPU: cpu_milli})


def container_resize(pod: PodInfo, container: str, requests: Mapping[str, int]) -> ContainerResize:
    """A resize of one container's requests (scheduler units: millicores, bytes) that keeps the
    QoS class.

    Each resource's limit scales by the same ratio as its request (rounded up, so the limit never
    drops below the request), and a Guaranteed container's limit simply equals the new request.
    No limit stays no limit; resources not named are not touched.
    """
    resources: Mapping[str, Any] = {}
    for c in pod.raw.get("spec", {}).get("containers") or ():
        if c.get("name", "") == container:
            resources = c.get("resources") or {}
            break
    old_requests = resources.get("requests") or {}
    old_limits = resources.get("limits") or {}
    new_requests: dict[str, str] = {}
    new_limits: dict[str, str] = {}
    for name, value in requests.items():
        new_requests[name] = format_resource(name, value)
        limit = old_limits.get(name)
        if not isinstance(limit, str | int | float):
            continue
        limit_u = to_scheduler_units(name, limit)
        request = old_requests.get(name)
        # The API defaults a missing request to the limit: such a container is Guaranteed for it.
        request_u = to_scheduler_units(name, request) if isinstance(request, str | int | float) else limit_u
        if request_u == limit_u:
            new_limit = value
        elif request_u <= 0:  # no ratio to keep: only make room for the new request
            new_limit = max(limit_u, value)
        else:
            new_limit = -(-limit_u * value // request_u)
        new_limits[name] = format_resource(name, new_limit)
    return ContainerResize(new_requests, new_limits)


def finished_at(pod: PodInfo) -> float | None:
    """When the pod's last container terminated, as the kubelet reports it
    (`containerStatuses[].state.terminated.finishedAt`); None when it reports no finish."""
    latest: float | None = None
    for status in (pod.raw.get("status") or {}).get("containerStatuses") or ():
        terminated = ((status.get("state") or {}) if isinstance(status, Mapping) else {}).get("terminated")
        stamp = terminated.get("finishedAt") if isinstance(terminated, Mapping) else None
        at = parse_rfc3339(stamp) if isinstance(stamp, str) else None
        if at is not None and (latest is None or at > latest):
            latest = at
    return latest
