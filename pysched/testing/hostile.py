"""Hypothesis strategies for hostile cluster input: pods and nodes as the API (or a careless
hand) could write them, about half valid and half broken in every field pysched reads.

The fuzz tests feed these through the simulated backend (and a smaller corpus through a real
apiserver) and require that nothing escapes: each pod is bound, refused by a plugin, or reported
as invalid, and the last-resort guard never fires.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from pysched.api.annotations import (
    AUTOSCALE,
    CONTAINER,
    CPU_MAX,
    CPU_MIN,
    DEADLINE,
    PROGRESS,
    TOTAL_STEPS,
    URGENCY,
)
from pysched.api.times import format_rfc3339

NOW = 1_796_000_000.0  # 2026-11-30: the fuzz's clock starts here

# Quantities in every form Kubernetes writes, and many it refuses or that no node could hold.
VALID_CPU = ["100m", "500m", "1", "2", "1.5", "0.25", "4", "8", "1e3", "250m", "+1", ".5"]
VALID_MEMORY = ["64Mi", "1Gi", "512M", "2G", "1e9", "100Ki", "1.5Gi", "0", "4096"]
HOSTILE_QUANTITY = [
    "1Ei",
    "9223372036854775807",
    "1e30",
    "1e999999999",
    "1e-999999999",
    "-1",
    "abc",
    "1Gib",
    "",
    " ",
    "9" * 5000,
    "\u0661\u0662",  # Arabic-Indic digits
    "1e",
    "0x10",
    "inf",
    "NaN",
    "1.2.3",
    "٣m",
]
WEIRD_VALUES: list[Any] = [None, [], {}, ["1"], {"a": 1}, True, 1e300, float("inf"), float("nan"), -5, 2**70]


def quantity(valid: list[str], hostile: bool = True) -> st.SearchStrategy[Any]:
    if not hostile:
        return st.sampled_from(valid)
    return st.one_of(
        st.sampled_from(valid),
        st.sampled_from(valid),
        st.sampled_from(HOSTILE_QUANTITY),
        st.sampled_from(WEIRD_VALUES),
        st.text(st.sampled_from("0123456789.eEmkKMGiT+-"), max_size=12),
    )


def _time(offset: float) -> str:
    return format_rfc3339(NOW + offset)


GOOD_DEADLINES = st.one_of(
    st.sampled_from(["45m", "6h", "1h30m", "90s", "2h", "30s", "100h"]),
    st.floats(-7200, 86400 * 3).map(_time),
)
DEADLINES = st.one_of(
    GOOD_DEADLINES,
    st.sampled_from(
        [
            "99999999999999999999h",
            "\u0661\u0662h",
            "9999-12-31T23:59:59-23:59",
            "0001-01-01T00:00:00Z",
            "2026-11-30",
            "",
            "h",
            "1.5.5h",
            "x" * 200_000,
            "1" * 5000 + "h",
            "2026-11-30T12:00:00",  # no zone
        ]
    ),
)
GOOD_STEPS = st.integers(1, 100_000).map(str)
STEPS = st.one_of(
    GOOD_STEPS,
    st.sampled_from(["\u00b2", "0", "-5", "1e3", "9" * 5000, str(2**53 + 1), " 100 ", "", "1_000", "\u0661\u0662"]),
)
GOOD_PROGRESS = st.builds(lambda n, t: f"{n}@{_time(t)}", st.integers(0, 100_000), st.floats(-3600, 0))
PROGRESS_VALUES = st.one_of(
    GOOD_PROGRESS,
    st.sampled_from(
        [
            "1" * 4301 + "@2026-11-30T12:00:00Z",
            "5@" + "9" * 200_000,
            "x" * 200_000,
            "@",
            "12",
            "12@",
            "-3@2026-11-30T12:00:00Z",
            "\u00b2@2026-11-30T12:00:00Z",
            "10@9999-12-31T23:59:59Z",
            "10@2026-11-30T12:00:00+23:59",
        ]
    ),
)
GOOD_CPU_BOUNDS = st.sampled_from(["1", "2", "4", "500m", "8", "16"])
CPU_BOUNDS = st.one_of(
    GOOD_CPU_BOUNDS,
    st.sampled_from(["1e9", "1e999999999", "9" * 5000, "0", "-2", "abc", "1Ei"]),
)
LABEL_KEYS = st.sampled_from(["zone", "tier", "gpu", "app", "kubernetes.io/hostname", "x"])
LABEL_VALUES = st.sampled_from(["a", "b", "c", "", "1", "10", "yes"])


@st.composite
def contract_annotations(draw: st.DrawFn, hostile: bool = True) -> dict[str, Any]:
    """The workload contract's annotations; with `hostile`, any of them may be malformed."""
    notes: dict[str, Any] = {}
    for key, good, bad in (
        (DEADLINE, GOOD_DEADLINES, DEADLINES),
        (TOTAL_STEPS, GOOD_STEPS, STEPS),
        (PROGRESS, GOOD_PROGRESS, PROGRESS_VALUES),
        (CPU_MIN, GOOD_CPU_BOUNDS, CPU_BOUNDS),
        (CPU_MAX, GOOD_CPU_BOUNDS, CPU_BOUNDS),
        (AUTOSCALE, st.sampled_from(["true", "false"]), st.sampled_from(["true", "false", "maybe", ""])),
        (CONTAINER, st.just("main"), st.sampled_from(["main", "other", ""])),
        (URGENCY, st.sampled_from(["urgent", "relaxed"]), st.sampled_from(["urgent", "relaxed", "asap"])),
    ):
        if draw(st.booleans()):
            notes[key] = draw(bad if hostile else good)
    if hostile and draw(st.integers(0, 19)) == 0:
        notes[draw(LABEL_KEYS)] = draw(st.sampled_from(WEIRD_VALUES))  # not a string
    return notes


