"""A dependency cycle in a step trace names the line of its first op in the file."""

from __future__ import annotations

import pytest

from simulator.errors import InputError
from simulator.workload.trace import load_trace

GPUS = [f"n0.gpu{i}" for i in range(4)]
HEAD = "format: clustersim-step/1\nranks: 4\ngroups: {world: all}\nops:\n"  # ops start at line 5


def _load(tmp_path, body):
    p = tmp_path / "t.yaml"
    p.write_text(HEAD + body)
    with pytest.raises(InputError) as exc:
        load_trace(p, GPUS)
    return p, exc.value


def test_explicit_cycle_names_line_of_first_op(tmp_path):
    p, err = _load(
        tmp_path,
        (
            "  - {id: x, kind: compute, ranks: all, duration_ms: 1}\n"
            "  - {id: a, kind: compute, ranks: all, duration_ms: 1, deps: [b], stream: s1}\n"
            "  - {id: b, kind: compute, ranks: all, duration_ms: 1, deps: [a], stream: s2}\n"
        ),
    )
    assert "dependency cycle" in str(err)
    assert err.line == 6 and err.field == "ops.1"
    assert str(err).startswith(f"{p}:6: ops.1: dependency cycle")


def test_cycle_through_collective_and_stream_order(tmp_path):
    # the collective waits for c, which runs after the collective on the comm stream
    _, err = _load(
        tmp_path,
        (
            "  - {id: f, kind: compute, ranks: all, duration_ms: 1}\n"
            "  - {id: ar, kind: collective, collective: all_reduce, group: world, size_mib: 1, deps: [c]}\n"
            "  - {id: c, kind: checkpoint, ranks: all, size_mib: 1}\n"
        ),
    )
    assert "dependency cycle" in err.message
    assert err.line == 6 and err.field == "ops.1"


def test_cycle_through_send_recv_pair(tmp_path):
    # rank 1's recv waits for its own later op that waits for the transfer
    _, err = _load(
        tmp_path,
        (
            "  - {id: s, kind: send, ranks: [0], peer: 1, size_mib: 1}\n"
            "  - {id: r, kind: recv, ranks: [1], peer: 0, deps: [z]}\n"
            "  - {id: z, kind: compute, ranks: [1], duration_ms: 1, deps: [r]}\n"
        ),
    )
    assert "dependency cycle" in err.message
    assert err.line == 5 and err.field == "ops.0"
