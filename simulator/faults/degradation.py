"""Degradations: stragglers, degraded links and flapping links that slow a run without killing it.

What is modeled: episodes start per component (GPU or link) at random (exponential time
between episodes per component, `mtbe_h`) or at given times (`at_h` on `component`), and
last a fixed or exponentially distributed time. During an episode a straggler GPU runs
`slowdown` times slower, a degraded link carries `bandwidth_factor` of its bandwidth, a
flapping link alternates `down_s` down and `up_s` up. Each change of the cluster state is
an event; the step time in the new state comes from the step oracle.

What is simplified: the job is not interrupted by a degradation (a flapping link that makes
NCCL time out is a `link` failure instead); episodes on a component that overlap simply
overlap (the strongest effect wins). Timelines come from named streams
(`degradation/<kind>/<label>`) so they are common random numbers across policies; a
repeated name gets `/<k>` on its k-th repeat, so two alike sources draw independently.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from simulator.config.base import Spec
from simulator.errors import SimulationError
from simulator.faults.state import JobShape
from simulator.streams import stream, unique_names
from simulator.units import to_si

#: Most state changes the degradations of one run may make; more means episodes far too
#: frequent (or flaps far too short) for the run, and a run that would not end.
MAX_CHANGES = 1_000_000


#: Slowest a straggling GPU is modelled (times its normal compute time): beyond it a step
#: runs for millennia of simulated time; a GPU that slow is down (a failure).
MAX_SLOWDOWN = 1e6
#: Smallest share of its bandwidth a degraded link keeps: below it a step runs for
#: millennia of simulated time; a link that slow is down (`down_links`, a flapping link).
MIN_BANDWIDTH_FACTOR = 1e-6


class _EpisodeBase(Spec):
    """What every degradation spec has: when episodes start and how long they last."""

    model_config = ConfigDict(allow_inf_nan=False)

    cause: str | None = Field(None, description="Label; also names the random stream.")
    mtbe_s: float | None = Field(
        None, gt=0, description="Mean time between episodes per component, s (YAML: mtbe_h)."
    )
    at_s: list[Annotated[float, Field(ge=0)]] | None = Field(
        None, min_length=1, description="Episode start times instead of random ones, s (YAML: at_h)."
    )
    component: int = Field(0, ge=0, description="Component index for scheduled episodes.")
    duration_s: float = Field(gt=0, description="(Mean) episode length, s (YAML: duration_h).")
    duration_dist: Literal["fixed", "exponential"] = Field(
        "fixed", description="Distribution of episode lengths."
    )

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        """Read human time units as seconds; a single `at_h` is a list of one."""
        d = to_si(data, "mtbe_s", "at_s", "duration_s", "down_s", "up_s")
        if isinstance(d, dict) and isinstance(d.get("at_s"), (int, float)):
            d["at_s"] = [d["at_s"]]
        return d

    @model_validator(mode="after")
    def _one_source(self) -> _EpisodeBase:
        """Episodes are random or scheduled, not both."""
        if (self.mtbe_s is None) == (self.at_s is None):
            raise ValueError("give exactly one of mtbe_h (random episodes) or at_h (scheduled)")
        return self

    component_class: ClassVar[str] = "gpu"

    def label(self, index: int) -> str:
        """The name of the spec's random stream (its cause, else class and position)."""
        return self.cause or f"{self.component_class}#{index}"


class StragglerSpec(_EpisodeBase):
    """A GPU runs `slowdown` times slower for a while (thermal throttling, bad clocks)."""

    kind: Literal["straggler"] = Field(description="Degradation tag.")
    slowdown: float = Field(
        gt=1, le=MAX_SLOWDOWN, description="Factor by which the GPU's compute is slower (at most 1e6)."
    )


class DegradedLinkSpec(_EpisodeBase):
    """A link runs below its speed for a while (lanes down, FEC errors, congestion)."""

    kind: Literal["degraded_link"] = Field(description="Degradation tag.")
    bandwidth_factor: float = Field(
        ge=MIN_BANDWIDTH_FACTOR, le=1, description="Fraction of bandwidth left (at least 1e-6)."
    )
    component_class: ClassVar[str] = "link"


