"""pysched_progress's own parts: the stdlib transport's credentials, the request-only CPU count,
the one-line rate-limited warning, and its progress stamp matching pysched's."""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pysched_progress
from pysched.api.annotations import format_progress as pysched_format
from pysched_progress import ApiCredentials, PodRef, Reporter, format_progress, granted_cpus

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@given(st.integers(0, 10**16 - 1), st.floats(0, 253402300799, allow_nan=False))
def test_the_stamp_is_the_one_pysched_reads(steps: int, when: float) -> None:
    assert format_progress(steps, when) == pysched_format(steps, when)


def _config(user: Mapping[str, object], cluster: Mapping[str, object] | None = None) -> dict[str, object]:
    return {
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": {"server": "https://10.0.0.1:6443", **(cluster or {})}}],
        "users": [{"name": "u", "user": dict(user)}],
    }


def test_kubeconfig_credentials_token_or_client_certificate(caplog: pytest.LogCaptureFixture) -> None:
    data = base64.b64encode(PEM.encode()).decode()
    token = ApiCredentials.from_kubeconfig(_config({"token": "abc"}, {"certificate-authority-data": data}))
    assert (token.server, token.token(), token.ca_pem, token.client_cert) == ("https://10.0.0.1:6443", "abc", PEM, None)
    cert = ApiCredentials.from_kubeconfig(
        _config({"client-certificate-data": data, "client-key-data": data}, {"insecure-skip-tls-verify": True})
    )
    assert cert.insecure and cert.token() is None and cert.client_cert is not None
    for path in cert.client_cert:
        assert Path(path).read_text() == PEM and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with caplog.at_level(logging.WARNING, logger="pysched_progress"):
        ApiCredentials.from_kubeconfig(_config({"exec": {"command": "aws"}}))
    assert "credential plugin" in caplog.text
    with pytest.raises(ValueError, match="no cluster server"):
        ApiCredentials.from_kubeconfig({"current-context": "none"})


def test_relative_files_in_a_kubeconfig_are_read_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """client-go reads a kubeconfig's relative file names from the kubeconfig's folder; read from
    the current folder, the token was not found and writes went out without credentials."""
    folder = tmp_path / "kube"
    folder.mkdir()
    (folder / "token.txt").write_text("secret")
    (folder / "ca.pem").write_text(PEM)
    config = _config({"tokenFile": "token.txt"}, {"certificate-authority": "ca.pem"})
    (folder / "config").write_text(json.dumps(config))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    found = ApiCredentials.from_environment({"KUBECONFIG": str(folder / "config")})
    assert found.token() == "secret" and (found.ca_pem or "").strip() == PEM.strip()


