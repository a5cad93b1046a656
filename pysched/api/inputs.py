"""Bounded reading of what a user hands pysched: YAML files and text, and text files line by line.

Profiles, scenarios, catalogues, kubeconfigs and traces all come through here, so a hostile or
broken file costs at most a bounded amount of time and memory and ends in one `InputError` line,
never a traceback, a MemoryError or a RecursionError.

Numbers are read as YAML 1.2's core schema (and JSON) reads them: `1e3` is a float, `0o17` and
`0x1f` are integers, `1:30` is text, as kube-scheduler's parser (go-yaml v2, under sigs.k8s.io/yaml)
reads them too; `1_000` and `0b11` are text (that parser's numbers: a field that wants a number
refuses them, none is misread). A decimal with a leading zero (`010`), octal to YAML 1.1 and that
parser but decimal to YAML 1.2, is refused, as is a number of more than MAX_VALUE_CHARS characters.
Booleans stay YAML 1.1's, `yes`, `no`, `on` and `off` too: kube-scheduler's parser and the
Kubernetes client's kubeconfig loader (PyYAML) read them so.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import select
import stat
from collections.abc import Iterator
from io import BufferedReader
from pathlib import Path
from typing import Any, ClassVar

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import BaseResolver, Resolver

from pysched.api.limits import MAX_VALUE_CHARS, SHOWN_CHARS, clip

try:  # libyaml's parser (PyYAML's wheels carry it) gives the same events about 5x faster
    from yaml._yaml import CParser as _EventParser
except ImportError:  # pragma: no cover - a PyYAML built without libyaml
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _EventParser(Reader, Scanner, Parser):  # type: ignore[no-redef]
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)


MAX_FILE_BYTES = 4 * 1024 * 1024  # a whole-file input (YAML, a catalogue's table): far above any real one
MAX_LINE_CHARS = 1024 * 1024  # one line of a file read line by line (traces)
MAX_YAML_NODES = 100_000  # values in one document (~1.5 s, ~60 MB to load); a profile has hundreds
MAX_YAML_ALIASES = 100  # real files use a handful (builtin.yaml: 8)
MAX_YAML_ALIAS_NODES = 10_000  # nodes the aliases may add once expanded: stops "billion laughs"
MAX_YAML_DEPTH = 100  # nesting levels, aliases expanded; far below Python's recursion limit
FIFO_WAIT_S = 10.0  # for a FIFO's writer to start
SHOWN_PATH_CHARS = 200  # a longer file name is cut in messages
_SNIFF_BYTES = 8192  # a NUL byte in the first block means a binary file


def out_of_range(value: float, low: float, high: float, *, above: bool = False, below: bool = False) -> str | None:
    """Why `value` is not within [low, high] (`above` / `below`: strict bounds), or None. NaN, inf and
    every other non-finite value are never within: the one range check of flags and args."""
    if (value > low if above else value >= low) and (value < high if below else value <= high):
        return None
    # The refused value in full (`:g` keeps 6 digits: 3600.4 would read as the bound it exceeds).
    return f"must be {'>' if above else '>='} {low:g} and {'<' if below else '<='} {high:g}, got {value!r}"


def key_text(key: object) -> str:
    """A mapping key as a field path writes it (`groups[0].cpu`): keys of any YAML type, cut when long."""
    text = str(key) if isinstance(key, str | int | float | bool) or key is None else clip(key)
    return text if len(text) <= 40 else clip(text)


def brief(message: object) -> str:
    """A message (an exception's, say) for quoting in another: first line, whitespace folded, cut."""
    text = " ".join(str(message).split())
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def whole_number(text: str, maximum: int) -> int | None:
    """`text` (blanks around it aside) as a whole number from 0 to `maximum`, else None. ASCII
    digits only, counted before int() is called: int() also takes `1_000`, full-width and
    Arabic-Indic digits, and thousands of digits."""
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit()) or len(digits) > len(str(maximum)):
        return None
    value = int(digits)
    return value if value <= maximum else None


def path_text(path: object) -> str:
    """A file name as messages show it: whole unless absurdly long or holding control characters."""
    text = str(path)
    return text if len(text) <= SHOWN_PATH_CHARS and text.isprintable() else clip(text, SHOWN_PATH_CHARS)


class InputError(ValueError):
    """A file or text that cannot be read within bounds; its message is one line.

    `source` names the file (or `<text>`), `line` is 1-based when known, `problem` says what is wrong.
    """

    def __init__(self, source: str, problem: str, line: int | None = None) -> None:
        self.source = source = path_text(source)
        self.problem = " ".join(problem.split()) or "cannot be read"
        self.line = line
        super().__init__(f"{source}:{line}: {self.problem}" if line else f"{source}: {self.problem}")


def _decode_error(source: str, err: UnicodeDecodeError, line: int | None = None) -> InputError:
    byte = err.object[err.start : err.start + 1].hex()
    return InputError(source, f"not UTF-8 text (byte 0x{byte} cannot be decoded)", line)


