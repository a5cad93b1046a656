"""The operations endpoint: /healthz (= /livez), /readyz and /metrics over plain HTTP.

/healthz answering at all means the event loop runs; it also answers 500 when the process knows
it is broken (the scheduling loop stopped or stalled), so the liveness probe restarts it."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from pysched.cmd.metrics import SchedulerMetrics

Readiness = Callable[[], str | None]  # None when ready (or alive), else why not


class OpsServer:
    def __init__(
        self,
        metrics: SchedulerMetrics,
        not_ready: Readiness,
        host: str,
        port: int,
        *,
        not_live: Readiness = lambda: None,
    ) -> None:
        self._metrics = metrics
        self._not_ready = not_ready
        self._not_live = not_live
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def _healthz(self, request: web.Request) -> web.Response:
        reason = self._not_live()
        if reason is None:
            return web.Response(text="ok")
        return web.Response(status=500, text=f"not healthy: {reason}\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        reason = self._not_ready()
        if reason is None:
            return web.Response(text="ok")
        return web.Response(status=503, text=f"not ready: {reason}\n")

    async def _metrics_view(self, request: web.Request) -> web.Response:
        return web.Response(body=self._metrics.render(), headers={"Content-Type": "text/plain; version=0.0.4"})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics_view)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
