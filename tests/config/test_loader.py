"""The YAML loader: every key keeps its line, and validation errors read
`file:line: field.path: message` with exit status 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from simulator.config import loader
from simulator.config.base import Spec
from simulator.config.loader import load, parse_text, read_document, validate
from simulator.errors import InputError, InputErrors

TEXT = """\
name: demo
link:
  bandwidth_gbps: 400
  latency_us: 1.5
items:
  - {id: a, size: 1}
  - id: b
    size: 2
"""


class LinkSpec(Spec):
    bandwidth_gbps: float = Field(gt=0)
    latency_us: float = Field(ge=0)


class ItemSpec(Spec):
    id: str
    size: int


class DemoSpec(Spec):
    name: str
    link: LinkSpec
    items: list[ItemSpec]


def test_every_key_keeps_its_line() -> None:
    doc = parse_text(TEXT, Path("demo.yaml"))
    assert doc.line_of(("name",)) == 1
    assert doc.line_of(("link",)) == 2
    assert doc.line_of(("link", "latency_us")) == 4
    assert doc.line_of(("items", 0)) == 6
    assert doc.line_of(("items", 1, "size")) == 8
    # a path the file does not spell out falls back to its deepest spelled-out prefix
    assert doc.line_of(("link", "nonexistent", 3)) == 2


def test_valid_document_validates() -> None:
    spec = validate(DemoSpec, parse_text(TEXT, Path("demo.yaml")))
    assert spec.link.latency_us == 1.5 and [i.id for i in spec.items] == ["a", "b"]


def test_errors_name_file_line_and_field_path() -> None:
    bad = TEXT.replace("latency_us: 1.5", "latency_us: -1").replace("size: 2", "size: 2\n    colour: red")
    with pytest.raises(InputErrors) as info:
        validate(DemoSpec, parse_text(bad, Path("demo.yaml")))
    lines = sorted(info.value.lines())
    assert lines == [
        "demo.yaml:4: link.latency_us: input should be greater than or equal to 0",
        "demo.yaml:9: items.1.colour: unknown key (not in the schema; check its spelling)",
    ]
    assert info.value.exit_code == 2


def test_a_missing_key_is_named_at_its_parent() -> None:
    with pytest.raises(InputErrors) as info:
        validate(DemoSpec, parse_text(TEXT.replace("    size: 2\n", ""), Path("demo.yaml")))
    assert info.value.lines() == ["demo.yaml:7: items.1.size: required field is missing"]


@pytest.mark.parametrize(
    ("text", "first_line"),
    [
        ("name: [unclosed\n", "demo.yaml:2: malformed YAML"),
        ("a: 1\n  b: 2\n", "demo.yaml:2: malformed YAML"),
    ],
)
def test_malformed_yaml_is_one_line_with_its_line(text: str, first_line: str) -> None:
    with pytest.raises(InputError) as info:
        parse_text(text, Path("demo.yaml"))
    assert str(info.value).startswith(first_line)


def test_missing_empty_and_folder_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        read_document(tmp_path / "absent.yaml")
    (tmp_path / "empty.yaml").write_text("")
    with pytest.raises(InputError) as info:
        read_document(tmp_path / "empty.yaml")
    assert str(info.value) == f"{tmp_path / 'empty.yaml'}:1: file is empty"
    with pytest.raises(InputError, match="expected a file, found a folder"):
        load(DemoSpec, tmp_path)


def test_a_named_file_in_a_symlink_loop_says_so(tmp_path: Path) -> None:
    """A file named inside an input that is a link in a loop was 'not found'
    (`Path.exists` swallows ELOOP); the top-level file already said why."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    why = loader.not_a_file(tmp_path / "a")
    assert why is not None and "symbolic links" in why and "not found" not in why
    assert loader.not_a_file(tmp_path / "absent.yaml") == f"file {str(tmp_path / 'absent.yaml')!r} not found"


def _read(parse: Callable[[str], Any], text: str) -> Any:
    try:
        doc = parse(text)
    except InputError as exc:
        return str(exc)
    return doc.data, doc.lines


def test_libyaml_parser_reads_what_the_python_parser_reads() -> None:
    """`parse_text` scans and parses with libyaml when it can; data, the line of every key
    and every error message are those of the pure-Python loader (catalog files, and one
    file of each name of the input corpus: malformed, binary, deep, aliased, ...)."""
    if loader._CParser is None:
        pytest.skip("PyYAML without libyaml")
    root = Path(__file__).resolve().parents[2]
    files = [root / "topologies" / "prices.yaml", *sorted((root / "scenarios").glob("*.yaml"))[::3]]
    seen: set[str] = set()
    for p in sorted((root / "tests" / "inputs" / "corpus").rglob("*.yaml")):
        if p.name not in seen:
            files.append(p)
            seen.add(p.name)
    texts = [(p.read_text(errors="replace"), p) for p in files]
    extra = [
        "a: &x [1, *x]\n",
        "- " * 80 + "1\n",
        "k: 1\nk: 2\n",
        "\ufeffa: 1\n",
        "a: 1e9\nb: .5\n",
        "a: 'x\n",
    ]
    texts += [(t, Path("x.yaml")) for t in extra]
    for text, name in texts:
        python = _read(lambda t, name=name: loader._parse(loader._LineLoader, t, name), text)
        assert _read(lambda t, name=name: parse_text(t, name), text) == python, name
    assert len(texts) > 100
