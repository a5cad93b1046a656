from pathlib import Path

import pytest

from pysched.framework.config import ConfigError, load_config, parse_config
from pysched.plugins import default_registry
from pysched.testing.hostile import alias_bomb

GOOD = """
profiles:
  - schedulerName: a
    plugins:
      queueSort: [{name: PrioritySort}]
      filter: [{name: NodeResourcesFit}, {name: TaintToleration}]
      score: [{name: MostAllocated, weight: 3}, {name: TaintToleration}]
      bind: [{name: DefaultBinder}]
    pluginConfig:
      - name: MostAllocated
        args: {cpuWeight: 2, memoryWeight: 1}
  - schedulerName: b
    plugins:
      queueSort: [{name: PrioritySort}]
      bind: [{name: DefaultBinder}]
"""


def _load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "profiles.yaml"
    path.write_text(text)
    return load_config(path, default_registry())


def test_valid_file_loads_every_profile(tmp_path: Path) -> None:
    config = _load(tmp_path, GOOD)
    a = config.profile("a")  # type: ignore[attr-defined]
    assert a is not None and [r.weight for r in a.enabled("score")] == [3, 1]
    assert a.plugin_args["MostAllocated"] == {"cpuWeight": 2, "memoryWeight": 1}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("NodeResourcesFit}, {name: TaintToleration}]", "NoSuchPlugin}]"),
            r"profiles\[0\]\.plugins\.filter\[0\]\.name: unknown plugin 'NoSuchPlugin'",
        ),
        (
            ("weight: 3", "weight: -2"),
            r"profiles\[0\]\.plugins\.score\[0\]\.weight: must be an integer from 1 to 100, got -2",
        ),
        (
            ("cpuWeight: 2", "cpuWeight: many"),
            r"profiles\[0\]\.pluginConfig\[0\]\.args\.cpuWeight: expected int, got 'many'",
        ),
        (("cpuWeight: 2", "cpuWeigth: 2"), r"args\.cpuWeigth: unknown argument \(accepted: cpuWeight, memoryWeight\)"),
        (("cpuWeight: 2", "cpuWeight: 500"), r"args\.cpuWeight: must be an integer from 0 to 100, got 500"),
        (
            ("      bind: [{name: DefaultBinder}]\n    pluginConfig", "    pluginConfig"),
            r"profiles\[0\]\.plugins\.bind: at least one bind plugin is required",
        ),
        (("schedulerName: b", "schedulerName: a"), r"profiles\[1\]\.schedulerName: 'a' is used by two profiles"),
        (("filter: [", "filtre: ["), r"profiles\[0\]\.plugins\.filtre: unknown extension point"),
        (
            ("bind: [{name: DefaultBinder}]\n    pluginConfig", "bind: [{name: MostAllocated}]\n    pluginConfig"),
            r"plugin MostAllocated does not implement bind \(it serves: score\)",
        ),
        # kube-scheduler decodes strictly: nothing written is quietly dropped or read another way.
        (("args: {cpuWeight", "arg: {cpuWeight"), r"pluginConfig\[0\]\.arg: unknown key \(accepted: name, args\)"),
        (
            ("filter: [{name: NodeResourcesFit}, {name: TaintToleration}]", "filter: {}"),
            r"plugins\.filter: must be a list",
        ),
        (
            ("filter: [{name: NodeResourcesFit}, {name: TaintToleration}]", "filter: false"),
            r"plugins\.filter: must be a list",
        ),
        (("args: {cpuWeight: 2, memoryWeight: 1}", "args: false"), r"pluginConfig\[0\]\.args: must be a mapping"),
        (("\nprofiles:", "\napiVersion: v1\nprofiles:"), r"apiVersion: must be kubescheduler\.config\.k8s\.io/v1"),
        (("\nprofiles:", "\nkind: Pod\nprofiles:"), r"kind: must be KubeSchedulerConfiguration"),
        (
            (
                "      bind: [{name: DefaultBinder}]\n    pluginConfig",
                "      bind: [{name: DefaultBinder}]\n      bind: []\n    pluginConfig",
            ),
            r"line \d+: invalid YAML: key 'bind' is given twice",
        ),
    ],
)
def test_broken_files_name_the_file_the_field_and_what_is_accepted(
    tmp_path: Path, edit: tuple[str, str], message: str
) -> None:
    old, new = edit
    assert old in GOOD
    with pytest.raises(ConfigError, match=message) as info:
        _load(tmp_path, GOOD.replace(old, new, 1))
    assert str(info.value).startswith(str(tmp_path / "profiles.yaml"))
    assert "\n" not in str(info.value)


