"""The weights file of a learned queue policy: what it round-trips, and every way it is refused."""

import itertools
import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from pysched.api import inputs
from pysched.deadline.features import FEATURES, SCHEMA, WIDTH, ClusterView, Waiting, static, window_rows
from pysched.deadline.scorer import (
    ALLOCATION,
    QUEUE,
    PolicyFileError,
    WindowBuffers,
    _logits,
    body_digest,
    dump_policy,
    load_policy,
    parse_policy,
    policy_at,
)


def _layers(seed: int = 0, hidden: int = 8) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (rng.normal(size=(hidden, WIDTH)), rng.normal(size=hidden)),
        (rng.normal(size=(1, hidden)), rng.normal(size=1)),
    ]


def _forward(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
    (w1, b1), (w2, b2) = layers
    out: np.ndarray = (np.tanh(x @ w1.T + b1) @ w2.T + b2)[:, 0]
    return out


def test_round_trip_scores_as_the_network_it_was_written_from() -> None:
    layers = _layers()
    scorer = parse_policy(dump_policy(layers, "tanh", 16, {"command": "test"}))
    x = np.random.default_rng(1).normal(size=(16, WIDTH)).astype(np.float32)
    assert np.allclose(scorer.scores(x), _forward(layers, x.astype(np.float64)), atol=1e-5)
    assert scorer.window == 16 and scorer.meta == {"command": "test"}
    allowed = np.zeros(16, np.bool_)
    allowed[[3, 7]] = True
    assert scorer.pick(x, allowed) in (3, 7)
    assert scorer.pick(x, allowed) == (3 if scorer.scores(x)[3] >= scorer.scores(x)[7] else 7)


ONES = [1.0] * WIDTH


def _edited(change: dict[str, object], keep_digest: bool = False) -> str:
    body = json.loads(dump_policy(_layers(), "tanh", 16, {}))
    del body["sha256"]
    body.update(change)
    if not keep_digest:
        body["sha256"] = body_digest(body)
    return json.dumps(body)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (dump_policy(_layers(), "tanh", 16, {})[:-200], "not JSON (truncated?)"),
        ("[]", "not a pysched.io/queue-policy file"),
        (_edited({"schema": SCHEMA + 1}), f"this pysched reads schema {SCHEMA}"),
        (_edited({"schema": True}), f"made for feature schema true; this pysched reads schema {SCHEMA}"),
        (_edited({"schema": float(SCHEMA)}), f"made for feature schema {float(SCHEMA)}; this pysched reads"),
        (_edited({"features": list(FEATURES[:-1])}), f"features: schema {SCHEMA} reads {', '.join(FEATURES)}, in that"),
        (_edited({"trainedOn": {"gpus": [0, 0]}}), "unknown key 'trainedOn' (known: activation, features"),
        (_edited({"layers": [{"weight": [[1.0] * WIDTH], "bias": [0.0], "scale": [2.0]}]}), "layers[0]: unknown key"),
        (_edited({"layers": [{"weight": [[10**19, *ONES[1:]]], "bias": [0.0]}]}), "not a number from -1e+06"),
        (_edited({"layers": [{"weight": [[10**400, *ONES[1:]]], "bias": [0.0]}]}), "an integer of 401 digits"),
        (_edited({"layers": [{"weight": [[1e7] * WIDTH], "bias": [0.0]}]}), "not a number from -1e+06 to 1e+06"),
        (_edited({"trained_on": {"gpus": [0, 1e300]}}), "trained_on.gpus: holds a value that is not a number"),
        ('{"format": 1, "format": 2}', "the key 'format' appears twice in one object"),
        ('{"window": ' + "9" * 21 + "}", "an integer of 21 digits"),
        ('{"window": 1e999}', "'1e999' is beyond a float's range"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (_edited({"window": 16_000}), "window: an integer from 1 to 256"),
        (_edited({"window": 8}, keep_digest=True), "sha256 does not match"),
        (_edited({"activation": "gelu"}), "activation: one of tanh, relu"),
        (_edited({"layers": [{"weight": [[1.0] * (WIDTH - 1)], "bias": [0.0]}]}), f"where {WIDTH} were expected"),
        (_edited({"layers": [{"weight": [[1.0] * WIDTH] * 2, "bias": [0.0, 0.0]}]}), "gives 2 outputs"),
        (_edited({"layers": [{"weight": [[1.0] * WIDTH], "bias": [True]}]}), "not a number from"),
        (_edited({"trained_on": [0, 1]}), "trained_on: an object of [low, high] by feature"),
        (_edited({"trained_on": {"laxity": [0, 1]}}), "trained_on: 'laxity' is not one of steps, cpus, gpus, workers"),
        (_edited({"trained_on": {"gpus": [0]}}), "trained_on.gpus: 1 values where 2 were expected"),
        (_edited({"trained_on": {"gpus": [0, "1"]}}), "trained_on.gpus: holds a value that is not a number"),
        (_edited({"trained_on": {"gpus": [1, 0]}}), "trained_on.gpus: its low end 1 is above its high end 0"),
        (_edited({"trained_on": {"gpus": [0, 1]}}, keep_digest=True), "sha256 does not match"),
    ],
)
def test_a_damaged_or_foreign_file_is_refused_in_one_line(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        parse_policy(text)
    message = str(caught.value)
    assert problem in message and "\n" not in message


def test_an_allocation_policy_with_training_ranges_is_refused() -> None:
    """Nothing would check a job against them: written, they would say what is not done."""
    rng = np.random.default_rng(0)
    layers = [(rng.normal(size=(3, len(ALLOCATION.features))), rng.normal(size=3))]
    assert parse_policy(dump_policy(layers, "tanh", 16, {}, ALLOCATION), ALLOCATION).trained_on == ()
    text = dump_policy(layers, "tanh", 16, {}, ALLOCATION, trained_on={"cpus": (100.0, 100.0)})
    with pytest.raises(ValueError, match=r"^trained_on: the allocation policy reads no training ranges$"):
        parse_policy(text, ALLOCATION)


def test_the_training_ranges_round_trip() -> None:
    scorer = parse_policy(dump_policy(_layers(), "tanh", 16, {}, trained_on={"gpus": (0.0, 0.0), "cpus": (0.0625, 1)}))
    gpus, cpus = FEATURES.index("gpus"), FEATURES.index("cpus")
    assert scorer.trained_on == (("cpus", cpus, 0.0625, 1.0), ("gpus", gpus, 0.0, 0.0))
    assert scorer.ranges() == {"cpus": (0.0625, 1.0), "gpus": (0.0, 0.0)}  # as a fine-tuning run takes them
    assert parse_policy(dump_policy(_layers(), "tanh", 16, {})).trained_on == ()


@pytest.mark.parametrize("widths", [(16, 16, 1), (8, 1)])  # the kernels compiled for a shape, the general ones
def test_a_row_beyond_the_training_ranges_keeps_its_place_and_is_never_scored(widths: tuple[int, ...]) -> None:
    rng = np.random.default_rng(3)
    layers = [(rng.normal(size=(o, i)), rng.normal(size=o)) for i, o in itertools.pairwise((WIDTH, *widths))]
    scorer = parse_policy(dump_policy(layers, "relu", 16, {}, trained_on={"gpus": (0.0, 0.0)}))
    blind = parse_policy(dump_policy(layers, "relu", 16, {}))
    assert (scorer.kernels[0] is _logits) == (len(widths) == 2)
    jobs = [
        Waiting(float(i), 900.0 + 97 * i, 1000 * (i + 1), 1 + i % 3, 4, 1 if i in (2, 5, 7) else 0, 1) for i in range(9)
    ]
    fixed = np.array([static(j, 0.5) for j in jobs])
    gpu = np.array([j.gpus > 0 for j in jobs])
    buffers, view, room = WindowBuffers.of(16), ClusterView(0.3, 0.5), (3000.0, 1.0)
    for order in ([2, 0, 1, 3, 4, 5, 6, 7, 8], [7, 5, 1], [0, 1, 2, 3, 4, 5, 6, 7, 8], [8, 6, 4, 3, 0], [2, 5, 7]):
        index = np.array(order, np.int64)
        rows, allowed, _ = window_rows(fixed, index, view, 50.0, room)
        chosen = scorer.pick_window(fixed, index, 50.0, view, room, buffers)
        if gpu[order[0]]:  # the first row (all are allowed here) is beyond the ranges: it goes
            assert chosen == 0
        else:  # the network picks among the others, as it would had the GPU jobs not been there
            assert not gpu[order[chosen]]
            assert chosen == scorer.pick(rows, allowed & ~gpu[index])
        assert blind.pick_window(fixed, index, 50.0, view, room, buffers) == blind.pick(rows, allowed)
    # A GPU job ahead of the first row that fits (here: none of them fits) is no pick.
    index = np.array([2, 0, 1], np.int64)
    assert scorer.pick_window(fixed, index, 50.0, view, (3000.0, 0.0), buffers) == blind.pick(
        *window_rows(fixed, index, view, 50.0, (3000.0, 0.0))[:2]
    )


def test_a_nan_weight_is_refused_even_with_a_matching_checksum(tmp_path: Path) -> None:
    text = dump_policy(_layers(), "tanh", 16, {})
    spoiled = text.replace(text[text.index('"weight":[[') + 11 : text.index(",", text.index('"weight":[['))], "NaN", 1)
    path = tmp_path / "nan.json"
    path.write_text(spoiled)
    with pytest.raises(PolicyFileError, match=r"nan\.json: .*NaN is not a number"):
        load_policy(path)


def test_a_missing_or_binary_file_names_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "FIFO_WAIT_S", 0.1)
    with pytest.raises(PolicyFileError, match=r"absent\.json: cannot read"):
        load_policy(tmp_path / "absent.json")
    with pytest.raises(PolicyFileError, match=r"'a\\x00b': not a file name \(it holds a NUL byte\)"):
        policy_at("a\0b")
    fifo = tmp_path / "nobody-writes.json"
    os.mkfifo(fifo)
    with pytest.raises(PolicyFileError, match=r"nobody-writes\.json: a FIFO nothing was written to"):  # not waited on
        load_policy(fifo)
    deep = tmp_path / "deep.json"  # deep enough for the parser, not for the checksum's encoder
    body = dump_policy(_layers(), "tanh", 16, {})
    for depth in (900, 990, 5000):
        deep.write_text(body.replace('"meta":{', '"meta":{"n":' + "[" * depth + "]" * depth + ","))
        with pytest.raises(PolicyFileError, match=r"^\S*deep\.json: [^\n]+$"):  # never a RecursionError
            load_policy(deep)
    binary = tmp_path / "policy.pt"
    binary.write_bytes(b"PK\x03\x04\0\0torch")
    with pytest.raises(PolicyFileError, match="binary file"):
        load_policy(binary)


