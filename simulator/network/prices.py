"""The price and power table: every figure the capex, power and cost-per-token models use.

What is modelled: one editable YAML file (default `topologies/prices.yaml`) in which every
figure is `{value: ..., source: KEY, date: YYYY-MM}`; `source` names an entry of the
file's `sources` list, so every number says where it came from and when. Tables keyed by
port speed (Gbit/s) price switch ports, NICs and cables by reach; tables keyed by GPU model
name (the `name` of the GPU file) price GPUs and the rest of their servers. The `power`
block holds the activity-to-power curves of the energy model and the power-cap curve; the
`facility` block holds PUE, the electricity price and the amortisation lifetime.

What is simplified: a price is a single number (no volume discount, no currency
conversion); curves are piecewise linear between their points.

Bad input (missing or negative figures, a source that is not listed, a date not of the
calendar, a PUE below 1, a curve that is not monotone, a part with no price) is an
`InputError` naming the file, the line and the field.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, PrivateAttr, field_validator

from simulator.config.base import Spec
from simulator.config.loader import Document, Loc, read_document, validate
from simulator.errors import InputError
from simulator.network.hardware import GPUSpec

REACHES = ("dac", "aoc", "optics")
DEFAULT_PRICES = Path(__file__).resolve().parents[2] / "topologies" / "prices.yaml"

SpeedTable = dict[float, float]


def _calendar_date(text: str) -> str:
    """`text` (YYYY-MM or YYYY-MM-DD, by the pattern) if it is a date of the calendar."""
    try:
        datetime.date.fromisoformat(text if len(text) > 7 else f"{text}-01")
    except ValueError:
        raise ValueError(f"not a date of the calendar: {text!r} (YYYY-MM or YYYY-MM-DD)") from None
    return text


#: when a figure was read: a month or a day of the calendar
DateRead = Annotated[
    str,
    Field(pattern=r"^\d{4}-\d{2}(-\d{2})?$", description="When it was read (YYYY-MM)."),
    AfterValidator(_calendar_date),
]


class Source(Spec):
    """Where figures come from."""

    title: str = Field(description="What the source is (document, listing, estimate).")
    url: str | None = Field(None, description="Where to read it, if public.")


class Figure(Spec):
    """One figure of the table, with its source and date."""

    value: float = Field(ge=0, description="The figure, in the unit the table's name gives.")
    source: str = Field(min_length=1, description="Key of the entry in `sources` it comes from.")
    date: DateRead


FigureTable = dict[float, Figure]


class Curve(Spec):
    """A piecewise-linear curve y(x) through `points` [[x, y], ...], x and y non-decreasing."""

    points: list[tuple[float, float]] = Field(min_length=2, description="[[x, y], ...] in increasing x.")
    source: str = Field(min_length=1, description="Key of the entry in `sources` it comes from.")
    date: DateRead

    @field_validator("points")
    @classmethod
    def _monotone(cls, pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
        for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
            if x1 <= x0:
                raise ValueError(f"x must increase strictly: {x0:g} then {x1:g}")
            if y1 < y0:
                raise ValueError(f"curve is not monotone: y falls from {y0:g} to {y1:g} at x = {x1:g}")
        if any(x < 0 or y < 0 for x, y in pts):
            raise ValueError("x and y must be >= 0")
        return pts

    def __call__(self, x: float) -> float:
        """y at x, linear between points, held flat beyond the first and last."""
        pts = self.points
        if x <= pts[0][0]:
            return pts[0][1]
        for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
            if x <= x1:
                return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        return pts[-1][1]


class PowerModel(Spec):
    """How each component's draw follows its activity (fractions of its rated power)."""

    gpu_idle_fraction: Figure = Field(description="GPU draw when idle, fraction of TDP.")
    gpu_comm_fraction: Figure = Field(
        description="GPU draw while only communicating (copy engines, NVLink), fraction of TDP."
    )
    gpu_compute_curve: Curve = Field(
        description="GPU draw while computing, fraction of TDP, against achieved utilisation "
        "(achieved over peak FLOP/s, 0..1)."
    )
    network_static_fraction: Figure = Field(
        description="Share of a NIC's, switch's or transceiver's rated power drawn whatever the "
        "traffic; the rest follows the fraction of time the fabric carries data."
    )
    storage_idle_fraction: Figure = Field(description="Storage server draw when idle, fraction of rated.")

    @field_validator(
        "gpu_idle_fraction", "gpu_comm_fraction", "network_static_fraction", "storage_idle_fraction"
    )
    @classmethod
    def _fraction(cls, v: Figure) -> Figure:
        if v.value > 1:
            raise ValueError(f"a fraction of rated power is at most 1, got {v.value:g}")
        return v

    gpu_power_ramp_s: Figure = Field(
        description="Time over which a GPU's draw changes when the job stops or starts, s "
        "(for the run level's rate of power change)."
    )
    power_cap_curve: Curve = Field(
        description="Achieved compute rate (fraction of uncapped) against the GPU power cap "
        "(fraction of TDP); used by the power-cap what-if."
    )


