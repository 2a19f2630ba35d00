"""Human units to SI: one table of unit suffixes and one converter for input mappings.

What is modelled: input files may give a quantity in the unit people quote it in
(`mtbf_h`, `interval_min`, `duration_days`, `latency_us`, `bandwidth_gbps`, `size_mib`),
while every schema stores SI (`_s`, `_bytes`, `_bytes_per_s`, `_flops_per_s`). The unit is
the key's suffix: `HUMAN_UNITS` maps each human suffix to its SI suffix and factor, and
`to_si` rewrites the human spellings of named SI fields of a mapping into those fields.
A quantity given in two spellings (`duration_h` and `duration_days`, or `interval_min`
and `interval_s`) is an error, never a silent choice.

What is simplified: a unit is recognised by its key's suffix alone, and only for the SI
fields a schema names (so a field stored in human units, such as `checkpoint_gbyte`, is
left alone). Bytes use decimal prefixes for GB and TB (1e9, 1e12) and binary ones for MiB
and GiB; `_mb` reads as MiB (2**20 bytes), as the layout's `grad_bucket_mb` always has. A
Gbit/s is 1e9 / 8 bytes/s. Each value is converted as `float(value) * factor`, with one
factor per unit.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from typing import Any

from simulator.errors import FieldError, shown


@dataclasses.dataclass(frozen=True)
class HumanUnit:
    """One human unit: the SI suffix it converts to and the factor to multiply by."""

    si_suffix: str
    factor: float


#: Human suffix -> SI suffix and factor. The factors are exact products of the unit
#: definitions (1e9 / 8 is exactly 125000000.0, so `x * 1e9 / 8 == x * (1e9 / 8)`).
HUMAN_UNITS: dict[str, HumanUnit] = {
    # durations -> seconds
    "_us": HumanUnit("_s", 1e-6),
    "_ms": HumanUnit("_s", 1e-3),
    "_min": HumanUnit("_s", 60.0),
    "_h": HumanUnit("_s", 3600.0),
    "_days": HumanUnit("_s", 86400.0),
    # data rates -> bytes per second
    "_gbps": HumanUnit("_bytes_per_s", 1e9 / 8),
    "_gbyte_per_s": HumanUnit("_bytes_per_s", 1e9),
    "_tbyte_per_s": HumanUnit("_bytes_per_s", 1e12),
    # sizes -> bytes
    "_mb": HumanUnit("_bytes", float(2**20)),
    "_mib": HumanUnit("_bytes", float(2**20)),
    "_gib": HumanUnit("_bytes", float(2**30)),
    "_gbyte": HumanUnit("_bytes", 1e9),
    # compute rates -> FLOP per second
    "_tflops": HumanUnit("_flops_per_s", 1e12),
}

#: SI suffixes the table converts to, longest first (`_bytes_per_s` before `_s`).
SI_SUFFIXES: tuple[str, ...] = tuple(
    sorted({u.si_suffix for u in HUMAN_UNITS.values()}, key=len, reverse=True)
)


class UnitsError(FieldError):
    """A human-unit key that cannot be converted: a quantity given in two spellings, or a
    value that is not a number.

    It is also a `ValueError`, so that raised inside a schema validator it is reported
    like any other invalid value, with the file, line and path of the mapping.
    """


def factor(human_suffix: str) -> float:
    """The SI factor of one human unit, for a field kept in human units until it is used.

    Args:
        human_suffix: a key of `HUMAN_UNITS`, e.g. `"_gbyte"` (GB) or `"_us"`.

    Returns:
        What one of that unit is in SI (`factor("_gbyte") == 1e9`).
    """
    return HUMAN_UNITS[human_suffix].factor


def split_si(si_name: str) -> tuple[str, str]:
    """Split an SI field name into its base and SI suffix.

    Args:
        si_name: a field name ending in one of `SI_SUFFIXES`, e.g. `latency_s`.

    Returns:
        The base and the suffix, e.g. `("latency", "_s")`.

    Raises:
        ValueError: the name ends in no SI suffix of the table.
    """
    for suffix in SI_SUFFIXES:
        if si_name.endswith(suffix) and len(si_name) > len(suffix):
            return si_name[: -len(suffix)], suffix
    raise ValueError(f"{si_name!r} does not end in an SI suffix ({', '.join(SI_SUFFIXES)})")


def _human_units_of(si_name: str, human_base: str | None) -> dict[str, HumanUnit]:
    """The human spellings of `si_name` and their units."""
    base, si_suffix = split_si(si_name)
    human = base if human_base is None else human_base
    return {human + s: unit for s, unit in HUMAN_UNITS.items() if unit.si_suffix == si_suffix}


def spellings(si_name: str, human_base: str | None = None) -> tuple[str, ...]:
    """Every key that spells the quantity `si_name`: the SI name first, then its human ones.

    Args:
        si_name: the SI field, e.g. `interval_s`.
        human_base: the base of the human spellings when it differs from the SI one (the
            GPU's `hbm_gbyte` spells `hbm_capacity_bytes`: base `hbm`).

    Returns:
        For `interval_s`: `interval_s`, `interval_us`, `interval_ms`, `interval_min`,
        `interval_h`, `interval_days`.
    """
    return (si_name, *_human_units_of(si_name, human_base))


def _scaled(key: str, value: Any, factor: float, allow_text: bool) -> Any:
    """`float(value) * factor`, element by element for lists and mappings of numbers."""
    if isinstance(value, list):
        return [_scaled(key, v, factor, allow_text) for v in value]
    if isinstance(value, Mapping):
        return {k: _scaled(key, v, factor, allow_text) for k, v in value.items()}
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            return float(value) * factor
        except OverflowError:
            raise UnitsError(f"must be a finite number, found {shown(value)}", field=key) from None
    if allow_text and isinstance(value, str):
        try:
            return float(value) * factor
        except ValueError:
            pass
    raise UnitsError(f"must be a number, found {value!r}", field=key)


def to_si(
    data: Any, *si_names: str, human_bases: Mapping[str, str] | None = None, allow_text: bool = False
) -> Any:
    """Rewrite the human-unit spellings of the SI fields `si_names` in a mapping.

    Each key that spells one of the quantities in a human unit (see `spellings`) is
    replaced by the SI field, its value multiplied by the unit's factor; lists and
    mappings of numbers convert element by element. Other keys are left as they are.

    Args:
        data: the mapping read from a file; anything else is returned unchanged (the
            schema then reports it).
        *si_names: the SI fields to look for, e.g. `"duration_s"`, `"bandwidth_bytes_per_s"`.
        human_bases: per SI field, the base of its human spellings when it differs from
            the SI one (`{"hbm_capacity_bytes": "hbm"}` reads `hbm_gbyte`).
        allow_text: read numbers written as text (`"400"`), as graph files store every
            attribute; YAML inputs give numbers as numbers, so a quoted one is an error.

    Returns:
        A converted shallow copy of `data` (or `data` itself if it is not a mapping).

    Raises:
        UnitsError: a quantity is given in more than one spelling, or a human-unit value
            is not a number.
    """
    if not isinstance(data, Mapping):
        return data
    out = dict(data)
    for si_name in si_names:
        units = _human_units_of(si_name, (human_bases or {}).get(si_name))
        given = [k for k in out if k == si_name or k in units]
        if len(given) > 1:
            names = ", ".join(given[:-1]) + " and " + given[-1]
            raise UnitsError(f"{names} spell the same quantity; give only one of them", field=si_name)
        if given and given[0] != si_name:
            key = given[0]
            out[si_name] = _scaled(key, out.pop(key), units[key].factor, allow_text)
    return out


#: Sane physical limits per SI suffix: (smallest non-zero value, largest value). Zero is
#: left to each field's own constraint. The smallest rates keep a transfer of any
#: modelled size finite in simulated time; the largest values are far beyond any
#: machine that exists (an exabyte, 30,000 years, 1 PB/s per link).
PHYSICAL_LIMITS: dict[str, tuple[float, float]] = {
    "_bytes_per_s": (1e3, 1e15),
    "_flops_per_s": (1e6, 1e19),
    "_bytes": (0.0, 1e18),
    "_s": (0.0, 1e12),
}

#: Limits of a latency (a field whose quantity ends in `latency`: a link's, a hop's, a
#: library call's), tighter than any duration's: one second is already more than the
#: longest round trip between two continents (~0.3 s), and a latency typed in the wrong
#: unit (1e17 us) would otherwise be simulated as a step of hundreds of centuries.
LATENCY_LIMITS: tuple[float, float] = (0.0, 1.0)

#: Limits of plain counts of physical work, by exact field name.
NAMED_LIMITS: dict[str, tuple[float, float]] = {
    "flops": (0.0, 1e25),
    "bytes": (0.0, 1e18),
}


def physical_limit_error(name: str, value: float) -> str | None:
    """Why `value` is not a sane value of the quantity the field `name` holds, or None.

    The unit is read from the name's suffix, human (`nic_gbps`) or SI (`latency_s`);
    a field whose name carries no unit, or a rate of anything but bytes or FLOPs
    (`rate_per_s`), is not checked.

    Args:
        name: the field name, e.g. `bandwidth_bytes_per_s` or `link_latency_us`.
        value: the value as given, in the unit the name spells.

    Returns:
        A message such as `must be at most 1e+15 bytes/s (found 1e+20)`, or None.
    """
    limits, si_value, si_suffix, stem = NAMED_LIMITS.get(name), value, name, name
    human: tuple[str, float] | None = None  # the name's own unit and its factor, if human
    if limits is None:
        for suffix, unit in sorted(HUMAN_UNITS.items(), key=lambda kv: -len(kv[0])):
            if name.endswith(suffix):
                si_value, si_suffix, stem = value * unit.factor, unit.si_suffix, name.removesuffix(suffix)
                human = (suffix.removeprefix("_"), unit.factor)
                break
        for suffix in SI_SUFFIXES:
            if si_suffix.endswith(suffix) and not (suffix == "_s" and si_suffix.endswith("_per_s")):
                limits = PHYSICAL_LIMITS[suffix]
                if suffix == "_s" and stem.removesuffix(suffix).endswith("latency"):
                    limits = LATENCY_LIMITS
                unit_name = suffix.removeprefix("_").replace("_per_", "/")
                break
        else:
            return None
    else:
        unit_name = name
    low, high = limits
    said = unit_name
    if human is not None:  # said in the unit the name spells, as the value was given
        said, high_said, low_said, found = human[0], high / human[1], low / human[1], value
    else:
        high_said, low_said, found = high, low, si_value
    if abs(si_value) > high:
        return f"must be at most {high_said:g} {said} (found {found:g} {said})"
    if si_value != 0 and abs(si_value) < low:
        return f"must be 0 or at least {low_said:g} {said} (found {found:g} {said})"
    return None


__all__ = [
    "LATENCY_LIMITS",
    "NAMED_LIMITS",
    "PHYSICAL_LIMITS",
    "physical_limit_error",
    "HUMAN_UNITS",
    "SI_SUFFIXES",
    "HumanUnit",
    "UnitsError",
    "factor",
    "spellings",
    "split_si",
    "to_si",
]
