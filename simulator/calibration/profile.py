"""Calibration profiles: fitted collectives of one machine, and the lookup the engine calls.

A profile (`topologies/calibration/*.yaml`) holds one entry per measured table: the
collective, scope (`intra` = one node, `inter` = several), GPU and node counts, the fitted
line `t(S) = alpha + S * factor(n) / busbw` and its efficiency curve (see
`simulator.calibration.fit`), the measured size range and the error at every size. It
records the benchmark files it came from by name and sha256, never by path.

`CalibrationProfile.collective(kind, n_ranks, n_nodes, size_bytes)` returns a
`CollectiveFit` for the best entry of the same kind and scope, or one predicted across
scales when the exact GPU/node count was not measured.

Prediction across scales (the model, and why):

* Bus bandwidth. nccl-tests doc/PERFORMANCE.md defines busbw so that it does not depend on
  the rank count for ring algorithms: every rank's bottleneck link carries the same bytes
  whatever n is. Inter-node all_reduce, all_gather, reduce_scatter, broadcast, reduce and
  send_recv therefore keep the busbw measured at the nearest measured node count (the
  MI325X samples hold 347-351 GB/s from 2 to 8 nodes; MI355X 370 GB/s from 2 to 4).
  all_to_all is not a ring: each rank sends (n-g)/n of its buffer over the NIC (g GPUs
  per node), so with the NIC bandwidth B fixed, busbw(n) = B (n-1)/(n-g); B is solved from
  the measured entry. Intra-node entries keep their busbw for other GPU counts (switch
  or full-mesh: the per-GPU bandwidth does not change).
* Latency. NCCL's tuner (src/graph/tuning.cc) charges a ring one network latency per
  inter-node step (n_nodes - 1 steps, twice for all_reduce) and a tree 2 log2(n_nodes) of
  them, and picks the tree for small all_reduce messages across nodes. So with alpha_1 the
  one-node alpha of the same collective (0 if the profile has none) and alpha_m the alpha
  at the measured m nodes:
      all_reduce:  alpha(N) = alpha_1 + (alpha_m - alpha_1) * log2(N) / log2(m)
      others:      alpha(N) = alpha_1 + (alpha_m - alpha_1) * (N - 1) / (m - 1)
  Intra-node entries scale alpha with the ring's step count (n - 1) / (n_ref - 1).
* The efficiency curve of the measured entry is reused as a function of message size.
  Where NCCL would switch protocol at a different size on more nodes this is an
  approximation; `clustersim calibrate --check` measures how good it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import Field, field_validator, model_validator

from simulator.calibration.collective import KINDS, busbw_factor
from simulator.calibration.compute import ComputeCalibration
from simulator.calibration.fit import EfficiencyCurve, TableFit, line_time_s
from simulator.calibration.truncation import format_bytes
from simulator.config.base import Spec
from simulator.config.loader import check_file_kind, parse_text, read_document, validate
from simulator.errors import FieldError
from simulator.network.collective_params import FITTED_FIELDS

Scope = Literal["intra", "inter"]

#: a fit used for sizes above this many times the largest measured size says it extrapolates
EXTRAPOLATION_FACTOR = 4.0


def _sig(x: float, digits: int = 6) -> float:
    """Round to `digits` significant digits so that YAML stays short and round-trips exactly."""
    if x == 0 or not math.isfinite(x):
        return float(x)
    return float(f"{x:.{digits}g}")


class SourceFile(Spec):
    """A benchmark file a profile was fitted from."""

    file: str = Field(description="File name (no folders) of the benchmark output.")
    sha256: str = Field(description="SHA-256 of the file's bytes, to tell which run it was.")
    tables: int = Field(1, ge=1, description="Result tables read from the file.")


#: Largest efficiency point a profile may hold: fitted curves reach about 1.3 where the
#: line over-predicts small sizes; ten times the line is a corrupt file, not a fit.
MAX_EFFICIENCY = 10.0


class CollectiveEntry(Spec):
    """One fitted table: t(S) = (alpha_s + S * factor(n_gpus) / busbw) / e(S)."""

    collective: str = Field(description=f"Collective kind, one of {', '.join(KINDS)}.")
    scope: Scope = Field(description="'intra' (one node) or 'inter' (several nodes).")
    n_gpus: int = Field(
        ge=2, description="Ranks (GPUs) in the measured collective (at least 2: one rank moves no bytes)."
    )
    n_nodes: int = Field(ge=1, description="Nodes (hosts) in the measured collective.")
    alpha_s: float = Field(ge=0, description="Fitted latency of the line, seconds.")
    busbw_bytes_per_s: float = Field(
        gt=0, description="Fitted bus bandwidth of the line (nccl-tests busbw), bytes/s."
    )
    efficiency: list[tuple[float, float]] = Field(
        default_factory=list,
        description="Efficiency curve [size_bytes, line time / measured time] points, "
        "interpolated linearly in (log2 size, log efficiency), constant outside.",
    )
    min_size_bytes: float = Field(gt=0, description="Smallest measured message size (> 0).")
    max_size_bytes: float = Field(gt=0, description="Largest measured message size.")
    source: str = Field(description="Benchmark file (and table) the entry was fitted on.")
    gpu: str | None = Field(
        None,
        description="GPU the table ran on: the device name of the log's '# Rank' lines, when "
        "printed (a run on another GPU model is warned).",
    )
    median_abs_error_ge_1mib: float | None = Field(
        None, ge=0, description="Median |model/measured - 1| over sizes >= 1 MiB (None if none)."
    )
    max_abs_error: float = Field(ge=0, description="Max |model/measured - 1| over all sizes.")
    errors: list[tuple[float, float]] = Field(
        default_factory=list,
        description="[size_bytes, model/measured - 1] at every measured size.",
    )

    @field_validator("collective")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in KINDS:
            raise ValueError(f"unknown collective {v!r}; expected one of {list(KINDS)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> CollectiveEntry:
        if self.min_size_bytes > self.max_size_bytes:
            raise FieldError(
                f"min_size_bytes {self.min_size_bytes:g} is above max_size_bytes {self.max_size_bytes:g}",
                field="min_size_bytes",
            )
        if self.n_nodes > self.n_gpus:
            raise FieldError(f"{self.n_nodes} nodes for {self.n_gpus} GPUs", field="n_nodes")
        if (self.scope == "inter") != (self.n_nodes > 1):
            raise FieldError(
                f"scope {self.scope!r} with {self.n_nodes} node(s): 'intra' is a table of one node, "
                "'inter' of several",
                field="scope",
            )
        for i, (size, eff) in enumerate(self.efficiency):
            if not size > 0 or not 0 < eff <= MAX_EFFICIENCY:
                raise FieldError(
                    f"point [{size:g}, {eff:g}]: sizes must be > 0 and efficiencies in "
                    f"(0, {MAX_EFFICIENCY:g}]",
                    field=f"efficiency.{i}",
                )
        sizes = [size for size, _ in self.efficiency]
        if sizes != sorted(set(sizes)):
            raise FieldError("sizes must increase from point to point", field="efficiency")
        return self

    @property
    def n_sizes(self) -> int:
        return len(self.errors)

    @property
    def gpus_per_node(self) -> float:
        return self.n_gpus / self.n_nodes

    def curve(self) -> EfficiencyCurve:
        return EfficiencyCurve(tuple(s for s, _ in self.efficiency), tuple(e for _, e in self.efficiency))

    def describe(self) -> str:
        return f"{self.collective} {self.n_gpus} GPUs/{self.n_nodes} node(s) from {self.source}"


class CollectiveParamsFit(Spec):
    """The collective model's physical parameters fitted jointly, and how well they fit."""

    topology: str = Field(description="Topology file (name) the tables were fitted on.")
    gpu: str | None = Field(
        None, description="GPU model of the tables fitted on (a run on another GPU is warned)."
    )
    values: dict[str, float] = Field(
        description="Field of CollectiveParams -> fitted value (nic_efficiency, "
        "scale_up_efficiency, ll_efficiency, ll128_efficiency, net_latency_us, step_latency_us, "
        "launch_latency_us)."
    )
    at_bounds: dict[str, float] = Field(
        default_factory=dict, description="Fields that ended on a physical bound (a clamp), with it."
    )
    table_errors: dict[str, float] = Field(
        default_factory=dict, description="Table -> median |model/measured - 1| of the joint fit."
    )

    @field_validator("values")
    @classmethod
    def _within_bounds(cls, v: dict[str, float]) -> dict[str, float]:
        for k, x in v.items():
            if k not in FITTED_FIELDS:
                raise ValueError(f"unknown parameter {k!r}; expected one of {sorted(FITTED_FIELDS)}")
            lo, hi = FITTED_FIELDS[k]
            if not lo <= x <= hi:
                raise ValueError(f"{k} = {x} outside its physical range [{lo}, {hi}]")
        return v


