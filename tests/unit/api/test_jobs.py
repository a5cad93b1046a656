from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pysched.api.builders import pod_dict
from pysched.api.jobs import (
    COMPLETION_INDEX,
    JOB_LABEL,
    JOBSET_JOB_INDEX_LABEL,
    JOBSET_LABEL,
    KUBEFLOW_JOB_LABEL,
    KUBEFLOW_REPLICA_INDEX_LABEL,
    KUBEFLOW_REPLICA_TYPE_LABEL,
    MIN_MEMBERS,
    POD_GROUP_LABEL,
    REPLICATED_JOB_LABEL,
    JobSource,
    completions_left,
    indexed_job_minimum,
    job_of,
    pod_group_minimum,
)
from pysched.api.objects import PodInfo, pod_from_dict


def _pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **spec: Any) -> PodInfo:
    raw = pod_dict("p", namespace="team", labels=labels, annotations=annotations)
    raw["spec"].update(spec)
    return pod_from_dict(raw)


def _owned_by_job(raw: dict[str, Any], name: str = "train") -> dict[str, Any]:
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": "u1", "controller": True}
    ]
    return raw


def test_a_pod_in_no_job_is_a_job_of_one() -> None:
    assert job_of(_pod()) is None
    assert job_of(_pod(labels={"app": "web"})) is None


def test_every_source_in_order_of_precedence() -> None:
    every = {
        POD_GROUP_LABEL: "pg",
        JOB_LABEL: "pj",
        JOBSET_LABEL: "js",
        KUBEFLOW_JOB_LABEL: "kf",
    }
    raw = _owned_by_job(pod_dict("p", namespace="team", labels=every))
    raw["spec"]["schedulingGroup"] = {"podGroupName": "wl"}
    expected = [
        (JobSource.WORKLOAD, "wl"),
        (JobSource.POD_GROUP, "pg"),
        (JobSource.PYSCHED, "pj"),
        (JobSource.JOBSET, "js"),
        (JobSource.KUBEFLOW, "kf"),
        (JobSource.BATCH, "train"),
    ]
    for source, name in expected:
        ref = job_of(pod_from_dict(raw))
        assert ref is not None and (ref.source, ref.name) == (source, name)
        assert ref.key == f"team/{source.value}/{name}"
        # Remove what was found: the next source takes over.
        if source is JobSource.WORKLOAD:
            del raw["spec"]["schedulingGroup"]
        elif source is not JobSource.BATCH:
            label = {v: k for k, v in every.items()}[name]
            del raw["metadata"]["labels"][label]


def test_two_explicit_groups_that_disagree_are_a_problem_the_first_wins() -> None:
    ref = job_of(_pod(labels={POD_GROUP_LABEL: "a", JOB_LABEL: "b"}))
    assert ref is not None and ref.name == "a"
    assert "also pysched.io/job 'b'" in ref.problem
    same = job_of(_pod(labels={POD_GROUP_LABEL: "a", JOB_LABEL: "a"}))
    assert same is not None and same.problem == ""
    # A controller's implied job is no conflict: a JobSet's pods also have a controlling Job.
    nested = job_of(pod_from_dict(_owned_by_job(pod_dict("p", labels={JOBSET_LABEL: "js"}), "js-workers-0")))
    assert nested is not None and nested.source is JobSource.JOBSET and nested.problem == ""


def test_min_members_is_bounded_and_a_bad_value_falls_back_to_one_by_one() -> None:
    good = job_of(_pod(labels={JOB_LABEL: "j"}, annotations={MIN_MEMBERS: "8"}))
    assert good is not None and good.min_members == 8 and not good.problem
    absent = job_of(_pod(labels={JOB_LABEL: "j"}))
    assert absent is not None and absent.min_members is None
    for bad in ("-1", "0", "eight", "1e3", "١٢", "99999", "9" * 5000):
        ref = job_of(_pod(labels={JOB_LABEL: "j"}, annotations={MIN_MEMBERS: bad}))
        assert ref is not None and ref.min_members == 1, bad
        assert MIN_MEMBERS in ref.problem and len(ref.problem) < 300
    # On a pod whose job another source names, it is not read, and the pod is told so.
    kubeflow = job_of(_pod(labels={KUBEFLOW_JOB_LABEL: "bert"}, annotations={MIN_MEMBERS: "4"}))
    assert kubeflow is not None and kubeflow.min_members is None
    assert kubeflow.problem.startswith(f"{MIN_MEMBERS} is read only with the label {JOB_LABEL}: the pod's job is")


def test_member_order_reads_each_controllers_index() -> None:
    labels = {JOBSET_LABEL: "js", REPLICATED_JOB_LABEL: "workers", JOBSET_JOB_INDEX_LABEL: "2"}
    raw = _owned_by_job(pod_dict("p", labels=labels))
    raw["metadata"]["annotations"] = {COMPLETION_INDEX: "3"}
    ref = job_of(pod_from_dict(raw))
    assert ref is not None and ref.order == ("workers", 2, 3)
    replica = {KUBEFLOW_JOB_LABEL: "kf", KUBEFLOW_REPLICA_TYPE_LABEL: "worker", KUBEFLOW_REPLICA_INDEX_LABEL: "5"}
    kubeflow = job_of(_pod(labels=replica))
    assert kubeflow is not None and kubeflow.order == ("worker", 0, 5)


def test_a_non_batch_controller_names_no_job() -> None:
    raw = pod_dict("p")
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}
    ]
    assert job_of(pod_from_dict(raw)) is None


