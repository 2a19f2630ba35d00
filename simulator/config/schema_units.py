"""JSON schemas that accept what the loaders accept: the human-unit spellings of SI fields.

pydantic's JSON schema of an input model lists its fields as declared, in SI (`mtbf_s`),
while files spell them in human units (`mtbf_h`, `grad_bucket_mb`, `hbm_mib`), which each
model's own before-validators rewrite (`simulator.units.to_si`). `with_human_units` asks each
model of a schema which spellings those validators rewrite into each of its SI fields, by
giving them one spelling at a time, and adds every such spelling as a property of its own,
described as the SI field in human units; a required SI field may then be given in either
spelling.

What is simplified: only unit spellings are probed for. Other shorthands a validator reads
are in the schema only where their field says so itself (a job's `placement: spread`,
`simulator.scenario.job_specs`; `zero_stage: fsdp`, `simulator.workload.framework`); a
shorthand no field declares fails the schema and still loads. The spellings tried are the
field's own base and each shorter prefix of it (`hbm_capacity_bytes`: `hbm_capacity_*` and
`hbm_*`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, get_args

from pydantic import BaseModel

from simulator.units import HUMAN_UNITS, SI_SUFFIXES, spellings, split_si


def _candidates(si_name: str) -> list[str]:
    """Human spellings `si_name` could have: its base and each shorter prefix of the base."""
    base, _ = split_si(si_name)
    parts = base.split("_")
    out: list[str] = []
    for n in range(len(parts), 0, -1):
        out += [k for k in spellings(si_name, "_".join(parts[:n]))[1:] if k not in out]
    return out


def accepted_spellings(model: type[BaseModel]) -> dict[str, str]:
    """Human-unit key -> field, for every spelling `model`'s before-validators rewrite: the
    SI fields' spellings first, then numbers in a unit standing for a whole field
    (`repair_h`, `repair_s`), among keys no SI field claimed (a validator that rewrites
    `interval_h` into `interval_s` and fills in `interval` does not make it `interval`'s)."""
    befores = [
        d.func for d in model.__pydantic_decorators__.model_validators.values() if d.info.mode == "before"
    ]
    si_fields, others = [], []
    for name in model.model_fields:
        try:
            si_fields.append((name, _candidates(name)))
        except ValueError:  # not an SI field
            others.append((name, [name + suffix for suffix in (*SI_SUFFIXES, *HUMAN_UNITS)]))
    out: dict[str, str] = {}
    for name, keys in (*si_fields, *others):
        for key in keys:
            if key in model.model_fields or key in out:
                continue
            if any(_rewrites(validate, key, name) for validate in befores):
                out[key] = name
    return out


def _rewrites(validate: Any, key: str, name: str) -> bool:
    """Does `validate` turn `key` into field `name`? Probed with a number, then a mapping of
    numbers (a quantity per dtype, as `peak_tflops`)."""
    for value in (1.0, {"bf16": 1.0}):
        try:
            got = validate({key: value})
        except Exception:  # noqa: BLE001 - a validator that refuses the probe does not rewrite it
            continue
        if isinstance(got, Mapping) and name in got and key not in got:
            return True
    return False


def _models(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """`model` and every model its fields hold (at any depth, inside unions and containers)."""
    seen: set[type[BaseModel]] = set()
    todo = [model]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        yield m
        for field in m.model_fields.values():
            stack = [field.annotation]
            while stack:
                t = stack.pop()
                if isinstance(t, type) and issubclass(t, BaseModel):
                    todo.append(t)
                stack += get_args(t)


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _in_unit(prop: dict[str, Any], scale: float) -> dict[str, Any]:
    """An SI field's schema for its human-unit key: numeric bounds divided by the unit's
    factor (1 MiB is `minimum: 1` of a `_mib` key, not 1048576), in `anyOf` branches too; no
    default (it is the SI field's, taken when no spelling is given)."""
    out = {k: v for k, v in prop.items() if k != "default"}
    for k in _BOUNDS:
        if isinstance(out.get(k), (int, float)) and not isinstance(out[k], bool):
            out[k] = out[k] / scale
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = [_in_unit(x, scale) if isinstance(x, dict) else x for x in out["anyOf"]]
    return out


def _add(schema: dict[str, Any], human: dict[str, str]) -> None:
    """Add the `human` keys (key -> SI field) to an object schema; a required SI field
    becomes required in one of its spellings."""
    props, required = schema.get("properties", {}), schema.get("required", [])
    by_si: dict[str, list[str]] = {}
    for key, si in human.items():
        if any(si.endswith(x) for x in SI_SUFFIXES):
            unit = next(u for suffix, u in HUMAN_UNITS.items() if key.endswith(suffix))
            prop = _in_unit(props.get(si, {}), unit.factor)
            prop.pop("title", None)
            said = f"{si} in human units (x {unit.factor:g} gives SI). "
            prop["description"] = said + prop.get("description", "")
        else:  # a number standing for a whole field (`repair_h`: a fixed repair time)
            said = f"shorthand for {si}: a number in {key[len(si) + 1 :]}"
            prop = {"type": "number", "minimum": 0, "description": said}
        props[key] = prop
        by_si.setdefault(si, []).append(key)
    either = []
    for si, keys in by_si.items():
        if si in required:
            required.remove(si)
            either.append({"anyOf": [{"required": [k]} for k in (si, *keys)]})
    if either:
        schema["allOf"] = [*schema.get("allOf", []), *either]


def with_human_units(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of `model`, every model in it accepting its human-unit spellings."""
    schema = model.model_json_schema()
    defs = schema.get("$defs", {})
    for m in _models(model):
        human = accepted_spellings(m)
        if not human:
            continue
        if m is model:
            _add(schema, human)
        qualified = f"{m.__module__.replace('.', '__')}__{m.__name__}"
        for name in (m.__name__, qualified):
            if name in defs and defs[name].get("title") == m.__name__:
                _add(defs[name], human)
    return schema
