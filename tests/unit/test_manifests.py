"""manifests/ read as files: the Deployment is hardened and probes what `pysched run` serves, and the
admission policies agree with the code they stand beside (profile names, the progress form)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from pysched.api.annotations import MAX_STEP_DIGITS, PROGRESS_MAX_LENGTH, format_progress, parse_progress
from pysched.cmd.run import register
from pysched.cmd.server import ALWAYS_ALLOWED

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


def load(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((MANIFESTS / name).read_text()) if doc]


def one(name: str, kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in load(name) if doc["kind"] == kind]
    return found


@pytest.fixture(scope="module")
def pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = one("deployment.yaml", "Deployment")["spec"]["template"]["spec"]
    return spec


@pytest.fixture(scope="module")
def container(pod_spec: dict[str, Any]) -> dict[str, Any]:
    (only,) = pod_spec["containers"]
    return dict(only)


def run_args(container: dict[str, Any]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="pysched", exit_on_error=False)
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(container["args"])


def effective(pod_spec: dict[str, Any], container: dict[str, Any], key: str) -> Any:
    """A securityContext field as the kubelet applies it: the container's, else the pod's."""
    return container.get("securityContext", {}).get(key, pod_spec.get("securityContext", {}).get(key))


def test_deployment_args_are_flags_of_pysched_run(container: dict[str, Any]) -> None:
    args = run_args(container)
    assert args.command == "run" and args.leader_elect
    assert args.config == "/etc/pysched/profiles.yaml"
    assert args.insecure_bind_address is None  # no plain HTTP in the cluster
    assert one("deployment.yaml", "Deployment")["spec"]["replicas"] == 2


def test_deployment_runs_as_non_root_without_privileges(pod_spec: dict[str, Any], container: dict[str, Any]) -> None:
    assert effective(pod_spec, container, "runAsNonRoot") is True
    assert effective(pod_spec, container, "runAsUser") not in (None, 0)
    assert effective(pod_spec, container, "seccompProfile") == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert not security.get("privileged", False)
    assert not pod_spec.get("hostNetwork", False) and not pod_spec.get("hostPID", False)


def test_deployment_requests_and_limits_cpu_and_memory(container: dict[str, Any]) -> None:
    resources = container["resources"]
    for bound in ("requests", "limits"):
        assert set(resources[bound]) >= {"cpu", "memory"}, bound


def test_caches_go_to_an_empty_dir_since_the_root_filesystem_is_read_only(
    pod_spec: dict[str, Any], container: dict[str, Any]
) -> None:
    empty_dirs = {v["name"] for v in pod_spec["volumes"] if "emptyDir" in v}
    writable = [
        PurePosixPath(m["mountPath"])
        for m in container["volumeMounts"]
        if m["name"] in empty_dirs and not m.get("readOnly", False)
    ]
    env = {e["name"]: e["value"] for e in container["env"]}
    for name in ("PYSCHED_CACHE_DIR", "NUMBA_CACHE_DIR"):
        folder = PurePosixPath(env[name])
        assert any(folder == mount or mount in folder.parents for mount in writable), (name, folder, writable)
    config = next(m for m in container["volumeMounts"] if m["mountPath"] == "/etc/pysched")
    assert config["readOnly"] is True


def test_probes_use_https_on_the_secure_port_and_paths_that_need_no_token(container: dict[str, Any]) -> None:
    args = run_args(container)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert list(ports.values()) == [args.secure_port] and args.secure_port == 10259
    paths = {}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert get["scheme"] == "HTTPS" and ports[get["port"]] == args.secure_port, probe
        assert get["path"] in ALWAYS_ALLOWED, probe
        paths[probe] = get["path"]
    assert paths["readinessProbe"] == "/readyz"
    assert paths["livenessProbe"] in ("/healthz", "/livez")


def test_resize_policy_names_the_profiles_and_the_service_account() -> None:
    policy = one("resize-policy.yaml", "ValidatingAdmissionPolicy")
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["pods/resize"]
    configmap = one("configmap.yaml", "ConfigMap")
    profiles = {p["schedulerName"] for p in yaml.safe_load(configmap["data"]["profiles.yaml"])["profiles"]}
    names = next(v["expression"] for v in policy["spec"]["variables"] if v["name"] == "schedulerNames")
    assert set(yaml.safe_load(names)) == profiles
    account = one("serviceaccount.yaml", "ServiceAccount")["metadata"]
    username = f"system:serviceaccount:{account['namespace']}:{account['name']}"
    assert f"request.userInfo.username == '{username}'" in policy["spec"]["matchConditions"][0]["expression"]
    binding = one("resize-policy.yaml", "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": "pysched-resize", "validationActions": ["Deny"]}


def progress_rule() -> tuple[str, re.Pattern[str]]:
    policy = next(d for d in load("training/progress-policy.yaml") if d["kind"] == "ValidatingAdmissionPolicy")
    (rule,) = [v["expression"] for v in policy["spec"]["validations"] if ".matches(" in v["expression"]]
    found = re.search(r"\.matches\('([^']+)'\)", rule)
    assert found is not None
    # RE2 reads this pattern as Python's re does, except that RE2's `$` is Python's `\Z`.
    return rule, re.compile(found.group(1).removesuffix("$") + r"\Z")


def test_progress_policy_bounds_are_the_parsers() -> None:
    rule, pattern = progress_rule()
    assert f"size(variables.progress) <= {PROGRESS_MAX_LENGTH}" in rule
    assert f"[0-9]{{1,{MAX_STEP_DIGITS}}}@" in pattern.pattern


@pytest.mark.parametrize(
    "value",
    [
        format_progress(0, 0.0),
        format_progress(1200, 1_796_040_005.0),
        format_progress(10**MAX_STEP_DIGITS - 1, 253_402_300_799.0),  # 9999-12-31T23:59:59Z
        "7@2026-11-30T12:00:05.123456789Z",
    ],
)
def test_what_the_helper_writes_the_policy_admits_and_the_scheduler_reads(value: str) -> None:
    _, pattern = progress_rule()
    assert len(value) <= PROGRESS_MAX_LENGTH and pattern.match(value)
    assert parse_progress(value) is not None


@pytest.mark.parametrize(
    "value",
    [
        "1" * 5000 + "@2026-11-30T12:00:05Z",
        "1" * (MAX_STEP_DIGITS + 1) + "@2026-11-30T12:00:05Z",
        "1200@2026-11-30T12:00:05Z" + "0" * 200_000,
        "1200@" + "2026-11-30T12:00:05.123456789Z" * 3,
        "-1@2026-11-30T12:00:05Z",
        "1200",
        "1200@yesterday",
        "1200@2026-13-30T12:00:05Z",
        "1200@2026-11-30T12:00:05+01:00",
        "1200@2026-11-30 12:00:05Z",
        " 1200@2026-11-30T12:00:05Z",
        "1200@2026-11-30T12:00:05Z\n",
    ],
)
def test_the_policy_refuses_other_forms(value: str) -> None:
    _, pattern = progress_rule()
    assert len(value) > PROGRESS_MAX_LENGTH or not pattern.match(value)


def test_the_role_lets_the_volume_plugins_read_storage_and_the_binder_write_it() -> None:
    from pysched.backend.live.cluster import LiveCluster
    from pysched.testing.scripted import ScriptedApi

    docs = list(yaml.safe_load_all((MANIFESTS / "rbac.yaml").read_text()))
    role = next(d for d in docs if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "pysched")
    allowed = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    for informer in LiveCluster(ScriptedApi()).storage_informers:
        group = "" if informer._path.startswith("/api/v1") else "storage.k8s.io"
        assert {(group, informer.resource, "list"), (group, informer.resource, "watch")} <= allowed
    assert {("", "persistentvolumes", "patch"), ("", "persistentvolumeclaims", "patch")} <= allowed
