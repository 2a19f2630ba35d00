"""Parse YAML/JSON files while keeping line numbers, and validate them with pydantic.

The loader does parse, resolve, validate, nothing else. Every problem becomes an
`InputError` naming the file, the line of the offending key (where the YAML gives one),
the dotted field path and what was expected.

Limits on what a file may cost: a file is at most `max_file_bytes()` long (8 MiB unless
`CLUSTERSIM_MAX_FILE_MB` or `clustersim --max-file-mb` says otherwise), its nesting at most
`MAX_DEPTH` levels deep, it uses at most `MAX_ALIASES` YAML aliases and expands to at most
`MAX_VALUES` values (so an alias bomb is an error, not a hang), and a key appears once per
mapping (YAML would silently keep the last one).
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import stat
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from simulator.errors import FieldError, InputError, InputErrors, shown
from simulator.units import HUMAN_UNITS, physical_limit_error, split_si

M = TypeVar("M", bound=BaseModel)

Loc = tuple[Any, ...]


#: Deepest nesting of mappings and lists a file may have.
MAX_DEPTH = 64
#: Most YAML aliases (`*name`) a file may use.
MAX_ALIASES = 256
#: Most values (scalars, mappings, lists, counting every alias expansion) a file may hold.
MAX_VALUES = 2_000_000
#: Default largest input file, bytes.
DEFAULT_MAX_FILE_BYTES = 8 * 2**20
_ENV_MAX_FILE_MB = "CLUSTERSIM_MAX_FILE_MB"


def max_file_bytes() -> int:
    """The largest input file read, bytes: `CLUSTERSIM_MAX_FILE_MB` MiB, else 8 MiB."""
    raw = os.environ.get(_ENV_MAX_FILE_MB)
    if raw is None:
        return DEFAULT_MAX_FILE_BYTES
    try:
        mib = float(raw)
    except ValueError:
        raise InputError(f"{_ENV_MAX_FILE_MB} must be a number of MiB, found {raw!r}") from None
    if not mib > 0 or mib > 2**20:
        raise InputError(f"{_ENV_MAX_FILE_MB} must be between 0 and 1048576 MiB, found {raw!r}")
    return int(mib * 2**20)


#: the files checked for reading while `recording_reads` is active (None: not recording)
_READS: ContextVar[list[Path] | None] = ContextVar("clustersim_reads", default=None)


@contextlib.contextmanager
def recording_reads() -> Iterator[list[Path]]:
    """Within the block, every input file read (every path `check_regular_file` checks: a
    scenario, topology, GPU, model, trace or log file) is appended to the list given, so
    that a command can refuse an output that would replace one of them."""
    reads: list[Path] = []
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def check_regular_file(path: Path) -> os.stat_result:
    """`path`'s status, if it is a regular file (opening a pipe with no writer never
    returns; reading a device may never end); recorded by `recording_reads`.

    Raises:
        InputError: the file is missing, a folder, or a device, pipe or socket.
    """
    reads = _READS.get()
    if reads is not None:
        reads.append(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError("file not found", file=path) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", file=path) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError("expected a file, found a folder", file=path)
    if not stat.S_ISREG(st.st_mode):
        raise InputError("not a regular file (a device, pipe or socket)", file=path)
    return st


def not_a_file(p: Path, where: str = "") -> str | None:
    """Why the file an input names at `p` cannot be read as one (a folder, a device, pipe or
    socket, nothing there), `where` ending the sentence; None when it is a regular file."""
    if p.is_file():
        return None
    if p.is_dir():
        return f"{str(p)!r} is a folder; expected a file{where}"
    try:
        p.stat()
    except FileNotFoundError:
        return f"file {str(p)!r} not found{where}"
    except OSError as exc:  # a symbolic link loop (ELOOP), a path through a file, no access
        return f"cannot read {str(p)!r}: {exc.strerror}{where}"
    return f"{str(p)!r} is not a regular file (a device, pipe or socket){where}"


def read_input_bytes(path: Path, bounded: bool = True) -> bytes:
    """A file's bytes, after checking that it is a regular file (`check_regular_file`) and,
    when `bounded` (the input files a user writes: scenarios, topologies, profiles), within
    `max_file_bytes()` (at most that many bytes are read, whatever its size said). Data
    files (benchmark logs, job traces, GEMM tables) are read whole.

    Raises:
        InputError: the file is missing, a folder, not a regular file, unreadable or too large.
    """
    st = check_regular_file(path)
    try:
        if not bounded:
            return path.read_bytes()
        limit = max_file_bytes()
        raise_it = f"(raise it with --max-file-mb or {_ENV_MAX_FILE_MB})"
        if st.st_size > limit:
            raise InputError(
                f"file is {st.st_size:,} bytes, over the limit of {limit:,} bytes {raise_it}", file=path
            )
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
        if len(data) > limit:  # it grew while being read
            raise InputError(f"file is over the limit of {limit:,} bytes {raise_it}", file=path)
        return data
    except FileNotFoundError:
        raise InputError("file not found", file=path) from None
    except IsADirectoryError:
        raise InputError("expected a file, found a folder", file=path) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", file=path) from None


def read_text(path: Path, bounded: bool = True) -> str:
    """A file's text (`read_input_bytes`, decoded as UTF-8).

    Raises:
        InputError: the file is missing, a folder, not a regular file, unreadable, not UTF-8
            or (`bounded`) too large.
    """
    data = read_input_bytes(path, bounded)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not UTF-8 text (byte {exc.start})", file=path, line=line) from None


class _BoundedComposer(Composer):
    """A composer that bounds nesting depth and alias count while composing (the lines of
    keys and items are read from the composed nodes' marks)."""

    depth = 0
    aliases = 0
    values = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[attr-defined]
        if isinstance(event, yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise InputError(f"more than {MAX_ALIASES} YAML aliases", line=event.start_mark.line + 1)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise InputError(f"nested deeper than {MAX_DEPTH} levels", line=event.start_mark.line + 1)
            return Composer.compose_node(self, parent, index)  # type: ignore[no-any-return]
        finally:
            self.depth -= 1


class _LineLoader(Reader, Scanner, Parser, _BoundedComposer, SafeConstructor, Resolver):
    """`yaml.SafeLoader` (its reader, scanner and parser in Python) with the bounded composer."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _BoundedComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


try:  # libyaml's scanner and parser, when PyYAML was built with it
    from yaml.cyaml import CParser as _CParser
except ImportError:  # pragma: no cover - PyYAML without libyaml
    _CParser = None  # type: ignore[assignment,misc]


class _CLineLoader(_BoundedComposer, *((_CParser,) if _CParser else ()), SafeConstructor, Resolver):  # type: ignore[misc]
    """The same loader with libyaml scanning and parsing (5x faster on the price table): the events, and so
    the nodes, their lines and the data, are those of the Python parser; the composer,
    constructor and resolver are the same Python classes. `parse_text` reports any problem
    the way the Python loader does, by reading the text again with it."""

    def __init__(self, stream: str) -> None:
        _CParser.__init__(self, stream)
        _BoundedComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


# Plain scalars are read by YAML 1.2's core schema, not PyYAML's YAML 1.1 rules, which
# would change values silently: `010` is 10 (not octal 8), `1:30` is text (not 90, base
# 60), `yes`/`no`/`on`/`off` are text (not booleans: `name: no`), dates are text, and
# `1e9` and `2.13e13` (no dot, or no exponent sign) are numbers (1.1 reads them as text).
# Booleans: true/false; null: ~, null or nothing; integers: decimal (with `_` separators),
# 0o octal, 0x hexadecimal; floats: decimal with a dot or an exponent, .inf, .nan. Merge
# keys (`<<`) stay.
_CORE_RESOLVERS: tuple[tuple[str, str, str], ...] = (
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", "~nN"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9][0-9_]*|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "tag:yaml.org,2002:float",
        r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?
        |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        "-+0123456789.",
    ),
    ("tag:yaml.org,2002:merge", r"^(?:<<)$", "<"),
)


def _construct_core_int(loader: SafeConstructor, node: yaml.ScalarNode) -> int:
    """An integer of the core schema: decimal (`_` separators dropped), 0o octal, 0x hex."""
    text = str(loader.construct_scalar(node)).replace("_", "")
    sign, body = (-1, text[1:]) if text[:1] == "-" else (1, text.lstrip("+"))
    try:
        if body.startswith(("0o", "0x")):
            return sign * int(body[2:], 8 if body[1] == "o" else 16)
        return sign * int(body, 10)
    except ValueError:
        raise yaml.constructor.ConstructorError(
            None, None, f"{text!r} is not an integer", node.start_mark
        ) from None


for _loader in (_LineLoader, _CLineLoader):
    _loader.yaml_implicit_resolvers = {}
    for _tag, _pattern, _first in _CORE_RESOLVERS:
        _loader.add_implicit_resolver(
            _tag, re.compile(_pattern, re.X), [*_first, *([""] if _tag.endswith("null") else [])]
        )
    _loader.add_constructor("tag:yaml.org,2002:int", _construct_core_int)


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many values `node` becomes once every alias is expanded (counted on the node
    graph, where an alias is a shared node, so an alias bomb is counted, not built)."""
    key = id(node)
    if key not in memo:
        size = 1
        if isinstance(node, yaml.MappingNode):
            size += sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            size += sum(_expanded_size(item, memo) for item in node.value)
        memo[key] = min(size, MAX_VALUES + 1)
    return memo[key]


#: The largest whole number an input may hold (a 64-bit integer: what frames and Parquet
#: store; every count and size the simulator reads is far smaller).
MAX_INT = 2**63 - 1


def _construct(loader: _LineLoader, node: yaml.Node, path: Loc, lines: dict[Loc, int]) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    loader.values += 1
    if loader.values > MAX_VALUES:
        raise InputError(
            f"expands to more than {MAX_VALUES:,} values (aliases repeat what they name)",
            line=node.start_mark.line + 1,
        )
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        loader.flatten_mapping(node)
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise InputError("mapping keys must be plain scalars", line=line)
            sub = (*path, key)
            if key in out:
                field = ".".join(str(p) for p in sub)
                raise InputError(f"duplicate key (first given on line {lines[sub]})", line=line, field=field)
            lines[sub] = line
            out[key] = _construct(loader, value_node, sub, lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            sub = (*path, i)
            lines[sub] = item.start_mark.line + 1
            items.append(_construct(loader, item, sub, lines))
        return items
    value = loader.construct_object(node, deep=True)
    if type(value) is int and not -MAX_INT <= value <= MAX_INT:
        raise InputError(
            f"{shown(value)} is too large; expected a whole number of at most 2**63 - 1",
            line=lines[path],
            field=".".join(str(p) for p in path) or None,
        )
    return value


class Document:
    """A parsed input file: its data plus the line of every key."""

    def __init__(self, path: Path, data: Any, lines: dict[Loc, int]) -> None:
        self.path = path
        self.data = data
        self.lines = lines

    def line_of(self, loc: Loc) -> int | None:
        """Line of the deepest prefix of `loc` that the file spells out."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get((), None)

    def with_data(self, data: Any) -> Document:
        """The same document (same class, lines and error attribution) holding other data."""
        sub = copy.copy(self)
        sub.data = data
        return sub

    def error(self, message: str, loc: Loc = ()) -> InputError:
        """The error at `loc`; an SI field name in it is named as the file spells it
        (`failures.0.at_s` of a file giving `at_days` is `failures.0.at_days`)."""
        out, data = [], self.data
        for part in loc:
            if isinstance(data, dict) and isinstance(part, str) and part not in data:
                part = _human_spelling(data, part)
            out.append(part)
            data = data[part] if isinstance(data, dict | list) and _has(data, part) else None
        field = ".".join(str(p) for p in out) or None
        return InputError(message, file=self.path, line=self.line_of(tuple(out)), field=field)


def parse_text(text: str, path: Path) -> Document:
    """Parse YAML (JSON is YAML) text into a `Document`."""
    if _CParser is not None and not Reader.NON_PRINTABLE.search(text):
        try:
            return _parse(_CLineLoader, text, path)
        except Exception:  # reported as the Python parser reports it, below
            pass
    return _parse(_LineLoader, text, path)


def _parse(loader_class: type[_LineLoader] | type[_CLineLoader], text: str, path: Path) -> Document:
    lines: dict[Loc, int] = {}
    try:
        loader = loader_class(text)
        try:
            node = loader.get_single_node()
            if node is not None and _expanded_size(node, {}) > MAX_VALUES:
                raise InputError(
                    f"expands to more than {MAX_VALUES:,} values (aliases repeat what they name)",
                    line=node.start_mark.line + 1,
                )
            data = None if node is None else _construct(loader, node, (), lines)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or exc.context or "malformed YAML"
        raise InputError(f"malformed YAML: {problem}", file=path, line=line) from None
    except yaml.reader.ReaderError as exc:
        raise InputError(
            f"not text: unacceptable character #x{exc.character:04x} at position {exc.position}", file=path
        ) from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", file=path) from None
    except InputError as exc:
        raise InputError(exc.message, file=path, line=exc.line, field=exc.field) from None
    except RecursionError:
        raise InputError(f"nested deeper than {MAX_DEPTH} levels", file=path) from None
    return Document(path, data, lines)


def read_document(path: str | Path) -> Document:
    """Read and parse one YAML/JSON file; a missing or unreadable file is an InputError."""
    p = Path(path)
    doc = parse_text(read_text(p), p)
    if doc.data is None:
        raise InputError("file is empty", file=p, line=1)
    return doc


#: what each kind of input file holds at its top level, and how it is used
_FILE_KINDS: tuple[tuple[str, Callable[[dict[Any, Any]], bool], str], ...] = (
    ("compare", lambda d: "variants" in d and "base" in d, "run it with `clustersim compare FILE`"),
    ("study", lambda d: "job" in d and "step" in d, "run it with `clustersim sweep FILE`"),
    (
        "scenario",
        lambda d: "topology" in d and any(k in d for k in ("workload", "jobs", "cluster")),
        "run it with `clustersim run FILE`",
    ),
    (
        "topology",
        lambda d: "generator" in d or ("graph" in d and "gpu" in d),
        "a scenario names it as `topology: {file: FILE}`; `clustersim topo FILE` describes it",
    ),
    ("workload", lambda d: "model" in d and "layout" in d, "a scenario names it as `workload: {file: FILE}`"),
    ("GPU", lambda d: "peak_tflops" in d and "arch" in d, "a topology names it as `gpu: {file: FILE}`"),
)


def check_file_kind(doc: Document, expected: str) -> None:
    """Raise one line if `doc` is plainly a file of another kind than `expected` (one of
    compare, study, scenario, topology, workload, GPU), told by its top-level keys.

    Raises:
        InputError: `this is a KIND file, not a EXPECTED file; how KIND is used`.
    """
    if not isinstance(doc.data, dict):
        return
    for kind, holds, use in _FILE_KINDS:
        if kind != expected and holds(doc.data):
            raise doc.error(f"this is a {kind} file, not a {expected} file; {use}")


def _message(err: Any) -> str:
    cause = err.get("ctx", {}).get("error")
    if isinstance(cause, FieldError):
        return cause.message
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return "unknown key (not in the schema; check its spelling)"
    if kind == "union_tag_invalid":
        ctx = err["ctx"]
        tag_key = ctx["discriminator"].strip("'")
        return f"unknown {tag_key} {ctx['tag']!r}; expected one of {ctx['expected_tags']}"
    if kind == "missing":
        return "required field is missing"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        found = err.get("input")
        what = {list: "a list", str: "text", bool: "a boolean", int: "a number", float: "a number"}
        return f"expected a mapping, found {what.get(type(found), repr(found))}"
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    # pydantic's "Input should be ..." reads on in lower case; an acronym ("GPU ...") stays
    return msg[0].lower() + msg[1:] if msg and not msg[1:2].isupper() else msg


def validate(model: Any, doc: Document, loc: Loc = (), context: dict[str, Any] | None = None) -> Any:
    """Validate `doc.data` (or the part at `loc`) against `model` (a model class or TypeAdapter).

    Raises:
        InputErrors: one entry per pydantic error, each with file, line and field path.
    """
    data: Any = doc.data
    for part in loc:
        data = data[part]
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_python(data, context=context)
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        errors: list[InputError] = []
        for err in exc.errors():
            raw_loc = tuple(err.get("loc", ()))
            cause = err.get("ctx", {}).get("error")
            if isinstance(cause, FieldError) and cause.field:
                raw_loc = (*raw_loc, *cause.field.split("."))
            elif err.get("type") == "union_tag_invalid":  # placed at the tag's key
                raw_loc = (*raw_loc, err["ctx"]["discriminator"].strip("'"))
            # drop tagged-union discriminator values pydantic inserts into locations
            full = (*loc, *raw_loc)
            clean = _clean_loc(doc, full)
            if err.get("type") == "missing" and full and (not clean or clean[-1] != full[-1]):
                clean = (*clean, full[-1])  # a missing key is absent from the data by definition
            message = _in_key_unit(err, clean[-1], full[-1]) if clean and full else None
            if message is None and isinstance(cause, FieldError) and clean and clean[-1] != full[-1]:
                message = _limit_as_given(doc, clean)
            errors.append(doc.error(message or _message(err), clean))
        # what the file says wrong comes before what it leaves out (the first line shown)
        errors.sort(key=lambda e: e.message == "required field is missing")
        raise InputErrors(errors) from None


def _limit_as_given(doc: Document, loc: Loc) -> str | None:
    """The physical limit of a value given under a human-unit key (`mtbf_h`), said in that
    unit from the value as written (the check ran on its SI value); None if there is none."""
    value: Any = doc.data
    for part in loc:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return None
    key = loc[-1]
    if isinstance(key, str) and isinstance(value, int | float) and not isinstance(value, bool):
        return physical_limit_error(key, float(value))
    return None


#: pydantic's numeric bounds, by the error type that reports them
_BOUNDS = {
    "greater_than": ("gt", "greater than"),
    "greater_than_equal": ("ge", "greater than or equal to"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "less than or equal to"),
}


def _in_key_unit(err: Any, key: Any, si_name: Any) -> str | None:
    """A bound of an SI field given in a human unit, said in the key's unit
    (`duration_days`: at most 3652.5, not 315576000 seconds); None for any other error."""
    bound = _BOUNDS.get(err.get("type", ""))
    if bound is None or not isinstance(key, str) or not isinstance(si_name, str) or key == si_name:
        return None
    limit = err.get("ctx", {}).get(bound[0])
    units = [
        (sfx, u) for sfx, u in HUMAN_UNITS.items() if key.endswith(sfx) and si_name.endswith(u.si_suffix)
    ]
    if not isinstance(limit, (int, float)) or limit == 0 or not units:
        return None  # a bound of 0 is 0 in every unit: the schema's message says it
    suffix, unit = max(units, key=lambda su: len(su[0]))
    return f"input should be {bound[1]} {float(limit) / unit.factor:.10g} {suffix.lstrip('_')}"


def _has(data: dict[Any, Any] | list[Any], part: Any) -> bool:
    if isinstance(data, dict):
        return part in data
    return isinstance(part, int) and 0 <= part < len(data)


def _human_spelling(data: dict[Any, Any], si_name: str) -> str:
    """The key `data` spells the SI field `si_name` with (`duration_days` for `duration_s`),
    or `si_name` itself when it holds none. A spelling may shorten the field's base by its
    last words, as specs read them (`hbm_mib` and `hbm_gbyte` for `hbm_capacity_bytes`,
    `peak_tflops` for `peak_flops_per_s`)."""
    try:
        base, si_suffix = split_si(si_name)
    except ValueError:
        return si_name
    words = base.split("_")
    for n in range(len(words), 0, -1):
        stem = "_".join(words[:n])
        for suffix, unit in HUMAN_UNITS.items():
            if unit.si_suffix == si_suffix and stem + suffix in data:
                return stem + suffix
    return si_name


def _clean_loc(doc: Document, loc: Loc) -> Loc:
    """Remove path parts pydantic adds for tagged unions (e.g. the tag value)."""
    out: list[str | int] = []
    data: Any = doc.data
    for part in loc:
        if isinstance(data, list) and isinstance(part, str) and part.isdigit():
            part = int(part)  # an index in a validator's dotted field path ("failures.0.at_s")
        if isinstance(data, dict) and isinstance(part, str) and part not in data:
            part = _human_spelling(data, part)
        if (
            isinstance(data, dict)
            and part in data
            or isinstance(data, list)
            and isinstance(part, int)
            and 0 <= part < len(data)
        ):
            out.append(part)
            data = data[part]
        elif isinstance(data, (dict, list)):
            # a tag or function name pydantic inserted; skip it, keep the rest
            continue
        else:
            out.append(part)
    return tuple(out)


def load(model: type[M], path: str | Path, context: dict[str, Any] | None = None) -> M:
    """Read a file and validate it against `model` in one call."""
    return validate(model, read_document(path), context=context)
