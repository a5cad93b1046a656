"""The connection to kube-apiserver: the only module that imports the Kubernetes client library.

It uses only kubernetes-asyncio's configuration loading, authentication and HTTP session: every
request goes out with `_preload_content=False` and the JSON is parsed here, so no generated model
sits on the hot path (and `pods/binding`, which answers with a Status where the model expects a
Binding, is read as HTTP 201). Requests share one client-side token bucket (QPS/burst, as
client-go's).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from pysched.api.inputs import InputError, load_yaml, path_text
from pysched.api.limits import clip
from pysched.backend.live.kubeclient import JSON, ApiResponse, WatchFailed, WatchIdle
from pysched.backend.live.ratelimit import TokenBucket


class KubeConfigError(ValueError):
    """The kubeconfig (or in-cluster config) cannot be used; the message is one line."""


# The fields of a kubeconfig (client-go's clientcmd v1 types) the client library reads, by type:
# a value of another type would fail inside the library with a message about Python objects.
# Other keys (extensions, preferences, newer fields) are left alone, as kubectl leaves them.
_NAMED_LISTS = {"clusters": "cluster", "contexts": "context", "users": "user"}
_FIELDS: dict[str, dict[str, type]] = {
    "": {"clusters": list, "contexts": list, "users": list, "current-context": str},
    "cluster": {
        "server": str,
        "certificate-authority": str,
        "certificate-authority-data": str,
        "insecure-skip-tls-verify": bool,
        "tls-server-name": str,
        "proxy-url": str,
    },
    "context": {"cluster": str, "user": str, "namespace": str},
    "user": {
        "token": str,
        "tokenFile": str,
        "client-certificate": str,
        "client-certificate-data": str,
        "client-key": str,
        "client-key-data": str,
        "username": str,
        "password": str,
        "exec": dict,
        "auth-provider": dict,
    },
    "exec": {"command": str, "apiVersion": str, "args": list, "env": list},
}
_TYPE_WORDS = {str: "a string", bool: "true or false", list: "a list", dict: "a mapping"}


def _kubeconfig_problem(config: Any) -> str | None:
    """The first thing in a loaded kubeconfig whose shape the client cannot use, or None."""
    return next(_shape_problems(config), None)


def _shape_problems(config: Any) -> Iterator[str]:
    if not isinstance(config, dict):
        whole = "a mapping of clusters, contexts, users and current-context"
        yield f"holds nothing (a kubeconfig is {whole})" if config is None else f"must be {whole}, got {clip(config)}"
        return
    yield from _field_problems(config, "", "")
    for key, inner in _NAMED_LISTS.items():
        entries = config.get(key)
        for i, entry in enumerate(entries if isinstance(entries, list) else ()):
            at = f"{key}[{i}]"
            if not isinstance(entry, dict):
                yield f"{at}: must be a mapping {{name, {inner}}}, got {clip(entry)}"
                continue
            if not isinstance(entry.get("name"), str):
                yield f"{at}.name: must be a string, got {clip(entry.get('name'))}"
            body = entry.get(inner)
            if body is None:  # the library names a missing section itself
                continue
            if not isinstance(body, dict):
                yield f"{at}.{inner}: must be a mapping, got {clip(body)}"
                continue
            yield from _field_problems(body, inner, f"{at}.{inner}.")
            if isinstance(body.get("exec"), dict):
                yield from _exec_problems(body["exec"], f"{at}.{inner}.exec.")


def _field_problems(node: dict[Any, Any], kind: str, at: str) -> Iterator[str]:
    for key, wanted in _FIELDS[kind].items():
        value = node.get(key)
        if value is not None and not isinstance(value, wanted):  # null is absent, as client-go reads it
            yield f"{at}{key}: must be {_TYPE_WORDS[wanted]}, got {clip(value)}"


def _exec_problems(node: dict[Any, Any], at: str) -> Iterator[str]:
    yield from _field_problems(node, "exec", at)
    if any(not isinstance(arg, str) for arg in node.get("args") or ()):
        yield f"{at}args: must be a list of strings, got {clip(node['args'])}"
    for i, var in enumerate(node.get("env") or ()):
        if not (isinstance(var, dict) and isinstance(var.get("name"), str) and isinstance(var.get("value"), str)):
            yield f"{at}env[{i}]: must be a mapping {{name, value}} of two strings, got {clip(var)}"


# The file names a kubeconfig's entries may give, relative to the kubeconfig (client-go's
# ResolveLocalPaths), by list.
_LOCAL_FILES = {"clusters": ("certificate-authority",), "users": ("client-certificate", "client-key", "tokenFile")}


def read_kubeconfig(paths: str | Sequence[str]) -> Any:
    """One kubeconfig file as read (bounded), or a `KUBECONFIG` list merged as client-go merges it:
    the first file to name a cluster, user or context (or to set current-context) wins, empty
    files are skipped, and each file's relative file names are made absolute from its folder.
    KubeConfigError names the file whose shape the client cannot use; InputError one that cannot
    be read."""
    if isinstance(paths, str):
        paths = (paths,)
    if len(paths) == 1:
        return load_yaml(paths[0])
    merged: dict[str, Any] = {"clusters": [], "contexts": [], "users": []}
    for path in paths:
        config = load_yaml(path)
        if config is None:
            continue
        problem = _kubeconfig_problem(config)
        if problem is not None:
            raise KubeConfigError(f"kubeconfig {path_text(path)}: {problem}")
        if not merged.get("current-context") and config.get("current-context"):
            merged["current-context"] = config["current-context"]
        folder = os.path.dirname(os.path.abspath(path))
        for key, inner in _NAMED_LISTS.items():
            taken = {entry["name"] for entry in merged[key]}
            for entry in config.get(key) or ():
                if entry["name"] in taken:
                    continue
                taken.add(entry["name"])
                body = dict(entry.get(inner) or {})
                for field in _LOCAL_FILES.get(key, ()):
                    named = body.get(field)
                    if isinstance(named, str) and named and not os.path.isabs(os.path.expanduser(named)):
                        body[field] = os.path.join(folder, named)
                merged[key].append({**entry, inner: body})
    return merged


class AsyncKubeClient:
    """Plain JSON over kubernetes-asyncio's configured ApiClient (auth, TLS, token refresh)."""

    def __init__(self, api: Any, bucket: TokenBucket, request_timeout: float = 30.0) -> None:
        self._api = api
        self._bucket = bucket
        self._timeout = request_timeout
        self.calls: collections.Counter[tuple[str, int]] = collections.Counter()
        self._transport_error = ""  # the last request's transport failure; "" once anything answers

    def unreachable(self) -> str | None:
        """Why the API server is unreachable (the last request got no answer), None when it answers."""
        return self._transport_error or None

    async def _send(
        self, method: str, path: str, query: Mapping[str, str] | None, body: Any, content_type: str, timeout: Any
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        return await self._api.call_api(
            path,
            method,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )

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
        """`rate_limited=False` is for events, which have their own bucket (as kube-scheduler's
        separate event client has), so a burst of events never delays binds."""
        if rate_limited:
            await self._bucket.acquire()
        if only_if is not None and not only_if():
            return ApiResponse(0, {"message": "not sent: this replica may no longer write"})
        try:
            resp = await self._send(method, path, query, body, content_type, self._timeout)
            try:
                raw = await resp.read()
            finally:
                resp.release()
        except (aiohttp.ClientError, TimeoutError, OSError, k8s_client.ApiException) as err:
            self.calls[(method, 0)] += 1
            self._transport_error = f"{type(err).__name__}: {err}"
            return ApiResponse(0, {"message": self._transport_error})
        self.calls[(method, resp.status)] += 1
        self._transport_error = ""
        try:
            decoded = json.loads(raw) if raw else {}
        except ValueError:
            snippet = raw[:300].decode("utf-8", "replace")
            if 200 <= resp.status < 300:  # a proxy's sign-in page, say: no answer of the API's (never "no items")
                self._transport_error = f"the answer ({resp.status}) is not JSON: {snippet}"
                return ApiResponse(0, {"message": self._transport_error})
            decoded = {"message": snippet}
        return ApiResponse(resp.status, decoded if isinstance(decoded, dict) else {"items": decoded})

    async def watch(self, path: str, query: Mapping[str, str], inactivity: float) -> AsyncIterator[JSON]:
        await self._bucket.acquire()
        # sock_read is the inactivity watchdog: a stream silent for that long is broken
        timeout = aiohttp.ClientTimeout(connect=10.0, sock_connect=10.0, sock_read=inactivity)
        try:
            resp = await self._send("GET", path, query, None, "application/json", timeout)
        except (aiohttp.ClientError, TimeoutError, OSError, k8s_client.ApiException) as err:
            self._transport_error = f"{type(err).__name__}: {err}"
            raise WatchFailed(0, self._transport_error) from err
        self._transport_error = ""
        try:
            if resp.status != 200:
                body = (await resp.read()).decode("utf-8", "replace")
                try:
                    message = str(json.loads(body).get("message", body))
                except (ValueError, AttributeError):
                    message = body[:300]
                raise WatchFailed(resp.status, message)
            buffer = b""
            # chunks, not readline(): objects over aiohttp's line limit (2 MiB) must not break the watch
            async for chunk in resp.content.iter_any():
                buffer += chunk
                while True:
                    end = buffer.find(b"\n")
                    if end < 0:
                        break
                    line, buffer = buffer[:end], buffer[end + 1 :]
                    if line.strip():
                        yield json.loads(line)
        except TimeoutError as err:  # sock_read: the inactivity watchdog fired
            raise WatchIdle(inactivity) from err
        except (aiohttp.ClientError, OSError, ValueError) as err:
            raise WatchFailed(0, f"watch broke off: {type(err).__name__}: {err}") from err
        finally:
            resp.release()

    async def close(self) -> None:
        await self._api.close()


async def connect(
    kubeconfig: str | Sequence[str] | None,
    *,
    qps: float,
    burst: int,
    context: str | None = None,
    pool_size: int = 128,
) -> AsyncKubeClient:
    """A client from a kubeconfig file (or a `KUBECONFIG` list of them, merged), or the in-cluster
    service account when none is given."""
    paths = (kubeconfig,) if isinstance(kubeconfig, str) else tuple(kubeconfig or ())
    configuration = k8s_client.Configuration()
    # The loader logs an exec plugin's failure before raising it: while loading, the caller's one
    # line says it (later refreshes still log).
    loader_log = logging.getLogger("kubernetes_asyncio.config")
    level = loader_log.level
    loader_log.setLevel(logging.CRITICAL)
    where = f"kubeconfig {', '.join(path_text(p) for p in paths)}" if paths else "in-cluster config"
    try:
        if paths:
            # Bounded first (size, nesting), and its shape checked: the library reads any file whole
            # and fails on a list or a number where it expects a mapping with Python's own words.
            loaded = read_kubeconfig(paths)
            problem = _kubeconfig_problem(loaded)
            if problem is not None:
                raise KubeConfigError(f"{where}: {problem}")
            # Read here, not by the library's own loader: it splits a path at ':' and would read
            # another file, or none.
            base = os.path.dirname(os.path.abspath(paths[0]))  # where the first file's relative paths start
            loader = k8s_config.kube_config.KubeConfigLoader(loaded, active_context=context, config_base_path=base)
            await loader.load_and_set(configuration)
        else:
            incluster: Any = k8s_config.load_incluster_config  # untyped in the library
            incluster(client_configuration=configuration)
    except KubeConfigError:
        raise
    except InputError as err:
        raise KubeConfigError(f"kubeconfig {err}") from err
    except (k8s_config.ConfigException, OSError, ValueError, TypeError, KeyError) as err:
        message = " ".join(str(err).split()) or type(err).__name__
        raise KubeConfigError(f"{where}: {message}") from err
    except Exception as err:  # YAML errors and friends from the loader; it asserts fields it needs
        message = " ".join(str(err).split()) or f"{type(err).__name__}: a field the client needs is missing"
        raise KubeConfigError(f"{where}: {message}") from err
    finally:
        loader_log.setLevel(level)
    shown = clip(str(configuration.host or ""))
    try:
        server = urllib.parse.urlsplit(str(configuration.host or ""))
        server.port  # noqa: B018 -- reading it checks it: a port out of range or not a number raises
    except ValueError:
        raise KubeConfigError(f"{where}: the server {shown} is not an http(s) URL") from None
    if server.scheme not in ("http", "https") or not server.hostname:
        raise KubeConfigError(f"{where}: the server {shown} is not an http(s) URL")
    configuration.connection_pool_maxsize = pool_size
    return AsyncKubeClient(k8s_client.ApiClient(configuration), TokenBucket(qps, burst))
