"""Heartbeats for fake nodes: the node Lease a kubelet renews, renewed here.

With kube-controller-manager running, its node lifecycle controller takes a node for gone when,
for ``--node-monitor-grace-period``, neither its Lease in ``kube-node-lease`` got a newer
``renewTime`` nor its Ready condition a new ``lastHeartbeatTime``: it sets Ready to Unknown, taints
the node ``node.kubernetes.io/unreachable`` (NoSchedule, then NoExecute) and the taint-eviction
controller evicts its pods. A fake node has no kubelet, so :class:`NodeHeartbeat` renews the Lease
of every node labelled with the fake-node selector it is given. The Lease alone keeps a node
Ready, as it does between a real kubelet's status updates; the node's status is never rewritten.

The rule is the label: every node carrying it is renewed, however it was created; its Lease is
made with the node (:func:`create_node_lease`, as the kubelet does) or, failing that, by the
first renewal. The Lease is owned by its Node, so the garbage collector deletes it with the node.

Cost: one PATCH a node a sweep, plus one node list (from the watch cache) at each sweep's start.
A sweep lasts ``interval`` seconds (default 10, the kubelet's) or, for a big set, as long as
renewing ``max_rate`` Leases a second takes (default 10), in batches spread evenly over the sweep,
but never longer than ``max_period`` (the test control plane passes a third of the controller's
grace period; it raises the rate only past that). With the plane's 10-minute grace: up to 100
nodes every 10 s; up to 2,000 at 10 writes a second (a sweep of 200 s for 2,000); 5,000 every
200 s at 25 a second, where 10 s for all of them would be 500. Measured on 2 cores with 2,000
nodes, 10 renewals a second cost about 4% of one core in all (this thread 1.4%, kube-apiserver 2%,
etcd 0.6%).

Run it in a thread (:meth:`NodeHeartbeat.start` / :meth:`NodeHeartbeat.stop`) or as a process:
``python -m pysched.testing.heartbeat --kubeconfig PATH --selector LABEL=VALUE [--interval S]
[--max-rate N] [--max-period S]`` (``pysched dev-cluster up``, whose processes outlive it).
"""

from __future__ import annotations

import argparse
import logging
import math
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pysched.api.inputs import out_of_range
from pysched.api.times import format_micro_time
from pysched.backend.live.kubeclient import MERGE_PATCH

log = logging.getLogger(__name__)

NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_S = 40  # the kubelet's nodeLeaseDurationSeconds
HEARTBEAT_INTERVAL_S = 10.0  # the kubelet renews its Lease every 10 s
MAX_RENEW_RATE = 10.0  # Leases renewed a second, for a set too big to renew every interval
MAX_INTERVAL_S = 3600.0  # --interval and --max-period at most
MAX_RATE = 10_000.0


def lease_path(node: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases/{node}"


def create_node_lease(api: Any, node: str, uid: str) -> None:
    """Create the node's Lease (holder the node, 40 s, owned by the Node), or renew it if it exists."""
    from pysched.testing.kube import KubeAPIError

    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": node,
            "namespace": NODE_LEASE_NAMESPACE,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}],
        },
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": LEASE_DURATION_S,
            "renewTime": format_micro_time(time.time()),
        },
    }
    try:
        api.post(f"/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases", body)
    except KubeAPIError as err:
        if err.status != 409:
            raise
        renew_node_lease(api, node, uid)


def renew_node_lease(api: Any, node: str, uid: str) -> None:
    """Move the node's Lease ``renewTime`` to now; create the Lease when there is none."""
    from pysched.testing.kube import KubeAPIError

    try:
        api.patch(
            lease_path(node),
            {"spec": {"renewTime": format_micro_time(time.time())}},
            content_type=MERGE_PATCH,
        )
    except KubeAPIError as err:
        if err.status != 404:
            raise
        create_node_lease(api, node, uid)


