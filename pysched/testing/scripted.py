"""A scripted `KubeClient` for unit tests of the live backend's handling of what the API sends.

It stands in for the connection, not for the API server: the test says what each list holds and
which watch events arrive, and the backend's informers take them as they take the real ones. The
real apiserver is exercised by the integration tests.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from pysched.backend.live.kubeclient import JSON, ApiResponse

_API_ROOT = re.compile(r"^/(?:api/v1|apis/[^/]+/[^/]+)(/.*)?$")


def is_collection(path: str) -> bool:
    """`/api/v1/nodes`, `/api/v1/namespaces/NS/pods`, `/apis/batch/v1/jobs`: a list, not one object
    (`/api/v1/nodes/N`) nor a subresource (`.../pods/P/status`)."""
    found = _API_ROOT.match(path)
    segments = [s for s in (found.group(1) or "").split("/") if s] if found else []
    return len(segments) == 1 or (len(segments) == 3 and segments[0] == "namespaces")


class ScriptedApi:
    """Lists answer `items[path]` (nothing by default); each watch streams the events the test
    sends; a GET of one object answers `objects[path]`, else 404; a write answers
    `answers[(method, path)]`, else 404, and is kept in `writes` with its body and content type."""

    def __init__(self, items: Mapping[str, list[JSON]] | None = None) -> None:
        self.items: dict[str, list[JSON]] = {path: list(objs) for path, objs in (items or {}).items()}
        self.objects: dict[str, JSON] = {}
        self.requests: list[tuple[str, str]] = []
        self.answers: dict[tuple[str, str], ApiResponse] = {}
        self.writes: list[tuple[str, str, Any, str]] = []  # method, path, body, content type
        self._streams: dict[str, asyncio.Queue[JSON]] = {}
        self._opened: dict[str, int] = {}  # watches opened per path
        self._expired: dict[str, int] = {}  # watches opened per path when the last 410 was taken
        self._changed = asyncio.Condition()

    def _stream(self, path: str) -> asyncio.Queue[JSON]:
        return self._streams.setdefault(path, asyncio.Queue())

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
        if only_if is not None and not only_if():
            return ApiResponse(0)  # as the client: the condition no longer held, nothing was sent
        self.requests.append((method, path))
        if method != "GET":
            self.writes.append((method, path, body, content_type))
            return self.answers.get((method, path), ApiResponse(404, {"message": "not scripted"}))
        if is_collection(path):
            return ApiResponse(200, {"metadata": {"resourceVersion": "1"}, "items": list(self.items.get(path, []))})
        found = self.objects.get(path)
        return ApiResponse(200, found) if found is not None else ApiResponse(404, {"message": "not found"})

    async def _note(self, counter: dict[str, int], path: str, value: int) -> None:
        async with self._changed:
            counter[path] = value
            self._changed.notify_all()

    async def watch(self, path: str, query: Mapping[str, str], inactivity: float) -> AsyncIterator[JSON]:
        stream = self._stream(path)
        await self._note(self._opened, path, self._opened.get(path, 0) + 1)
        while True:
            event = await stream.get()
            if event.get("type") == "ERROR":  # the informer gives up this watch at once
                stream.task_done()
                await self._note(self._expired, path, self._opened[path])
                yield event
                return
            try:
                yield event
            finally:
                stream.task_done()  # the informer asks for the next event: this one is handled

    async def close(self) -> None:
        pass

    async def send(self, path: str, kind: str, obj: JSON) -> None:
        """One watch event on `path`; returns once the informer has handled it."""
        stream = self._stream(path)
        await stream.put({"type": kind, "object": obj})
        await stream.join()

    async def expire(self, path: str) -> None:
        """The watch's version was compacted away (410 Gone): the informer lists `path` again.
        Returns once the 410 was taken and a later watch is open, so the new list is delivered."""
        taken = self._expired.get(path, -1)
        await self._stream(path).put({"type": "ERROR", "object": {"code": 410, "message": "too old"}})
        async with self._changed:
            await self._changed.wait_for(
                lambda: self._expired.get(path, -1) != taken and self._opened.get(path, 0) > self._expired.get(path, 0)
            )
