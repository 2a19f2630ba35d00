"""The run level's view of a scenario's job, and the fault inputs checked against it.

`job_shape` reads the job's footprint from the prepared run: GPUs of the step program,
GPUs per server, data-parallel replicas, NICs, leaf switches and storage nodes of the
topology. `check_run_level` reports, against the scenario file, every failure,
degradation or policy setting that does not fit that job and the run's length (see
`simulator.faults.checks`), so `validate` rejects what `run` would.

What is simplified: a replica is `GPUs / dp` contiguous GPUs; when that does not tile the
servers the whole job is one replica.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from simulator.errors import InputErrors, SimulationError
from simulator.faults.checks import job_problems
from simulator.faults.preset import PRESETS
from simulator.faults.state import JobShape
from simulator.scenario.spec import ReliabilitySpec


def job_shape(prep: Any, settings: ReliabilitySpec) -> JobShape:
    """The run level's view of the job: GPUs, hosts, replicas and component counts.

    Raises:
        SimulationError: the job does not fit the run level (e.g. servers of unequal size).
    """
    g = prep.cluster.graph
    gpus = prep.program.rank_gpus
    n = len(gpus)
    servers: dict[str, int] = {}
    for x in gpus:
        servers[str(g.nodes[x].get("node", x))] = servers.get(str(g.nodes[x].get("node", x)), 0) + 1
    gpn = max(servers.values())
    dp = int(prep.program.meta.get("dp", 1) or 1)
    per_replica = n // dp if n % dp == 0 else n
    if per_replica % gpn and gpn % per_replica:
        per_replica = n
    leaves = [s for s, d in g.nodes(data=True) if d.get("kind") == "switch" and int(d.get("tier", 1)) == 1]
    nics = sum(1 for x in gpus for y in g.neighbors(x) if g.nodes[y].get("kind") == "nic")
    try:
        return JobShape(
            n_gpus=n,
            gpus_per_node=gpn,
            gpus_per_replica=per_replica,
            nics=nics or None,
            switches=len(leaves) or None,
            gpus_per_switch=settings.gpus_per_switch or max(1, len(prep.cluster.gpus) // max(1, len(leaves))),
            storage=max(1, len(prep.cluster.storage)),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SimulationError(f"the job does not fit the run level: {first.get('msg', exc)}") from None


def check_run_level(prep: Any) -> None:
    """Check a run-level scenario's failures, degradations and policy against its job.

    Raises:
        InputErrors: one per problem, each `file:line: field.path: message`.
    """
    scenario = prep.scenario
    sc = scenario.spec
    if not sc.run_level:
        return
    rel = sc.reliability
    problems = job_problems(
        sc.failures,
        sc.degradations,
        sc.policy,
        job_shape(prep, rel),
        rel.duration_s,
        rel.mtbf_scale,
        preset=PRESETS[sc.preset]() if sc.preset else (),
    )
    if problems:
        raise InputErrors([scenario.error(message, loc) for loc, message in problems])
