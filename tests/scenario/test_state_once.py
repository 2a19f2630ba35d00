"""A straggling GPU or a link down or degraded is listed once per list: a second entry
was accepted and silently won over the first. A link is undirected (its factor applies to
both directions), so [a, b] and [b, a] are one link."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app

ROOT = Path(__file__).resolve().parents[2]
HEAD = f"""\
name: twice
topology: {{file: {ROOT}/topologies/h100-rail-clos-2n.yaml}}
workload: {{file: {ROOT}/workloads/traces/dp16-gpt1p3b-step.yaml}}
state:
"""


@pytest.mark.parametrize(
    ("block", "where"),
    [
        (
            "  stragglers:\n    - {gpu: n1.gpu2, slowdown: 1.3}\n    - {gpu: n1.gpu2, slowdown: 2}\n",
            "7: state.stragglers.1: GPU 'n1.gpu2' is listed twice (first as entry 0)",
        ),
        (
            "  degraded_links:\n    - {link: [n0.nic3, leaf3.0], factor: 0.5}\n"
            "    - {link: [n0.gpu0, n0.nvsw], factor: 0.5}\n    - {link: [leaf3.0, n0.nic3], factor: 0.9}\n",
            "8: state.degraded_links.2: the link 'leaf3.0'-'n0.nic3' is listed twice (first as entry 0)",
        ),
        (
            "  down_links:\n    - [n0.nic3, leaf3.0]\n    - [n0.nic3, leaf3.0]\n",
            "7: state.down_links.1: the link 'n0.nic3'-'leaf3.0' is listed twice (first as entry 0)",
        ),
        (  # down and degraded at once: the factor said it ran, slower
            "  down_links: [[n0.nic2, leaf2.0], [n0.nic3, leaf3.0]]\n"
            "  degraded_links:\n    - {link: [leaf3.0, n0.nic3], factor: 0.5}\n",
            "7: state.degraded_links.0: the link 'leaf3.0'-'n0.nic3' is down (down_links.1); a down "
            "link cannot also run degraded",
        ),
    ],
)
def test_an_entry_given_twice_is_one_line_at_the_second(tmp_path: Path, block: str, where: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + block)
    for command in (["validate", str(path)], ["run", str(path), "-o", str(tmp_path / "out")]):
        r = CliRunner().invoke(app, command)
        assert r.exit_code == 2 and r.stderr.splitlines() == [f"error: {path}:{where}"], r.output
    assert not (tmp_path / "out").exists()


def test_two_different_links_are_two_entries(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "  down_links: [[n0.nic3, leaf3.0], [n0.nic2, leaf2.0]]\n")
    r = CliRunner().invoke(app, ["validate", str(path)])
    assert r.exit_code == 0, r.output
