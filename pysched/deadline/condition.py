"""The two pod conditions a deadline job carries, written through `pods/status`.

`pysched.io/Deadline` is for people. Its status is True while the job is predicted to finish by
its deadline, and once it met it; False while it is predicted to miss (demoted as infeasible, not
admitted) and once it missed. Its reason says what pysched last did or concluded (`OnTrack`,
`DeadlineAtRisk`, `Rescaled`, `DeadlineInfeasible`, `DeadlineRejected`, `DeadlineAdmitted`, finally
`DeadlineMet` or `DeadlineMissed`), and its message says it in words:

    on track: finishes in 18m (07:33 UTC), 10m before the deadline, at 2 CPUs

`pysched.io/State` is for programs (a new leader, `pysched status`): status True, the same reason,
and as message one versioned JSON object (`state_message`): the predicted finish and its standard
deviation, the deadline, the CPUs, the last rescale (the cooldown), the speed measured per CPU
count (the fitted model rests on it; `JobModel.restore` takes it back) and, once the job ended,
its verdict. A leader of
the previous version kept that state in the Deadline message itself; it is still read back.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pysched.api.limits import MAX_EPOCH, MAX_STEPS, MIN_EPOCH
from pysched.api.objects import PodInfo
from pysched.api.times import format_rfc3339, parse_rfc3339
from pysched.deadline.predictor import CountStats

CONDITION = "pysched.io/Deadline"
STATE_CONDITION = "pysched.io/State"
STATE_VERSION = 1
MAX_STATE_CHARS = 4096  # a State message longer than this was not written by pysched: ignored

DEMOTED_REASON = "DeadlineInfeasible"  # the deadline cannot be met: ordered as best-effort
REJECTED_REASON = "DeadlineRejected"  # not admitted: meeting it would make an admitted job miss; best-effort
ADMITTED_REASON = "DeadlineAdmitted"  # admitted after it waited for room in the plan
ON_TRACK_REASON = "OnTrack"  # the job meets its deadline at the CPUs it has
# It needs more CPUs than it has to meet its deadline with the predictor's margin, and its node has
# none to add now (the status still follows the central prediction).
AT_RISK_REASON = "DeadlineAtRisk"
RESCALED_REASON = "Rescaled"  # the job was resized toward its deadline
INVALID_PROGRESS_REASON = "InvalidProgress"  # a running job's progress report cannot be used (told once per text)
MET_REASON = "DeadlineMet"  # final: it Succeeded by its deadline
MISSED_REASON = "DeadlineMissed"  # final: it ended after its deadline, or Failed
VERDICT_REASONS = (MET_REASON, MISSED_REASON)
MAX_COUNTS = 4  # the counts with the most measured time: keeps the state short
# The ranges a kept summary's numbers are read within: a millicore to a million CPUs, a microsecond
# to four months a step, a relative spread up to 100, up to 30 years measured.
STATE_CPUS = (0.001, 1e6)
STATE_STEP_SECONDS = (1e-6, 1e7)
STATE_REL_SIGMA = (0.0, 100.0)
STATE_SECONDS = (1e-6, 1e9)


def message_time(t: float) -> str:
    """A time for messages; "unknown" for a prediction that has none."""
    return format_rfc3339(t) if math.isfinite(t) else "unknown"


def duration_words(seconds: float) -> str:
    """`45s`, `18m`, `2h 5m`, `3d 4h`: two units at most, as a person reads a countdown."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h}h {m}m" if m else f"{h}h"
    d, h = divmod(s // 3600, 24)
    return f"{d}d {h}h" if h else f"{d}d"


def clock_words(t: float, now: float) -> str:
    """`07:33 UTC` on the same UTC day as `now`, else with the date; a time past year 9999 (a
    prediction of a job of 10^16 steps at a step a minute) is "after 9999", as gmtime takes no more."""
    if not math.isfinite(t):
        return "unknown"
    if not MIN_EPOCH <= t <= MAX_EPOCH:
        return "after 9999" if t > MAX_EPOCH else "before 0001"
    stamp, today = time.gmtime(t), time.gmtime(min(max(now, MIN_EPOCH), MAX_EPOCH))
    hm = f"{stamp.tm_hour:02d}:{stamp.tm_min:02d} UTC"
    if stamp[:3] == today[:3]:
        return hm
    return f"{stamp.tm_year:04d}-{stamp.tm_mon:02d}-{stamp.tm_mday:02d} {hm}"


def against_deadline(t: float, deadline: float) -> str:
    """`10m before the deadline` / `4m after the deadline`."""
    if t <= deadline:
        return f"{duration_words(deadline - t)} before the deadline"
    return f"{duration_words(t - deadline)} after the deadline"


def forecast_words(finish: float | None, deadline: float, cpus: float | None, now: float) -> str:
    """The Deadline message's sentence for a running job."""
    at = f", at {cpus:g} CPUs" if cpus is not None else ""
    if finish is None or not math.isfinite(finish):
        due = f"in {duration_words(deadline - now)}" if deadline > now else f"{duration_words(now - deadline)} ago"
        return f"no prediction yet; the deadline is {due} ({clock_words(deadline, now)}){at}"
    when = f"in {duration_words(finish - now)}" if finish > now else "now"
    return f"finishes {when} ({clock_words(finish, now)}), {against_deadline(finish, deadline)}{at}"


def verdict_words(met: bool, ended_at: float, deadline: float, succeeded: bool, now: float) -> str:
    """The Deadline message of a job that ended."""
    how = "finished" if succeeded else "failed"
    head = "met" if met else "missed"
    return f"{head}: {how} {against_deadline(ended_at, deadline)} ({clock_words(ended_at, now)})"


EARLIEST_FINISH = "the earliest deadline it would be admitted with is"
# An older pysched's words for the same (a condition written before an upgrade).
_EARLIEST = re.compile(
    f"(?:{re.escape(EARLIEST_FINISH)}|the earliest finish alongside the admitted jobs is)"
    r" (?:never|in [^(;:]*\((\S{1,40})\))"
)


def earliest_finish_words(earliest: float, now: float) -> str:
    """A rejected job's message part: the earliest deadline the plan would have admitted it with
    (`planner.admit`; inf: never)."""
    if not math.isfinite(earliest):
        return f"{EARLIEST_FINISH} never"
    return f"{EARLIEST_FINISH} in {duration_words(earliest - now)} ({format_rfc3339(earliest)})"


def earliest_finish_of(message: str) -> float | None:
    """What `earliest_finish_words` wrote into a message (inf: never); None when it says nothing."""
    found = _EARLIEST.search(message[:MAX_STATE_CHARS])
    if found is None:
        return None
    return math.inf if found.group(1) is None else parse_rfc3339(found.group(1))


@dataclass(frozen=True, slots=True)
class JobRecord:
    """The State condition's content."""

    reason: str
    what: str = ""  # the human part of the Deadline message before its forecast
    deadline: float | None = None
    finish: float | None = None  # central predicted finish at `cpus`
    cpus: float | None = None
    last_rescale: float = -math.inf  # -inf: never rescaled
    counts: tuple[CountStats, ...] = ()
    verdict: str | None = None  # "met" / "missed" once the job ended
    ended_at: float | None = None
    counted: bool = False  # this pod carries its job's verdict in pysched_deadlines_total (a gang's first to end)
    finish_sigma: float | None = None  # seconds: one standard deviation of the predicted finish


def _time_or_none(t: float | None) -> str | None:
    return format_rfc3339(t) if t is not None and math.isfinite(t) else None


def state_message(record: JobRecord) -> str:
    """Versioned JSON, keys sorted, counts with the most measured time first, at most MAX_COUNTS."""
    kept = sorted(record.counts, key=lambda s: s.seconds, reverse=True)[:MAX_COUNTS]
    body: dict[str, Any] = {
        "version": STATE_VERSION,
        "reason": record.reason,
        "what": record.what,
        "deadline": _time_or_none(record.deadline),
        "finish": _time_or_none(record.finish),
        "cpus": record.cpus,
        "lastRescale": _time_or_none(record.last_rescale),
        "finishSigmaSeconds": None if record.finish_sigma is None else round(record.finish_sigma, 1),
        "measured": [
            {
                "cpus": s.cpus,
                "stepSeconds": float(f"{s.step_seconds:.6g}"),
                "relSigma": round(s.rel_sigma, 5),
                "steps": float(f"{s.steps:.6g}"),
                "seconds": float(f"{s.seconds:.6g}"),
                **({"estimate": True} if s.estimate else {}),
            }
            for s in sorted(kept, key=lambda s: s.cpus)
        ],
    }
    if record.verdict is not None:
        body.update(verdict=record.verdict, endedAt=_time_or_none(record.ended_at), counted=record.counted)
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _time_field(body: Mapping[str, Any], key: str) -> float | None:
    value = body.get(key)
    return parse_rfc3339(value) if isinstance(value, str) else None


def _number(value: object, low: float = -math.inf, high: float = math.inf) -> float | None:
    """A number within [low, high]; None for anything else (NaN and infinities included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and low <= value <= high else None


def _counts(raw: object) -> tuple[CountStats, ...]:
    """What a previous leader measured; a summary out of the ranges any real job has (another
    writer's, or a corrupted one) is dropped, as the predictor could not compute with it."""
    found: list[CountStats] = []
    for item in raw[: 4 * MAX_COUNTS] if isinstance(raw, list) else ():
        if not isinstance(item, dict):
            continue
        cpus = _number(item.get("cpus"), *STATE_CPUS)
        step = _number(item.get("stepSeconds"), *STATE_STEP_SECONDS)
        sigma = _number(item.get("relSigma"), *STATE_REL_SIGMA)
        steps = _number(item.get("steps"), 0.0, MAX_STEPS)
        seconds = _number(item.get("seconds"), *STATE_SECONDS)
        if None in (cpus, step, sigma, steps, seconds):
            continue
        estimate = item.get("estimate") is True
        found.append(CountStats(cpus, step, sigma, seconds, steps, 1, estimate))  # type: ignore[arg-type]
    return tuple(found)


def parse_state(message: str) -> JobRecord | None:
    """The State message back; None when it is not one pysched of this or an earlier version
    wrote (too long, not JSON, a newer version, fields of the wrong type)."""
    if len(message) > MAX_STATE_CHARS:
        return None
    try:
        body = json.loads(message)
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("version"), int) or body["version"] > STATE_VERSION:
        return None
    reason, what, verdict = body.get("reason"), body.get("what", ""), body.get("verdict")
    if not isinstance(reason, str) or not isinstance(what, str) or verdict not in (None, "met", "missed"):
        return None
    last_rescale = _time_field(body, "lastRescale")
    return JobRecord(
        reason=reason,
        what=what,
        deadline=_time_field(body, "deadline"),
        finish=_time_field(body, "finish"),
        cpus=_number(body.get("cpus"), *STATE_CPUS),
        last_rescale=-math.inf if last_rescale is None else last_rescale,
        counts=_counts(body.get("measured")),
        verdict=verdict,
        ended_at=_time_field(body, "endedAt"),
        counted=body.get("counted") is True,
        finish_sigma=_number(body.get("finishSigmaSeconds"), 0.0, STATE_SECONDS[1]),
    )


def _conditions(pod: PodInfo) -> Sequence[Mapping[str, Any]]:
    conditions = (pod.raw.get("status") or {}).get("conditions") or ()
    return [c for c in conditions if isinstance(c, Mapping)]


def condition_of(pod: PodInfo, kind: str) -> Mapping[str, Any] | None:
    return next((c for c in _conditions(pod) if c.get("type") == kind), None)


# The previous version's Deadline message: "<what>: predicted finish T vs deadline T; measured 2
# CPUs 0.51 s/step ±3.10% (4570 steps in 2341 s), ...; lastRescale=1764500000".
_NUM = r"[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?"
_COUNT = re.compile(rf"({_NUM}) CPUs? ({_NUM}) s/step ±({_NUM})% \(({_NUM}) steps in ({_NUM}) s\)")
_LAST_RESCALE = re.compile(r"lastRescale=(\d+)")
_FINISH = re.compile(r"predicted finish (\S+Z)")


def _from_message(reason: str, message: str) -> JobRecord:
    rescale = _LAST_RESCALE.search(message[:MAX_STATE_CHARS])
    finish = _FINISH.search(message[:MAX_STATE_CHARS])
    counts = tuple(
        CountStats(float(c), float(t), float(sigma) / 100, float(seconds), float(steps), 1)
        for c, t, sigma, steps, seconds in _COUNT.findall(message[:MAX_STATE_CHARS])
    )
    return JobRecord(
        reason=reason,
        what=message.partition(":")[0],
        finish=parse_rfc3339(finish.group(1)) if finish else None,
        last_rescale=float(rescale.group(1)) if rescale else -math.inf,
        counts=tuple(s for s in counts if _finite(s)),
    )


def _finite(stats: CountStats) -> bool:
    """`_NUM` reads 1e999 as inf: such a count is nothing a look or a line can use."""
    return all(map(math.isfinite, (stats.cpus, stats.step_seconds, stats.rel_sigma, stats.seconds, stats.steps)))


def saved_job(pod: PodInfo) -> JobRecord | None:
    """What a previous leader (or this one) kept of the job: its State condition, else what the
    previous version wrote into the Deadline message."""
    state = condition_of(pod, STATE_CONDITION)
    if state is not None:
        record = parse_state(str(state.get("message", "")))
        if record is not None:
            return record
    deadline = condition_of(pod, CONDITION)
    if deadline is None:
        return None
    return _from_message(str(deadline.get("reason", "")), str(deadline.get("message", "")))


def demoted_by_condition(pod: PodInfo) -> bool:
    """A previous leader (or this one) demoted the pod: read back from its `pysched.io/Deadline`."""
    cond = condition_of(pod, CONDITION)
    return cond is not None and cond.get("reason") in (DEMOTED_REASON, REJECTED_REASON)