def test_in_a_pod_the_service_account_token_is_read_at_every_write(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert ApiCredentials.in_cluster(tmp_path, env) is None  # no token file
    (tmp_path / "token").write_text("first")
    (tmp_path / "ca.crt").write_text(PEM)
    creds = ApiCredentials.in_cluster(tmp_path, env)
    assert creds is not None and creds.server == "https://10.96.0.1:443" and creds.ca_pem == PEM.strip()
    assert creds.token() == "first"
    (tmp_path / "token").write_text("rotated")
    assert creds.token() == "rotated"
    six = ApiCredentials.in_cluster(tmp_path, {"KUBERNETES_SERVICE_HOST": "fd00::1"})
    assert six is not None and six.server == "https://[fd00::1]:443"


@pytest.fixture()
def fresh_formula(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new process: the runtime's weight formula not told yet."""
    monkeypatch.setattr(pysched_progress, "_known_formula", [])


# The kubelet's cgroup v2 weight for a request of R millicores (R*1024/1000 shares) by runtimes
# before runc 1.3.2 / crun 1.23 (linear) and since (quadratic), as those runtimes compute it.
def _linear(milli: int) -> int:
    return 1 + ((max(2, milli * 1024 // 1000) - 2) * 9999) // 262142


def _quadratic(milli: int) -> int:
    shares = max(2, milli * 1024 // 1000)
    exponent = (math.log2(shares) ** 2 + 125 * math.log2(shares)) / 612 - 7 / 34
    return 1 if shares <= 2 else 10000 if shares >= 262144 else math.ceil(10**exponent)


AS_USERS_WRITE_THEM = (100, 250, 500, 1000, 2000, 3000, 4000, 5000, 8000, 16000, 32000, 64000)


def test_a_request_only_container_counts_the_cpus_of_its_cpu_weight(tmp_path: Path, fresh_formula: None) -> None:
    weight = tmp_path / "cpu.weight"
    for write in (_linear, _quadratic):
        for milli in AS_USERS_WRITE_THEM:
            weight.write_text(f"{write(milli)}\n")
            assert granted_cpus(tmp_path, {}) == milli / 1000, (write, milli)  # 8 CPUs are 8 threads, not 7.99
    assert _quadratic(1000) == 100 and _linear(1000) == 39  # the runtimes' own figures
    weight.write_text("100\n")  # 1 CPU under today's runtimes, which is also the cgroup default
    assert granted_cpus(tmp_path, {}) == 1.0
    weight.write_text("1\n")  # BestEffort: no request
    assert granted_cpus(tmp_path, {}) == float(len(os.sched_getaffinity(0)))
    for text in ("0", "10001", "-5", "1e3", ""):
        weight.write_text(text)
        assert granted_cpus(tmp_path, {}) == float(len(os.sched_getaffinity(0))), text
    (tmp_path / "cpu.max").write_text("300000 100000\n")  # a limit wins over the request
    assert granted_cpus(tmp_path, {}) == 3.0


def test_the_request_at_start_tells_which_formula_the_runtime_uses(tmp_path: Path, fresh_formula: None) -> None:
    # 1.5 CPUs under the linear formula is weight 59, which the quadratic one writes for 0.5 CPUs:
    # as round, so without the request at start the reading is the quadratic one's.
    weight = tmp_path / "cpu.weight"
    weight.write_text(f"{_linear(1500)}\n")
    assert _quadratic(500) == _linear(1500)
    assert granted_cpus(tmp_path, {}) == 0.5
    assert granted_cpus(tmp_path, {"PYSCHED_CPU_REQUEST": "1500"}) == 1.5
    weight.write_text(f"{_linear(1700)}\n")  # resized in place: the formula stays the one told
    assert granted_cpus(tmp_path, {}) == 1.7


def test_a_request_at_start_that_matches_no_formula_tells_nothing(tmp_path: Path, fresh_formula: None) -> None:
    weight = tmp_path / "cpu.weight"
    weight.write_text(f"{_quadratic(4000)}\n")  # resized before the first reading
    for told in ("2000", "abc", "", "-1", "1" * 12):
        assert granted_cpus(tmp_path, {"PYSCHED_CPU_REQUEST": told}) == 4.0, told
    weight.write_text(f"{_linear(1500)}\n")
    assert granted_cpus(tmp_path, {"PYSCHED_CPU_REQUEST": "1500"}) == 1.5  # told at last


@pytest.mark.parametrize("write", [_linear, _quadratic])
def test_every_request_is_read_back_exactly_once_the_formula_is_known(
    tmp_path: Path, fresh_formula: None, write: Callable[[int], int]
) -> None:
    weight = tmp_path / "cpu.weight"
    weight.write_text(f"{write(2000)}\n")
    assert granted_cpus(tmp_path, {"PYSCHED_CPU_REQUEST": "2000"}) == 2.0
    for milli in range(100, 64001, 100):
        weight.write_text(f"{write(milli)}\n")
        assert granted_cpus(tmp_path, {}) == milli / 1000, milli


class Refusing:
    def patch_annotations(self, pod: PodRef, annotations: Mapping[str, str]) -> None:
        raise RuntimeError("HTTP 403: forbidden\nby policy")


def test_failures_are_one_line_without_traceback_then_one_every_ten_minutes(caplog: pytest.LogCaptureFixture) -> None:
    clock = [1_796_040_000.0]
    rep = Reporter(PodRef("ns", "p"), Refusing(), interval=0, clock=lambda: clock[0])
    with caplog.at_level(logging.WARNING, logger="pysched_progress"):
        for step in range(1, 6):
            clock[0] += 60
            assert rep.report(step) and rep.drain()  # started, then refused on the writer's thread
        clock[0] += pysched_progress.WARN_EVERY_S
        rep.report(6)
        rep.drain()
    assert [r.exc_info for r in caplog.records] == [None, None]
    first, second = (r.getMessage() for r in caplog.records)
    assert first.endswith("on pod ns/p: HTTP 403: forbidden by policy") and "\n" not in first
    assert second.endswith("(4 more failed since the last warning)")
