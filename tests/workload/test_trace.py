"""Step trace format v1: loading and its errors."""

from __future__ import annotations

import pytest

from simulator.errors import InputError
from simulator.workload.trace import load_trace

GPUS = [f"n0.gpu{i}" for i in range(4)]
HEAD = "format: clustersim-step/1\nranks: 4\ngroups: {world: all}\nops:\n"


def _write(tmp_path, body):
    p = tmp_path / "t.yaml"
    p.write_text(HEAD + body)
    return p


def test_expands_per_rank_ops_and_resolves_deps(tmp_path):
    p = _write(
        tmp_path,
        """\
  - {id: fwd, kind: compute, ranks: all, duration_ms: 1}
  - {id: ar, kind: collective, collective: all_reduce, group: world, size_mib: 1, deps: [fwd]}
  - {id: opt, kind: compute, ranks: all, duration_ms: 1, deps: [ar]}
  - {id: s, kind: send, ranks: [0], peer: 1, size_mib: 2}
  - {id: r, kind: recv, ranks: [1], peer: 0}
  - {id: after, kind: compute, ranks: [1], duration_ms: 1, deps: [r]}
""",
    )
    prog = load_trace(p, GPUS)
    ops = {o.id: o for o in prog.ops}
    assert ops["ar"].deps == ("fwd@0", "fwd@1", "fwd@2", "fwd@3")
    assert ops["opt@2"].deps == ("ar",)
    assert ops["s@0"].kind == "p2p" and ops["s@0"].ranks == (0, 1) and ops["s@0"].size_bytes == 2 * 2**20
    assert ops["after@1"].deps == ("s@0",)


@pytest.mark.parametrize(
    "body, needle, line",
    [
        (
            "  - {id: a, kind: compute, ranks: all, duration_ms: 1, deps: [b]}\n"
            "  - {id: b, kind: compute, ranks: all, duration_ms: 1, deps: [a]}\n",
            "dependency cycle",
            None,
        ),
        ("  - {id: a, kind: compute, ranks: all, duration_ms: 1, deps: [nope]}\n", "unknown op 'nope'", 5),
        (
            "  - {id: a, kind: collective, collective: all_reduce, group: [0, 9], size_mib: 1}\n",
            "rank 9 does not exist",
            5,
        ),
        (
            "  - {id: a, kind: collective, collective: all_reduce, group: ghosts, size_mib: 1}\n",
            "unknown group 'ghosts'",
            5,
        ),
        ("  - {id: a, kind: compute, ranks: all, duration_ms: 1, colour: red}\n", "unknown key", 5),
        ("  - {id: s, kind: send, ranks: [0], peer: 1, size_mib: 1}\n", "matching recv", None),
        ("  - {id: a, kind: teleport, ranks: all}\n", "kind", 5),
    ],
)
def test_bad_traces_name_file_line_and_field(tmp_path, body, needle, line):
    p = _write(tmp_path, body)
    with pytest.raises(InputError) as exc:
        load_trace(p, GPUS)
    msg = str(exc.value)
    assert needle in msg and str(p) in msg
    if line is not None:
        assert f"{p}:{line}:" in msg


def test_more_ranks_than_gpus(tmp_path):
    p = _write(tmp_path, "  - {id: a, kind: compute, ranks: all, duration_ms: 1}\n")
    with pytest.raises(InputError, match="do not fit"):
        load_trace(p, GPUS[:2])


@pytest.mark.parametrize(
    "body, first_bad",
    [
        ("  - {id: a, kind: compute, ranks: {start: 0, stop: 10000000000000}, duration_ms: 1}\n", 4),
        ("  - {id: a, kind: compute, ranks: {start: 2, stop: 1000000000000, step: 3}, duration_ms: 1}\n", 5),
        ("  - {id: a, kind: compute, ranks: {start: 9, stop: 1000000000000}, duration_ms: 1}\n", 9),
    ],
)
def test_a_huge_rank_range_is_refused_before_it_is_listed(tmp_path, body, first_bad):
    """A range's ranks past the trace are found without listing it: a stop of 1e13 was a
    MemoryError (a list of 1e13 ranks) before the bounds were checked."""
    p = _write(tmp_path, body)
    with pytest.raises(InputError) as exc:
        load_trace(p, GPUS)
    assert str(exc.value) == f"{p}:5: ops.0.ranks: rank {first_bad} does not exist; this trace has ranks 0..3"


def test_a_huge_group_range_is_refused_before_it_is_listed(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(
        HEAD.replace("{world: all}", "{world: {start: 0, stop: 1000000000000}}")
        + "  - {id: a, kind: compute, ranks: all, duration_ms: 1}\n"
    )
    with pytest.raises(InputError) as exc:
        load_trace(p, GPUS)
    assert str(exc.value) == f"{p}:3: groups.world: rank 4 does not exist; this trace has ranks 0..3"
