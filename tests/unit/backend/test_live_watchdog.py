"""The watch inactivity watchdog against a real (local) HTTP server that goes silent."""

import asyncio
import json
from pathlib import Path

import pytest
import structlog
from aiohttp import web

from pysched.backend.live.client import connect
from pysched.backend.live.informer import Informer
from pysched.backend.live.kubeclient import WatchIdle


async def _serve(tmp_path: Path, app: web.Application) -> tuple[web.AppRunner, Path]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        f"clusters: [{{name: t, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: t, user: {token: x}}]\n"
        "contexts: [{name: t, context: {cluster: t, user: t}}]\n"
    )
    return runner, kubeconfig


async def test_a_watch_that_goes_silent_is_broken_off(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def silent_watch(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        event = {"type": "ADDED", "object": {"metadata": {"name": "n1", "resourceVersion": "7"}}}
        await response.write(json.dumps(event).encode() + b"\n")
        await release.wait()  # then nothing: no bookmark, no close, as a stuck connection
        return response

    app = web.Application()
    app.router.add_get("/api/v1/nodes", silent_watch)
    runner, kubeconfig = await _serve(tmp_path, app)
    client = await connect(str(kubeconfig), qps=100, burst=100)
    seen = []

    async def consume() -> None:
        async for event in client.watch("/api/v1/nodes", {"watch": "true"}, inactivity=0.5):
            seen.append(event["object"]["metadata"]["name"])

    try:
        with pytest.raises(WatchIdle, match="watch broke off"):
            await asyncio.wait_for(consume(), timeout=20)  # without the watchdog: TimeoutError
    finally:
        release.set()
        await client.close()
        await runner.cleanup()
    assert seen == ["n1"]  # the event before the silence was delivered


async def test_an_idle_watch_is_renewed_from_its_last_version_without_a_warning(tmp_path: Path) -> None:
    """A resource nobody changes sends nothing for minutes: the informer renews the watch from the
    last version it saw (no relist, no backoff, no error), and warns of nothing."""
    release = asyncio.Event()
    watches: list[str] = []

    async def nodes(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response({"metadata": {"resourceVersion": "5"}, "items": []})
        watches.append(request.query["resourceVersion"])
        response = web.StreamResponse()
        await response.prepare(request)
        if len(watches) == 1:
            event = {"type": "ADDED", "object": {"metadata": {"name": "n1", "resourceVersion": "7"}}}
            await response.write(json.dumps(event).encode() + b"\n")
        await release.wait()
        return response

    app = web.Application()
    app.router.add_get("/api/v1/nodes", nodes)
    runner, kubeconfig = await _serve(tmp_path, app)
    client = await connect(str(kubeconfig), qps=100, burst=100)
    seen: list[str] = []
    informer = Informer(
        client, "/api/v1/nodes", lambda obj: seen.append(obj["metadata"]["name"]), lambda *_: None, inactivity=0.3
    )
    task = asyncio.create_task(informer.run())
    try:
        with structlog.testing.capture_logs() as logs:
            for _ in range(200):
                if len(watches) >= 3:
                    break
                await asyncio.sleep(0.05)
    finally:
        task.cancel()
        release.set()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()
        await runner.cleanup()
    assert watches[:3] == ["5", "7", "7"]  # from the list's version, then from the last event's
    assert seen == ["n1"]
    assert informer.relists == 0 and informer.last_error == ""
    assert informer.reconnects >= 2
    assert [e for e in logs if e["log_level"] not in ("debug", "info")] == []
