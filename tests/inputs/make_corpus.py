"""Generate the bad-input corpus under tests/inputs/corpus/ and its manifest expected.yaml.

Every case is a valid base file (`corpus/_base/`) with one mistake: a mechanical mutation
of one value or key (text for a number, a boolean, .inf, .nan, a negative, 1e400, a list, a
mapping, a duplicated or misspelt key) or a hand-written semantic one (a self-loop in a
graph, a send/recv deadlock in a trace, a study axis named twice, ...). Each case carries
the words its first error line must contain (`needle`) where the mistake is semantic.

`python tests/inputs/make_corpus.py` rewrites the corpus and records, for each case, the
exit code and the one stderr line the CLI gives (tests/inputs/test_corpus.py then holds the
CLI to them). A mutation the CLI accepts is listed on stdout and left out of the corpus:
it is either a bug to fix or a mutation that is not a mistake.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from tests.inputs.corpus_bases import BASES, GRAPH_JSON, GRAPHML, SEMANTIC, write_bases  # noqa: E402
from tests.inputs.corpus_cli import BASE, CORPUS, run_case  # noqa: E402

MANIFEST = HERE / "expected.yaml"
#: Cases that only one command rejects: a valid file of another kind given to `run`/`sweep`.
ONLY = {
    "scenario/is-a-compare-file": {"only": "run"},
    "scenario/is-a-study-file": {"only": "run"},
    "study/is-a-scenario": {"only": "sweep"},
    "scenario/output-a-file": {"no_o": True},
    "scenario/output-under-a-file": {"no_o": True},
    "scenario/output-dev-null": {"no_o": True},
}
#: Mechanical mutations kept per kind (every k-th, so each key of the base is hit).
MAX_GENERIC_PER_KIND = 40

_LEAF = re.compile(r"^(\s*(?:- )?)([A-Za-z_][A-Za-z0-9_]*): (.+?)\s*$")


def _kind_of(value: str) -> str:
    try:
        float(value)
        return "number"
    except ValueError:
        pass
    try:
        v = yaml.safe_load(value)
    except yaml.YAMLError:
        return "other"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str) and not value.startswith(("{", "[", "|", ">", "&", "*")):
        return "text"
    return "other"


def _value_mutations(value: str, kind: str) -> Iterator[tuple[str, str]]:
    if kind == "number":
        yield "text", f'"{value}"'
        yield "bool", "true"
        yield "inf", ".inf"
        yield "nan", ".nan"
        if not value.startswith("-") and value not in ("0", "0.0"):
            yield "neg", f"-{value}"
        yield "huge", "1e400"
    elif kind == "text":
        yield "number", "12"
        yield "list", f"[{value}]"
    elif kind == "bool":
        yield "text", '"yes"'
        yield "number", "2"


def leaf_mutations(text: str) -> Iterator[tuple[str, str]]:
    """(case suffix, mutated text) for every scalar leaf of a block-style YAML file."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _LEAF.match(line)
        if not m or line.lstrip().startswith("#"):
            continue
        indent, key, value = m.groups()
        kind = _kind_of(value)
        for tag, new in _value_mutations(value, kind):
            out = [*lines[:i], f"{indent}{key}: {new}", *lines[i + 1 :]]
            yield f"{key}-{tag}-l{i + 1}", "\n".join(out) + "\n"
        if kind != "other":
            pad = " " * len(indent)
            dup = [*lines[: i + 1], f"{pad}{key}: {value}", *lines[i + 1 :]]
            yield f"{key}-dup-l{i + 1}", "\n".join(dup) + "\n"
            typo = [*lines[:i], f"{indent}{key}x: {value}", *lines[i + 1 :]]
            yield f"{key}-typo-l{i + 1}", "\n".join(typo) + "\n"


def yaml_shape_mutations(text: str) -> Iterator[tuple[str, str]]:
    """Whole-file mistakes any YAML input can have."""
    yield "empty", ""
    yield "comment-only", "# nothing here\n"
    yield "a-list", "- 1\n- 2\n"
    yield "a-scalar", "42\n"
    yield "malformed", text + "oops: [unclosed\n"
    yield "tab-indent", text.replace("\n  ", "\n\t", 1)
    yield "deep-nesting", "a: " + "[" * 200 + "]" * 200 + "\n"
    yield "alias-bomb", _alias_bomb()
    yield "binary", "\x00\x01\x02"
    yield "not-utf8", "name: caf\udce9\n"


