"""A tiny ordering workload for tests: 12 of the paper's jobs at once on one node of 4 CPUs, so
that two run at a time and the order decides which deadlines are met."""

from pysched.sim.scenario import Scenario, paper_cpu
from pysched.workload.catalogue import builtin_catalogue
from pysched.workload.traces import DeadlineRule


def toy(seed: int) -> Scenario:
    return paper_cpu(
        "toy", seed, builtin_catalogue(), jobs=12, nodes=1, cpu="4", span_s=60.0, rule=DeadlineRule(1.2, 4.0)
    )
