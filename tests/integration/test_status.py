"""`pysched status` against the real apiserver, with no scheduler running: pods in each state as
pysched leaves them (its conditions written through `pods/status`, binds through `pods/binding`),
read back as one row per job, sorted by slack; a cluster it cannot reach is one line and exit 2."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from pysched.api.annotations import format_progress
from pysched.api.times import format_rfc3339
from pysched.cmd.cli import main
from pysched.cmd.status import STATES
from pysched.deadline.condition import JobRecord, earliest_finish_words, state_message
from pysched.testing import KubeAPI, LocalControlPlane, wait_for
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
        "demoted": {"pysched.io/deadline": format_rfc3339(deadline)},
        "besteffort": {},
        "met": {"pysched.io/deadline": format_rfc3339(deadline)},
        "rejected": {"pysched.io/deadline": format_rfc3339(deadline)},
        "late": {"pysched.io/deadline": format_rfc3339(deadline)},
        "missed": {"pysched.io/deadline": format_rfc3339(now - 600)},
        "failed": {"pysched.io/deadline": format_rfc3339(deadline)},
        "running": {"pysched.io/deadline": format_rfc3339(deadline)},
        "rescaling": {"pysched.io/deadline": format_rfc3339(deadline)},
    }  # fmt: skip
    for name, notes in pods.items():
        kube.create_pod(namespace, make_pod(name, scheduler="pysched", annotations=notes))
        if name != "pending":
            kube.bind_pod(namespace, name, node)
    kube.create_pod(namespace, make_pod("other", scheduler="default-scheduler"))  # not pysched's: no row
    # An Indexed Job of two: its pods say nothing of a minimum; the PodGroup the Job controller
    # makes for them (the Workload API) does, from the Job's parallelism; the row bears the Job's name.
    template = make_pod("unused", scheduler="pysched", annotations={"pysched.io/deadline": format_rfc3339(deadline)})
    template["spec"]["restartPolicy"] = "Never"
    del template["apiVersion"], template["kind"], template["metadata"]["name"]
    indexed = {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "template": template}
    kube.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", {"metadata": {"name": "ddp"}, "spec": indexed})
    wait_for(
        lambda: kube.get(f"/api/v1/namespaces/{namespace}/pods")["items"],
        lambda items: sum(p["metadata"]["name"].startswith("ddp-") for p in items) == 2,
        what="the Job controller's two pods",
    )
    _conditions(kube, namespace, "ontrack", "OnTrack", "True",
                JobRecord("OnTrack", "on track", deadline, now + 1830, 2.0, finish_sigma=120.0))  # fmt: skip
    _conditions(kube, namespace, "demoted", "DeadlineInfeasible", "False",
                JobRecord("DeadlineInfeasible", "cannot", deadline, now + 7200, 8.0))  # fmt: skip
    not_admitted = f"not admitted; {earliest_finish_words(deadline + 1800, now)}: runs as best-effort"
    _conditions(kube, namespace, "rejected", "DeadlineRejected", "False", JobRecord("DeadlineRejected", not_admitted))
    kube.patch(kube.pod_path(namespace, "met", "status"), {"status": {"phase": "Succeeded"}})
    _conditions(kube, namespace, "late", "Rescaled", "False", JobRecord("Rescaled", "late", deadline, now + 5400, 4.0))
    kube.patch(kube.pod_path(namespace, "missed", "status"), {"status": {"phase": "Succeeded"}})
    missed = JobRecord("DeadlineMissed", "missed", now - 600, verdict="missed", ended_at=now - 60, counted=True)
    _conditions(kube, namespace, "missed", "DeadlineMissed", "False", missed)
    kube.patch(kube.pod_path(namespace, "failed", "status"), {"status": {"phase": "Failed"}})
    # What a kubelet reports while a resize is asked for and not yet actuated: the old request.
    running = {"name": "main", "image": "busybox", "imageID": "", "ready": True, "restartCount": 0,
               "state": {"running": {"startedAt": format_rfc3339(now)}}}  # fmt: skip
    old = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}
    kube.patch(
        kube.pod_path(namespace, "rescaling", "status"),
        {"status": {"phase": "Running", "containerStatuses": [{**running, "resources": old}]}},
    )
    _conditions(kube, namespace, "met", "DeadlineMet", "True",
                JobRecord("DeadlineMet", "met", deadline, verdict="met", ended_at=now, counted=True))  # fmt: skip

    args = ["status", "--kubeconfig", str(control_plane.kubeconfig_path), "-n", namespace]
    assert main([*args, "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["jobs"]
    by_job = {r["job"]: r for r in rows}
    assert {j: r["state"] for j, r in by_job.items()} == {
        "pending": "Pending", "ontrack": "OnTrack", "demoted": "Infeasible", "besteffort": "BestEffort",
        "met": "Met", "rejected": "Rejected", "ddp": "Pending", "late": "AtRisk", "missed": "Missed",
        "failed": "Failed", "running": "Running", "rescaling": "Rescaling",
    }  # fmt: skip
    assert {r["state"] for r in rows} == set(STATES) - {"Succeeded"}  # a Succeeded job with no verdict: unit-tested
    assert (by_job["ddp"]["bound"], by_job["ddp"]["minimum"]) == (0, 2)
    # A job not admitted shows the earliest it could finish, the earliest deadline it could have met.
    assert by_job["rejected"]["finish"] == format_rfc3339(deadline + 1800)
    assert by_job["rejected"]["slack"] == pytest.approx(-1800, abs=1)
    # Slack -1h, -30m (a tie: by name), -9m, +30m, +1h; then the jobs with no slack.
    assert [r["job"] for r in rows][:6] == ["demoted", "late", "rejected", "missed", "ontrack", "met"]
    assert by_job["ontrack"]["progress"] == 0.25 and by_job["ontrack"]["finish_sigma"] == 120.0
    assert by_job["ontrack"]["bound"] == 1 and by_job["pending"]["bound"] == 0
    assert by_job["demoted"]["slack"] == pytest.approx(-3600, abs=2)

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


def test_status_watch_prints_the_table_again_as_jobs_come_and_stops_quietly_on_interrupt(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str
) -> None:
    kube.create_pod(namespace, make_pod("first", scheduler="pysched"))
    command = [sys.executable, "-m", "pysched.cmd.cli", "status", "--kubeconfig", str(control_plane.kubeconfig_path)]
    watch = subprocess.Popen(
        [*command, "-n", namespace, "--watch", "--interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a test run started in the background has SIGINT ignored, which its
        # children inherit, and Python then never turns SIGINT into KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: queue.Queue[str] = queue.Queue()
    out = watch.stdout
    assert out is not None

    def read() -> None:
        for line in out:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()

    def row_of(job: str) -> str:
        while True:
            line = lines.get(timeout=60)  # raises queue.Empty: the watch printed no such row
            if f" {job} " in line:
                return line

    try:
        assert "BestEffort" in row_of("first")
        kube.create_pod(namespace, make_pod("second", scheduler="pysched"))
        assert "BestEffort" in row_of("second")  # read again, not printed once
    finally:
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=30)
    assert watch.returncode == 0 and "Traceback" not in err, err


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
