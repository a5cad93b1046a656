"""Label keys and values, as apimachinery validates them: the one check every reader of a selector,
an affinity term or a spread constraint uses."""

import pytest

from pysched.api.affinity import parse_pod_affinity
from pysched.api.labels import dns_name, label_key_problem, label_value_problem
from pysched.api.spread import spread_constraints

GOOD_KEYS = ["app", "a", "A-b_c.d", "example.com/app", "k8s.io/x", "a" * 63, f"{'b' * 253}/c"]
# Which part is wrong: the name, or the prefix before the '/'.
# fmt: off
BAD_KEYS = [("", "name"), ("-app", "name"), ("app-", "name"), ("a b", "name"), ("a" * 64, "name"), ("app\n", "name"),
            ("x/\n", "name"), ("/app", "prefix"), ("Example.com/app", "prefix"), ("ex_ample.com/app", "prefix")]
# fmt: on
GOOD_VALUES = ["", "web", "v1.2_3-x", "a" * 63]
BAD_VALUES = ["-web", "web.", "a b", "a/b", "a" * 64, "web\n"]


@pytest.mark.parametrize("key", GOOD_KEYS)
def test_good_keys_pass(key: str) -> None:
    assert label_key_problem(key) is None


@pytest.mark.parametrize(("key", "part"), BAD_KEYS)
def test_bad_keys_are_refused_naming_the_part(key: str, part: str) -> None:
    problem = label_key_problem(key)
    assert problem is not None and problem.startswith("label key ") and f"{part} part must be" in problem


@pytest.mark.parametrize("value", GOOD_VALUES)
def test_good_values_pass(value: str) -> None:
    assert label_value_problem(value) is None


@pytest.mark.parametrize("value", BAD_VALUES)
def test_bad_values_are_refused(value: str) -> None:
    problem = label_value_problem(value)
    assert problem is not None and problem.startswith("label value ")


def test_a_trailing_newline_is_no_label_in_a_spread_constraint_or_an_affinity_term() -> None:
    """'$' matches before a final newline: both readers took 'web\\n' for a valid value."""
    (constraint,) = spread_constraints(
        [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
          "labelSelector": {"matchLabels": {"app": "web\n"}}}]
    )  # fmt: skip
    assert "label value" in constraint.problem
    term = {"labelSelector": {"matchLabels": {"app\n": "web"}}, "topologyKey": "zone"}
    affinity = parse_pod_affinity(
        {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}, "ns", {}
    )
    assert affinity is not None and affinity.problem is not None and "label key" in affinity.problem


def test_dns_names() -> None:
    assert dns_name("team-a") and dns_name("a.b-c.d", subdomain=True)
    assert not dns_name("a.b") and not dns_name("A") and not dns_name("") and not dns_name("a" * 64)
    assert not dns_name("a..b", subdomain=True) and not dns_name("a" * 254, subdomain=True)
