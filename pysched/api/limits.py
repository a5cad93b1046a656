"""Bounds on the values pysched reads from the API or from a file.

A value beyond them is refused where it is parsed (an event on the pod, one line from the CLI),
so nothing downstream computes with it: sums of requests stay inside int64 node tables, step
counts inside 16 digits (far below int()'s 4,300-digit limit), times inside what RFC 3339 and `datetime` can write.
"""

from __future__ import annotations

import reprlib

MAX_UNITS = 2**53  # scheduler units of one resource (millicores, bytes): exact in float64; x100 fits int64
MAX_STEPS = 10**16 - 1  # steps of a training job: 16 digits, what the progress admission policy admits
MAX_EPOCH = 253402300799.0  # 9999-12-31T23:59:59Z, the last second RFC 3339 can write
MIN_EPOCH = -62135596800.0  # 0001-01-01T00:00:00Z, the first
MAX_VALUE_CHARS = 64  # one quantity, time, duration, step count or progress value
MAX_SEED = 2**32 - 1  # numpy's global seeding (Stable-Baselines3), gymnasium's spaces and torch take no more
MAX_EXPONENT = 40  # 1e40 of anything is beyond MAX_UNITS; smaller exponents round to one unit
# A pod bound to a node is read with this bound on its lists (host ports, volumes, inter-pod
# affinity terms, selector requirements and values) in place of the tighter ones pysched places pods
# under: what a pod another scheduler placed holds and forbids counts on its node whatever its
# size, and no object the apiserver stores (etcd keeps at most 1.5 MiB) has a longer list.
PLACED_LIST_LIMIT = 1 << 20


SHOWN_CHARS = 80  # a value quoted in a message is cut to this
EVENT_NOTE_LIMIT = 1024  # bytes of an event's note: events.k8s.io/v1 refuses longer ones

_repr = reprlib.Repr()  # bounded work on any value: a 200 KB string or a deep YAML tree alike
_repr.maxstring = _repr.maxother = SHOWN_CHARS
_repr.maxlevel, _repr.maxlist, _repr.maxdict, _repr.maxtuple = 3, 6, 6, 6


def clip(value: object, limit: int = SHOWN_CHARS) -> str:
    """`repr(value)` as messages quote it: at most `limit` characters; a cut string says how long
    it was (a 200 KB value is not echoed into an event or a log line)."""
    if not isinstance(value, str):
        text = _repr.repr(value)
        return text if len(text) <= limit else text[: limit - 3] + "..."
    shown = repr(value[: limit + 2])
    if len(value) <= limit and len(shown) <= limit:
        return shown
    suffix = f"... ({len(value)} chars)"
    return shown[: max(limit - len(suffix), 8)] + suffix


def truncate_note(note: str) -> str:
    """An event's note within EVENT_NOTE_LIMIT bytes, cut as kube-scheduler cuts a FailedScheduling
    note (its text, then " ..."); the pod's condition keeps the whole text."""
    data = note.encode()
    if len(data) <= EVENT_NOTE_LIMIT:
        return note
    suffix = " ..."
    return data[: EVENT_NOTE_LIMIT - len(suffix)].decode(errors="ignore") + suffix
