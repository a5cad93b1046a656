"""Trace input: CSV (the published deadline-trace columns), SWF, and a seeded synthetic generator.

Files are streamed line by line (`api.inputs.read_lines`). Bad rows, numbers out of bounds
included, are reported as `file:line: problem` (the header is line 1) and skipped; the caller
decides what an empty result means (the CLI exits 2). A file that cannot be read as a whole
(not text, a line or cell over its limit, too many rows) is a TraceError naming the line.
"""

from __future__ import annotations

import collections
import csv
import itertools
import math
import random
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pysched.api.inputs import InputError, read_lines
from pysched.api.limits import MAX_STEPS, clip
from pysched.api.resources import MEMORY, QuantityError, to_scheduler_units
from pysched.workload.catalogue import Catalogue, CpuModel, GpuModel, Model
from pysched.workload.gang import Gang
from pysched.workload.job import Job
from pysched.workload.speed import SpeedModel, Throughput

DEFAULT_GPU_MIX: Mapping[int, float] = {1: 0.83, 2: 0.03, 4: 0.03, 8: 0.10, 16: 0.01}
# Users over-provision: most ask for more CPUs than their job uses well (p_max, Amdahl).
DEFAULT_CPU_MIX: Mapping[int, float] = {1: 0.10, 2: 0.35, 4: 0.25, 8: 0.20, 16: 0.10}
CPU_PER_GPU = 4
DEFAULT_CPU = 2  # the founding paper's pods: 2 CPU, about 1 GiB
DEFAULT_MEMORY = "1Gi"

# Bounds of a trace. Times are seconds (epoch seconds fit); a job's run time at its request and its
# deadline must fit too, so that every time the simulator derives stays a date it can write.
MAX_TRACE_ROWS = 1_000_000  # rows read, skipped ones included
MAX_TRACE_SECONDS = 1e10
# A job's run time: the replay looks at a running job every reconcile, so its wall time grows
# with the longest job (a job of 1e9 s took 443 s to replay alone); a year is beyond any trace's.
MAX_JOB_SECONDS = 366 * 86400.0
MAX_JOB_GPUS = 4096
MAX_JOB_CPUS = 100_000
MAX_BATCH_SIZE = 2**31
MAX_DEADLINE_FACTOR = 10.0  # HI of --deadline-rule
# Other names of the columns, as ElasticFlow's repository spells them in some of its traces.
COLUMN_ALIASES: Mapping[str, str] = {
    "submit_time": "submission_time",
    "ddl": "deadline",
    "iteration": "num_iteration",
    "iterations": "num_iteration",
}


@dataclass(frozen=True, slots=True)
class DeadlineRule:
    """Deadline = submission + U(lo, hi) x duration, for jobs the trace gives none."""

    lo: float = 0.5
    hi: float = 1.5

    def draw(self, rng: random.Random, submit: float, duration: float) -> float:
        return submit + rng.uniform(self.lo, self.hi) * duration


DEADLINE_RULE_FORMS = "none, or LO,HI factors of the duration (default 0.5,1.5)"


def parse_deadline_rule(text: str) -> DeadlineRule | None:
    """`none` or `LO,HI`; raises ValueError naming the accepted forms."""
    if text.strip().lower() == "none":
        return None
    parts = text.split(",")
    try:
        lo, hi = (float(p) for p in parts)
    except ValueError:
        raise ValueError(f"--deadline-rule: {clip(text)} is not accepted ({DEADLINE_RULE_FORMS})") from None
    if not (0 < lo <= hi <= MAX_DEADLINE_FACTOR):
        raise ValueError(
            f"--deadline-rule: need 0 < LO <= HI <= {MAX_DEADLINE_FACTOR:g}, got {clip(text)} ({DEADLINE_RULE_FORMS})"
        )
    return DeadlineRule(lo, hi)


