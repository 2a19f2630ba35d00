"""Shared builders for run-level tests (stand-in oracles, small jobs)."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from simulator.faults.degradation import DegradationSpec
from simulator.faults.failure import FailureSpec
from simulator.faults.policy import PolicySpec
from simulator.faults.state import JobShape

FAILURES = TypeAdapter(list[FailureSpec])
POLICY = TypeAdapter(PolicySpec)
DEGRADATIONS = TypeAdapter(list[DegradationSpec])

#: restart parts summing to 600 s, all independent of job size
RESTART = {"detection_s": 60, "queue_s": 300, "init_base_s": 200, "init_per_node_s": 0}


def job(n_gpus: int = 64, gpus_per_replica: int = 8) -> JobShape:
    return JobShape(n_gpus=n_gpus, gpus_per_node=8, gpus_per_replica=gpus_per_replica)


def failures(*items: dict[str, Any]) -> list[Any]:
    return FAILURES.validate_python(list(items))


def policy(**kw: Any) -> Any:
    kw.setdefault("restart", RESTART)
    return POLICY.validate_python(kw)


def degradations(*items: dict[str, Any]) -> list[Any]:
    return DEGRADATIONS.validate_python(list(items))
