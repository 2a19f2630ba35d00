"""Parse YAML/JSON files while keeping line numbers, and validate them with pydantic.

The loader does parse, resolve, validate, nothing else. Every problem becomes an
`InputError` naming the file, the line of the offending key (where the YAML gives one),
the dotted field path and what was expected.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from simulator.errors import InputError, InputErrors

M = TypeVar("M", bound=BaseModel)

Loc = tuple[Any, ...]


class _LineLoader(yaml.SafeLoader):
    """A safe loader that records the line of every mapping key and sequence item."""


def _construct(loader: _LineLoader, node: yaml.Node, path: Loc, lines: dict[Loc, int]) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        loader.flatten_mapping(node)
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise InputError(
                    "mapping keys must be plain scalars",
                    line=key_node.start_mark.line + 1,
                )
            sub = (*path, key)
            lines[sub] = key_node.start_mark.line + 1
            out[key] = _construct(loader, value_node, sub, lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            sub = (*path, i)
            lines[sub] = item.start_mark.line + 1
            items.append(_construct(loader, item, sub, lines))
        return items
    return loader.construct_object(node, deep=True)


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
        field = ".".join(str(p) for p in loc) or None
        return InputError(message, file=self.path, line=self.line_of(loc), field=field)


def parse_text(text: str, path: Path) -> Document:
    """Parse YAML (JSON is YAML) text into a `Document`."""
    lines: dict[Loc, int] = {}
    try:
        loader = _LineLoader(text)
        try:
            node = loader.get_single_node()
            data = None if node is None else _construct(loader, node, (), lines)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or exc.context or "malformed YAML"
        raise InputError(f"malformed YAML: {problem}", file=path, line=line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", file=path) from None
    except InputError as exc:
        raise InputError(exc.message, file=path, line=exc.line) from None
    return Document(path, data, lines)


def read_document(path: str | Path) -> Document:
    """Read and parse one YAML/JSON file; a missing or unreadable file is an InputError."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", file=p) from None
    except IsADirectoryError:
        raise InputError("expected a file, found a folder", file=p) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read file: {exc}", file=p) from None
    doc = parse_text(text, p)
    if doc.data is None:
        raise InputError("file is empty", file=p, line=1)
    return doc


def _message(err: Any) -> str:
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return "unknown key (not in the schema; check its spelling)"
    if kind == "missing":
        return "required field is missing"
    msg = str(err.get("msg", "invalid value"))
    return msg[0].lower() + msg[1:] if msg else msg


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
            # drop tagged-union discriminator values pydantic inserts into locations
            full = (*loc, *raw_loc)
            clean = _clean_loc(doc, full)
            if err.get("type") == "missing" and full and (not clean or clean[-1] != full[-1]):
                clean = (*clean, full[-1])  # a missing key is absent from the data by definition
            errors.append(doc.error(_message(err), clean))
        raise InputErrors(errors) from None


def _clean_loc(doc: Document, loc: Loc) -> Loc:
    """Remove path parts pydantic adds for tagged unions (e.g. the tag value)."""
    out: list[str | int] = []
    data: Any = doc.data
    for part in loc:
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