class CalibrationProfile(Spec):
    """Fitted collectives (and optionally compute efficiencies) of one machine."""

    name: str = Field(description="Short name of the machine and network.")
    description: str = Field("", description="What machine, network and software this is.")
    sources: list[SourceFile] = Field(default_factory=list, description="Files fitted on.")
    collectives: list[CollectiveEntry] = Field(
        default_factory=list, description="One entry per measured table."
    )
    compute: ComputeCalibration | None = Field(
        None, description="GEMM and memory-bound kernel efficiencies, if calibrated."
    )
    collective_params: CollectiveParamsFit | None = Field(
        None,
        description="Physical parameters of the collective model fitted jointly over every "
        "table (simulator.calibration.joint); a run applies them to every collective.",
    )

    def to_yaml(self) -> str:
        """The profile as YAML (loads back to an equal profile)."""
        data = self.model_dump(mode="json", exclude_none=True)
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)

    @classmethod
    def from_yaml(cls, text: str, path: str | Path = "<profile>") -> CalibrationProfile:
        """Parse and validate YAML text (errors name the file, line and field)."""
        return validate(cls, parse_text(text, Path(path)))

    def entries(self, kind: str, scope: Scope | None = None) -> list[CollectiveEntry]:
        return [e for e in self.collectives if e.collective == kind and (scope is None or e.scope == scope)]

    def collective(self, kind: str, n_ranks: int, n_nodes: int, size_bytes: float) -> CollectiveFit | None:
        """The best fit for a collective of `size_bytes` on `n_ranks` ranks over `n_nodes` nodes.

        Same kind and scope are required. In order of preference: an entry with this very
        GPU and node count whose measured sizes reach down to `size_bytes` (within a factor
        2); a prediction across scales from the nearest measured node count (see the module
        docstring) whose sizes do; an exact entry anyway; a prediction anyway. Among equal
        candidates the one with the most measured sizes wins. None when the profile has no
        entry of that kind and scope, or for fewer than 2 ranks.

        When `size_bytes` is more than `EXTRAPOLATION_FACTOR` (4) times the largest size the
        entry measured, the fit's `source` says `extrapolated beyond <largest size>`: the
        bandwidth of larger messages was never measured (a log cut short fits a bandwidth
        far below the links').

        Raises:
            ValueError: unknown kind, or n_nodes outside 1..n_ranks.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown collective {kind!r}; expected one of {list(KINDS)}")
        if n_nodes < 1 or n_nodes > n_ranks:
            raise ValueError(f"impossible layout: {n_ranks} ranks on {n_nodes} nodes")
        if n_ranks < 2:
            return None
        scope: Scope = "intra" if n_nodes == 1 else "inter"
        candidates = self.entries(kind, scope)
        if not candidates:
            return None
        entry, fit = self._choose(candidates, kind, n_ranks, n_nodes, size_bytes)
        if size_bytes > EXTRAPOLATION_FACTOR * entry.max_size_bytes:
            fit = replace(
                fit,
                source=f"{fit.source}; extrapolated beyond {format_bytes(entry.max_size_bytes)}, "
                "the largest size measured",
            )
        return fit

    def _choose(
        self, candidates: list[CollectiveEntry], kind: str, n_ranks: int, n_nodes: int, size_bytes: float
    ) -> tuple[CollectiveEntry, CollectiveFit]:
        """The entry `collective` uses and its fit (see there)."""

        def covers(e: CollectiveEntry) -> bool:
            return size_bytes >= e.min_size_bytes / 2

        def rank(e: CollectiveEntry) -> tuple[float, ...]:
            dist = abs(math.log2(e.n_nodes / n_nodes)) + abs(math.log2(e.n_gpus / n_ranks))
            return (0 if covers(e) else 1, dist, -e.n_sizes, -e.max_size_bytes)

        exact = [e for e in candidates if e.n_gpus == n_ranks and e.n_nodes == n_nodes]
        exact_cover = sorted((e for e in exact if covers(e)), key=rank)
        if exact_cover:
            return exact_cover[0], CollectiveFit.from_entry(exact_cover[0])
        ref = min(candidates, key=rank)
        if covers(ref) or not exact:
            return ref, self._predict(ref, kind, n_ranks, n_nodes)
        best = min(exact, key=rank)
        return best, CollectiveFit.from_entry(best)

    def _predict(self, ref: CollectiveEntry, kind: str, n_ranks: int, n_nodes: int) -> CollectiveFit:
        factor = busbw_factor(kind, n_ranks)
        if ref.scope == "intra":
            steps = (n_ranks - 1) / max(ref.n_gpus - 1, 1)
            alpha = ref.alpha_s * steps
            busbw = ref.busbw_bytes_per_s
            how = f"alpha x {steps:.3g} (ring steps), busbw kept"
        else:
            # alpha is only identified by tables that reach small sizes
            intra = [e for e in self.entries(kind, "intra") if e.min_size_bytes <= 2**20]
            intra.sort(key=lambda e: (abs(e.n_gpus - ref.gpus_per_node), -e.n_sizes))
            alpha_1 = intra[0].alpha_s if intra else 0.0
            m, n = ref.n_nodes, n_nodes
            if kind == "all_reduce":
                growth = math.log2(n) / math.log2(m)
                law = "log2(nodes) (tree)"
            else:
                growth = (n - 1) / (m - 1)
                law = "nodes-1 (ring steps)"
            alpha = alpha_1 + max(ref.alpha_s - alpha_1, 0.0) * growth
            if kind == "all_to_all":
                g = ref.gpus_per_node
                nic = ref.busbw_bytes_per_s * (ref.n_gpus - g) / (ref.n_gpus - 1)
                g_t = n_ranks / n_nodes
                busbw = nic * (n_ranks - 1) / (n_ranks - g_t)
                bw_how = "busbw from the per-NIC share B(n-1)/(n-g)"
            else:
                busbw = ref.busbw_bytes_per_s
                bw_how = "busbw kept (ring)"
            base = f" and alpha_1 from {intra[0].source}" if intra else " (no 1-node entry: alpha_1 = 0)"
            how = f"alpha grows with {law}{base}; {bw_how}"
        source = f"predicted {kind} {n_ranks} GPUs/{n_nodes} node(s) from {ref.describe()}: {how}"
        return CollectiveFit(
            kind=kind,
            n_ranks=n_ranks,
            n_nodes=n_nodes,
            alpha_s=alpha,
            peak_busbw_bytes_per_s=busbw,
            factor=factor,
            curve=ref.curve(),
            source=source,
            predicted=True,
            gpu=ref.gpu,
        )


@dataclass(frozen=True)
class CollectiveFit:
    """A calibrated cost of one collective at one scale: what the engine asks the profile.

    `time_s(S) = (alpha_s + S * factor / peak_busbw) / e(S)`, where `factor` is the
    nccl-tests busbw factor of the kind and rank count and `e` the efficiency curve.

    Attributes:
        kind, n_ranks, n_nodes: what was asked.
        alpha_s: latency of the fitted line, seconds.
        peak_busbw_bytes_per_s: bus bandwidth of the fitted line, bytes/s.
        factor: busbw / algbw for this kind and rank count.
        source: which profile entry applied, and how it was scaled (one line of text).
        predicted: True when scaled from another GPU/node count.
        gpu: the GPU the entry's table ran on, if its log said (`CollectiveEntry.gpu`).
    """

    kind: str
    n_ranks: int
    n_nodes: int
    alpha_s: float
    peak_busbw_bytes_per_s: float
    factor: float
    curve: EfficiencyCurve
    source: str
    predicted: bool = False
    gpu: str | None = None

    @classmethod
    def from_entry(cls, e: CollectiveEntry) -> CollectiveFit:
        return cls(
            kind=e.collective,
            n_ranks=e.n_gpus,
            n_nodes=e.n_nodes,
            alpha_s=e.alpha_s,
            peak_busbw_bytes_per_s=e.busbw_bytes_per_s,
            factor=busbw_factor(e.collective, e.n_gpus),
            curve=e.curve(),
            source=f"measured {e.describe()}",
            gpu=e.gpu,
        )

    @property
    def algbw_bytes_per_s(self) -> float:
        """Algorithm bandwidth of the fitted line (`peak busbw / factor`)."""
        return self.peak_busbw_bytes_per_s / self.factor if self.factor > 0 else math.inf

    def time_s(self, size_bytes: float) -> float:
        """Modeled time of one collective of `size_bytes` (nccl-tests size), seconds."""
        return float(self.times_s(np.asarray([size_bytes]))[0])

    def times_s(self, sizes_bytes: np.ndarray) -> np.ndarray:
        """Vectorised `time_s`."""
        s = np.asarray(sizes_bytes, dtype=float)
        return line_time_s(self.alpha_s, self.algbw_bytes_per_s, s) / self.curve(s)

    def busbw_bytes_per_s(self, size_bytes: float) -> float:
        """Effective bus bandwidth at `size_bytes`: S * factor / time_s(S)."""
        if size_bytes <= 0:
            return 0.0
        return size_bytes * self.factor / self.time_s(size_bytes)


def entry_from_fit(fit: TableFit) -> CollectiveEntry:
    """A profile entry from a table fit (values rounded to 6 significant digits)."""
    t = fit.table
    e = fit.errors
    big = e[e["size_bytes"] >= 2**20]
    return CollectiveEntry(
        collective=t.collective,
        scope=t.scope,
        n_gpus=t.n_gpus,
        n_nodes=t.n_nodes,
        alpha_s=_sig(fit.alpha_s),
        busbw_bytes_per_s=_sig(fit.busbw_bytes_per_s),
        efficiency=[
            (_sig(s), _sig(v)) for s, v in zip(fit.curve.sizes_bytes, fit.curve.efficiency, strict=False)
        ],
        min_size_bytes=float(e["size_bytes"].min()),
        max_size_bytes=float(e["size_bytes"].max()),
        source=t.label,
        gpu=t.gpu_name,
        median_abs_error_ge_1mib=_sig(float(big["rel_error"].abs().median()), 4) if len(big) else None,
        max_abs_error=_sig(float(e["rel_error"].abs().max()), 4),
        errors=[(float(s), _sig(float(r), 4)) for s, r in zip(e["size_bytes"], e["rel_error"], strict=False)],
    )


def build_profile(
    name: str,
    fits: Sequence[TableFit],
    *,
    description: str = "",
    compute: ComputeCalibration | None = None,
) -> CalibrationProfile:
    """Assemble a profile from table fits; sources are listed once per file, in order."""
    sources: dict[str, SourceFile] = {}
    for f in fits:
        t = f.table
        if t.source in sources:
            s = sources[t.source]
            sources[t.source] = SourceFile(file=s.file, sha256=s.sha256, tables=s.tables + 1)
        else:
            sources[t.source] = SourceFile(file=t.source, sha256=t.sha256, tables=1)
    return CalibrationProfile(
        name=name,
        description=description,
        sources=list(sources.values()),
        collectives=[entry_from_fit(f) for f in fits],
        compute=compute,
    )


def load_profile(path: str | Path) -> CalibrationProfile:
    """Read and validate a profile YAML file.

    Raises:
        InputError: missing file, bad YAML or a schema violation (file:line: field: message).
    """
    doc = read_document(path)
    check_file_kind(doc, "calibration profile")  # a scenario or topology given in its place
    return validate(CalibrationProfile, doc)
