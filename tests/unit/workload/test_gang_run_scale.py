"""An elastic gang's worker set changed by a scale: no step lost, a pause, then the new set's rate."""

from __future__ import annotations

import dataclasses
import random

import pytest

from pysched.workload.accounting import Accounting
from pysched.workload.gang import WORKER, AllReduce, DataParallel, Gang, Held, Member
from pysched.workload.gang_run import GangRun
from pysched.workload.job import Job
from pysched.workload.segment import SCALE_PAUSE_CPU_S, SCALE_PAUSE_GPU_S, Run, scale_pause_seconds
from pysched.workload.speed import Amdahl, Throughput

WORKER_TRUTH = Amdahl(0.0, 1.0, 16)  # t(c) = 1 / c
TABLE = Throughput((1, 2, 4), (10.0, 20.0, 40.0))


def workers(count: int, gpu: int = 0) -> tuple[Member, ...]:
    return tuple(Member(f"train-{i}", WORKER if not gpu else "", 2000, "1Gi", gpu) for i in range(count))


def cpu_gang(count: int) -> tuple[GangRun, Accounting, random.Random]:
    """`count` all-reduce workers on 2 CPUs each, s = 0: 2 * count steps/s; all bound at 0."""
    gang = Gang(workers(count), AllReduce(0.0))
    job = Job("train", 0.0, 1_000_000, 2000 * count, "1Gi", WORKER_TRUTH, restart_on_resize=False, gang=gang)
    run, books, rng = GangRun(job, gang), Accounting(), random.Random(7)
    for i in range(count):
        run.bind(i, Held(WORKER, 2.0, 0, f"n{i}"), 0.0, rng, 0.0)
    return run, books, rng


def segment(run: GangRun) -> Run | None:
    """The current segment, read afresh (no narrowing carried over from an earlier read)."""
    return run.run


def grown(run: GangRun, count: int) -> Gang:
    return dataclasses.replace(run.gang, members=workers(count))


def test_scaling_up_keeps_every_step_pauses_and_resumes_at_the_larger_sets_rate() -> None:
    run, books, rng = cpu_gang(2)
    assert run.run is not None and run.run.steps_at(400.0) == 1600  # 4 steps/s; checkpoint at 300 s: 1200
    pause = run.scale(grown(run, 4), 400.0, books, rng, 0.0)
    assert SCALE_PAUSE_CPU_S[0] <= pause <= SCALE_PAUSE_CPU_S[1]
    assert (run.steps, run.checkpoint) == (1600, 1600)  # the scale checkpoints: nothing goes back
    assert segment(run) is None and not run.complete  # the new indexes have not joined yet
    run.bind(2, Held(WORKER, 2.0, 0, "n2"), 405.0, rng, 0.0)
    assert segment(run) is None
    run.bind(3, Held(WORKER, 2.0, 0, "n3"), 406.0, rng, 0.0)
    assert run.run is not None
    assert run.run.seg_start == pytest.approx(400.0 + pause) and run.run.seg_steps == 1600
    assert run.run.steps_at(400.0 + pause) == 1600  # nothing during the pause
    assert run.run.step_s == pytest.approx(1 / 8)  # 4 workers x 2 steps/s each
    assert books.rescales == 1


def test_members_that_join_after_the_pause_start_at_once() -> None:
    run, books, rng = cpu_gang(2)
    pause = run.scale(grown(run, 3), 100.0, books, rng, 0.0)
    run.bind(2, Held(WORKER, 2.0, 0, "n2"), 100.0 + pause + 50.0, rng, 0.0)
    assert run.run is not None and run.run.seg_start == pytest.approx(100.0 + pause + 50.0)
    assert run.run.seg_steps == 400 and run.run.step_s == pytest.approx(1 / 6)