class Facility(Spec):
    """Data-centre figures: PUE, electricity price, amortisation lifetime."""

    pue: Figure = Field(description="Power usage effectiveness: facility over IT power (>= 1).")
    electricity_usd_per_kwh: Figure = Field(description="Electricity price, USD per kWh.")
    amortization_years: Figure = Field(description="Years over which capex is spread.")

    @field_validator("pue")
    @classmethod
    def _pue(cls, v: Figure) -> Figure:
        if v.value < 1:
            raise ValueError(f"the PUE must be >= 1 (facility power over IT power), got {v.value:g}")
        return v

    @field_validator("amortization_years")
    @classmethod
    def _years(cls, v: Figure) -> Figure:
        if v.value <= 0:
            raise ValueError("amortization_years must be > 0")
        return v


class PriceSpec(Spec):
    """Price and power table (currency units, watts), every figure with source and date."""

    currency: str = Field("USD", description="Currency of every price in the table.")
    sources: dict[str, Source] = Field(description="Every source a figure names, by key.")
    gpu_usd: dict[str, Figure] = Field(description="Price of one GPU, by GPU model name.")
    server_per_gpu_usd: dict[str, Figure] = Field(
        description="Server without GPUs and NICs (CPUs, memory, baseboard, chassis), per GPU slot, "
        "by GPU model name."
    )
    server_per_gpu_power_w: dict[str, Figure] = Field(
        description="Server power without GPUs and NICs, per GPU slot, watts, by GPU model name."
    )
    storage_server_usd: Figure = Field(description="Price of one storage server (without NICs).")
    storage_server_power_w: Figure = Field(description="Rated power of one storage server, watts.")
    switch_port_usd: dict[str, FigureTable] = Field(
        description="Price of one switch port, by medium (ib, ethernet, ...) then speed (Gbit/s)."
    )
    switch_port_power_w: FigureTable = Field(
        description="Switch power per port without optics, watts, by speed (Gbit/s)."
    )
    nic_usd: FigureTable = Field(description="Price of one NIC, by port speed (Gbit/s).")
    nic_power_w: FigureTable = Field(description="Power of one NIC, watts, by speed (Gbit/s).")
    cable_usd: dict[str, FigureTable] = Field(
        description="Price of one cable with both ends, by reach (dac, aoc, optics) then speed."
    )
    cable_power_w: dict[str, FigureTable] = Field(
        description="Power of one cable's two ends, watts, by reach (dac, aoc, optics) then speed."
    )
    power: PowerModel = Field(description="Activity-to-power curves and the power-cap curve.")
    facility: Facility = Field(description="PUE, electricity price, amortisation lifetime.")
    _doc: Document | None = PrivateAttr(None)

    @field_validator("cable_usd", "cable_power_w")
    @classmethod
    def _reaches(cls, v: dict[str, FigureTable]) -> dict[str, FigureTable]:
        missing = [r for r in REACHES if r not in v]
        if missing:
            raise ValueError(f"lacks reach class(es) {missing}")
        return v

    def error(self, message: str, loc: Loc) -> InputError:
        """An input error at `loc` of the file this table was read from (if any)."""
        if self._doc is not None:
            return self._doc.error(message, loc)
        return InputError(message, field=".".join(str(p) for p in loc))

    def by_gpu(self, table: str, gpu_name: str) -> float:
        """A per-GPU-model figure (`gpu_usd`, `server_per_gpu_usd`, ...).

        Raises:
            InputError: the table has no entry for this GPU model (names the table's line).
        """
        entries: dict[str, Figure] = getattr(self, table)
        if gpu_name not in entries:
            raise self.error(
                f"no price for GPU {gpu_name!r}; add it as {gpu_name!r}: "
                "{value: ..., source: ..., date: YYYY-MM}",
                (table,),
            )
        return entries[gpu_name].value

    def speed_table(self, *path: str) -> SpeedTable:
        """A speed table (`nic_usd`, or `switch_port_usd`, `ib`) as {Gbit/s: value}."""
        table: Any = self
        for p in path:
            table = getattr(table, p) if isinstance(table, Spec) else table[p]
        return {float(k): f.value for k, f in table.items()}


