"""Bounds on the values pysched reads from the API or from a file.

A value beyond them is refused where it is parsed (an event on the pod, one line from the CLI),
so nothing downstream computes with it: sums of requests stay inside int64 node tables, step
counts inside 16 digits (far below int()'s 4,300-digit limit), times inside what RFC 3339 and `datetime` can write.
"""

from __future__ import annotations

MAX_UNITS = 2**53  # scheduler units of one resource (millicores, bytes): exact in float64; x100 fits int64
MAX_STEPS = 10**16 - 1  # steps of a training job: 16 digits, what the progress admission policy admits
MAX_EPOCH = 253402300799.0  # 9999-12-31T23:59:59Z, the last second RFC 3339 can write
MAX_VALUE_CHARS = 64  # one quantity, time, duration, step count or progress value
MAX_EXPONENT = 40  # 1e40 of anything is beyond MAX_UNITS; smaller exponents round to one unit


def clip(text: str, limit: int = 80) -> str:
    """A value as messages quote it: repr, cut to `limit` characters (a 200 KB value is not echoed)."""
    shown = repr(text)
    if len(shown) <= limit:
        return shown
    suffix = f"... ({len(text)} chars)"
    return shown[: max(limit - len(suffix), 8)] + suffix
