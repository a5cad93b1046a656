"""`pysched status`'s rows from pods as the API serves them: a gang is one row, what speaks for it."""

import asyncio
import sys
from importlib.metadata import entry_points
from typing import Any

from pysched.api.builders import pod_dict
from pysched.api.jobs import JOB_LABEL, MIN_MEMBERS, JobSource, job_key
from pysched.backend.live.kubeclient import ApiResponse
from pysched.cmd.status import JobObjects, explain_text, job_rows, read_rows, render, render_table, shown_minimum
from pysched.deadline.condition import JobRecord, state_message

DEADLINE = "2026-12-01T00:00:00Z"
NOW = 1_796_083_200.0  # the deadline


def _member(name: str, node: str | None, **status: Any) -> dict[str, Any]:
    notes = {"pysched.io/deadline": DEADLINE, MIN_MEMBERS: "2"}
    raw = pod_dict(name, cpu="2", annotations=notes, labels={JOB_LABEL: "train"}, node_name=node)
    raw["metadata"]["uid"] = name
    raw["status"] = {"phase": "Running" if node else "Pending", **status}
    return raw


def test_a_gang_is_one_row_pending_until_every_member_is_bound_then_rescaling_while_a_resize_waits() -> None:
    rows = job_rows([_member("train-0", "n1"), _member("train-1", None)], [], {})
    assert [(r.job, r.state, r.bound, r.minimum) for r in rows] == [("train", "Pending", 1, 2)]
    waiting = {"containerStatuses": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}
    rows = job_rows([_member("train-0", "n1", **waiting), _member("train-1", "n2")], [], {})
    assert [(r.state, r.bound, r.cpus) for r in rows] == [("Rescaling", 2, 4.0)]
    assert rows[0].progress is None and rows[0].finish is None


def test_a_failed_member_its_owner_replaces_does_not_count_as_bound() -> None:
    failed = _member("train-0", "n1", phase="Failed")
    rows = job_rows([failed, _member("train-0-again", None), _member("train-1", "n2")], [], {})
    assert [(r.state, r.bound, r.minimum) for r in rows] == [("Pending", 1, 2)]
    succeeded = _member("train-0", "n1", phase="Succeeded")  # its part is done: it counts
    rows = job_rows([succeeded, _member("train-1", "n2")], [], {})
    assert [(r.state, r.bound) for r in rows] == [("Running", 2)]


def test_a_gang_ended_is_judged_by_the_member_that_counts_and_the_last_event_is_the_newest() -> None:
    def ended(name: str, counted: bool) -> dict[str, Any]:
        record = JobRecord("DeadlineMissed", "missed", NOW, verdict="missed", ended_at=NOW + 60, counted=counted)
        conditions = [{"type": "pysched.io/State", "status": "True", "message": state_message(record)}]
        return _member(name, "n1", phase="Succeeded", conditions=conditions)

    def event(uid: str, reason: str, note: str, hour: int) -> dict[str, Any]:
        return {"regarding": {"uid": uid}, "reason": reason, "note": note, "eventTime": f"2026-11-30T{hour}:00:00Z"}

    events = [
        event("train-0", "Rescaled", "cpu 2 -> 4", 10),
        event("train-1", "DeadlineMissed", "missed", 11),
        event("elsewhere", "Scheduled", "x", 12),  # another pod's
    ]
    (row,) = job_rows([ended("train-0", False), ended("train-1", True)], events, {})
    assert (row.state, row.slack, row.last_event) == ("Missed", -60, "DeadlineMissed: missed")
    assert row.cpus == 0  # nothing runs any more
    assert "Missed" in render([row], "table", NOW) and '"state": "Missed"' in render([row], "json", NOW)


def test_a_pod_that_cannot_be_read_is_left_out_and_no_rows_say_so() -> None:
    bad = pod_dict("bad", cpu="1")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    assert job_rows([bad], [], {}) == []
    assert render([], "table", NOW) == "No pysched jobs found."


def test_kubectl_runs_the_same_command_as_a_plugin(monkeypatch: Any, capsys: Any) -> None:
    (script,) = entry_points(group="console_scripts", name="kubectl-pysched")
    monkeypatch.setattr(sys, "argv", ["kubectl-pysched", "status", "--kubeconfig", "/nonexistent/config"])
    assert script.load()() == 2
    assert capsys.readouterr().err == "pysched status: error: kubeconfig /nonexistent/config: no such file\n"


def test_explain_shows_the_row_status_shows_for_a_job_of_an_indexed_job() -> None:
    # An Indexed Job of 2 workers made 50 minutes ago, its pod 10 minutes ago: the deadline counts
    # from the Job, and the row says 1 of the 2 workers, as `status` does.
    job_made, now = NOW - 3000, NOW
    raw = pod_dict(
        "train-0",
        cpu="2",
        annotations={"pysched.io/deadline": "1h"},
        labels={"job-name": "train", "batch.kubernetes.io/job-completion-index": "0"},
        node_name="n1",
        created=NOW - 600,
    )
    raw["metadata"]["uid"] = "p0"
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid", "controller": True}
    ]
    raw["status"] = {"phase": "Running"}
    owner_times = {"job-uid": job_made}
    objects = JobObjects({job_key("default", JobSource.BATCH, "train"): 2})
    rows = job_rows([raw], [], owner_times, objects)
    assert [(r.state, r.bound, r.minimum) for r in rows] == [("Pending", 1, 2)]
    assert rows[0].deadline == job_made + 3600
    text = explain_text(raw, [raw], [], now, owner_times, objects)
    assert text.splitlines()[: len(render_table(rows, now).splitlines())] == render_table(rows, now).splitlines()


