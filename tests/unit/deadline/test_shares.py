"""One node's room shared by its running CPU jobs: deadline order, spares only where a share
fits, and nobody taken below its own minimum share."""

from hypothesis import given
from hypothesis import strategies as st

from pysched.api.ids import PodKey
from pysched.deadline.shares import EPSILON, CpuClaim, share_room


def test_free_room_goes_to_the_earliest_deadline_first() -> None:
    claims = [CpuClaim(PodKey("ns/late"), 300.0, want=2, short=2), CpuClaim(PodKey("ns/soon"), 100.0, want=2, short=2)]
    grants = share_room(claims, free=3)
    assert grants.given == {"ns/soon": 2, "ns/late": 1} and not grants.taken


def test_spares_come_from_jobs_at_risk_first_then_the_latest_deadline() -> None:
    claims = [
        CpuClaim(PodKey("ns/asks"), 100.0, want=3, short=3),
        CpuClaim(PodKey("ns/later"), 500.0, spare=2),
        CpuClaim(PodKey("ns/latest"), 900.0, spare=1),
        CpuClaim(PodKey("ns/lost"), 50.0, spare=1, at_risk=True),
    ]
    grants = share_room(claims, free=0)
    assert grants.given == {"ns/asks": 3}
    assert grants.taken == {"ns/lost": 1, "ns/latest": 1, "ns/later": 1}


def test_a_job_whose_share_cannot_fit_takes_only_what_is_free() -> None:
    claims = [CpuClaim(PodKey("ns/asks"), 100.0, want=2, short=6), CpuClaim(PodKey("ns/other"), 500.0, spare=3)]
    grants = share_room(claims, free=1)
    assert grants.given == {"ns/asks": 1} and not grants.taken
    # With one more CPU spare the whole share fits (1 free + 4 spare + 1 later): the step is served.
    claims[1] = CpuClaim(PodKey("ns/other"), 500.0, spare=5)
    assert share_room(claims, free=1).given == {"ns/asks": 2}


amounts = st.floats(min_value=0, max_value=16, allow_nan=False)


@st.composite
def claims_of(draw: st.DrawFn) -> list[CpuClaim]:
    found = []
    for i in range(draw(st.integers(0, 8))):
        deadline = draw(st.floats(min_value=0, max_value=1e4))
        if draw(st.booleans()):
            want = draw(amounts)
            found.append(CpuClaim(PodKey(f"ns/{i}"), deadline, want=want, short=want + draw(amounts)))
        else:
            found.append(CpuClaim(PodKey(f"ns/{i}"), deadline, spare=draw(amounts), at_risk=draw(st.booleans())))
    return found


@given(claims_of(), amounts)
def test_nothing_is_overcommitted_or_taken_beyond_what_a_job_spares(claims: list[CpuClaim], free: float) -> None:
    grants = share_room(claims, free)
    by_key = {c.key: c for c in claims}
    assert sum(grants.given.values()) <= free + sum(grants.taken.values()) + 1e-6
    for key, amount in grants.given.items():
        assert 0 < amount <= by_key[key].want + EPSILON
    for key, amount in grants.taken.items():
        assert by_key[key].want <= 0 and 0 < amount <= by_key[key].spare + EPSILON
    assert sum(grants.taken.values()) <= sum(grants.given.values()) + 1e-6  # nothing taken for nobody


@given(claims_of())
def test_with_spares_enough_for_every_share_every_step_is_served(claims: list[CpuClaim]) -> None:
    asks = [c for c in claims if c.want > 0]
    spare = sum(c.short for c in asks) + 1
    grants = share_room([*claims, CpuClaim(PodKey("ns/rich"), 0.0, spare=spare)], free=0)
    for claim in asks:
        if claim.want > EPSILON:
            assert abs(grants.given[claim.key] - claim.want) < 1e-6
