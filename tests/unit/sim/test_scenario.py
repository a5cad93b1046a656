from pathlib import Path

import pytest

from pysched.sim.scenario import (
    MAX_CLUSTER_GROUPS,
    MAX_CLUSTER_NODES,
    ScenarioMix,
    builtin_scenario,
    parse_cluster,
    scenario_or_mix,
)
from pysched.workload.catalogue import Catalogue, GpuModel, builtin_catalogue
from pysched.workload.gang import PS, WORKER, ParameterServer
from pysched.workload.speed import Throughput


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("cpu=1Ei", "cpu=1Ei: "),
        ("cpu=1e300", "cpu=1e300: "),
        (f"nodes={MAX_CLUSTER_NODES + 1}", f"{MAX_CLUSTER_NODES + 1:,} nodes, more than {MAX_CLUSTER_NODES:,}"),
        ("nodes=" + "9" * 5000, "bad value"),
        ("nodes=50000,memory=1Pi", "memory adds up to more than 2**53 units"),
        ("nodes=2,gpu=9007199254740992", "nvidia.com/gpu adds up to more than 2**53 units"),
    ],
)
def test_cluster_specs_are_capped_before_nodes_are_built(spec: str, needle: str) -> None:
    with pytest.raises(ValueError, match="--cluster: ") as info:
        parse_cluster(spec)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_group_files_are_capped_in_total_and_values_must_be_scalars(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("groups: [" + ", ".join(["{count: 60000, cpu: 4}"] * 2) + "]\n")
    with pytest.raises(ValueError, match=r"groups: 120,000 nodes, more than 100,000"):
        parse_cluster(str(path))
    path.write_text("groups: [" + ", ".join(["{count: 1}"] * (MAX_CLUSTER_GROUPS + 1)) + "]\n")
    with pytest.raises(ValueError, match="more than 1,000 groups"):
        parse_cluster(str(path))
    path.write_text("x: &x [" + ", ".join(["y" * 1000] * 50) + "]\ngroups: [{count: 1, cpu: *x}]\n")
    with pytest.raises(ValueError, match=r"groups\[0\]\.cpu: \[") as info:
        parse_cluster(str(path))
    assert len(str(info.value)) < 300
    path.write_text("groups: [{count: 2, cpu: 4, memory: 8Gi}, {count: 1, gpu: 8}]\n")
    names = [n["metadata"]["name"] for n in parse_cluster(str(path))]
    assert names == ["g0-node-0", "g0-node-1", "g1-node-0"]


def test_an_unreadable_cluster_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"groups: [{count: \xff}]\n")
    with pytest.raises(ValueError, match=r"--cluster: .*c\.yaml: not UTF-8 text"):
        parse_cluster(str(path))


def test_seed_ps_jobs_are_one_server_and_two_to_four_workers_of_the_paper_models() -> None:
    scenario = builtin_scenario(7, "seed-ps")
    assert len(scenario.jobs) == 100
    workers = set()
    for job in scenario.jobs:
        assert job.gang is not None and isinstance(job.gang.speed, ParameterServer)
        roles = [m.role for m in job.gang.members]
        assert roles.count(PS) == 1 and roles[0] == WORKER
        workers.add(roles.count(WORKER))
        assert job.model in ("lstm", "gan", "autoencoder") and job.deadline is not None
        assert all(m.cpu_milli == 2000 for m in job.gang.members if m.role == WORKER)
    assert workers == {2, 3, 4}
    # The same arrivals and models as the one-pod paper scenarios.
    single = builtin_scenario(7, "seed-insufficient")
    assert [(j.submit, j.model) for j in scenario.jobs] == [(j.submit, j.model) for j in single.jobs]


def test_seed_ps_refuses_a_catalogue_that_made_a_paper_model_a_gpu_model() -> None:
    gpu = GpuModel("gan", 1000, {64: Throughput((1,), (1.0,))})
    catalogue = builtin_catalogue().merged(Catalogue({"gan": gpu}))
    with pytest.raises(ValueError, match="seed-ps: model gan must be a CPU model"):
        builtin_scenario(7, "seed-ps", catalogue)


def test_gpu_philly_is_mostly_short_one_gpu_jobs_and_a_few_long_eight_gpu_ones() -> None:
    scenario = builtin_scenario(7, "gpu-philly")
    assert len(scenario.jobs) == 1000 and len(scenario.nodes) == 16
    short = [j for j in scenario.jobs if j.gpu == 1]
    long = [j for j in scenario.jobs if j.gpu == 8]
    assert len(short) + len(long) == 1000 and 0.90 <= len(short) / 1000 <= 0.96
    run_s = sorted(j.deadline - j.submit for j in scenario.jobs if j.deadline is not None)  # 0.5-1.5x the run
    assert len(run_s) == 1000
    # The long jobs alone ask for more GPU-days than 16 x 8 GPUs give over the 2-day span.
    assert sum(8 * (j.deadline - j.submit) / 1.5 for j in long if j.deadline is not None) > 128 * 2 * 86400
    assert builtin_scenario(7, "gpu-philly").jobs == scenario.jobs  # seeded


