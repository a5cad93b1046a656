"""`pysched status`: one row per training job, read from the API alone (no scheduler needs to run);
`pysched explain POD`: the decision history of the pod's job.

A job's pods are grouped as the scheduler groups them (`api.jobs.job_of`; a pod in no job is a
job of one). What pysched concluded comes from the pods' `pysched.io/Deadline` and
`pysched.io/State` conditions, the rest from the pods themselves:

    Met / Missed   a member carries the job's verdict
    Rejected       not admitted (the plan could not fit it without making an admitted job miss);
                   its finish is the earliest deadline it would have been admitted with
    Infeasible     demoted: no size meets the deadline; it runs as best-effort
    Succeeded      every member ended (Failed: one failed) with no verdict (a profile that judges none)
    BestEffort     no deadline
    Pending        not every member is bound yet
    Rescaling      a member's resize is asked for and not yet actuated by the kubelet
    AtRisk         predicted to miss at what it has (Deadline False)
    OnTrack        predicted to finish in time (Deadline True)
    Running        bound, nothing predicted yet (no progress reported)

Rows are sorted by slack (deadline minus predicted finish, or minus the end once judged), the
tightest first; jobs without a deadline last.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pysched.api.annotations import deadline_of, progress_of, total_steps_of
from pysched.api.containers import actual_cpus, container_cpus, container_names
from pysched.api.ids import JobKey
from pysched.api.jobs import (
    POD_GROUP_APIS,
    POD_GROUP_LABEL,
    JobSource,
    indexed_job_minimum,
    job_key,
    job_of,
    pod_group_minimum,
)
from pysched.api.objects import MALFORMED, PodInfo, pod_from_dict
from pysched.api.resources import GPU
from pysched.api.times import format_rfc3339, parse_rfc3339
from pysched.deadline.condition import (
    CONDITION,
    DEMOTED_REASON,
    REJECTED_REASON,
    condition_of,
    duration_words,
    earliest_finish_of,
    saved_job,
)

STATES = (
    "Met", "Missed", "Rejected", "Infeasible", "Succeeded", "Failed", "BestEffort", "Pending", "Rescaling", "AtRisk",
    "OnTrack", "Running",
)  # fmt: skip
PAGE = "500"
MAX_PAGES = 200  # 100,000 objects: a status table, not a backup


@dataclass(frozen=True, slots=True)
class JobRow:
    namespace: str
    job: str
    state: str
    bound: int
    minimum: int
    cpus: float
    gpus: float
    progress: float | None  # 0..1 of the total steps
    finish: float | None  # predicted (running) or actual (ended)
    finish_sigma: float | None
    deadline: float | None
    slack: float | None
    message: str  # the Deadline condition's words
    last_event: str

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("finish", "deadline"):
            out[key] = format_rfc3339(out[key]) if out[key] is not None else None
        return out


@dataclass(frozen=True, slots=True)
class JobObjects:
    """What the pods' job objects add: the members each PodGroup and Indexed Job needs at once,
    and the name to show for a PodGroup a controller made (its Job's, not the generated one)."""

    minimums: Mapping[JobKey, int] = field(default_factory=dict)
    names: Mapping[JobKey, str] = field(default_factory=dict)


def shown_minimum(job: Mapping[str, Any]) -> int | None:
    """An Indexed Job's gang as a row shows it: what it still runs together, or once it finished
    (it makes no more pods) the workers it ran with, so that its row does not read 2/1."""
    spec = job.get("spec")
    return indexed_job_minimum(spec, job.get("status")) or indexed_job_minimum(spec)


def _minimum(pods: Sequence[PodInfo], minimums: Mapping[JobKey, int]) -> int:
    """The members that must run together: as the pods declare it (`pysched.io/min-members`), else
    as their PodGroup or Indexed Job does."""
    ref = job_of(pods[0])
    if ref is None:
        return 1
    return ref.min_members if ref.min_members is not None else minimums.get(ref.key, 1)


def _rescaling(pod: PodInfo) -> bool:
    for name in container_names(pod):
        actual = actual_cpus(pod, name)
        if actual is not None and actual != container_cpus(pod, name):
            return True
    return False


def _row(namespace: str, name: str, pods: Sequence[PodInfo], last_event: str, minimums: Mapping[JobKey, int]) -> JobRow:
    # A failed pod does not count (its owner replaces it); one that succeeded did its part.
    bound = [p for p in pods if p.node_name is not None and p.phase != "Failed"]
    minimum = _minimum(pods, minimums)
    deadline = next((d for p in pods if (d := deadline_of(p)) is not None), None)
    records = [(p, r) for p in pods if (r := saved_job(p)) is not None]
    judged = next(((p, r) for p, r in records if r.verdict is not None and r.counted), None) or next(
        ((p, r) for p, r in records if r.verdict is not None), None
    )
    # The member that speaks for the job: the one whose State carries a prediction (rank 0 in a gang).
    speaker = judged or next(((p, r) for p, r in records if r.finish is not None), None)
    condition = next((c for p in pods if (c := condition_of(p, CONDITION)) is not None), None)
    reason = str(condition.get("reason", "")) if condition else ""
    finish = sigma = None
    if judged is not None:
        finish = judged[1].ended_at
        state = "Met" if judged[1].verdict == "met" else "Missed"
    elif reason == REJECTED_REASON:
        state = "Rejected"
        earliest = earliest_finish_of(str(condition.get("message", ""))) if condition else None
        finish = earliest if earliest is not None and math.isfinite(earliest) else None
    elif reason == DEMOTED_REASON:
        state = "Infeasible"
    elif pods and all(p.terminated for p in pods):
        state = "Failed" if any(p.phase == "Failed" for p in pods) else "Succeeded"
    elif deadline is None:
        state = "BestEffort"
    elif len(bound) < minimum:
        state = "Pending"
    elif any(_rescaling(p) for p in bound):
        state = "Rescaling"
    elif condition is not None and condition.get("status") == "False":
        state = "AtRisk"
    elif condition is not None and condition.get("status") == "True":
        state = "OnTrack"
    else:
        state = "Running"
    if judged is None and speaker is not None and state not in ("Pending", "Rejected"):
        finish, sigma = speaker[1].finish, speaker[1].finish_sigma
    steps = [(total, done[0]) for p in pods if (total := total_steps_of(p)) and (done := progress_of(p))]
    progress = min(1.0, max(done / total for total, done in steps)) if steps else None
    if state == "Met" and progress is None:
        progress = 1.0
    running = [p for p in bound if p.phase not in ("Succeeded", "Failed")]
    return JobRow(
        namespace=namespace,
        job=name,
        state=state,
        bound=len(bound),
        minimum=minimum,
        cpus=sum(p.requests.get("cpu", 0) for p in running) / 1000,
        gpus=float(sum(p.requests.get(GPU, 0) for p in running)),
        progress=progress,
        finish=finish,
        finish_sigma=sigma,
        deadline=deadline,
        slack=deadline - finish if deadline is not None and finish is not None else None,
        message=str(condition.get("message", "")) if condition else "",
        last_event=last_event,
    )


def _event_time(event: Mapping[str, Any]) -> float:
    """When the event (or its series) was last seen; 0 when it says nothing readable. An event
    written through core/v1 (the kubelet's, most controllers') is served with no eventTime and its
    last sighting in `deprecatedLastTimestamp`."""
    series = (event.get("series") or {}).get("lastObservedTime")
    stamp = (
        series
        or event.get("eventTime")
        or event.get("deprecatedLastTimestamp")
        or event.get("deprecatedFirstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )
    return parse_rfc3339(str(stamp)) or 0.0


def _event_count(event: Mapping[str, Any]) -> int:
    """How many times the event was seen: its series' count, or core/v1's `deprecatedCount`."""
    count = (event.get("series") or {}).get("count") or event.get("deprecatedCount")
    return count if type(count) is int and count > 0 else 1


def job_rows(
    raw_pods: Sequence[Mapping[str, Any]],
    raw_events: Sequence[Mapping[str, Any]],
    owner_times: Mapping[str, float],
    objects: JobObjects | None = None,
) -> list[JobRow]:
    """The table's rows from pods and events as the API serves them (a pod that cannot be read is
    left out), sorted by slack, tightest first."""
    objects = objects or JobObjects()
    # By job key: a lone pod and a gang may share a name (`ddp` and `pysched.io/job: ddp`).
    jobs: dict[str, tuple[str, str, list[PodInfo]]] = {}
    for raw in raw_pods:
        try:
            pod = pod_from_dict(raw, owner_times)
        except MALFORMED:
            continue
        ref = job_of(pod)
        name = pod.name if ref is None else objects.names.get(ref.key, ref.name)
        jobs.setdefault(pod.key if ref is None else ref.key, (pod.namespace, name, []))[2].append(pod)
    latest: dict[str, tuple[float, str]] = {}  # pod uid -> its newest event
    for event in raw_events:
        uid = str((event.get("regarding") or {}).get("uid") or "")
        at = _event_time(event)
        text = f"{event.get('reason', '')}: {event.get('note', '')}"
        if uid and at >= latest.get(uid, (-math.inf, ""))[0]:
            latest[uid] = (at, text)
    rows = []
    for namespace, name, pods in jobs.values():
        events = [latest[p.uid] for p in pods if p.uid in latest]
        rows.append(_row(namespace, name, pods, max(events)[1] if events else "", objects.minimums))
    return sorted(rows, key=_row_order)


def _row_order(row: JobRow) -> tuple[bool, bool, float, str, str]:
    """Tightest slack first, then deadline jobs with no prediction yet, then jobs without a deadline."""
    return row.deadline is None, row.slack is None, row.slack if row.slack is not None else 0.0, row.namespace, row.job


# ----- rendering


def _relative(t: float | None, now: float) -> str:
    if t is None or not math.isfinite(t):
        return "-"
    return f"in {duration_words(t - now)}" if t >= now else f"{duration_words(now - t)} ago"


def _signed(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return ("" if seconds >= 0 else "-") + duration_words(abs(seconds))


def render_table(rows: Sequence[JobRow], now: float, wide: bool = False) -> str:
    head = ["NAMESPACE", "JOB", "PODS", "CPU", "GPU", "PROGRESS", "FINISH", "DEADLINE", "SLACK", "STATE", "LAST EVENT"]
    if wide:
        head.append("MESSAGE")
    lines = [head]
    for r in rows:
        finish = _relative(r.finish, now)
        if r.finish_sigma is not None and r.finish is not None and r.state not in ("Met", "Missed"):
            finish += f" ±{duration_words(r.finish_sigma)}"
        event = r.last_event if wide else r.last_event[:60]
        cells = [
            r.namespace, r.job, f"{r.bound}/{r.minimum}", f"{r.cpus:g}", f"{r.gpus:g}",
            "-" if r.progress is None else f"{100 * r.progress:.0f}%", finish, _relative(r.deadline, now),
            _signed(r.slack), r.state, event or "-",
        ]  # fmt: skip
        if wide:
            cells.append(r.message or "-")
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def render(rows: Sequence[JobRow], output: str, now: float) -> str:
    if output == "json":
        return json.dumps({"jobs": [r.as_dict() for r in rows]}, indent=2)
    if output == "yaml":
        return yaml.safe_dump({"jobs": [r.as_dict() for r in rows]}, sort_keys=False).rstrip()
    if not rows:
        return "No pysched jobs found."
    return render_table(rows, now, wide=output == "wide")


# ----- reading the API


class StatusError(Exception):
    """The API could not be read: one line for the user."""


async def _list(
    client: Any, path: str, query: Mapping[str, str] | None = None, *, served_only: bool = False
) -> list[Mapping[str, Any]]:
    """Every page; `served_only`: nothing when the API is not served (its CRD not installed) or the
    user may not list it (the `view` role does not cover scheduler-plugins' PodGroups): such a list
    only adds a gang's size to its row."""
    items: list[Mapping[str, Any]] = []
    params = {**(query or {}), "limit": PAGE}
    for _ in range(MAX_PAGES):
        resp = await client.request("GET", path, query=params)
        if served_only and resp.status in (403, 404) and not items:
            return []
        if not resp.ok:
            what = path.rsplit("/", 1)[-1]
            raise StatusError(f"cannot list {what}: {resp.message()}")
        items.extend(i for i in resp.body.get("items") or () if isinstance(i, Mapping))
        cont = str((resp.body.get("metadata") or {}).get("continue") or "")
        if not cont:
            break
        params = {**params, "continue": cont}
    return items


async def read_rows(client: Any, namespace: str | None, schedulers: frozenset[str]) -> list[JobRow]:
    scope = f"/namespaces/{namespace}" if namespace else ""
    pods = [
        p for p in await _list(client, f"/api/v1{scope}/pods")
        if str((p.get("spec") or {}).get("schedulerName") or "") in schedulers
    ]  # fmt: skip
    events = await _list(client, f"/apis/events.k8s.io/v1{scope}/events")
    ours = {str((p.get("metadata") or {}).get("uid")) for p in pods}
    events = [e for e in events if str((e.get("regarding") or {}).get("uid")) in ours]
    owner_times, objects = await _job_objects(client, scope, pods)
    return job_rows(pods, events, owner_times, objects)


async def _job_objects(
    client: Any, scope: str, pods: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, float], JobObjects]:
    """The pods' Jobs' creation times (a deadline counts from its Job's) and what their Jobs and
    PodGroups add (`JobObjects`), listed only when some pod may have one."""
    owner_times: dict[str, float] = {}
    minimums: dict[JobKey, int] = {}
    names: dict[JobKey, str] = {}
    if any("job-name" in ((p.get("metadata") or {}).get("labels") or {}) for p in pods):
        for job in await _list(client, f"/apis/batch/v1{scope}/jobs"):
            meta = job.get("metadata") or {}
            created = parse_rfc3339(str(meta.get("creationTimestamp") or ""))
            if meta.get("uid") and created is not None:
                owner_times[str(meta["uid"])] = created
            if (gang := shown_minimum(job)) is not None:
                minimums[job_key(str(meta.get("namespace") or ""), JobSource.BATCH, str(meta.get("name") or ""))] = gang
    for source in _group_sources(pods):
        for group in await _list(client, f"{POD_GROUP_APIS[source][0]}{scope}/podgroups", served_only=True):
            meta = group.get("metadata") or {}
            key = job_key(str(meta.get("namespace") or ""), source, str(meta.get("name") or ""))
            minimums[key] = pod_group_minimum(group, source)
            owner = next(
                (o for o in meta.get("ownerReferences") or () if isinstance(o, Mapping) and o.get("controller")), None
            )
            if owner is not None and owner.get("name"):
                names[key] = str(owner["name"])
    return owner_times, JobObjects(minimums, names)


def _group_sources(raw_pods: Sequence[Mapping[str, Any]]) -> set[JobSource]:
    """The PodGroup APIs some pod may name (only those are listed), from the two fields that name
    one: a look at the raw pods, which `job_rows` parses once, later. Listing one API too many
    costs a request, never a wrong row."""
    found = set()
    for raw in raw_pods:
        spec, meta = raw.get("spec"), raw.get("metadata")
        if isinstance(spec, Mapping) and spec.get("schedulingGroup"):
            found.add(JobSource.WORKLOAD)
        labels = meta.get("labels") if isinstance(meta, Mapping) else None
        if isinstance(labels, Mapping) and POD_GROUP_LABEL in labels:
            found.add(JobSource.POD_GROUP)
    return found


def default_kubeconfig() -> tuple[str, ...]:
    """As kubectl: the files of `$KUBECONFIG` (merged; missing ones skipped, the first named when
    none is there, so that it is told missing), else `~/.kube/config`, else in-cluster (none)."""
    named = list(dict.fromkeys(p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p))
    if named:
        return tuple(p for p in named if os.path.exists(p)) or (named[0],)
    home = Path.home() / ".kube" / "config"
    return (str(home),) if home.is_file() else ()


def context_namespace(kubeconfig: str | Sequence[str], context: str | None) -> str:
    """The namespace of the kubeconfig's context (kubectl's default), else `default`."""
    if not kubeconfig:
        return "default"
    from pysched.backend.live.client import read_kubeconfig

    try:
        config = read_kubeconfig(kubeconfig)
    except (OSError, ValueError):
        return "default"
    if not isinstance(config, Mapping):
        return "default"
    name = context or config.get("current-context")
    for entry in config.get("contexts") or ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            context_entry = entry.get("context")
            namespace = context_entry.get("namespace") if isinstance(context_entry, Mapping) else None
            return namespace if isinstance(namespace, str) and namespace else "default"
    return "default"


@contextlib.asynccontextmanager
async def _client(kubeconfig: Sequence[str], context: str | None) -> AsyncIterator[Any]:
    """The live client, closed afterwards; a kubeconfig it cannot use is a StatusError."""
    from pysched.backend.live.client import KubeConfigError, connect

    try:
        client = await connect(kubeconfig, qps=50, burst=100, context=context)
    except KubeConfigError as err:
        raise StatusError(str(err)) from err
    try:
        yield client
    finally:
        await client.close()


async def status(
    kubeconfig: Sequence[str], context: str | None, namespace: str | None, schedulers: frozenset[str], output: str,
    watch_s: float | None,
) -> int:  # fmt: skip
    async with _client(kubeconfig, context) as client:
        while True:
            rows = await read_rows(client, namespace, schedulers)
            if watch_s is not None and output in ("table", "wide") and sys.stdout.isatty():
                print("\x1b[H\x1b[2J", end="")
            print(render(rows, output, time.time()), flush=True)
            if watch_s is None:
                return 0
            await asyncio.sleep(watch_s)


def explain_text(raw_pod: Mapping[str, Any], raw_pods: Sequence[Mapping[str, Any]],
                 raw_events: Sequence[Mapping[str, Any]], now: float, owner_times: Mapping[str, float] | None = None,
                 objects: JobObjects | None = None) -> str:  # fmt: skip
    """The job of `raw_pod`: its row (as `status` shows it, given the same `owner_times` and
    `objects`), what pysched concluded and measured, then every event on its pods, oldest first."""
    owner_times = owner_times or {}
    pod = pod_from_dict(raw_pod, owner_times)
    ref = job_of(pod)
    members: list[tuple[Mapping[str, Any], PodInfo]] = []
    for raw in raw_pods:
        with contextlib.suppress(*MALFORMED):
            other = pod_from_dict(raw, owner_times)
            other_ref = job_of(other)
            same = other.uid == pod.uid or (ref is not None and other_ref is not None and other_ref.key == ref.key)
            if same and other.namespace == pod.namespace:
                members.append((raw, other))
    names: dict[str, str] = {info.uid: info.name for _, info in members}
    ours = [e for e in raw_events if str((e.get("regarding") or {}).get("uid")) in names]
    rows = job_rows([raw for raw, _ in members], ours, owner_times, objects)
    lines = [render_table(rows, now, wide=False)] if rows else []
    for _, info in sorted(members, key=lambda m: m[1].name):
        deadline, record = condition_of(info, CONDITION), saved_job(info)
        if deadline is None and record is None:
            continue
        lines.append(f"\n{info.name}:")
        if deadline is not None:
            lines.append(
                f"  {deadline.get('reason', '')} ({deadline.get('status', '')}): {deadline.get('message', '')}"
            )
        if record is not None:
            if math.isfinite(record.last_rescale):
                lines.append(
                    f"  last rescale: {_relative(record.last_rescale, now)} ({format_rfc3339(record.last_rescale)})"
                )
            for c in record.counts:
                lines.append(
                    f"  measured at {c.cpus:g} CPUs: {c.step_seconds:.4g} s/step ±{100 * c.rel_sigma:.1f}% "
                    f"over {c.steps:.6g} steps in {duration_words(c.seconds)}"
                )
    lines.append("\nEvents:" if ours else "\nNo events (they expire after an hour).")
    for at, event in sorted(((_event_time(e), e) for e in ours), key=lambda te: te[0]):
        who = names.get(str((event.get("regarding") or {}).get("uid")), "?")
        count = _event_count(event)
        times = f" (x{count})" if count > 1 else ""
        what = f"{event.get('type', '')}  {event.get('reason', '')}{times}: {event.get('note', '')}"
        lines.append(f"  {format_rfc3339(at)}  {who}  {what}")
    return "\n".join(lines)


async def explain(kubeconfig: Sequence[str], context: str | None, namespace: str, name: str) -> int:
    async with _client(kubeconfig, context) as client:
        resp = await client.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        if not resp.ok:
            raise StatusError(f"pod {namespace}/{name}: {resp.message()}")
        pods = await _list(client, f"/api/v1/namespaces/{namespace}/pods")
        events = await _list(client, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
        owner_times, objects = await _job_objects(client, f"/namespaces/{namespace}", pods)
        try:
            print(explain_text(resp.body, pods, events, time.time(), owner_times, objects))
        except MALFORMED as err:
            raise StatusError(f"pod {namespace}/{name} cannot be read: {err}") from err
        return 0