def test_scaling_down_resumes_after_the_pause_on_the_remaining_members() -> None:
    run, books, rng = cpu_gang(4)  # 8 steps/s
    pause = run.scale(grown(run, 2), 500.0, books, rng, 0.0)
    assert sorted(run.held) == [0, 1] and run.complete  # the highest indexes are gone
    assert run.run is not None and run.run.seg_steps == 4000 and run.run.seg_start == pytest.approx(500.0 + pause)
    assert run.run.step_s == pytest.approx(1 / 4)
    segment = run.run
    run.leave(3, 510.0, books)  # the Job controller deletes the removed pods afterwards
    run.leave(2, 511.0, books)
    assert run.run is segment and run.steps == 4000  # not a failure: nothing paused or lost
    # Their allocation was charged up to the scale: 4 members x 2 CPUs x 500 s.
    assert books.allocated_cpu_s == pytest.approx(8 * 500)


def test_a_member_failing_after_a_scale_goes_back_to_the_scales_checkpoint_not_the_periodic_one() -> None:
    run, books, rng = cpu_gang(2)
    pause = run.scale(grown(run, 2), 400.0, books, rng, 0.0)  # checkpoint: 1600 steps
    assert run.run is not None and run.run.steps_at(400.0 + pause + 50.0) == 1800
    run.leave(1, 400.0 + pause + 50.0, books)
    assert (run.steps, run.checkpoint) == (1600, 1600)
    # Without a scale, the same failure goes back to the periodic checkpoint of 300 s of training.
    plain, plain_books, _ = cpu_gang(2)
    plain.leave(1, 450.0, plain_books)
    assert plain.steps == 1200


def test_a_resize_during_the_pause_does_not_start_the_segment_early() -> None:
    run, books, rng = cpu_gang(2)
    pause = run.scale(grown(run, 2), 100.0, books, rng, 0.0)
    run.resize(0, 4.0, 105.0, books, rng, 0.0)  # in place
    assert run.run is not None and run.run.seg_start == pytest.approx(100.0 + pause) and run.run.seg_steps == 400


def test_a_gpu_gang_pauses_longer_and_runs_at_the_table_rate_of_its_new_gpu_count() -> None:
    gang = Gang(workers(1, gpu=2), DataParallel(1.0, 2))
    job = Job("big", 0.0, 1_000_000, 2000, "1Gi", TABLE, gpu=2, gang=gang)
    run, books, rng = GangRun(job, gang), Accounting(), random.Random(3)
    run.bind(0, Held("", 2.0, 2, "n0"), 0.0, rng, 0.0)
    assert run.run is not None and run.run.step_s == pytest.approx(1 / 20)
    pause = run.scale(dataclasses.replace(gang, members=workers(2, gpu=2)), 100.0, books, rng, 0.0)
    assert SCALE_PAUSE_GPU_S[0] <= pause <= SCALE_PAUSE_GPU_S[1]
    run.bind(1, Held("", 2.0, 2, "n1"), 101.0, rng, 0.0)
    assert run.run is not None and run.run.seg_steps == 2000 and run.run.step_s == pytest.approx(1 / 40)


def test_pauses_are_drawn_per_change_from_the_seeded_generator() -> None:
    cpu_job = Job("c", 0.0, 100, 1000, "1Gi", WORKER_TRUTH)
    gpu_job = Job("g", 0.0, 100, 1000, "1Gi", TABLE, gpu=1)
    cpu = [scale_pause_seconds(cpu_job, random.Random(1)) for _ in range(2)]
    assert cpu[0] == cpu[1]  # seeded
    rng = random.Random(1)
    draws = [scale_pause_seconds(cpu_job, rng) for _ in range(200)]
    assert len(set(draws)) == 200 and min(draws) >= 20.0 and max(draws) <= 40.0
    assert max(draws) > 38.0 and min(draws) < 22.0  # the whole range, not one value
    gpu = [scale_pause_seconds(gpu_job, rng) for _ in range(200)]
    assert min(gpu) >= 30.0 and max(gpu) <= 90.0 and max(gpu) > 85.0


def test_renumbering_keeps_the_members_it_names_and_refuses_what_does_not_fit() -> None:
    run, books, rng = cpu_gang(3)
    with pytest.raises(ValueError, match="does not fit"):
        run.scale(grown(run, 2), 10.0, books, rng, 0.0, renumber={0: 0, 2: 2})
    run.scale(grown(run, 2), 10.0, books, rng, 0.0, renumber={2: 0, 0: 1})  # member 1 is the one gone
    assert run.held[0].node == "n2" and run.held[1].node == "n0" and run.complete
