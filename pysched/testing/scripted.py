"""A scripted `KubeClient` for unit tests of the live backend's handling of what the API sends.

It stands in for the connection, not for the API server: the test says what each list holds and
which watch events arrive, and the backend's informers take them as they take the real ones. The
real apiserver is exercised by the integration tests.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from pysched.backend.live.kubeclient import JSON, ApiResponse

_ONE_OBJECT = re.compile(r"/namespaces/[^/]+/[^/]+/[^/]+$")


class ScriptedApi:
    """Lists answer `items[path]` (nothing by default); each watch streams the events the test
    sends; a GET of one object answers `objects[path]`, else 404; writes answer 404."""

    def __init__(self, items: Mapping[str, list[JSON]] | None = None) -> None:
        self.items: dict[str, list[JSON]] = {path: list(objs) for path, objs in (items or {}).items()}
        self.objects: dict[str, JSON] = {}
        self.requests: list[tuple[str, str]] = []
        self._streams: dict[str, asyncio.Queue[JSON]] = {}
        self._watching: dict[str, asyncio.Event] = {}

    def _stream(self, path: str) -> asyncio.Queue[JSON]:
        return self._streams.setdefault(path, asyncio.Queue())

    def _watch_opened(self, path: str) -> asyncio.Event:
        return self._watching.setdefault(path, asyncio.Event())

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        rate_limited: bool = True,
    ) -> ApiResponse:
        self.requests.append((method, path))
        if method != "GET":
            return ApiResponse(404, {"message": "not scripted"})
        if _ONE_OBJECT.search(path):
            found = self.objects.get(path)
            return ApiResponse(200, found) if found is not None else ApiResponse(404, {"message": "not found"})
        return ApiResponse(200, {"metadata": {"resourceVersion": "1"}, "items": list(self.items.get(path, []))})

    async def watch(self, path: str, query: Mapping[str, str], inactivity: float) -> AsyncIterator[JSON]:
        stream = self._stream(path)
        self._watch_opened(path).set()
        while True:
            event = await stream.get()
            if event.get("type") == "ERROR":  # the informer gives up this watch at once
                stream.task_done()
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
        Returns once it has delivered the new list and watches again."""
        opened = self._watch_opened(path)
        opened.clear()
        await self._stream(path).put({"type": "ERROR", "object": {"code": 410, "message": "too old"}})
        await opened.wait()
