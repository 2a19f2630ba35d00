"""The house rules of `simulator/`, checked on the code as it stands.

- imports point one way: no import cycle between any two modules (import-linter checks the
  layers between packages; this checks every module), and nothing imports the CLI;
- one idea per module: no module over 600 lines, no function over 80 lines;
- a user's clone has nothing beside it: no file of the project refers to a folder outside
  the repository.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "simulator"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


@pytest.fixture(scope="module")
def imports() -> nx.DiGraph:
    graph = grimp.build_graph("simulator")
    return nx.DiGraph(
        (module, imported)
        for module in graph.modules
        for imported in graph.find_modules_directly_imported_by(module)
    )


def test_no_import_cycle_between_modules(imports: nx.DiGraph) -> None:
    cycles = [sorted(c) for c in nx.strongly_connected_components(imports) if len(c) > 1]
    assert cycles == []


def test_nothing_imports_the_cli(imports: nx.DiGraph) -> None:
    into_cli = sorted(
        (a, b)
        for a, b in imports.edges
        if b.startswith("simulator.commands") and not a.startswith("simulator.commands")
    )
    assert into_cli == []


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_over_600_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_over_80_lines() -> None:
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = n
    assert long == {}


def test_nothing_refers_outside_the_repository() -> None:
    # the folder beside a developer's checkout; spelled in parts so this file does not match itself
    outside = "/".join(("..", "shared"))
    needles = (outside, "/".join(("shared", "calibration")))
    places = [ROOT / "Makefile", ROOT / "pyproject.toml", ROOT / "README.md", ROOT / ".ci" / "run"]
    for folder in ("simulator", "tests", "benchmarks", "docs", "scenarios", "topologies", "workloads"):
        places += [
            p
            for p in (ROOT / folder).rglob("*")
            if p.is_file() and p.suffix in {".py", ".md", ".yaml", ".toml"}
        ]
    offenders = [
        str(p.relative_to(ROOT)) for p in places if any(n in p.read_text(errors="replace") for n in needles)
    ]
    assert offenders == []
