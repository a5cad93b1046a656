"""Times written as the API writes them."""

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.times import format_rfc3339, parse_rfc3339


@given(st.floats(-1e9, 2.5e11))
@settings(max_examples=500, deadline=None, derandomize=True)
def test_a_time_is_written_to_its_second_as_datetime_writes_it(epoch: float) -> None:
    # The date and minute are remembered per minute: each second must still come out its own.
    for t in (epoch, epoch + 1, epoch + 59.5, epoch + 60):
        written = datetime.fromtimestamp(t // 1, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert format_rfc3339(t) == written
        assert format_rfc3339(t, millis=True) == f"{written[:-1]}.{int((t % 1) * 1000):03d}Z"
        if t >= 0:
            assert parse_rfc3339(written) == t // 1
