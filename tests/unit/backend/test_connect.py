"""What `connect` and the status commands take from a kubeconfig before any request is sent."""

import asyncio
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pysched.backend.live.client import KubeConfigError, connect
from pysched.cmd.status import context_namespace

CONFIG = """apiVersion: v1
clusters:
- name: c
  cluster: {{server: {server}}}
contexts:
- name: c
  context: {{cluster: c, user: u}}
current-context: c
users:
- name: u
  user: {user}
"""


def _kubeconfig(tmp_path: Path, server: str = '"https://127.0.0.1:6443"', user: str = "{token: x}") -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(CONFIG.format(server=server, user=user))
    return str(path)


def _connect(path: str) -> None:
    async def run() -> None:
        client = await connect(path, qps=1, burst=1)
        await client.close()

    asyncio.run(run())


def test_a_server_that_is_no_url_is_refused_at_once(tmp_path: Path) -> None:
    _connect(_kubeconfig(tmp_path))  # the well-formed one connects (lazily: no request yet)
    for server in (
        '"not a url"',
        '"ftp://host"',
        '"https://"',
        '"https://[::1"',
        '"https://h:99999"',
        '"https://h:abc"',
    ):
        with pytest.raises(KubeConfigError, match="is not an http\\(s\\) URL"):
            _connect(_kubeconfig(tmp_path, server))