@dataclass(frozen=True, slots=True)
class Trace:
    jobs: tuple[Job, ...]
    problems: tuple[str, ...]  # one `file:line: problem` per skipped row
    # Skipped rows that had a deadline (or would have had one by the rule): missed deadlines
    # of the workload, so that skipping a row never raises the deadline-met ratio.
    skipped_deadlines: int = 0

    @property
    def skipped(self) -> int:
        return len(self.problems)


class TraceError(ValueError):
    """The file as a whole cannot be read (missing, no header, no usable columns)."""


class _BadRow(ValueError):
    pass


def _rng(seed: int, *parts: object) -> random.Random:
    """An independent stream per job, so one bad row does not shift every later draw."""
    return random.Random(zlib.crc32(repr((seed, *parts)).encode()))


def _float(
    row: Mapping[str, str], key: str, *, minimum: float = 0.0, maximum: float = MAX_TRACE_SECONDS
) -> float | None:
    text = (row.get(key) or "").strip()
    if not text:
        return None
    if not _DECIMAL.fullmatch(text):  # float() would also take `1_000`, Arabic-Indic or full-width digits
        raise _BadRow(f"{key} {clip(text)} is not a number")
    value = float(text)
    if not minimum <= value <= maximum:  # inf and 1e300 are out of range
        raise _BadRow(f"{key} {clip(text)} must be a number from {_bound(minimum)} to {_bound(maximum)}")
    return value


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_WHOLE = re.compile(r"[+-]?[0-9]{1,40}")


def _bound(value: float) -> str:
    """A range end as the README writes it: whole numbers in full (9,999,999,999,999,999, not 1e+16)."""
    return f"{int(value):,}" if float(value).is_integer() and abs(value) < 1e18 else f"{value:g}"


def _int(row: Mapping[str, str], key: str, *, minimum: int = 0, maximum: int) -> int | None:
    text = (row.get(key) or "").strip()
    if _WHOLE.fullmatch(text):  # exact: a float holds no more than 15 digits
        whole = int(text)
        if not minimum <= whole <= maximum:
            raise _BadRow(f"{key} {clip(text)} must be a number from {_bound(minimum)} to {_bound(maximum)}")
        return whole
    value = _float(row, key, minimum=minimum, maximum=maximum)
    if value is None:
        return None
    if value != int(value):
        raise _BadRow(f"{key} {clip(row[key].strip())} must be an integer")
    return int(value)


def _pick_model(catalogue: Catalogue, gpus: int, batch: int | None, rng: random.Random) -> Model:
    kind = GpuModel if gpus else CpuModel
    names = [n for n in catalogue.names(kind) if not gpus or offers_gpus(catalogue.models[n], gpus, batch)]
    if not names:
        measured = "" if batch is None else f" at batch_size {batch}"
        raise _BadRow(f"no catalogue model offers {gpus} GPUs{measured}")
    return catalogue.models[rng.choice(names)]


def offers_gpus(model: Model, gpus: int, batch: int | None = None) -> bool:
    """The model's table (of `batch`, measured; its default one when None) measures a run on
    `gpus` GPUs."""
    if not isinstance(model, GpuModel) or (batch is not None and batch not in model.tables):
        return False
    return model.truth(random.Random(0), batch).rate(gpus) is not None


def _truth(model: Model, gpus: int, batch: int | None, rng: random.Random) -> SpeedModel:
    if isinstance(model, GpuModel):
        if not gpus:
            raise _BadRow(f"model {model.name} is a GPU model but num_gpu is 0")
        if batch is not None and batch not in model.tables:
            raise _BadRow(f"batch_size {batch} not measured for {model.name} (measured: {sorted(model.tables)})")
        table = model.truth(rng, batch)
        if table.rate(gpus) is None:
            raise _BadRow(f"model {model.name} does not offer {gpus} GPUs (offered: {list(table.gpus)})")
        return table
    if gpus:
        raise _BadRow(f"model {model.name} is a CPU model but num_gpu is {gpus}")
    return model.truth(rng, batch)