def _figure_locs(data: Any, loc: Loc = ()) -> list[tuple[Loc, str]]:
    """(location, source key) of every figure or curve in the raw file data."""
    out: list[tuple[Loc, str]] = []
    if isinstance(data, dict):
        if "source" in data and ("value" in data or "points" in data):
            return [(loc, str(data["source"]))]
        for k, v in data.items():
            if k != "sources":
                out.extend(_figure_locs(v, (*loc, k)))
    return out


def _check_tables(spec: PriceSpec, doc: Document) -> None:
    """Cross-field checks with file lines: known sources, non-empty speed tables."""
    for loc, key in _figure_locs(doc.data):
        if key not in spec.sources:
            raise doc.error(f"source {key!r} is not listed under `sources`", (*loc, "source"))
    tables: list[tuple[Loc, dict[float, Figure]]] = [
        (("switch_port_power_w",), spec.switch_port_power_w),
        (("nic_usd",), spec.nic_usd),
        (("nic_power_w",), spec.nic_power_w),
    ]
    for name in ("switch_port_usd", "cable_usd", "cable_power_w"):
        tables += [((name, k), v) for k, v in getattr(spec, name).items()]
    for loc, t in tables:
        if not t:
            raise doc.error("empty table; give at least one speed", loc)
        bad = [s for s in t if s <= 0]
        if bad:
            raise doc.error(f"speeds must be > 0 Gbit/s, got {bad[0]:g}", loc)


def load_prices(path: str | Path | None = None) -> PriceSpec:
    """Load a price table (default: `topologies/prices.yaml` of this checkout).

    A file already read and unchanged since (same size and modification time) is not
    parsed again; the table is immutable, so sharing it is safe.

    Raises:
        InputError: any bad figure, with file, line and field.
    """
    p = Path(path or DEFAULT_PRICES)
    try:
        st = p.stat()
        key: tuple[str, int, int] | None = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    except OSError:
        key = None  # read_document reports the missing file
    if key is not None and key in _LOADED:
        return _LOADED[key]
    doc = read_document(p)
    spec: PriceSpec = validate(PriceSpec, doc)
    _check_tables(spec, doc)
    spec._doc = doc
    if key is not None:
        _LOADED.clear()  # keep one table: the last one read
        _LOADED[key] = spec
    return spec


_LOADED: dict[tuple[str, int, int], PriceSpec] = {}


def with_amortization(prices: PriceSpec, years: float) -> PriceSpec:
    """The table with capex spread over `years` instead of its facility's figure (a compare
    file's `cost.amortization_years`); the figure's source says where the value came from."""
    fac = prices.facility
    fig = fac.amortization_years.model_copy(
        update={"value": float(years), "source": "cost.amortization_years"}
    )
    return prices.model_copy(update={"facility": fac.model_copy(update={"amortization_years": fig})})


def lookup(table: SpeedTable, gbps: float) -> float:
    """Value for a speed: the next listed speed up, or the fastest scaled linearly."""
    speeds = sorted(table)
    for s in speeds:
        if s >= gbps - 1e-9:
            return table[s]
    top = speeds[-1]
    return table[top] * gbps / top


def power_capped_gpu(gpu: GPUSpec, cap_fraction: float, prices: PriceSpec | None = None) -> GPUSpec:
    """The GPU as a power cap leaves it: peak FLOP/s times `power_cap_curve(cap_fraction)`.

    A cap lowers the core clock, so compute-bound ops slow down along the table's curve;
    HBM bandwidth (memory-bound ops) is left as is. `cap_fraction` >= 1 returns `gpu`.

    Args:
        gpu: the uncapped GPU model.
        cap_fraction: the per-GPU power limit as a fraction of `tdp_w`.
        prices: the table holding the curve (default: `topologies/prices.yaml`).
    """
    if cap_fraction >= 1.0:
        return gpu
    rate = (prices or load_prices()).power.power_cap_curve(cap_fraction)
    peaks = {k: v * rate for k, v in gpu.peak_flops_per_s.items()}
    return gpu.model_copy(update={"peak_flops_per_s": peaks})