class FlappingLinkSpec(_EpisodeBase):
    """A link alternates down and up for the length of the episode."""

    kind: Literal["flapping_link"] = Field(description="Degradation tag.")
    down_s: float = Field(gt=0, description="Length of each down period, s (YAML: down_min).")
    up_s: float = Field(gt=0, description="Length of each up period, s (YAML: up_min).")
    component_class: ClassVar[str] = "link"


DegradationSpec = Annotated[StragglerSpec | DegradedLinkSpec | FlappingLinkSpec, Field(discriminator="kind")]


@dataclasses.dataclass(frozen=True)
class DegradationChange:
    """One change of the cluster state: an effect on a component starts or ends."""

    time_s: float
    source: int
    kind: str  # straggler | degraded_link | link_down
    component: str
    value: float
    start: bool
    duration_s: float


def _within_budget(changes: int, label: str, duration_s: float) -> None:
    """Raise if a run's degradations already make more than `MAX_CHANGES` state changes.

    Raises:
        SimulationError: too many changes (episodes or flaps far too frequent).
    """
    if changes > MAX_CHANGES:
        raise SimulationError(
            f"more than {MAX_CHANGES:,} degradation changes in a run of {duration_s:g} s "
            f"(degradation {label!r}): episodes or flaps far too frequent for the run"
        )


def sample_degradations(
    specs: list[Any], job: JobShape, duration_s: float, seed: int
) -> list[DegradationChange]:
    """Sample every degradation start and end of the run, sorted by time."""
    out: list[DegradationChange] = []
    names = unique_names([f"degradation/{spec.kind}/{spec.label(i)}" for i, spec in enumerate(specs)])
    for index, spec in enumerate(specs):
        name = names[index]
        rng = stream(seed, name)
        count = job.count(spec.component_class)
        if spec.at_s is not None:
            starts = np.array(sorted(spec.at_s), dtype=float)
            comps = np.full(len(starts), spec.component % count, dtype=np.int64)
        else:
            starts_l, comps_l = [], []
            t = rng.exponential(spec.mtbe_s, count)
            idx = np.arange(count, dtype=np.int64)
            while True:
                keep = t < duration_s
                if not keep.any():
                    break
                t, idx = t[keep], idx[keep]
                starts_l.append(t)
                comps_l.append(idx)
                _within_budget(len(out) + 2 * sum(map(len, starts_l)), spec.label(index), duration_s)
                t = t + rng.exponential(spec.mtbe_s, len(t))
            starts = np.concatenate(starts_l) if starts_l else np.empty(0)
            comps = np.concatenate(comps_l) if comps_l else np.empty(0, dtype=np.int64)
            order = np.lexsort((comps, starts))
            starts, comps = starts[order], comps[order]
        dur_rng = stream(seed, name + "/duration")
        if spec.duration_dist == "fixed":
            lengths = np.full(len(starts), spec.duration_s)
        else:
            lengths = dur_rng.exponential(spec.duration_s, len(starts))
        prefix = "gpu" if spec.component_class == "gpu" else "link"
        for t0, c, length in zip(starts.tolist(), comps.tolist(), lengths.tolist(), strict=True):
            comp = f"{prefix}{c}"
            if isinstance(spec, FlappingLinkSpec):
                t, end = t0, t0 + length
                while t < end:
                    down_end = min(t + spec.down_s, end)
                    out.append(DegradationChange(t, index, "link_down", comp, 0.0, True, down_end - t))
                    out.append(DegradationChange(down_end, index, "link_down", comp, 0.0, False, 0.0))
                    t = down_end + spec.up_s
                    _within_budget(len(out), spec.label(index), duration_s)
            else:
                value = spec.slowdown if isinstance(spec, StragglerSpec) else spec.bandwidth_factor
                out.append(DegradationChange(t0, index, spec.kind, comp, value, True, length))
                out.append(DegradationChange(t0 + length, index, spec.kind, comp, value, False, 0.0))
    out = [c for c in out if c.time_s < duration_s]
    out.sort(key=lambda c: (c.time_s, c.start, c.source, c.component))
    return out
