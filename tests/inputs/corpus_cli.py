"""Run one case of the bad-input corpus through the CLI, in process, the way a user would.

A case is a file (or folder) under `tests/inputs/corpus/<kind>/`. Files that a scenario
references (topologies, GPU specs, graph files, traces, workloads, calibration profiles)
are reached through small wrapper files written to a scratch folder; every other kind is
given to its command directly. Each case runs through `validate` (where the kind has it)
and through the command that would act on it, with an output folder that must not appear.
Paths in messages are shown relative to the corpus folder (the wrapper folder as `<tmp>`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from simulator.commands.app import app

CORPUS = Path(__file__).resolve().parent / "corpus"
BASE = CORPUS / "_base"


@dataclass
class Outcome:
    """What one command did with a case."""

    command: str
    exit_code: int
    stderr_lines: list[str]
    traceback: bool
    wrote: bool


def _wrap(kind: str, case: Path, tmp: Path) -> Path:
    """The file to hand the CLI: the case itself, or a wrapper that references it."""
    trace = BASE / "trace.yaml"
    topology = BASE / "topology.yaml"
    if kind in ("gpu",):
        text = (BASE / "topology.yaml").read_text().replace("file: ../_base/gpu.yaml", f"file: {case}")
        topology = tmp / "topology.yaml"
        topology.write_text(text)
    if kind == "graph":
        topology = tmp / "topology.yaml"
        topology.write_text(f"name: g\ngpu: {{file: {BASE / 'gpu.yaml'}}}\ngraph: {{file: {case}}}\n")
        trace = BASE / "trace-4.yaml"
    workload = case if kind in ("trace", "workload") else trace
    if kind == "topology":
        topology = case
    lines = [
        "name: wrapped",
        f"topology: {{file: {topology}}}",
        f"workload: {{file: {workload}}}",
        "run:",
        "  steps: 1",
    ]
    if kind == "profile":
        lines.append(f"calibration: [{{file: {case}}}]")
    scenario = tmp / "scenario.yaml"
    scenario.write_text("\n".join(lines) + "\n")
    return scenario


WRAPPED = ("topology", "gpu", "graph", "trace", "workload", "profile")


def commands(kind: str, target: Path, out: Path, output_flag: bool = True) -> list[list[str]]:
    """The command lines a case of `kind` runs through (`run` without `-o` when the case is
    about the scenario's own `run.output`)."""
    t, o = str(target), str(out)
    if kind in ("scenario", *WRAPPED):
        return [["validate", t], ["run", t, *(["-o", o] if output_flag else []), "--no-dashboard"]]
    if kind == "study":
        return [["validate", t], ["sweep", t, "-o", o, "--workers", "1"]]
    if kind == "compare":
        return [["validate", t], ["compare", t, "-o", o, "--serial"]]
    if kind == "log":
        return [["calibrate", t, "-o", str(out / "profile.yaml")]]
    if kind == "results":
        return [["dashboard", t, "-o", str(out / "d.html")], ["trace", t, "-o", str(out / "t.json")]]
    raise ValueError(f"unknown corpus kind {kind!r}")


def normalize(line: str, tmp: Path) -> str:
    """A message line with the corpus and scratch folders spelled relatively."""
    return line.replace(str(CORPUS) + os.sep, "").replace(str(tmp), "<tmp>")


def run_case(
    rel: str,
    tmp: Path,
    env: dict[str, str] | None = None,
    only: str | None = None,
    first_only: bool = False,
    output_flag: bool = True,
) -> list[Outcome]:
    """Run the corpus case `rel` (`kind/name.ext`) through its commands.

    Args:
        rel: the case path relative to the corpus folder.
        tmp: an empty scratch folder for wrappers and the (never written) output.
        env: environment variables for the run (e.g. a lower file size limit).
        only: run just this command (a valid file of another kind given to `run`).
        first_only: run just the first command (`validate` where the kind has it).
        output_flag: give `run` an output folder with `-o` (off for cases about `run.output`).
    """
    kind = rel.split("/", 1)[0]
    case = CORPUS / rel
    target = _wrap(kind, case, tmp) if kind in WRAPPED else case
    out = tmp / "out"
    runner = CliRunner()
    outcomes = []
    cwd = Path.cwd()
    os.chdir(CORPUS)
    try:
        todo = [a for a in commands(kind, target, out, output_flag) if only is None or a[0] == only]
        for args in todo[:1] if first_only else todo:
            r = runner.invoke(app, args, env=env)
            err = [normalize(x, tmp) for x in r.stderr.splitlines() if x.strip()]
            tb = "Traceback" in r.output or not (r.exception is None or isinstance(r.exception, SystemExit))
            outcomes.append(Outcome(args[0], r.exit_code, err, tb, out.exists()))
    finally:
        os.chdir(cwd)
    return outcomes
