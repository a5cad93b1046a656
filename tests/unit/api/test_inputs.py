import datetime
import json
import math
import os
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api import inputs
from pysched.api.inputs import (
    MAX_FILE_BYTES,
    MAX_YAML_ALIASES,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    InputError,
    brief,
    load_yaml,
    out_of_range,
    parse_yaml,
    read_lines,
    read_text,
    whole_number,
)
from pysched.api.limits import MAX_VALUE_CHARS, SHOWN_CHARS, clip
from pysched.testing.hostile import alias_bomb


def _one_line(err: InputError) -> str:
    text = str(err)
    assert "\n" not in text and len(text) < 300, text
    return text


def test_an_alias_bomb_is_refused_while_composing_without_memory_growth() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as info:
            parse_yaml(alias_bomb(), "bomb.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20  # the expansion would be 10**9 nodes
    assert "aliases expand to more than 10,000 nodes" in _one_line(info.value)
    assert str(info.value).startswith("bomb.yaml:")


def test_alias_count_is_bounded_and_ordinary_aliases_load() -> None:
    ok = "a: &a 1\nb: [" + ", ".join(["*a"] * MAX_YAML_ALIASES) + "]\n"
    assert parse_yaml(ok)["b"] == [1] * MAX_YAML_ALIASES
    with pytest.raises(InputError, match=f"more than {MAX_YAML_ALIASES} aliases"):
        parse_yaml(ok.replace("]", ", *a]"))
    merged = parse_yaml("base: &base {x: 1}\nuse: {<<: *base, y: 2}\n")
    assert merged["use"] == {"x": 1, "y": 2}


def test_a_self_referring_alias_is_refused() -> None:
    with pytest.raises(InputError, match=r"alias \*a refers to itself"):
        parse_yaml("a: &a [1, *a]\n")


@pytest.mark.parametrize("depth", [MAX_YAML_DEPTH + 1, 10_000, 200_000])
def test_deep_nesting_is_refused_without_recursion_error(depth: int) -> None:
    with pytest.raises(InputError, match="nest"):
        parse_yaml("[" * depth + "]" * depth)
    with pytest.raises(InputError, match="nest"):
        parse_yaml("".join(f"{'  ' * i}k:\n" for i in range(min(depth, 2000))))


def test_nesting_up_to_the_limit_loads_and_aliases_count_their_depth() -> None:
    value = parse_yaml("[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH)
    for _ in range(MAX_YAML_DEPTH - 1):
        value = value[0]
    assert value == []
    deep = "[" * (MAX_YAML_DEPTH - 5) + "]" * (MAX_YAML_DEPTH - 5)
    with pytest.raises(InputError, match=f"nested deeper than {MAX_YAML_DEPTH} levels"):
        parse_yaml(f"a: &a {deep}\nb: [[[[[[*a]]]]]]\n")


def test_the_number_of_values_is_bounded() -> None:
    with pytest.raises(InputError, match=f"more than {MAX_YAML_NODES:,} values"):
        parse_yaml("[" + "1," * MAX_YAML_NODES + "1]")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("x: " + "9" * 5000, "invalid YAML value"),  # int() refuses so many digits
        ("d: 2001-13-45", "invalid YAML value"),
        ("a: 1\n---\nb: 2\n", "invalid YAML"),
        ("a: [1, 2\n", "invalid YAML"),
        ("a: !!python/object:os.system x\n", "invalid YAML"),
        ("a: \x07\n", "invalid YAML"),
    ],
)
def test_bad_documents_are_one_line(text: str, problem: str) -> None:
    with pytest.raises(InputError, match=problem) as info:
        parse_yaml(text, "f.yaml")
    _one_line(info.value)


HUGE_HEX = "0x" + "f" * 4000  # 16,000 bits: int() reads it, str() of it raises ValueError


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (f"weight: {HUGE_HEX}\n", 1),
        (f"a: 1\nargs: {{cpuWeight: {HUGE_HEX}}}\n", 2),
        (f"? {HUGE_HEX}\n: 1\n", 1),  # a mapping key
        ("a: 0o" + "7" * 5000 + "\n", 1),
        ("a: !!int 0x" + "f" * 5000 + "\n", 1),
        ("a: 1." + "0" * 5000 + "\n", 1),
        ("a: " + "9" * 5000 + "\n", 1),
    ],
)
def test_numbers_of_every_form_are_bounded_before_they_are_converted(text: str, line: int) -> None:
    with pytest.raises(InputError) as info:
        parse_yaml(text, "f.yaml")
    assert _one_line(info.value).startswith(f"f.yaml:{line}: invalid YAML value: a number of ")
    assert info.value.problem.endswith(f"characters, more than {MAX_VALUE_CHARS}")


