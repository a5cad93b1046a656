"""The ops server: HTTPS with delegated authn/authz for /metrics, health paths open, plain HTTP on request."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pysched.backend.live.kubeclient import JSON, ApiResponse
from pysched.certs import self_signed
from pysched.cmd.delegated import ACCESS_REVIEWS, MAX_WAITING_REVIEWS, TOKEN_REVIEWS, DelegatedAuth, User, bearer_token
from pysched.cmd.metrics import SchedulerMetrics
from pysched.cmd.server import Listener, OpsServer
from pysched.cmd.tls import CertificateFiles, TLSError, self_signed_context
from pysched.testing.controlplane import free_port, free_ports

READER = "system:serviceaccount:monitoring:prometheus"


class ReviewingApi:
    """Answers TokenReviews from `tokens` (token -> username) and SubjectAccessReviews from
    `allowed` (usernames that may get /metrics); `down` makes every review fail."""

    def __init__(self) -> None:
        self.tokens = {"good": READER, "nobody": "system:serviceaccount:default:nobody"}
        self.allowed = {READER}
        self.down = False
        self.reviews: list[tuple[str, JSON]] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        rate_limited: bool = True,
        only_if: Callable[[], bool] | None = None,
    ) -> ApiResponse:
        assert method == "POST" and not rate_limited
        self.reviews.append((path, body["spec"]))
        if self.down:
            return ApiResponse(0, {"message": "ClientConnectorError: cannot connect"})
        if path == TOKEN_REVIEWS:
            name = self.tokens.get(body["spec"]["token"])
            user = {"username": name, "uid": "u-1", "groups": ["system:authenticated"], "extra": {"k": ["v"]}}
            status = {"authenticated": True, "user": user} if name else {"authenticated": False, "error": "invalid"}
            return ApiResponse(201, {"spec": body["spec"], "status": status})
        assert path == ACCESS_REVIEWS
        return ApiResponse(201, {"status": {"allowed": body["spec"]["user"] in self.allowed}})

    def watch(self, path: str, query: Mapping[str, str], inactivity: float) -> AsyncIterator[JSON]:
        raise NotImplementedError

    async def close(self) -> None:
        return None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def unverified() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


Served = tuple[OpsServer, ReviewingApi, Clock, aiohttp.ClientSession]


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    api, clock = ReviewingApi(), Clock()
    metrics = SchedulerMetrics()
    metrics.attempt("pysched", "scheduled", 0.01)
    secure, plain = free_ports(2)
    listeners = [Listener("127.0.0.1", secure, self_signed_context()), Listener("127.0.0.1", plain)]
    server = OpsServer(metrics, lambda: None, listeners, DelegatedAuth(api, size=2, timer=clock))
    await server.start()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=unverified())) as session:
        yield server, api, clock, session
    await server.stop()


async def fetch(session: aiohttp.ClientSession, url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with session.get(url, headers=headers) as resp:
        return resp.status, await resp.text()


async def test_metrics_over_https_need_a_token_whose_user_may_get_them(
    served: Served,
) -> None:
    server, api, _, session = served
    https = server.listeners[0].url()
    assert https.startswith("https://")
    status, body = await fetch(session, f"{https}/metrics", "good")
    assert status == 200 and 'scheduler_schedule_attempts_total{profile="pysched",result="scheduled"} 1.0' in body
    assert api.reviews == [
        (TOKEN_REVIEWS, {"token": "good"}),
        (
            ACCESS_REVIEWS,
            {
                "user": READER,
                "uid": "u-1",
                "groups": ["system:authenticated"],
                "extra": {"k": ["v"]},
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            },
        ),
    ]
    assert (await fetch(session, f"{https}/metrics"))[0] == 401
    status, body = await fetch(session, f"{https}/metrics", "made-up")
    assert status == 401 and "made-up" not in body
    status, body = await fetch(session, f"{https}/metrics", "nobody")
    assert status == 403 and "may not get /metrics" in body and "scheduler_" not in body
    async with session.get(f"{https}/metrics", headers={"Authorization": "Basic Z29vZDo="}) as resp:
        assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer")


async def test_health_paths_answer_without_a_token_on_both_listeners(
    served: Served,
) -> None:
    server, api, _, session = served
    for listener in server.listeners:
        for path in ("/healthz", "/livez", "/readyz"):
            assert await fetch(session, f"{listener.url()}{path}") == (200, "ok"), (listener, path)
    assert api.reviews == []


async def test_plain_http_serves_metrics_without_authentication(
    served: Served,
) -> None:
    server, api, _, session = served
    plain = server.listeners[1].url()
    assert plain.startswith("http://")
    status, body = await fetch(session, f"{plain}/metrics")
    assert status == 200 and "scheduler_schedule_attempts_total" in body and api.reviews == []


async def test_reviews_are_cached_for_the_ttl_in_bounded_caches(
    served: Served,
) -> None:
    server, api, clock, session = served
    url = f"{server.listeners[0].url()}/metrics"
    for _ in range(3):
        assert (await fetch(session, url, "good"))[0] == 200
        assert (await fetch(session, url, "made-up"))[0] == 401
    assert len(api.reviews) == 3  # good: token + access; made-up: token; then all from the caches
    api.allowed.clear()
    clock.now = 9.0
    assert (await fetch(session, url, "good"))[0] == 200  # still the cached yes
    clock.now = 10.5
    assert (await fetch(session, url, "good"))[0] == 403  # expired: asked again
    assert len(api.reviews) == 5
    # Two entries at most: a third token pushes out the oldest.
    assert (await fetch(session, url, "nobody"))[0] == 403
    assert (await fetch(session, url, "made-up"))[0] == 401
    before = len(api.reviews)
    assert (await fetch(session, url, "good"))[0] == 403
    assert api.reviews[before][0] == TOKEN_REVIEWS


async def test_an_unreachable_api_answers_401_or_500_and_is_not_cached(
    served: Served,
) -> None:
    server, api, _, session = served
    url = f"{server.listeners[0].url()}/metrics"
    api.down = True
    assert (await fetch(session, url, "good"))[0] == 401
    api.down = False
    assert (await fetch(session, url, "good"))[0] == 200
    auth = DelegatedAuth(api)
    user = await auth.authenticate("good")
    assert user is not None and user.name == READER
    api.down = True
    assert (await auth.verdict("Bearer good", "/metrics")).status == 500
    api.down = False
    assert (await auth.verdict("Bearer good", "/metrics")).status == 200


async def test_a_flood_of_made_up_tokens_is_answered_429_past_a_bound_and_a_cached_token_still_passes() -> None:
    clock = Clock()  # frozen: the review bucket never refills, so the burst is all there is
    auth = DelegatedAuth(ReviewingApi(), qps=1.0, burst=1, timer=clock)
    assert (await auth.verdict("Bearer good", "/metrics")).status == 200  # reviewed and cached
    flood = [asyncio.ensure_future(auth.verdict(f"Bearer made-up-{i}", "/metrics")) for i in range(200)]
    await asyncio.sleep(0)
    done = [task for task in flood if task.done()]
    assert len(done) == 200 - MAX_WAITING_REVIEWS  # the rest wait for the bucket
    assert {task.result().status for task in done} == {429}
    assert (await auth.verdict("Bearer good", "/metrics")).status == 200  # from the cache, not queued
    for task in flood:
        task.cancel()
    await asyncio.gather(*flood, return_exceptions=True)


async def test_not_live_fails_healthz_and_livez_with_the_reason() -> None:
    listener = Listener("127.0.0.1", free_port())
    server = OpsServer(
        SchedulerMetrics(), lambda: None, [listener], DelegatedAuth(ReviewingApi()), not_live=lambda: "stuck"
    )
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            for path in ("/healthz", "/livez"):
                assert await fetch(session, f"{listener.url()}{path}") == (500, "not live: stuck\n")
            assert await fetch(session, f"{listener.url()}/readyz") == (200, "ok")
    finally:
        await server.stop()


async def test_a_port_in_use_is_named_and_nothing_stays_bound() -> None:
    first = Listener("127.0.0.1", free_port())
    taken = OpsServer(SchedulerMetrics(), lambda: None, [first], DelegatedAuth(ReviewingApi()))
    await taken.start()
    other = Listener("127.0.0.1", free_port())
    server = OpsServer(SchedulerMetrics(), lambda: None, [other, first], DelegatedAuth(ReviewingApi()))
    try:
        with pytest.raises(OSError, match=rf"http://127\.0\.0\.1:{first.port}: "):
            await server.start()
        again = OpsServer(SchedulerMetrics(), lambda: None, [other], DelegatedAuth(ReviewingApi()))
        await again.start()  # `other` was released when start failed
        await again.stop()
    finally:
        await taken.stop()


def _write_pair(folder: Path, host: str) -> bytes:
    cert, key = self_signed([host])
    (folder / "tls.crt").write_bytes(cert)
    (folder / "tls.key").write_bytes(key)
    return cert


async def _served(port: int, ca: bytes, folder: Path) -> None:
    """A request on a new connection, its certificate verified against `ca` only."""
    (folder / "ca.pem").write_bytes(ca)
    verifying = ssl.create_default_context(cafile=str(folder / "ca.pem"))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=verifying)) as session:
        assert await fetch(session, f"https://127.0.0.1:{port}/healthz") == (200, "ok")


async def test_given_certificate_files_are_served_and_read_again_when_rotated(tmp_path: Path) -> None:
    first = _write_pair(tmp_path, "first.example")
    files = CertificateFiles(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    listener = Listener("127.0.0.1", free_port(), files.context, files)
    server = OpsServer(SchedulerMetrics(), lambda: None, [listener], DelegatedAuth(ReviewingApi()))
    await server.start()
    try:
        await _served(listener.port, first, tmp_path)
        server.check_certificates()  # unchanged: still the first pair
        await _served(listener.port, first, tmp_path)
        second = _write_pair(tmp_path, "second.example")  # rotated in place
        server.check_certificates()
        await _served(listener.port, second, tmp_path)
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await _served(listener.port, first, tmp_path)
        # Half a rotation (a new certificate, the old key): kept out, the last good pair served.
        third, _ = self_signed(["third.example"])
        (tmp_path / "tls.crt").write_bytes(third)
        renewed, problem = files.check()
        assert not renewed and problem is not None and "key values mismatch" in problem
        await _served(listener.port, second, tmp_path)
        (tmp_path / "tls.key").unlink()
        renewed, problem = files.check()
        assert not renewed and problem is not None and "tls.key" in problem
        assert files.check() == (False, None)  # told once per change
        await _served(listener.port, second, tmp_path)
    finally:
        await server.stop()
    with pytest.raises(TLSError, match=r"tls\.crt"):
        CertificateFiles(str(tmp_path / "tls.crt"), str(tmp_path / "missing.key"))
    (tmp_path / "tls.key").write_bytes(b"not a key")
    with pytest.raises(TLSError, match=r"tls\.key"):
        CertificateFiles(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))


async def test_the_server_reads_the_files_again_by_itself(tmp_path: Path) -> None:
    _write_pair(tmp_path, "first.example")
    files = CertificateFiles(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    listener = Listener("127.0.0.1", free_port(), files.context, files)
    server = OpsServer(SchedulerMetrics(), lambda: None, [listener], DelegatedAuth(ReviewingApi()), check_seconds=0.01)
    await server.start()
    try:
        second = _write_pair(tmp_path, "second.example")

        async def renewed() -> None:
            while True:
                with contextlib.suppress(aiohttp.ClientConnectorCertificateError):
                    return await _served(listener.port, second, tmp_path)
                await asyncio.sleep(0.01)

        await asyncio.wait_for(renewed(), 10)
    finally:
        await server.stop()


def test_bearer_token_parsing() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer  abc ") == "abc"
    for header in (None, "", "Bearer", "Bearer ", "Basic abc", "Bearer a b", "abc"):
        assert bearer_token(header) is None, header
    assert User("u") == User("u", "", (), ())
