"""pysched.progress: the training-side helper that writes `pysched.io/progress`."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

import pysched_progress
from pysched import progress
from pysched.progress import (
    PROGRESS,
    HuggingFaceProgress,
    KerasProgress,
    LightningProgress,
    PodRef,
    Reporter,
    granted_cpus,
    lightning_callback,
)

POD = PodRef("train", "job-0")
T0 = 1_796_040_000.0  # 2026-11-30T12:00:00Z


class FakeTransport:
    def __init__(self) -> None:
        self.writes: list[tuple[PodRef, dict[str, str]]] = []
        self.fail = False

    def patch_annotations(self, pod: PodRef, annotations: Mapping[str, str]) -> None:
        if self.fail:
            raise ConnectionError("apiserver unreachable")
        self.writes.append((pod, dict(annotations)))

    @property
    def values(self) -> list[str]:
        return [a[PROGRESS] for _, a in self.writes]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def reporter(interval: float = 60.0) -> tuple[Reporter, FakeTransport, Clock]:
    transport, clock = FakeTransport(), Clock()
    return Reporter(POD, transport, interval=interval, clock=clock), transport, clock


def test_first_report_is_written_at_once_as_steps_at_rfc3339() -> None:
    rep, transport, clock = reporter()
    clock.now = T0 + 5.7
    assert rep.report(1200) and rep.drain()
    assert transport.writes == [(POD, {PROGRESS: "1200@2026-11-30T12:00:05Z"})]


def test_writes_are_rate_limited_and_stamped_when_observed() -> None:
    rep, transport, clock = reporter(interval=60)
    rep.report(1)
    for step in range(2, 60):
        clock.now += 1
        assert not rep.report(step)
    assert rep.drain() and transport.values == ["1@2026-11-30T12:00:00Z"]
    clock.now = T0 + 60
    assert rep.report(60) and rep.drain()
    assert transport.values[-1] == "60@2026-11-30T12:01:00Z"
    clock.now += 10
    rep.report(70)
    clock.now += 20  # flushed later, stamped with the time step 70 was observed
    assert rep.flush()
    assert transport.values == ["1@2026-11-30T12:00:00Z", "60@2026-11-30T12:01:00Z", "70@2026-11-30T12:01:10Z"]
    assert rep.flush() and len(transport.writes) == 3  # nothing new: no second write


def test_reaching_total_is_written_at_once_and_interval_is_configurable() -> None:
    rep, transport, clock = reporter(interval=10)
    rep.report(1, total=5)
    rep.drain()
    clock.now += 1
    assert not rep.report(4, total=5)
    assert rep.report(5, total=5) and rep.drain()
    clock.now += 10
    assert rep.report(6) and rep.drain()
    assert [v.split("@")[0] for v in transport.values] == ["1", "5", "6"]


def test_a_clock_going_backwards_does_not_stall_writes() -> None:
    rep, transport, clock = reporter()
    rep.report(1)
    rep.drain()
    clock.now -= 3600
    assert rep.report(2) and rep.drain()
    assert transport.values[-1] == "2@2026-11-30T11:00:00Z"


def test_api_errors_are_logged_never_raised_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    rep, transport, clock = reporter()
    transport.fail = True
    with caplog.at_level(logging.WARNING, logger="pysched_progress"):
        assert rep.report(10) and rep.drain()  # started; it fails on the writer's thread
    assert "could not write pysched.io/progress=10@" in caplog.text and "apiserver unreachable" in caplog.text
    clock.now += 1
    assert not rep.report(11)  # a failed attempt counts for the rate limit too
    transport.fail = False
    assert rep.flush()
    assert transport.values == ["11@2026-11-30T12:00:01Z"]


def test_bad_steps_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    rep, transport, _ = reporter()
    with caplog.at_level(logging.WARNING, logger="pysched_progress"):
        assert not rep.report(-1)
        assert not rep.report(1.5)  # type: ignore[arg-type]
    assert transport.writes == [] and "negative" in caplog.text and "non-integer" in caplog.text


def test_a_loop_of_bad_calls_warns_once_a_kind_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    rep, transport, clock = reporter()
    with caplog.at_level(logging.WARNING, logger="pysched_progress"):
        for _ in range(1000):
            assert not rep.report(1.5)  # type: ignore[arg-type]
        assert not rep.report(True)  # a bool is no step count
        assert not rep.report(10**40)  # more than the 16 digits pysched admits
        assert rep.report(5, total="100")  # type: ignore[arg-type]  # a total from an env var: ignored
        rep.drain()
        clock.now += 61
        assert rep.report(3)  # fewer steps: a run that started again, which pysched reads as such
        rep.drain()
    assert transport.values == ["5@2026-11-30T12:00:00Z", "3@2026-11-30T12:01:01Z"]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines  # non-integer, too large, the total: once each
    assert any("too large" in line for line in lines)


def test_reaching_the_total_is_written_at_once_but_only_once() -> None:
    rep, transport, _ = reporter()
    for steps in (1, 2, 3):  # a wrong total (per epoch, say) must not write every step
        rep.report(steps, total=1)
        rep.drain()
    assert transport.values == ["1@2026-11-30T12:00:00Z"]
    rep, transport, clock = reporter()
    rep.report(1, total=10)
    rep.drain()
    clock.now += 5
    assert rep.report(10, total=10) and rep.drain()  # within the interval, but done: written at once
    assert transport.values == ["1@2026-11-30T12:00:00Z", "10@2026-11-30T12:00:05Z"]


@pytest.mark.parametrize("value", ["nan", "-5", "inf", "soon"])
def test_an_interval_that_would_turn_the_rate_limit_off_is_ignored(value: str) -> None:
    env = {"POD_NAME": "job-0", "POD_NAMESPACE": "train", "PYSCHED_PROGRESS_INTERVAL": value}
    assert Reporter.from_environment(env).interval == 60.0


def test_outside_a_pod_every_call_is_a_no_op(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pysched_progress"):
        rep = Reporter.from_environment({})
    assert rep.pod is None and "POD_NAME" in caplog.text
    assert not rep.report(1) and not rep.flush()


def test_pod_identity_from_env_then_downward_api_files(tmp_path: Path) -> None:
    env = {"POD_NAME": "p", "POD_NAMESPACE": "ns"}
    assert PodRef.from_downward_api(env, tmp_path) == PodRef("ns", "p")
    (tmp_path / "name").write_text("from-file\n")
    sa = tmp_path / "sa-namespace"
    sa.write_text("sa-ns")
    assert PodRef.from_downward_api({}, tmp_path, sa) == PodRef("sa-ns", "from-file")
    (tmp_path / "namespace").write_text("file-ns")
    assert PodRef.from_downward_api({}, tmp_path, sa) == PodRef("file-ns", "from-file")
    assert PodRef.from_downward_api({}, tmp_path / "missing", tmp_path / "missing") is None


def test_interval_from_the_environment() -> None:
    env = {"POD_NAME": "p", "POD_NAMESPACE": "ns", "PYSCHED_PROGRESS_INTERVAL": "15"}
    assert Reporter.from_environment(env).interval == 15.0
    assert Reporter.from_environment({**env, "PYSCHED_PROGRESS_INTERVAL": "soon"}).interval == 60.0


def test_module_functions_use_the_configured_reporter() -> None:
    rep, transport, _ = reporter()
    progress.configure(rep)
    try:
        assert progress.report(3) and progress.default_reporter() is rep
        assert progress.flush()
    finally:
        progress.configure(None)
    assert transport.values == ["3@2026-11-30T12:00:00Z"]


def test_lightning_callback_reports_global_step() -> None:
    rep, transport, clock = reporter(interval=0)
    callback = LightningProgress(rep)
    trainer = SimpleNamespace(global_step=0, max_steps=-1)
    for batch_idx in range(3):
        trainer.global_step += 1
        clock.now += 1
        callback.on_train_batch_end(trainer, None, {"loss": 0.1}, object(), batch_idx)
        rep.drain()  # a write under way takes only the newest step: each is seen here
    callback.on_fit_start(trainer, None)  # hooks we do not use are no-ops
    callback.on_train_end(trainer, None)
    assert [v.split("@")[0] for v in transport.values] == ["1", "2", "3"]


def test_keras_callback_counts_steps_across_epochs() -> None:
    rep, transport, clock = reporter(interval=0)
    callback = KerasProgress(rep)
    callback.set_model(object())
    callback.set_params({"epochs": 2, "steps": 3})
    for epoch in range(2):
        callback.on_epoch_begin(epoch)
        for batch in range(3):
            clock.now += 1
            callback.on_train_batch_end(batch, logs={"loss": 0.1})
            rep.drain()
        callback.on_epoch_end(epoch)
    callback.on_train_end()
    assert callback.steps == 6
    assert [v.split("@")[0] for v in transport.values] == ["1", "2", "3", "4", "5", "6"]
    with pytest.raises(AttributeError):
        _ = callback.stop_training_flag  # only hooks default to no-ops


def test_hugging_face_callback_reports_state_global_step_and_flushes() -> None:
    rep, transport, clock = reporter(interval=60)
    callback = HuggingFaceProgress(rep)
    state = SimpleNamespace(global_step=0, max_steps=100)
    for _ in range(3):
        state.global_step += 1
        clock.now += 1
        callback.on_step_end(SimpleNamespace(), state, SimpleNamespace(), model=None)
        rep.drain()
    assert callback.on_log(SimpleNamespace(), state, SimpleNamespace(), logs={}) is None  # keeps `control`
    callback.on_train_end(SimpleNamespace(), state, SimpleNamespace())
    assert [v.split("@")[0] for v in transport.values] == ["1", "3"]


def test_callbacks_mix_into_a_framework_base_class() -> None:
    class FrameworkCallback:
        def __init__(self) -> None:
            self.base_initialised = True

        def on_fit_start(self, trainer: object, pl_module: object) -> str:
            return "base"

    class Progress(LightningProgress, FrameworkCallback):
        pass

    callback = Progress(reporter()[0])
    assert callback.base_initialised and callback.on_fit_start(None, None) == "base"


def _fake_lightning(monkeypatch: pytest.MonkeyPatch, module: str) -> type:
    """A stand-in for Lightning (not installed here): a module whose `Callback` defines no-op hooks."""

    class Callback:
        def on_fit_start(self, trainer: object, pl_module: object) -> None:
            return None

    fake = ModuleType(module)
    fake.Callback = Callback  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module, fake)
    return Callback


def test_lightning_callback_is_an_instance_of_lightnings_callback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lightning", ModuleType("lightning"))
    base = _fake_lightning(monkeypatch, "lightning.pytorch")
    _fake_lightning(monkeypatch, "pytorch_lightning")  # lightning.pytorch wins over the old name
    rep, transport, clock = reporter(interval=0)
    callback = lightning_callback(rep)
    assert isinstance(callback, base) and isinstance(callback, LightningProgress)
    assert type(lightning_callback(rep)) is type(callback)  # one class: one Lightning state_key
    trainer = SimpleNamespace(global_step=0, max_steps=2)
    for batch_idx in range(2):
        trainer.global_step += 1
        clock.now += 1
        callback.on_train_batch_end(trainer, None, {"loss": 0.1}, object(), batch_idx)
        rep.drain()
    callback.on_fit_start(trainer, None)
    assert [v.split("@")[0] for v in transport.values] == ["1", "2"]


def test_lightning_callback_falls_back_to_pytorch_lightning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lightning", None)  # import lightning raises ModuleNotFoundError
    base = _fake_lightning(monkeypatch, "pytorch_lightning")
    rep, transport, _ = reporter()
    callback = lightning_callback(rep)
    assert isinstance(callback, base)
    callback.on_train_batch_end(SimpleNamespace(global_step=7, max_steps=-1), None, None, None, 0)
    rep.drain()
    assert [v.split("@")[0] for v in transport.values] == ["7"]


def test_lightning_callback_without_lightning_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lightning", None)
    monkeypatch.setitem(sys.modules, "pytorch_lightning", None)
    with pytest.raises(ImportError, match=r"needs PyTorch Lightning.*pip install lightning"):
        lightning_callback()


def test_lightning_callback_does_not_hide_a_broken_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def import_module(name: str) -> ModuleType:  # lightning is there, a dependency of it is not
        raise ModuleNotFoundError("No module named 'lightning_utilities'", name="lightning_utilities")

    monkeypatch.setattr(pysched_progress, "importlib", SimpleNamespace(import_module=import_module))
    with pytest.raises(ModuleNotFoundError, match="lightning_utilities"):
        lightning_callback()


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"cpu.max": "250000 100000\n"}, 2.5),
        ({"cpu.max": "50000\n"}, 0.5),
        ({"cpu/cpu.cfs_quota_us": "150000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1.5),
        ({"cpu,cpuacct/cpu.cfs_quota_us": "50000\n", "cpu,cpuacct/cpu.cfs_period_us": "200000\n"}, 0.25),
    ],
)
def test_granted_cpus_reads_the_cgroup_quota(tmp_path: Path, files: dict[str, str], expected: float) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert granted_cpus(tmp_path) == expected


@pytest.mark.parametrize(
    "files",
    [
        {"cpu.max": "max 100000\n"},  # v2: no limit
        {"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"},  # v1: no limit
        {"cpu.max": "lots 100000\n"},
        {},  # no cgroup files at all
    ],
)
def test_granted_cpus_without_a_quota_is_the_cpus_the_process_may_run_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5}, raising=False)
    assert granted_cpus(tmp_path) == 3.0
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # macOS / Windows
    monkeypatch.setattr(os, "cpu_count", lambda: 12)
    assert granted_cpus(tmp_path) == 12.0


def test_granted_cpus_follows_an_in_place_resize(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("200000 100000\n")
    assert granted_cpus(tmp_path) == 2.0
    (tmp_path / "cpu.max").write_text("400000 100000\n")
    assert granted_cpus(tmp_path) == 4.0


def test_importing_the_helper_pulls_in_no_heavy_modules() -> None:
    code = (
        "import sys, pysched.progress; "
        "heavy = [m for m in ('kubernetes', 'torch', 'tensorflow', 'transformers', 'keras', 'lightning', "
        "'numpy', 'numba') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


class HungTransport(FakeTransport):
    """The API server hangs on the first write until released (a write's timeout is 10 s)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.release = threading.Event(), threading.Event()
        self.calls = 0

    def patch_annotations(self, pod: PodRef, annotations: Mapping[str, str]) -> None:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            self.release.wait(10)
        super().patch_annotations(pod, annotations)


def test_a_hung_api_server_never_holds_up_the_training_step() -> None:
    transport, clock = HungTransport(), Clock()
    rep = Reporter(POD, transport, interval=60, clock=clock)
    assert rep.report(1)  # returns while its write hangs
    assert transport.entered.wait(5) and transport.writes == []
    for step in range(2, 100):  # the loop goes on; no second write while the interval runs
        clock.now += 0.5
        assert not rep.report(step)
    transport.release.set()
    assert rep.drain(5) and transport.values == ["1@2026-11-30T12:00:00Z"]
    assert rep.flush() and transport.values[-1] == "99@2026-11-30T12:00:49Z"


def test_flush_waits_for_the_write_under_way_then_writes_the_newest_step() -> None:
    transport, clock = HungTransport(), Clock()
    rep = Reporter(POD, transport, interval=60, clock=clock)
    rep.report(1)
    assert transport.entered.wait(5)
    clock.now += 1
    rep.report(2)
    threading.Timer(0.05, transport.release.set).start()
    assert rep.flush()  # after the hung write, not beside it: writes go out in order
    assert transport.values == ["1@2026-11-30T12:00:00Z", "2@2026-11-30T12:00:01Z"]


def test_a_step_reported_while_a_write_is_under_way_is_written_after_it() -> None:
    transport, clock = HungTransport(), Clock()
    rep = Reporter(POD, transport, interval=0, clock=clock)
    rep.report(1)
    assert transport.entered.wait(5)
    for step in (2, 3):
        clock.now += 1
        assert rep.report(step)  # handed to the writer, which takes the newest
    transport.release.set()
    assert rep.drain(5) and transport.values == ["1@2026-11-30T12:00:00Z", "3@2026-11-30T12:00:02Z"]


def test_without_a_thread_to_write_on_the_step_is_written_in_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    rep, transport, _ = reporter()
    assert rep.report(5) and transport.values == ["5@2026-11-30T12:00:00Z"]
    assert rep.drain(0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_reports_although_the_parents_writer_held_its_locks() -> None:
    transport, clock = HungTransport(), Clock()
    rep = Reporter(POD, transport, interval=60, clock=clock)
    rep.report(1)
    assert transport.entered.wait(5)  # the parent's writer holds the write lock from here
    pid = os.fork()
    if pid == 0:  # the child: no writer thread; without fresh locks, flush() waits forever
        signal.alarm(10)
        clock.now += 1
        rep.report(2)
        os._exit(0 if rep.flush() and transport.values[-1] == "2@2026-11-30T12:00:01Z" else 1)
    _, status = os.waitpid(pid, 0)
    transport.release.set()
    assert os.waitstatus_to_exitcode(status) == 0
    assert rep.drain(5) and transport.values == ["1@2026-11-30T12:00:00Z"]