class NodeHeartbeat:
    """Renews the Lease of every node matching ``selector``, in a background thread."""

    def __init__(
        self,
        api: Any,
        selector: str,
        *,
        interval: float = HEARTBEAT_INTERVAL_S,
        max_rate: float = MAX_RENEW_RATE,
        max_period: float = MAX_INTERVAL_S,
    ) -> None:
        problem = _settings_problem(interval, max_rate, max_period)
        if problem:
            raise ValueError(problem)
        self.api = api
        self.selector = selector
        self.interval = float(interval)
        self.max_rate = float(max_rate)
        self.max_period = float(max_period)
        self.sweeps = 0  # sweeps finished
        self.failures = 0  # requests that failed (the API down, a node gone meanwhile)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> NodeHeartbeat:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="node-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> NodeHeartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def nodes(self) -> list[tuple[str, str]]:
        """(name, uid) of the nodes to renew, from the apiserver's watch cache."""
        items = self.api.get("/api/v1/nodes", labelSelector=self.selector, resourceVersion="0").get("items", [])
        return [(n["metadata"]["name"], n["metadata"]["uid"]) for n in items]

    def sweep_period(self, count: int) -> float:
        """Seconds one sweep over ``count`` nodes lasts: ``interval``, or longer to stay under
        ``max_rate``, but at most ``max_period``."""
        return min(max(self.interval, count / self.max_rate), max(self.interval, self.max_period))

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                nodes = self.nodes()
            except Exception as err:  # the API down or restarting: try again next sweep
                self.failures += 1
                log.debug("node heartbeat: listing nodes failed: %s", err)
                nodes = []
            period = self.sweep_period(len(nodes))
            size = max(1, math.ceil(self.max_rate))
            batches = [nodes[i : i + size] for i in range(0, len(nodes), size)]
            gap = period / max(1, len(batches))
            for i, batch in enumerate(batches):
                if self._stop.wait(max(0.0, began + i * gap - time.monotonic())):
                    return
                for name, uid in batch:
                    try:
                        renew_node_lease(self.api, name, uid)
                    except Exception as err:  # the API down, or the node deleted since the list
                        self.failures += 1
                        log.debug("node heartbeat: renewing %s failed: %s", name, err)
            self.sweeps += 1
            self._stop.wait(max(0.0, began + period - time.monotonic()))


def _settings_problem(interval: float, max_rate: float, max_period: float) -> str | None:
    """`--flag: must be ...` for the first setting out of range, or None."""
    checks = {
        "--interval": out_of_range(interval, 0, MAX_INTERVAL_S, above=True),
        "--max-rate": out_of_range(max_rate, 0, MAX_RATE, above=True),
        "--max-period": out_of_range(max_period, 0, MAX_INTERVAL_S, above=True),
    }
    return next((f"{flag}: {problem}" for flag, problem in checks.items() if problem), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pysched.testing.heartbeat", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--selector", required=True, help="label selector of the nodes to renew")
    parser.add_argument(
        "--interval", type=float, default=HEARTBEAT_INTERVAL_S, help="seconds a sweep lasts at least (default 10)"
    )
    parser.add_argument(
        "--max-rate", type=float, default=MAX_RENEW_RATE, help="Leases renewed a second in a long sweep (default 10)"
    )
    parser.add_argument(
        "--max-period", type=float, default=MAX_INTERVAL_S, help="seconds a sweep lasts at most (default 3600)"
    )
    args = parser.parse_args(argv)
    problem = _settings_problem(args.interval, args.max_rate, args.max_period)
    if problem:
        parser.error(problem)
    from pysched.testing.kube import KubeAPI

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    api = KubeAPI.from_kubeconfig(args.kubeconfig)
    heartbeat = NodeHeartbeat(
        api, args.selector, interval=args.interval, max_rate=args.max_rate, max_period=args.max_period
    )
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)  # before the thread starts: it inherits the mask
    heartbeat.start()
    log.info("node heartbeat running against %s for nodes %s", api.server, args.selector)
    signal.sigwait(stop_signals)
    heartbeat.stop()
    api.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