def _running(name: str, labels: dict[str, str] | None = None, notes: dict[str, str] | None = None) -> dict[str, Any]:
    raw = pod_dict(name, annotations={"pysched.io/deadline": "2026-12-01T01:00:00Z", **(notes or {})}, labels=labels)
    raw["metadata"]["uid"] = f"u-{name}"
    raw["status"] = {"phase": "Pending"}
    return raw


def test_jobs_that_share_a_name_are_rows_of_their_own_and_jobs_without_a_deadline_go_last() -> None:
    lone = _running("ddp")
    gang = [_running(f"ddp-{i}", {JOB_LABEL: "ddp"}, {MIN_MEMBERS: "3"}) for i in range(2)]
    best_effort = pod_dict("aaa-besteffort")
    best_effort["metadata"]["uid"] = "u-be"
    rows = job_rows([best_effort, lone, *gang], [], {})
    assert [(r.job, r.bound, r.minimum) for r in rows] == [("ddp", 0, 1), ("ddp", 0, 3), ("aaa-besteffort", 0, 1)]


def test_an_event_written_through_core_v1_is_read_at_its_last_sighting_with_its_count() -> None:
    """events.k8s.io serves the kubelet's events with no eventTime, `deprecatedLastTimestamp` and
    `deprecatedCount`: they were read at their creation and once."""
    raw = _running("train")
    kubelet = {
        "metadata": {"name": "train.1", "creationTimestamp": "2026-12-01T00:10:00Z"},
        "eventTime": None,
        "reason": "BackOff",
        "note": "Back-off restarting failed container main",
        "type": "Warning",
        "regarding": {"kind": "Pod", "name": "train", "uid": "u-train"},
        "deprecatedFirstTimestamp": "2026-12-01T00:10:00Z",
        "deprecatedLastTimestamp": "2026-12-01T00:50:00Z",
        "deprecatedCount": 42,
    }
    ours = {
        "metadata": {"name": "train.2", "creationTimestamp": "2026-12-01T00:30:00Z"},
        "eventTime": "2026-12-01T00:30:00.000000Z",
        "reason": "Rescaled",
        "note": "cpu 2 -> 4",
        "type": "Normal",
        "regarding": {"kind": "Pod", "name": "train", "uid": "u-train"},
    }
    (row,) = job_rows([raw], [kubelet, ours], {})
    assert row.last_event.startswith("BackOff")
    text = explain_text(raw, [raw], [kubelet, ours], NOW)
    assert text.index("Rescaled") < text.index("BackOff (x42)")


def test_explain_reads_past_a_count_of_infinite_seconds_in_an_old_condition() -> None:
    raw = _running("old")
    raw["status"]["conditions"] = [{
        "type": "pysched.io/Deadline", "status": "True", "reason": "OnTrack",
        "message": "on track: predicted finish 2026-12-01T00:40:00Z vs deadline 2026-12-01T01:00:00Z; measured 2 CPUs "
        "0.51 s/step ±3.10% (4570 steps in 1e999 s); lastRescale=1796000000",
    }]  # fmt: skip
    text = explain_text(raw, [raw], [], NOW)
    assert "OnTrack" in text and "measured at" not in text


def test_a_finished_indexed_job_shows_the_workers_it_ran_with() -> None:
    spec = {"completionMode": "Indexed", "parallelism": 2, "completions": 2}
    running = {"spec": spec, "status": {"active": 2}}
    done = {"spec": spec, "status": {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]}}
    assert shown_minimum(running) == shown_minimum(done) == 2  # done, it read 2/1
    assert shown_minimum({"spec": {"parallelism": 2}}) is None  # not Indexed: no gang


class _Answers:
    """The API's answers to `pysched status`'s lists, by path."""

    def __init__(self, answers: dict[str, ApiResponse]) -> None:
        self.answers = answers

    async def request(self, method: str, path: str, query: Any = None) -> ApiResponse:
        return self.answers[path]


def test_a_podgroup_list_the_user_may_not_read_leaves_the_rows_without_gang_sizes() -> None:
    """The `view` role reads pods, events and Jobs but not scheduler-plugins' PodGroups: status
    still shows its rows (it stopped with "cannot list podgroups")."""
    pod = pod_dict("g-0", cpu="1", labels={"scheduling.x-k8s.io/pod-group": "g"}, node_name="n1")
    pod["status"] = {"phase": "Running"}
    forbidden = ApiResponse(403, {"message": 'podgroups.scheduling.x-k8s.io is forbidden: User "viewer" ...'})
    client = _Answers(
        {
            "/api/v1/namespaces/ml/pods": ApiResponse(200, {"items": [pod]}),
            "/apis/events.k8s.io/v1/namespaces/ml/events": ApiResponse(200, {"items": []}),
            "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups": forbidden,
        }
    )
    rows = asyncio.run(read_rows(client, "ml", frozenset({"pysched"})))
    assert [(r.job, r.bound) for r in rows] == [("g", 1)]
