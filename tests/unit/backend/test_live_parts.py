"""The live backend's parts that need no API server: informer, leader election, events, limiter."""

from __future__ import annotations

import argparse
import asyncio
import collections
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing
import yaml

from pysched.api.jobs import JobRef, JobSource, job_key
from pysched.api.limits import EVENT_NOTE_LIMIT
from pysched.api.times import format_rfc3339
from pysched.api.volumes import Storage
from pysched.backend.live.cluster import LiveCluster, LiveOptions, event_name
from pysched.backend.live.eventsink import EventRecord, EventSink, Series
from pysched.backend.live.informer import Informer
from pysched.backend.live.kubeclient import JSON, ApiResponse, WatchFailed
from pysched.backend.live.leader import LeaderElector, LeaseConfig
from pysched.backend.live.ratelimit import TokenBucket
from pysched.certs import self_signed
from pysched.cmd.run import _listeners, register
from pysched.cmd.run import main as run_main
from pysched.framework.config import parse_config
from pysched.framework.events import EventKind
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.testing.scripted import ScriptedApi

PODS = "/api/v1/pods"


def obj(name: str, version: str) -> JSON:
    return {"metadata": {"name": name, "resourceVersion": version}}


class FakeClient:
    """Scripted answers: lists by call order, watches as lists of events or exceptions."""

    def __init__(self) -> None:
        self.lists: collections.deque[ApiResponse] = collections.deque()
        self.watches: collections.deque[list[JSON] | Exception] = collections.deque()
        self.watch_versions: list[str] = []
        self.objects: dict[str, JSON] = {}
        self.requests: list[tuple[str, str]] = []
        self.down = False
        self.bucket: TokenBucket | None = None  # the client-side rate limit, when one is set

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
        if rate_limited and self.bucket is not None:
            await self.bucket.acquire()
        self.requests.append((method, path))
        if self.down:
            return ApiResponse(0, {"message": "unreachable"})
        if "leases" in path:
            return self._lease(method, path, body)
        return self.lists.popleft() if self.lists else ApiResponse(0, {"message": "unreachable"})

    def _lease(self, method: str, path: str, body: Any) -> ApiResponse:
        key = "lease"
        if method == "GET":
            return ApiResponse(200, self.objects[key]) if key in self.objects else ApiResponse(404)
        if method == "POST":
            if key in self.objects:
                return ApiResponse(409)
            self.objects[key] = {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}
            return ApiResponse(201, self.objects[key])
        current = self.objects[key]
        if body["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            return ApiResponse(409)
        version = str(int(current["metadata"]["resourceVersion"]) + 1)
        self.objects[key] = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
        return ApiResponse(200, self.objects[key])

    async def watch(self, path: str, query: Mapping[str, str], inactivity: float) -> AsyncIterator[JSON]:
        self.watch_versions.append(query["resourceVersion"])
        script = self.watches.popleft() if self.watches else WatchFailed(0, "no more script")
        if isinstance(script, Exception):
            raise script
        for event in script:
            yield event
        await asyncio.sleep(0)

    async def close(self) -> None:
        pass


class Recorder:
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    def upsert(self, raw: JSON) -> None:
        self.log.append(("upsert", f"{raw['metadata']['name']}@{raw['metadata']['resourceVersion']}"))

    def delete(self, key: str, raw: JSON | None) -> None:
        self.log.append(("delete", key))


def listing(version: str, *items: JSON) -> ApiResponse:
    return ApiResponse(200, {"metadata": {"resourceVersion": version}, "items": list(items)})


async def run_until(informer: Informer, done: Any, timeout: float = 5.0) -> None:
    task = asyncio.create_task(informer.run())
    try:
        for _ in range(int(timeout / 0.01)):
            if done():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("informer did not get there")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_informer_lists_watches_keeps_bookmark_versions_and_relists_as_a_diff() -> None:
    client = FakeClient()
    rec = Recorder()
    client.lists.extend([listing("10", obj("a", "5"), obj("b", "6")), listing("30", obj("a", "5"), obj("c", "25"))])
    client.watches.extend(
        [
            [{"type": "MODIFIED", "object": obj("b", "11")}, {"type": "BOOKMARK", "object": obj("", "15")}],
            [{"type": "ERROR", "object": {"code": 410, "message": "too old"}}],
            [],
        ]
    )
    informer = Informer(client, "/api/v1/nodes", rec.upsert, rec.delete)
    await run_until(informer, lambda: len(client.watch_versions) >= 3)
    assert client.watch_versions[:3] == ["10", "15", "30"]  # resumed at the bookmark; relisted after 410
    assert rec.log == [
        ("upsert", "a@5"),
        ("upsert", "b@6"),
        ("upsert", "b@11"),
        ("upsert", "c@25"),  # the relist delivers only what changed: a is unchanged, b is gone
        ("delete", "b"),
    ]
    assert informer.relists == 1


async def test_informer_retries_an_unreachable_api_and_reports_it() -> None:
    client = FakeClient()
    rec = Recorder()
    informer = Informer(client, "/api/v1/nodes", rec.upsert, rec.delete)
    task = asyncio.create_task(informer.run())
    await asyncio.sleep(0.05)
    assert not informer.synced.is_set()
    assert "unreachable" in informer.last_error
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_leader_election_takes_an_expired_lease_only() -> None:
    client = FakeClient()
    now = [0.0]
    changes: list[tuple[str, bool]] = []
    a = LeaderElector(client, LeaseConfig("ns", "l", "a"), lambda v: changes.append(("a", v)), now=lambda: now[0])
    b = LeaderElector(client, LeaseConfig("ns", "l", "b"), lambda v: changes.append(("b", v)), now=lambda: now[0])
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    now[0] = 10.0
    assert await a.try_acquire_or_renew()  # renewed: b saw the record change
    assert not await b.try_acquire_or_renew()
    now[0] = 24.0
    assert not await b.try_acquire_or_renew()  # 14 s since b observed the last renewal
    now[0] = 25.5
    assert await b.try_acquire_or_renew()
    spec = client.objects["lease"]["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)


async def test_leader_release_frees_the_lease() -> None:
    client = FakeClient()
    stop = asyncio.Event()
    elector = LeaderElector(client, LeaseConfig("ns", "l", "a", 3.0, 2.0, 0.1), lambda v: None)
    task = asyncio.create_task(elector.run(stop))
    for _ in range(100):
        if elector.is_leader:
            break
        await asyncio.sleep(0.01)
    assert elector.is_leader
    stop.set()
    await task
    await elector.release()
    assert client.objects["lease"]["spec"]["holderIdentity"] is None
    other = LeaderElector(client, LeaseConfig("ns", "l", "b"), lambda v: None)
    assert await other.try_acquire_or_renew()


async def test_a_frozen_leader_is_no_longer_fresh_before_it_learns_it_lost_the_lease() -> None:
    client = FakeClient()
    now = [100.0]
    stop = asyncio.Event()
    elector = LeaderElector(client, LeaseConfig("ns", "l", "a", 3.0, 2.0, 0.1), lambda v: None, now=lambda: now[0])
    task = asyncio.create_task(elector.run(stop))
    for _ in range(100):
        if elector.is_leader:
            break
        await asyncio.sleep(0.01)
    assert elector.is_leader and elector.fresh()
    now[0] += 2.5  # frozen past the renew deadline: no renewal attempt has run since
    assert elector.is_leader and not elector.fresh()  # writes are refused from this instant
    stop.set()
    await task


async def test_lease_renewals_never_wait_behind_rate_limited_requests() -> None:
    """A new leader's burst of binds and resizes fills the client's rate limiter; its renewals must
    not queue behind them, or it loses the Lease within the renew deadline of winning it."""
    client = FakeClient()
    client.bucket = TokenBucket(qps=0.01, burst=1)
    await client.request("GET", PODS)  # the burst is spent: the next token is 100 s away
    bind = asyncio.create_task(client.request("POST", "/api/v1/namespaces/ns/pods/p/binding"))
    stop = asyncio.Event()
    elector = LeaderElector(client, LeaseConfig("ns", "l", "a", 3.0, 2.0, 0.1), lambda v: None)
    task = asyncio.create_task(elector.run(stop))
    try:
        for _ in range(200):
            puts = sum(1 for method, path in client.requests if method == "PUT" and "leases" in path)
            if elector.is_leader and puts >= 3:
                break
            await asyncio.sleep(0.01)
        assert elector.is_leader and puts >= 3, client.requests  # acquired, then renewed twice
        assert not bind.done()  # still waiting for its token
    finally:
        stop.set()
        await task
        bind.cancel()


@pytest.mark.parametrize("identity", ["", " ", "\t\n", "a" * 254, "host\n1"])
def test_an_elector_refuses_an_identity_that_names_no_replica(identity: str) -> None:
    """An empty holderIdentity reads as a free Lease: two electors named '' both led at once."""
    with pytest.raises(ValueError, match="identity: must"):
        LeaderElector(FakeClient(), LeaseConfig("ns", "l", identity), lambda v: None)
    LeaderElector(FakeClient(), LeaseConfig("ns", "l", "a" * 253), lambda v: None)


async def test_a_lease_the_api_refuses_to_create_is_told_and_its_duration_is_rounded_up() -> None:
    class Refusing(FakeClient):
        def _lease(self, method: str, path: str, body: Any) -> ApiResponse:
            if method == "POST":
                return ApiResponse(403, {"message": "leases.coordination.k8s.io is forbidden: cannot create"})
            return super()._lease(method, path, body)

    elector = LeaderElector(Refusing(), LeaseConfig("nope", "l", "a"), lambda v: None)
    with structlog.testing.capture_logs() as logs:
        assert not await elector.try_acquire_or_renew()
    assert [(r["event"], r["namespace"]) for r in logs] == [("lease not created", "nope")]
    assert "forbidden" in logs[0]["error"]
    # Standbys wait the written duration, the leader writes until its renew deadline: never less.
    client = FakeClient()
    assert await LeaderElector(
        client, LeaseConfig("n", "l", "a", 10.4, 10.2, 2.0), lambda v: None
    ).try_acquire_or_renew()
    assert client.objects["lease"]["spec"]["leaseDurationSeconds"] == 11


def test_lease_timings_are_checked() -> None:
    assert LeaseConfig("n", "l", "i").problem() is None
    assert LeaseConfig("n", "l", "i", lease_duration=5, renew_deadline=10).problem() is not None
    assert LeaseConfig("n", "l", "i", renew_deadline=2, retry_period=2).problem() is not None


async def test_event_sink_folds_repeats_into_a_series_and_drops_past_the_memory_bound() -> None:
    created: list[EventRecord] = []
    patched: list[int] = []

    async def create(event: EventRecord, when: float) -> str | None:
        created.append(event)
        return f"e{len(created)}"

    async def patch(event: EventRecord, series: Series) -> bool:
        patched.append(series.count)
        return True

    sink = EventSink(create, patch, qps=0, burst=1, max_pending=2, max_backlog=3, patch_interval=0.05)
    event = EventRecord("ns", "p", "uid", "Warning", "FailedScheduling", "Scheduling", "x" * 5000, "pysched")
    sink.start()
    for _ in range(5):
        sink.record(event)
    await asyncio.sleep(0.2)
    assert len(created) == 1 and len(created[0].note.encode()) <= EVENT_NOTE_LIMIT
    assert patched == [5]
    for i in range(10):
        sink.record(EventRecord("ns", f"q{i}", "u", "Warning", "FailedScheduling", "Scheduling", "n", "pysched"))
    assert sink.dropped == 7
    await sink.stop()
    assert len(created) == 4


async def test_a_series_whose_event_is_gone_creates_it_again() -> None:
    """The Event object of a series is deleted (or its TTL ran out) while the pod keeps repeating:
    the next patch finds it gone and the event is created again, as client-go's recorder does;
    before, every later repeat was lost uncounted."""
    created: list[str] = []
    patched: list[tuple[str, int]] = []
    gone = {"e1"}

    async def create(event: EventRecord, when: float) -> str | None:
        created.append(event.pod_name)
        return f"e{len(created)}"

    async def patch(event: EventRecord, series: Series) -> bool:
        if series.name in gone:
            return False
        patched.append((series.name, series.count))
        return True

    sink = EventSink(create, patch, qps=0, burst=1, max_pending=5, patch_interval=0.02)
    event = EventRecord("ns", "p", "uid", "Warning", "FailedScheduling", "Scheduling", "no room", "pysched")
    sink.start()
    sink.record(event)
    for _ in range(200):
        if created:
            break
        await asyncio.sleep(0.005)
    sink.record(event)  # a repeat: its patch finds e1 gone
    for _ in range(200):
        if len(created) == 2:
            break
        await asyncio.sleep(0.005)
    sink.record(event)  # a repeat of the event created again: patched on e2
    for _ in range(200):
        if patched:
            break
        await asyncio.sleep(0.005)
    await sink.stop(drain_timeout=0.1)
    assert created == ["p", "p"] and patched == [("e2", 3)] and sink.dropped == 0


async def test_event_sink_drops_nothing_while_the_api_takes_events_and_sheds_only_when_it_fails() -> None:
    refusing = False
    created: list[str] = []

    async def create(event: EventRecord, when: float) -> str | None:
        if refusing:
            return None  # the API answered with an error
        created.append(event.pod_name)
        return f"e{len(created)}"

    async def patch(event: EventRecord, series: Series) -> bool:
        return True

    def burst(prefix: str, n: int) -> None:
        for i in range(n):
            sink.record(EventRecord("ns", f"{prefix}{i}", "u", "Normal", "Scheduled", "Binding", "bound", "pysched"))

    sink = EventSink(create, patch, qps=0, burst=1, max_pending=5, patch_interval=60)
    burst("a", 500)  # a burst far past max_pending, recorded before any write: queued, not dropped
    assert sink.dropped == 0 and sink.backlog == 500
    sink.start()
    for _ in range(200):
        if len(created) == 500:
            break
        await asyncio.sleep(0.01)
    assert len(created) == 500 and sink.dropped == 0
    refusing = True
    burst("b", 50)
    for _ in range(200):
        if sink.dropped:
            break
        await asyncio.sleep(0.01)
    # the first refusal cut the backlog to max_pending; failed writes are lost, and counted only as shed
    assert sink.dropped >= 50 - 5 - 8 and sink.backlog <= 5, (sink.dropped, sink.backlog)
    assert sink.created == 500
    await sink.stop(drain_timeout=0.1)


async def test_event_sink_loses_only_the_event_the_api_refuses() -> None:
    created: list[str] = []

    async def create(event: EventRecord, when: float) -> str | None:
        if event.pod_name == "forbidden":
            return ""  # the API answered 403 for this one (its namespace is being deleted)
        created.append(event.pod_name)
        return f"e{len(created)}"

    async def patch(event: EventRecord, series: Series) -> bool:
        return True

    sink = EventSink(create, patch, qps=0, burst=1, max_pending=5, patch_interval=60)
    for name in ["forbidden", *(f"p{i}" for i in range(100))]:
        sink.record(EventRecord("ns", name, "u", "Normal", "Scheduled", "Binding", "bound", "pysched"))
    sink.start()
    for _ in range(200):
        if len(created) == 100:
            break
        await asyncio.sleep(0.01)
    assert len(created) == 100 and sink.dropped == 0 and sink.created == 100
    await sink.stop(drain_timeout=0.1)


async def test_an_event_no_answer_came_for_is_tried_again_then_counted_as_dropped() -> None:
    """A kube-apiserver restart: the writes of those seconds get no answer. Each is written once
    the API answers again, or counted once its tries are spent; never lost uncounted."""
    answers: dict[str, list[str | None]] = {"back": [None, None, "e1"], "gone": [None] * 5}
    tried: list[str] = []

    async def create(event: EventRecord, when: float) -> str | None:
        tried.append(event.pod_name)
        return answers[event.pod_name].pop(0)

    async def patch(event: EventRecord, series: Series) -> bool:
        return True

    sink = EventSink(create, patch, qps=0, burst=1, max_pending=5, workers=1, retry_delay=0.001, max_tries=3)
    for name in ("back", "gone"):
        sink.record(EventRecord("ns", name, "u", "Normal", "Scheduled", "Binding", "bound", "pysched"))
    sink.start()
    for _ in range(200):
        if len(tried) == 6:
            break
        await asyncio.sleep(0.01)
    await sink.stop(drain_timeout=0.1)
    assert tried == ["back", "back", "back", "gone", "gone", "gone"]
    assert sink.created == 1 and sink.dropped == 1 and sink.backlog == 0


async def test_an_event_shed_while_the_api_failed_is_written_when_it_happens_again() -> None:
    """Shed from the backlog, an event was never written: its next occurrence is a new event, not
    a count on the lost one (which nothing would ever patch)."""
    up = False
    created: list[str] = []

    async def create(event: EventRecord, when: float) -> str | None:
        if not up:
            return None
        created.append(event.pod_name)
        return f"e{len(created)}"

    async def patch(event: EventRecord, series: Series) -> bool:
        return True

    def failed(name: str) -> EventRecord:
        return EventRecord("ns", name, "u", "Warning", "FailedScheduling", "Scheduling", "no room", "pysched")

    sink = EventSink(create, patch, qps=0, burst=1, max_pending=1, workers=1, retry_delay=0.001)
    sink.start()
    for name in ("a", "b", "c"):
        sink.record(failed(name))
    for _ in range(200):
        if sink.dropped >= 2:
            break
        await asyncio.sleep(0.005)
    assert sink.dropped >= 2
    up = True
    for _ in range(200):
        if not sink.backlog:
            break
        await asyncio.sleep(0.005)
    for name in ("a", "b", "c"):
        sink.record(failed(name))
    for _ in range(200):
        if {"a", "b", "c"} <= set(created):
            break
        await asyncio.sleep(0.005)
    await sink.stop(drain_timeout=0.1)
    assert {"a", "b", "c"} <= set(created), created


async def test_an_event_the_api_refuses_is_told_apart_from_a_write_that_failed() -> None:
    client = FakeClient()
    backend = LiveCluster(client)
    record = EventRecord("ns", "p", "u", "Normal", "Scheduled", "Binding", "bound", "pysched")
    client.lists.extend([ApiResponse(201), ApiResponse(403), ApiResponse(422), ApiResponse(429), ApiResponse(503)])
    answers = [await backend._create_event(record, 0.0) for _ in range(6)]  # the last: no answer at all
    assert answers[0] and answers[0].startswith("p.")
    assert answers[1:] == ["", "", None, None, None]


def test_an_event_name_is_a_valid_name_whatever_the_pods_length() -> None:
    pod = "a" * 199 + "-" + "b" * 20  # a valid pod name whose first 200 characters end in "-"
    assert event_name(pod, "82c2") == "a" * 199 + ".82c2"
    assert event_name("a" * 198 + ".-c", "x") == "a" * 198 + ".x"
    assert event_name("train-0", "x") == "train-0.x"


async def test_token_bucket_paces_after_the_burst() -> None:
    clock = [0.0]
    bucket = TokenBucket(10.0, 2, now=lambda: clock[0])
    assert bucket.try_acquire() and bucket.try_acquire()
    assert not bucket.try_acquire()
    clock[0] = 0.1
    assert bucket.try_acquire()


def test_manifest_profile_is_the_builtin_pysched_profile() -> None:
    registry = default_registry()
    configmap = yaml.safe_load((Path(__file__).resolve().parents[3] / "manifests" / "configmap.yaml").read_text())
    deployed = parse_config(yaml.safe_load(configmap["data"]["profiles.yaml"]), "configmap", registry)
    builtin = builtin_config(registry).profile("pysched")
    assert deployed.profiles == (builtin,)


@pytest.mark.parametrize(
    "argv",
    [
        ["--kubeconfig", "/nonexistent/kubeconfig"],
        ["--bind-address", "nope"],
        ["--bind-address", "0.0.0.0:10251"],
        ["--secure-port", "70000"],
        ["--insecure-bind-address", "nope"],
        ["--tls-cert-file", "/etc/hostname"],
        ["--tls-cert-file", "/nonexistent/cert", "--tls-private-key-file", "/nonexistent/key"],
        ["--lease-duration", "5", "--renew-deadline", "10"],
    ],
)
def test_bad_input_exits_2_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pysched run: error: ")


UNREACHABLE_KUBECONFIG = """
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: default}}]
current-context: x
"""


@pytest.fixture
def unreachable(tmp_path: Path) -> str:
    """A kubeconfig of an API server that never answers: a flag checked only after connecting
    would first log that the version could not be read."""
    path = tmp_path / "kubeconfig"
    path.write_text(UNREACHABLE_KUBECONFIG)
    return str(path)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--insecure-bind-address", "[::1:18251"], "--insecure-bind-address: expected HOST:PORT (an IPv6 host in"),
        (["--insecure-bind-address", "::1:18251"], "--insecure-bind-address: expected HOST:PORT"),
        (["--insecure-bind-address", "::1]:18251"], "--insecure-bind-address: expected HOST:PORT"),
        (["--insecure-bind-address", "[]:18251"], "--insecure-bind-address: expected HOST:PORT"),
        (["--insecure-bind-address", "[::1]:x"], "--insecure-bind-address: expected HOST:PORT"),
        (
            ["--tls-cert-file", "/nonexistent/cert", "--tls-private-key-file", "/nonexistent/key"],
            "--tls-cert-file and --tls-private-key-file serve --secure-port, which is 0 (no HTTPS)",
        ),
        (["--bind-address", "127.0.0.1"], "--bind-address is the address of --secure-port, which is 0 (no HTTPS)"),
        (["--tls-cert-file=", "--tls-private-key-file=k"], "--tls-cert-file: a file name is needed"),
    ],
)
def test_serving_flags_that_would_be_ignored_or_misread_are_refused(
    argv: list[str], needle: str, unreachable: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(["--kubeconfig", unreachable, "--no-leader-elect", "--secure-port", "0", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"pysched run: error: {needle}"), err


def test_an_address_that_cannot_be_served_is_refused_before_connecting(
    unreachable: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found after connecting, it came as a second line after the API server's warning."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        base = ["--kubeconfig", unreachable, "--no-leader-elect", "--secure-port", "0"]
        assert run_main([*base, "--insecure-bind-address", f"127.0.0.1:{port}"]) == 2
        err = capsys.readouterr().err
        assert err == f"pysched run: error: cannot listen on http://127.0.0.1:{port}: address already in use\n"
    with socket.socket() as free:  # the secure and the plain listener on one port clash with each other
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    secure = ["--secure-port", str(port), "--bind-address", "127.0.0.1"]
    assert run_main([*base[:3], *secure, "--insecure-bind-address", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert err == f"pysched run: error: cannot listen on http://127.0.0.1:{port}: address already in use\n"

    def unresolvable(host: str, *args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unresolvable)
    assert run_main([*base, "--insecure-bind-address", "999.1.1.1:8080"]) == 2
    err = capsys.readouterr().err
    assert err == "pysched run: error: cannot listen on http://999.1.1.1:8080: Name or service not known\n"


def test_given_certificate_files_make_a_listener_that_reads_them_again(tmp_path: Path) -> None:
    cert, key = self_signed(["pysched.example"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    parser = argparse.ArgumentParser(prog="pysched")
    register(parser.add_subparsers(dest="command", required=True))
    files = ["--tls-cert-file", str(tmp_path / "tls.crt"), "--tls-private-key-file", str(tmp_path / "tls.key")]
    listeners = _listeners(parser.parse_args(["run", *files]))
    assert not isinstance(listeners, str)
    (secure,) = listeners
    assert secure.certificate is not None and secure.tls is secure.certificate.context
    made = _listeners(parser.parse_args(["run"]))
    assert not isinstance(made, str)
    (default,) = made
    assert default.tls is not None and default.certificate is None  # self-signed: nothing to read again


def test_bad_config_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: [{schedulerName: x, plugins: {queueSort: [{name: Nope}]}}]\n")
    assert run_main(["--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.yaml" in err


async def test_a_leader_that_cannot_renew_steps_down_within_the_renew_deadline() -> None:
    client = FakeClient()
    changes: list[bool] = []
    elector = LeaderElector(client, LeaseConfig("ns", "l", "a", 1.0, 0.5, 0.1), changes.append)
    stop = asyncio.Event()
    task = asyncio.create_task(elector.run(stop))
    for _ in range(100):
        if elector.is_leader:
            break
        await asyncio.sleep(0.01)
    client.down = True  # the API server becomes unreachable: renewals fail
    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(task, 2.0)
    assert changes == [True, False]
    assert asyncio.get_running_loop().time() - started < 0.5 + 0.2


class InvalidPods:
    def __init__(self) -> None:
        self.added: list[str] = []
        self.invalid: list[str] = []

    def on_node_added(self, node: Any) -> None: ...
    def on_node_updated(self, old: Any, new: Any) -> None: ...
    def on_node_deleted(self, node: Any) -> None: ...
    def on_pod_added(self, pod: Any) -> None:
        self.added.append(pod.name)

    def on_pod_updated(self, old: Any, new: Any) -> None: ...
    def on_pod_deleted(self, pod: Any) -> None: ...
    def on_invalid_pod(self, raw: Mapping[str, object], problem: str) -> None:
        self.invalid.append(problem)

    def on_storage_changed(self, kind: EventKind, old: Storage | None, new: Storage | None) -> None:
        pass  # these tests watch pods

    def on_job_minimum_changed(self, job: Any) -> None: ...


async def test_live_cluster_reports_unreadable_pods_of_its_own_once_and_ignores_others() -> None:
    def pod(name: str, scheduler: str, cpu: str, version: str = "1") -> JSON:
        container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
        return {
            "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": version},
            "spec": {"schedulerName": scheduler, "containers": [container]},
        }

    namespace = {"metadata": {"name": "ns", "resourceVersion": "1", "labels": {"team": "ml"}}}
    api = ScriptedApi(
        {
            "/api/v1/namespaces": [namespace],
            PODS: [pod("good", "pysched", "1"), pod("bad", "pysched", "lots"), pod("x", "other", "lots")],
        }
    )
    backend = LiveCluster(api, LiveOptions(scheduler_names=frozenset({"pysched"})))
    listener = InvalidPods()
    await backend.start(listener)
    await api.send(PODS, "MODIFIED", pod("bad", "pysched", "lots", version="2"))  # changed, still unreadable
    assert len(listener.invalid) == 1 and "lots" in listener.invalid[0]
    # Deleted, it is forgotten (a scheduler runs for months); one made again under its name is told.
    await api.send(PODS, "DELETED", pod("bad", "pysched", "lots", version="3"))
    assert backend._invalid == {}
    again = pod("bad", "pysched", "heaps", version="4")
    again["metadata"]["uid"] = "bad-2"
    await api.send(PODS, "ADDED", again)
    await backend.stop()
    assert listener.added == ["good"]
    assert len(listener.invalid) == 2 and "heaps" in listener.invalid[1]
    # Namespaces are listed first, for DeadlineLaxity's deadlineNamespaces selector.
    assert backend.namespace_labels("ns") == {"team": "ml"} and backend.namespace_labels("other") is None


async def test_live_cluster_counts_a_placed_pod_it_can_read_only_without_its_constraints() -> None:
    spread = [
        {"maxSkew": 1, "topologyKey": f"example.com/k{i}", "whenUnsatisfiable": "ScheduleAnyway"} for i in range(17)
    ]
    placed = {
        "metadata": {"name": "x", "namespace": "ns", "uid": "x", "resourceVersion": "1"},
        "spec": {
            "schedulerName": "other",
            "nodeName": "n",
            "topologySpreadConstraints": spread,  # past pysched's bounds, not the API server's
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}],
        },
    }
    api = ScriptedApi({PODS: [placed]})
    backend = LiveCluster(api, LiveOptions(scheduler_names=frozenset({"pysched"})))
    listener = InvalidPods()
    await backend.start(listener)
    await backend.stop()
    assert listener.added == ["x"] and listener.invalid == []
    assert backend.pods["ns/x"].requests["cpu"] == 3000 and backend.pods["ns/x"].spread == ()


async def test_a_pod_that_ended_is_delivered_as_ended_before_it_leaves() -> None:
    class Recorder(InvalidPods):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[tuple[str, str | None]] = []

        def on_pod_updated(self, old: Any, new: Any) -> None:
            self.seen.append(("updated", new.phase))

        def on_pod_deleted(self, pod: Any) -> None:
            self.seen.append(("deleted", pod.phase))

    def pod(phase: str, version: str) -> JSON:
        container = {"name": "c", "resources": {"requests": {"cpu": "1"}}}
        return {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": version},
            "spec": {"schedulerName": "pysched", "nodeName": "n", "containers": [container]},
            "status": {"phase": phase},
        }

    api = ScriptedApi()
    backend = LiveCluster(api)
    listener = Recorder()
    await backend.start(listener)
    await api.send(PODS, "ADDED", pod("Running", "1"))
    # The field selector turns the end into DELETED with the final object: Succeeded comes first.
    await api.send(PODS, "DELETED", pod("Succeeded", "2"))
    assert listener.seen == [("updated", "Succeeded"), ("deleted", "Running")]
    await api.send(PODS, "ADDED", pod("Running", "3"))
    await api.expire(PODS)  # a relist without the pod (410 Gone), which the apiserver no longer has
    await api.send(PODS, "ADDED", pod("Running", "5"))
    api.objects["/api/v1/namespaces/ns/pods/p"] = pod("Failed", "6")
    await api.expire(PODS)  # a relist without the pod, which ended meanwhile: its end is read back
    await backend.stop()
    assert listener.seen[2:] == [("deleted", "Running"), ("deleted", "Running"), ("updated", "Failed")]


def recording_events(api: ScriptedApi) -> tuple[LiveCluster, list[str]]:
    """A backend of the `pysched` profile whose events are kept as "name reason" lines."""
    backend = LiveCluster(api, LiveOptions(scheduler_names=frozenset({"pysched"})))
    posted: list[str] = []

    async def emit(pod: Any, event_type: str, reason: str, note: str) -> None:
        posted.append(f"{pod.name} {reason}")

    backend.emit_event = emit  # type: ignore[method-assign]
    return backend, posted


async def test_a_new_leader_posts_the_missing_scheduled_events_of_running_and_ended_pods() -> None:
    created = format_rfc3339(time.time() - 60)

    def pod(name: str, phase: str, node: str | None = "n") -> JSON:
        spec: JSON = {"schedulerName": "pysched", "containers": [{"name": "c", "resources": {}}]}
        if node is not None:
            spec["nodeName"] = node
        meta = {"name": name, "namespace": "ns", "uid": name, "resourceVersion": "1", "creationTimestamp": created}
        return {"metadata": meta, "spec": spec, "status": {"phase": phase}}

    class Api(ScriptedApi):
        """Answers the list of ended pods (a field selector ScriptedApi does not read) apart."""

        async def request(self, method: str, path: str, **kwargs: Any) -> ApiResponse:
            selector = (kwargs.get("query") or {}).get("fieldSelector", "")
            if path == PODS and "status.phase!=Running" in selector:
                return ApiResponse(200, {"metadata": {}, "items": [pod("done", "Succeeded")]})
            return await super().request(method, path, **kwargs)

    scheduled = {"reason": "Scheduled", "regarding": {"uid": "posted"}}
    api = Api({PODS: [pod("running", "Running"), pod("posted", "Running"), pod("pending", "Pending", None)]})
    api.items["/apis/events.k8s.io/v1/events"] = [scheduled]
    backend, posted = recording_events(api)
    await backend.start(InvalidPods())
    try:
        # "done" finished before this leader took over: the informer (active pods) never held it.
        ended = await backend.take_over(time.time())
    finally:
        await backend.stop()
    assert [p.name for p in ended] == ["done"]
    assert sorted(posted) == ["done Scheduled", "running Scheduled"]


async def test_a_pod_that_ends_while_the_new_leader_lists_the_ended_ones_keeps_its_scheduled_event() -> None:
    created = format_rfc3339(time.time() - 60)

    def pod(phase: str, version: str) -> JSON:
        spec: JSON = {"schedulerName": "pysched", "nodeName": "n", "containers": [{"name": "c", "resources": {}}]}
        meta = {"name": "short", "namespace": "ns", "uid": "short", "resourceVersion": version}
        meta["creationTimestamp"] = created
        return {"metadata": meta, "spec": spec, "status": {"phase": phase}}

    class Api(ScriptedApi):
        """The list of ended pods is served while the pod still runs; the pod ends (and leaves the
        informer) before the answer reaches the new leader."""

        async def request(self, method: str, path: str, **kwargs: Any) -> ApiResponse:
            selector = (kwargs.get("query") or {}).get("fieldSelector", "")
            if path == PODS and "status.phase!=Running" in selector:
                await self.send(PODS, "DELETED", pod("Succeeded", "2"))
                return ApiResponse(200, {"metadata": {}, "items": []})
            return await super().request(method, path, **kwargs)

    api = Api({PODS: [pod("Running", "1")]})
    api.objects["/api/v1/namespaces/ns/pods/short"] = pod("Succeeded", "2")  # as a GET finds it now
    backend, posted = recording_events(api)
    await backend.start(InvalidPods())
    try:
        ended = await backend.take_over(time.time())
        assert not backend.pods  # it did end meanwhile
    finally:
        await backend.stop()
    assert posted == ["short Scheduled"]
    assert [(p.name, p.phase) for p in ended] == [("short", "Succeeded")]  # handed on to be judged


async def test_a_batch_job_that_gave_up_is_known_as_failed() -> None:
    """Its Failed condition says no pod will replace a failed one (Autoscale then judges it)."""

    def job(conditions: list[JSON], version: str) -> JSON:
        meta = {"name": "train", "namespace": "ns", "uid": "j1", "resourceVersion": version}
        return {"metadata": meta, "spec": {"completions": 1}, "status": {"conditions": conditions}}

    jobs = "/apis/batch/v1/jobs"
    api = ScriptedApi({jobs: [job([], "1")]})
    backend = LiveCluster(api)
    await backend.start(InvalidPods())
    ref = JobRef(job_key("ns", JobSource.BATCH, "train"), JobSource.BATCH, "ns", "train")
    assert not backend.job_failed(ref)
    await api.send(jobs, "MODIFIED", job([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}], "2"))
    assert backend.job_failed(ref)
    await api.send(jobs, "DELETED", job([{"type": "Failed", "status": "True"}], "3"))
    await backend.stop()
    assert not backend.job_failed(ref)
