"""Workloads for the simulator: training jobs (one pod or a gang of pods) arriving over time on a cluster.

Built-in scenarios are seeded and small enough to run in seconds; `--trace` replaces the jobs and
`--cluster` the nodes.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pysched.api.builders import node_dict
from pysched.api.inputs import InputError, brief, key_text, load_yaml, whole_number
from pysched.api.limits import MAX_UNITS, clip
from pysched.api.resources import CPU, GPU, MEMORY, QuantityError, to_scheduler_units
from pysched.workload.catalogue import Catalogue, CpuModel, GpuModel, Model, builtin_catalogue
from pysched.workload.gang_jobs import ps_job
from pysched.workload.job import GPU_TAINT, Job
from pysched.workload.traces import CPU_PER_GPU, DeadlineRule, make_job, offers_gpus, synthetic

Nodes = tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    nodes: Nodes
    jobs: tuple[Job, ...]
    description: dict[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # skipped trace rows, `file:line: problem`
    skipped_deadlines: int = 0  # how many of those rows had a deadline (each counts as missed)


def cpu_nodes(count: int, cpu: str = "32", memory: str = "128Gi", gpu: int = 0, prefix: str = "node") -> Nodes:
    extended = {"nvidia.com/gpu": str(gpu)} if gpu else None
    return tuple(node_dict(f"{prefix}-{i}", cpu=cpu, memory=memory, extended=extended) for i in range(count))


def gpu_pool(count: int, gpus: int = 8, cpu: str = "64", memory: str = "512Gi") -> Nodes:
    """GPU nodes tainted as GPU operators do; GPU jobs tolerate the taint."""
    return tuple(
        node_dict(
            f"gpu-{i}",
            cpu=cpu,
            memory=memory,
            extended={"nvidia.com/gpu": str(gpus)},
            labels={"pool": "gpu"},
            taints=[GPU_TAINT],
        )
        for i in range(count)
    )


CLUSTER_FORMS = "nodes=8,cpu=32,memory=128Gi,gpu=0 or a YAML file with groups: [{count, cpu, memory, gpu}]"
# A simulated cluster holds every node in memory (about 3 KB each) and sums each resource over
# the nodes as an integer the node table and the metrics carry exactly.
MAX_CLUSTER_NODES = 100_000
MAX_CLUSTER_GROUPS = 1_000
_SPEC_DEFAULTS = {"nodes": "8", "cpu": "32", "memory": "128Gi", "gpu": "0"}
_GROUP_KEYS = ("count", "nodes", "cpu", "memory", "gpu")  # a file's group may call `nodes` `count`


@dataclass(frozen=True, slots=True)
class _Group:
    count: int
    cpu: str
    memory: str
    gpu: int
    units: tuple[int, int, int]  # cpu millicores, memory bytes, GPUs of one node


def parse_cluster(spec: str) -> Nodes:
    """`nodes=N,cpu=Q,memory=Q,gpu=N`, or a YAML file of node groups; ValueError names the forms.
    Every group is checked, and the whole cluster against the limits above, before a node is built."""
    if "=" not in spec and not (spec and Path(spec).exists()):
        raise ValueError(f"--cluster: {clip(spec)}: no such file, and not an accepted spec ({CLUSTER_FORMS})")
    if "=" not in spec:
        try:
            data = load_yaml(spec)
        except InputError as err:
            raise ValueError(f"--cluster: {err}") from None
        raw_groups = data.get("groups") if isinstance(data, dict) else None
        if not isinstance(raw_groups, list) or not raw_groups:
            raise ValueError(f"--cluster: {spec}: groups: a non-empty list is required ({CLUSTER_FORMS})")
        if len(raw_groups) > MAX_CLUSTER_GROUPS:
            raise ValueError(f"--cluster: {spec}: groups: more than {MAX_CLUSTER_GROUPS:,} groups")
        groups = [_group_of(group, f"{spec}: groups[{i}]") for i, group in enumerate(raw_groups)]
        unknown = sorted(map(key_text, set(data) - {"groups"}))
        if unknown:  # a misspelt key would otherwise be dropped without a word
            raise ValueError(f"--cluster: {spec}: {unknown[0]}: unknown key (accepted: groups)")
    else:
        groups = [_parse_spec(spec, spec)]
    where = spec if len(groups) == 1 else f"{spec}: groups"
    count = sum(g.count for g in groups)
    if count > MAX_CLUSTER_NODES:
        raise ValueError(f"--cluster: {where}: {count:,} nodes, more than {MAX_CLUSTER_NODES:,}")
    for k, name in enumerate((CPU, MEMORY, GPU)):
        if sum(g.count * g.units[k] for g in groups) > MAX_UNITS:  # of each resource, summed over the nodes
            raise ValueError(f"--cluster: {where}: the nodes' {name} adds up to more than 2**53 units")
    if len(groups) == 1:
        (only,) = groups
        return cpu_nodes(only.count, only.cpu, only.memory, only.gpu)
    return tuple(
        {**n, "metadata": {**n["metadata"], "name": f"g{i}-{n['metadata']['name']}"}}
        for i, g in enumerate(groups)
        for n in cpu_nodes(g.count, g.cpu, g.memory, g.gpu)
    )


def _group_of(group: Any, where: str) -> _Group:
    if not isinstance(group, dict):
        raise ValueError(f"--cluster: {where} must be a mapping ({CLUSTER_FORMS})")
    for key, value in group.items():
        if key not in _GROUP_KEYS:
            raise ValueError(f"--cluster: {where}.{key_text(key)}: unknown key (accepted: {', '.join(_GROUP_KEYS)})")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"--cluster: {where}.{key}: {clip(value)} is not a number or quantity")
    if "count" in group and "nodes" in group:  # one would silently win over the other
        raise ValueError(f"--cluster: {where}: count and nodes are the same number; give one of them")
    return _group({key: str(value) for key, value in group.items()}, where)


def _parse_spec(spec: str, where: str) -> _Group:
    given: dict[str, str] = {}
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _SPEC_DEFAULTS:
            raise ValueError(f"--cluster: {where}: bad part {clip(part)} (accepted: {CLUSTER_FORMS})")
        if key in given:  # the last would silently win
            raise ValueError(f"--cluster: {where}: {key} is given twice (accepted: {CLUSTER_FORMS})")
        given[key] = value.strip()
    return _group(given, where)


def _group(given: dict[str, str], where: str) -> _Group:
    """A group from its values as text (keys checked by the caller), the defaults filling the rest."""
    values = {**_SPEC_DEFAULTS, **given}
    try:
        units = (to_scheduler_units(CPU, values["cpu"]), to_scheduler_units(MEMORY, values["memory"]))
    except QuantityError as err:  # not a quantity, or more than the scheduler counts
        raise ValueError(f"--cluster: {where}: {brief(err)} (accepted: {CLUSTER_FORMS})") from None
    for key, unit in zip((CPU, MEMORY), units, strict=True):
        if unit <= 0:
            raise ValueError(f"--cluster: {where}: bad value {key}={clip(values[key])}: must be above 0")
    count_key = "count" if "count" in given else "nodes"
    count, gpu = _count(count_key, values[count_key], 1, where), _count("gpu", values["gpu"], 0, where)
    return _Group(count, values["cpu"], values["memory"], gpu, (*units, gpu))


def _count(key: str, text: str, low: int, where: str) -> int:
    """A node or GPU count: ASCII digits, up to 2**53 (parse_cluster's totals say what is too much)."""
    value = whole_number(text, MAX_UNITS)
    if value is None or value < low:
        raise ValueError(
            f"--cluster: {where}: bad value {key}={clip(text)}: a whole number from {low} in ASCII digits is needed"
            f" (accepted: {CLUSTER_FORMS})"
        )
    return value


def _paper_arrivals(
    count: int, seed: int, span_s: float, catalogue: Catalogue
) -> Iterator[tuple[int, float, Model, random.Random]]:
    """(index, submission, model, the job's own random source) of the founding paper's MNIST jobs."""
    rng = random.Random(seed)
    now = 0.0
    for index in range(count):
        now += rng.expovariate(count / span_s)
        model = catalogue.models[rng.choice(("lstm", "gan", "autoencoder"))]
        yield index, round(now, 3), model, random.Random(seed * 100_003 + index)


def _paper_jobs(
    name: str, count: int, seed: int, span_s: float, catalogue: Catalogue, rule: DeadlineRule
) -> tuple[Job, ...]:
    """The founding paper's MNIST jobs at its step counts, in pods of 2 CPU and 1 GiB, for the
    scenario `name`. ValueError when a catalogue made one of its models a GPU model."""
    return tuple(
        make_job(
            index,
            submit=submit,
            gpus=0,
            cpu_milli=2000,
            memory="1Gi",
            model=_cpu_model(model, name),
            truth=model.truth(job_rng),
            steps=model.steps,
            duration=None,
            deadline=None,
            rule=rule,
            rng=job_rng,
            source=f"seed:{index}",
        )
        for index, submit, model, job_rng in _paper_arrivals(count, seed, span_s, catalogue)
    )


def _cpu_model(model: Model, scenario: str) -> CpuModel:
    if not isinstance(model, CpuModel):
        raise ValueError(f"--scenario {scenario}: model {model.name} must be a CPU model (kind: cpu)")
    return model


PS_WORKERS = (2, 4)  # seed-ps: each job's worker count, drawn uniformly in this range


def _paper_ps_jobs(count: int, seed: int, span_s: float, catalogue: Catalogue, rule: DeadlineRule) -> tuple[Job, ...]:
    """The same jobs as parameter-server jobs: 1 server and 2 to 4 workers of 2 CPU and 1 GiB.
    ValueError when a catalogue made one of the paper's models something else than a CPU model."""
    return tuple(
        ps_job(
            index,
            submit=submit,
            model=_cpu_model(model, "seed-ps"),
            workers=job_rng.randint(*PS_WORKERS),
            worker_cpu_milli=2000,
            memory="1Gi",
            rule=rule,
            rng=job_rng,
            source=f"seed-ps:{index}",
        )
        for index, submit, model, job_rng in _paper_arrivals(count, seed, span_s, catalogue)
    )


def small(seed: int, catalogue: Catalogue) -> Scenario:
    """The default: 6 CPU nodes and 2 GPU nodes, 200 mixed jobs over 4 hours; runs in seconds."""
    nodes = cpu_nodes(6, "16", "64Gi", prefix="cpu") + gpu_pool(2)
    jobs = synthetic(200, catalogue, seed=seed, span_s=4 * 3600, median_s=1200, sigma=0.8, gpu_share=0.2)
    return Scenario("small", nodes, jobs, {"seed": seed, "jobs": 200, "arrivals": "poisson over 4h"})


def paper_cpu(
    name: str, seed: int, catalogue: Catalogue, *, jobs: int, nodes: int, cpu: str, span_s: float, rule: DeadlineRule
) -> Scenario:
    """`jobs` of the founding paper's jobs arriving over `span_s` on `nodes` nodes of `cpu` CPUs."""
    made = _paper_jobs(name, jobs, seed, span_s, catalogue, rule)
    return Scenario(name, cpu_nodes(nodes, cpu, "64Gi"), made, {"seed": seed, "jobs": jobs})


def seed_insufficient(seed: int, catalogue: Catalogue) -> Scenario:
    """Demand exceeds capacity: 100 paper jobs (200 CPUs) in one hour on 4 nodes of 16 CPUs;
    deadlines 1.2 to 3 times the run time at the requested 2 CPUs, so the queue order decides."""
    rule = DeadlineRule(1.2, 3.0)
    return paper_cpu("seed-insufficient", seed, catalogue, jobs=100, nodes=4, cpu="16", span_s=3600.0, rule=rule)


def seed_sufficient(seed: int, catalogue: Catalogue) -> Scenario:
    """Capacity to spare: the same 100 jobs on 16 nodes of 32 CPUs, deadlines 0.5 to 1.5 times the
    run time at 2 CPUs: about half can be met only by scaling up."""
    jobs = _paper_jobs("seed-sufficient", 100, seed, 3600.0, catalogue, DeadlineRule(0.5, 1.5))
    return Scenario("seed-sufficient", cpu_nodes(16, "32", "128Gi"), jobs, {"seed": seed, "jobs": 100})


def gpu_mixed(seed: int, catalogue: Catalogue) -> Scenario:
    """The default GPU-count mix (16-GPU jobs run as gangs of two 8-GPU pods) plus CPU jobs."""
    nodes = cpu_nodes(8, "32", "128Gi", prefix="cpu") + gpu_pool(8)
    jobs = synthetic(400, catalogue, seed=seed, span_s=8 * 3600, median_s=1800, sigma=1.0, gpu_share=0.7)
    return Scenario("gpu-mixed", nodes, jobs, {"seed": seed, "jobs": 400, "arrivals": "poisson over 8h"})


def seed_ps(seed: int, catalogue: Catalogue) -> Scenario:
    """The paper's jobs as TensorFlow parameter-server jobs (1 server, 2 to 4 workers of 2 CPUs):
    100 in one hour on 6 nodes of 16 CPUs, deadlines 1.2 to 3 times the run time at the request."""
    jobs = _paper_ps_jobs(100, seed, 3600.0, catalogue, DeadlineRule(1.2, 3.0))
    return Scenario("seed-ps", cpu_nodes(6, "16", "64Gi"), jobs, {"seed": seed, "jobs": 100, "workers": "2-4"})


# The shape of Philly-derived traces: most jobs are short 1-GPU jobs, a few run 8 GPUs for days.
PHILLY_SHORT_SHARE = 0.93
PHILLY_SHORT_MEDIAN_S = 1200.0
PHILLY_LONG_MEDIAN_S = 1.5 * 86400


def gpu_philly(seed: int, catalogue: Catalogue) -> Scenario:
    """1,000 jobs over 2 days on 16 nodes of 8 GPUs: 93% 1-GPU jobs of 20 minutes (median,
    log-normal sigma 1), 7% 8-GPU jobs of 1.5 days (sigma 0.5); deadlines 0.5 to 1.5 times the run
    time at the request. The long jobs alone ask for more GPU-days than the cluster has: whoever
    lets them take whole nodes starves the short ones."""
    rng = random.Random(seed)
    count, span_s = 1000, 2 * 86400.0
    now = 0.0
    jobs = []
    for index in range(count):
        now += rng.expovariate(count / span_s)
        short = rng.random() < PHILLY_SHORT_SHARE
        gpus = 1 if short else 8
        median, sigma = (PHILLY_SHORT_MEDIAN_S, 1.0) if short else (PHILLY_LONG_MEDIAN_S, 0.5)
        duration = min(max(rng.lognormvariate(math.log(median), sigma), 60.0), 7 * 86400.0)
        job_rng = random.Random(seed * 100_003 + index)
        offering = [m for m in catalogue.names(GpuModel) if offers_gpus(catalogue.models[m], gpus)]
        if not offering:
            raise ValueError(f"--scenario gpu-philly: no GPU model of the catalogue measures {gpus} GPUs")
        model = catalogue.models[job_rng.choice(offering)]
        jobs.append(
            make_job(
                index,
                submit=round(now, 3),
                gpus=gpus,
                cpu_milli=1000 * CPU_PER_GPU * gpus,
                memory=f"{8 * gpus}Gi",
                model=model,
                truth=model.truth(job_rng, None),
                steps=None,
                duration=duration,
                deadline=None,
                rule=DeadlineRule(),
                rng=job_rng,
                source=f"gpu-philly:{index}",
            )
        )
    return Scenario("gpu-philly", gpu_pool(16), tuple(jobs), {"seed": seed, "jobs": count, "short": PHILLY_SHORT_SHARE})


SCENARIOS: dict[str, Callable[[int, Catalogue], Scenario]] = {
    "small": small,
    "seed-insufficient": seed_insufficient,
    "seed-sufficient": seed_sufficient,
    "gpu-mixed": gpu_mixed,
    "seed-ps": seed_ps,
    "gpu-philly": gpu_philly,
}


def builtin_scenario(seed: int = 7, name: str = "small", catalogue: Catalogue | None = None) -> Scenario:
    return SCENARIOS[name](seed, catalogue or builtin_catalogue())


@dataclass(frozen=True, slots=True)
class ScenarioMix:
    """Several built-in generators taken in turn by workload seed (seed modulo their number), so
    that a learned policy trains on more than one shape of workload."""

    names: tuple[str, ...]

    def __call__(self, seed: int) -> Scenario:
        return builtin_scenario(seed, self.names[seed % len(self.names)])


def scenario_or_mix(text: str) -> str | ScenarioMix | None:
    """`NAME` or `NAME,NAME,...` of built-in generators; None when a name is unknown or repeated."""
    names = tuple(text.split(","))
    if any(name not in SCENARIOS for name in names) or len(set(names)) != len(names):
        return None
    return names[0] if len(names) == 1 else ScenarioMix(names)