def _open(path: str | Path) -> BufferedReader:
    """The file for reading. Opened without blocking: a FIFO is given `FIFO_WAIT_S` for its
    writer to start (the producer may be launched after pysched), then refused rather than
    waited on for ever; a pipe with a writer (`<(...)`) reads whole."""
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise InputError(source, f"cannot read: {err.strerror or err}") from None
    except ValueError:  # a NUL byte in the name
        raise InputError(source, "not a file name (it holds a NUL byte)") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(source, f"cannot read: {os.strerror(errno.EISDIR)}")
        if stat.S_ISFIFO(mode) and not _readable_within(fd, FIFO_WAIT_S):
            raise InputError(source, f"a FIFO nothing was written to within {FIFO_WAIT_S:g} s")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _readable_within(fd: int, seconds: float) -> bool:
    """Data or a writer's close within `seconds` (a FIFO that never had a writer reports neither)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(int(seconds * 1000)))


def read_text(path: str | Path, *, limit: int = MAX_FILE_BYTES) -> str:
    """A whole UTF-8 text file of at most `limit` bytes; its size is checked before it is read."""
    source = str(path)
    with _open(path) as file:
        try:
            size = file.seek(0, 2)  # a pipe or device cannot seek: then the read below is bounded
            file.seek(0)
        except OSError:
            size = 0
        if size > limit:
            raise InputError(source, f"{size:,} bytes, more than the limit of {limit:,}")
        try:
            data = file.read(limit + 1)
        except OSError as err:
            raise InputError(source, f"cannot read: {err.strerror or err}") from None
    if len(data) > limit:
        raise InputError(source, f"more than the limit of {limit:,} bytes")
    if b"\0" in data[:_SNIFF_BYTES]:
        raise InputError(source, "a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise _decode_error(source, err) from None


def read_lines(path: str | Path, *, limit: int = MAX_LINE_CHARS) -> Iterator[str]:
    """The lines of a UTF-8 text file (newlines kept), streamed; a line over `limit` characters, a
    binary file or bytes that are not UTF-8 raise InputError naming the line."""
    source = str(path)
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    with _open(path) as file:
        if b"\0" in file.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]:
            raise InputError(source, "a binary file, not text")
        number = 0
        while True:
            number += 1
            try:
                raw = file.readline(limit * 4 + 1)  # a UTF-8 character is at most 4 bytes
            except OSError as err:
                raise InputError(source, f"cannot read: {err.strerror or err}", number) from None
            try:
                line = decoder.decode(raw, final=not raw)
            except UnicodeDecodeError as err:
                raise _decode_error(source, err, number) from None
            if not raw:
                return
            if len(raw) > limit * 4 or len(line.rstrip("\r\n")) > limit:
                raise InputError(source, f"line longer than {limit:,} characters", number)
            yield line


def _refused(problem: str, event: Any) -> yaml.MarkedYAMLError:
    return yaml.MarkedYAMLError(problem=problem, problem_mark=event.start_mark)


class _BadValue(yaml.MarkedYAMLError):
    """A scalar that cannot be read as what its tag (implicit or given) says."""

    def __init__(self, problem: str, node: Node) -> None:
        super().__init__(problem=problem, problem_mark=node.start_mark)


_INT_TAG, _FLOAT_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
# YAML 1.2's core schema; ASCII digits only (`\d` would take other scripts' digits).
_INT_FORMS = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_FLOAT_FORMS = re.compile(
    r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
)
_LEADING_ZERO = re.compile(r"[-+]?0[0-9]+")
_YAML11_KEPT = {f"tag:yaml.org,2002:{kind}" for kind in ("bool", "null", "merge", "timestamp")}  # not `=`


def _implicit_resolvers() -> dict[str | None, list[tuple[str, re.Pattern[str]]]]:
    """By a plain scalar's first character, the (tag, pattern) pairs it is tried against in turn."""
    table: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {}
    for tag, forms, firsts in (
        (_INT_TAG, _INT_FORMS, "-+0123456789"),  # before the floats, whose forms include every integer
        (_FLOAT_TAG, _FLOAT_FORMS, "-+.0123456789"),
    ):
        for first in firsts:
            table.setdefault(first, []).append((tag, re.compile(rf"(?:{forms.pattern})\Z")))
    for first, pairs in Resolver.yaml_implicit_resolvers.items():
        table.setdefault(first, []).extend(pair for pair in pairs if pair[0] in _YAML11_KEPT)
    return table


class _Resolver(BaseResolver):
    """Plain scalars resolved as the module's docstring says: YAML 1.2's numbers; YAML 1.1's (PyYAML's)
    booleans, nulls, merge keys and timestamps."""

    yaml_implicit_resolvers = _implicit_resolvers()