def make_job(
    index: int,
    *,
    submit: float,
    gpus: int,
    cpu_milli: int,
    memory: str,
    model: Model,
    truth: SpeedModel,
    steps: int | None,
    duration: float | None,
    deadline: float | None,
    rule: DeadlineRule | None,
    rng: random.Random,
    source: str,
    gang: Gang | None = None,
    trace_id: str = "",
) -> Job:
    """Steps from `duration` at the requested resources (every member at its request, for a
    gang) when not given; deadline from the rule."""
    if gang is None:
        step_s = truth.step_seconds(cpu_milli / 1000, gpus)
    else:
        rate = gang.speed.steps_per_s(truth, gang.at_request())
        step_s = 1.0 / rate if rate > 0 else math.inf
    from_duration = steps is None
    if steps is None:
        assert duration is not None
        steps = max(1, round(duration / step_s))
        if steps > MAX_STEPS:  # the scheduler ignores a total-steps annotation this long
            raise _BadRow(
                f"duration {duration:g} s is {steps:.3g} steps of model {model.name} at {step_s:.3g} s a step,"
                f" more than {MAX_STEPS:,}"
            )
    run_s = duration if duration is not None else steps * step_s
    # The steps are what runs: a duration given beside them must not let a longer run through.
    longest = max(run_s, steps * step_s)
    if not longest <= MAX_JOB_SECONDS:
        raise _BadRow(f"runs {longest:.3g} s at its request, more than {_bound(MAX_JOB_SECONDS)} (366 days)")
    if deadline is None and rule is not None:
        deadline = rule.draw(rng, submit, run_s)
    return Job(
        job_name(index),
        submit,
        steps,
        cpu_milli,
        memory,
        truth,
        gpu=gpus,
        deadline=deadline,
        model=model.name,
        source=source,
        trace_id=trace_id,
        restart_on_resize=gang is None,  # a gang's members resize in place
        gang=gang,
        expected_s=run_s if gpus else None,
        from_duration=from_duration,
    )


def job_name(index: int) -> str:
    return f"job-{index:05d}"


def _row_job(
    row: Mapping[str, str],
    index: int,
    where: str,
    catalogue: Catalogue,
    rule: DeadlineRule | None,
    seed: int,
    draw: int,
) -> Job:
    """The job of a row, named by `index` (the jobs before it); its draws seeded by `draw`, the
    row's place among the trace's rows, skipped ones included, so that a bad row does not change
    the draws of the rows after it."""
    if not (row.get("job_id") or "").strip():
        raise _BadRow("job_id is missing")
    submit = _float(row, "submission_time")
    if submit is None:
        raise _BadRow("submission_time is missing")
    steps = _int(row, "num_iteration", minimum=1, maximum=MAX_STEPS)
    duration = _float(row, "duration", maximum=MAX_JOB_SECONDS)
    if steps is None and (duration is None or duration <= 0):
        raise _BadRow("needs num_iteration or a positive duration")
    gpus = _int(row, "num_gpu", maximum=MAX_JOB_GPUS) or 0
    deadline = _float(row, "deadline")
    if deadline is not None and deadline < submit:
        raise _BadRow(f"deadline {deadline:g} is before submission_time {submit:g}")
    batch = _int(row, "batch_size", minimum=1, maximum=MAX_BATCH_SIZE)
    rng = _rng(seed, row["job_id"], draw)
    name = (row.get("model_name") or "").strip()
    if name:
        found = catalogue.get(name)
        if found is None:
            raise _BadRow(f"unknown model {clip(name)} (known: {', '.join(catalogue.names())})")
        model = found
    else:
        model = _pick_model(catalogue, gpus, batch, rng)
    cpu = _float(row, "num_cpu", maximum=MAX_JOB_CPUS)
    if cpu is not None and cpu < 0.001:
        raise _BadRow("num_cpu must be at least 0.001")
    cpu_milli = round(1000 * (cpu if cpu is not None else (CPU_PER_GPU * gpus if gpus else DEFAULT_CPU)))
    memory = (row.get("memory") or "").strip() or (f"{8 * gpus}Gi" if gpus else DEFAULT_MEMORY)
    try:
        if to_scheduler_units(MEMORY, memory) <= 0:
            raise _BadRow(f"memory {clip(memory)} must be positive")
    except QuantityError:  # not a quantity, or beyond what the scheduler counts
        raise _BadRow(f"memory {clip(memory)} is not a Kubernetes quantity the scheduler can count") from None
    truth = _truth(model, gpus, batch, rng)
    return make_job(
        index,
        submit=submit,
        gpus=gpus,
        cpu_milli=cpu_milli,
        memory=memory,
        model=model,
        truth=truth,
        steps=steps,
        duration=duration,
        deadline=deadline,
        rule=rule,
        rng=rng,
        source=where,
        trace_id=row["job_id"].strip(),
    )


