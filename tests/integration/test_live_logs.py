"""What `pysched run` logs, against the real kube-apiserver: one structured line per decision at
info (the events it posts, a gang let through Permit), one per scheduling cycle at debug."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pysched.api.jobs import JobSource, job_key
from pysched.testing import KubeAPI, LocalControlPlane, wait_for
from pysched.testing.scheduler import (
    create_pods,
    gang_member,
    list_pods,
    namespace_nodes,
    pod_for,
    start_scheduler,
    write_profile,
)

pytestmark = pytest.mark.integration


def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # not ours (a Python warning, a traceback line)
        if isinstance(entry, dict):
            out.append(entry)
    return out


@pytest.mark.parametrize("level", ["debug", "info"])
def test_each_decision_is_one_structured_line_and_each_cycle_one_at_debug(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, tmp_path: Path, level: str
) -> None:
    name = f"pysched-{namespace}"
    config = write_profile(tmp_path / "profiles.yaml", name)
    scheduler = start_scheduler(control_plane, name, config=config, args=[f"--log-level={level}"])
    try:
        with namespace_nodes(kube, namespace, 2):
            gang = [gang_member(f"w{i}", name, namespace, "train", 2) for i in range(2)]
            create_pods(kube, namespace, [pod_for("solo", name, namespace, "1"), *gang])
            wait_for(
                lambda: list_pods(kube, namespace),
                lambda pods: len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods),
                timeout=30,
                what="all three bound",
            )
            log_path = scheduler.process.log_path
            wait_for(
                lambda: [e for e in _lines(log_path) if e.get("event") == "Scheduled"],
                lambda scheduled: len(scheduled) == 3,
                timeout=10,
                what="a Scheduled line per pod",
            )
    finally:
        assert scheduler.stop() == 0, scheduler.log()
    entries = _lines(log_path)
    # What the informers listed was kept out of the collector's walks before the first cycle.
    assert [e["frozen_objects"] > 0 for e in entries if e.get("event") == "ready"] == [True]
    scheduled = {e["pod"]: e for e in entries if e.get("event") == "Scheduled"}
    assert set(scheduled) == {f"{namespace}/solo", f"{namespace}/w0", f"{namespace}/w1"}
    assert all(e["level"] == "info" and e["type"] == "Normal" and "timestamp" in e for e in scheduled.values())
    assert scheduled[f"{namespace}/solo"]["job"] is None
    train = job_key(namespace, JobSource.PYSCHED, "train")
    assert scheduled[f"{namespace}/w0"]["job"] == scheduled[f"{namespace}/w1"]["job"] == train
    # The first member waited at Permit for the second; it was let through with its job named.
    allowed = [e for e in entries if e.get("event") == "allowed at permit"]
    assert [e["job"] for e in allowed] == [train]
    cycles = [e for e in entries if e.get("event") == "scheduling cycle"]
    if level == "debug":
        placed = [e for e in cycles if e["result"] in ("assumed", "waits")]
        assert {e["pod"] for e in placed} == set(scheduled) and all(e["node"] for e in placed)
        # A member tried before its sibling existed may have failed a cycle first: it says why.
        assert all(e["why"] for e in cycles if e not in placed)
        assert all(e["level"] == "debug" and e["profile"] == name for e in cycles)
    else:
        assert cycles == []
    assert not [e for e in entries if e.get("level") in ("warning", "error")], entries