def _alias_bomb() -> str:
    out = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for k in range(1, 9):
        refs = ", ".join([f"*a{k - 1}"] * 10)
        out.append(f"a{k}: &a{k} [{refs}]")
    return "\n".join(out) + "\n"


def json_mutations() -> Iterator[tuple[str, str]]:
    """Mutations of the node-link JSON graph: one per node and edge attribute, and shapes."""
    base = json.loads(GRAPH_JSON)

    def dump(d: dict) -> str:
        if not isinstance(d.get("nodes"), list) or not isinstance(d.get("links"), list):
            return json.dumps(d, indent=1) + "\n"
        directed, multi = json.dumps(d.get("directed", False)), json.dumps(d.get("multigraph", False))
        lines = [f'{{"directed": {directed}, "multigraph": {multi}, "graph": {{}},']
        lines.append(' "nodes": [')
        lines.append(",\n".join("  " + json.dumps(n) for n in d["nodes"]) + "],")
        lines.append(' "links": [')
        lines.append(",\n".join("  " + json.dumps(e) for e in d["links"]) + "]}")
        return "\n".join(lines) + "\n"

    def edit(fn: Callable[[dict], None]) -> str:
        d = json.loads(json.dumps(base))
        fn(d)
        return dump(d)

    values = {"text": "400", "bool": True, "null": None, "neg": -1, "zero": 0, "list": [1], "tiny": 1e-300}
    for i in range(2):
        for attr in ("bandwidth_gbps", "latency_us"):
            for tag, v in values.items():
                if attr == "latency_us" and tag in ("zero", "tiny"):
                    continue

                def put(d: dict, i: int = i, attr: str = attr, v: object = v) -> None:
                    d["links"][i][attr] = v

                yield f"link{i}-{attr}-{tag}", edit(put)
        yield f"link{i}-medium-bad", edit(lambda d, i=i: d["links"][i].update(medium="carrier-pigeon"))
        yield f"link{i}-no-bandwidth", edit(lambda d, i=i: d["links"][i].pop("bandwidth_gbps"))
        yield f"link{i}-self-loop", edit(lambda d, i=i: d["links"][i].update(target=d["links"][i]["source"]))
        yield f"link{i}-unknown-end", edit(lambda d, i=i: d["links"][i].update(target="nowhere"))
        yield f"link{i}-parallel", edit(lambda d, i=i: d["links"].append(dict(d["links"][i])))
        yield (
            f"link{i}-reversed-parallel",
            edit(
                lambda d, i=i: d["links"].append(
                    dict(d["links"][i], source=d["links"][i]["target"], target=d["links"][i]["source"])
                )
            ),
        )
        yield f"link{i}-two-spellings", edit(lambda d, i=i: d["links"][i].update(bandwidth_bytes_per_s=5e10))
    for i, n in enumerate(base["nodes"][:2] + base["nodes"][-1:]):
        i = base["nodes"].index(n)
        yield f"node{i}-kind-bad", edit(lambda d, i=i: d["nodes"][i].update(kind="toaster"))
        yield f"node{i}-no-kind", edit(lambda d, i=i: d["nodes"][i].pop("kind"))
        yield f"node{i}-duplicate", edit(lambda d, i=i: d["nodes"].append(dict(d["nodes"][i])))
        if n["kind"] == "gpu":
            yield f"node{i}-no-node", edit(lambda d, i=i: d["nodes"][i].pop("node"))
            yield f"node{i}-no-local-rank", edit(lambda d, i=i: d["nodes"][i].pop("local_rank"))
            yield f"node{i}-local-rank-text", edit(lambda d, i=i: d["nodes"][i].update(local_rank="one"))
            yield f"node{i}-local-rank-neg", edit(lambda d, i=i: d["nodes"][i].update(local_rank=-1))
            yield f"node{i}-local-rank-frac", edit(lambda d, i=i: d["nodes"][i].update(local_rank=0.5))
            yield (
                f"node{i}-local-rank-dup",
                edit(lambda d, i=i: d["nodes"][i].update(local_rank=1 - d["nodes"][i]["local_rank"])),
            )
    yield "directed", edit(lambda d: d.update(directed=True))
    yield "multigraph", edit(lambda d: d.update(multigraph=True))
    yield "no-nodes-key", edit(lambda d: d.pop("nodes"))
    yield "nodes-not-list", edit(lambda d: d.update(nodes={"a": 1}))
    yield "node-without-id", edit(lambda d: d["nodes"][0].pop("id"))
    yield "edge-without-target", edit(lambda d: d["links"][0].pop("target"))
    yield "no-gpus", edit(lambda d: [n.update(kind="host") for n in d["nodes"] if n["kind"] == "gpu"])
    yield "disconnected", edit(lambda d: d["links"].pop())
    yield "malformed", dump(base)[:-3]
    yield "infinity-literal", dump(base).replace('"bandwidth_gbps": 400', '"bandwidth_gbps": Infinity', 1)
    yield "nan-literal", dump(base).replace('"latency_us": 1.0', '"latency_us": NaN', 1)
    yield "a-list", "[1, 2]\n"
    yield "empty", ""
    yield "deep", '{"a": ' + "[" * 3000 + "]" * 3000 + "}\n"