def test_a_cluster_without_a_server_is_an_error_that_says_something(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(CONFIG.replace("cluster: {{server: {server}}}", "cluster: {{}}").format(user="{}"))
    with pytest.raises(KubeConfigError, match="kubeconfig: AssertionError: a field the client needs is missing"):
        _connect(str(path))


def test_a_huge_kubeconfig_is_refused_before_the_library_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("# " + "x" * (5 * 1024 * 1024) + "\n")
    with pytest.raises(KubeConfigError, match="more than the limit"):
        _connect(str(path))


def test_an_exec_plugin_that_fails_is_one_error_not_a_log_line_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    user = "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /nonexistent/credential-helper}}"
    with caplog.at_level(logging.DEBUG), pytest.raises(KubeConfigError):
        _connect(_kubeconfig(tmp_path, user=user))
    assert not [r for r in caplog.records if r.name.startswith("kubernetes_asyncio") and r.levelno >= logging.ERROR]


def test_a_context_of_another_type_reads_as_the_default_namespace(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    for context in ("7", "[a]", "{namespace: 7}", "{namespace: team-a}"):
        path.write_text(f"contexts:\n- name: c\n  context: {context}\ncurrent-context: c\n")
        assert context_namespace(str(path), None) == ("team-a" if "team-a" in context else "default")


GOOD = (
    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
    "users: [{name: u, user: {token: x}}]\n"
    "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "holds nothing (a kubeconfig is a mapping of clusters, contexts, users and current-context)"),
        ("# nothing\n", "holds nothing"),
        ("[]\n", "must be a mapping of clusters, contexts, users and current-context, got []"),
        ("7\n", "must be a mapping of clusters, contexts, users and current-context, got 7"),
        ("clusters: 5\n", "clusters: must be a list, got 5"),
        ("contexts: {a: 1}\n", "contexts: must be a list, got {'a': 1}"),
        ("current-context: [x]\n", "current-context: must be a string, got ['x']"),
        ("clusters: [5]\n", "clusters[0]: must be a mapping {name, cluster}, got 5"),
        ("users: [{user: {}}]\n", "users[0].name: must be a string, got None"),
        (GOOD.replace("context: {cluster: c, user: u}", "context: 5"), "contexts[0].context: must be a mapping, got 5"),
        (GOOD.replace("server: 'https://127.0.0.1:1'", "server: [a]"), "clusters[0].cluster.server: must be a string"),
        (GOOD.replace("{token: x}", "{token: x, exec: 5}"), "users[0].user.exec: must be a mapping, got 5"),
        (GOOD.replace("{token: x}", "{exec: {command: c, args: [1]}}"), "user.exec.args: must be a list of strings"),
        (GOOD.replace("{token: x}", "{exec: {command: c, env: [x]}}"), "users[0].user.exec.env[0]: must be a mapping"),
        (GOOD.replace("{server:", "{insecure-skip-tls-verify: 'yes', server:"), "verify: must be true or false"),
    ],
)
def test_a_kubeconfig_of_the_wrong_shape_is_one_line_naming_what_is_wrong(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "kc.yaml"
    path.write_text(text)
    with pytest.raises(KubeConfigError) as info:
        _connect(str(path))
    message = str(info.value)
    assert message.startswith(f"kubeconfig {path}: ") and problem in message and "\n" not in message, message
    path.write_text(GOOD)
    _connect(str(path))


def test_the_kubeconfig_named_is_read_whole_and_its_relative_files_are_found_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As kubectl's --kubeconfig: one file even with ':' in its path (a KUBECONFIG list is split
    there), and a relative certificate-authority is the file next to it, whatever the cwd."""
    if shutil.which("openssl") is None:
        pytest.skip("needs openssl to make a CA certificate")
    folder = tmp_path / "team:a"
    folder.mkdir()
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
         "-keyout", str(folder / "ca.key"), "-out", str(folder / "ca.crt")],
        check=True, capture_output=True,
    )  # fmt: skip
    path = folder / "kubeconfig"
    cluster = '"https://127.0.0.1:6443", certificate-authority: ca.crt'
    path.write_text(CONFIG.format(server=cluster, user="{token: x}"))
    monkeypatch.chdir(tmp_path)

    async def run() -> str:
        client = await connect(str(path), qps=1, burst=1)
        try:
            return str(client._api.configuration.ssl_ca_cert)
        finally:
            await client.close()

    assert asyncio.run(run()) == str(folder / "ca.crt")


def test_a_success_answer_that_is_not_json_is_an_error_not_an_empty_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An auth proxy's sign-in page answered with 200: `pysched status` said "No pysched jobs
    found." and exit 0; kubectl calls such an answer an error, and so does pysched now."""
    import http.server
    import threading

    from pysched.cmd.cli import main

    class SignIn(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><body>Please sign in</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SignIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        kubeconfig = _kubeconfig(tmp_path, server=f'"http://127.0.0.1:{server.server_address[1]}"')
        assert main(["status", "--kubeconfig", kubeconfig, "-n", "default"]) == 2
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert "cannot list pods: the answer (200) is not JSON: <html><body>Please sign in" in err


def test_a_kubeconfig_list_is_merged_as_kubectl_merges_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`KUBECONFIG=a:b` with the cluster and context in one file and the user (a token file named
    relative to its own folder) in the other, and a missing file between them: kubectl merges
    them; `pysched status` read only the first file and refused it."""
    from pysched.backend.live.client import read_kubeconfig
    from pysched.cmd.status import default_kubeconfig

    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "config").write_text(
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u, namespace: team-b}}]\ncurrent-context: c\n"
    )
    (second / "config").write_text(
        "users: [{name: u, user: {tokenFile: token}}, {name: u2, user: {token: x}}]\n"
        "contexts: [{name: c, context: {cluster: other, user: u2}}]\ncurrent-context: other\n"
    )
    (second / "token").write_text("secret")
    files = [str(first / "config"), str(tmp_path / "missing"), str(second / "config")]
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(files))
    found = default_kubeconfig()
    assert found == (files[0], files[2])
    merged = read_kubeconfig(found)
    assert merged["current-context"] == "c"  # the first file to set it
    assert [c["context"]["cluster"] for c in merged["contexts"]] == ["c"]  # the first to name it
    assert merged["users"][0]["user"]["tokenFile"] == str(second / "token")  # beside its own file
    assert context_namespace(found, None) == "team-b"

    async def token() -> str:
        client = await connect(found, qps=1, burst=1)
        try:
            return str(client._api.configuration.api_key.get("BearerToken") or client._api.configuration.api_key)
        finally:
            await client.close()

    assert "secret" in asyncio.run(token())
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert default_kubeconfig() == (str(tmp_path / "missing"),)  # none there: the first is told missing
