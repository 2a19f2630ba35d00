"""Failure models per component class, repair-time models, and the sampled failure timeline.

What is modeled: every component of a class (gpu, hbm, host, nic, link, switch, storage,
software) fails independently with an exponential (`exponential`, alias `poisson`) or Weibull
(`weibull`) time to failure, given per component as a mean time between failures; or a
failure is `scheduled` at a given time on a given component. A failed component takes
`blast_gpus` GPUs out of service (1 for a GPU, a whole host for a host, `gpus_per_switch`
for a switch, none for software and storage: the job just restarts) — this is how
correlated failures are expressed: a host takes its GPUs, a switch the GPUs behind it. The
run level drains whole hosts, so a failure removes every host its GPUs sit on.

What is simplified: each component is a renewal process whose clock does not pause during
repair (the slot is refilled by replacement hardware, which starts ageing at once); repair
times are drawn per failure but only matter to policies that wait for the repaired
hardware (hot-spare replenishment, elastic rejoin, `wait_for_repair`). A source without a
repair time is repaired at once; a policy that waits for repairs (`wait_for_repair`,
`when_empty: wait_repair`) refuses such a source when it takes GPUs out
(`simulator.faults.checks`).

Common random numbers: the whole timeline is sampled before the run from streams spawned
by name (`failure/<target>/<cause>` for arrivals, `.../repair` for repair times) from
`SeedSequence(seed)`, so the same seed gives the same failures whatever the policy does,
and adding a failure source does not move the others. Two sources with one target and
cause are two independent processes (their rates add): the first keeps the stream
`failure/<target>/<cause>`, the k-th repeat draws from `failure/<target>/<cause>/<k>`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, ValidationError, model_validator

from simulator.config.base import Spec
from simulator.errors import FieldError, SimulationError
from simulator.faults.state import JobShape
from simulator.streams import stream, unique_names
from simulator.units import to_si

ComponentClass = Literal["gpu", "hbm", "host", "nic", "link", "switch", "storage", "software"]

#: Weibull shapes accepted: far outside what field data show (0.7-0.8 for HPC nodes,
#: Schroeder and Gibson, DSN 2006), and below 0.2 the time between failures has a
#: coefficient of variation above 15 (and Γ(1 + 1/k) overflows below k ≈ 0.006).
WEIBULL_SHAPE_MIN, WEIBULL_SHAPE_MAX = 0.2, 20.0

NonNegative = Annotated[float, Field(ge=0)]

#: Most failures one run may sample (the Llama 3 preset gives about 420 in 54 days on
#: 16,384 GPUs); more means an MTBF far too short for the run, and a run that would not end.
MAX_FAILURES = 1_000_000


# --- repair times ---------------------------------------------------------------------


class _FiniteSpec(Spec):
    """A spec whose numbers must be finite (no `.inf`, no `.nan`)."""

    model_config = ConfigDict(allow_inf_nan=False)


class FixedRepairSpec(_FiniteSpec):
    """Every repair takes the same time."""

    kind: Literal["fixed"] = Field("fixed", description="Repair model tag.")
    duration_s: float = Field(ge=0, description="Repair time, s (YAML: duration_h).")

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        """Read the YAML's `duration_h` (or another time unit) as seconds."""
        return to_si(data, "duration_s")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` repair times, s."""
        return np.full(n, self.duration_s)

    @property
    def mean_s(self) -> float:
        """Mean repair time, s."""
        return self.duration_s


class ExponentialRepairSpec(_FiniteSpec):
    """Exponentially distributed repair time."""

    kind: Literal["exponential"] = Field(description="Repair model tag.")
    mean_s: float = Field(gt=0, description="Mean repair time, s (YAML: mean_h).")

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        """Read the YAML's `mean_h` (or another time unit) as seconds."""
        return to_si(data, "mean_s")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` repair times drawn from `rng`, s."""
        return rng.exponential(self.mean_s, n)


class LognormalRepairSpec(_FiniteSpec):
    """Lognormal repair time (long tail: most repairs quick, a few take days)."""

    kind: Literal["lognormal"] = Field(description="Repair model tag.")
    median_s: float = Field(gt=0, description="Median repair time, s (YAML: median_h).")
    sigma: float = Field(
        1.0,
        gt=0,
        le=5,
        description="Standard deviation of log(repair time) (at most 5: mean = 270,000 medians).",
    )

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        """Read the YAML's `median_h` (or another time unit) as seconds."""
        return to_si(data, "median_s")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` repair times drawn from `rng`, s."""
        return rng.lognormal(math.log(self.median_s), self.sigma, n)

    @property
    def mean_s(self) -> float:
        """Mean repair time, s."""
        return self.median_s * math.exp(self.sigma**2 / 2)


RepairSpec = Annotated[
    FixedRepairSpec | ExponentialRepairSpec | LognormalRepairSpec, Field(discriminator="kind")
]


# --- failures --------------------------------------------------------------------------


class _FailureBase(_FiniteSpec):
    """What every failure spec has: the component class, a cause label, blast and repair."""

    target: ComponentClass = Field(description="Component class that fails.")
    cause: str | None = Field(
        None,
        description="Label of the failure cause (e.g. 'HBM3 memory'); also names the random "
        "stream, so give one to keep streams stable when sources are added.",
    )
    blast_gpus: int | None = Field(
        None,
        ge=0,
        description="GPUs one failure takes out of service (default by class: gpu/hbm 1, "
        "host gpus_per_node, nic/link GPUs per NIC/link, switch gpus_per_switch, "
        "storage/software 0).",
    )
    repair: RepairSpec | None = Field(
        None, description="Repair time of the failed hardware (YAML shorthand: repair_h)."
    )

    @model_validator(mode="before")
    @classmethod
    def _repair_shorthand(cls, data: Any) -> Any:
        """Read human time units; `repair_h: x` is a fixed repair of x hours."""
        data = to_si(data, "repair_s", "mtbf_s", "at_s")
        if isinstance(data, dict) and "repair_s" in data:
            if "repair" in data:
                raise FieldError("give either repair_h or repair, not both", field="repair")
            try:  # here, so that a bad value is placed at the key as given, not at the failure
                FixedRepairSpec(duration_s=data["repair_s"])
            except ValidationError as exc:
                first = exc.errors()[0]
                cause = first.get("ctx", {}).get("error")
                msg = cause.message if isinstance(cause, FieldError) else str(first["msg"])
                raise FieldError(msg[:1].lower() + msg[1:], field="repair_s") from None
            data["repair"] = {"kind": "fixed", "duration_s": data.pop("repair_s")}
        return data

    def label(self, index: int) -> str:
        """The name of the spec's random stream (its cause, else class and position)."""
        return self.cause or f"{self.target}#{index}"


class ExponentialFailureSpec(_FailureBase):
    """Memoryless failures: each component fails at a constant rate 1/MTBF."""

    kind: Literal["exponential", "poisson"] = Field(description="Failure model tag.")
    mtbf_s: float = Field(gt=0, description="Mean time between failures per component, s (YAML: mtbf_h).")

    def mean_ttf_s(self) -> float:
        """Mean time to failure of one component, s."""
        return self.mtbf_s

    def draw(self, rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
        """`n` times to the next failure, the MTBF multiplied by `scale`, s."""
        return rng.exponential(self.mtbf_s * scale, n)


class WeibullFailureSpec(_FailureBase):
    """Weibull time to failure per component (shape < 1: infant mortality; > 1: wear-out)."""

    kind: Literal["weibull"] = Field(description="Failure model tag.")
    mtbf_s: float = Field(gt=0, description="Mean time to failure per component, s (YAML: mtbf_h).")
    shape: float = Field(
        ge=WEIBULL_SHAPE_MIN,
        le=WEIBULL_SHAPE_MAX,
        description="Weibull shape k (1 is exponential; field data on HPC node failures fit "
        "0.7-0.8, Schroeder and Gibson, DSN 2006); from 0.2 to 20.",
    )

    def mean_ttf_s(self) -> float:
        """Mean time to failure of one component, s."""
        return self.mtbf_s

    def draw(self, rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
        """`n` times to the next failure, the mean multiplied by `scale`, s."""
        lam = self.mtbf_s * scale / math.gamma(1.0 + 1.0 / self.shape)
        return lam * rng.weibull(self.shape, n)


class ScheduledFailureSpec(_FailureBase):
    """A failure at a given time on a given component (e.g. a planned switch outage)."""

    kind: Literal["scheduled"] = Field(description="Failure model tag.")
    at_s: list[NonNegative] = Field(
        min_length=1, description="Time(s) of the failure from the run start, s (YAML: at_h; one or a list)."
    )
    component: int | None = Field(None, ge=0, description="Index of the component within its class.")
    node: str | None = Field(
        None, description="Name of the component (e.g. 'host-12'); its trailing number is the index."
    )

    @model_validator(mode="after")
    def _one_component(self) -> ScheduledFailureSpec:
        """A component by index or by a name that ends in one, not both."""
        if self.component is not None and self.node is not None:
            raise ValueError("give component (an index) or node (a name), not both")
        if self.node is not None and not re.search(r"\d+$", self.node):
            raise ValueError(
                f"node {self.node!r} names no component: a node is named by its class and "
                "index, e.g. host-12 (its trailing number is the index)"
            )
        return self

    def index(self) -> int:
        """The failing component's index: `component`, else `node`'s trailing number, else 0."""
        if self.component is not None:
            return self.component
        if self.node:
            m = re.search(r"(\d+)$", self.node)
            if m:
                return int(m.group(1))
        return 0

    @model_validator(mode="before")
    @classmethod
    def _one_time_is_a_list(cls, data: Any) -> Any:
        """A single `at_h` is a list of one (read after the base's unit conversion)."""
        d = to_si(data, "at_s")
        if isinstance(d, dict) and isinstance(d.get("at_s"), (int, float)):
            d["at_s"] = [d["at_s"]]
        return d

    def times(self) -> list[float]:
        """The failure times, s."""
        return list(self.at_s)


FailureSpec = Annotated[
    ExponentialFailureSpec | WeibullFailureSpec | ScheduledFailureSpec, Field(discriminator="kind")
]


@dataclasses.dataclass(frozen=True)
class FailureEvent:
    """One sampled failure: when, what, which GPUs it takes down and for how long."""

    time_s: float
    source: int
    component_class: str
    cause: str
    component: int
    first_gpu: int
    n_gpus: int
    repair_s: float


def interruption_rate_per_s(specs: list[Any], job: JobShape, mtbf_scale: float = 1.0) -> float:
    """Long-run rate of job interruptions from the random (non-scheduled) failure sources."""
    rate = 0.0
    for spec in specs:
        if isinstance(spec, (ExponentialFailureSpec, WeibullFailureSpec)):
            rate += job.count(spec.target) / (spec.mean_ttf_s() * mtbf_scale)
    return rate


def job_mtbf_s(
    specs: list[Any], job: JobShape, mtbf_scale: float = 1.0, duration_s: float | None = None
) -> float:
    """Mean time between job interruptions implied by the failure specs (inf if none).

    With `duration_s`, the scheduled failures that fall in the run count too, as a rate of
    their number over the run's length.
    """
    rate = interruption_rate_per_s(specs, job, mtbf_scale)
    if duration_s is not None:
        n = sum(
            1
            for spec in specs
            if isinstance(spec, ScheduledFailureSpec)
            for t in spec.times()
            if t < duration_s
        )
        rate += n / duration_s
    return math.inf if rate == 0 else 1.0 / rate


def sample_failures(
    specs: list[Any], job: JobShape, duration_s: float, seed: int, mtbf_scale: float = 1.0
) -> list[FailureEvent]:
    """Sample every failure of the run, sorted by time (independent of any policy)."""
    events: list[FailureEvent] = []
    names = unique_names([f"failure/{spec.target}/{spec.label(i)}" for i, spec in enumerate(specs)])
    for index, spec in enumerate(specs):
        name = names[index]
        blast = spec.blast_gpus if spec.blast_gpus is not None else job.default_blast_gpus(spec.target)
        blast = min(blast, job.n_gpus)
        count = job.count(spec.target)
        if isinstance(spec, ScheduledFailureSpec):
            times = np.array([t for t in spec.times() if t < duration_s], dtype=float)
            comps = np.full(len(times), spec.index() % max(count, 1), dtype=np.int64)
        else:
            rng = stream(seed, name)
            t = spec.draw(rng, count, mtbf_scale)
            idx = np.arange(count, dtype=np.int64)
            all_t: list[np.ndarray] = []
            all_c: list[np.ndarray] = []
            total = len(events)
            while True:
                keep = t < duration_s
                if not keep.any():
                    break
                t, idx = t[keep], idx[keep]
                all_t.append(t)
                all_c.append(idx)
                total += len(t)
                if total > MAX_FAILURES:
                    raise SimulationError(
                        f"more than {MAX_FAILURES:,} failures in a run of {duration_s:g} s "
                        f"(failure source {spec.label(index)!r}): the MTBF is far too short"
                    )
                t = t + spec.draw(rng, len(t), mtbf_scale)
            times = np.concatenate(all_t) if all_t else np.empty(0)
            comps = np.concatenate(all_c) if all_c else np.empty(0, dtype=np.int64)
            order = np.lexsort((comps, times))
            times, comps = times[order], comps[order]
        repair_rng = stream(seed, name + "/repair")
        repairs = spec.repair.sample(repair_rng, len(times)) if spec.repair else np.zeros(len(times))
        cause = spec.cause or spec.target
        for t_i, c_i, r_i in zip(times.tolist(), comps.tolist(), repairs.tolist(), strict=True):
            first = (c_i * blast) % job.n_gpus if blast else 0
            events.append(FailureEvent(t_i, index, spec.target, cause, c_i, first, blast, r_i))
    events.sort(key=lambda e: (e.time_s, e.source, e.component))
    return events
