"""Control-plane parts that need no binaries running: which cached build `find_bin_dir` takes, the
ports processes are given, and the node heartbeat's Lease writes and pacing against a fake API."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pysched.testing import controlplane
from pysched.testing.controlplane import (
    ALL_BINARIES,
    K8S_VERSION,
    BinariesNotFound,
    find_bin_dir,
    free_port,
    free_ports,
    port_is_free,
)
from pysched.testing.heartbeat import NODE_LEASE_NAMESPACE, NodeHeartbeat, lease_path, renew_node_lease
from pysched.testing.kube import KubeAPIError

# -- find_bin_dir and the build's marker -----------------------------------------------------------


def fake_build(root: Path, binaries: tuple[str, ...], listed: tuple[str, ...] | None) -> Path:
    out = root / "control-plane" / f"k8s-{K8S_VERSION}_etcd-v3.6.16_go1.26.8"
    (out / "bin").mkdir(parents=True)
    for name in binaries:
        path = out / "bin" / name
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    lines = [f"kubernetes={K8S_VERSION}"] + ([f"binaries={' '.join(listed)}"] if listed is not None else [])
    (out / ".complete").write_text("\n".join(lines) + "\n")
    return out / "bin"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYSCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PYSCHED_CONTROL_PLANE_BIN", raising=False)
    return tmp_path


def test_a_build_listing_every_binary_is_found(cache: Path) -> None:
    bin_dir = fake_build(cache, ALL_BINARIES, ALL_BINARIES)
    assert find_bin_dir() == bin_dir


def test_a_build_from_before_the_controller_manager_is_missing_it(cache: Path) -> None:
    old = ("etcd", "kube-apiserver", "kube-scheduler", "kubectl")
    bin_dir = fake_build(cache, old, None)  # the marker of the older script had no binaries= line
    with pytest.raises(BinariesNotFound, match="kube-controller-manager; build them"):
        find_bin_dir()
    assert find_bin_dir(need=("etcd", "kube-apiserver")) == bin_dir


def test_a_binary_the_marker_does_not_list_is_missing(cache: Path) -> None:
    listed = tuple(b for b in ALL_BINARIES if b != "kube-controller-manager")
    fake_build(cache, ALL_BINARIES, listed)  # a stray file the build did not make
    with pytest.raises(BinariesNotFound, match="kube-controller-manager"):
        find_bin_dir()


# -- the heartbeat -------------------------------------------------------------------------------


def not_found(method: str, path: str) -> KubeAPIError:
    return KubeAPIError(method, path, 404, '{"message": "not found"}')


class FakeApi:
    """Nodes to list and Leases to patch or create, as the apiserver keeps them."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = nodes
        self.leases: dict[str, dict[str, Any]] = {}
        self.renewals: dict[str, int] = {}
        self.list_fails = False
        self.lock = threading.Lock()

    def get(self, path: str, **query: Any) -> dict[str, Any]:
        assert path == "/api/v1/nodes" and query == {"labelSelector": "fake=true", "resourceVersion": "0"}
        if self.list_fails:
            raise OSError("connection refused")
        return {"items": [{"metadata": {"name": n, "uid": f"uid-{n}"}} for n in self.nodes]}

    def patch(self, path: str, body: Any, *, content_type: str) -> dict[str, Any]:
        name = path.rsplit("/", 1)[1]
        with self.lock:
            if name not in self.leases:
                raise not_found("PATCH", path)
            self.leases[name]["spec"].update(body["spec"])
            self.renewals[name] = self.renewals.get(name, 0) + 1
            return self.leases[name]

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert path == f"/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases"
        with self.lock:
            self.leases[body["metadata"]["name"]] = body
            return body


def test_renewing_a_missing_lease_creates_it_owned_by_the_node() -> None:
    api = FakeApi(["n1"])
    renew_node_lease(api, "n1", "uid-n1")
    lease = api.leases["n1"]
    assert lease["spec"]["holderIdentity"] == "n1" and lease["spec"]["leaseDurationSeconds"] == 40
    assert lease["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-n1"}]
    first = lease["spec"]["renewTime"]
    time.sleep(0.002)
    renew_node_lease(api, "n1", "uid-n1")
    assert api.renewals == {"n1": 1} and api.leases["n1"]["spec"]["renewTime"] > first
    assert lease_path("n1").endswith(f"/namespaces/{NODE_LEASE_NAMESPACE}/leases/n1")


def test_a_big_set_is_renewed_at_the_rate_cap_within_the_longest_period() -> None:
    beat = NodeHeartbeat(FakeApi([]), "fake=true", interval=10.0, max_rate=10.0, max_period=200.0)
    assert beat.sweep_period(10) == 10.0
    assert beat.sweep_period(100) == 10.0
    assert beat.sweep_period(1_000) == 100.0  # 10 a second
    assert beat.sweep_period(5_000) == 200.0  # 25 a second: the period may not grow past 200 s


def test_every_listed_node_is_renewed_each_sweep_and_outages_are_survived() -> None:
    api = FakeApi(["a", "b", "c"])
    with NodeHeartbeat(api, "fake=true", interval=0.05, max_rate=2.0) as beat:  # 2 batches a sweep
        deadline = time.monotonic() + 10
        while beat.sweeps < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert set(api.leases) == {"a", "b", "c"}
        api.list_fails = True
        done = beat.sweeps
        while beat.sweeps < done + 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert beat.failures >= 1
        api.list_fails = False
        api.nodes.append("d")
        while "d" not in api.leases and time.monotonic() < deadline:
            time.sleep(0.01)
    assert "d" in api.leases and all(api.renewals.get(n, 0) >= 1 for n in "abc")


def test_settings_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="--interval"):
        NodeHeartbeat(FakeApi([]), "fake=true", interval=0)
    with pytest.raises(ValueError, match="--max-rate"):
        NodeHeartbeat(FakeApi([]), "fake=true", max_rate=float("nan"))


# -- ports -------------------------------------------------------------------------------------


def test_ports_picked_together_are_distinct_and_free_again() -> None:
    ports = free_ports(64)
    assert len(set(ports)) == 64
    assert all(port_is_free(port) for port in ports)
    assert free_port() != free_port()  # one after the other: the pick moves on


def test_each_test_worker_picks_below_the_ephemeral_range_in_a_slice_of_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    picks = {}
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        picks[worker] = set(free_ports(100))
    assert not picks["gw0"] & picks["gw1"]
    assert all(controlplane.PICK_LOW <= port < 32_768 for port in picks["gw0"] | picks["gw1"])
    # A port something else holds is passed over: the next pick is the one after it.
    monkeypatch.setattr(controlplane, "_picked", itertools.count())  # the walk restarts at the slice's start
    first = controlplane._pick_slice()[0]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", first))
        assert free_port() == first + 1
    # No room below the ephemeral range: the kernel picks.
    (tmp_path / "range").write_text("1024\t65535\n")
    monkeypatch.setattr(controlplane, "_EPHEMERAL_RANGE", tmp_path / "range")
    ports = free_ports(3)
    assert len(set(ports)) == 3 and all(port_is_free(port) for port in ports)
