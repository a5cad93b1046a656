"""What the live backend needs of an API connection, without naming the client library.

`pysched.backend.live.cluster` implements `KubeClient` on kubernetes-asyncio; the informers and the
leader election speak only this protocol, so the library stays in one module.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


@dataclass(frozen=True, slots=True)
class ApiResponse:
    """An answer of the API server; status 0 means the request never got an answer."""

    status: int
    body: JSON = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def message(self) -> str:
        text = self.body.get("message")
        return str(text) if text else f"HTTP {self.status}"


class WatchFailed(Exception):
    """A watch could not be opened or broke off (status 0: transport or inactivity)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


class WatchIdle(WatchFailed):
    """A watch sent nothing, not even a bookmark, for its inactivity limit: renewed at once from
    the last version seen, as a quiet resource's watches are (a broken connection then fails to
    reconnect, which is reported)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(0, f"watch broke off: nothing received for {seconds:g} s")


class KubeClient(Protocol):
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
        """One request, through the client's rate limiter unless `rate_limited` is False (events have
        a bucket of their own); never raises for HTTP or transport failures. With `only_if`, the
        request is sent only if it still holds once the rate limiter let it through (a leader's
        writes: it may have lost its Lease while waiting); otherwise the answer is status 0."""
        ...

    def watch(self, path: str, query: Mapping[str, str], inactivity: float) -> AsyncIterator[JSON]:
        """Watch events as dicts; raises WatchFailed when the stream cannot go on."""
        ...

    async def close(self) -> None: ...


class Backoff:
    """Exponential backoff with jitter (client-go's wait.Backoff: 0.8 s doubling to 30 s)."""

    def __init__(self, initial: float = 0.8, cap: float = 30.0) -> None:
        self.initial = initial
        self.cap = cap
        self._next = initial

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(self._next * 2.0, self.cap)
        return delay * random.uniform(1.0, 1.2)  # jitter keeps replicas from retrying in step

    def reset(self) -> None:
        self._next = self.initial