def test_the_longest_number_read_can_be_printed() -> None:
    value = parse_yaml("a: 0x" + "f" * (MAX_VALUE_CHARS - 2))["a"]
    assert value == 16 ** (MAX_VALUE_CHARS - 2) - 1 and clip(value)


def test_a_huge_hex_weight_is_one_line_from_the_profile_loader(tmp_path: Path) -> None:
    from pysched.framework.config import ConfigError, load_config
    from pysched.plugins import default_registry

    path = tmp_path / "p.yaml"
    path.write_text(f"profiles:\n  - schedulerName: p\n    plugins:\n      score: [{{name: x, weight: {HUGE_HEX}}}]\n")
    with pytest.raises(ConfigError, match=r"p\.yaml: line 4: invalid YAML value: a number of 4,002 characters"):
        load_config(path, default_registry())


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e2", 100.0),  # YAML 1.1 read these two as text
        ("1e-3", 0.001),
        ("-1.5E+2", -150.0),
        (".5", 0.5),
        ("5.", 5.0),
        ("+.inf", math.inf),
        ("-.Inf", -math.inf),
        ("0o17", 15),
        ("0x1F", 31),
        ("-12", -12),
        ("0", 0),
        ("1:30", "1:30"),  # YAML 1.1 read 90 (base 60)
        ("1:30.5", "1:30.5"),
        ("1_000", "1_000"),
        ("1_000.5", "1_000.5"),
        ("0b11", "0b11"),
        ("-0x1F", "-0x1F"),
        ("=", "="),
        ("true", True),
        ("off", False),  # YAML 1.1's booleans stay, as kube-scheduler reads them
        ("Yes", True),
        ("y", "y"),
        ("~", None),
        ("2001-12-14", datetime.date(2001, 12, 14)),
    ],
)
def test_numbers_are_read_as_yaml_1_2_reads_them(text: str, value: Any) -> None:
    loaded = parse_yaml(f"a: {text}\n")["a"]
    assert loaded == value and type(loaded) is type(value)
    assert parse_yaml(f"a: '{text}'\n")["a"] == text  # quoted: always text


def test_nan_is_a_float() -> None:
    assert math.isnan(parse_yaml("a: .NaN")["a"]) and math.isnan(parse_yaml("a: !!float .nan")["a"])


def test_json_numbers_load_as_json_reads_them() -> None:
    document = {"intervalSeconds": 1e2, "t1": 1e-3, "big": 1.5e300, "weights": [1, -2.5, 0]}
    text = json.dumps(document).replace("100.0", "1e2")
    assert "1e2" in text and "1.5e+300" in text
    assert parse_yaml(text) == json.loads(text) == document


@pytest.mark.parametrize("text", ["010", "-07", "+00", "09", "!!int 010"])
def test_a_decimal_with_a_leading_zero_is_refused_as_octal_or_decimal(text: str) -> None:
    with pytest.raises(InputError, match=r"is octal to YAML 1\.1 and kube-scheduler but decimal to YAML 1\.2") as info:
        parse_yaml(f"a: 1\nb: {text}\n", "f.yaml")
    assert _one_line(info.value).startswith("f.yaml:2: invalid YAML value: ")
    assert parse_yaml("a: 01.5")["a"] == 1.5  # a float reads alike in both


@pytest.mark.parametrize(
    ("text", "problem"), [("!!int 1.5", "'1.5' is not an integer"), ("!!float x", "'x' is not a number")]
)
def test_an_explicit_number_tag_on_other_text_is_refused(text: str, problem: str) -> None:
    with pytest.raises(InputError, match=f"f.yaml:1: invalid YAML value: {problem}"):
        parse_yaml(f"a: {text}", "f.yaml")