def test_profiles_must_share_the_queue_sort(tmp_path: Path) -> None:
    registry = default_registry()
    # Only one queue-sort plugin exists in-tree; register a second one to exercise the rule.
    from dataclasses import dataclass
    from typing import Any, ClassVar

    from pysched.framework.registry import NoArgs, PluginSpec

    @dataclass(frozen=True)
    class Fifo:
        NAME: ClassVar[str] = "Fifo"

        def sort_key(self, queued: Any) -> tuple[Any, ...]:
            return (queued.added,)

    registry.register(PluginSpec("Fifo", NoArgs, lambda args, handle: Fifo(), Fifo))
    path = tmp_path / "p.yaml"
    path.write_text(
        GOOD.replace("queueSort: [{name: PrioritySort}]\n      bind", "queueSort: [{name: Fifo}]\n      bind")
    )
    with pytest.raises(ConfigError, match=r"profiles\[1\]\.plugins\.queueSort: all profiles share one queue"):
        load_config(path, registry)


def test_kube_schedulers_api_version_and_kind_are_accepted(tmp_path: Path) -> None:
    header = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    assert _load(tmp_path, header + GOOD).profile("a") is not None  # type: ignore[attr-defined]


def test_profiles_must_give_their_shared_queue_sort_the_same_args(tmp_path: Path) -> None:
    """One queue for every profile: another profile's args would be ignored (kube-scheduler refuses)."""
    laxity = GOOD.replace("PrioritySort", "DeadlineLaxity")
    laxity += "    pluginConfig:\n      - {name: DeadlineLaxity, args: {priorStepSeconds: 1}}\n"  # profile b's
    message = r"profiles\[1\]\.pluginConfig: all profiles share one queue and must give DeadlineLaxity the same args"
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, laxity)


def _planning(name: str, *reconcile: str) -> dict[str, object]:
    return {
        "schedulerName": name,
        "plugins": {
            "queueSort": [{"name": "PrioritySort"}],
            "bind": [{"name": "DefaultBinder"}],
            "reconcile": [{"name": plugin} for plugin in reconcile],
        },
    }


@pytest.mark.parametrize(("planner", "kind"), [("Autoscale", "CPUs"), ("ElasticScale", "GPUs")])
def test_profiles_run_together_plan_cpus_and_gpus_in_one_profile(planner: str, kind: str) -> None:
    """Each planner plans its own profile's jobs only: two would admit or grow jobs against the
    same GPUs or CPUs (both admitted, one then missing its deadline)."""
    registry = default_registry()
    profiles = [_planning("a", planner), _planning("b", planner)]
    message = rf"profiles\[1\]\.plugins: {planner} plans the cluster's {kind} .* in one profile only"
    with pytest.raises(ConfigError, match=message):
        parse_config({"profiles": profiles}, "f.yaml", registry)
    apart = [_planning("a", "Autoscale"), _planning("b", "ElasticScale"), _planning("c")]
    assert len(parse_config({"profiles": apart}, "f.yaml", registry).profiles) == 3