class _BoundedLoader(_EventParser, Composer, SafeConstructor, _Resolver):
    """A safe loader whose document is composed in Python from the parser's events, measured on the
    way: aliases are counted with the nodes they stand for, and nesting (through aliases too) is
    bounded before Python's stack is."""

    get_single_node = Composer.get_single_node  # not libyaml's composer, which cannot be measured
    compose_document = Composer.compose_document

    def __init__(self, stream: str) -> None:
        _EventParser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        _Resolver.__init__(self)
        self._nodes = 0
        self._aliases = 0
        self._alias_nodes = 0
        self._depth = 0
        self._measured: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, height), aliases expanded

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A key given twice is refused (kube-scheduler decodes strictly), not resolved to its
        last value; keys a merge (`<<: *anchor`) brings in may be overridden, as YAML allows."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node)
            if key in seen:
                raise _refused(f"key {clip(str(key))} is given twice", key_node)
            seen.add(key)
        mapping: dict[Any, Any] = SafeConstructor.construct_mapping(self, node, deep=deep)
        return mapping

    def _number_text(self, node: ScalarNode) -> str:
        """The scalar's text, bounded before any conversion: int() reads hex, octal and binary
        digits without limit, and a number of thousands of digits cannot even be printed."""
        text: str = self.construct_scalar(node)
        if len(text) > MAX_VALUE_CHARS:
            raise _BadValue(f"a number of {len(text):,} characters, more than {MAX_VALUE_CHARS}", node)
        return text

    def construct_yaml_int(self, node: ScalarNode) -> int:
        text = self._number_text(node)
        if _LEADING_ZERO.fullmatch(text):
            raise _BadValue(
                f"{text} is octal to YAML 1.1 and kube-scheduler but decimal to YAML 1.2:"
                " write it without the leading 0, or with 0o for octal",
                node,
            )
        if not _INT_FORMS.fullmatch(text):
            raise _BadValue(f"{clip(text)} is not an integer", node)
        base = {"0o": 8, "0x": 16}.get(text[:2], 10)
        return int(text if base == 10 else text[2:], base)

    def construct_yaml_float(self, node: ScalarNode) -> float:
        text = self._number_text(node)
        if not _FLOAT_FORMS.fullmatch(text):
            raise _BadValue(f"{clip(text)} is not a number", node)
        return float(text.replace(".", "") if text[-3:].lower() in ("inf", "nan") else text)

    # The two above replace YAML 1.1's (base 60, `_`, `0b`, no bound on the digits)
    yaml_constructors: ClassVar[dict[Any, Any]] = {
        **SafeConstructor.yaml_constructors,
        _INT_TAG: construct_yaml_int,
        _FLOAT_TAG: construct_yaml_float,
    }

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        event: Any = self.peek_event()  # libyaml's events and PyYAML's have the same fields
        if isinstance(event, yaml.AliasEvent):
            anchored = self.anchors.get(event.anchor)
            if anchored is not None:  # an undefined alias is the composer's error
                self._count_alias(event, anchored)
        else:
            self._nodes += 1
            if self._nodes > MAX_YAML_NODES:
                raise _refused(f"more than {MAX_YAML_NODES:,} values", event)
            if self._depth >= MAX_YAML_DEPTH:
                raise _refused(f"nested deeper than {MAX_YAML_DEPTH} levels", event)
        self._depth += 1
        node = Composer.compose_node(self, parent, index)
        self._depth -= 1
        assert node is not None
        if id(node) not in self._measured:
            self._measured[id(node)] = self._measure(node)
        return node

    def _count_alias(self, event: Any, anchored: Node) -> None:
        measured = self._measured.get(id(anchored))
        if measured is None:  # the anchored node is still open: the alias would contain itself
            raise _refused(f"alias *{event.anchor} refers to itself", event)
        nodes, height = measured
        self._aliases += 1
        self._alias_nodes += nodes
        if self._aliases > MAX_YAML_ALIASES:
            raise _refused(f"more than {MAX_YAML_ALIASES} aliases", event)
        if self._alias_nodes > MAX_YAML_ALIAS_NODES:
            raise _refused(f"aliases expand to more than {MAX_YAML_ALIAS_NODES:,} nodes", event)
        if self._depth + height > MAX_YAML_DEPTH:
            raise _refused(f"nested deeper than {MAX_YAML_DEPTH} levels", event)

    def _measure(self, node: Node) -> tuple[int, int]:
        if isinstance(node, SequenceNode):
            children = [self._measured[id(child)] for child in node.value]
        elif isinstance(node, MappingNode):
            children = [self._measured[id(part)] for pair in node.value for part in pair]
        else:
            return 1, 1
        return 1 + sum(n for n, _ in children), 1 + max((h for _, h in children), default=0)


def parse_yaml(text: str, source: str = "<text>") -> Any:
    """One YAML document, safely (no Python tags) and within the limits above."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        what = "invalid YAML value" if isinstance(err, _BadValue) else "invalid YAML"
        raise InputError(source, f"{what}: {problem}", mark.line + 1 if mark is not None else None) from None
    except (ValueError, OverflowError) as err:  # a scalar the constructor refuses (a bad date)
        raise InputError(source, f"invalid YAML value: {brief(err)}") from None
    finally:
        loader.dispose()


def load_yaml(path: str | Path) -> Any:
    """A YAML file: at most MAX_FILE_BYTES of UTF-8 text, one document, within the limits above."""
    return parse_yaml(read_text(path), str(path))
