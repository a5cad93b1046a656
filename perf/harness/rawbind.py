"""The API's own ceiling: bind every pending pod of one schedulerName to the nodes round-robin, with
no scheduling logic, through the same client (kubernetes-asyncio, token bucket, connection pool)
and the same QPS and burst as the schedulers measured beside it.

    python -m perf.harness.rawbind --kubeconfig K --namespace NS --scheduler-name raw-bind --qps 5000 --burst 5000
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from typing import Any

from pysched.backend.live.client import connect
from pysched.backend.live.kubeclient import WatchFailed, WatchIdle

BINDERS = 64  # concurrent binds, as pysched's default --max-binds-in-flight


async def _bind_all(args: argparse.Namespace) -> int:
    client = await connect(args.kubeconfig, qps=args.qps, burst=args.burst, pool_size=BINDERS)
    try:
        nodes = await client.request("GET", "/api/v1/nodes")
        names = [str(n["metadata"]["name"]) for n in nodes.body.get("items") or ()]
        if not names:
            print("raw-bind: no nodes", file=sys.stderr)
            return 1
        ring = itertools.cycle(names)
        queue: asyncio.Queue[str] = asyncio.Queue()
        seen: set[str] = set()
        selector = {"fieldSelector": f"spec.schedulerName={args.scheduler_name},spec.nodeName="}
        path = f"/api/v1/namespaces/{args.namespace}/pods"

        def offer(pod: Any) -> None:
            name = str(pod["metadata"]["name"])
            if name not in seen:
                seen.add(name)
                queue.put_nowait(name)

        async def bind() -> None:
            while True:
                name = await queue.get()
                body = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name, "namespace": args.namespace},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": next(ring)},
                }
                await client.request("POST", f"{path}/{name}/binding", body=body)

        workers = [asyncio.create_task(bind()) for _ in range(BINDERS)]
        listing = await client.request("GET", path, query=selector)
        for pod in listing.body.get("items") or ():
            offer(pod)
        version = str((listing.body.get("metadata") or {}).get("resourceVersion") or "")
        while True:
            try:
                async for event in client.watch(path, {**selector, "watch": "1", "resourceVersion": version}, 60.0):
                    obj = event.get("object") or {}
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event.get("type") == "ADDED":
                        offer(obj)
            except WatchIdle:  # nothing new for a minute: renew it
                pass
            except WatchFailed:
                await asyncio.sleep(0.1)
            if all(w.done() for w in workers):
                return 1
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="perf.harness.rawbind", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--scheduler-name", required=True)
    parser.add_argument("--qps", type=float, default=5000)
    parser.add_argument("--burst", type=int, default=5000)
    args = parser.parse_args(argv)
    try:
        return asyncio.run(_bind_all(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