def test_a_profile_that_leaves_out_default_filters_is_told() -> None:
    """Plugin lists replace the defaults (kube-scheduler merges them): `pysched run` logs which
    filters of the `default` profile each profile leaves out."""
    import yaml

    from pysched.framework.config import parse_config, unchecked_constraints
    from pysched.plugins.builtin import builtin_config

    registry = default_registry()
    builtin = builtin_config(registry)
    assert unchecked_constraints(builtin, builtin) == []  # every built-in profile checks them all
    packing = parse_config(yaml.safe_load(GOOD), "t", registry)
    (first, second) = unchecked_constraints(packing, builtin)
    assert first[0] == "a" and "InterPodAffinity" in first[1] and "NodeResourcesFit" not in first[1]
    assert second[0] == "b" and "NodeResourcesFit" in second[1]


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"profiles\.yaml: line \d+: invalid YAML"):
        _load(tmp_path, "profiles:\n  - schedulerName: a\n    plugins: {queueSort: [\n")


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml", default_registry())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (alias_bomb() + GOOD, r"profiles\.yaml: line \d+: invalid YAML: aliases expand to more than 10,000 nodes"),
        ("[" * 100_000, r"profiles\.yaml: line 1: invalid YAML: .*nest"),
        (
            GOOD.replace("weight: 3", "weight: [" + ", ".join(["x" * 1000] * 50) + "]"),
            r"weight: must be an integer from 1 to 100, got \[",
        ),
        (GOOD.replace("cpuWeight: 2", "cpuWeight: .nan"), r"cpuWeight: expected a finite int below 2\*\*63"),
        (GOOD.replace("cpuWeight: 2", "cpuWeight: " + "9" * 30), r"cpuWeight: expected a finite int below 2\*\*63"),
        (
            GOOD.replace(
                "    pluginConfig:\n      - name: MostAllocated\n        args: {cpuWeight: 2, memoryWeight: 1}\n",
                "    pluginConfig: 5\n",
            ),
            r"profiles\[0\]\.pluginConfig: must be a list",
        ),
        (
            GOOD.replace("    pluginConfig:\n      - name", "    7: x\n    pluginConfig:\n      - name"),
            r"\.7: unknown key",
        ),
        (
            GOOD.replace("plugins:\n      queueSort", "plugins:\n      " + "p" * 1000 + ": []\n      queueSort", 1),
            r"plugins\.'p+\.\.\. \(1000 chars\): unknown extension point",
        ),
    ],
)
def test_hostile_files_fail_fast_in_one_short_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        _load(tmp_path, text)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_binary_and_non_utf8_profile_files(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_bytes(b"\x00\x01\x02 gzip or an image")
    with pytest.raises(ConfigError, match=r"profiles\.yaml: a binary file, not text"):
        load_config(path, default_registry())
    path.write_bytes(b"profiles: [\xff]")
    with pytest.raises(ConfigError, match=r"profiles\.yaml: not UTF-8 text"):
        load_config(path, default_registry())


def test_the_readmes_profile_example_loads_and_keeps_every_default_check() -> None:
    import yaml

    from pysched.framework.config import parse_config, unchecked_constraints
    from pysched.plugins.builtin import builtin_config

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    block = readme.split("## Profiles", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    registry = default_registry()
    config = parse_config(yaml.safe_load(block), "README.md", registry)
    assert unchecked_constraints(config, builtin_config(registry)) == []


@pytest.mark.parametrize("name", ["Bad Name/..", "a\nb", "UPPER", "-a", "a-", "a..b", "a_b", "a" * 254, 7])
def test_a_scheduler_name_no_pod_could_name_is_refused(tmp_path: Path, name: object) -> None:
    """A pod's spec.schedulerName is a DNS-1123 subdomain: a profile named otherwise schedules
    nothing, and a line break in it would split every message quoting it."""
    import json

    text = GOOD.replace("schedulerName: a", f"schedulerName: {json.dumps(name)}")  # JSON is YAML
    with pytest.raises(ConfigError, match=r"profiles\[0\]\.schedulerName: must be a DNS-1123 subdomain") as info:
        _load(tmp_path, text)
    assert "\n" not in str(info.value)


def test_scheduler_names_of_dns_labels_load(tmp_path: Path) -> None:
    config = _load(tmp_path, GOOD.replace("schedulerName: a", "schedulerName: team-a.pysched-noscale"))
    assert config.profile("team-a.pysched-noscale") is not None  # type: ignore[attr-defined]


def test_args_of_a_plugin_the_profile_does_not_enable_are_refused(tmp_path: Path) -> None:
    """Lists replace kube-scheduler's defaults here (nothing is merged into a profile), so nothing
    would read such args."""
    text = GOOD.replace(
        "      - name: MostAllocated\n",
        "      - name: Autoscale\n        args: {cooldownSeconds: 1}\n      - name: MostAllocated\n",
    )
    message = r"profiles\[0\]\.pluginConfig\[0\]\.name: pluginConfig names Autoscale, which profile a does not enable$"
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)


def test_a_plugin_whose_default_args_do_not_hold_is_refused_at_load(tmp_path: Path) -> None:
    """LearnedAutoscale needs its weights file: enabled without pluginConfig, it is refused when
    the file is read, not when the scheduler builds it after connecting."""
    text = (
        "profiles:\n  - schedulerName: p\n    plugins:\n      queueSort: [{name: PrioritySort}]\n"
        "      bind: [{name: DefaultBinder}]\n      reconcile: [{name: LearnedAutoscale}]\n"
    )
    message = r"profiles\[0\]\.pluginConfig\.LearnedAutoscale\.args\.weights: .* \(no pluginConfig gives it\)$"
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)