def graphml_mutations() -> Iterator[tuple[str, str]]:
    """Mutations of the GraphML graph, by text edits of the base file."""
    base = GRAPHML
    edits = {
        "directed": ('edgedefault="undirected"', 'edgedefault="directed"'),
        "edge-directed": ('<edge source="g0" target="sw">', '<edge source="g0" target="sw" directed="true">'),
        "self-loop": ('<edge source="g0" target="sw">', '<edge source="g0" target="g0">'),
        "unknown-end": ('<edge source="g0" target="sw">', '<edge source="g0" target="nowhere">'),
        "bandwidth-text": ('<data key="bw">400</data>', '<data key="bw">fast</data>'),
        "bandwidth-inf": ('<data key="bw">400</data>', '<data key="bw">inf</data>'),
        "bandwidth-nan": ('<data key="bw">400</data>', '<data key="bw">nan</data>'),
        "bandwidth-neg": ('<data key="bw">400</data>', '<data key="bw">-400</data>'),
        "bandwidth-tiny": ('<data key="bw">400</data>', '<data key="bw">1e-300</data>'),
        "bandwidth-huge": ('<data key="bw">400</data>', '<data key="bw">1e300</data>'),
        "latency-nan": ('<data key="lat">1.0</data>', '<data key="lat">NaN</data>'),
        "latency-neg": ('<data key="lat">1.0</data>', '<data key="lat">-1.0</data>'),
        "latency-inf": ('<data key="lat">1.0</data>', '<data key="lat">INF</data>'),
        "medium-bad": ('<data key="medium">ib</data>', '<data key="medium">smoke</data>'),
        "no-local-rank": ('<data key="local_rank">0</data>', ""),
        "no-node": ('<data key="node">s0</data>', ""),
        "local-rank-text": ('<data key="local_rank">0</data>', '<data key="local_rank">zero</data>'),
        "local-rank-dup": ('<data key="local_rank">1</data>', '<data key="local_rank">0</data>'),
        "kind-bad": ('<data key="kind">switch</data>', '<data key="kind">router</data>'),
        "duplicate-node": ('<node id="g1">', '<node id="g0">'),
        "attr-twice": ('<data key="bw">400</data>', '<data key="bw">400</data><data key="bw">200</data>'),
        "malformed": ("</graphml>", ""),
        "doctype": ('<?xml version="1.0"?>', '<?xml version="1.0"?><!DOCTYPE graphml [<!ENTITY a "b">]>'),
        "no-graph": ("<graph", "<grph"),
    }
    for name, (old, new) in edits.items():
        if old not in base:
            raise KeyError(f"graphml edit {name}: {old!r} not in the base")
        yield name, base.replace(old, new, 1)
    yield "parallel", base.replace("</graph>", _GRAPHML_EXTRA_EDGE + "</graph>", 1)
    yield "not-xml", "this is not xml\n"


_GRAPHML_EXTRA_EDGE = (
    '<edge source="sw" target="g0"><data key="bw">400</data><data key="lat">1.0</data>'
    '<data key="medium">ib</data></edge>\n'
)


