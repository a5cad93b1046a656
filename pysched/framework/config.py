"""Profiles in the shape of KubeSchedulerConfiguration, loaded from YAML and validated at start-up.

Every problem is reported as one line naming the file, the field and what is accepted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pysched.api.inputs import InputError, key_text, load_yaml
from pysched.api.labels import dns_name
from pysched.api.limits import clip
from pysched.framework.registry import POINT_METHODS, ArgsError, Registry, parse_args

POINTS = tuple(POINT_METHODS)


# What kube-scheduler v1.36 decodes; a file may leave both out.
API_VERSION, KIND = "kubescheduler.config.k8s.io/v1", "KubeSchedulerConfiguration"


class ConfigError(ValueError):
    def __init__(self, source: str, field: str, message: str) -> None:
        super().__init__(f"{source}: {field}: {message}" if field else f"{source}: {message}")


def _first_unknown(keys: set[Any]) -> str:
    return min(map(key_text, keys))


@dataclass(frozen=True, slots=True)
class PluginRef:
    name: str
    weight: int = 1


@dataclass(frozen=True, slots=True)
class ProfileConfig:
    scheduler_name: str
    plugins: Mapping[str, tuple[PluginRef, ...]]
    plugin_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def enabled(self, point: str) -> tuple[PluginRef, ...]:
        return self.plugins.get(point, ())

    @property
    def queue_sort(self) -> str:
        return self.plugins["queueSort"][0].name


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    profiles: tuple[ProfileConfig, ...]
    source: str = "<built-in>"

    def profile(self, scheduler_name: str) -> ProfileConfig | None:
        return next((p for p in self.profiles if p.scheduler_name == scheduler_name), None)

    def only(self, *scheduler_names: str) -> SchedulerConfig:
        """The named profiles alone (e.g. one built-in policy); unknown names raise KeyError."""
        picked = []
        for name in scheduler_names:
            profile = self.profile(name)
            if profile is None:
                raise KeyError(name)
            picked.append(profile)
        return SchedulerConfig(tuple(picked), self.source)


def _plugin_refs(source: str, where: str, raw: Any, point: str, registry: Registry) -> tuple[PluginRef, ...]:
    if not isinstance(raw, list):
        raise ConfigError(source, where, "must be a list of {name: PLUGIN} entries")
    refs: list[PluginRef] = []
    for i, entry in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfigError(source, at, "must be a mapping with a plugin name, e.g. {name: NodeResourcesFit}")
        unknown = set(entry) - {"name", "weight"}
        if unknown:
            raise ConfigError(source, f"{at}.{_first_unknown(unknown)}", "unknown key (accepted: name, weight)")
        name = entry["name"]
        spec = registry.get(name)
        if spec is None:
            raise ConfigError(
                source, f"{at}.name", f"unknown plugin {clip(name)} (known: {', '.join(registry.names())})"
            )
        if point not in spec.points():
            served = ", ".join(sorted(spec.points())) or "none"
            raise ConfigError(source, f"{at}.name", f"plugin {name} does not implement {point} (it serves: {served})")
        weight = entry.get("weight", 1)
        if point != "score" and "weight" in entry:
            raise ConfigError(source, f"{at}.weight", "weights apply to score plugins only")
        if not isinstance(weight, int) or isinstance(weight, bool) or weight < 1 or weight > 100:
            raise ConfigError(source, f"{at}.weight", f"must be an integer from 1 to 100, got {clip(weight)}")
        if any(r.name == name for r in refs):
            raise ConfigError(source, at, f"plugin {name} is listed twice")
        refs.append(PluginRef(name, weight))
    return tuple(refs)


def _profile(source: str, index: int, raw: Any, registry: Registry) -> ProfileConfig:
    where = f"profiles[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(source, where, "must be a mapping with schedulerName and plugins")
    unknown = set(raw) - {"schedulerName", "plugins", "pluginConfig"}
    if unknown:
        raise ConfigError(
            source, f"{where}.{_first_unknown(unknown)}", "unknown key (accepted: schedulerName, plugins, pluginConfig)"
        )
    name = raw.get("schedulerName")
    if not isinstance(name, str) or not dns_name(name, subdomain=True):
        # what a pod's spec.schedulerName may be: a profile named otherwise would schedule no pod
        raise ConfigError(
            source,
            f"{where}.schedulerName",
            "must be a DNS-1123 subdomain, as a pod's spec.schedulerName (1 to 253 lowercase letters, digits, "
            f"'-' and '.', starting and ending alphanumeric), got {clip(name)}",
        )
    plugins_raw = raw.get("plugins")
    if not isinstance(plugins_raw, dict):
        raise ConfigError(source, f"{where}.plugins", f"must be a mapping of extension points ({', '.join(POINTS)})")
    plugins: dict[str, tuple[PluginRef, ...]] = {}
    for point, refs in plugins_raw.items():
        if point not in POINTS:
            raise ConfigError(
                source, f"{where}.plugins.{key_text(point)}", f"unknown extension point (accepted: {', '.join(POINTS)})"
            )
        # `filter: {}` or `filter: false` is no list: kube-scheduler reads such a section otherwise
        plugins[point] = _plugin_refs(source, f"{where}.plugins.{point}", [] if refs is None else refs, point, registry)
    if len(plugins.get("queueSort", ())) != 1:
        raise ConfigError(source, f"{where}.plugins.queueSort", "exactly one queueSort plugin is required")
    if not plugins.get("bind"):
        raise ConfigError(source, f"{where}.plugins.bind", "at least one bind plugin is required (e.g. DefaultBinder)")

    args: dict[str, Mapping[str, Any]] = {}
    configs = raw.get("pluginConfig")
    configs = [] if configs is None else configs
    if not isinstance(configs, list):
        raise ConfigError(source, f"{where}.pluginConfig", "must be a list of {name: PLUGIN, args: {...}}")
    for i, entry in enumerate(configs):
        at = f"{where}.pluginConfig[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfigError(source, at, "must be a mapping {name: PLUGIN, args: {...}}")
        unknown = set(entry) - {"name", "args"}
        if unknown:
            raise ConfigError(source, f"{at}.{_first_unknown(unknown)}", "unknown key (accepted: name, args)")
        spec = registry.get(entry["name"])
        if spec is None:
            raise ConfigError(source, f"{at}.name", f"unknown plugin {clip(entry['name'])}")
        if not any(ref.name == spec.name for refs in plugins.values() for ref in refs):
            # lists replace the defaults here (nothing is merged in), so nothing would read these args
            raise ConfigError(
                source, f"{at}.name", f"pluginConfig names {spec.name}, which profile {name} does not enable"
            )
        if entry["name"] in args:
            raise ConfigError(source, at, f"args for {entry['name']} given twice")
        plugin_args = entry.get("args")
        plugin_args = {} if plugin_args is None else plugin_args
        if not isinstance(plugin_args, dict):
            raise ConfigError(source, f"{at}.args", "must be a mapping")
        try:
            parse_args(spec.args_type, plugin_args)
        except ArgsError as err:
            raise ConfigError(source, f"{at}.args.{err.field}", err.message) from None
        args[entry["name"]] = plugin_args
    # A plugin without pluginConfig runs on its default args: they must hold too (a plugin may
    # need one, as LearnedAutoscale its weights file), refused here rather than when it is built.
    enabled = {ref.name for refs in plugins.values() for ref in refs}
    for plugin in sorted(enabled - set(args)):
        spec = registry.get(plugin)
        if spec is None:
            continue
        try:
            parse_args(spec.args_type, {})
        except ArgsError as err:
            raise ConfigError(
                source, f"{where}.pluginConfig.{plugin}.args.{err.field}", f"{err.message} (no pluginConfig gives it)"
            ) from None
    return ProfileConfig(name, plugins, args)


def parse_config(data: Any, source: str, registry: Registry) -> SchedulerConfig:
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), list) or not data["profiles"]:
        raise ConfigError(source, "profiles", "a non-empty list of profiles is required")
    unknown = set(data) - {"profiles", "apiVersion", "kind"}
    if unknown:
        raise ConfigError(source, _first_unknown(unknown), "unknown key (accepted: apiVersion, kind, profiles)")
    for key, accepted in (("apiVersion", API_VERSION), ("kind", KIND)):
        if key in data and data[key] != accepted:
            raise ConfigError(source, key, f"must be {accepted} (or left out), got {clip(data[key])}")
    profiles = tuple(_profile(source, i, p, registry) for i, p in enumerate(data["profiles"]))
    seen: set[str] = set()
    for i, profile in enumerate(profiles):
        if profile.scheduler_name in seen:
            raise ConfigError(
                source, f"profiles[{i}].schedulerName", f"{clip(profile.scheduler_name)} is used by two profiles"
            )
        seen.add(profile.scheduler_name)
        if profile.queue_sort != profiles[0].queue_sort:
            raise ConfigError(
                source,
                f"profiles[{i}].plugins.queueSort",
                f"all profiles share one queue and must use the same queueSort plugin ({profiles[0].queue_sort})",
            )
        sort_args = profile.plugin_args.get(profile.queue_sort, {})
        if sort_args != profiles[0].plugin_args.get(profiles[0].queue_sort, {}):
            raise ConfigError(
                source,
                f"profiles[{i}].pluginConfig",
                f"all profiles share one queue and must give {profile.queue_sort} the same args as profiles[0]",
            )
    _one_plan_each(source, profiles, registry)
    return SchedulerConfig(profiles, source)


def _one_plan_each(source: str, profiles: Sequence[ProfileConfig], registry: Registry) -> None:
    """A plugin that plans the cluster's room for its profile's jobs (`CLUSTER_PLAN`) sees no
    other profile's: two such plans would promise the same CPUs or GPUs twice, so profiles run
    together may enable one planner of each kind, in one profile."""
    planned: dict[str, tuple[int, str]] = {}
    for i, profile in enumerate(profiles):
        names = dict.fromkeys(ref.name for refs in profile.plugins.values() for ref in refs)
        for name in names:
            spec = registry.get(name)
            kind = getattr(spec.plugin_class, "CLUSTER_PLAN", "") if spec is not None else ""
            if not kind:
                continue
            if kind in planned and planned[kind][0] != i:
                first, other = planned[kind]
                raise ConfigError(
                    source,
                    f"profiles[{i}].plugins",
                    f"{name} plans the cluster's {kind} for its own profile's jobs, as {other} of "
                    f"profiles[{first}] does: profiles run together may plan them in one profile only",
                )
            planned.setdefault(kind, (i, name))


def unchecked_constraints(config: SchedulerConfig, builtin: SchedulerConfig) -> list[tuple[str, list[str]]]:
    """(profile, the filters of the built-in `default` profile it leaves out), for each profile
    that leaves some out: lists replace the defaults here, where kube-scheduler merges them, so a
    profile without InterPodAffinity places pods against their anti-affinity."""
    default = builtin.profile("default")
    if default is None:
        return []
    wanted = [ref.name for ref in default.enabled("filter")]
    found = []
    for profile in config.profiles:
        have = {ref.name for ref in profile.enabled("filter")}
        missing = [name for name in wanted if name not in have]
        if missing:
            found.append((profile.scheduler_name, missing))
    return found


def load_config(path: str | Path, registry: Registry) -> SchedulerConfig:
    source = str(path)
    try:
        data = load_yaml(path)
    except InputError as err:
        raise ConfigError(source, f"line {err.line}" if err.line else "", err.problem) from None
    return parse_config(data, source, registry)


def merge(*configs: SchedulerConfig) -> SchedulerConfig:
    """Profiles of several sources; a later schedulerName replaces an earlier one."""
    by_name: dict[str, ProfileConfig] = {}
    for config in configs:
        for profile in config.profiles:
            by_name[profile.scheduler_name] = profile
    return SchedulerConfig(tuple(by_name.values()), ", ".join(c.source for c in configs))