@given(
    labels=st.dictionaries(
        st.sampled_from([JOB_LABEL, POD_GROUP_LABEL, JOBSET_LABEL, KUBEFLOW_JOB_LABEL, "app"]), st.text(max_size=70)
    ),
    minimum=st.one_of(st.none(), st.text(max_size=70)),
    group=st.one_of(st.none(), st.text(max_size=20), st.integers()),
)
def test_any_labels_and_values_give_a_job_or_none_never_an_exception(
    labels: dict[str, str], minimum: str | None, group: object
) -> None:
    raw = pod_dict("p", labels=labels, annotations={MIN_MEMBERS: minimum} if minimum is not None else None)
    if group is not None:
        raw["spec"]["schedulingGroup"] = {"podGroupName": group}
    ref = job_of(pod_from_dict(raw))
    if ref is not None:
        assert ref.min_members is None or 1 <= ref.min_members <= 10_000
        assert ref.name


def test_a_podgroups_minimum_is_read_bounded_from_either_api() -> None:
    gang = {"spec": {"schedulingPolicy": {"gang": {"minCount": 8}}}}
    assert pod_group_minimum(gang, JobSource.WORKLOAD) == 8
    assert pod_group_minimum({"spec": {"schedulingPolicy": {"basic": {}}}}, JobSource.WORKLOAD) == 1
    assert pod_group_minimum({"spec": {"minMember": 4}}, JobSource.POD_GROUP) == 4
    for bad in (0, -2, "4", 4.0, None, True, 10**30):
        value = pod_group_minimum({"spec": {"minMember": bad}}, JobSource.POD_GROUP)
        assert value == (10_000 if bad == 10**30 else 1), bad
    assert pod_group_minimum({"spec": "nonsense"}, JobSource.POD_GROUP) == 1


def test_an_indexed_jobs_minimum_is_its_parallelism_at_most_its_completions() -> None:
    indexed = {"completionMode": "Indexed", "parallelism": 4, "completions": 4}
    assert indexed_job_minimum(indexed) == 4
    assert indexed_job_minimum({**indexed, "completions": 2}) == 2  # only two pods ever exist
    assert indexed_job_minimum({**indexed, "completionMode": "NonIndexed"}) is None
    assert indexed_job_minimum({"completionMode": "Indexed"}) is None  # no parallelism stated
    for bad in (0, -1, 10_001, "4", 4.0, True):
        assert indexed_job_minimum({**indexed, "parallelism": bad, "completions": None}) is None, bad
    assert indexed_job_minimum("nonsense") is None
    # The completions still to make bound it: an index retried after three others succeeded
    # runs alone, and so do the last two of six completions at parallelism 4.
    assert indexed_job_minimum({**indexed, "completions": 4}, {"succeeded": 3}) == 1
    assert indexed_job_minimum({**indexed, "completions": 6}, {"succeeded": 4}) == 2
    assert indexed_job_minimum({**indexed, "completions": 6}, {"succeeded": 1}) == 4
    for odd in ({"succeeded": -1}, {"succeeded": "3"}, {"succeeded": True}, "nonsense", None):
        assert indexed_job_minimum({**indexed, "completions": 6}, odd) == 4, odd
    # A Job that makes no more pods is no gang (a JobSet keeps its finished Jobs while the others run).
    assert indexed_job_minimum({**indexed, "completions": 6}, {"succeeded": 6}) is None
    complete = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert indexed_job_minimum(indexed, complete) is None
    assert indexed_job_minimum(indexed, {"conditions": [{"type": "Failed", "status": "True"}]}) is None
    # Indexes failed for good (backoffLimitPerIndex) are never run again.
    assert indexed_job_minimum(indexed, {"failedIndexes": "3"}) == 3
    assert indexed_job_minimum({**indexed, "completions": 8}, {"failedIndexes": "1,3-5", "succeeded": 1}) == 3
    assert indexed_job_minimum(indexed, {"failedIndexes": "0-3"}) is None
    assert indexed_job_minimum(indexed, {"failedIndexes": "3-x"}) == 4  # unreadable: counted as none


def test_a_long_group_name_is_quoted_cut_in_the_problem() -> None:
    long = "g" * 63  # a label value's longest; annotations and events must not carry 100 KB of them
    ref = job_of(_pod(labels={JOB_LABEL: long * 1000, POD_GROUP_LABEL: long}))
    assert ref is not None and "and also" in ref.problem and len(ref.problem) < 400


def test_completions_left_of_a_job_that_runs_in_waves() -> None:
    def job(spec: dict[str, object], status: dict[str, object] | None = None) -> dict[str, object]:
        return {"spec": spec, "status": status or {}}

    assert completions_left(job({"completions": 3})) == 3  # parallelism 1 when unset
    assert completions_left(job({"completions": 6, "parallelism": 2}, {"succeeded": 4})) == 2
    complete = {"succeeded": 5, "conditions": [{"type": "Complete", "status": "True"}]}
    assert completions_left(job({"completions": 6, "parallelism": 2}, complete)) == 0
    # One wave, or no completions at all (a work queue): its pods end it together.
    specs: list[dict[str, object]] = [
        {"completions": 4, "parallelism": 4},
        {"parallelism": 3},
        {},
        {"completions": "3"},
    ]
    for spec in specs:
        assert completions_left(job(spec)) is None
    assert completions_left(job({"completions": 3, "parallelism": 1}, {"succeeded": -2})) == 3
