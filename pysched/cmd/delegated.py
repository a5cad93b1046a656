"""Delegated authentication and authorization of the secure port, as kube-scheduler's.

The bearer token of a request is sent to the API server in a TokenReview (authentication.k8s.io/v1);
the user it names is then checked with a SubjectAccessReview (authorization.k8s.io/v1) for `get` on
the non-resource path. Answers, yes and no alike, are kept for `ttl` seconds (10 s, kube's default
for both) in caches of bounded size, keyed by the token's SHA-256 rather than the token. Failures
to reach the API are not cached: an authentication failure answers 401, an authorization failure
500, as kube's filters do. Reviews go out past the client's shared rate limit, through a bucket of
their own, so that a flood of made-up tokens cannot delay binds; while `MAX_WAITING_REVIEWS` wait
for it, a request whose answer is not cached is answered 429.

Nothing here logs a token or an Authorization header: a TokenReview's answer echoes the token in
its spec, so only its status is read.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from cachetools import TTLCache

from pysched.backend.live.kubeclient import KubeClient
from pysched.backend.live.ratelimit import TokenBucket

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CACHE_TTL = 10.0
CACHE_SIZE = 1024
REVIEW_QPS = 10.0
REVIEW_BURST = 20
# Reviews waiting for the bucket at most: past it a request is answered 429 at once, so that a
# flood of made-up tokens cannot hold a real scrape behind it for minutes (4 s of reviews here).
MAX_WAITING_REVIEWS = 2 * REVIEW_BURST

log = structlog.get_logger("pysched.cmd.delegated")


@dataclass(frozen=True, slots=True)
class User:
    """Who a TokenReview says the token's bearer is."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer to one request: 200 (allowed), 401, 403 or 500; `reason` is safe to log and show."""

    status: int
    reason: str
    user: str | None = None

    @property
    def allowed(self) -> bool:
        return self.status == 200


class Authorizer(Protocol):
    async def verdict(self, authorization: str | None, path: str, verb: str = "get") -> Verdict: ...


class ReviewFailed(Exception):
    """The API server did not answer a review (the message names the status, never the token)."""


class TooManyReviews(Exception):
    """Too many reviews wait already: this request is not queued behind them."""


def bearer_token(authorization: str | None) -> str | None:
    """The token of `Authorization: Bearer TOKEN` (the scheme in any case); None otherwise."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token and " " not in token else None


class DelegatedAuth:
    def __init__(
        self,
        client: KubeClient,
        *,
        ttl: float = CACHE_TTL,
        size: int = CACHE_SIZE,
        qps: float = REVIEW_QPS,
        burst: int = REVIEW_BURST,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._bucket = TokenBucket(qps, burst, now=timer)
        self._waiting = 0
        self._users: TTLCache[bytes, User | None] = TTLCache(size, ttl, timer=timer)
        self._decisions: TTLCache[tuple[User, str, str], bool] = TTLCache(size, ttl, timer=timer)

    async def verdict(self, authorization: str | None, path: str, verb: str = "get") -> Verdict:
        token = bearer_token(authorization)
        if token is None:
            return Verdict(401, "no token")
        try:
            user = await self.authenticate(token)
        except TooManyReviews:
            return Verdict(429, "too many token reviews under way: retry later")
        except ReviewFailed as err:
            log.warning("token review failed", error=str(err))
            return Verdict(401, "the token could not be reviewed")
        if user is None:
            return Verdict(401, "the token is not valid")
        try:
            allowed = await self.authorize(user, path, verb)
        except TooManyReviews:
            return Verdict(429, "too many access reviews under way: retry later", user.name)
        except ReviewFailed as err:
            log.warning("access review failed", user=user.name, error=str(err))
            return Verdict(500, "the access review failed", user.name)
        if not allowed:
            return Verdict(403, f'user "{user.name}" may not {verb} {path}', user.name)
        return Verdict(200, "allowed", user.name)

    async def authenticate(self, token: str) -> User | None:
        """The token's user, None when the API server says it is not valid."""
        key = hashlib.sha256(token.encode()).digest()
        if key in self._users:
            return self._users[key]
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        status = await self._review(TOKEN_REVIEWS, review)
        user = _user(status.get("user")) if status.get("authenticated") is True else None
        self._users[key] = user
        return user

    async def authorize(self, user: User, path: str, verb: str) -> bool:
        key = (user, path, verb)
        if key in self._decisions:
            return self._decisions[key]
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "extra": {name: list(values) for name, values in user.extra},
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        allowed = (await self._review(ACCESS_REVIEWS, review)).get("allowed") is True
        self._decisions[key] = allowed
        return allowed

    async def _review(self, path: str, review: dict[str, Any]) -> Mapping[str, Any]:
        if self._waiting >= MAX_WAITING_REVIEWS:
            raise TooManyReviews
        self._waiting += 1
        try:
            await self._bucket.acquire()
        finally:
            self._waiting -= 1
        answer = await self._client.request("POST", path, body=review, rate_limited=False)
        if not answer.ok:
            raise ReviewFailed(f"POST {path}: {answer.message()}")
        status = answer.body.get("status")
        return status if isinstance(status, dict) else {}


def _user(raw: object) -> User | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("username"), str) or not raw["username"]:
        return None
    extra = raw.get("extra")
    pairs = extra.items() if isinstance(extra, dict) else ()
    return User(
        raw["username"],
        str(raw.get("uid") or ""),
        tuple(str(g) for g in raw.get("groups") or ()),
        tuple(sorted((str(k), tuple(str(v) for v in vs or ())) for k, vs in pairs)),
    )
