"""`pysched status` against the real apiserver, with no scheduler running: pods in each state as
pysched leaves them (its conditions written through `pods/status`, binds through `pods/binding`),
read back as one row per job, sorted by slack; a cluster it cannot reach is one line and exit 2."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from pysched.api.annotations import format_progress
from pysched.api.times import format_rfc3339
from pysched.cmd.cli import main
from pysched.deadline.condition import JobRecord, state_message
from pysched.testing import KubeAPI, LocalControlPlane
from pysched.testing.helpers import fake_node, make_pod

pytestmark = pytest.mark.integration


def _conditions(kube: KubeAPI, namespace: str, name: str, reason: str, status: str, record: JobRecord) -> None:
    words = f"{record.what}: as pysched words it"
    conditions = [
        {"type": "pysched.io/Deadline", "status": status, "reason": reason, "message": words},
        {"type": "pysched.io/State", "status": "True", "reason": reason, "message": state_message(record)},
    ]
    kube.patch(kube.pod_path(namespace, name, "status"), {"status": {"conditions": conditions}})


def test_status_shows_every_state_sorted_by_slack(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    node = fake_node(kube, f"{namespace}-n0")
    now = time.time()
    deadline = now + 3600
    pods: dict[str, dict[str, Any]] = {
        "pending": {"pysched.io/deadline": format_rfc3339(deadline)},
        "ontrack": {"pysched.io/deadline": format_rfc3339(deadline), "pysched.io/total-steps": "1000",
                    "pysched.io/progress": format_progress(250, now)},
        "atrisk": {"pysched.io/deadline": format_rfc3339(deadline)},
        "besteffort": {},
        "met": {"pysched.io/deadline": format_rfc3339(deadline)},
        "rejected": {"pysched.io/deadline": format_rfc3339(deadline)},
    }  # fmt: skip
    for name, notes in pods.items():
        kube.create_pod(namespace, make_pod(name, scheduler="pysched", annotations=notes))
        if name != "pending":
            kube.bind_pod(namespace, name, node)
    kube.create_pod(namespace, make_pod("other", scheduler="default-scheduler"))  # not pysched's: no row
    _conditions(kube, namespace, "ontrack", "OnTrack", "True",
                JobRecord("OnTrack", "on track", deadline, now + 1830, 2.0, finish_sigma=120.0))  # fmt: skip
    _conditions(kube, namespace, "atrisk", "DeadlineInfeasible", "False",
                JobRecord("DeadlineInfeasible", "cannot", deadline, now + 7200, 8.0))  # fmt: skip
    _conditions(kube, namespace, "rejected", "DeadlineRejected", "False", JobRecord("DeadlineRejected", "not admitted"))
    kube.patch(kube.pod_path(namespace, "met", "status"), {"status": {"phase": "Succeeded"}})
    _conditions(kube, namespace, "met", "DeadlineMet", "True",
                JobRecord("DeadlineMet", "met", deadline, verdict="met", ended_at=now, counted=True))  # fmt: skip

    args = ["status", "--kubeconfig", str(control_plane.kubeconfig_path), "-n", namespace]
    assert main([*args, "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["jobs"]
    by_job = {r["job"]: r for r in rows}
    assert {j: r["state"] for j, r in by_job.items()} == {
        "pending": "Pending", "ontrack": "OnTrack", "atrisk": "Infeasible", "besteffort": "BestEffort",
        "met": "Met", "rejected": "Rejected",
    }  # fmt: skip
    assert [r["job"] for r in rows][:3] == ["atrisk", "ontrack", "met"]  # -1h, +30m, +1h of slack
    assert by_job["ontrack"]["progress"] == 0.25 and by_job["ontrack"]["finish_sigma"] == 120.0
    assert by_job["ontrack"]["bound"] == 1 and by_job["pending"]["bound"] == 0
    assert by_job["atrisk"]["slack"] == pytest.approx(-3600, abs=2)

    assert main([*args]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["NAMESPACE", "JOB", "PODS"]
    ontrack = next(line for line in table if " ontrack " in line)
    assert re.search(r" in \d+m ±2m ", ontrack) and "OnTrack" in ontrack and "25%" in ontrack  # relative to now
    assert main([*args, "-o", "yaml"]) == 0
    assert "state: OnTrack" in capsys.readouterr().out
    explain = ["explain", "--kubeconfig", str(control_plane.kubeconfig_path), "-n", namespace]
    assert main([*explain, "ontrack"]) == 0
    history = capsys.readouterr().out
    assert "  OnTrack (True): on track: as pysched words it" in history and "No events" in history
    assert main([*explain, "nope"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"pysched explain: error: pod {namespace}/nope: "), err


def test_status_of_a_cluster_it_cannot_reach_is_one_line_and_exit_2(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "x"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}],
    }  # fmt: skip
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    assert main(["status", "--kubeconfig", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pysched status: error: cannot list pods:"), err
    assert main(["status", "--kubeconfig", str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err
