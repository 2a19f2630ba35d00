"""The strict base of every input schema: unknown keys are errors, fields are documented.

What is modelled: every number an input file gives for a physical quantity is a real
number of the right kind (no `"3"` read as 3, no `true` read as 1, no `.inf` or `.nan`)
and lies within sane physical limits (`simulator.units.physical_limit_error`: no link of
1e-300 Gbit/s, no duration of a million years), so that no input makes a run hang.

What is simplified: the type check follows the field's annotation through lists, tuples,
dicts and unions; a field that also accepts text (`str | int`) takes text as text.
"""

from __future__ import annotations

import functools
import math
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from simulator.errors import FieldError
from simulator.units import physical_limit_error

_NUMBERS = (int, float)


def _type_error(annotation: Any, value: Any) -> str | None:
    """Why `value` is the wrong kind of value for `annotation`, or None if it is fine.

    Only the coercions pydantic's lax mode would make silently are reported: text or a
    boolean where a number is expected, a number or text where a boolean is expected.
    Everything else is left to pydantic.
    """
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _type_error(get_args(annotation)[0], value)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if value is None or not args:
            return None
        errors = [_type_error(arg, value) for arg in args]
        return None if any(e is None for e in errors) else next(e for e in errors if e)
    if annotation in _NUMBERS:
        if isinstance(value, bool):
            return f"expected a number, found the boolean {str(value).lower()}"
        if isinstance(value, str):
            return f"expected a number, found the text {value!r}"
        return None
    if annotation is bool:
        return None if isinstance(value, bool) else f"expected true or false, found {value!r}"
    if origin is Literal:
        return None
    if origin in (list, tuple, set, frozenset) and isinstance(value, list | tuple):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        for i, item in enumerate(value):
            if not args:
                break
            arg = args[0] if origin is not tuple or len(args) == 1 else args[min(i, len(args) - 1)]
            if err := _type_error(arg, item):
                return f"item {i}: {err}"
        return None
    if origin is dict and isinstance(value, dict):
        key_value = get_args(annotation)
        for k, item in value.items():
            if len(key_value) == 2 and (err := _type_error(key_value[1], item)):
                return f"{k}: {err}"
    return None


def _numbers_in(value: Any, path: str = "") -> list[tuple[str, float]]:
    """The numbers in a value with their dotted paths, in lists, tuples and dicts too."""
    if isinstance(value, bool):
        return []
    if isinstance(value, _NUMBERS):
        try:
            return [(path, float(value))]
        except OverflowError:  # a whole number beyond any float: refused as not finite
            return [(path, math.copysign(math.inf, value))]

    def sub(k: Any) -> str:
        return f"{path}.{k}" if path else str(k)

    if isinstance(value, list | tuple):
        return [x for i, item in enumerate(value) for x in _numbers_in(item, sub(i))]
    if isinstance(value, dict):
        return [x for k, item in value.items() for x in _numbers_in(item, sub(k))]
    return []


@functools.cache
def _annotation(model: type[BaseModel], name: str) -> Any:
    return model.model_fields[name].annotation


#: The largest seed: the runs of a study use seed, seed + 1, ... (up to 10,000 of them), and
#: every one must stay a 64-bit integer, as the frames store it.
MAX_SEED = 2**62

#: A name that is also a results folder's (`results/<name>`): at most 128 bytes, no path.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$"


class Spec(BaseModel):
    """Base of all input specs: frozen, unknown keys forbidden, numbers strict and finite."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _strict_types(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, value in data.items():
                if isinstance(key, str) and key in cls.model_fields:
                    err = _type_error(_annotation(cls, key), value)
                    if err:
                        raise FieldError(err, field=key)
        return data

    @field_validator("*", mode="after")
    @classmethod
    def _physical(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name is None:
            return value
        for path, x in _numbers_in(value):
            if not math.isfinite(x):
                raise FieldError(f"must be a finite number, found {x!r}", field=path or None)
            key = path.rsplit(".", 1)[-1]
            err = physical_limit_error(key, x) if key else None
            if err := err or physical_limit_error(info.field_name, x):
                raise FieldError(err, field=path or None)
        return value


class FileRef(Spec):
    """A reference to another input file, named relative to the file that names it: `{file: a.yaml}`."""

    file: str = Field(description="Path of the referenced file, relative to the file that names it.")
