"""Human units to SI (`simulator.units`): golden conversions, bit-identical factors, and one
quantity given in two spellings is always an error, wherever the schema reads it."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from simulator.errors import InputError
from simulator.faults.policy import PolicySpec
from simulator.network.hardware import GPUSpec
from simulator.network.topology import GraphFileSpec, _read_graph
from simulator.scenario.spec import ReliabilitySpec
from simulator.units import HUMAN_UNITS, UnitsError, spellings, split_si, to_si
from simulator.workload.layout import LayoutSpec
from simulator.workload.trace import TraceOpSpec

POLICY = TypeAdapter(PolicySpec)

#: (input key, value, SI field, expected SI value), each by the unit's definition
GOLDEN = [
    ("interval_us", 250, "interval_s", 0.00025),
    ("interval_ms", 20, "interval_s", 0.02),
    ("interval_min", 30, "interval_s", 1800.0),
    ("interval_h", 2, "interval_s", 7200.0),
    ("interval_days", 54, "interval_s", 4665600.0),
    ("bandwidth_gbps", 400, "bandwidth_bytes_per_s", 50e9),
    ("bandwidth_gbyte_per_s", 450, "bandwidth_bytes_per_s", 450e9),
    ("bandwidth_tbyte_per_s", 3.35, "bandwidth_bytes_per_s", 3.35e12),
    ("size_mb", 40, "size_bytes", 41943040.0),
    ("size_mib", 64, "size_bytes", 67108864.0),
    ("size_gib", 10, "size_bytes", 10737418240.0),
    ("size_gbyte", 80, "size_bytes", 80e9),
    ("peak_tflops", 989, "peak_flops_per_s", 989e12),
]

#: per human suffix, the expression the code used before `simulator.units` existed
OLD_FORMULAS = {
    "_us": lambda x: float(x) * 1e-6,
    "_ms": lambda x: float(x) * 1e-3,
    "_min": lambda x: float(x) * 60.0,
    "_h": lambda x: float(x) * 3600.0,
    "_days": lambda x: float(x) * 86400.0,
    "_gbps": lambda x: float(x) * 1e9 / 8,
    "_gbyte_per_s": lambda x: float(x) * 1e9,
    "_tbyte_per_s": lambda x: float(x) * 1e12,
    "_mb": lambda x: float(x) * (1024 * 1024),
    "_mib": lambda x: float(x) * 2**20,
    "_gib": lambda x: float(x) * 2**30,
    "_gbyte": lambda x: float(x) * 1e9,
    "_tflops": lambda x: float(x) * 1e12,
}


@pytest.mark.parametrize(("key", "value", "si", "expected"), GOLDEN)
def test_golden_conversions(key, value, si, expected):
    out = to_si({key: value, "other": "kept"}, si)
    assert out == {"other": "kept", si: pytest.approx(expected, rel=1e-15)}


def test_every_unit_has_a_golden_conversion_and_its_old_formula():
    suffixes = {max((s for s in HUMAN_UNITS if key.endswith(s)), key=len) for key, _, _, _ in GOLDEN}
    assert suffixes == set(HUMAN_UNITS) == set(OLD_FORMULAS)


@given(st.floats(min_value=1e-12, max_value=1e12, allow_nan=False))
def test_factors_are_bit_identical_to_the_old_expressions(x):
    for suffix, unit in HUMAN_UNITS.items():
        si = "q" + unit.si_suffix
        assert to_si({"q" + suffix: x}, si)[si] == OLD_FORMULAS[suffix](x), suffix


def test_lists_and_mappings_convert_element_by_element():
    assert to_si({"at_h": [1, 2.5]}, "at_s") == {"at_s": [3600.0, 9000.0]}
    assert to_si({"peak_tflops": {"bf16": 989, "fp8": 1979}}, "peak_flops_per_s") == {
        "peak_flops_per_s": {"bf16": 989e12, "fp8": 1979e12}
    }


def test_numbers_as_text_only_where_the_format_stores_text():
    """YAML gives numbers as numbers: a quoted one or a boolean is an input error. Graph
    files store attributes as text, so their reader allows it."""
    with pytest.raises(UnitsError, match="must be a number"):
        to_si({"latency_us": "1.5"}, "latency_s")
    with pytest.raises(UnitsError, match="must be a number"):
        to_si({"duration_h": True}, "duration_s")
    assert to_si({"latency_us": "1.5"}, "latency_s", allow_text=True) == {"latency_s": 1.5e-6}


def test_si_keys_other_keys_and_non_mappings_are_left_alone():
    data = {"interval_s": 10, "checkpoint_gbyte": 80}
    out = to_si(data, "interval_s", "size_bytes")
    assert out == data and out is not data
    assert to_si([1, 2], "interval_s") == [1, 2]
    assert to_si(None, "interval_s") is None


def test_spellings_and_human_bases():
    assert spellings("interval_s") == (
        "interval_s",
        "interval_us",
        "interval_ms",
        "interval_min",
        "interval_h",
        "interval_days",
    )
    assert spellings("hbm_capacity_bytes", "hbm") == (
        "hbm_capacity_bytes",
        "hbm_mb",
        "hbm_mib",
        "hbm_gib",
        "hbm_gbyte",
    )
    out = to_si(
        {"hbm_gbyte": 80, "hbm_tbyte_per_s": 3.35},
        "hbm_bandwidth_bytes_per_s",
        "hbm_capacity_bytes",
        human_bases={"hbm_bandwidth_bytes_per_s": "hbm", "hbm_capacity_bytes": "hbm"},
    )
    assert out == {"hbm_capacity_bytes": 80e9, "hbm_bandwidth_bytes_per_s": 3.35e12}


def test_split_si_takes_the_longest_si_suffix():
    assert split_si("bandwidth_bytes_per_s") == ("bandwidth", "_bytes_per_s")
    assert split_si("latency_s") == ("latency", "_s")
    with pytest.raises(ValueError, match="does not end in an SI suffix"):
        split_si("n_gpus")


@pytest.mark.parametrize(
    "data",
    [
        {"duration_h": 2, "duration_days": 1},
        {"duration_s": 60, "duration_min": 1},
        {"duration_ms": 1, "duration_us": 1},
    ],
)
def test_two_spellings_of_one_quantity_are_an_error(data):
    with pytest.raises(UnitsError) as exc:
        to_si(data, "duration_s")
    err = exc.value
    assert isinstance(err, InputError) and isinstance(err, ValueError)
    assert err.field == "duration_s"
    a, b = data
    assert str(err) == f"duration_s: {a} and {b} spell the same quantity; give only one of them"
    assert "\n" not in str(err)


def test_three_spellings_are_named_in_input_order():
    with pytest.raises(UnitsError, match="interval_h, interval_s and interval_min spell the same"):
        to_si({"interval_h": 1, "interval_s": 1, "interval_min": 1}, "interval_s")


@pytest.mark.parametrize("value", ["abc", True, None, [1, "x"], {"a": object()}])
def test_a_value_that_is_not_a_number_is_an_error_naming_its_key(value):
    with pytest.raises(UnitsError, match="must be a number") as exc:
        to_si({"mtbf_h": value}, "mtbf_s")
    assert exc.value.field == "mtbf_h"


def test_scenario_duration_in_hours_and_days_is_an_error_not_a_silent_choice():
    assert ReliabilitySpec.model_validate({"duration_days": 2}).duration_s == 172800.0
    assert ReliabilitySpec.model_validate({"duration_h": 5}).duration_s == 18000.0
    with pytest.raises(ValidationError, match="duration_days and duration_h spell the same quantity"):
        ReliabilitySpec.model_validate({"duration_days": 2, "duration_h": 5})


def test_policy_interval_in_two_units_is_an_error():
    assert POLICY.validate_python({"kind": "checkpoint_restart", "interval_min": 30}).interval_s == 1800.0
    with pytest.raises(ValidationError, match="interval_min and interval_s spell the same quantity"):
        POLICY.validate_python({"kind": "checkpoint_restart", "interval_min": 30, "interval_s": 1800})


def test_gpu_layout_and_trace_read_the_same_table():
    gpu = GPUSpec.model_validate(
        {"name": "g", "peak_tflops": {"bf16": 989}, "hbm_tbyte_per_s": 3.35, "hbm_gbyte": 80}
    )
    assert (gpu.peak_flops_per_s, gpu.hbm_bandwidth_bytes_per_s, gpu.hbm_capacity_bytes) == (
        {"bf16": 989e12},
        3.35e12,
        80e9,
    )
    with pytest.raises(ValidationError, match="hbm_gbyte and hbm_capacity_bytes spell the same quantity"):
        GPUSpec.model_validate(
            {
                "name": "g",
                "peak_tflops": {"bf16": 1},
                "hbm_tbyte_per_s": 1,
                "hbm_gbyte": 80,
                "hbm_capacity_bytes": 1,
            }
        )
    layout = LayoutSpec.model_validate({"global_batch_size": 8, "grad_bucket_mb": 40})
    assert layout.grad_bucket_bytes == 40 * 2**20
    op = TraceOpSpec.model_validate({"id": "a", "kind": "compute", "ranks": "all", "duration_ms": 20})
    assert op.duration == 20 * 1e-3
    with pytest.raises(ValidationError, match="duration_ms and duration_us spell the same quantity"):
        TraceOpSpec.model_validate(
            {"id": "a", "kind": "compute", "ranks": "all", "duration_ms": 20, "duration_us": 5}
        )


def test_graph_edge_with_two_bandwidth_spellings_names_file_and_edge(tmp_path):
    links = [{"source": "a", "target": "b", "bandwidth_gbps": 400, "bandwidth_bytes_per_s": 5e10}]
    data = {
        "directed": False,
        "multigraph": False,
        "graph": {},
        "nodes": [{"id": "a", "kind": "switch"}, {"id": "b", "kind": "switch"}],
        "links": links,
    }
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as exc:
        _read_graph(GraphFileSpec(file="g.json"), tmp_path / "topo.yaml")
    assert str(exc.value) == (
        f"{path}:1: links.0.bandwidth_bytes_per_s: bandwidth_gbps and bandwidth_bytes_per_s spell the "
        "same quantity; give only one of them"
    )


def test_gbps_factor_is_exactly_an_eighth_of_a_gigabyte():
    assert HUMAN_UNITS["_gbps"].factor == 125_000_000.0 and math.ldexp(1e9, -3) == 1e9 / 8