def generate() -> dict[str, dict]:
    """Write every case file; return {case path: {needle, env}}."""
    cases: dict[str, dict] = {}

    def add(
        kind: str, name: str, text: str, ext: str = "yaml", needle: str | None = None, **extra: object
    ) -> None:
        rel = f"{kind}/{name}.{ext}"
        path = CORPUS / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        cases[rel] = {"needle": needle, **extra}

    for kind, (base_file, ext) in BASES.items():
        text = (BASE / base_file).read_text()
        generic = list(leaf_mutations(text))
        step = max(1, -(-len(generic) // MAX_GENERIC_PER_KIND))
        for name, mutated in generic[::step]:
            add(kind, name, mutated, ext)
        for name, mutated in yaml_shape_mutations(text):
            add(kind, name, mutated, ext)
    for name, text in json_mutations():
        add("graph", f"json-{name}", text, "json")
    for name, text in graphml_mutations():
        add("graph", f"graphml-{name}", text, "graphml")
    for kind, name, text, needle in SEMANTIC():
        ext = "txt" if kind == "log" else "yaml"
        add(kind, name, text, ext, needle, **ONLY.get(f"{kind}/{name}", {}))
    add("scenario", "too-big", (BASE / "scenario.yaml").read_text(), env={"CLUSTERSIM_MAX_FILE_MB": "0.0001"})
    _results_cases(add, cases)
    return cases


def _results_cases(add: Callable[..., None], cases: dict[str, dict]) -> None:
    """Results folders for `dashboard` and `trace`: the base run with one part broken."""
    base = BASE / "results"
    frames = sorted(p.name for p in base.iterdir() if p.name != "scenario.resolved.yaml")

    def folder(name: str, edit: Callable[[Path], None], needle: str | None = None) -> None:
        rel = f"results/{name}"
        dst = CORPUS / rel
        shutil.copytree(base, dst)
        edit(dst)
        # trace reads no topology.json, so only dashboard sees a damaged one
        cases[rel] = {"needle": needle, **({"only": "dashboard"} if "topology" in name else {})}

    for f in frames:
        if f != "topology.json":  # optional: a run folder without it draws no topology
            folder(f"missing-{f.split('.')[0]}", lambda d, f=f: (d / f).unlink())
        folder(f"garbage-{f.split('.')[0]}", lambda d, f=f: (d / f).write_bytes(b"\x00garbage\xff"))
        folder(f"empty-{f.split('.')[0]}", lambda d, f=f: (d / f).write_bytes(b""))
        folder(
            f"truncated-{f.split('.')[0]}", lambda d, f=f: (d / f).write_bytes((base / f).read_bytes()[:40])
        )
    folder("summary-a-list", lambda d: (d / "summary.json").write_text("[1, 2]"))
    folder("empty-folder", lambda d: [p.unlink() for p in d.iterdir()])


def record(cases: dict[str, dict]) -> tuple[list[dict], list[str]]:
    """Run every case; the manifest entries, and the cases the CLI accepted."""
    entries, accepted = [], []
    for rel, info in sorted(cases.items()):
        with tempfile.TemporaryDirectory() as tmp:
            outcomes = run_case(
                rel, Path(tmp), info.get("env"), info.get("only"), output_flag=not info.get("no_o")
            )
        if all(o.exit_code == 0 for o in outcomes):
            accepted.append(rel)
            continue
        first = outcomes[0]
        line = first.stderr_lines[0] if first.stderr_lines else ""
        entry = {"case": rel, "exit": first.exit_code, "line": line}
        for key in ("env", "only", "no_o"):
            if info.get(key):
                entry[key] = info[key]
        if info.get("needle") and info["needle"] not in line:
            entry["needle_missing"] = info["needle"]
        entries.append(entry)
    return entries, accepted


def main() -> None:
    write_bases(BASE)
    for p in CORPUS.iterdir():
        if p.name != "_base":
            shutil.rmtree(p)
    cases = generate()
    entries, accepted = record(cases)
    for rel in accepted:
        path = CORPUS / rel
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    MANIFEST.write_text(
        "# Generated by tests/inputs/make_corpus.py: each bad input, its exit code and first stderr line.\n"
        + yaml.safe_dump(entries, sort_keys=False, width=1000, allow_unicode=True)
    )
    kinds: dict[str, int] = {}
    for e in entries:
        kinds[e["case"].split("/")[0]] = kinds.get(e["case"].split("/")[0], 0) + 1
    print(f"{len(entries)} cases: {kinds}")
    for rel in accepted:
        print("accepted (left out):", rel)
    for e in entries:
        if "needle_missing" in e or e["exit"] not in (2, 3):
            print("check:", e)


if __name__ == "__main__":
    main()
