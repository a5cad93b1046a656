"""The JobSet controller (``sigs.k8s.io/jobset``) on a :class:`LocalControlPlane`.

``hack/build-jobset.sh`` builds its manager into
``${PYSCHED_CACHE_DIR:-~/.cache/pysched}/jobset/jobset-V_goV/bin`` (``PYSCHED_JOBSET_BIN`` points
somewhere else), next to the CRDs of the same module version (``../crds``). :func:`start_jobset`
installs the CRDs, runs the manager as a process of the plane (its own serving certificate, no
internal certificate rotation, no leader election, no metrics) and registers its webhooks by URL:
the local plane has no Service network, so the apiserver calls ``https://127.0.0.1:PORT/<path>``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from pysched.api.jobs import JOBSET_LABEL
from pysched.certs import self_signed
from pysched.testing.controlplane import (
    LocalControlPlane,
    ManagedProcess,
    find_build,
    free_ports,
    install_crds,
)
from pysched.testing.kube import KubeAPIError, wait_for

JOBSET_VERSION = "v0.11.0"  # hack/jobset/go.mod's require
JOBSET_BIN_ENV = "PYSCHED_JOBSET_BIN"
JOBSET_BINARY = "jobset-manager"
JOBSET_BUILD_HINT = "build it with `bash hack/build-jobset.sh` (or `make control-plane`)"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"

# The module's config/components/webhook/manifests.yaml with its kustomize patches: the pod
# webhooks see only pods of a JobSet, so every other pod of a shared plane skips them.
_JOBSET_RULE = {
    "apiGroups": ["jobset.x-k8s.io"],
    "apiVersions": ["v1alpha2"],
    "resources": ["jobsets"],
}
_POD_RULE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
_JOBSET_PODS = {"matchExpressions": [{"key": JOBSET_LABEL, "operator": "Exists"}]}
WEBHOOKS: dict[str, list[tuple[str, str, dict[str, Any], dict[str, Any] | None]]] = {
    "MutatingWebhookConfiguration": [
        ("mjobset.kb.io", "/mutate-jobset-x-k8s-io-v1alpha2-jobset", {**_JOBSET_RULE, "operations": ["CREATE"]}, None),
        ("mpod.kb.io", "/mutate--v1-pod", _POD_RULE, _JOBSET_PODS),
    ],
    "ValidatingWebhookConfiguration": [
        (
            "vjobset.kb.io",
            "/validate-jobset-x-k8s-io-v1alpha2-jobset",
            {**_JOBSET_RULE, "operations": ["CREATE", "UPDATE"]},
            None,
        ),
        ("vpod.kb.io", "/validate--v1-pod", _POD_RULE, _JOBSET_PODS),
    ],
}
WEBHOOK_CONFIG_PREFIX = "jobset-"


def find_jobset_bin_dir(bin_dir: Path | str | None = None) -> Path:
    """The folder holding ``jobset-manager``: the argument, ``$PYSCHED_JOBSET_BIN``, else the newest
    complete build in the cache; :class:`BinariesNotFound` with the build hint when there is none."""
    return find_build(
        bin_dir,
        need=(JOBSET_BINARY,),
        env=JOBSET_BIN_ENV,
        folder="jobset",
        prefix=f"jobset-{JOBSET_VERSION}_",
        what=f"JobSet {JOBSET_VERSION} build",
        hint=JOBSET_BUILD_HINT,
    )


def webhook_configurations(port: int, ca_bundle: bytes) -> list[dict[str, Any]]:
    """The Mutating- and ValidatingWebhookConfiguration of the manager serving on 127.0.0.1:``port``."""
    bundle = base64.b64encode(ca_bundle).decode()
    configs = []
    for kind, hooks in WEBHOOKS.items():
        webhooks = []
        for name, path, rule, selector in hooks:
            hook: dict[str, Any] = {
                "name": name,
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "rules": [rule],
            }
            if selector is not None:
                hook["objectSelector"] = selector
            webhooks.append(hook)
        name = f"{WEBHOOK_CONFIG_PREFIX}{kind.removesuffix('WebhookConfiguration').lower()}-webhook-configuration"
        configs.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": name},
                "webhooks": webhooks,
            }
        )
    return configs


def start_jobset(plane: LocalControlPlane, bin_dir: Path | str | None = None, *, wait: float = 120.0) -> ManagedProcess:
    """Install the JobSet CRDs, start the manager on ``plane`` (stopped with it) and, once its webhook
    server is up, register its webhooks. Returns the manager's process."""
    bin_dir = find_jobset_bin_dir(bin_dir)
    api = plane.api()
    install_crds(api, sorted((bin_dir.parent / "crds").glob("*.yaml")))

    cert_dir = plane.workdir / "jobset-certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    cert, key = self_signed(["127.0.0.1"])
    (cert_dir / "tls.crt").write_bytes(cert)  # controller-runtime's file names
    (cert_dir / "tls.key").write_bytes(key)
    (cert_dir / "tls.key").chmod(0o600)
    webhook_port, health_port = free_ports(2)
    config = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0", "certDir": str(cert_dir)},  # "0": no metrics server
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},  # it would want a Secret and a Service
        "clientConnection": {"qps": 50, "burst": 100},
    }
    config_path = plane.workdir / "jobset-config.yaml"
    config_path.write_text(json.dumps(config, indent=2) + "\n")  # JSON is YAML
    argv = [
        str(bin_dir / JOBSET_BINARY),
        f"--config={config_path}",
        f"--kubeconfig={plane.kubeconfig_path}",
        "--zap-devel=false",
        "--zap-log-level=info",
    ]
    proc = plane.spawn(JOBSET_BINARY, argv)
    # /readyz answers ok once the webhook server listens.
    plane.wait_ready(proc, f"http://127.0.0.1:{health_port}/readyz", timeout=wait)
    for body in webhook_configurations(webhook_port, cert):
        kind = body["kind"].lower() + "s"
        path = f"/apis/admissionregistration.k8s.io/v1/{kind}"
        if api.exists(f"{path}/{body['metadata']['name']}"):  # from an earlier manager on this plane
            api.delete(f"{path}/{body['metadata']['name']}")
        api.post(path, body)
    _wait_webhooks_called(api, wait)
    return proc


def first_job_depends_on(name: str) -> dict[str, Any]:
    """A JobSet only the validating webhook refuses (the schema allows it): its first replicated
    Job depends on another, which the webhook forbids ("DependsOn can't be set for the first
    ReplicatedJob")."""
    template = {
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "none"}]}}}
    }
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [
                {"name": "first", "dependsOn": [{"name": "second", "status": "Ready"}], "template": template},
                {"name": "second", "template": template},
            ]
        },
    }


def _wait_webhooks_called(api: Any, timeout: float) -> None:
    """The apiserver picks new webhook configurations up from an informer: dry-run an invalid
    JobSet until the validating webhook is the one refusing it."""
    probe = first_job_depends_on("webhook-probe")

    def refused_by_webhook() -> bool:
        try:
            api.post(f"/apis/{JOBSET_API}/namespaces/default/jobsets", probe, dryRun="All")
        except KubeAPIError as err:
            return "vjobset.kb.io" in str(err)
        return False

    wait_for(refused_by_webhook, bool, timeout=timeout, interval=0.2, what="the JobSet webhooks")
