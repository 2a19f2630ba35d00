"""Column names and labels of a study's axes.

What is modelled: each axis becomes one column of the study's frames (`runs`, `summary`,
`incidents`, `segments`), holding one label per axis value. A number or a string is its
own label. A mapping (a whole policy) is labelled by its `name`, else its `kind`, and a
list (a failure list) by the labels of its items in brackets; when two values of an axis
would share that label, the label adds the keys that differ between those values
(`checkpoint_restart wait_for_repair=true`), and when that is not enough, or too long for
a folder name, the value's position (`checkpoint_restart#1`). So every value of an axis has
its own label, and grouping by the column never pools two variants.

An axis column may not be named like a column the study writes itself (`RESERVED_COLUMNS`:
the variant and seed keys, a run's figures, the summary's aggregates, the incident and
segment columns), or the axis values would overwrite results.

What is simplified: the differing keys are found on the values flattened to dotted paths
(`restart.queue_min`, list items by position), compared as YAML wrote them (so `5` and
`5.0` differ).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from simulator.faults.metrics import METRICS
from simulator.faults.records import INCIDENT_COLUMNS, SEGMENT_COLUMNS, run_columns

#: Longest label of a mapping or list value (it also names the value's dataset folder).
MAX_LABEL_CHARS = 60

#: Columns every study frame may hold besides its axes: the task keys, a run's figures
#: (`runs`), the summary's count and intervals, the incident and segment columns.
RESERVED_COLUMNS = frozenset(
    {
        "variant",
        "seed",
        *run_columns(),
        "n",
        *(f"{m}_{part}" for m in METRICS for part in ("mean", "lo", "hi")),
        *INCIDENT_COLUMNS,
        *SEGMENT_COLUMNS,
    }
)


def reserved_column_problem(column: str) -> str | None:
    """Why `column` cannot name an axis (a column the study writes itself), or None."""
    if column not in RESERVED_COLUMNS:
        return None
    return (
        f"{column!r} is a column the study writes itself (run figures, summary, incidents, "
        "segments, variant, seed); give the axis another name"
    )


def _scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def _text(value: Any) -> str:
    """Compact text of a value (JSON for mappings and lists)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


def value_label(value: Any) -> Any:
    """The short label of one value: itself, a mapping's `name` or `kind` (else its compact
    text when short), a list's item labels in brackets."""
    if isinstance(value, dict):
        short = value.get("name") or value.get("kind")
        if short is not None:
            return str(short)
        text = _text(value)
        return text if len(text) <= MAX_LABEL_CHARS else "mapping"
    if isinstance(value, list):
        return "[" + ", ".join(str(value_label(v)) for v in value) + "]"
    return value


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A mapping or list flattened to dotted paths (list items by position)."""
    if _scalar(value):
        return {prefix: value}
    items = value.items() if isinstance(value, dict) else enumerate(value)
    out: dict[str, Any] = {}
    for key, item in items:
        out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _differing(values: list[Any]) -> list[str]:
    """The dotted paths whose values are not the same in all of `values`, in first-seen order."""
    flats = [_flat(v) for v in values]
    keys = list(dict.fromkeys(k for f in flats for k in f))
    return [k for k in keys if len({_text(f[k]) if k in f else None for f in flats}) > 1]


def axis_labels(values: list[Any]) -> list[Any]:
    """One distinct label per value of an axis (see the module docstring); numbers and
    strings stay as they are, so a numeric axis keeps its numbers."""
    labels: list[Any] = [value_label(v) for v in values]
    groups: dict[str, list[int]] = {}
    for i, v in enumerate(values):
        if not _scalar(v):
            groups.setdefault(str(labels[i]), []).append(i)
    for base, members in groups.items():
        if len(members) < 2:
            continue
        keys = _differing([values[i] for i in members])
        for i in members:
            flat = _flat(values[i])
            parts = ", ".join(f"{k}={_text(flat[k])}" for k in keys if k in flat)
            labels[i] = f"{base} {parts}" if parts else base
    counts = Counter(str(label) for label in labels)
    redo = [
        i
        for i, v in enumerate(values)
        if not _scalar(v) and (counts[str(labels[i])] > 1 or len(str(labels[i])) > MAX_LABEL_CHARS)
    ]
    taken = {str(labels[i]) for i in range(len(values)) if i not in redo}
    for i in redo:
        base = str(value_label(values[i]))
        if len(base) > MAX_LABEL_CHARS:
            base = "list" if isinstance(values[i], list) else "mapping"
        label, k = f"{base}#{i}", i
        while label in taken:  # a label another value has (or took) already: the next free one
            k += len(values)
            label = f"{base}#{k}"
        taken.add(label)
        labels[i] = label
    return labels


def same_value_key(x: Any) -> Any:
    """A key equal for equal axis values: numbers by value (10 and 10.0 are one number, a
    boolean is not a number), text as text ("10" is not 10), mappings whatever their key
    order, lists in order."""
    if isinstance(x, dict):
        return ("map", tuple(sorted((str(k), same_value_key(val)) for k, val in x.items())))
    if isinstance(x, list | tuple):
        return ("list", tuple(same_value_key(val) for val in x))
    if isinstance(x, bool) or x is None:
        return ("bool", x)
    if isinstance(x, int | float):
        return ("number", x)
    return ("text", str(x))
