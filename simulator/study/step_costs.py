"""Step-level answers of a study: constants, or a scenario whose step simulation gives them.

What is modelled: with constants, the healthy step time, its exposed-communication share,
the checkpoint write, snapshot and load times, the drain slowdown and the penalty per down
link make a `simulator.faults.state.ScalingOracle` (built by `simulator.study.sweep`); with
`from_scenario`, that scenario's step simulation answers every one of them, so constants
given beside it are refused rather than ignored.

What is simplified: the constants do not depend on the cluster state beyond what the
scaling oracle derives from them (fewer replicas, down links, a drain).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, model_validator

from simulator.config.base import Spec
from simulator.units import to_si


class StepCostsSpec(Spec):
    """Step-level answers as constants (a `ScalingOracle`), or from a scenario file."""

    model_config = ConfigDict(allow_inf_nan=False)

    from_scenario: str | None = Field(
        None, description="Scenario whose step simulation answers (path relative to this file)."
    )
    step_time_s: float | None = Field(None, gt=0, description="Healthy step time, s.")
    comm_fraction: float = Field(
        0.2, ge=0, lt=1, description="Share of the healthy step that is exposed communication."
    )
    checkpoint_write_s: float | None = Field(
        None, ge=0, description="Blocking checkpoint write to storage, s (YAML: checkpoint_write_min)."
    )
    checkpoint_snapshot_s: float = Field(10.0, ge=0, description="Snapshot to host memory, s.")
    checkpoint_load_storage_s: float | None = Field(
        None, ge=0, description="Checkpoint load from storage, s (default: the write time)."
    )
    checkpoint_load_peer_s: float = Field(20.0, ge=0, description="Checkpoint load from a peer host, s.")
    drain_slowdown: float = Field(0.05, ge=0, description="Step slowdown while a drain runs (0.05: 5%).")
    down_link_penalty: float = Field(0.05, ge=0, description="Communication slowdown per down link.")

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        return to_si(
            data,
            "checkpoint_write_s",
            "checkpoint_snapshot_s",
            "checkpoint_load_storage_s",
            "checkpoint_load_peer_s",
        )

    @model_validator(mode="after")
    def _one_source(self) -> StepCostsSpec:
        """Constants, or a scenario that answers every cost: not both (the constants would
        be ignored)."""
        if self.from_scenario is None:
            if self.step_time_s is None or self.checkpoint_write_s is None:
                raise ValueError("give from_scenario, or step_time_s and checkpoint_write_s")
            return self
        given = [name for name in type(self).model_fields if name in self.model_fields_set]
        beside = [_YAML_NAMES.get(name, name) for name in given if name != "from_scenario"]
        if beside:
            raise ValueError(
                f"give from_scenario or constants, not both: the scenario's step simulation "
                f"answers every step cost, so {', '.join(beside)} would be ignored"
            )
        return self


#: the YAML key a time field is usually given by (its unit converted to seconds)
_YAML_NAMES = {"checkpoint_write_s": "checkpoint_write_min"}
