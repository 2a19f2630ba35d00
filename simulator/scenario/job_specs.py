"""The jobs of a scenario with several jobs on one cluster: each job's spec and placement,
jobs drawn at random, the cluster scheduler's settings, and the names jobs and scenarios
take (each a results folder's name).

Validation happens here; nothing runs (`simulator.scenario.multi`, `simulator.jobs`).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import ConfigDict, Field, field_validator, model_validator

from simulator.config.base import MAX_SEED, FileRef, Spec
from simulator.errors import FieldError
from simulator.units import to_si

#: Longest name in UTF-8 bytes: a results folder name with room for the lock and temporary
#: names beside it (`.NAME.probe.XXXXXXXX`) within a file system's 255-byte limit.
MAX_NAME_BYTES = 128


def check_name(name: str) -> str:
    """A name used as a folder name: one path component, no folders, nothing hidden.

    Raises:
        ValueError: the name is empty, `.` or `..`, holds a `/`, a backslash or a control
            character, starts with a dot, or is longer than a folder name can be.
    """
    if not name or name in (".", ".."):
        raise ValueError(f"must be a name, found {name!r}")
    if any(c in name for c in "/\\:") or any(ord(c) < 32 for c in name):
        raise ValueError(f"must be one folder name (no '/', '\\', ':' or control characters), found {name!r}")
    if name.startswith(".") or name.startswith("~"):
        raise ValueError(f"must not start with '.' or '~', found {name!r}")
    if len(name) > 128:
        raise ValueError(f"must be at most 128 characters, found {len(name)}")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"must be UTF-8 text (no unpaired surrogate), found {name!r}") from None
    if size > MAX_NAME_BYTES:
        raise ValueError(f"must be at most {MAX_NAME_BYTES} bytes in UTF-8 (a folder name), found {size}")
    return name


class PlacementSpec(Spec):
    """Where a job's GPUs go (`simulator.jobs.placement`)."""

    policy: Literal["packed", "leaf_aligned", "spread", "random", "explicit"] = Field(
        "packed",
        description="packed (fill servers, then leaves), leaf_aligned (inside one leaf group if it "
        "fits), spread (round-robin over leaf groups), random (servers in a seeded order), "
        "explicit (the GPUs listed in `gpus`).",
    )
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Seed of the random policy.")
    gpus: list[str] = Field(default_factory=list, description="explicit: the GPU of every rank, in order.")

    @model_validator(mode="after")
    def _explicit_needs_gpus(self) -> PlacementSpec:
        if (self.policy == "explicit") != bool(self.gpus):
            raise ValueError("the explicit policy takes a list of GPUs in `gpus`, and only it does")
        if len(set(self.gpus)) != len(self.gpus):
            dup = next(x for x in self.gpus if self.gpus.count(x) > 1)
            raise ValueError(f"GPU {dup!r} is listed twice")
        return self


def _placement_shorthands(schema: dict[str, Any]) -> None:
    """The placement field's JSON schema also takes `JobSpec._shorthands`' spellings: a
    policy's name (`placement: spread`) and the GPUs listed (`placement: [n0.gpu0, ...]`)."""
    ref = {"$ref": schema.pop("$ref")}
    names = [p for p in get_args(PlacementSpec.model_fields["policy"].annotation) if p != "explicit"]
    schema["anyOf"] = [
        ref,
        {"type": "string", "enum": names, "description": "a policy by name"},
        {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "explicit: the GPUs"},
    ]


