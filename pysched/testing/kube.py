"""A thin JSON layer over the synchronous ``kubernetes`` client, for test tooling.

The generated typed methods of the ``kubernetes`` package validate bodies and
responses against its models (and, for example, expect a ``Binding`` back from
``pods/binding`` where the API answers with a ``Status``). Test tooling wants the
raw objects the apiserver stores, so this wrapper reuses the client's
configuration and TLS-configured urllib3 pool (``ApiClient.rest_client``) and
speaks plain JSON. ``KubeAPI.api_client`` is a configured ``ApiClient`` for the typed API.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import urllib3
from kubernetes import client as k8s_client

from pysched.api.inputs import load_yaml
from pysched.backend.live.kubeclient import STRATEGIC_MERGE_PATCH

JSON = dict[str, Any]
T = TypeVar("T")


class KubeAPIError(RuntimeError):
    """A non-2xx answer from the apiserver."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.body = body
        reason = body
        try:
            decoded = json.loads(body)
            if isinstance(decoded, dict) and "message" in decoded:
                reason = str(decoded["message"])
        except ValueError:
            pass
        super().__init__(f"{method} {path} -> HTTP {status}: {reason[:500]}")


class KubeAPI:
    """Plain-JSON access to one apiserver, authenticated with a bearer token."""

    def __init__(
        self,
        server: str,
        token: str,
        *,
        ca_file: Path | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.ca_file = ca_file
        self.timeout = timeout
        config = k8s_client.Configuration(host=self.server)
        if ca_file is not None:
            config.ssl_ca_cert = str(ca_file)
            config.verify_ssl = True
        else:
            config.verify_ssl = False
        self._config = config
        self.api_client: Any = k8s_client.ApiClient(configuration=config)
        self._pool: Any = self.api_client.rest_client.pool_manager

    @classmethod
    def from_kubeconfig(cls, path: Path) -> KubeAPI:
        """Read a kubeconfig written by :class:`LocalControlPlane` (JSON or YAML)."""
        data = load_yaml(path)  # JSON is YAML too; bounded like every file pysched reads
        ctx_name = data["current-context"]
        ctx = next(c["context"] for c in data["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in data["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in data["users"] if u["name"] == ctx["user"])
        ca = cluster.get("certificate-authority")
        return cls(cluster["server"], user["token"], ca_file=Path(ca) if ca else None)

    def close(self) -> None:
        self.api_client.close()

    def __enter__(self) -> KubeAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- raw requests -------------------------------------------------------------------

    def _url(self, path: str, query: Mapping[str, Any] | None) -> str:
        url = self.server + path
        if query:
            items = {k: str(v).lower() if isinstance(v, bool) else v for k, v in query.items()}
            url += "?" + urlencode(items)
        return url

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    def _send(
        self,
        method: str,
        url: str,
        body: Any,
        content_type: str | None,
        timeout: float | tuple[float, float],
        *,
        preload: bool,
    ) -> Any:
        """One HTTP request on the client's urllib3 pool (its TLS settings, our JSON).

        Goes below ``ApiClient.call_api``, whose signature changed across client
        releases, to the ``rest_client.pool_manager`` that all of them have.
        """
        headers = self._headers(content_type if body is not None else None)
        data = None if body is None else json.dumps(body).encode()
        if isinstance(timeout, tuple):
            t = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        else:
            t = urllib3.Timeout(total=timeout)
        return self._pool.request(
            method,
            url,
            body=data,
            headers=headers,
            timeout=t,
            preload_content=preload,
            retries=False,
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, Any] | None = None,
        content_type: str | None = "application/json",
        timeout: float | None = None,
    ) -> JSON:
        """Send one request and return the decoded JSON answer (raise on non-2xx)."""
        resp = self._send(
            method,
            self._url(path, query),
            body,
            content_type,
            timeout if timeout is not None else self.timeout,
            preload=True,
        )
        raw = resp.data
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")
        if not 200 <= resp.status < 300:
            raise KubeAPIError(method, path, resp.status, text)
        if not text:
            return {}
        decoded = json.loads(text)
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    def get(self, path: str, **query: Any) -> JSON:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: JSON, **query: Any) -> JSON:
        return self.request("POST", path, body, query=query)

    def put(self, path: str, body: JSON, **query: Any) -> JSON:
        return self.request("PUT", path, body, query=query)

    def patch(self, path: str, body: Any, *, content_type: str = STRATEGIC_MERGE_PATCH, **query: Any) -> JSON:
        return self.request("PATCH", path, body, query=query, content_type=content_type)

    def delete(self, path: str, body: JSON | None = None, **query: Any) -> JSON:
        return self.request("DELETE", path, body, query=query)

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
        except KubeAPIError as err:
            if err.status == 404:
                return False
            raise
        return True

    def watch(
        self,
        path: str,
        *,
        resource_version: str | None = None,
        timeout_seconds: int = 60,
        on_response: Callable[[Any], None] | None = None,
        **query: Any,
    ) -> Iterator[JSON]:
        """Stream watch events (``{"type": ..., "object": ...}``) until the server closes.

        ``on_response`` receives the underlying urllib3 response so a caller on
        another thread can close it to stop the watch early.
        """
        q: dict[str, Any] = dict(query)
        q["watch"] = "true"
        q["allowWatchBookmarks"] = "true"
        q["timeoutSeconds"] = timeout_seconds
        if resource_version:
            q["resourceVersion"] = resource_version
        resp = self._send(
            "GET",
            self._url(path, q),
            None,
            None,
            (10.0, float(timeout_seconds) + 15.0),
            preload=False,
        )
        if on_response is not None:
            on_response(resp)
        try:
            if resp.status != 200:
                raise KubeAPIError("GET", path, resp.status, resp.read().decode("utf-8", "replace"))
            buf = b""
            for chunk in resp.stream(65536, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            resp.release_conn()

    # -- conveniences -------------------------------------------------------------------

    def pod_path(self, namespace: str, name: str, sub: str | None = None) -> str:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
        return f"{path}/{sub}" if sub else path

    def get_pod(self, namespace: str, name: str) -> JSON:
        return self.get(self.pod_path(namespace, name))

    def create_pod(self, namespace: str, pod: JSON) -> JSON:
        return self.post(f"/api/v1/namespaces/{quote(namespace)}/pods", pod)

    def bind_pod(self, namespace: str, name: str, node: str, uid: str | None = None) -> JSON:
        """POST ``pods/{name}/binding``; the API answers with a ``Status``."""
        meta: JSON = {"name": name, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        return self.post(self.pod_path(namespace, name, "binding"), body)

    def resize_pod(
        self,
        namespace: str,
        name: str,
        containers: Mapping[str, Mapping[str, Mapping[str, str]]],
    ) -> JSON:
        """PATCH ``pods/{name}/resize``: ``containers`` maps a container name to its
        ``resources`` (``{"requests": {...}, "limits": {...}}``)."""
        body = {"spec": {"containers": [{"name": cname, "resources": dict(res)} for cname, res in containers.items()]}}
        return self.patch(self.pod_path(namespace, name, "resize"), body)

    def force_delete_pod(self, namespace: str, name: str) -> None:
        try:
            self.delete(
                self.pod_path(namespace, name),
                {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
            )
        except KubeAPIError as err:
            if err.status != 404:
                raise


def wait_for(
    fetch: Callable[[], T],
    predicate: Callable[[T], bool],
    *,
    timeout: float = 30.0,
    interval: float = 0.1,
    what: str = "condition",
) -> T:
    """Poll ``fetch()`` until ``predicate`` holds; raise ``TimeoutError`` with the last value."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = fetch()
        if predicate(last):
            return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
        time.sleep(interval)
