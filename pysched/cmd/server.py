"""The operations endpoints: /healthz, /livez, /readyz and /metrics, as kube-scheduler serves them.

On the secure port (HTTPS) /metrics needs a bearer token whose user may `get` it (delegated
authentication and authorization, `pysched.cmd.delegated`); the health paths answer anyone, as
kube-scheduler's always-allowed paths do, so probes need no token. The plain HTTP listener exists
only when asked for and serves everything without authentication, like kube-scheduler's former
insecure port: bind it to loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog
from aiohttp import hdrs, web

from pysched.cmd.delegated import Authorizer
from pysched.cmd.metrics import SchedulerMetrics
from pysched.cmd.tls import CHECK_SECONDS, CertificateFiles

Readiness = Callable[[], str | None]  # None when ready (or live), else why not
ALWAYS_ALLOWED = ("/healthz", "/livez", "/readyz")  # answered without a token

log = structlog.get_logger("pysched.cmd.server")


def _live() -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class Listener:
    """One address to serve on; `tls` None means plain HTTP without authentication."""

    host: str
    port: int
    tls: ssl.SSLContext | None = None
    certificate: CertificateFiles | None = None  # the files `tls` serves, read again as they change

    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"


class OpsServer:
    def __init__(
        self,
        metrics: SchedulerMetrics,
        not_ready: Readiness,
        listeners: Sequence[Listener],
        auth: Authorizer,
        *,
        not_live: Readiness = _live,
        check_seconds: float = CHECK_SECONDS,
    ) -> None:
        self._metrics = metrics
        self._not_ready = not_ready
        self._not_live = not_live
        self.listeners = tuple(listeners)
        self._auth = auth
        self._runners: list[web.AppRunner] = []
        self._check_seconds = check_seconds
        self._checking: asyncio.Task[None] | None = None

    async def _healthz(self, request: web.Request) -> web.Response:
        # Answering at all means the event loop is alive; not_live names what else is stuck.
        reason = self._not_live()
        if reason is None:
            return web.Response(text="ok")
        return web.Response(status=500, text=f"not live: {reason}\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        reason = self._not_ready()
        if reason is None:
            return web.Response(text="ok")
        return web.Response(status=503, text=f"not ready: {reason}\n")

    async def _metrics_view(self, request: web.Request) -> web.Response:
        return web.Response(body=self._metrics.render(), headers={"Content-Type": "text/plain; version=0.0.4"})

    async def _guarded_metrics(self, request: web.Request) -> web.Response:
        verdict = await self._auth.verdict(request.headers.get(hdrs.AUTHORIZATION), request.path)
        if not verdict.allowed:
            log.debug("refused", path=request.path, status=verdict.status, reason=verdict.reason, user=verdict.user)
            headers = {"WWW-Authenticate": 'Bearer realm="pysched"'} if verdict.status == 401 else None
            return web.Response(status=verdict.status, text=f"{verdict.reason}\n", headers=headers)
        return await self._metrics_view(request)

    def _app(self, secure: bool) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._guarded_metrics if secure else self._metrics_view)
        return app

    async def start(self) -> None:
        """Listen on every address; raises OSError naming the address that could not be bound."""
        for listener in self.listeners:
            runner = web.AppRunner(self._app(listener.tls is not None), access_log=None)
            await runner.setup()
            self._runners.append(runner)
            site = web.TCPSite(runner, listener.host, listener.port, ssl_context=listener.tls)
            try:
                await site.start()
            except OSError as err:
                await self.stop()
                raise OSError(err.errno, f"{listener.url()}: {err.strerror or err}") from err
            log.info("serving", url=listener.url())
        if any(listener.certificate is not None for listener in self.listeners):
            self._checking = asyncio.create_task(self._check_periodically())

    async def _check_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._check_seconds)
            self.check_certificates()

    def check_certificates(self) -> None:
        """Read the certificate files again: a rotated pair is served to new connections; one
        that does not load is named once and the last good pair kept."""
        for listener in self.listeners:
            if listener.certificate is None:
                continue
            renewed, problem = listener.certificate.check()
            if renewed:
                log.info("serving a renewed certificate", url=listener.url())
            elif problem is not None:
                log.warning("certificate files not loaded; the last good pair is served", problem=problem)

    async def stop(self) -> None:
        if self._checking is not None:
            self._checking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checking
            self._checking = None
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
