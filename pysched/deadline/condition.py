"""What Autoscale keeps in the `pysched.io/Deadline` pod condition, so that a new leader resumes.

The message is for people first (`kubectl describe pod`: what happened, the predicted finish
against the deadline), then what a new leader needs, in a form both can read:

    on track at 4 CPUs: predicted finish 2026-11-30T14:02:10Z vs deadline 2026-11-30T15:00:00Z;
    measured 2 CPUs 0.51234 s/step ±3.10% (4570 steps in 2341 s), 4 CPUs 0.27 s/step ±2.00%
    (1200 steps in 324 s); lastRescale=1764500000

`measured` is the speed summary per CPU count that the fitted model rests on
(`JobModel.restore` takes it back), `lastRescale` keeps the cooldown, the reason keeps a demotion
(`DeadlineInfeasible`), and the predicted finish seeds the slack metric until the next prediction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pysched.api.objects import PodInfo
from pysched.api.times import format_rfc3339, parse_rfc3339
from pysched.deadline.predictor import CountStats

CONDITION = "pysched.io/Deadline"
DEMOTED_REASON = "DeadlineInfeasible"  # the deadline cannot be met: ordered as best-effort
REJECTED_REASON = "DeadlineRejected"  # not admitted: meeting it would make an admitted job miss; best-effort
ADMITTED_REASON = "DeadlineAdmitted"  # admitted after it waited for room in the plan
ON_TRACK_REASON = "OnTrack"  # the job meets its deadline at the CPUs it has
RESCALED_REASON = "Rescaled"  # the job was resized toward its deadline
MAX_COUNTS = 4  # the counts with the most measured time: keeps the message short

_NUM = r"[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?"
_COUNT = re.compile(rf"({_NUM}) CPUs? ({_NUM}) s/step ±({_NUM})% \(({_NUM}) steps in ({_NUM}) s\)")
_LAST_RESCALE = re.compile(r"lastRescale=(\d+)")
_FINISH = re.compile(r"predicted finish (\S+Z)")


def message_time(t: float) -> str:
    """A time for messages; "unknown" for a prediction that has none."""
    return format_rfc3339(t) if math.isfinite(t) else "unknown"


@dataclass(frozen=True, slots=True)
class SavedJob:
    """The condition as a previous leader (or this one) wrote it."""

    status: str
    reason: str
    message: str
    last_rescale: float  # -inf: never rescaled
    finish: float | None
    counts: tuple[CountStats, ...]


def saved_job(pod: PodInfo) -> SavedJob | None:
    for cond in (pod.raw.get("status") or {}).get("conditions") or ():
        if cond.get("type") != CONDITION:
            continue
        message = str(cond.get("message", ""))
        rescale = _LAST_RESCALE.search(message)
        finish = _FINISH.search(message)
        counts = tuple(
            CountStats(float(c), float(t), float(sigma) / 100, float(seconds), float(steps), 1)
            for c, t, sigma, steps, seconds in _COUNT.findall(message)
        )
        return SavedJob(
            status=str(cond.get("status", "")),
            reason=str(cond.get("reason", "")),
            message=message,
            last_rescale=float(rescale.group(1)) if rescale else -math.inf,
            finish=parse_rfc3339(finish.group(1)) if finish else None,
            counts=tuple(s for s in counts if math.isfinite(s.step_seconds)),
        )
    return None


def measured_text(counts: Sequence[CountStats]) -> str:
    kept = sorted(counts, key=lambda s: s.seconds, reverse=True)[:MAX_COUNTS]
    parts = [
        f"{s.cpus:g} CPUs {s.step_seconds:.6g} s/step ±{100 * s.rel_sigma:.2f}% "
        f"({s.steps:.6g} steps in {s.seconds:.6g} s)"
        for s in sorted(kept, key=lambda s: s.cpus)
    ]
    return "measured " + ", ".join(parts) if parts else ""


def condition_message(
    what: str, finish: float | None, deadline: float, counts: Sequence[CountStats], last_rescale: float
) -> str:
    parts = [
        f"{what}: predicted finish {message_time(finish)} vs deadline {message_time(deadline)}"
        if finish is not None and math.isfinite(finish)
        else f"{what}: deadline {message_time(deadline)}"
    ]
    measured = measured_text(counts)
    if measured:
        parts.append(measured)
    if math.isfinite(last_rescale):
        parts.append(f"lastRescale={last_rescale:.0f}")
    return "; ".join(parts)


def demoted_by_condition(pod: PodInfo) -> bool:
    """A previous leader (or this one) demoted the pod: read back from its `pysched.io/Deadline`."""
    for cond in (pod.raw.get("status") or {}).get("conditions") or ():
        if cond.get("type") == CONDITION and cond.get("reason") in (DEMOTED_REASON, REJECTED_REASON):
            return True
    return False
