"""The live client's HTTP session reads the proxy environment only where a proxy is configured:
aiohttp otherwise looks up proxies and ~/.netrc for every request."""

from pathlib import Path

import pytest

from pysched.backend.live.client import PROXY_ENV, connect

KUBECONFIG = (
    "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
    "clusters: [{name: t, cluster: {server: 'http://127.0.0.1:1'}}]\n"
    "users: [{name: t, user: {token: x}}]\n"
    "contexts: [{name: t, context: {cluster: t, user: t}}]\n"
)


async def _trust_env(tmp_path: Path) -> bool:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    client = await connect(str(path), qps=10, burst=10)
    try:
        return bool(client._api.rest_client.pool_manager.trust_env)
    finally:
        await client.close()


async def test_no_proxy_configured_no_environment_lookups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_ENV:
        monkeypatch.delenv(name, raising=False)
    assert await _trust_env(tmp_path) is False


async def test_a_proxy_in_the_environment_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert await _trust_env(tmp_path) is True