@st.composite
def requirement(draw: st.DrawFn, hostile: bool = True) -> dict[str, Any]:
    operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] + ["Near", ""] * hostile))
    if operator in ("Exists", "DoesNotExist") and not hostile:
        return {"key": draw(LABEL_KEYS), "operator": operator}
    if operator in ("Gt", "Lt") and not hostile:
        return {"key": draw(LABEL_KEYS), "operator": operator, "values": [str(draw(st.integers(0, 20)))]}
    weird = st.sampled_from(["x1", "99999999999999999999999"])
    values = draw(st.lists(st.one_of(LABEL_VALUES, weird) if hostile else LABEL_VALUES, min_size=1, max_size=3))
    return {"key": draw(LABEL_KEYS), "operator": operator, "values": values}


@st.composite
def hostile_pod(draw: st.DrawFn, index: int, scheduler: str = "pysched", *, hostile: bool = True) -> dict[str, Any]:
    """One pod as the API could serve it; with `hostile`, any field may be broken, without it
    every field is valid (such a pod must be bound or refused by a plugin, never reported invalid)."""
    resources: Any = {
        "requests": {"cpu": draw(quantity(VALID_CPU, hostile)), "memory": draw(quantity(VALID_MEMORY, hostile))}
    }
    if hostile and draw(st.integers(0, 9)) == 0:
        resources = draw(st.sampled_from(WEIRD_VALUES))
    elif draw(st.booleans()):
        resources["limits"] = dict(resources["requests"])
    container: dict[str, Any] = {"name": "main", "image": "trainer", "resources": resources}
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [container]}
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=2))
    if draw(st.booleans()):
        spec["tolerations"] = [
            {
                "key": draw(LABEL_KEYS),
                "operator": draw(st.sampled_from(["Equal", "Exists"] + ["Bogus"] * hostile)),
                "value": draw(LABEL_VALUES),
                "effect": draw(st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute", ""])),
            }
        ]
    if draw(st.booleans()):
        terms = draw(st.lists(st.lists(requirement(hostile), min_size=1, max_size=2), min_size=1, max_size=2))
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
                }
            }
        }
    if draw(st.integers(0, 9)) == 0:
        spec["priority"] = draw(st.sampled_from([0, 1000, -10, 2**31 - 1]))
    if hostile and draw(st.integers(0, 14)) == 0:
        spec["containers"] = draw(st.sampled_from(WEIRD_VALUES))
    meta: dict[str, Any] = {
        "name": f"fuzz-{index}",
        "namespace": draw(st.sampled_from(["default", "team-a"])),
        "uid": f"uid-{index}",
        "creationTimestamp": _time(-draw(st.integers(0, 3600))),
        "annotations": draw(contract_annotations(hostile)),
        "labels": draw(st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=2)),
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


@st.composite
def hostile_node(draw: st.DrawFn, index: int) -> dict[str, Any]:
    allocatable: Any = {
        "cpu": draw(st.one_of(st.sampled_from(["4", "8", "16", "32", "96"]), quantity(VALID_CPU))),
        "memory": draw(st.one_of(st.sampled_from(["16Gi", "64Gi", "256Gi"]), quantity(VALID_MEMORY))),
        "pods": draw(st.sampled_from(["110", "10", "0", "1e30", "abc"])),
    }
    if draw(st.integers(0, 3)) == 0:
        allocatable["nvidia.com/gpu"] = draw(st.sampled_from(["8", "4", "0", "1Ei"]))
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["taints"] = [
            {
                "key": draw(LABEL_KEYS),
                "value": draw(LABEL_VALUES),
                "effect": draw(st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"])),
            }
        ]
    if draw(st.integers(0, 9)) == 0:
        spec["unschedulable"] = True
    labels = draw(st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=3))
    labels["kubernetes.io/hostname"] = f"node-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{index}", "labels": labels},
        "spec": spec,
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


# Hostile files, for tests of the bounded readers (`pysched.api.inputs`).


def alias_bomb(levels: int = 9, fan: int = 10, top: str = "bomb") -> str:
    """YAML "billion laughs": anchors `l0`..`l{levels}`, each a list of `fan` aliases of the one
    below, then `top: *l{levels}`; expanded, fan**levels strings. A few hundred bytes of text."""
    lines = ['l0: &l0 ["lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan)}]" for i in range(1, levels + 1)]
    return "\n".join([*lines, f"{top}: *l{levels}"]) + "\n"