BAD_SELECTORS = [
    ("{matchLabels: {'': x}}", r"matchLabels: label key '': name part must be"),
    ("{matchLabels: {a: 'bad value!'}}", r"matchLabels: label value 'bad value!' must be empty or at most 63"),
    ("{matchLabels: {a: 1}}", r"matchLabels must map label keys to string values"),
    ("{matchLabels: [a]}", r"matchLabels must map label keys to values"),
    ("{matchExpressions: [{key: team, operator: In, values: [1, 2]}]}", r"values must be a list of strings"),
    ("{matchExpressions: [{key: team, operator: Exists, valuez: [a]}]}", r"unknown field 'valuez'"),
    (
        "{matchExpressions: [{key: 'a b', operator: Exists}]}",
        r"matchExpressions\[0\]: label key 'a b': name part must be",
    ),
    ("{matchExpressions: [{key: team, operator: In, values: ['x y']}]}", r"label value 'x y'"),
    ("{matchExpressions: [{key: team, operator: In}]}", r"In needs at least one value"),
    ("{matchExpressions: [{key: team, operator: DoesNotExist, values: [a]}]}", r"DoesNotExist takes no values"),
    ("{matchExpressions: [{key: team, operator: Gt, values: ['1']}]}", r"operator 'Gt' is not one of"),
    ("{matchExpressions: {key: team, operator: Exists}}", r"matchExpressions must be a list"),
]


@pytest.mark.parametrize("plugin", ["DeadlineLaxity", "Autoscale", "LearnedQueueSort"])
@pytest.mark.parametrize(("selector", "message"), BAD_SELECTORS)
def test_deadline_namespaces_selectors_are_checked_as_the_apiserver_checks_them(
    tmp_path: Path, plugin: str, selector: str, message: str
) -> None:
    """A selector that can never match would silently drop every deadline of the profile."""
    point = "reconcile" if plugin == "Autoscale" else "queueSort"
    sort = "" if point == "queueSort" else "      queueSort: [{name: PrioritySort}]\n"
    text = f"""
profiles:
  - schedulerName: p
    plugins:
{sort}      {point}: [{{name: {plugin}}}]
      bind: [{{name: DefaultBinder}}]
    pluginConfig:
      - name: {plugin}
        args: {{deadlineNamespaces: {selector}}}
"""
    with pytest.raises(ConfigError, match=rf"pluginConfig\[0\]\.args\.deadlineNamespaces: .*{message}"):
        _load(tmp_path, text)


def test_well_formed_deadline_namespaces_selectors_load(tmp_path: Path) -> None:
    selector = (
        "{matchLabels: {pysched.io/deadlines: 'on', empty: ''}, matchExpressions: [{key: team, operator: NotIn, "
        "values: [a, b.c]}, {key: example.com/tier, operator: Exists}]}"
    )
    text = f"""
profiles:
  - schedulerName: p
    plugins:
      queueSort: [{{name: DeadlineLaxity}}]
      bind: [{{name: DefaultBinder}}]
    pluginConfig:
      - name: DeadlineLaxity
        args: {{deadlineNamespaces: {selector}}}
"""
    assert _load(tmp_path, text).profile("p") is not None  # type: ignore[attr-defined]
