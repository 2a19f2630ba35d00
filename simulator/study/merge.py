"""Editing a base YAML mapping into a variant: compare-file overrides and study axis values.

Two edits, each giving new data and leaving its inputs untouched:

* `deep_merge(base, over)`: a compare variant's partial override. Mappings merge key by
  key (recursively); a key set to null in `over` is removed (its default applies again, as
  in a JSON Merge Patch, RFC 7396); anything else in `over` (a list, a scalar) replaces
  what `base` has.
* `with_settings(data, settings)`: a study's axis values. Each setting is a dotted key path
  (`policy.interval_min`, `failures.0.mtbf_h`) and the value to put there. Shallower paths
  are applied first, so `policy: {...}` is replaced whole before `policy.interval_min` is
  set; a number set at `<quantity>_<unit>` drops the sibling keys of the same quantity in
  the other units (`interval_min` replaces `interval_s`).

Simplifications: a path part made of digits indexes a list, and a missing mapping on the
way to the last key is created; nothing is validated here (the spec the data is read into
does that afterwards).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from simulator.units import HUMAN_UNITS

#: A key path into nested mappings and lists: mapping keys and list indices.
KeyPath = tuple[Any, ...]

#: The unit suffixes a duration may be written with in input files (see `simulator.units`).
UNIT_SUFFIXES = ("_s", *(suffix for suffix, unit in HUMAN_UNITS.items() if unit.si_suffix == "_s"))


class UnsettablePath(ValueError):
    """A setting's path does not fit the data (a scalar or a too-short list on the way).

    Attributes:
        position: the setting's position in the sequence given to `with_settings`.
        path: its dotted path.
    """

    def __init__(self, position: int, path: str) -> None:
        super().__init__(f"cannot set {path!r}")
        self.position = position
        self.path = path


def parse_path(dotted: str) -> KeyPath:
    """`"failures.0.mtbf_h"` -> `("failures", 0, "mtbf_h")`: digit-only parts become indices."""
    return tuple(int(part) if part.isdigit() else part for part in dotted.split("."))


def leaf_paths(data: Any, prefix: KeyPath = ()) -> set[KeyPath]:
    """Every key path a mapping spells out (mappings recurse; lists and scalars are leaves).

    Args:
        data: the mapping (anything else has no key paths of its own).
        prefix: the path of `data` itself, prepended to every path found.
    """
    out: set[KeyPath] = {prefix} if prefix else set()
    if isinstance(data, dict):
        for key, value in data.items():
            out |= leaf_paths(value, (*prefix, key))
    return out


def deep_merge(base: Any, over: Any) -> Any:
    """Mappings merge key by key (recursively); a key whose value in `over` is None is
    removed (RFC 7396's null); anything else in `over` replaces `base`.

    Args:
        base: the data merged into (left untouched; keys `over` does not name are shared).
        over: the overriding data (deep-copied into the result).
    """
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            if value is None:
                out.pop(key, None)
            elif isinstance(value, dict):  # merged into what the base has there, if a mapping
                prior = base.get(key)
                out[key] = deep_merge(prior if isinstance(prior, dict) else {}, value)
            else:
                out[key] = copy.deepcopy(value)
        return out
    return copy.deepcopy(over)


def set_path(data: Any, dotted: str, value: Any) -> None:
    """Put a deep copy of `value` at a dotted key path of `data`, in place.

    Missing mappings on the way are created. A number set in a mapping at
    `<quantity>_<unit>` removes the quantity's keys in the other units of `UNIT_SUFFIXES`.

    Raises:
        KeyError, IndexError, TypeError, AttributeError: the path does not fit `data`.
    """
    parts = parse_path(dotted)
    node = data
    for part in parts[:-1]:
        node = node[part] if isinstance(node, list) and isinstance(part, int) else node.setdefault(part, {})
    last = parts[-1]
    if isinstance(node, dict) and isinstance(value, (int, float)):
        quantity = str(last).rsplit("_", 1)[0]
        for suffix in UNIT_SUFFIXES:
            if quantity + suffix != last:
                node.pop(quantity + suffix, None)
    node[last] = copy.deepcopy(value)


def with_settings(data: Any, settings: Sequence[tuple[str, Any]]) -> Any:
    """A deep copy of `data` with every (dotted path, value) setting applied, shallow paths first.

    Args:
        data: the base data (left untouched).
        settings: (dotted path, value) pairs; among paths of equal depth, the given order.

    Raises:
        UnsettablePath: the first setting (in the order applied) whose path does not fit.
    """
    out = copy.deepcopy(data)
    for position in sorted(range(len(settings)), key=lambda j: settings[j][0].count(".")):
        dotted, value = settings[position]
        try:
            set_path(out, dotted, value)
        except (KeyError, IndexError, TypeError, AttributeError):
            raise UnsettablePath(position, dotted) from None
    return out
