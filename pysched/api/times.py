"""Times as the API writes and reads them (RFC 3339, UTC), to and from epoch seconds."""

from __future__ import annotations

import functools
import math
import time
from datetime import UTC, datetime

from pysched.api.limits import MAX_EPOCH, MAX_VALUE_CHARS, MIN_EPOCH


def format_rfc3339(epoch: float, *, millis: bool = False) -> str:
    """UTC, as the API writes times: whole seconds (once per progress write: the date and minute
    are formatted once per minute), or with milliseconds (the emulator's scaled time, where whole
    seconds would be too coarse). A time past the API's range (a prediction of a job that will
    never finish) is written as the range's end, as gmtime takes no more."""
    if not MIN_EPOCH <= epoch <= MAX_EPOCH:  # NaN included
        epoch = MIN_EPOCH if epoch < MIN_EPOCH else MAX_EPOCH
    second = math.floor(epoch)  # what gmtime takes of a float
    whole = f"{_minute(second // 60)}{second % 60:02d}"
    return f"{whole}.{int((epoch % 1) * 1000):03d}Z" if millis else f"{whole}Z"


@functools.lru_cache(maxsize=256)
def _minute(minute: int) -> str:
    t = time.gmtime(minute * 60)
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:"


def parse_rfc3339(value: str) -> float | None:
    """Epoch seconds of an RFC 3339 time with a zone; None when malformed, longer than
    MAX_VALUE_CHARS or past MAX_EPOCH (a time the API could not write back)."""
    text = value.strip()
    if len(text) > MAX_VALUE_CHARS or not text.isascii():
        return None
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        return None
    epoch = stamp.timestamp()
    return epoch if epoch <= MAX_EPOCH else None


def parse_time(value: str | None) -> float:
    """RFC 3339 to epoch seconds; 0 when absent."""
    if not value:
        return 0.0
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def format_micro_time(epoch: float) -> str:
    """metav1.MicroTime as the API writes it."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
