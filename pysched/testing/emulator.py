"""A Python stand-in for the kubelet of fake nodes.

:class:`KubeletEmulator` watches pods bound to fake nodes (nodes labelled
``pysched.io/fake-node=true`` by default) and writes what a kubelet would write
through ``pods/status``:

* a newly bound pod becomes ``Running`` with ``containerStatuses`` that carry
  ``resources`` and ``allocatedResources`` (so the apiserver accepts in-place
  resizes of it);
* an in-place resize (``pods/{name}/resize`` changed the spec) is actuated: the
  status' ``resources``/``allocatedResources`` take the new values and the
  ``PodResizePending``/``PodResizeInProgress`` conditions are cleared; or, when
  told to, it is left pending with ``PodResizePending`` reason ``Deferred`` or
  ``Infeasible``;
* a pod is completed (``Succeeded``) on request, or after the number of seconds
  in its annotation ``pysched.io/emulate-run-seconds`` (a simple workload model);
* a training job runs on the workload model the simulator uses
  (:mod:`pysched.workload`): a pod annotated ``pysched.io/emulate-model`` (a
  catalogue model name) becomes a :class:`~pysched.workload.job.Job` read from
  its annotations (:mod:`pysched.workload.pod`):

  - ``pysched.io/emulate-model``: the model, e.g. ``lstm`` or ``resnet50``;
  - ``pysched.io/total-steps``: total steps (default: the model's);
  - ``pysched.io/emulate-seed``: seed of the truth draw and the noise (default 0);
  - ``pysched.io/emulate-truth``: a CPU truth override, ``a=A,b=B,p_max=P`` or
    ``t1=T,f=F,p_max=P`` (default: drawn around the model as the simulator draws);
  - ``pysched.io/emulate-batch-size``: a GPU model's table row;
  - ``pysched.io/emulate-noise``: relative step-time noise (default 0.05).

  While the pod runs, the job advances at the speed its actuated CPUs (the
  container statuses' ``resources.requests``) and requested GPUs give, in
  segments shared with the simulator (:mod:`pysched.workload.segment`); it
  writes ``pysched.io/progress`` (``STEPS@RFC3339``) every ``progress_interval``
  emulated seconds (default 60) as the training helper would; an actuated CPU
  resize re-times it (progress kept, or lost plus a 30 s restart when the
  container's cpu ``resizePolicy`` is ``RestartContainer``, which also bumps
  ``restartCount``); the pod is completed when the steps are done. A bad
  annotation is logged and the pod just runs. An emulator restarted under a
  running job resumes from its last progress annotation.
* a multi-pod job's members train as one job (:mod:`pysched.testing.emulator_gangs`):
  only while its minimum members run, at the simulator's gang rates, progress on
  rank 0, every member completed together; restarted under a running gang, it
  resumes from rank 0's last progress; a change of its minimum (an elastic Indexed
  Job scaled: new indexes join, the highest are removed) keeps every step, pauses
  and trains on at the new set's rate (``GangRun.scale``).

Emulated time is wall time times ``time_scale`` (default 1; e.g. 100 in tests or
``pysched dev-cluster up --emulate --emulate-time-scale 100``): run seconds,
progress intervals and step times are all emulated seconds, while progress
timestamps are wall-clock (milliseconds when scaled), as a scheduler on wall
time would see a job that really ran that fast.

Status writes read the pod and ``PUT`` ``pods/{name}/status`` with its
resourceVersion, retrying on conflicts, so they never clobber a newer object.
Run it in a thread (:meth:`start` / :meth:`stop`) or as a process:
``python -m pysched.testing.emulator --kubeconfig PATH [--time-scale X]
[--progress-interval S] [--catalogue FILE]``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import heapq
import itertools
import logging
import math
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from pysched.api.annotations import PROGRESS, PROGRESS_INTERVAL, ProgressReport, format_progress
from pysched.api.containers import restarts_on_cpu_resize
from pysched.api.ids import JobKey
from pysched.api.inputs import out_of_range
from pysched.api.jobs import JobRef, job_of
from pysched.api.objects import pod_from_dict
from pysched.api.resources import CPU, GPU, QuantityError, pod_requests, to_scheduler_units
from pysched.api.times import format_rfc3339
from pysched.testing.controlplane import FAKE_NODE_LABEL
from pysched.testing.emulator_gangs import (
    EmulatedGang,
    PodName,
    Slot,
    Spare,
    new_gang,
    rank_of,
    read_minimum,
    role_of,
)
from pysched.testing.kube import JSON, KubeAPI, KubeAPIError
from pysched.workload.accounting import Accounting
from pysched.workload.catalogue import Catalogue, CatalogueError, builtin_catalogue, load_catalogue
from pysched.workload.gang import Held, Member
from pysched.workload.pod import EMULATE_MODEL, PodJob, job_from_pod
from pysched.workload.progress import MAX_PROGRESS_INTERVAL_S, MIN_PROGRESS_INTERVAL_S, last_write
from pysched.workload.segment import Run, noise_rng, retime, segment_step_seconds, start_run

log = logging.getLogger(__name__)

RUN_SECONDS_ANNOTATION = "pysched.io/emulate-run-seconds"
MAX_TIME_SCALE = 100_000.0  # emulated seconds per wall second: a day in under a second
RESIZE_CONDITIONS = ("PodResizePending", "PodResizeInProgress")
UNKNOWN_MINIMUM_RETRY_S = 30.0  # wall seconds before a job whose minimum was unknown is read again
MAX_REMEMBERED_JOBS = 4096


class ResizeAction(StrEnum):
    ACTUATE = "Actuate"
    DEFER = "Deferred"
    INFEASIBLE = "Infeasible"


def _now() -> str:
    return format_rfc3339(time.time())


def _spec_resources(container: JSON) -> JSON:
    res = container.get("resources") or {}
    out: JSON = {}
    if res.get("requests"):
        out["requests"] = dict(res["requests"])
    if res.get("limits"):
        out["limits"] = dict(res["limits"])
    return out


def _allocatable_subset(requests: JSON) -> JSON:
    return dict(requests)


def _actuated_cpu(pod: JSON) -> float | None:
    """CPUs the containers run with now (status resources), or None before the kubelet reported them."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if not statuses:
        return None
    milli = 0
    for cs in statuses:
        raw = ((cs.get("resources") or {}).get("requests") or {}).get(CPU)
        if raw is not None:
            milli += to_scheduler_units(CPU, raw)
    return milli / 1000