class _Lines:
    """A trace's lines: read errors as TraceError, at most MAX_TRACE_ROWS, the last line's number kept."""

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.number = 0
        self._lines = read_lines(path)

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        self.number += 1
        if self.number > MAX_TRACE_ROWS + 1:  # + the header
            raise TraceError(f"{self.path}:{self.number}: more than {MAX_TRACE_ROWS:,} rows")
        try:
            return next(self._lines)
        except InputError as err:
            raise TraceError(str(err)) from None


def _canonical(header: list[str]) -> list[str]:
    """The header with aliased columns renamed, unless the canonical name is there too (such a
    header is refused: `_repeated_columns`)."""
    present = set(header)
    return [COLUMN_ALIASES[h] if h in COLUMN_ALIASES and COLUMN_ALIASES[h] not in present else h for h in header]


def _repeated_columns(raw: Sequence[str], header: Sequence[str]) -> str:
    """The columns named more than once (aliases counted as the column they stand for), as
    `deadline (ddl, deadline)`; empty when none."""
    names: dict[str, list[str]] = collections.defaultdict(list)
    for given, column in zip(raw, header, strict=True):
        if column:  # unnamed columns (a trailing comma) are never read
            names[COLUMN_ALIASES.get(given, column)].append(given)
    return ", ".join(
        column if set(given) == {column} else f"{column} ({', '.join(given)})"
        for column, given in sorted(names.items())
        if len(given) > 1
    )


