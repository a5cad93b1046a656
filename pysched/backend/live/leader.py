"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

A candidate takes the Lease when it is free or when its record has not changed for
`lease_duration` as seen on the candidate's own clock (clocks of different machines are never
compared). The leader renews every `retry_period`; if no renewal succeeds within `renew_deadline`
it gives up leadership at once, before another candidate may take the Lease (renew_deadline <
lease_duration), so two leaders never write at the same time. Every update carries the
resourceVersion it read, so two candidates cannot both win one round.

Lease requests bypass the client's rate limiter (kube-scheduler gives leader election a client of
its own): a new leader's burst of binds and resizes would otherwise hold its renewals past the
renew deadline, and it would lose the Lease it had just won.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from pysched.api.limits import clip
from pysched.api.times import format_micro_time
from pysched.backend.live.kubeclient import JSON, KubeClient

log = structlog.get_logger("pysched.backend.live.leader")

# The Lease API bounds holderIdentity by nothing but the object's size; coordinated leader election
# makes it a LeaseCandidate's name, which is at most 253 characters.
MAX_IDENTITY_CHARS = 253


def identity_problem(identity: str) -> str | None:
    """Why `identity` cannot name a replica in a Lease, or None. An empty holderIdentity reads as a
    free Lease, so replicas named '' would all lead at once (client-go refuses an empty identity);
    whitespace alone names no one either, and a line break would split the log lines naming it."""
    if not identity.strip():
        return f"must name this replica (an empty holderIdentity is a free Lease), got {clip(identity)}"
    if len(identity) > MAX_IDENTITY_CHARS:
        return f"must be at most {MAX_IDENTITY_CHARS} characters, got {len(identity)}"
    if not identity.isprintable():
        return f"must be printable, without line breaks or control characters, got {clip(identity)}"
    return None


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def problem(self) -> str | None:
        """Why these timings are unsafe, or None (client-go's checks)."""
        if not self.lease_duration > self.renew_deadline:
            return "--lease-duration must be greater than --renew-deadline"
        if not self.renew_deadline > self.retry_period * 1.2:
            return "--renew-deadline must be greater than 1.2 x --retry-period"
        if self.retry_period <= 0:
            return "--retry-period must be positive"
        return None


def _micro_now() -> str:
    return format_micro_time(time.time())


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        config: LeaseConfig,
        on_change: Callable[[bool], None],
        *,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if (problem := identity_problem(config.identity)) is not None:
            raise ValueError(f"identity: {problem}")
        self._client = client
        self.config = config
        self._on_change = on_change
        self._now = now
        self.is_leader = False
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._version = ""
        self._last_renew = -float("inf")  # on this replica's monotonic clock
        self.transitions_seen = 0

    @property
    def _path(self) -> str:
        c = self.config
        return f"/apis/coordination.k8s.io/v1/namespaces/{c.namespace}/leases/{c.name}"

    def _spec(self, acquire: str, transitions: int) -> JSON:
        return {
            "holderIdentity": self.config.identity,
            # Rounded up: standbys wait this long, and the leader writes until its renew deadline.
            "leaseDurationSeconds": max(1, math.ceil(self.config.lease_duration)),
            "acquireTime": acquire,
            "renewTime": _micro_now(),
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        c = self.config
        resp = await self._client.request("GET", self._path, rate_limited=False)
        if resp.status == 404:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": c.name, "namespace": c.namespace},
                "spec": self._spec(_micro_now(), 0),
            }
            created = await self._client.request(
                "POST", f"/apis/coordination.k8s.io/v1/namespaces/{c.namespace}/leases", body=body, rate_limited=False
            )
            if not created.ok and created.status != 409:  # 409: another replica created it first
                log.warning("lease not created", lease=c.name, namespace=c.namespace, error=created.message())
            return created.ok
        if not resp.ok:
            log.warning("lease not readable", lease=c.name, error=resp.message())
            return False
        lease = resp.body
        spec: JSON = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, self._now()
        duration = float(spec.get("leaseDurationSeconds") or c.lease_duration)
        if holder and holder != c.identity and self._now() < self._observed_at + duration:
            return False  # held by someone else and not expired
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == c.identity:
            new_spec = self._spec(str(spec.get("acquireTime") or _micro_now()), transitions)
        else:
            new_spec = self._spec(_micro_now(), transitions + 1)
        body = {**lease, "spec": new_spec}  # carries metadata.resourceVersion: optimistic concurrency
        updated = await self._client.request("PUT", self._path, body=body, rate_limited=False)
        if not updated.ok and updated.status != 409:  # 409: another replica wrote it first
            log.warning("lease not written", lease=c.name, namespace=c.namespace, error=updated.message())
        if updated.ok:
            spec = updated.body.get("spec") or {}
            self._observed = (
                spec.get("holderIdentity"), spec.get("renewTime"),
                spec.get("leaseDurationSeconds"), spec.get("leaseTransitions"),
            )  # fmt: skip
            self._observed_at = self._now()
        return updated.ok

    def fresh(self) -> bool:
        """Leader, and renewed within the renew deadline by this replica's own clock. A leader
        frozen (SIGSTOP, a VM pause) past the deadline may write nothing when it thaws, even before
        its next renewal attempt tells it the Lease is gone: another replica may hold it by now."""
        return self.is_leader and self._now() - self._last_renew < self.config.renew_deadline

    def _set(self, leader: bool) -> None:
        if leader != self.is_leader:
            self.is_leader = leader
            log.info("leadership changed", leader=leader, identity=self.config.identity, lease=self.config.name)
            self._on_change(leader)

    async def run(self, stop: asyncio.Event) -> None:
        """Acquire, then renew until `stop` is set or the lease is lost (then return)."""
        c = self.config
        while not stop.is_set():
            started = self._now()
            if await self._attempt(c.retry_period):
                self._last_renew = started  # the write may have reached the API at any time since
                self._set(True)
                break
            await self._sleep(stop, c.retry_period * random.uniform(1.0, 1.2))
        while not stop.is_set():
            await self._sleep(stop, c.retry_period)
            if stop.is_set():
                return
            remaining = c.renew_deadline - (self._now() - self._last_renew)
            started = self._now()
            if await self._attempt(max(remaining, 0.01)):
                self._last_renew = started
            elif self._now() - self._last_renew >= c.renew_deadline:
                log.error("lease lost", lease=c.name, identity=c.identity)
                self._set(False)
                return

    async def _attempt(self, timeout: float) -> bool:
        try:
            return await asyncio.wait_for(self.try_acquire_or_renew(), timeout)
        except TimeoutError:
            return False

    @staticmethod
    async def _sleep(stop: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)

    async def release(self) -> None:
        """Hand the lease back on a clean shutdown so a follower need not wait for it to expire."""
        if not self.is_leader:
            return
        self._set(False)
        resp = await self._client.request("GET", self._path, rate_limited=False)
        if not resp.ok or (resp.body.get("spec") or {}).get("holderIdentity") != self.config.identity:
            return
        spec = {**resp.body["spec"], "holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": _micro_now()}
        await self._client.request("PUT", self._path, body={**resp.body, "spec": spec}, rate_limited=False)
