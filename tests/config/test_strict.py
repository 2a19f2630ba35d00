"""The loader's limits and the strict schema base: duplicate keys, aliases, nesting, YAML
1.2 numbers, no silent coercion, finite and physical numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field

from simulator.config.base import Spec
from simulator.config.loader import MAX_VALUES, parse_text, validate
from simulator.errors import InputError, InputErrors
from simulator.units import physical_limit_error


class Link(Spec):
    bandwidth_gbps: float = Field(gt=0)
    latency_s: float = Field(0.0, ge=0)
    steps: int = 1
    enabled: bool = True
    note: str | int | None = None


def _first(text: str) -> str:
    with pytest.raises(InputError) as info:
        validate(Link, parse_text(text, Path("l.yaml")))
    err = info.value
    return str(err.errors[0] if isinstance(err, InputErrors) else err)


def test_duplicate_key_names_both_lines() -> None:
    with pytest.raises(InputError) as info:
        parse_text("a: 1\nb:\n  c: 2\n  c: 3\n", Path("d.yaml"))
    assert str(info.value) == "d.yaml:4: b.c: duplicate key (first given on line 3)"


def test_alias_bomb_is_refused_before_it_is_built() -> None:
    rows = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    rows += [f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * 10)}]" for k in range(1, 9)]
    # counted on the node graph (10**9 values, never built), so this returns at once
    with pytest.raises(InputError, match=f"more than {MAX_VALUES:,} values"):
        parse_text("\n".join(rows), Path("bomb.yaml"))


def test_deep_nesting_is_one_error() -> None:
    with pytest.raises(InputError, match="nested deeper than 64 levels"):
        parse_text("a: " + "[" * 5000 + "]" * 5000, Path("deep.yaml"))


def test_numbers_read_as_yaml_1_2_does() -> None:
    data = parse_text("a: 2.13e13\nb: 1e9\nc: 3\nd: .inf\n", Path("n.yaml")).data
    assert data == {"a": 2.13e13, "b": 1e9, "c": 3, "d": float("inf")}
    assert isinstance(data["c"], int)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("bandwidth_gbps: '400'", "l.yaml:1: bandwidth_gbps: expected a number, found the text '400'"),
        ("bandwidth_gbps: true", "l.yaml:1: bandwidth_gbps: expected a number, found the boolean true"),
        ("bandwidth_gbps: .inf", "l.yaml:1: bandwidth_gbps: input should be a finite number"),
        ("bandwidth_gbps: 400\nsteps: '3'", "l.yaml:2: steps: expected a number, found the text '3'"),
        ("bandwidth_gbps: 400\nsteps: true", "l.yaml:2: steps: expected a number, found the boolean true"),
        ("bandwidth_gbps: 400\nenabled: 1", "l.yaml:2: enabled: expected true or false, found 1"),
        (
            "bandwidth_gbps: 1e-300",
            "l.yaml:1: bandwidth_gbps: must be 0 or at least 8e-06 gbps (found 1e-300 gbps)",
        ),
        (
            "bandwidth_gbps: 400\nlatency_s: 1e13",
            "l.yaml:2: latency_s: must be at most 1 s (found 1e+13 s)",  # a latency: at most 1 s
        ),
    ],
)
def test_no_coercion_and_sane_physical_values(text: str, expected: str) -> None:
    assert _first(text) == expected


def test_text_is_fine_where_the_field_takes_text() -> None:
    spec = validate(Link, parse_text("bandwidth_gbps: 400\nnote: '3'", Path("l.yaml")))
    assert spec.note == "3" and spec.bandwidth_gbps == 400.0


def test_physical_limits_read_the_unit_from_the_name() -> None:
    assert physical_limit_error("nic_gbps", 400) is None
    # said in the unit the name spells (1e15 bytes/s is 8e6 Gbit/s), as the value was given
    assert physical_limit_error("nic_gbps", 1e9) == "must be at most 8e+06 gbps (found 1e+09 gbps)"
    assert physical_limit_error("mtbf_h", 2e9) == "must be at most 2.77778e+08 h (found 2e+09 h)"
    assert physical_limit_error("rate_per_s", 1e30) is None  # not a byte or FLOP rate
    assert physical_limit_error("flops", 1e26) == "must be at most 1e+25 flops (found 1e+26 flops)"


def test_a_latency_is_limited_to_one_second_in_any_unit() -> None:
    """A latency (of a link, a hop, a library call) above 1 s is refused, not simulated:
    1e17 us typed for 1 us was a step of ~760,000 years. Durations that are not latencies
    keep the general limit of 1e12 s."""
    assert physical_limit_error("link_latency_us", 1e17) == "must be at most 1e+06 us (found 1e+17 us)"
    assert physical_limit_error("hop_latency_ms", 1500) == "must be at most 1000 ms (found 1500 ms)"
    assert physical_limit_error("latency_s", 1.5) == "must be at most 1 s (found 1.5 s)"
    assert physical_limit_error("link_latency_us", 1e6) is None  # 1 s itself is allowed
    assert physical_limit_error("net_latency_us", 5.0) is None
    assert physical_limit_error("interval_s", 1e9) is None  # not a latency


def test_a_design_files_absurd_link_latency_names_its_line(tmp_path: Path) -> None:
    from simulator.network.topology import load_topology

    repo = Path(__file__).resolve().parents[2]
    text = (repo / "topologies" / "h100-rail-clos-2n.yaml").read_text()
    assert "link_latency_us: 1.0" in text
    text = text.replace("link_latency_us: 1.0", "link_latency_us: 1e17").replace(
        "file: gpus/", f"file: {repo}/topologies/gpus/"
    )
    path = tmp_path / "t.yaml"
    path.write_text(text)
    line = 1 + text.splitlines().index("link_latency_us: 1e17")
    with pytest.raises(InputError) as info:
        load_topology(path)
    assert str(info.value) == f"{path}:{line}: link_latency_us: must be at most 1e+06 us (found 1e+17 us)"