def read_csv(
    path: str | Path, catalogue: Catalogue, rule: DeadlineRule | None = DeadlineRule(), seed: int = 7
) -> Trace:
    """A CSV trace with a header; extra columns are ignored, `num_iteration` wins over `duration`.
    A file whose first text starts with `;` is read as SWF."""
    lines = _Lines(path)
    head = next(lines, "")
    if head.lstrip().startswith(";"):  # read on from the lines read: a pipe cannot be read again
        return read_swf(path, catalogue, rule, seed, itertools.chain([head], lines))
    reader = csv.DictReader(itertools.chain([head], lines))
    jobs: list[Job] = []
    problems: list[str] = []
    lost_deadlines = 0
    try:
        raw = [h.strip().lstrip("\ufeff").strip() for h in reader.fieldnames or ()]
        header = _canonical(raw)
        reader.fieldnames = header
        twice = _repeated_columns(raw, header)
        if twice:  # a row would silently keep the last of the cells
            raise TraceError(f"{path}:1: header names a column more than once: {clip(twice)}")
        missing = [c for c in ("job_id", "submission_time") if c not in header]
        if missing or not ({"duration", "num_iteration"} & set(header)):
            raise TraceError(
                f"{path}:1: header needs job_id, submission_time and duration or num_iteration "
                f"(got: {clip(', '.join(header))})"
            )
        first_seen: dict[str, int] = {}  # job_id -> its first line, skipped or not
        for draw, row in enumerate(reader):
            where = f"{path}:{reader.line_num}"
            job_id = (row.get("job_id") or "").strip()
            if job_id in first_seen:  # a later row of a skipped job is not the job either
                problem = f"job_id {clip(job_id)} repeats line {first_seen[job_id]}"
            else:
                if job_id:
                    first_seen[job_id] = reader.line_num
                if None in row:  # more cells than the header: a broken row, not an extra column
                    problem = "more cells than header columns"
                else:
                    try:
                        jobs.append(_row_job(row, len(jobs), where, catalogue, rule, seed, draw))
                        continue
                    except _BadRow as err:
                        problem = str(err)
            problems.append(f"{where}: {problem}")
            lost_deadlines += rule is not None or bool(str(row.get("deadline") or "").strip())
    except csv.Error as err:  # a cell over csv's field limit (128 KiB), a NUL byte
        text = str(err)
        if "new-line character seen in unquoted field" in text:  # csv's words for a lone CR
            text = "its lines end in a lone carriage return (CR); save it with LF or CRLF line ends"
        raise TraceError(f"{path}:{lines.number}: {text}") from None
    return Trace(tuple(sorted(jobs, key=lambda j: j.submit)), tuple(problems), lost_deadlines)


_SWF_FIELDS = 18


def read_swf(
    path: str | Path,
    catalogue: Catalogue,
    rule: DeadlineRule | None = DeadlineRule(),
    seed: int = 7,
    lines: Iterable[str] | None = None,
) -> Trace:
    """Standard Workload Format: `;` comments, 18 whitespace-separated fields per job (`lines`:
    the file's lines, when its start has been read already).

    Used: 1 job number, 2 submit time, 4 run time, 8 requested processors (5 allocated when -1).
    Processors become CPUs of a CPU model drawn from the catalogue; -1 means unknown.
    """
    jobs: list[Job] = []
    problems: list[str] = []
    first_seen: dict[str, int] = {}  # job number -> its first line, skipped or not
    draw = -1
    for number, line in enumerate(_Lines(path) if lines is None else lines, start=1):
        text = line.split(";", 1)[0].strip()
        if not text:
            continue
        where = f"{path}:{number}"
        draw += 1
        fields = re.split(r"\s+", text)
        if fields[0] in first_seen:
            problems.append(f"{where}: job number {clip(fields[0])} repeats line {first_seen[fields[0]]}")
            continue
        first_seen[fields[0]] = number
        if len(fields) != _SWF_FIELDS:
            problems.append(f"{where}: {len(fields)} fields, SWF has {_SWF_FIELDS}")
            continue
        row = {
            "job_id": fields[0],
            "submission_time": fields[1],
            "duration": fields[3],
            "num_cpu": fields[7] if fields[7] != "-1" else fields[4],
        }
        try:
            jobs.append(_row_job(row, len(jobs), where, catalogue, rule, seed, draw))
        except _BadRow as err:
            problems.append(f"{where}: {_swf_words(str(err), fields[7] != '-1')}")
    # SWF has no deadline field: a skipped row had one only by the rule.
    lost_deadlines = len(problems) if rule is not None else 0
    return Trace(tuple(sorted(jobs, key=lambda j: j.submit)), tuple(problems), lost_deadlines)


def _swf_words(problem: str, requested: bool) -> str:
    """A row's problem named by its SWF field, not by the CSV column it was read as."""
    fields = {
        "job_id": "field 1 (job number)",
        "submission_time": "field 2 (submit time)",
        "duration": "field 4 (run time)",
        "num_cpu": "field 8 (requested processors)" if requested else "field 5 (allocated processors)",
    }
    column, _, rest = problem.partition(" ")
    return f"{fields[column]} {rest}" if column in fields and rest else problem


