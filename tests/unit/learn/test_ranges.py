"""What a queue policy's weights file records of the pods it was trained on."""

from pysched.learn.ranges import pod_ranges, widened
from pysched.sim.scenario import ScenarioMix, builtin_scenario

from .toy import toy


def _gpus_per_pod(name: str, seeds: range) -> list[int]:
    return [
        member.gpu
        for seed in seeds
        for job in builtin_scenario(seed, name).jobs
        for member in (job.gang.members if job.gang is not None else [job])
    ]


def test_cpu_workloads_record_no_gpus_and_gpu_workloads_their_range() -> None:
    assert pod_ranges(toy, range(3)) == {"gpus": (0.0, 0.0)}
    gpus = _gpus_per_pod("gpu-philly", range(2))
    assert min(gpus) > 0
    assert pod_ranges("gpu-philly", range(2)) == {"gpus": (min(gpus) / 8, max(gpus) / 8)}
    both = pod_ranges(ScenarioMix(("seed-insufficient", "gpu-philly")), range(4))
    assert both == {"gpus": (0.0, max(_gpus_per_pod("gpu-philly", range(1, 4, 2))) / 8)}
    assert pod_ranges(toy, range(2), names=("gpus", "workers")) == {"gpus": (0.0, 0.0), "workers": (0.0, 0.0)}


def test_ranges_taken_together_cover_both() -> None:
    assert widened({"gpus": (0.0, 0.0)}, {"gpus": (0.125, 1.0), "cpus": (0.25, 0.5)}) == {
        "gpus": (0.0, 1.0),
        "cpus": (0.25, 0.5),
    }
    assert widened({"gpus": (0.0, 0.5)}, {}) == {"gpus": (0.0, 0.5)}
