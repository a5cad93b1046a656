"""The body of `pysched simulate`: workload and cluster from the flags, runs, table, JSON, charts.

Bad input returns one line naming what is accepted (the CLI prints it and exits 2).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from typing import Any

from pysched.api.objects import node_from_dict
from pysched.api.resources import CPU, GPU
from pysched.framework.config import ConfigError, SchedulerConfig, load_config, merge
from pysched.framework.registry import Registry
from pysched.sim.runner import PolicyResult, simulate, split_fitting
from pysched.sim.scenario import SCENARIOS, Scenario, builtin_scenario, parse_cluster
from pysched.workload.catalogue import Catalogue, CatalogueError, builtin_catalogue, load_catalogue
from pysched.workload.traces import TraceError, parse_deadline_rule, read_csv, read_swf

MAX_PROBLEMS_SHOWN = 20


@dataclass(frozen=True, slots=True)
class BadInput:
    message: str


def profile_problem(config: SchedulerConfig, registry: Registry, names: list[str] | None = None) -> str | None:
    """What keeps a profile from being built (its plugins together: LeastAllocated and
    MostAllocated with unlike resource weights), found by building each on an empty simulated
    cluster before anything runs; None when every one builds."""
    from pysched.backend.simulated import SimulatedCluster
    from pysched.framework.clock import VirtualClock
    from pysched.sim.runner import profile_scheduler

    clock = VirtualClock(0.0)
    for name in names or [p.scheduler_name for p in config.profiles]:
        try:
            profile_scheduler(config, name, SimulatedCluster(clock), clock, registry)
        except ConfigError as err:
            return str(err)
    return None


def load_policies(registry: Registry, config_file: str | None, wanted: list[str] | None) -> SchedulerConfig | BadInput:
    from pysched.plugins.builtin import builtin_config

    config = builtin_config(registry)
    if config_file:
        try:
            config = merge(config, load_config(config_file, registry))
        except ConfigError as err:
            return BadInput(str(err))
    known = [p.scheduler_name for p in config.profiles]
    for policy in wanted or ():
        if policy not in known:
            return BadInput(f"--policy: unknown policy {policy!r} (known: {', '.join(known)})")
    problem = profile_problem(config, registry, wanted)
    return config if problem is None else BadInput(problem)


def load_scenario(
    *,
    scenario: str | None,
    trace: str | None,
    cluster: str | None,
    seed: int,
    deadline_rule: str,
    catalogue_file: str | None,
) -> Scenario | BadInput:
    try:
        catalogue: Catalogue = load_catalogue(catalogue_file) if catalogue_file else builtin_catalogue()
        rule = parse_deadline_rule(deadline_rule)
        nodes = parse_cluster(cluster) if cluster is not None else None
    except (CatalogueError, ValueError) as err:
        return BadInput(str(err))
    if trace is None:
        name = scenario or "small"
        if name not in SCENARIOS:
            return BadInput(f"--scenario: unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")
        try:
            built = builtin_scenario(seed, name, catalogue)
        except ValueError as err:  # a user catalogue that changed a model the scenario needs
            return BadInput(_scenario_problem(name, catalogue_file, str(err)))
        return built if nodes is None else replace(built, nodes=nodes)
    try:
        reader = read_swf if trace.lower().endswith(".swf") else read_csv
        loaded = reader(trace, catalogue, rule, seed)
    except TraceError as err:
        return BadInput(str(err))
    if not loaded.jobs:
        return BadInput(f"{trace}: no valid row ({loaded.skipped} skipped{_first(loaded.problems)})")
    if nodes is None:
        gpus = 8 if any(j.gpu for j in loaded.jobs) else 0
        nodes = parse_cluster(f"nodes=8,cpu=32,memory=128Gi,gpu={gpus}")
    description = {"trace": trace, "seed": seed}
    name = trace.rsplit("/", 1)[-1]
    return Scenario(name, nodes, loaded.jobs, description, loaded.problems, loaded.skipped_deadlines)


def _scenario_problem(name: str, catalogue_file: str | None, problem: str) -> str:
    """`--scenario NAME: PROBLEM` (a generator's message may name it already), and the catalogue
    that changed the models it draws."""
    told = problem if problem.startswith("--scenario") else f"--scenario {name}: {problem}"
    return f"{told}; see --catalogue {catalogue_file}" if catalogue_file else told


def _first(problems: tuple[str, ...]) -> str:
    return f"; first: {problems[0]}" if problems else ""


def cluster_summary(scenario: Scenario) -> dict[str, Any]:
    infos = [node_from_dict(n) for n in scenario.nodes]
    return {
        "nodes": len(infos),
        "cpu": sum(n.allocatable.get(CPU, 0) for n in infos) / 1000,
        "gpu": sum(n.allocatable.get(GPU, 0) for n in infos),
    }


def report_problems(scenario: Scenario, seed: int = 7, *, elastic: bool = False) -> int:
    """Skipped rows and jobs on stderr (the first few), then a count; returns the count. `seed`
    and `elastic` as the run has them, which decide the jobs the run skips."""
    _, _, unfit = split_fitting(scenario.jobs, scenario.nodes, seed, elastic=elastic)
    problems = [*scenario.problems, *unfit]
    for line in problems[:MAX_PROBLEMS_SHOWN]:
        print(f"pysched: skipped {line}", file=sys.stderr)
    if len(problems) > MAX_PROBLEMS_SHOWN:
        print(f"pysched: ... and {len(problems) - MAX_PROBLEMS_SHOWN} more", file=sys.stderr)
    if problems:
        print(f"pysched: {len(problems)} job(s) skipped", file=sys.stderr)
    return len(problems)


def run_with_progress(
    scenario: Scenario,
    config: SchedulerConfig,
    policies: list[str],
    registry: Registry,
    seed: int,
    progress_interval: float,
    horizon: float | None = None,
    elastic: bool = False,
) -> tuple[dict[str, PolicyResult], float]:
    """The policies one after another; a progress bar (virtual time) only on a terminal."""
    started = time.perf_counter()
    if not sys.stdout.isatty():
        results = simulate(
            scenario,
            config,
            policies,
            registry,
            seed=seed,
            progress_interval=progress_interval,
            horizon=horizon,
            elastic=elastic,
        )
        return results, time.perf_counter() - started
    from rich.progress import Progress

    last = max((j.submit for j in scenario.jobs), default=0.0) or 1.0
    with Progress(transient=True) as bar:
        tasks = {p: bar.add_task(p, total=last) for p in policies}
        shown = {p: 0.0 for p in policies}

        def tick(policy: str, virtual: float) -> None:
            if virtual - shown[policy] >= last / 200:  # redraw at most 200 times per policy
                shown[policy] = virtual
                bar.update(tasks[policy], completed=min(virtual, last))

        results = simulate(
            scenario,
            config,
            policies,
            registry,
            seed=seed,
            progress_interval=progress_interval,
            on_tick=tick,
            horizon=horizon,
            elastic=elastic,
        )
    return results, time.perf_counter() - started