def _weighted(rng: random.Random, mix: Mapping[int, float]) -> int:
    return rng.choices(list(mix), weights=list(mix.values()))[0]


def synthetic(
    count: int,
    catalogue: Catalogue,
    *,
    seed: int = 7,
    span_s: float = 4 * 3600.0,
    median_s: float = 1800.0,
    sigma: float = 1.0,
    gpu_share: float = 1.0,
    gpu_mix: Mapping[int, float] = DEFAULT_GPU_MIX,
    cpu_mix: Mapping[int, float] = DEFAULT_CPU_MIX,
    models: Sequence[str] = (),
    rule: DeadlineRule | None = DeadlineRule(),
    min_s: float = 60.0,
    max_s: float = 7 * 86400.0,
) -> tuple[Job, ...]:
    """Poisson arrivals over `span_s`, log-normal durations; `gpu_share` of jobs take GPUs by
    `gpu_mix`, the rest CPUs by `cpu_mix` (over-provisioned as users do); seeded."""
    rng = random.Random(seed)
    rate = count / span_s
    now = 0.0
    jobs: list[Job] = []
    gpu_models = [m for m in models if isinstance(catalogue.get(m), GpuModel)] or catalogue.names(GpuModel)
    cpu_models = [m for m in models if isinstance(catalogue.get(m), CpuModel)] or catalogue.names(CpuModel)
    for index in range(count):
        now += rng.expovariate(rate)
        duration = min(max(rng.lognormvariate(math.log(median_s), sigma), min_s), max_s)
        job_rng = _rng(seed, "synthetic", index)
        if rng.random() < gpu_share:
            gpus = _weighted(rng, gpu_mix)
            offering = [m for m in gpu_models if offers_gpus(catalogue.models[m], gpus)]
            model = catalogue.models[rng.choice(offering or _measuring(catalogue, gpu_models, gpus))]
            cpu_milli, memory = 1000 * CPU_PER_GPU * gpus, f"{8 * gpus}Gi"
        else:
            gpus = 0
            model = catalogue.models[rng.choice(cpu_models)]
            cpu_milli, memory = 1000 * _weighted(rng, cpu_mix), DEFAULT_MEMORY
        truth = model.truth(job_rng, None)
        jobs.append(
            make_job(
                index,
                submit=round(now, 3),
                gpus=gpus,
                cpu_milli=cpu_milli,
                memory=memory,
                model=model,
                truth=truth,
                steps=None,
                duration=duration,
                deadline=None,
                rule=rule,
                rng=job_rng,
                source=f"synthetic:{index}",
            )
        )
    return tuple(jobs)


def _measuring(catalogue: Catalogue, names: Sequence[str], gpus: int) -> list[str]:
    """The GPU models whose tables measure some GPU count, for a job of more GPUs than any offers
    (it runs as a gang, or elastic); ValueError when none does, as its jobs could never run."""
    measured = [n for n in names if _default_table(catalogue.models[n]).gpus]
    if not measured:
        raise ValueError(f"no GPU model of the catalogue measures any GPU count, and the workload has {gpus}-GPU jobs")
    return measured


def _default_table(model: Model) -> Throughput:
    """The table a job of the model runs by when the workload names no batch size."""
    return model.truth(random.Random(0)) if isinstance(model, GpuModel) else Throughput((), ())


def write_csv(jobs: Iterable[Job], path: str | Path) -> None:
    """The published layout plus num_cpu and memory, so a generated trace can be replayed."""
    with Path(path).open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(
            ["job_id", "submission_time", "num_iteration", "model_name", "deadline", "num_gpu", "num_cpu", "memory"]
        )
        for job in jobs:
            deadline = "" if job.deadline is None else f"{job.deadline:.3f}"
            writer.writerow(
                [job.name, job.submit, job.steps, job.model, deadline, job.gpu, job.cpu_milli / 1000, job.memory]
            )
