"""The API server's `/version` against the oldest Kubernetes pysched runs on."""

from pysched.backend.live.version import version_problem


def test_servers_older_than_in_place_resize_ga_are_refused_with_their_version() -> None:
    assert version_problem({"major": "1", "minor": "36", "gitVersion": "v1.36.3"}) is None
    assert version_problem({"major": "1", "minor": "35+", "gitVersion": "v1.35.0-eks-1"}) is None
    assert version_problem({"major": "2", "minor": "0"}) is None
    old = version_problem({"major": "1", "minor": "34+", "gitVersion": "v1.34.2-gke.1200"})
    assert old == (
        "pysched needs Kubernetes 1.35 or later (in-place pod resize is GA there); the API server is v1.34.2-gke.1200"
    )
    assert version_problem({"major": "1", "minor": "9"}) is not None


def test_a_server_that_hides_its_version_is_not_refused() -> None:
    for body in ({}, {"major": "", "minor": ""}, {"major": "one", "minor": "35"}, {"major": "1", "minor": "x" * 200}):
        assert version_problem(body) is None, body
