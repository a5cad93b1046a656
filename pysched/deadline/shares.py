"""How the running CPU jobs on one node share its room: the deadline plan's rules on CPUs.

Each job's *minimum satisfactory share* is the fewest CPUs that finish it by its deadline (the
predictor's `choose`: for a job that runs now every count starts now, so on one node what the
earlier deadlines leave is the room minus their shares, and `choose` bounded by that room is
`planner.minimum_share`). Jobs that need more than they hold are served in deadline order, from
what is free first, then from what others can spare: a job above its own minimum share gives the
surplus (it still meets its deadline), and a job no count saves gives what it holds above its
floor (it runs best-effort). Spares go to a job only when its whole share then fits; otherwise it
takes only what is free, as before. No job is ever taken below its own minimum share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pysched.api.ids import PodKey

EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class CpuClaim:
    """One running job on one node at a reconcile, in CPUs."""

    key: PodKey
    deadline: float
    want: float = 0.0  # CPUs more it asks for now (its next step toward its minimum share)
    short: float = 0.0  # CPUs more its whole minimum share needs (>= want)
    spare: float = 0.0  # CPUs it can give back and keep its share (or, at risk, its floor)
    at_risk: bool = False  # no count meets its deadline: its spare goes first


@dataclass(frozen=True, slots=True)
class Grants:
    given: Mapping[PodKey, float]  # CPUs each asking job may grow by now
    taken: Mapping[PodKey, float]  # CPUs each sparing job gives back now


def share_room(claims: Sequence[CpuClaim], free: float) -> Grants:
    """Serve the asking jobs in deadline order (ties by key) from `free`, then from the spares of
    the others: at-risk jobs first, then the latest deadline first."""
    free = max(0.0, free)
    spares = {c.key: c.spare for c in claims if c.spare > EPSILON and c.want <= 0}
    donors = sorted(
        (c for c in claims if c.key in spares), key=lambda c: (not c.at_risk, -c.deadline, c.key)
    )  # fmt: skip
    given: dict[PodKey, float] = {}
    taken: dict[PodKey, float] = {}
    for claim in sorted((c for c in claims if c.want > EPSILON), key=lambda c: (c.deadline, c.key)):
        grown = min(claim.want, free)
        free -= grown
        rest = claim.want - grown
        if rest > EPSILON and claim.short - grown <= sum(spares.values()) + EPSILON:
            for donor in donors:  # the whole share fits: the step's rest comes from the spares
                give = min(rest, spares[donor.key])
                if give <= EPSILON:
                    continue
                spares[donor.key] -= give
                taken[donor.key] = taken.get(donor.key, 0.0) + give
                grown += give
                rest -= give
                if rest <= EPSILON:
                    break
        if grown > EPSILON:
            given[claim.key] = grown
    return Grants(given, taken)
