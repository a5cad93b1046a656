"""A training job described by its pod: the annotations the kubelet emulator reads.

The scheduler never reads these keys (it learns from requests, `pysched.io/total-steps` and
`pysched.io/progress` only); the emulator turns them into the same `Job` and hidden truth the
simulator uses, so a job behaves alike in simulation and against a real kube-apiserver.

| key | meaning | default |
|---|---|---|
| `pysched.io/emulate-model` | a catalogue model name (`lstm`, `resnet50`, ...); absent: not a training job | - |
| `pysched.io/total-steps` | total steps | the model's steps |
| `pysched.io/emulate-seed` | integer seed of the truth draw and the step noise | 0 |
| `pysched.io/emulate-truth` | CPU truth override: `a=A,b=B,p_max=P` or `t1=T,f=F,p_max=P` | drawn around the model |
| `pysched.io/emulate-batch-size` | GPU models: the table row (global batch size) | the smallest measured |
| `pysched.io/emulate-noise` | relative noise of one step time | 0.05 |
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pysched.api.annotations import TOTAL_STEPS
from pysched.api.containers import restarts_on_cpu_resize
from pysched.api.resources import CPU, GPU, QuantityError, pod_requests
from pysched.workload.catalogue import Catalogue
from pysched.workload.job import Job
from pysched.workload.speed import STEP_NOISE, Amdahl, SpeedModel

EMULATE_MODEL = "pysched.io/emulate-model"
EMULATE_SEED = "pysched.io/emulate-seed"
EMULATE_TRUTH = "pysched.io/emulate-truth"
EMULATE_BATCH_SIZE = "pysched.io/emulate-batch-size"
EMULATE_NOISE = "pysched.io/emulate-noise"


@dataclass(frozen=True, slots=True)
class PodJob:
    """A job read from its pod, with the seed and step noise its run draws with."""

    job: Job
    seed: int
    noise: float


def truth_rng(seed: int, name: str) -> random.Random:
    """The random source of one job's truth draw (the noise has its own: `segment.noise_rng`)."""
    return random.Random(zlib.crc32(f"{seed}/{name}/truth".encode()))


def _number(key: str, raw: str, kind: type[int] | type[float], *, zero_ok: bool = False) -> Any:
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        wanted = "a non-negative" if zero_ok else "a positive"
        raise ValueError(f"{key}: must be {wanted} {kind.__name__}, got {raw!r}")
    return value


def parse_truth(raw: str) -> Amdahl:
    """`a=A,b=B,p_max=P` (exact) or `t1=T,f=F,p_max=P` (the catalogue's constants)."""
    fields: dict[str, float] = {}
    for part in raw.split(","):
        name, sep, value = part.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not math.isfinite(number) or number < 0:
            raise ValueError(f"{EMULATE_TRUTH}: {part.strip()!r} is not NAME=NUMBER (a non-negative number)")
        fields[name.strip()] = number
    p_max = fields.get("p_max", 0)
    if p_max < 1 or p_max != int(p_max):
        raise ValueError(f"{EMULATE_TRUTH}: p_max must be an integer >= 1, got {raw!r}")
    if fields.keys() == {"a", "b", "p_max"} and fields["a"] + fields["b"] > 0:
        return Amdahl(fields["a"], fields["b"], int(p_max))
    if fields.keys() == {"t1", "f", "p_max"} and fields["t1"] > 0 and fields["f"] <= 1:
        return Amdahl.from_t1(fields["t1"], fields["f"], int(p_max))
    raise ValueError(f"{EMULATE_TRUTH}: expected a=A,b=B,p_max=P or t1=T,f=F,p_max=P (0 <= f <= 1), got {raw!r}")


def format_truth(truth: Amdahl) -> str:
    """The exact override (floats round-trip through repr)."""
    return f"a={truth.a!r},b={truth.b!r},p_max={truth.p_max}"


def job_from_pod(pod: Mapping[str, Any], catalogue: Catalogue) -> PodJob | None:
    """The pod's job, or None when it names no model. Bad input raises ValueError naming the key."""
    meta = pod.get("metadata") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    model_name = annotations.get(EMULATE_MODEL)
    if model_name is None:
        return None
    model = catalogue.get(model_name)
    if model is None:
        raise ValueError(f"{EMULATE_MODEL}: unknown model {model_name!r}; known: {', '.join(catalogue.names())}")
    name = str(meta.get("name", ""))

    def number(key: str, kind: type[int] | type[float], default: Any, zero_ok: bool = False) -> Any:
        return _number(key, annotations[key], kind, zero_ok=zero_ok) if key in annotations else default

    seed = number(EMULATE_SEED, int, 0, zero_ok=True)
    steps = number(TOTAL_STEPS, int, model.steps)
    noise = number(EMULATE_NOISE, float, STEP_NOISE, zero_ok=True)
    batch = number(EMULATE_BATCH_SIZE, int, None)
    truth: SpeedModel
    if EMULATE_TRUTH in annotations:
        truth = parse_truth(annotations[EMULATE_TRUTH])
    else:
        try:
            truth = model.truth(truth_rng(seed, name), batch)
        except KeyError:
            raise ValueError(f"{EMULATE_BATCH_SIZE}: batch size {batch} is not measured for {model_name}") from None
    spec = pod.get("spec") or {}
    try:
        requests = pod_requests({"spec": spec})
    except QuantityError as err:
        raise ValueError(f"resources: {err}") from None
    containers = spec.get("containers") or []
    first = (containers[0].get("resources") or {}).get("requests") or {} if containers else {}
    memory = str(first.get("memory", "0"))
    restart = any(restarts_on_cpu_resize(c) for c in containers)
    job = Job(
        name=name,
        submit=0.0,
        steps=steps,
        cpu_milli=requests.get(CPU, 0),
        memory=memory,
        truth=truth,
        gpu=requests.get(GPU, 0),
        model=model_name,
        restart_on_resize=restart,
    )
    return PodJob(job, seed, noise)


def emulate_annotations(job: Job, seed: int = 0, noise: float | None = None) -> dict[str, str]:
    """Annotations that make the emulator run `job` as the simulator does (its truth exactly, for CPU
    models; GPU models by name and the seed)."""
    out = {EMULATE_MODEL: job.model, TOTAL_STEPS: str(job.steps), EMULATE_SEED: str(seed)}
    if isinstance(job.truth, Amdahl):
        out[EMULATE_TRUTH] = format_truth(job.truth)
    if noise is not None:
        out[EMULATE_NOISE] = repr(noise)
    return out
