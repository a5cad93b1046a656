"""List-then-watch for one resource, as client-go's reflector does it.

The first list fills the listener; the watch then resumes from the list's resourceVersion and
keeps the version of every event and bookmark. A watch that ends cleanly (server timeout) is
reopened from the last version; one that goes silent longer than `inactivity` is treated as
broken (the API server sends bookmarks about every minute). Only 410 Gone (the version was
compacted away) leads to a relist, and a relist is delivered as the difference against what was
known, so the scheduler's cache is updated, never rebuilt.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from pysched.backend.live.kubeclient import JSON, Backoff, KubeClient, WatchFailed, WatchIdle

log = structlog.get_logger("pysched.informer")

Upsert = Callable[[JSON], None]
Delete = Callable[[str, JSON | None], None]


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


class _Gone(Exception):
    pass


class Informer:
    def __init__(
        self,
        client: KubeClient,
        path: str,
        upsert: Upsert,
        delete: Delete,
        *,
        field_selector: str = "",
        page_size: int = 500,
        inactivity: float = 70.0,
        resource: str = "",
    ) -> None:
        self._client = client
        self._path = path
        self._upsert = upsert
        self._delete = delete
        self._selector = field_selector
        self._page_size = page_size
        self._inactivity = inactivity
        self.resource = resource or path
        self.synced = asyncio.Event()
        self.last_error = ""
        self.relists = 0
        self.reconnects = 0
        self._known: dict[str, str] = {}  # key -> resourceVersion last delivered

    def _base_query(self) -> dict[str, str]:
        return {"fieldSelector": self._selector} if self._selector else {}

    async def _list(self) -> str:
        """One complete, paginated list; returns its resourceVersion. Raises WatchFailed."""
        items: list[JSON] = []
        cont = ""
        limit = self._page_size
        while True:
            query = self._base_query()
            if limit:
                query["limit"] = str(limit)
            if cont:
                query["continue"] = cont
            resp = await self._client.request("GET", self._path, query=query)
            if resp.status == 410 and cont:
                items, cont, limit = [], "", 0  # the continue token expired: one unpaginated list
                continue
            if not resp.ok:
                raise WatchFailed(resp.status, resp.message())
            items.extend(resp.body.get("items") or ())
            meta = resp.body.get("metadata") or {}
            cont = str(meta.get("continue") or "")
            if not cont:
                self._deliver_list(items)
                return str(meta.get("resourceVersion") or "")

    def _deliver_list(self, items: list[JSON]) -> None:
        seen: set[str] = set()
        for obj in items:
            key = object_key(obj)
            seen.add(key)
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            if self._known.get(key) != version:
                self._known[key] = version
                self._call(self._upsert, obj)
        for key in [k for k in self._known if k not in seen]:
            del self._known[key]
            self._call_delete(key, None)

    def _call(self, fn: Upsert, obj: JSON) -> None:
        try:
            fn(obj)
        except Exception:  # a bug behind the listener must not stop the informer
            log.exception("informer handler failed", resource=self.resource, key=object_key(obj))

    def _call_delete(self, key: str, obj: JSON | None) -> None:
        try:
            self._delete(key, obj)
        except Exception:
            log.exception("informer handler failed", resource=self.resource, key=key)

    async def _watch(self, version: str) -> str:
        """Follow the watch from `version` until it ends; returns the last version seen."""
        query = self._base_query()
        query.update(
            {
                "watch": "true",
                "allowWatchBookmarks": "true",
                "resourceVersion": version,
                # client-go spreads watch lifetimes over 5-10 minutes so replicas do not reconnect together
                "timeoutSeconds": str(random.randint(300, 600)),
            }
        )
        try:
            async for event in self._client.watch(self._path, query, self._inactivity):
                kind = event.get("type")
                obj: JSON = event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone()
                    raise WatchFailed(int(obj.get("code") or 0), str(obj.get("message") or "watch error"))
                new_version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind in ("ADDED", "MODIFIED"):
                    self._known[object_key(obj)] = new_version
                    self._call(self._upsert, obj)
                elif kind == "DELETED":
                    key = object_key(obj)
                    if self._known.pop(key, None) is not None:
                        self._call_delete(key, obj)
                version = new_version  # BOOKMARK: only the version moves
        except WatchIdle:
            # A quiet resource (no change, no bookmark in time): an ordinary renewal, not a fault.
            log.debug("watch idle, renewing", resource=self.resource, idle_seconds=self._inactivity)
        return version

    async def run(self) -> None:
        version = ""
        backoff = Backoff()
        while True:
            try:
                if not version:
                    version = await self._list()
                    self.synced.set()
                    self.last_error = ""
                    backoff.reset()
                version = await self._watch(version)
                self.reconnects += 1
                backoff.reset()
            except _Gone:
                log.info("watch expired, relisting", resource=self.resource)
                self.relists += 1
                version = ""
            except WatchFailed as err:
                if err.status == 410:
                    self.relists += 1
                    version = ""
                    continue
                self.last_error = str(err)
                delay = backoff.next_delay()
                log.warning("list or watch failed", resource=self.resource, error=str(err), retry_in=round(delay, 2))
                await asyncio.sleep(delay)