def test_weights_from_a_fifo_are_read_once_and_served_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile names its weights file more than once (args checked, then the plugin built):
    a FIFO read changes its times, and a second read would wait for a writer that has gone."""
    monkeypatch.setattr(inputs, "FIFO_WAIT_S", 2.0)  # what a second read would wait, were it tried
    fifo = tmp_path / "weights.fifo"
    os.mkfifo(fifo)
    text = dump_policy(_layers(), "tanh", 16, {})
    writer = threading.Thread(target=fifo.write_text, args=(text,))
    writer.start()
    first = policy_at(str(fifo))
    writer.join()
    assert policy_at(str(fifo)) is first  # served from what was read, nothing written again


def test_the_shipped_policy_loads_and_is_small() -> None:
    from pysched.plugins.learned_queue_sort import BUILTIN_PATH

    assert BUILTIN_PATH.stat().st_size < 200_000
    scorer = load_policy(BUILTIN_PATH)
    assert scorer.window >= 16
    assert scorer.ranges() == {"gpus": (0.0, 0.0)}  # trained on CPU jobs only


@pytest.mark.parametrize(("activation", "widths"), [("relu", (16, 16, 1)), ("tanh", (8, 5, 1)), ("relu", (6, 9, 3))])
def test_the_kernels_compiled_for_a_shape_agree_with_the_general_ones(activation: str, widths: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(widths) + widths[0])
    sizes = (WIDTH, *widths)
    layers = [(rng.normal(size=(o, i)), rng.normal(size=o)) for i, o in itertools.pairwise(sizes)]
    kind = QUEUE if widths[-1] == 1 else ALLOCATION
    if kind is ALLOCATION:  # the allocation kind reads its own rows
        layers[0] = (rng.normal(size=(widths[0], len(ALLOCATION.features))), layers[0][1])
    scorer = parse_policy(dump_policy(layers, activation, 16, {}, kind), kind)
    assert scorer.kernels[0] is not _logits  # the shape has its own kernels
    x = rng.normal(size=(12, scorer.dims[0])).astype(np.float32)
    general = np.empty((12, widths[-1]))
    _logits(x, scorer.flat, scorer.dims, scorer.relu, general)
    assert np.allclose(scorer.logits(x), general, atol=1e-9)
    if kind is ALLOCATION:
        return
    jobs = [Waiting(float(i), 500.0 + 97 * i if i % 3 else None, 1000 * i, 1 + i % 4, 4, i % 2, 1) for i in range(12)]
    fixed = np.array([static(j, 0.5) for j in jobs])
    buffers = WindowBuffers.of(12)
    for room, index in (((3000.0, 1.0), range(12)), ((1000.0, 0.0), [4, 0, 8]), ((0.0, 0.0), [1, 2])):
        rows, allowed, _ = window_rows(fixed, np.array(index, np.int64), ClusterView(0.3, 0.5), 50.0, room)
        chosen = scorer.pick_window(fixed, np.array(index, np.int64), 50.0, ClusterView(0.3, 0.5), room, buffers)
        assert chosen == scorer.pick(rows, allowed)
