"""Host ports a pod's containers bind on their node (`containers[].ports[].hostPort`), read as
kube-scheduler reads them: regular containers plus sidecars (init containers with
`restartPolicy: Always`, which run for the pod's whole life); a port without a hostPort binds
nothing on the node. An empty hostIP is every address (0.0.0.0), an empty protocol is TCP."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pysched.api.limits import PLACED_LIST_LIMIT, clip

WILDCARD_IP = "0.0.0.0"  # kube-scheduler's "bind all" address; it does not treat "::" so
DEFAULT_PROTOCOL = "TCP"
MAX_HOST_PORT = 65_535
MAX_HOST_PORTS = 1_024  # host ports one pod may ask for before it is refused as malformed
MAX_HOST_IP_CHARS = 64  # an IPv6 address with a zone is at most 45


@dataclass(frozen=True, slots=True)
class HostPort:
    """One port the pod binds on its node: (hostIP, protocol, hostPort), defaults applied."""

    ip: str
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """Two binds collide on one node: same protocol and port, and the same address or either
        one the wildcard (kube-scheduler's HostPortInfo.CheckConflict, from either side)."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.ip == other.ip or WILDCARD_IP in (self.ip, other.ip)


def _string(value: object, what: str, default: str) -> str:
    if value is None or value == "":
        return default
    if not isinstance(value, str) or len(value) > MAX_HOST_IP_CHARS:
        raise ValueError(f"{what} must be a string of at most {MAX_HOST_IP_CHARS} characters, not {clip(value)}")
    return value


def _container_ports(container: object, ports: list[HostPort], limit: int) -> None:
    if not isinstance(container, Mapping):
        raise TypeError("a container must be an object")
    for entry in container.get("ports") or ():
        if not isinstance(entry, Mapping):
            raise TypeError(f"containers[].ports[] must be objects, not {clip(entry)}")
        raw = entry.get("hostPort")
        if raw is None:
            continue
        if not isinstance(raw, int) or isinstance(raw, bool) or raw > MAX_HOST_PORT:
            raise ValueError(f"hostPort must be an integer up to {MAX_HOST_PORT}, not {clip(raw)}")
        if raw <= 0:
            continue  # kube-scheduler counts only positive host ports
        ip = _string(entry.get("hostIP"), "hostIP", WILDCARD_IP)
        protocol = _string(entry.get("protocol"), "protocol", DEFAULT_PROTOCOL)
        ports.append(HostPort(ip, protocol, raw))
        if len(ports) > limit:
            raise ValueError(f"a pod may bind at most {limit} host ports")


def host_ports(spec: Mapping[str, Any], placed: bool = False) -> tuple[HostPort, ...]:
    """The host ports of a pod's spec, sidecars first (ValueError / TypeError when malformed).
    `placed`: a placed pod's, read within PLACED_LIST_LIMIT."""
    limit = PLACED_LIST_LIMIT if placed else MAX_HOST_PORTS
    ports: list[HostPort] = []
    for container in spec.get("initContainers") or ():
        if isinstance(container, Mapping) and container.get("restartPolicy") == "Always":
            _container_ports(container, ports, limit)
    for container in spec.get("containers") or ():
        _container_ports(container, ports, limit)
    return tuple(ports)