class JobSpec(Spec):
    """One job of a scenario with several jobs on one cluster."""

    model_config = ConfigDict(allow_inf_nan=False)

    name: str = Field(description="Job name (unique in the scenario); the `job` column of the frames.")
    workload: FileRef = Field(description="Workload file: a step trace or a model with its layout.")
    gpus: int = Field(ge=1, description="GPUs the job runs on (the workload's rank count).")
    placement: PlacementSpec = Field(
        PlacementSpec(),
        description="Placement policy (or a GPU list).",
        json_schema_extra=lambda schema: _placement_shorthands(schema),
    )
    arrival_s: float = Field(
        0.0, ge=0, description="When the job starts, s from the run start (YAML: arrival_ms, arrival_h)."
    )
    priority: int = Field(0, description="Higher runs first when jobs compete for GPUs (scheduler).")

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        """`placement: packed` names a policy; `placement: [n0.gpu0, ...]` lists the GPUs."""
        data = to_si(data, "arrival_s")
        if isinstance(data, dict):
            p = data.get("placement")
            if isinstance(p, str):
                data = {**data, "placement": {"policy": p}}
            elif isinstance(p, list):
                data = {**data, "placement": {"policy": "explicit", "gpus": p}}
        return data

    @field_validator("name")
    @classmethod
    def _job_name(cls, v: str) -> str:
        return check_name(v)

    @model_validator(mode="after")
    def _explicit_count(self) -> JobSpec:
        if self.placement.gpus and len(self.placement.gpus) != self.gpus:
            raise ValueError(
                f"the placement lists {len(self.placement.gpus)} GPUs and the job has {self.gpus}"
            )
        return self


class SyntheticJobsSpec(Spec):
    """Jobs drawn at random (`simulator.jobs.trace.synthetic_jobs`), seeded by the scenario's seed."""

    model_config = ConfigDict(allow_inf_nan=False)

    count: int = Field(ge=1, le=100_000, description="Number of jobs.")
    mean_interarrival_s: float = Field(
        gt=0, description="Mean gap between submits (Poisson arrivals), s (YAML: mean_interarrival_h)."
    )
    median_duration_s: float = Field(
        gt=0, description="Median compute time of a job (lognormal), s (YAML: median_duration_h)."
    )
    sigma: float = Field(1.0, ge=0, le=4, description="Log-sd of the lognormal run time.")
    sizes: list[int] = Field(
        [8, 16, 32, 64, 128, 256, 512], min_length=1, description="GPU counts a job may ask for."
    )
    weights: list[float] = Field(
        [0.35, 0.2, 0.15, 0.12, 0.08, 0.06, 0.04], min_length=1, description="Probability of each size."
    )

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        return to_si(data, "mean_interarrival_s", "median_duration_s")

    @model_validator(mode="after")
    def _sizes_weights(self) -> SyntheticJobsSpec:
        if len(self.sizes) != len(self.weights):
            raise ValueError(
                f"{len(self.sizes)} sizes and {len(self.weights)} weights; give one weight per size"
            )
        if any(x < 1 for x in self.sizes) or any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
            raise ValueError("sizes must be >= 1 and weights >= 0 with a positive sum")
        return self


class ClusterSpec(Spec):
    """A cluster over days: jobs arrive (from a job trace or drawn at random), a scheduler
    places them, failures interrupt them (`simulator.jobs.scheduler`)."""

    model_config = ConfigDict(allow_inf_nan=False)

    trace: FileRef | None = Field(
        None, description="Job trace CSV (clustersim-jobs/1), relative to this file."
    )
    synthetic: SyntheticJobsSpec | None = Field(None, description="Jobs drawn at random instead of a trace.")
    scheduler: Literal["fifo", "backfill", "topology_aware"] = Field(
        "backfill",
        description="fifo; backfill (EASY backfilling, packed placement); topology_aware "
        "(backfilling with leaf-aligned placement: fewest shared uplinks).",
    )
    spare_servers: int = Field(0, ge=0, description="Spare servers shared by every job.")
    checkpoint_s: float = Field(60.0, ge=0, description="Stall of one checkpoint, s (YAML: checkpoint_min).")

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        return to_si(data, "checkpoint_s")

    @model_validator(mode="after")
    def _one_source(self) -> ClusterSpec:
        if (self.trace is None) == (self.synthetic is None):
            raise FieldError("give a job `trace` or `synthetic` jobs (one of them)", field="trace")
        return self
