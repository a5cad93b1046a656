"""The watch inactivity watchdog against a real (local) HTTP server that goes silent."""

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp import web

from pysched.backend.live.client import connect
from pysched.backend.live.kubeclient import WatchFailed


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
    client = await connect(str(kubeconfig), qps=100, burst=100)
    seen = []

    async def consume() -> None:
        async for event in client.watch("/api/v1/nodes", {"watch": "true"}, inactivity=0.5):
            seen.append(event["object"]["metadata"]["name"])

    try:
        with pytest.raises(WatchFailed, match="watch broke off"):
            await asyncio.wait_for(consume(), timeout=20)  # without the watchdog: TimeoutError
    finally:
        release.set()
        await client.close()
        await runner.cleanup()
    assert seen == ["n1"]  # the event before the silence was delivered