@pytest.mark.parametrize(
    ("text", "value"),
    [("12", 12), (" 7 ", 7), ("0", 0), ("100", 100), ("101", None), ("1_0", None), ("\uff11\uff12", None),
     ("\u0663", None), ("+1", None), ("-1", None), ("", None), ("1.0", None), ("1000", None)],
)  # fmt: skip
def test_whole_numbers_are_ascii_digits_within_the_bound(text: str, value: int | None) -> None:
    assert whole_number(text, 100) == value
    assert whole_number("9" * 5000, 10**20) is None


def test_files_binary_not_utf8_or_too_large_are_refused(tmp_path: Path) -> None:
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)))
    with pytest.raises(InputError, match="a binary file, not text"):
        load_yaml(binary)
    latin = tmp_path / "l.yaml"
    latin.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 0xe9"):
        load_yaml(latin)
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as f:  # sparse: refused on its size alone, never read
        f.truncate(64 * MAX_FILE_BYTES)
    with pytest.raises(InputError, match="more than the limit of 4,194,304"):
        read_text(huge)
    with pytest.raises(InputError, match="cannot read"):
        load_yaml(tmp_path / "absent.yaml")
    with pytest.raises(InputError, match="cannot read"):
        load_yaml(tmp_path)
    bom = tmp_path / "bom.yaml"
    bom.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert load_yaml(bom) == {"a": 1}


def test_a_fifo_is_read_from_its_writer_and_refused_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inputs, "FIFO_WAIT_S", 0.2)
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"f\.yaml: a FIFO nothing was written to within 0\.2 s"):
        read_text(fifo)  # blocking here would hang a start-up for ever
    writer = threading.Thread(target=lambda: fifo.write_text("a: 1\n"))  # opens once the reader has
    writer.start()
    assert load_yaml(fifo) == {"a": 1}
    writer.join()
    reading, writing = os.pipe()  # what `--config <(...)` hands over
    os.write(writing, b"a: 2\n")
    os.close(writing)
    assert load_yaml(f"/dev/fd/{reading}") == {"a": 2}
    os.close(reading)


def test_bad_file_names_are_one_line_and_shown_bounded(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^'a\\x00b': not a file name \(it holds a NUL byte\)$"):
        read_text("a\0b")
    long = str(tmp_path / ("x" * 240))
    with pytest.raises(InputError) as caught:
        read_text(long)
    assert _one_line(caught.value).endswith(f"... ({len(long)} chars): cannot read: No such file or directory")


def test_read_lines_streams_and_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b"a,b\n1,2\n3,\xff\n")
    lines = read_lines(path)
    assert next(lines) == "a,b\n" and next(lines) == "1,2\n"
    with pytest.raises(InputError, match=r"t\.csv:3: not UTF-8"):
        next(lines)
    path.write_text("a\n" + "x" * 50 + "\n")
    with pytest.raises(InputError, match=r":2: line longer than 40 characters"):
        list(read_lines(path, limit=40))
    path.write_bytes(b"a\x00b\n")
    with pytest.raises(InputError, match="binary"):
        list(read_lines(path))


def test_shown_is_bounded_on_any_value() -> None:
    level: object = ["lol"]
    for _ in range(30):  # 10**30 leaves if walked
        level = [level] * 10
    assert len(clip(level)) <= SHOWN_CHARS
    assert len(clip("x" * 10**6)) <= SHOWN_CHARS
    assert clip("short") == "'short'"
    assert brief("a\n  b" + "c" * 500).startswith("a b") and len(brief("c" * 500)) == SHOWN_CHARS


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e300, -1.0])
def test_out_of_range_refuses_non_finite_and_outside(value: float) -> None:
    assert out_of_range(value, 0, 100) is not None
    assert out_of_range(50, 0, 100) is None
    assert out_of_range(0, 0, 100, above=True) == "must be > 0 and <= 100, got 0"
    # The refused value in full: six digits showed 3600.4 as 3600, the very bound it exceeds.
    assert out_of_range(3600.4, 1, 3600) == "must be >= 1 and <= 3600, got 3600.4"
    assert out_of_range(31622400.5, 0, 31622400) == "must be >= 0 and <= 3.16224e+07, got 31622400.5"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_loads_or_is_one_input_error(text: str) -> None:
    try:
        parse_yaml(text)
    except InputError as err:
        _one_line(err)
