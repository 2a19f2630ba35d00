"""The record of one benchmark result table: its rows in SI units and what the run was.

A `BenchmarkTable` is what reading an nccl-tests / rccl-tests log gives (see
`simulator.calibration.parser`) and what fitting takes (`simulator.calibration.fit`). Its rows
keep both halves of every printed row (out-of-place and in-place) as the log printed them,
converted to seconds and bytes/s; nothing is averaged or dropped here.

Simplified: the per-size view (`BenchmarkTable.sizes`) keeps, by default, the faster of the
two halves of each size, since benchmark noise only ever adds time; checking against a log
scores one named half instead (`half="out_of_place"` or `"in_place"`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

#: columns of `BenchmarkTable.rows`, in order (a header with more per-half columns adds
#: `extra_<name>` columns after these)
ROW_COLUMNS = (
    "size_bytes",
    "count",
    "dtype",
    "redop",
    "root",
    "time_s",
    "algbw_bytes_per_s",
    "busbw_bytes_per_s",
    "wrong",
    "in_place",
    "line",
)

#: which time `BenchmarkTable.sizes` keeps per size
HALVES = ("faster", "out_of_place", "in_place")


@dataclass(frozen=True)
class BenchmarkTable:
    """One result table of an nccl-tests log, with what is known about the run.

    Attributes:
        source: file name (no folders), as recorded in profiles.
        sha256: checksum of the whole file.
        collective: engine kind (`all_reduce`, `all_to_all`, ...).
        n_gpus: ranks taking part.
        n_nodes: hosts taking part.
        rows: one row per table row and half (out-of-place, in-place); columns
            `ROW_COLUMNS`, SI units.
        avg_busbw_bytes_per_s: the log's `# Avg bus bandwidth`, if printed.
        section: heading of the table in files that hold several, else None.
        index: 0-based position of the table in its file.
        first_line: 1-based line of the first data row.
        elided: rows were elided (`...`, `<smaller message sizes truncated>`).
        gpu_name: device name from the `# Rank` lines, if printed.
        notes: how collective, GPU and node counts were found (one sentence each).
        warnings: signs that the table was cut short (see `cut_warnings`), each one line
            `FILE:LINE: message`; the calibrate command prints them.
        max_bytes: the `maxBytes` of the run's `# nThread ...` header line, if printed.
        gpus_per_thread: the `nGpus` of that line, if printed: GPUs each thread of the
            benchmark drives (nccl-tests `-g`; 1 = one GPU per thread, as under `mpirun -np`
            with one rank per GPU). A thread driving several GPUs launches each call on
            them one after another (`CollectiveParams.launch_floor_s`).
    """

    source: str
    sha256: str
    collective: str
    n_gpus: int
    n_nodes: int
    rows: pd.DataFrame
    avg_busbw_bytes_per_s: float | None = None
    section: str | None = None
    index: int = 0
    first_line: int = 0
    elided: bool = False
    gpu_name: str | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    max_bytes: int | None = None
    gpus_per_thread: int | None = None

    @property
    def max_size_bytes(self) -> int:
        """Largest measured message size."""
        return int(self.rows["size_bytes"].max())

    @property
    def label(self) -> str:
        """Short unique name: the file name, plus `#i (section)` for files with several tables."""
        if self.section is None and self.index == 0:
            return self.source
        extra = f" ({self.section})" if self.section else ""
        return f"{self.source}#{self.index + 1}{extra}"

    @property
    def scope(self) -> str:
        """`intra` for one node, `inter` for several."""
        return "intra" if self.n_nodes == 1 else "inter"

    def frame(self) -> pd.DataFrame:
        """The rows plus metadata columns (`source`, `label`, `collective`, `n_gpus`, `n_nodes`).

        The same metadata (and sha256, avg busbw) is also in `DataFrame.attrs`.
        """
        df = self.rows.copy()
        df.insert(0, "source", self.source)
        df.insert(1, "label", self.label)
        df.insert(2, "collective", self.collective)
        df.insert(3, "n_gpus", self.n_gpus)
        df.insert(4, "n_nodes", self.n_nodes)
        df.attrs.update(
            source=self.source,
            sha256=self.sha256,
            collective=self.collective,
            n_gpus=self.n_gpus,
            n_nodes=self.n_nodes,
            avg_busbw_bytes_per_s=self.avg_busbw_bytes_per_s,
            notes=list(self.notes),
        )
        return df

    def sizes(self, half: str = "faster") -> pd.DataFrame:
        """One row per message size: `size_bytes`, `time_s`, `busbw_bytes_per_s` (the log's,
        out-of-place) and `n_rows`.

        Args:
            half: which time to keep per size: `faster` (the smaller of the out-of-place and
                in-place times, what fitting uses; benchmark noise only adds time),
                `out_of_place` or `in_place`.

        Raises:
            ValueError: unknown `half`, or `in_place` on a table that printed no in-place half.
        """
        if half not in HALVES:
            raise ValueError(f"unknown half {half!r}; expected one of {HALVES}")
        rows = self.rows
        if half != "faster":
            rows = rows[rows["in_place"] == (half == "in_place")]
            if rows.empty:
                raise ValueError(f"{self.label} has no {half.replace('_', '-')} times")
        g = rows.groupby("size_bytes", sort=True)
        oop = self.rows[~self.rows["in_place"]].groupby("size_bytes")["busbw_bytes_per_s"].max()
        out = pd.DataFrame(
            {"time_s": g["time_s"].min(), "n_rows": g.size(), "busbw_bytes_per_s": oop}
        ).reset_index()
        return out.dropna(subset=["time_s"]).astype({"n_rows": int})
