"""The live backend keeps the selectors PodTopologySpread's default constraints read: Services,
ReplicationControllers, ReplicaSets and StatefulSets, from their informers."""

from typing import Any

from pysched.backend.live.cluster import LiveCluster
from pysched.testing.scripted import ScriptedApi

SERVICES, RCS = "/api/v1/services", "/api/v1/replicationcontrollers"
RSS, STS = "/apis/apps/v1/replicasets", "/apis/apps/v1/statefulsets"


class Quiet:
    def __getattr__(self, name: str) -> Any:
        return lambda *args: None


def _obj(name: str, spec: dict[str, Any], namespace: str = "ns", version: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": version}, "spec": spec}


async def test_selectors_follow_adds_updates_and_deletes() -> None:
    api = ScriptedApi({SERVICES: [_obj("web", {"selector": {"app": "web"}}), _obj("headless", {})]})
    backend = LiveCluster(api)
    await backend.start(Quiet())
    assert backend.service_selectors("ns") == [{"app": "web"}]
    assert backend.service_selectors("elsewhere") == []
    await api.send(RCS, "ADDED", _obj("rc", {"selector": {"app": "old"}}))
    await api.send(RSS, "ADDED", _obj("rs", {"selector": {"matchLabels": {"app": "web", "hash": "1"}}}))
    sts = {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}}
    await api.send(STS, "ADDED", _obj("db", sts))
    assert backend.controller_selector("ns", "ReplicationController", "rc") == {"matchLabels": {"app": "old"}}
    assert backend.controller_selector("ns", "ReplicaSet", "rs") == {"matchLabels": {"app": "web", "hash": "1"}}
    assert backend.controller_selector("ns", "StatefulSet", "db") == sts["selector"]
    assert backend.controller_selector("ns", "ReplicaSet", "db") is None  # kinds are apart
    await api.send(SERVICES, "MODIFIED", _obj("web", {"selector": {"app": "web2"}}, version="2"))
    assert backend.service_selectors("ns") == [{"app": "web2"}]
    await api.send(SERVICES, "DELETED", _obj("web", {}, version="3"))
    await api.send(RSS, "DELETED", _obj("rs", {}, version="2"))
    assert backend.service_selectors("ns") == []
    assert backend.controller_selector("ns", "ReplicaSet", "rs") is None
    await backend.stop()
