"""Figure of a calibration: measured against fitted bus bandwidth per message size.

A pure `DataFrame -> plotly Figure` function, so the CLI and dashboards build the same
figure from the same tidy frame (`fit_frame`): one row per file and size with columns
`file`, `size_bytes`, `measured_busbw_bytes_per_s`, `model_busbw_bytes_per_s`,
`rel_error` (model time / measured time - 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from simulator.calibration.fit import TableFit

FRAME_COLUMNS = (
    "file",
    "size_bytes",
    "measured_busbw_bytes_per_s",
    "model_busbw_bytes_per_s",
    "rel_error",
)


def fit_frame(fits: Sequence[TableFit]) -> pd.DataFrame:
    """The tidy frame `calibration_figure` draws, from table fits."""
    parts = []
    for f in fits:
        e = f.errors
        parts.append(
            pd.DataFrame(
                {
                    "file": f.table.label,
                    "size_bytes": e["size_bytes"],
                    "measured_busbw_bytes_per_s": e["measured_busbw_bytes_per_s"],
                    "model_busbw_bytes_per_s": e["model_busbw_bytes_per_s"],
                    "rel_error": e["rel_error"],
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=list(FRAME_COLUMNS))
    return pd.concat(parts, ignore_index=True)


def calibration_figure(frame: pd.DataFrame) -> go.Figure:
    """Measured (markers) and fitted (lines) bus bandwidth in GB/s against message size
    (log x), one colour per file; hover shows the relative time error."""
    missing = set(FRAME_COLUMNS) - set(frame.columns)
    if missing:
        raise ValueError(f"frame lacks columns {sorted(missing)}")
    fig = go.Figure()
    palette = qualitative.Plotly
    for i, (name, g) in enumerate(frame.groupby("file", sort=False)):
        g = g.sort_values("size_bytes")
        color = palette[i % len(palette)]
        fig.add_trace(
            go.Scatter(
                x=g["size_bytes"],
                y=g["measured_busbw_bytes_per_s"] / 1e9,
                mode="markers",
                name=f"{name} (measured)",
                legendgroup=str(name),
                marker={"color": color, "size": 7},
                customdata=g["rel_error"] * 100,
                hovertemplate="%{x:.3s}B: %{y:.1f} GB/s measured<br>model error %{customdata:+.1f}%",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=g["size_bytes"],
                y=g["model_busbw_bytes_per_s"] / 1e9,
                mode="lines",
                name=f"{name} (fit)",
                legendgroup=str(name),
                line={"color": color},
                hovertemplate="%{x:.3s}B: %{y:.1f} GB/s fitted",
            )
        )
    fig.update_layout(
        title="Bus bandwidth: measured (markers) and fitted (lines)",
        xaxis={"type": "log", "title": "message size (bytes)"},
        yaxis={"title": "bus bandwidth (GB/s)", "rangemode": "tozero"},
        legend={"font": {"size": 10}},
        template="plotly_white",
    )
    return fig