def _progress_steps(pod: JSON) -> int:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(PROGRESS, "")
    steps, _, _ = raw.partition("@")
    return int(steps) if steps.strip().isdigit() else 0


@dataclass(slots=True)
class _Training:
    """A training job the emulator runs: its run on emulated time (`pysched.workload.segment`)."""

    uid: str
    spec: PodJob
    run: Run
    rng: random.Random


class KubeletEmulator:
    """Plays the kubelet for fake nodes. Thread-based; all public methods are thread-safe."""

    def __init__(
        self,
        api: KubeAPI,
        *,
        node_filter: Callable[[JSON], bool] | None = None,
        default_resize_action: ResizeAction = ResizeAction.ACTUATE,
        time_scale: float = 1.0,
        progress_interval: float = PROGRESS_INTERVAL,
        catalogue: Catalogue | None = None,
    ) -> None:
        problem = _settings_problem(time_scale, progress_interval)
        if problem:
            raise ValueError(problem)
        self.api = api
        self.time_scale = float(time_scale)
        self.progress_interval = float(progress_interval)
        self._catalogue = catalogue
        # Emulated seconds count from here: monotonic for timers, wall time for progress stamps.
        self._mono0 = time.monotonic()
        self._wall0 = time.time()
        self._training: dict[tuple[str, str], _Training] = {}
        self._bad: dict[tuple[str, str], str] = {}  # pod -> uid whose annotations were rejected
        self.node_filter = node_filter or (
            lambda node: (node.get("metadata", {}).get("labels") or {}).get(FAKE_NODE_LABEL) == "true"
        )
        self.default_resize_action = default_resize_action
        self._resize_actions: dict[tuple[str, str], ResizeAction] = {}
        self._nodes: dict[str, bool] = {}
        self._node_gpus: dict[str, int] = {}
        self._gangs: dict[JobKey, EmulatedGang] = {}
        # Minimums read, with when an unknown one is asked for again (monotonic seconds).
        self._gang_sizes: dict[JobKey, tuple[int | None, float]] = {}
        self._gang_serials = itertools.count(1)
        self._member_of: dict[PodName, JobKey] = {}
        self.books = Accounting()  # what gangs used of what they held (simulator accounting)
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._timer_thread: threading.Thread | None = None
        self._response: Any = None
        self._timers: list[tuple[float, str, str, str, int, float]] = []  # due, kind, ns, name, version, at
        self._timer_cv = threading.Condition(self._lock)
        self._scheduled: set[tuple[str, str]] = set()
        self.errors: list[str] = []
        self.synced = threading.Event()

    # -- control ---------------------------------------------------------------------------

    def start(self) -> KubeletEmulator:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="kubelet-emulator", daemon=True)
        self._thread.start()
        self._timer_thread = threading.Thread(target=self._run_timers, name="kubelet-emulator-timers", daemon=True)
        self._timer_thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        with self._lock:
            resp = self._response
            self._timer_cv.notify_all()
        if resp is not None:
            with contextlib.suppress(Exception):
                resp.shutdown()
            with contextlib.suppress(Exception):
                resp.close()
        for t in (self._thread, self._timer_thread):
            if t is not None:
                t.join(timeout)
        self._thread = self._timer_thread = None

    def __enter__(self) -> KubeletEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_synced(self, timeout: float = 30.0) -> None:
        if not self.synced.wait(timeout):
            raise TimeoutError("kubelet emulator did not sync its first pod list")

    def set_resize_action(self, namespace: str, name: str, action: ResizeAction | str) -> None:
        """Decide how the next resizes of one pod are handled (re-evaluated at once)."""
        with self._lock:
            self._resize_actions[(namespace, name)] = ResizeAction(action)
        self._resync(namespace, name)

    def defer_resize(self, namespace: str, name: str) -> None:
        self.set_resize_action(namespace, name, ResizeAction.DEFER)

    def reject_resize(self, namespace: str, name: str) -> None:
        self.set_resize_action(namespace, name, ResizeAction.INFEASIBLE)

    def allow_resize(self, namespace: str, name: str) -> None:
        self.set_resize_action(namespace, name, ResizeAction.ACTUATE)

    def complete(self, namespace: str, name: str, *, exit_code: int = 0) -> JSON | None:
        """Finish a running pod: phase ``Succeeded`` (or ``Failed`` if ``exit_code``)."""
        done = self._update_status(namespace, name, lambda pod: self._complete(pod, exit_code))
        with self._lock:
            self._training.pop((namespace, name), None)
        return done

    @property
    def catalogue(self) -> Catalogue:
        with self._lock:
            if self._catalogue is None:
                self._catalogue = builtin_catalogue()
            return self._catalogue

    def emulated_now(self) -> float:
        """Emulated seconds since the emulator was made (wall seconds times ``time_scale``)."""
        return (time.monotonic() - self._mono0) * self.time_scale

    def training(self, namespace: str, name: str) -> Run | None:
        """A copy of a training job's current run (emulated seconds), or None when it is not running."""
        with self._lock:
            t = self._training.get((namespace, name))
            return copy.copy(t.run) if t is not None else None

    def gang_training(self, job: JobKey) -> Run | None:
        """A copy of a gang's current segment (emulated seconds), or None while it does not train."""
        with self._lock:
            gang = self._gangs.get(job)
            run = gang.run.run if gang is not None else None
            return copy.copy(run) if run is not None else None

    # -- watch loop ------------------------------------------------------------------------

    def _set_response(self, resp: Any) -> None:
        with self._lock:
            self._response = resp

    def _run(self) -> None:
        rv: str | None = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    listing = self.api.get("/api/v1/pods", fieldSelector="spec.nodeName!=")
                    rv = listing.get("metadata", {}).get("resourceVersion")
                    for pod in listing.get("items", []):
                        self._handle(pod)
                    self.synced.set()
                for event in self.api.watch(
                    "/api/v1/pods",
                    resource_version=rv,
                    timeout_seconds=30,
                    on_response=self._set_response,
                    fieldSelector="spec.nodeName!=",
                ):
                    if self._stop.is_set():
                        break
                    etype = event.get("type")
                    obj = event.get("object") or {}
                    if etype == "ERROR":
                        if obj.get("code") == 410:
                            rv = None  # expired: relist
                        break
                    new_rv = obj.get("metadata", {}).get("resourceVersion")
                    if new_rv:
                        rv = new_rv
                    if etype in ("ADDED", "MODIFIED"):
                        self._handle(obj)
                    elif etype == "DELETED":
                        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                        minimum = self._minimum_now(key)
                        with self._lock:
                            self._resize_actions.pop(key, None)
                            self._training.pop(key, None)
                            self._bad.pop(key, None)
                            self._leave_gang(key, minimum)
            except Exception as err:
                if self._stop.is_set():
                    break
                msg = f"{type(err).__name__}: {err}"
                log.warning("kubelet emulator: %s", msg)
                with self._lock:
                    self.errors.append(msg)
                    del self.errors[:-50]
                if isinstance(err, KubeAPIError) and err.status == 410:
                    rv = None
                self._stop.wait(0.5)
            finally:
                self._set_response(None)

    def _is_fake_node(self, node_name: str) -> bool:
        with self._lock:
            known = self._nodes.get(node_name)
        if known is not None:
            return known
        try:
            node = self.api.get(f"/api/v1/nodes/{node_name}")
        except KubeAPIError as err:
            if err.status == 404:
                return False
            raise
        ours = bool(self.node_filter(node))
        gpus = ((node.get("status") or {}).get("allocatable") or {}).get(GPU, "0")
        with self._lock:
            self._nodes[node_name] = ours
            self._node_gpus[node_name] = int(gpus) if str(gpus).isdigit() else 0
        return ours

    def _handle(self, pod: JSON) -> None:
        node = pod.get("spec", {}).get("nodeName")
        meta = pod.get("metadata") or {}
        ended = meta.get("deletionTimestamp") or pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
        if ended and "namespace" in meta:
            key = (meta["namespace"], meta["name"])
            self._leave_gang(key, self._minimum_now(key))  # a member that ended or is going
        if not node or ended or not self._is_fake_node(node):
            return
        if self._wanted_status(pod) is not None:
            meta = pod["metadata"]
            updated = self._update_status(meta["namespace"], meta["name"], self._wanted_status)
            if updated is not None:
                pod = updated
        self._maybe_schedule_completion(pod)
        self._track(pod)

    def _resync(self, namespace: str, name: str) -> None:
        try:
            pod = self.api.get_pod(namespace, name)
        except KubeAPIError as err:
            if err.status == 404:
                return
            raise
        self._handle(pod)

    # -- status computation ----------------------------------------------------------------

    def _update_status(
        self, namespace: str, name: str, mutate: Callable[[JSON], JSON | None], attempts: int = 10
    ) -> JSON | None:
        """Read the pod, let ``mutate`` return a new object (or None), PUT pods/status."""
        for _ in range(attempts):
            try:
                pod = self.api.get_pod(namespace, name)
            except KubeAPIError as err:
                if err.status == 404:
                    return None
                raise
            new = mutate(pod)
            if new is None:
                return pod
            try:
                return self.api.put(self.api.pod_path(namespace, name, "status"), new)
            except KubeAPIError as err:
                if err.status == 409:
                    continue
                if err.status == 404:
                    return None
                raise
        raise RuntimeError(f"kubelet emulator: too many conflicts updating {namespace}/{name}")

    def _resize_action(self, pod: JSON) -> ResizeAction:
        meta = pod["metadata"]
        with self._lock:
            return self._resize_actions.get((meta["namespace"], meta["name"]), self.default_resize_action)

    def _wanted_status(self, pod: JSON) -> JSON | None:
        """The pod with the status a kubelet would write now, or None if nothing changes."""
        if not pod.get("spec", {}).get("nodeName"):
            return None
        status = pod.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            return None
        new = copy.deepcopy(pod)
        st = new.setdefault("status", {})
        now = _now()
        containers = new["spec"].get("containers", [])
        old_cs = {c.get("name"): c for c in status.get("containerStatuses") or []}

        if st.get("phase") != "Running" or len(old_cs) != len(containers):
            st["phase"] = "Running"
            st.setdefault("startTime", now)
            st["hostIP"] = "127.0.0.1"
            st["hostIPs"] = [{"ip": "127.0.0.1"}]
            st["containerStatuses"] = [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "containerID": f"emulated://{new['metadata'].get('uid', '')}/{c['name']}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                    "resources": _spec_resources(c),
                    "allocatedResources": _allocatable_subset(_spec_resources(c).get("requests", {})),
                }
                for c in containers
            ]
            conds = [c for c in st.get("conditions") or [] if c.get("type") not in RESIZE_CONDITIONS]
            for ctype in (
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            ):
                conds = [c for c in conds if c.get("type") != ctype]
                conds.append({"type": ctype, "status": "True", "lastTransitionTime": now})
            st["conditions"] = conds
            self._set_observed_generation(new)
            return new

        # Running: compare desired (spec) with actual (status) resources.
        changed = [c for c in containers if _spec_resources(c) != (old_cs.get(c["name"], {}).get("resources") or {})]
        conds = [c for c in st.get("conditions") or []]
        if not changed:
            cleaned = [c for c in conds if c.get("type") not in RESIZE_CONDITIONS]
            if len(cleaned) != len(conds):
                st["conditions"] = cleaned
                return new
            return None
        action = self._resize_action(pod)
        if action is ResizeAction.ACTUATE:
            for cs in st["containerStatuses"]:
                spec_c = next((c for c in containers if c["name"] == cs["name"]), None)
                if spec_c is None:
                    continue
                res = _spec_resources(spec_c)
                old_res = cs.get("resources") or {}
                cpu_changed = any(
                    (res.get(part) or {}).get(CPU) != (old_res.get(part) or {}).get(CPU)
                    for part in ("requests", "limits")
                )
                if cpu_changed and restarts_on_cpu_resize(spec_c):
                    cs["restartCount"] = int(cs.get("restartCount", 0)) + 1
                    cs["state"] = {"running": {"startedAt": now}}
                cs["resources"] = res
                cs["allocatedResources"] = _allocatable_subset(res.get("requests", {}))
            st["conditions"] = [c for c in conds if c.get("type") not in RESIZE_CONDITIONS]
            self._set_observed_generation(new)
            return new
        # Deferred or Infeasible: keep actual/allocated, (re)write PodResizePending.
        pending = next((c for c in conds if c.get("type") == "PodResizePending"), None)
        if pending is not None and pending.get("reason") == action.value:
            return None
        message = (
            "Node didn't have enough capacity (emulated deferral)"
            if action is ResizeAction.DEFER
            else "Node didn't have enough capacity (emulated infeasible resize)"
        )
        conds = [c for c in conds if c.get("type") not in RESIZE_CONDITIONS]
        conds.append(
            {
                "type": "PodResizePending",
                "status": "True",
                "reason": action.value,
                "message": message,
                "lastProbeTime": now,
                "lastTransitionTime": now,
            }
        )
        st["conditions"] = conds
        self._set_observed_generation(new)
        return new

    @staticmethod
    def _set_observed_generation(pod: JSON) -> None:
        gen = pod.get("metadata", {}).get("generation")
        if gen is not None:
            pod["status"]["observedGeneration"] = gen
            for cond in pod["status"].get("conditions") or []:
                cond["observedGeneration"] = gen

    @staticmethod
    def _complete(pod: JSON, exit_code: int) -> JSON | None:
        status = pod.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed") or not pod.get("spec", {}).get("nodeName"):
            return None
        new = copy.deepcopy(pod)
        st = new.setdefault("status", {})
        now = _now()
        st["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        for cs in st.get("containerStatuses") or []:
            started = (cs.get("state") or {}).get("running", {}).get("startedAt", now)
            cs["state"] = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": "Completed" if exit_code == 0 else "Error",
                    "startedAt": started,
                    "finishedAt": now,
                    "containerID": cs.get("containerID", ""),
                }
            }
            cs["ready"] = False
            cs["started"] = False
        conds = [c for c in st.get("conditions") or [] if c.get("type") not in RESIZE_CONDITIONS]
        for cond in conds:
            if cond.get("type") in ("Ready", "ContainersReady"):
                cond["status"] = "False"
                cond["reason"] = "PodCompleted"
                cond["lastTransitionTime"] = now
        st["conditions"] = conds
        return new

    # -- workload model: complete after N seconds -------------------------------------------

    def _maybe_schedule_completion(self, pod: JSON) -> None:
        meta = pod.get("metadata", {})
        raw = (meta.get("annotations") or {}).get(RUN_SECONDS_ANNOTATION)
        if raw is None:
            return
        key = (meta["namespace"], meta["name"])
        try:
            seconds = float(raw)
        except ValueError:
            return
        with self._lock:
            if key in self._scheduled:
                return
            self._scheduled.add(key)
            heapq.heappush(
                self._timers, (time.monotonic() + seconds / self.time_scale, "complete", key[0], key[1], 0, 0.0)
            )
            self._timer_cv.notify_all()

    def _run_timers(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                if not self._timers:
                    self._timer_cv.wait(1.0)
                    continue
                due, kind, ns, name, version, at = self._timers[0]
                delay = due - time.monotonic()
                if delay > 0:
                    self._timer_cv.wait(min(delay, 1.0))
                    continue
                heapq.heappop(self._timers)
                if kind == "complete":
                    self._scheduled.discard((ns, name))
            try:
                if kind == "complete":
                    self.complete(ns, name)
                elif kind == "resync":
                    self._resync(ns, name)
                elif kind == "gang":
                    self._tick_gang(JobKey(name), version, at)
                else:
                    self._tick(ns, name, version, at)
            except Exception as err:
                log.warning("kubelet emulator: %s of %s/%s: %s", kind, ns, name, err)

    # -- workload model: training jobs (pysched.workload) -----------------------------------

    def _track(self, pod: JSON) -> None:
        """Start the training job of a running pod, or re-time it when its actuated CPUs changed."""
        meta = pod.get("metadata") or {}
        if EMULATE_MODEL not in (meta.get("annotations") or {}) or "namespace" not in meta:
            return  # not a training job: nothing to read (and no catalogue to load)
        if (pod.get("status") or {}).get("phase") != "Running":
            return
        key = (meta["namespace"], meta["name"])
        uid = str(meta.get("uid", ""))
        try:
            cpu = _actuated_cpu(pod)
        except QuantityError:
            cpu = None
        if cpu is None:
            return
        try:
            ref = self._gang_ref(pod)
        except _ReadLater:
            return
        if ref is not None:
            self._track_member(pod, ref, cpu)
            return
        with self._lock:
            current = self._training.get(key)
            if current is not None and current.uid != uid:  # recreated under the same name
                del self._training[key]
                current = None
            if self._bad.get(key) == uid:
                return
            if current is not None:
                if cpu != current.run.cpu:
                    now = self.emulated_now()
                    retime(current.run, cpu, now, current.rng, current.spec.noise)
                    self._schedule_tick("tick", key, current.run, now)
                return
        try:
            spec = job_from_pod(pod, self.catalogue)
        except ValueError as err:
            self._refuse(key, uid, f"not a training job: {key[0]}/{key[1]}: {err}")
            return
        if spec is None:
            return
        job = spec.job
        rng = noise_rng(spec.seed, job)
        now = self.emulated_now()
        run = start_run(job, cpu, now, rng, spec.noise)
        resumed = _progress_steps(pod)  # an emulator restarted under a running job picks it up
        if 0 < resumed < job.steps:
            run.seg_steps = resumed
            run.step_s = segment_step_seconds(job, cpu, job.steps - resumed, rng, spec.noise)
        with self._lock:
            if key in self._training:
                return
            self._training[key] = _Training(uid, spec, run, rng)
            self._schedule_tick("tick", key, run, now)

    def _refuse(self, key: tuple[str, str], uid: str, msg: str) -> None:
        """This incarnation of the pod is no training job: logged once, and it just runs."""
        with self._lock:
            self._bad[key] = uid
        self._note_error(msg)

    def _schedule_tick(self, kind: str, key: tuple[str, str], run: Run, now: float, version: int | None = None) -> None:
        """Wake up for the next progress write or the finish, whichever comes first (lock held);
        the timer carries `version` (default: the run's), to be ignored once superseded."""
        interval = self.progress_interval
        if now < run.seg_start:
            next_write = run.seg_start + interval
        else:
            next_write = run.seg_start + interval * (math.floor((now - run.seg_start) / interval) + 1)
        at = min(next_write, run.finish_time())
        if math.isinf(at):
            return  # cannot run on these resources (e.g. GPUs the table does not offer): never progresses
        stamp = run.version if version is None else version
        heapq.heappush(self._timers, (self._mono0 + at / self.time_scale, kind, key[0], key[1], stamp, at))
        self._timer_cv.notify_all()

    def _progress_value(self, steps: int, when: float) -> str:
        wall = self._wall0 + when / self.time_scale
        if self.time_scale == 1:
            return format_progress(steps, wall)
        return f"{steps}@{format_rfc3339(wall, millis=True)}"  # scaled time: whole seconds are too coarse

    def _next_progress(self, run: Run, now: float) -> str | None:
        """The progress annotation due at `now`, or None when the last one still holds (lock held)."""
        when = last_write(run.seg_start, now, self.progress_interval)
        if when is None:
            return None
        candidate = self._progress_value(run.steps_at(when), when)
        if run.progress is not None and candidate == run.progress.text:
            return None
        run.progress = ProgressReport.of_text(candidate)
        return candidate

    def _tick(self, namespace: str, name: str, version: int, at: float) -> None:
        key = (namespace, name)
        with self._lock:
            t = self._training.get(key)
            if t is None or t.run.version != version:
                return  # finished, deleted or re-timed since
            run = t.run
            now = max(self.emulated_now(), at)
            finished = now >= run.finish_time()
            value = None
            if not finished:
                value = self._next_progress(run, now)
                self._schedule_tick("tick", key, run, now)
        if finished:
            try:
                self.complete(namespace, name)
            except Exception:
                with self._lock:  # try again in a second rather than leave the pod running forever
                    heapq.heappush(self._timers, (time.monotonic() + 1.0, "tick", namespace, name, version, at))
                    self._timer_cv.notify_all()
                raise
            return
        if value is not None:
            self._write_progress(namespace, name, t.uid, value)

    def _write_progress(self, namespace: str, name: str, uid: str, value: str) -> None:
        patch = {"metadata": {"uid": uid, "annotations": {PROGRESS: value}}}
        try:
            self.api.patch(self.api.pod_path(namespace, name), patch)
        except KubeAPIError as err:
            if err.status not in (404, 409):  # gone, or replaced under the same name (uid precondition)
                raise

    # -- workload model: multi-pod jobs (pysched.testing.emulator_gangs) --------------------

    def _gang_ref(self, pod: JSON) -> JobRef | None:
        """The pod's job when it is a gang of 2 or more, else None; `_ReadLater` when its minimum
        could not be read now (the pod is looked at again in a second)."""
        try:
            ref = job_of(pod_from_dict(pod))
        except (ValueError, QuantityError):
            return None
        if ref is None:
            return None
        now = time.monotonic()
        meta = pod.get("metadata") or {}
        with self._lock:
            known = self._gang_sizes.get(ref.key)
            gang = self._gangs.get(ref.key)
            # A running pod beyond a full gang: its job may have grown (an elastic scale), read again.
            here = (meta.get("namespace"), meta.get("name"))
            beyond = gang is not None and not gang.done and gang.free_index() is None and here not in gang.members
        if known is not None and (known[0] is not None or known[1] > now) and not beyond:
            size = known[0]
        else:
            try:
                size = read_minimum(self.api, ref)
            except Exception as err:  # an API error: this pod's event must not be lost
                self._note_error(f"{ref.title}: reading its minimum: {type(err).__name__}: {err}")
                meta = pod["metadata"]
                self._after(1.0, "resync", meta["namespace"], meta["name"])
                raise _ReadLater from None
            with self._lock:
                if len(self._gang_sizes) >= MAX_REMEMBERED_JOBS:  # forget jobs that are no gang now
                    self._gang_sizes = {k: v for k, v in self._gang_sizes.items() if k in self._gangs}
                # An unknown minimum (no such object yet) is asked for again after a while.
                self._gang_sizes[ref.key] = (size, now + UNKNOWN_MINIMUM_RETRY_S)
        # A gang scaled down to one member stays the gang it was.
        return ref if size is not None and (size >= 2 or gang is not None) else None

    def _minimum_now(self, key: PodName) -> int | None:
        """The minimum, read again, of the job a member is leaving: the Job controller removing
        the highest indexes after a scale-down is no failure. None when it is no member of a
        training gang or the minimum cannot be read."""
        with self._lock:
            job = self._member_of.get(key)
            gang = self._gangs.get(job) if job is not None else None
            if gang is None or gang.done or key not in gang.members:
                return None
            ref = gang.ref
        try:
            size = read_minimum(self.api, ref)
        except Exception as err:  # a leave then counts as a failure: the safe side
            self._note_error(f"{ref.title}: reading its minimum: {type(err).__name__}: {err}")
            return None
        if size is not None:
            with self._lock:
                self._gang_sizes[ref.key] = (size, time.monotonic() + UNKNOWN_MINIMUM_RETRY_S)
        return size

    def _after(self, seconds: float, kind: str, namespace: str, name: str) -> None:
        with self._lock:
            heapq.heappush(self._timers, (time.monotonic() + seconds, kind, namespace, name, 0, 0.0))
            self._timer_cv.notify_all()

    def _note_error(self, msg: str) -> None:
        log.warning("kubelet emulator: %s", msg)
        with self._lock:
            self.errors.append(msg)
            del self.errors[:-50]

    def _track_member(self, pod: JSON, ref: JobRef, cpu: float) -> None:
        """A running member: join its gang (which trains once its minimum runs), wait as a spare
        when the gang is full, or re-time the gang when the member's actuated CPUs changed."""
        meta = pod["metadata"]
        key: PodName = (meta["namespace"], meta["name"])
        uid = str(meta.get("uid", ""))
        node = str(pod["spec"]["nodeName"])
        try:
            gpu = pod_requests(pod).get(GPU, 0)
        except QuantityError:
            gpu = 0
        held = Held(role_of(pod), cpu, gpu, node)
        with self._lock:
            if self._bad.get(key) == uid:
                return
            current = self._gangs.get(self._member_of.get(key, ref.key))
            seen = current.uid_of(key) if current is not None else None
            if seen is not None and (seen != uid or current is not self._gangs.get(ref.key)):
                self._leave_gang(key)  # recreated under the same name, or moved to another job: it left
            gang = self._gangs.get(ref.key)
            if gang is None:
                size = (self._gang_sizes.get(ref.key) or (None, 0.0))[0] or 0
                try:
                    gang = new_gang(pod, ref, size, self.catalogue, self._node_gpus.get(node, 0))
                except ValueError as err:
                    self._refuse(key, uid, f"not a training gang: {key[0]}/{key[1]}: {err}")
                    return
                if gang is None:
                    return
                gang.serial = next(self._gang_serials)
                self._gangs[ref.key] = gang
            if gang.done:
                return
            now = self.emulated_now()
            self._member_of[key] = ref.key
            minimum = (self._gang_sizes.get(ref.key) or (None, 0.0))[0]
            scaled = minimum is not None and minimum != len(gang.run.gang.members)
            if scaled and minimum is not None:
                self._rescale(gang, minimum, now)
            slot = gang.members.get(key)
            if slot is None and key in gang.spares:
                gang.spares[key] = Spare(uid, rank_of(pod, ref), held)
                if scaled:
                    self._schedule_gang_tick(gang, now)
                return
            if slot is None:
                index = gang.free_index()
                if index is None:  # more pods than the minimum: a spare, until a member leaves
                    gang.spares[key] = Spare(uid, rank_of(pod, ref), held)
                    if scaled:
                        self._schedule_gang_tick(gang, now)
                    return
                gang.members[key] = Slot(uid, index, rank_of(pod, ref))
                resumed = _progress_steps(pod)  # rank 0's, under an emulator restarted mid-run
                fresh = gang.run.run is None and gang.run.trained_s == 0 and gang.run.steps == 0
                if fresh and 0 < resumed < gang.spec.job.steps:
                    gang.run.steps = gang.run.checkpoint = resumed
                gang.run.bind(index, held, now, gang.rng, gang.spec.noise)
            elif slot.index in gang.run.held and cpu != gang.run.held[slot.index].cpu:
                gang.run.resize(slot.index, cpu, now, self.books, gang.rng, gang.spec.noise)
            elif not scaled:
                return
            self._schedule_gang_tick(gang, now)

    def _schedule_gang_tick(self, gang: EmulatedGang, now: float) -> None:
        """(lock held)"""
        run = gang.run.run
        if run is not None:
            self._schedule_tick("gang", (gang.ref.namespace, gang.ref.key), run, now, gang.version())

    def _leave_gang(self, key: PodName, minimum: int | None = None) -> None:
        """A member or spare is gone or ended: the gang pauses back to its checkpoint, and a spare,
        if there is one, takes the member's place. With `minimum` (the job's, read again) below the
        gang's size, the member was removed by a scale-down instead: nothing is lost."""
        with self._lock:
            job = self._member_of.pop(key, None)
            gang = self._gangs.get(job) if job is not None else None
            if gang is None:
                return
            gang.spares.pop(key, None)
            slot = gang.members.pop(key, None)
            if slot is not None and not gang.done:
                now = self.emulated_now()
                if minimum is not None and minimum < len(gang.run.gang.members):
                    self._rescale(gang, minimum, now)
                else:
                    gang.run.leave(slot.index, now, self.books)
                    self._fill_from_spares(gang, now)
                self._schedule_gang_tick(gang, now)
            if not gang.members and not gang.spares:
                del self._gangs[gang.ref.key]
                self._gang_sizes.pop(gang.ref.key, None)  # a new incarnation reads its minimum again

    def _rescale(self, gang: EmulatedGang, size: int, now: float) -> None:
        """The job's minimum changed: an elastic scale, played as `GangRun.scale` (steps kept, a
        pause). The first `size` members by rank stay, renumbered in rank order (the Job controller
        removes the highest indexes); the others wait as spares until they go; spares fill new
        places (lock held)."""
        ranked = sorted(gang.members, key=lambda pod: gang.members[pod].rank)
        renumber = {gang.members[pod].index: i for i, pod in enumerate(ranked[:size])}
        for pod in ranked[size:]:
            slot = gang.members.pop(pod)
            held = gang.run.held.get(slot.index)
            if held is not None:
                gang.spares[pod] = Spare(slot.uid, slot.rank, held)
        for pod in ranked[:size]:
            gang.members[pod].index = renumber[gang.members[pod].index]
        members = tuple(Member(f"{gang.ref.name}-{i}", "", 0, "0") for i in range(size))
        new = dataclasses.replace(gang.run.gang, members=members)
        gang.run.scale(new, now, self.books, gang.rng, gang.spec.noise, renumber)
        self._fill_from_spares(gang, now)

    def _fill_from_spares(self, gang: EmulatedGang, now: float) -> None:
        """Free places of the gang taken by its spares, lowest rank first (lock held)."""
        while (index := gang.free_index()) is not None and (spare := gang.take_spare()) is not None:
            name, found = spare
            gang.members[name] = Slot(found.uid, index, found.rank)
            gang.run.bind(index, found.held, now, gang.rng, gang.spec.noise)

    def _tick_gang(self, job: JobKey, version: int, at: float) -> None:
        """Write the gang's progress on rank 0, or complete every member once its steps are done."""
        value, reporter = None, None
        with self._lock:
            gang = self._gangs.get(job)
            if gang is None:
                return
            if not gang.done:
                run = gang.run.run
                if run is None or gang.version() != version:
                    return  # paused, re-timed or replaced since
                now = max(self.emulated_now(), at)
                if now >= run.finish_time():
                    gang.run.close(now, self.books)
                    gang.done = True
                else:
                    value = self._next_progress(run, now)
                    rank0 = gang.reporter()
                    if rank0 is not None:
                        reporter = (rank0, gang.members[rank0].uid)
                    self._schedule_gang_tick(gang, now)
            pods = [*gang.members, *gang.spares] if gang.done else []
        for namespace, name in pods:
            try:
                self.complete(namespace, name)
            except Exception:
                with self._lock:  # try again in a second rather than leave members running forever
                    heapq.heappush(self._timers, (time.monotonic() + 1.0, "gang", namespace, job, version, at))
                    self._timer_cv.notify_all()
                raise
        if value is not None and reporter is not None:
            (namespace, name), uid = reporter
            self._write_progress(namespace, name, uid, value)


class _ReadLater(Exception):
    """A job's minimum could not be read now: the pod is looked at again shortly."""


def _settings_problem(time_scale: float, progress_interval: float) -> str | None:
    """The emulator's numbers out of range, as `--flag: must be ...`, or None."""
    for flag, problem in (
        ("--time-scale", out_of_range(time_scale, 0, MAX_TIME_SCALE, above=True)),
        ("--progress-interval", out_of_range(progress_interval, MIN_PROGRESS_INTERVAL_S, MAX_PROGRESS_INTERVAL_S)),
    ):
        if problem:
            return f"{flag}: {problem}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pysched.testing.emulator", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--time-scale", type=float, default=1.0, help="emulated seconds per wall second (default 1)")
    parser.add_argument(
        "--progress-interval",
        type=float,
        default=PROGRESS_INTERVAL,
        help=f"emulated seconds between progress writes (default {PROGRESS_INTERVAL:g})",
    )
    parser.add_argument("--catalogue", type=Path, default=None, help="a model catalogue merged over the built-ins")
    args = parser.parse_args(argv)
    problem = _settings_problem(args.time_scale, args.progress_interval)
    if problem:
        parser.error(problem)
    try:
        catalogue = load_catalogue(args.catalogue) if args.catalogue is not None else None
    except CatalogueError as err:
        parser.error(str(err))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    api = KubeAPI.from_kubeconfig(args.kubeconfig)
    emulator = KubeletEmulator(
        api, time_scale=args.time_scale, progress_interval=args.progress_interval, catalogue=catalogue
    )
    done = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    emulator.start()
    log.info("kubelet emulator running against %s", api.server)
    done.wait()
    emulator.stop()
    api.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