def test_a_mix_takes_its_generators_in_turn_by_seed() -> None:
    mix = scenario_or_mix("seed-insufficient,gpu-philly")
    assert isinstance(mix, ScenarioMix)
    assert [mix(seed).name for seed in (10, 11, 12)] == ["seed-insufficient", "gpu-philly", "seed-insufficient"]
    assert mix(11).jobs == builtin_scenario(11, "gpu-philly").jobs
    assert scenario_or_mix("small") == "small"
    assert scenario_or_mix("small,nope") is None and scenario_or_mix("small,small") is None


def test_a_cluster_value_given_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--cluster: nodes=1,nodes=2: nodes is given twice"):
        parse_cluster("nodes=1,nodes=2")
    path = tmp_path / "c.yaml"
    path.write_text("groups: [{count: 2, nodes: 5}]\n")
    with pytest.raises(ValueError, match=r"groups\[0\]: count and nodes are the same number; give one of them"):
        parse_cluster(str(path))
    path.write_text("groups: [{nodes: 2, cpu: 4}]\n")  # either name alone is fine
    assert len(parse_cluster(str(path))) == 2


@pytest.mark.parametrize("name", ["seed-insufficient", "seed-sufficient"])
def test_the_paper_scenarios_refuse_a_catalogue_that_made_a_paper_model_a_gpu_model(name: str) -> None:
    gpu = GpuModel("lstm", 1000, {64: Throughput((1,), (1.0,))})
    catalogue = builtin_catalogue().merged(Catalogue({"lstm": gpu}))
    with pytest.raises(ValueError, match=f"--scenario {name}: model lstm must be a CPU model"):
        builtin_scenario(7, name, catalogue)


@pytest.mark.parametrize("name", ["small", "gpu-mixed"])
def test_generated_gpu_jobs_need_a_model_that_measures_some_gpu_count(name: str, tmp_path: Path) -> None:
    from pysched.sim.command import BadInput, load_scenario

    (tmp_path / "zero.csv").write_text("global_batch_size,1,2\n64,0,0\n")
    models = ("resnet50", "vgg16", "bert", "inception3", "deepspeech2", "gpt2", "resnet50_cifar10")
    path = tmp_path / "cat.yaml"
    path.write_text("models:\n" + "".join(f"  {m}: {{kind: gpu, table: zero.csv}}\n" for m in models))
    loaded = load_scenario(
        scenario=name, trace=None, cluster=None, seed=7, deadline_rule="0.5,1.5", catalogue_file=str(path)
    )
    assert isinstance(loaded, BadInput)
    assert loaded.message.startswith(f"--scenario {name}: no GPU model of the catalogue measures any GPU count")
    assert loaded.message.endswith(f"; see --catalogue {path}")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("groups:\n  - {nodes: 2}\nfoo: 1\n", r"c\.yaml: foo: unknown key \(accepted: groups\)"),
        (
            'groups:\n  - {"nodes=2,gpu": 1, cpu: 4}\n',
            r"groups\[0\]\.nodes=2,gpu: unknown key \(accepted: count, nodes,",
        ),
        ("groups:\n  - {nodes: 2, cpus: 4}\n", r"groups\[0\]\.cpus: unknown key"),
        ("groups:\n  - {nodes: 2, 7: 4}\n", r"groups\[0\]\.7: unknown key"),
    ],
)
def test_a_cluster_file_refuses_keys_it_does_not_know(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=needle) as info:
        parse_cluster(str(path))
    assert str(info.value).startswith("--cluster: ") and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("nodes=\uff11\uff12", "bad value nodes='\uff11\uff12': a whole number from 1 in ASCII digits"),  # full-width
        ("nodes=\u0663", "bad value nodes='\u0663': a whole number from 1"),  # Arabic-Indic
        ("nodes=1_000", "bad value nodes='1_000': a whole number from 1"),
        ("nodes=+2", "bad value nodes='+2'"),
        ("nodes=0", "bad value nodes='0'"),
        ("gpu=\uff11", "bad value gpu='\uff11': a whole number from 0 in ASCII digits"),
        ("cpu=0", "bad value cpu='0': must be above 0"),
    ],
)
def test_cluster_counts_are_ascii_digits(spec: str, needle: str) -> None:
    with pytest.raises(ValueError, match="--cluster: ") as info:
        parse_cluster(spec)
    assert needle in str(info.value)


def test_cluster_file_counts_are_ascii_digits_too(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    for value in ("'1_000'", "1_000", "'\uff11\uff12'", "2.0"):
        path.write_text(f"groups: [{{count: {value}, cpu: 4}}]\n")
        with pytest.raises(ValueError, match=r"groups\[0\]: bad value count="):
            parse_cluster(str(path))
    path.write_text("groups: [{count: 0x10, cpu: 1e1, memory: 8Gi}]\n")  # YAML 1.2's numbers
    nodes = parse_cluster(str(path))
    assert len(nodes) == 16 and nodes[0]["status"]["allocatable"]["cpu"] == "10.0"
